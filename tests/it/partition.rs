//! Network faults between the members of three-member clusters, Ballast's and stock etcd's,
//! under the same tests: the leader isolated, one-way loss from the leader to a follower with
//! latency on another link, and a follower isolated during writes.
//!
//! Every member's peer listener sits behind its own [`FaultProxy`], and the peer URLs the
//! members advertise (`--initial-cluster`, `--initial-advertise-peer-urls`) are the proxies',
//! so every byte between two members crosses one proxy; the proxies name each connection's
//! dialer, which makes a fault on one link exact (see `fault_proxy`'s module doc). Client ports
//! are not proxied: the tests always reach every member.
//!
//! Each test checks what etcd promises: every acknowledged write is on every member with the
//! revision it was acknowledged with once the network heals, the members' HashKV agree, and a
//! write that could not reach a quorum is on no member.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::GetOptions;

use crate::cluster_harness::put_any;
use crate::fault_proxy::{Dialers, FaultProxy, Flow, Rule};
use crate::harness::{free_port, wait_for};

/// Which servers the members are. (Not the harness's `Target`: these tests start their own
/// members, so they need only the two kinds and none of the harness's single-server variants.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    Ballast,
    Etcd,
}

/// Acknowledged writes: key to (value, revision).
type Acked = BTreeMap<String, (String, i64)>;

/// Defines `<name>::ballast` and `<name>::etcd`, each running `async fn <name>(ProxiedCluster)`
/// on a fresh 3-member cluster behind proxies.
macro_rules! proxied_clusters {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn ballast() {
                super::$name(super::ProxiedCluster::start(super::Target::Ballast).await).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn etcd() {
                super::$name(super::ProxiedCluster::start(super::Target::Etcd).await).await
            }
        }
    )*};
}

proxied_clusters!(
    an_isolated_leader_is_replaced_and_catches_up,
    one_way_loss_and_latency_keep_writes_going,
    an_isolated_follower_catches_up,
);

/// A member process whose peer listener is reached only through its proxy; killed when dropped.
pub(crate) struct Member {
    name: String,
    dir: tempfile::TempDir,
    client_port: u16,
    proxy: FaultProxy,
    child: Option<Child>,
}

impl Member {
    fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    fn log_tail(&self) -> String {
        crate::harness::tail_without_backtrace(&std::fs::read_to_string(self.log_path()).unwrap_or_default(), 40)
    }

