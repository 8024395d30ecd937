//! A fault-injecting TCP proxy for cluster tests: [`FaultProxy`] listens on a loopback port,
//! forwards every connection to a target port, and applies [`Rule`]s set at run time: drop the
//! connections, delay the bytes of one or both directions, or blackhole one direction.
//!
//! # Why the proxy knows who dialed
//!
//! Cluster members reach each other at the peer URLs in `--initial-cluster`, which must be the
//! same on every member (member IDs are hashed from them), so a test can put one proxy in front
//! of each member's peer listener and no more: member X reaches Y through Y's proxy, and Y
//! reaches X through X's. Every byte between X and Y therefore crosses exactly one proxy, on a
//! connection one of them dialed: X's proxy carries the connections Y dialed, Y's proxy the ones
//! X dialed, and each connection carries bytes both ways (Ballast's raft connection carries frames from
//! the dialer to the listener; etcd's stream GET returns the listener's
//! messages to the dialer, its pipeline POSTs go the other way). Dropping X's proxy alone cuts
//! only the connections others dialed to X; X's own connections to the others would still
//! pass. To cut those, Y's proxy must tell X's connections from Z's, and a member cannot be
//! told which source address to dial from, so the port is no clue.
//!
//! The proxy asks the kernel instead: for an accepted connection from `127.0.0.1:p`, the
//! dialer's socket is the line of `/proc/net/tcp` whose local address is `127.0.0.1:p` and whose
//! remote address is the proxy's; its inode names the socket, and the process holding it is the
//! [`Dialers`] entry whose `/proc/<pid>/fd` links to `socket:[inode]`. Rules are then set per
//! dialer name (the member names), with a default for everyone else. This needs no root, no
//! network namespace and nothing from the members, and it makes a per-link fault exact:
//!
//! * isolating X (X's proxy drops everything, every other proxy drops X's connections) cuts
//!   every connection that has X at either end, in both directions;
//! * one-way loss from A to B blackholes, on B's proxy, what A's connections send towards B,
//!   and on A's proxy, what B's connections receive from A, so nothing A sends reaches B
//!   while everything B sends reaches A;
//! * a delay on the link A–B is applied on both proxies the same way, each byte once.
//!
//! # What each fault does to the bytes
//!
//! * [`Rule::DROP`]: open connections are closed when the rule is set (the dialer sees them
//!   end, as after a reset). New ones are accepted and held in silence: whatever the dialer
//!   sends is thrown away, nothing comes back, no upstream connection is made, and the proxy
//!   closes them when the drop is lifted. Closing new connections at once would make the
//!   dialers redial in a loop (etcd redials its streams every 100 ms), and every accepted
//!   connection costs a scan of `/proc/net/tcp` to name its dialer (milliseconds on a busy
//!   machine); silence is also what a partitioned network gives. Nothing of either direction
//!   passes.
//! * [`Flow::Delay`]: each chunk read is written out `d` after it was read, in order; the delay
//!   is the one in force when the chunk was read.
//! * [`Flow::Blackhole`]: the chunks are read (so the sender's TCP sees them taken) and thrown
//!   away; the connection stays open and the other direction is unaffected. Once bytes were
//!   thrown away the stream is cut mid-frame, so when the blackhole is lifted the proxy closes
//!   that connection rather than pass a torn stream on; the dialer reconnects (TCP would have
//!   retransmitted; a stream that lost bytes for good is a dead connection either way).
//!
//! A connection whose dialer cannot be named (not a registered process) gets the default rule.
//! [`FaultProxy::open_from`] counts forwarding connections by dialer (held ones are not), so a
//! test can assert a cut is real rather than trust it.
//!
//! Linux only (`/proc`); loopback IPv4 only.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// What happens to the bytes of one direction of a connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Flow {
    #[default]
    Pass,
    /// Each chunk is written this long after it was read.
    Delay(Duration),
    /// Chunks are read and thrown away.
    Blackhole,
}

/// What the proxy does with one dialer's connections.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Rule {
    /// Closes the connections (new and open).
    pub(crate) drop: bool,
    /// Bytes from the dialer towards the proxied target.
    pub(crate) to_target: Flow,
    /// Bytes from the target back to the dialer.
    pub(crate) to_dialer: Flow,
}