    /// Starts the process with `extra` flags: it listens for peers on `listen_peer` and
    /// advertises its proxy.
    fn spawn(&mut self, target: Target, listen_peer: u16, initial_cluster: &str, extra: &[&str]) {
        let client = format!("http://127.0.0.1:{}", self.client_port);
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.log_path()).expect("log file");
        let mut cmd = match target {
            Target::Ballast => {
                let mut c = Command::new(env!("CARGO_BIN_EXE_ballast"));
                c.arg("engine");
                c
            }
            Target::Etcd => Command::new("etcd"),
        };
        cmd.args(["--name", &self.name])
            .arg(format!("--data-dir={}", self.dir.path().join("data").display()))
            .arg(format!("--initial-cluster={initial_cluster}"))
            .arg(format!("--listen-client-urls={client}"))
            .arg(format!("--advertise-client-urls={client}"))
            .arg(format!("--listen-peer-urls=http://127.0.0.1:{listen_peer}"))
            .arg(format!("--initial-advertise-peer-urls=http://127.0.0.1:{}", self.proxy.port()))
            .args(extra)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log);
        self.child = Some(cmd.spawn().expect("spawn member"));
    }

    /// Sends `signal` to the process (kill(1): the workspace forbids unsafe code).
    pub(crate) fn signal(&self, signal: i32) {
        let status = Command::new("kill").arg(format!("-{signal}")).arg(self.pid().to_string()).status();
        assert!(status.is_ok_and(|s| s.success()), "kill -{signal} of member {}", self.name);
    }

    /// Returns the shards of `shards` this member leads, as its `/metrics` says.
    pub(crate) fn led_shards(&self, shards: u32) -> Vec<u32> {
        crate::cluster_harness::shards_led(&format!("http://{}", self.endpoint()), shards)
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().expect("started").id()
    }

    /// Returns a client of this member alone, or None when it does not connect within 2 s.
    pub(crate) async fn client(&self) -> Option<etcd_client::Client> {
        let connect = etcd_client::Client::connect([self.endpoint()], None);
        tokio::time::timeout(Duration::from_secs(2), connect).await.ok()?.ok()
    }

    /// Returns (member ID, leader ID) from Status, or None when it does not answer within 2 s.
    async fn status(&self) -> Option<(u64, u64)> {
        let mut c = self.client().await?;
        let st = tokio::time::timeout(Duration::from_secs(2), c.status()).await.ok()?.ok()?;
        Some((st.header()?.member_id(), st.leader()))
    }

    /// Returns the revision of this member's own state (a serializable read).
    async fn local_revision(&self) -> Option<i64> {
        let mut c = self.client().await?;
        let get = c.get("\0", Some(GetOptions::new().with_serializable()));
        let r = tokio::time::timeout(Duration::from_secs(2), get).await.ok()?.ok()?;
        Some(r.header()?.revision())
    }

    /// Reads `key` from this member's own state, answering (value, mod revision).
    pub(crate) async fn local_get(&self, key: &str) -> Option<(String, i64)> {
        let mut c = self.client().await.expect("connect");
        let r = c.get(key, Some(GetOptions::new().with_serializable())).await.expect("get");
        r.kvs().first().map(|kv| (kv.value_str().expect("utf-8").to_string(), kv.mod_revision()))
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        // A failing test drops its members while unwinding; their logs go with their directories.
        if std::thread::panicking() {
            eprintln!("member {} log, last lines:\n{}", self.name, self.log_tail());
        }
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Three members, each behind its proxy, owned by one test.
pub(crate) struct ProxiedCluster {
    target: Target,
    pub(crate) members: Vec<Member>,
    /// Member IDs by index.
    ids: Vec<u64>,
}

impl ProxiedCluster {
    /// Starts three members at once, waits until each answers and one leads, and checks that
    /// every proxy names the dialer of every peer connection (isolation depends on it).
    async fn start(target: Target) -> ProxiedCluster {
        Self::start_with(target, &[]).await
    }

    /// [`ProxiedCluster::start`] with `extra` flags for every member.
    pub(crate) async fn start_with(target: Target, extra: &[&str]) -> ProxiedCluster {
        let dialers = Dialers::default();
        let mut members = Vec::new();
        let mut listen = Vec::new();
        for i in 1..=3 {
            let peer = free_port();
            let proxy = FaultProxy::start(peer, dialers.clone()).await;
            let dir = tempfile::tempdir().expect("tempdir");
            members.push(Member { name: format!("m{i}"), dir, client_port: free_port(), proxy, child: None });
            listen.push(peer);
        }
        let ic = members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.proxy.port()))
            .collect::<Vec<_>>()
            .join(",");
        for (m, peer) in members.iter_mut().zip(listen) {
            m.spawn(target, peer, &ic, extra);
            dialers.register(m.pid(), &m.name);
        }
        for m in &members {
            let up = wait_for(Duration::from_secs(20), async || m.status().await.is_some()).await;
            assert!(up, "{target:?} member {} did not start; log:\n{}", m.name, m.log_tail());
        }
        let mut ids = Vec::new();
        for m in &members {
            ids.push(m.status().await.expect("status").0);
        }
        let c = ProxiedCluster { target, members, ids };
        c.leader(&[0, 1, 2]).await;
        // A connection accepted before its dialer was registered is named on the next rule
        // change; this is one.
        for m in &c.members {
            m.proxy.heal();
        }
        let named = wait_for(Duration::from_secs(10), async || {
            c.members.iter().all(|to| {
                to.proxy.open_from(None) == 0
                    && c.members
                        .iter()
                        .filter(|from| from.name != to.name)
                        .all(|from| to.proxy.open_from(Some(&from.name)) > 0)
            })
        })
        .await;
        assert!(named, "{target:?}: every member dials every peer through its proxy; named: {}", c.connections());
        c
    }

    /// Describes the forwarding connections at each proxy by dialer, for failure messages.
    fn connections(&self) -> String {
        let at = |to: &Member| {
            let from: Vec<String> =
                self.members.iter().map(|f| format!("{}:{}", f.name, to.proxy.open_from(Some(&f.name)))).collect();
            format!("{} <- [{} unnamed:{}]", to.name, from.join(" "), to.proxy.open_from(None))
        };
        self.members.iter().map(at).collect::<Vec<_>>().join(", ")
    }

    fn endpoints(&self, which: &[usize]) -> Vec<String> {
        which.iter().map(|i| self.members[*i].endpoint()).collect()
    }

    /// Returns the index of the member that every member of `among` names as leader, waiting up
    /// to 15 s for them to agree on one of themselves.
    async fn leader(&self, among: &[usize]) -> usize {
        let mut found = None;
        let agreed = wait_for(Duration::from_secs(15), async || {
            let mut leaders = Vec::new();
            for i in among {
                let Some((_, leader)) = self.members[*i].status().await else { return false };
                leaders.push(leader);
            }
            let first = leaders[0];
            found = among.iter().copied().find(|i| self.ids[*i] == first);
            found.is_some() && leaders.iter().all(|l| *l == first)
        })
        .await;
        assert!(agreed, "{:?}: members {among:?} did not agree on a leader among themselves", self.target);
        found.expect("a leader")
    }

    /// Cuts member `x` off: its proxy drops every connection, and every other proxy drops the
    /// connections `x` dials. Returns once no connection with `x` at either end forwards.
    async fn isolate(&self, x: usize) {
        let name = self.members[x].name.clone();
        self.members[x].proxy.set(None, Rule::DROP);
        for (i, m) in self.members.iter().enumerate() {
            if i != x {
                m.proxy.set(Some(&name), Rule::DROP);
            }
        }
        let cut = wait_for(Duration::from_secs(10), async || {
            self.members.iter().enumerate().all(|(i, m)| {
                m.proxy.open_from(None) == 0
                    && if i == x { m.proxy.open_total() == 0 } else { m.proxy.open_from(Some(&name)) == 0 }
            })
        })
        .await;
        assert!(cut, "{:?}: connections with {name} stayed open: {}", self.target, self.connections());
    }

    /// Throws away every byte `from` sends to `to`; what `to` sends to `from` passes.
    fn one_way_loss(&self, from: usize, to: usize) {
        let (f, t) = (&self.members[from], &self.members[to]);
        // What `from` writes on the connections it dialed to `to`...
        t.proxy.update(Some(&f.name), |r| r.to_target = Flow::Blackhole);
        // ...and what it answers on the connections `to` dialed to it.
        f.proxy.update(Some(&t.name), |r| r.to_dialer = Flow::Blackhole);
    }

    /// Throws away every byte between `a` and `b`, both ways, on connections that stay open
    /// (no member sees a connection end, as it would under [`Rule::DROP`]).
    pub(crate) fn blackhole_between(&self, a: usize, b: usize) {
        for (at, dialer) in [(a, b), (b, a)] {
            let name = &self.members[dialer].name;
            self.members[at].proxy.update(Some(name), |r| {
                r.to_target = Flow::Blackhole;
                r.to_dialer = Flow::Blackhole;
            });
        }
    }

    /// Delays by `d` every byte `from` sends to `to`; what `to` sends to `from` passes at once.
    pub(crate) fn one_way_delay(&self, from: usize, to: usize, d: Duration) {
        let (f, t) = (&self.members[from], &self.members[to]);
        t.proxy.update(Some(&f.name), |r| r.to_target = Flow::Delay(d));
        f.proxy.update(Some(&t.name), |r| r.to_dialer = Flow::Delay(d));
    }

    /// Adds `d` to each direction of the link between `a` and `b`.
    fn delay_link(&self, a: usize, b: usize, d: Duration) {
        for (x, y) in [(a, b), (b, a)] {
            let (dialer, listener) = (&self.members[x], &self.members[y]);
            listener.proxy.update(Some(&dialer.name), |r| {
                r.to_target = Flow::Delay(d);
                r.to_dialer = Flow::Delay(d);
            });
        }
    }

    /// Lifts every fault.
    pub(crate) fn heal(&self) {
        for m in &self.members {
            m.proxy.heal();
        }
    }

    /// Checks, once every member has caught up, that every acknowledged write is on every member
    /// with its acknowledged revision, that no key of `absent` is on any, and that the members'
    /// HashKV agree.
    async fn check_converged(&self, acked: &Acked, absent: &[&str]) {
        let top = acked.values().map(|(_, r)| *r).max().expect("some acknowledged writes");
        for m in &self.members {
            // 30 s: after healing, etcd's rejoining member (its term raised by the elections it
            // started alone) forces one more election first.
            let ok =
                wait_for(Duration::from_secs(30), async || m.local_revision().await.is_some_and(|r| r >= top)).await;
            let (rev, status) = (m.local_revision().await, m.status().await);
            assert!(
                ok,
                "{:?} member {} at revision {rev:?} ((id, leader): {status:?}) did not reach {top}",
                self.target, m.name
            );
        }
        for m in &self.members {
            for (key, (value, rev)) in acked {
                let got = m.local_get(key).await;
                assert_eq!(
                    got,
                    Some((value.clone(), *rev)),
                    "{:?} member {}: acknowledged write {key}={value}@{rev}",
                    self.target,
                    m.name
                );
            }
            for key in absent {
                let got = m.local_get(key).await;
                assert_eq!(got, None, "{:?} member {} has {key}, which was never acknowledged", self.target, m.name);
            }
        }
        let mut hashes = Vec::new();
        for m in &self.members {
            let r = m.client().await.expect("connect").hash_kv(top).await.expect("hashkv");
            hashes.push(r.hash());
        }
        assert!(hashes.windows(2).all(|w| w[0] == w[1]), "{:?}: HashKV at {top} differs: {hashes:?}", self.target);
    }
}

/// Writes `n` keys under `prefix` one after another through `endpoints`, asserting each is
/// acknowledged within 20 s (an election on a loaded machine takes a few); records them in `acked` and returns each write's latency.
async fn must_write(target: Target, endpoints: &[String], prefix: &str, n: usize, acked: &mut Acked) -> Vec<Duration> {
    let mut latencies = Vec::new();
    for i in 0..n {
        let (key, value) = (format!("{prefix}{i:03}"), format!("v{i}"));
        let started = Instant::now();
        let rev = put_any(endpoints, i, &key, &value, Duration::from_secs(20)).await;
        let rev = rev.unwrap_or_else(|| panic!("{target:?}: {key} was not acknowledged through {endpoints:?}"));
        latencies.push(started.elapsed());
        acked.insert(key, (value, rev));
    }
    latencies
}

async fn an_isolated_leader_is_replaced_and_catches_up(c: ProxiedCluster) {
    let old = c.leader(&[0, 1, 2]).await;
    let others: Vec<usize> = (0..3).filter(|i| *i != old).collect();
    let mut acked = Acked::new();
    must_write(c.target, &c.endpoints(&[0, 1, 2]), "il/before/", 10, &mut acked).await;
    c.isolate(old).await;
    // Written at once, while the old leader may still believe it leads: it can append the entry
    // but never commit it, so the write must not be acknowledged, and once the network heals
    // the entry is replaced by the new leader's log.
    let lost = async {
        let mut client = c.members[old].client().await?;
        client.put("il/lost", "never", None).await.ok()
    };
    let lost = tokio::time::timeout(Duration::from_secs(3), lost).await;
    assert!(!matches!(lost, Ok(Some(_))), "{:?}: the isolated leader acknowledged a write: {lost:?}", c.target);
    let new = c.leader(&others).await;
    assert_ne!(new, old);
    must_write(c.target, &c.endpoints(&others), "il/during/", 20, &mut acked).await;
    // Check quorum: a leader that hears no quorum for an election timeout steps down.
    let stepped_down = wait_for(Duration::from_secs(5), async || {
        c.members[old].status().await.is_some_and(|(id, leader)| leader != id)
    })
    .await;
    assert!(stepped_down, "{:?}: the isolated leader still names itself leader", c.target);
    let top = acked.values().map(|(_, r)| *r).max().expect("writes");
    let behind = c.members[old].local_revision().await.expect("the isolated member answers serializable reads");
    assert!(behind < top, "{:?}: the isolated member has revision {behind}, writes reached {top}", c.target);
    c.heal();
    c.check_converged(&acked, &["il/lost"]).await;
    // It serves writes again, through whichever member leads now.
    must_write(c.target, &c.endpoints(&[old]), "il/after/", 3, &mut acked).await;
    c.check_converged(&acked, &["il/lost"]).await;
}