impl Rule {
    pub(crate) const PASS: Rule = Rule { drop: false, to_target: Flow::Pass, to_dialer: Flow::Pass };
    pub(crate) const DROP: Rule = Rule { drop: true, to_target: Flow::Pass, to_dialer: Flow::Pass };
}

/// Every rule of one proxy: one per named dialer, and the default for the rest.
#[derive(Clone, Debug, Default)]
struct Rules {
    default: Rule,
    by_dialer: HashMap<String, Rule>,
}

impl Rules {
    /// Returns the rule for a connection from `dialer`: its own, else the default; a default
    /// that drops drops everyone (isolating the proxy's member wins over any link rule).
    fn for_dialer(&self, dialer: Option<&str>) -> Rule {
        let own = dialer.and_then(|d| self.by_dialer.get(d)).copied().unwrap_or(self.default);
        Rule { drop: own.drop || self.default.drop, ..own }
    }
}

/// The processes whose connections rules can name, by process ID; shared by all proxies of a
/// test, filled as the processes start (a connection made before its process was registered
/// is named later, when a rule changes).
#[derive(Clone, Debug, Default)]
pub(crate) struct Dialers(Arc<Mutex<HashMap<u32, String>>>);

impl Dialers {
    /// Names the process `pid`.
    pub(crate) fn register(&self, pid: u32, name: &str) {
        self.0.lock().expect("dialers lock").insert(pid, name.to_string());
    }

    /// Returns the name of the registered process holding the socket connected from `dialer`
    /// to `proxy`, if any.
    fn name_of(&self, dialer: SocketAddr, proxy: SocketAddr) -> Option<String> {
        let inode = socket_inode(dialer, proxy)?;
        let want = format!("socket:[{inode}]");
        let known: Vec<(u32, String)> =
            self.0.lock().expect("dialers lock").iter().map(|(p, n)| (*p, n.clone())).collect();
        known.into_iter().find(|(pid, _)| holds(*pid, &want)).map(|(_, name)| name)
    }
}

/// Returns the inode of the TCP socket whose local address is `local` and whose peer is
/// `remote`, from `/proc/net/tcp` (or `tcp6`, for a dual-stack socket with a v4-mapped address).
fn socket_inode(local: SocketAddr, remote: SocketAddr) -> Option<u64> {
    let (IpAddr::V4(l), IpAddr::V4(r)) = (local.ip(), remote.ip()) else { return None };
    for (file, mapped) in [("/proc/net/tcp", false), ("/proc/net/tcp6", true)] {
        let (want_local, want_remote) = (proc_addr(l, local.port(), mapped), proc_addr(r, remote.port(), mapped));
        let Ok(table) = std::fs::read_to_string(file) else { continue };
        for line in table.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() > 9 && f[1] == want_local && f[2] == want_remote {
                return f[9].parse().ok();
            }
        }
    }
    None
}

/// Formats an address as `/proc/net/tcp{,6}` prints it: each 32-bit word of the address in the
/// host's byte order (x86 is little-endian), then the port, all in upper-case hex.
fn proc_addr(ip: Ipv4Addr, port: u16, mapped: bool) -> String {
    let octets: Vec<u8> = if mapped { ip.to_ipv6_mapped().octets().to_vec() } else { ip.octets().to_vec() };
    let words: String =
        octets.chunks(4).map(|w| format!("{:08X}", u32::from_le_bytes([w[0], w[1], w[2], w[3]]))).collect();
    format!("{words}:{port:04X}")
}

/// Returns whether process `pid` has a file descriptor linking to `want` (`socket:[inode]`).
fn holds(pid: u32, want: &str) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return false };
    fds.flatten().any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == want))
}

/// Forwarding connections by dialer name (None: not named), keyed by a connection number.
#[derive(Debug, Default)]
struct Open(Mutex<HashMap<u64, Option<String>>>);

/// A running proxy; stops, closing its connections, when dropped.
#[derive(Debug)]
pub(crate) struct FaultProxy {
    port: u16,
    rules: watch::Sender<Rules>,
    open: Arc<Open>,
    accept: tokio::task::JoinHandle<()>,
}