async fn one_way_loss_and_latency_keep_writes_going(c: ProxiedCluster) {
    let leader = c.leader(&[0, 1, 2]).await;
    let (deaf, slow) = ((leader + 1) % 3, (leader + 2) % 3);
    let mut acked = Acked::new();
    must_write(c.target, &c.endpoints(&[0, 1, 2]), "ow/before/", 5, &mut acked).await;
    let delay = Duration::from_millis(50);
    c.one_way_loss(leader, deaf);
    c.delay_link(leader, slow, delay);
    // Through the two members the leader still reaches; the deaf one never learns whether a
    // write it forwarded was committed.
    let latencies = must_write(c.target, &c.endpoints(&[leader, slow]), "ow/during/", 25, &mut acked).await;
    // A quorum is the leader and the slow follower: every commit waits for an append and its
    // acknowledgement across the delayed link. A faster write means the deaf follower heard
    // the leader after all. The first writes may have started before the rules took effect.
    let fastest = latencies[3..].iter().min().expect("latencies");
    assert!(*fastest >= delay * 2, "{:?}: a write committed in {fastest:?}, under the link's round trip", c.target);
    assert_eq!(c.leader(&[leader, slow]).await, leader, "{:?}: the leader hears a quorum and keeps leading", c.target);
    let top = acked.values().map(|(_, r)| *r).max().expect("writes");
    let behind = c.members[deaf].local_revision().await.expect("the deaf member answers serializable reads");
    assert!(behind < top, "{:?}: the deaf member has revision {behind}, writes reached {top}", c.target);
    c.heal();
    c.check_converged(&acked, &[]).await;
}

async fn an_isolated_follower_catches_up(c: ProxiedCluster) {
    let leader = c.leader(&[0, 1, 2]).await;
    let (cut, other) = ((leader + 1) % 3, (leader + 2) % 3);
    let endpoints = c.endpoints(&[leader, other]);
    let count = Arc::new(AtomicUsize::new(0));
    let (writers, per_writer) = (2, 25);
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let (endpoints, count) = (endpoints.clone(), Arc::clone(&count));
            tokio::spawn(async move {
                let mut acked = Vec::new();
                for i in 0..per_writer {
                    let (key, value) = (format!("if/{w}/{i:03}"), format!("w{w}-{i}"));
                    if let Some(rev) = put_any(&endpoints, w + i, &key, &value, Duration::from_secs(20)).await {
                        acked.push((key, (value, rev)));
                        count.fetch_add(1, Ordering::SeqCst);
                    }
                }
                acked
            })
        })
        .collect();
    let started = wait_for(Duration::from_secs(20), async || count.load(Ordering::SeqCst) >= 10).await;
    assert!(started, "{:?}: writes did not start", c.target);
    c.isolate(cut).await;
    let mut acked = Acked::new();
    for t in tasks {
        acked.extend(t.await.expect("writer"));
    }
    assert_eq!(
        acked.len(),
        writers * per_writer,
        "{:?}: the leader and one follower acknowledge every write",
        c.target
    );
    let top = acked.values().map(|(_, r)| *r).max().expect("writes");
    let behind = c.members[cut].local_revision().await.expect("the isolated member answers serializable reads");
    assert!(behind < top, "{:?}: the isolated member has revision {behind}, writes reached {top}", c.target);
    c.heal();
    c.check_converged(&acked, &[]).await;
}