impl FaultProxy {
    /// Starts a proxy on a free loopback port forwarding to `127.0.0.1:<target_port>`, naming
    /// dialers from `dialers`; every rule starts as [`Rule::PASS`].
    pub(crate) async fn start(target_port: u16, dialers: Dialers) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind a loopback port");
        let port = listener.local_addr().expect("local addr").port();
        let (rules, _) = watch::channel(Rules::default());
        let open = Arc::new(Open::default());
        let accept = tokio::spawn(accept_loop(listener, target_port, rules.subscribe(), dialers, Arc::clone(&open)));
        FaultProxy { port, rules, open, accept }
    }

    /// Returns the port the proxy listens on.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// Sets the rule for connections from `dialer`, or the default rule when None.
    pub(crate) fn set(&self, dialer: Option<&str>, rule: Rule) {
        self.update(dialer, |r| *r = rule);
    }

    /// Changes the rule for connections from `dialer` (the default when None) in place, so a
    /// fault can be added to one direction while the other keeps its own.
    pub(crate) fn update(&self, dialer: Option<&str>, change: impl FnOnce(&mut Rule)) {
        self.rules.send_modify(|rules| match dialer {
            None => change(&mut rules.default),
            Some(d) => {
                let fallback = rules.default;
                change(rules.by_dialer.entry(d.to_string()).or_insert(fallback));
            }
        });
    }

    /// Lifts every fault.
    pub(crate) fn heal(&self) {
        self.rules.send_replace(Rules::default());
    }

    /// Returns how many connections from `dialer` (unnamed ones when None) are forwarding.
    pub(crate) fn open_from(&self, dialer: Option<&str>) -> usize {
        self.open.0.lock().expect("open lock").values().filter(|d| d.as_deref() == dialer).count()
    }

    /// Returns how many connections are forwarding, whoever dialed them.
    pub(crate) fn open_total(&self) -> usize {
        self.open.0.lock().expect("open lock").len()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        // The accept task owns the connections' tasks (a JoinSet), so aborting it closes them.
        self.accept.abort();
    }
}

async fn accept_loop(
    listener: TcpListener,
    target: u16,
    rules: watch::Receiver<Rules>,
    dialers: Dialers,
    open: Arc<Open>,
) {
    let proxy_addr = listener.local_addr().expect("local addr");
    let mut conns = tokio::task::JoinSet::new();
    let next = AtomicU64::new(0);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((conn, from)) = accepted else { continue };
                let id = next.fetch_add(1, Ordering::Relaxed);
                let track = Tracked { id, open: Arc::clone(&open) };
                let (rules, dialers) = (rules.clone(), dialers.clone());
                conns.spawn(async move { serve(conn, from, proxy_addr, target, rules, dialers, track).await });
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

/// A connection's entry in [`Open`] once it forwards, removed when the connection's task ends.
struct Tracked {
    id: u64,
    open: Arc<Open>,
}

impl Tracked {
    fn record(&self, dialer: &Option<String>) {
        self.open.0.lock().expect("open lock").insert(self.id, dialer.clone());
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.open.0.lock().expect("open lock").remove(&self.id);
    }
}

/// Proxies one connection until both directions end, an error, or a rule closes it.
async fn serve(
    mut conn: TcpStream,
    from: SocketAddr,
    proxy_addr: SocketAddr,
    target: u16,
    mut rules: watch::Receiver<Rules>,
    dialers: Dialers,
    track: Tracked,
) {
    // A proxy whose default drops holds every new connection whoever dialed it: no need to ask.
    let mut dialer = if rules.borrow().default.drop { None } else { name_of(&dialers, from, proxy_addr).await };
    let mut rule = rules.borrow_and_update().for_dialer(dialer.as_deref());
    if rule.drop {
        hold(&mut conn, &mut rules, dialer.as_deref()).await;
        return;
    }
    track.record(&dialer);
    let Ok(upstream) = TcpStream::connect((Ipv4Addr::LOCALHOST, target)).await else { return };
    let _ = (conn.set_nodelay(true), upstream.set_nodelay(true));
    let (from_dialer, to_dialer) = conn.into_split();
    let (from_target, to_target) = upstream.into_split();
    let (rule_tx, rule_rx) = watch::channel(rule);
    let (lost_up, lost_down) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let up = pump(from_dialer, to_target, rule_rx.clone(), |r| r.to_target, Arc::clone(&lost_up));
    let down = pump(from_target, to_dialer, rule_rx, |r| r.to_dialer, Arc::clone(&lost_down));
    tokio::pin!(up, down);
    let (mut up_done, mut down_done) = (false, false);
    loop {
        tokio::select! {
            ended = &mut up, if !up_done => { if ended.is_err() { return } up_done = true }
            ended = &mut down, if !down_done => { if ended.is_err() { return } down_done = true }
            changed = rules.changed() => if changed.is_err() { return },
        }
        if up_done && down_done {
            return;
        }
        if dialer.is_none() {
            dialer = name_of(&dialers, from, proxy_addr).await;
            track.record(&dialer);
        }
        let new = rules.borrow_and_update().for_dialer(dialer.as_deref());
        let torn = |was: Flow, now: Flow, lost: &AtomicBool| {
            was == Flow::Blackhole && now != Flow::Blackhole && lost.load(Ordering::SeqCst)
        };
        if new.drop || torn(rule.to_target, new.to_target, &lost_up) || torn(rule.to_dialer, new.to_dialer, &lost_down)
        {
            return;
        }
        rule = new;
        rule_tx.send_replace(rule);
    }
}

/// Names the dialer of a connection on a blocking thread: reading `/proc` takes milliseconds,
/// and the proxy's connections share the test's runtime.
async fn name_of(dialers: &Dialers, from: SocketAddr, proxy_addr: SocketAddr) -> Option<String> {
    let dialers = dialers.clone();
    tokio::task::spawn_blocking(move || dialers.name_of(from, proxy_addr)).await.ok().flatten()
}

/// Holds a connection that arrived while its rule drops: reads and throws away what the dialer
/// sends, sends nothing, and returns (so the connection is closed) once the rule no longer
/// drops it, or the dialer goes away. It is never forwarded: the dialer has sent bytes into
/// the void, so its stream cannot be resumed.
async fn hold(conn: &mut TcpStream, rules: &mut watch::Receiver<Rules>, dialer: Option<&str>) {
    let mut buf = vec![0u8; 16 << 10];
    loop {
        tokio::select! {
            read = conn.read(&mut buf) => if !matches!(read, Ok(n) if n > 0) { return },
            changed = rules.changed() => {
                if changed.is_err() || !rules.borrow_and_update().for_dialer(dialer).drop {
                    return;
                }
            }
        }
    }
}

/// Copies one direction, applying the flow `flow(rule)` of the rule in force when each chunk is
/// read; sets `lost` when it throws bytes away. Ends with Ok at end of stream (after shutting
/// the writer, so a half-close passes on), Err on an I/O error.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    rule: watch::Receiver<Rule>,
    flow: fn(&Rule) -> Flow,
    lost: Arc<AtomicBool>,
) -> std::io::Result<()> {
    // 256 chunks in flight bound what a delayed direction buffers (4 MiB at 16 KiB a chunk).
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(256);
    let read = async move {
        let mut buf = vec![0u8; 16 << 10];
        loop {
            let n = from.read(&mut buf).await?;
            if n == 0 {
                return Ok(());
            }
            let due = match flow(&rule.borrow()) {
                Flow::Pass => Instant::now(),
                Flow::Delay(d) => Instant::now() + d,
                Flow::Blackhole => {
                    lost.store(true, Ordering::SeqCst);
                    continue;
                }
            };
            if tx.send((due, buf[..n].to_vec())).await.is_err() {
                return Ok(());
            }
        }
    };
    let write = async move {
        while let Some((due, chunk)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            to.write_all(&chunk).await?;
        }
        to.shutdown().await
    };
    // try_join: a failed write ends the direction at once, without waiting for the next read.
    tokio::try_join!(read, write).map(|_| ())
}