/// The proxy itself, on an echo server: rules apply to the dialer they name, delay, blackhole
/// (connection kept, closed when lifted), and drop (open connections cut, new ones held silent
/// and closed when lifted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fault_proxy_names_dialers_and_applies_rules() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    let echo = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let echo_port = echo.local_addr().expect("addr").port();
    let echo_task = tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = echo.accept().await else { return };
            tokio::spawn(async move {
                let (mut r, mut w) = conn.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    let dialers = Dialers::default();
    dialers.register(std::process::id(), "me");
    let proxy = FaultProxy::start(echo_port, dialers).await;
    let connect = async || TcpStream::connect(("127.0.0.1", proxy.port())).await.expect("connect");
    // Returns the echo of `msg`, or None when nothing comes back within `wait`; Some(empty)
    // when the connection was closed.
    async fn echo_of(conn: &mut TcpStream, msg: &[u8], wait: Duration) -> Option<Vec<u8>> {
        let _ = conn.write_all(msg).await;
        let mut buf = vec![0u8; msg.len()];
        match tokio::time::timeout(wait, conn.read(&mut buf)).await {
            Err(_) => None,
            Ok(Ok(n)) => Some(buf[..n].to_vec()),
            Ok(Err(_)) => Some(Vec::new()),
        }
    }
    let long = Duration::from_secs(2);

    let mut a = connect().await;
    assert_eq!(echo_of(&mut a, b"pass", long).await.as_deref(), Some(&b"pass"[..]));
    assert_eq!(proxy.open_from(Some("me")), 1, "the proxy names this process as the dialer");

    proxy.set(Some("other"), Rule::DROP);
    assert_eq!(echo_of(&mut a, b"other", long).await.as_deref(), Some(&b"other"[..]), "a rule for another dialer");

    proxy.update(Some("me"), |r| r.to_target = Flow::Delay(Duration::from_millis(150)));
    // A rule reaches a connection's pumps through its own task: give it a moment under load.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let t = Instant::now();
    assert_eq!(echo_of(&mut a, b"slow", long).await.as_deref(), Some(&b"slow"[..]));
    assert!(t.elapsed() >= Duration::from_millis(150), "delayed by {:?}", t.elapsed());

    proxy.set(Some("me"), Rule { to_dialer: Flow::Blackhole, ..Rule::PASS });
    assert_eq!(echo_of(&mut a, b"lost", Duration::from_millis(300)).await, None, "the echo is thrown away");
    assert_eq!(proxy.open_from(Some("me")), 1, "a blackhole keeps the connection open");
    proxy.heal();
    assert_eq!(echo_of(&mut a, b"x", long).await.as_deref(), Some(&b""[..]), "a torn connection is closed on heal");

    let mut b = connect().await;
    assert_eq!(echo_of(&mut b, b"again", long).await.as_deref(), Some(&b"again"[..]));
    proxy.set(None, Rule::DROP);
    assert!(wait_for(long, async || proxy.open_total() == 0).await, "drop cuts open connections");
    assert_eq!(echo_of(&mut b, b"x", long).await.as_deref(), Some(&b""[..]), "the cut connection is closed");
    let mut c = connect().await;
    assert_eq!(echo_of(&mut c, b"x", Duration::from_millis(300)).await, None, "drop holds new connections silent");
    assert_eq!(proxy.open_total(), 0, "a held connection is not forwarding");
    proxy.heal();
    assert_eq!(echo_of(&mut c, b"x", long).await.as_deref(), Some(&b""[..]), "a held connection is closed on heal");
    let mut d = connect().await;
    assert_eq!(echo_of(&mut d, b"healed", long).await.as_deref(), Some(&b"healed"[..]));
    echo_task.abort();
}
