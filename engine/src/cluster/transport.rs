//! [`PeerRouter`] and [`PeerTransport`]: raft messages from this member's shards to the other
//! members, one long-lived connection per peer carrying every shard's messages, and the writes
//! sent on to the members leading their shards with their answers (`forwarding`;
//! [`raft_wire`](super::raft_wire) has the framing).
//!
//! A shard's Ready round hands its messages to [`PeerTransport::send`] on the shard thread,
//! which never blocks: when the peer's plain connection is idle and nothing is queued for it,
//! the shard thread writes its frame itself (`peer_link::Link`, `ClusterConfig::direct_writes`);
//! otherwise each peer has a bounded queue ([`ClusterConfig::peer_queue`]) and a
//! message that does not fit is dropped (raft resends what is lost; the slow-consumer policy of
//! this fan-out). One thread per peer ([`PeerRouter::start`]) owns the connection: it wakes
//! when a parcel arrives, takes everything queued into one batch and writes it, so a peer that
//! reads slowly holds the thread in its write while the queue fills (the back-pressure). When
//! the connection fails the thread tells every shard the peer is unreachable (raft then probes
//! instead of streaming appends), drops what was queued, and dials again with a doubling
//! backoff. Forwarded writes and their answers take the same way (a writer's task or the
//! answering shard thread writes the frame itself when it can), but are never dropped unsaid: a
//! write that finds the queue full or is dropped with a broken connection's queue fails as not
//! sent, and the writes a broken connection may have carried fail as possibly applied. The
//! other calls between members (lease calls, membership changes, the revision link, snapshots)
//! stay on gRPC over the channel [`PeerRouter::client`] returns.

use std::collections::HashMap;
use std::io::{self, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, OnceLock, Weak};
#[cfg(test)]
use std::time::Duration;

use ballast_proto::ballastpb::{peer_client::PeerClient, ForwardAnswer, ForwardItem, RaftBatch, ShardRaftMessage};
use ballast_raft::{Message, Transport};
use parking_lot::RwLock;
use prost_011::Message as _;
use tonic::transport::Channel;

use super::forward_pending::Forwarders;
use super::peer_link::{Direct, Link};
use super::raft_wire;
use super::ClusterConfig;

/// What one sender queued for one peer at once: one shard's messages of one Ready round, a
/// writer's forwarded write, or a shard's answers to forwarded writes (empty: a wake-up for the
/// thread to write what a direct write left, see [`Link`]).
#[derive(Debug, Default)]
pub(super) struct Parcel {
    pub(super) raft: Vec<(u32, Message)>,
    pub(super) writes: Vec<ForwardItem>,
    pub(super) answers: Vec<ForwardAnswer>,
}

/// A peer's sender thread before [`PeerRouter::start`]: its ID, URL, queue and link.
type Unstarted = (u64, String, Receiver<Parcel>, Arc<Link>);

/// One peer's way out: the sender thread's queue, and the connection shard threads may write
/// to themselves.
struct Outbox {
    tx: SyncSender<Parcel>,
    link: Arc<Link>,
    /// The peer URL its thread dials.
    url: String,
}

/// The member's outgoing peer connections.
pub struct PeerRouter {
    me: u64,
    cluster_id: u64,
    cfg: ClusterConfig,
    queues: RwLock<HashMap<u64, Outbox>>,
    /// Peers whose sender thread is not started yet.
    waiting: parking_lot::Mutex<Vec<Unstarted>>,
    channels: RwLock<HashMap<u64, Channel>>,
    on_unreachable: OnceLock<UnreachableHook>,
    /// The runtime the gRPC channels run on, once started: a peer added later (a membership
    /// change applied on a shard thread) gets its channel's task there.
    runtime: OnceLock<tokio::runtime::Handle>,
    /// The raft connections' client TLS.
    raft_tls: RaftTls,
    /// Writes sent on to the members leading their shards, not answered yet.
    forwarders: Forwarders,
}

/// Tells the member's shards that a peer could not be reached.
pub type UnreachableHook = Box<dyn Fn(u64) + Send + Sync>;

impl std::fmt::Debug for PeerRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerRouter").field("me", &self.me).field("cluster_id", &self.cluster_id).finish()
    }
}

impl PeerRouter {
    /// Returns a router for member `me` of cluster `cluster_id` with queues for `peers`
    /// (ID and peer URL; this member itself is skipped). Nothing is sent before
    /// [`PeerRouter::start`].
    pub fn new(me: u64, cluster_id: u64, peers: &[(u64, String)], cfg: ClusterConfig) -> Arc<Self> {
        let raft_tls = cfg.tls.as_ref().map(super::PeerTls::raft_client).transpose();
        let router = Arc::new(Self {
            me,
            cluster_id,
            cfg,
            queues: RwLock::new(HashMap::new()),
            waiting: parking_lot::Mutex::new(Vec::new()),
            channels: RwLock::new(HashMap::new()),
            on_unreachable: OnceLock::new(),
            runtime: OnceLock::new(),
            raft_tls,
            forwarders: Forwarders::default(),
        });
        for (id, url) in peers {
            router.add_peer(*id, url);
        }
        router
    }

    /// Adds (or re-points) the peer with raft ID `id` at `url`; its sender thread starts at once
    /// when the router runs. A peer already at `url` keeps its connection: a membership record
    /// applied again (a member's attributes updated, a snapshot's membership installed) must
    /// not cut the writes in flight on it.
    pub fn add_peer(self: &Arc<Self>, id: u64, url: &str) {
        if id == self.me || self.queues.read().get(&id).is_some_and(|out| out.url == url) {
            return;
        }
        self.remove_peer(id);
        let (tx, rx) = sync_channel(self.cfg.peer_queue);
        let link = Arc::new(Link::default());
        self.queues.write().insert(id, Outbox { tx, link: Arc::clone(&link), url: url.to_string() });
        self.waiting.lock().push((id, url.to_string(), rx, link));
        // A channel spawns its task on the current runtime: a shard thread applying a
        // membership change enters the router's.
        let _entered = self.runtime.get().map(tokio::runtime::Handle::enter);
        if let Ok(ep) = self.cfg.endpoint(url) {
            let ep = ep
                .connect_timeout(self.cfg.dial_timeout)
                .tcp_nodelay(true)
                .http2_keep_alive_interval(self.cfg.keepalive_interval)
                .keep_alive_timeout(self.cfg.keepalive_timeout)
                .keep_alive_while_idle(true);
            self.channels.write().insert(id, ep.connect_lazy());
        } else {
            tracing::error!(
                peer = format_args!("{id:x}"),
                url,
                "peer URL unusable (with https, peer TLS flags are needed)"
            );
        }
        if self.runtime.get().is_some() {
            self.start();
        }
    }

    /// Forgets the peer with raft ID `id`: its queue closes, so its sender thread ends, and
    /// the writes waiting on it fail.
    pub fn remove_peer(&self, id: u64) {
        self.queues.write().remove(&id);
        self.channels.write().remove(&id);
        self.waiting.lock().retain(|(peer, ..)| *peer != id);
        self.connection_lost(id);
    }

    /// Returns the member's ID.
    pub fn me(&self) -> u64 {
        self.me
    }

    /// Returns the cluster's ID.
    pub fn cluster_id(&self) -> u64 {
        self.cluster_id
    }

    /// Returns the router's configuration.
    pub fn config(&self) -> &ClusterConfig {
        &self.cfg
    }

    /// Returns the writes sent on to other members and not answered yet.
    pub(super) fn forwarders(&self) -> &Forwarders {
        &self.forwarders
    }

    /// Returns the runtime the router runs on, once started.
    pub fn runtime(&self) -> Option<tokio::runtime::Handle> {
        self.runtime.get().cloned()
    }

    /// Returns true when the member has peers.
    pub fn has_peers(&self) -> bool {
        !self.queues.read().is_empty()
    }

    /// Returns a gRPC client on the connection to `peer` (for forwarded requests), if it is a
    /// known peer.
    pub fn client(&self, peer: u64) -> Option<PeerClient<Channel>> {
        self.channels.read().get(&peer).cloned().map(PeerClient::new)
    }

    /// Sets what the router calls when a peer cannot be reached (the server passes it on to
    /// every shard); set once the shards are open.
    pub fn on_unreachable(&self, hook: UnreachableHook) {
        let _ = self.on_unreachable.set(hook);
    }

    /// Starts one sender thread per peer, and records the current tokio runtime for the gRPC
    /// connections of peers added later.
    pub fn start(self: &Arc<Self>) {
        let _ = self.runtime.get_or_init(tokio::runtime::Handle::current);
        for (id, url, rx, link) in self.waiting.lock().drain(..) {
            let sender = Sender { peer: id, url, rx, link, router: Arc::downgrade(self), tls: self.raft_tls.clone() };
            let spawned = std::thread::Builder::new().name("peer-out".into()).spawn(move || sender.run());
            if let Err(e) = spawned {
                tracing::error!(peer = format_args!("{id:x}"), error = %e, "cannot start the peer's sender thread");
            }
        }
    }

    /// Tells the member's shards that `peer` (a raft ID) cannot be reached: raft probes it
    /// instead of streaming appends, and a follower whose leader it is starts an election at
    /// once (`ShardConfig::elect_on_leader_loss`).
    pub fn report_unreachable(&self, peer: u64) {
        if let Some(hook) = self.on_unreachable.get() {
            hook(peer);
        }
    }

    /// Joins `first` and whatever else is queued for `peer` into one batch, up to
    /// `ClusterConfig::max_batch_messages` and `max_batch_bytes`; answers it and how many
    /// parcels it took.
    fn cut_batch(&self, peer: u64, first: Parcel, rx: &Receiver<Parcel>) -> (RaftBatch, usize) {
        let mut batch = self.batch(peer);
        let mut bytes = 0;
        let mut parcels = 0;
        let mut parcel = Some(first);
        while let Some(p) = parcel.take() {
            parcels += 1;
            bytes += p.writes.iter().map(prost::Message::encoded_len).sum::<usize>();
            bytes += p.answers.iter().map(prost::Message::encoded_len).sum::<usize>();
            bytes += add_parcel(p, &mut batch);
            let count = batch.messages.len() + batch.writes.len() + batch.answers.len();
            if count < self.cfg.max_batch_messages && bytes < self.cfg.max_batch_bytes {
                parcel = rx.try_recv().ok();
            }
        }
        (batch, parcels)
    }

    /// Returns one parcel's frame, for a direct write.
    fn frame_of(&self, peer: u64, parcel: Parcel) -> Vec<u8> {
        let mut batch = self.batch(peer);
        add_parcel(parcel, &mut batch);
        framed(peer, &batch)
    }

    fn batch(&self, peer: u64) -> RaftBatch {
        RaftBatch { cluster_id: self.cluster_id, from: self.me, to: peer, ..Default::default() }
    }

    fn enqueue(&self, shard: u32, msgs: Vec<Message>) {
        let mut by_peer: HashMap<u64, Parcel> = HashMap::new();
        for m in msgs {
            if m.to == self.me {
                continue;
            }
            by_peer.entry(m.to).or_default().raft.push((shard, m));
        }
        for (peer, parcel) in by_peer {
            if self.post(peer, parcel).is_err() {
                tracing::debug!(
                    peer = format_args!("{peer:x}"),
                    shard,
                    "peer queue full or peer unknown; raft messages dropped"
                );
            }
        }
    }

    /// Sends `parcel` to `peer` without waiting: written by the calling thread when the link
    /// is idle (see [`Link`]), else queued for the peer's thread. Answers the parcel back when
    /// the peer is unknown, its queue is full, or (for forwarded writes) the peer has closed
    /// the connection.
    pub(super) fn post(&self, peer: u64, parcel: Parcel) -> Result<(), Parcel> {
        let queues = self.queues.read();
        let Some(out) = queues.get(&peer) else { return Err(parcel) };
        let guard = !parcel.writes.is_empty();
        let mut parcel = Some(parcel);
        if self.cfg.direct_writes {
            match out.link.try_write(guard, || self.frame_of(peer, parcel.take().expect("once"))) {
                Direct::Written => return Ok(()),
                Direct::Left => parcel = Some(Parcel::default()), // wake the thread for the rest
                Direct::Refused => {}
                Direct::Closed => return Err(parcel.take().expect("not written")),
            }
        }
        let parcel = parcel.expect("not taken unless written");
        out.link.queued();
        out.tx.try_send(parcel).map_err(|e| {
            out.link.done(1);
            match e {
                TrySendError::Full(p) | TrySendError::Disconnected(p) => p,
            }
        })
    }
}

/// Returns `batch` framed for `peer`'s raft connection, counting its bytes as sent.
fn framed(peer: u64, batch: &RaftBatch) -> Vec<u8> {
    let frame = raft_wire::frame(batch);
    crate::metrics::PEER_BYTES.sent(peer, frame.len() - 4);
    frame
}

/// Appends `parcel` to `batch`, its raft messages encoded; answers the raft messages' bytes.
fn add_parcel(parcel: Parcel, batch: &mut RaftBatch) -> usize {
    let mut bytes = 0;
    for (shard, m) in parcel.raft {
        let message: bytes::Bytes = m.encode_to_vec().into();
        bytes += message.len();
        batch.messages.push(ShardRaftMessage { shard, message });
    }
    batch.writes.extend(parcel.writes);
    batch.answers.extend(parcel.answers);
    bytes
}

/// How a connection to a peer ended.
enum Ended {
    /// The peer was removed (its queue closed) or the router dropped: the thread stops.
    Closed,
    /// The connection failed after `sent` batches went out on it.
    Broken { sent: bool, error: io::Error },
}

/// The thread that owns the raft connection to one peer: it takes what the peer's queue holds
/// into one batch per write, and dials again with a doubling backoff when the connection fails.
struct Sender {
    peer: u64,
    url: String,
    rx: Receiver<Parcel>,
    link: Arc<Link>,
    /// Weak, so a router dropped (a member stopped in a test) ends the thread.
    router: Weak<PeerRouter>,
    tls: RaftTls,
}

impl Sender {
    fn run(self) {
        let Some(cfg) = self.router.upgrade().map(|r| r.cfg.clone()) else { return };
        let mut backoff = cfg.reconnect_backoff_min;
        loop {
            let ended = match self.dial(&cfg) {
                Ok(Conn::Plain(mut tcp)) => {
                    if cfg.direct_writes {
                        if let Ok(shared) = tcp.try_clone() {
                            self.link.attach(shared);
                        }
                    }
                    let ended = self.stream(&mut tcp, &cfg);
                    self.link.detach();
                    ended
                }
                Ok(Conn::Tls(mut tls)) => self.stream(tls.as_mut(), &cfg),
                Err(error) => Ended::Broken { sent: false, error },
            };
            let Ended::Broken { sent, error } = ended else { return };
            if sent {
                backoff = cfg.reconnect_backoff_min;
            }
            tracing::debug!(peer = format_args!("{:x}", self.peer), url = %self.url, %error, "raft connection to peer ended");
            let Some(router) = self.router.upgrade() else { return };
            router.report_unreachable(self.peer);
            // What was queued for the broken connection is stale; raft resends what matters,
            // and the forwarded writes in it were never sent.
            loop {
                match self.rx.try_recv() {
                    Ok(parcel) => {
                        self.link.done(1);
                        router.not_sent(parcel, "the raft connection to the leader failed");
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => return,
                }
            }
            // Those the connection took may have reached the leader; their answers would
            // have come back on the leader's own connection, which a broken peer loses too.
            router.connection_lost(self.peer);
            drop(router);
            std::thread::sleep(backoff);
            backoff = (backoff * 2).min(cfg.reconnect_backoff_max);
        }
    }

    /// Connects to the peer and sends the prelude (and, with peer TLS, completes the handshake).
    fn dial(&self, cfg: &ClusterConfig) -> io::Result<Conn> {
        let uri: http::Uri = self.url.parse().map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let host = uri.host().unwrap_or_default().trim_start_matches('[').trim_end_matches(']').to_string();
        let https = uri.scheme_str() == Some("https");
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{host} has no address"));
        for addr in (host.as_str(), port).to_socket_addrs()? {
            match TcpStream::connect_timeout(&addr, cfg.dial_timeout) {
                Ok(mut tcp) => {
                    tcp.set_nodelay(true)?;
                    tcp.set_write_timeout(Some(cfg.keepalive_timeout))?;
                    tcp.write_all(raft_wire::PRELUDE)?;
                    if !https {
                        return Ok(Conn::Plain(tcp));
                    }
                    let tls = match &self.tls {
                        Ok(Some(tls)) => Arc::clone(tls),
                        Ok(None) => return Err(io::Error::other("an https peer URL needs the peer TLS flags")),
                        Err(e) => return Err(io::Error::other(e.clone())),
                    };
                    let name = rustls_pki_types::ServerName::try_from(host.clone())
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
                    let conn = rustls::ClientConnection::new(tls, name).map_err(io::Error::other)?;
                    let mut stream = Box::new(rustls::StreamOwned::new(conn, tcp));
                    // Bound the handshake: a peer that accepts and says nothing would hold it.
                    stream.sock.set_read_timeout(Some(cfg.dial_timeout))?;
                    while stream.conn.is_handshaking() {
                        stream.conn.complete_io(&mut stream.sock)?;
                    }
                    return Ok(Conn::Tls(stream));
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Sends batches as the queue fills, and a keep-alive when it stays empty, until the
    /// connection fails or the queue closes.
    fn stream(&self, conn: &mut impl Write, cfg: &ClusterConfig) -> Ended {
        let mut sent = false;
        loop {
            let wrote = match self.rx.recv_timeout(cfg.keepalive_interval) {
                Ok(first) => {
                    let Some(router) = self.router.upgrade() else { return Ended::Closed };
                    let (batch, parcels) = router.cut_batch(self.peer, first, &self.rx);
                    if !batch.writes.is_empty() && self.link.peer_closed() {
                        // Nothing written: the writes go to the next leader.
                        self.link.done(parcels);
                        let writes = Parcel { writes: batch.writes, ..Parcel::default() };
                        router.not_sent(writes, "the leader closed its raft connection");
                        let error = io::Error::new(io::ErrorKind::BrokenPipe, "the peer closed the raft connection");
                        return Ended::Broken { sent, error };
                    }
                    drop(router);
                    let wrote = self.link.write_with(conn, |conn| {
                        if !(batch.messages.is_empty() && batch.writes.is_empty() && batch.answers.is_empty()) {
                            conn.write_all(&framed(self.peer, &batch))?;
                        }
                        conn.flush()
                    });
                    // Written or lost with the connection: either way no longer ahead of a
                    // shard thread's own write.
                    self.link.done(parcels);
                    sent |= wrote.is_ok();
                    wrote
                }
                Err(RecvTimeoutError::Timeout) => {
                    self.link.write_with(conn, |conn| conn.write_all(&raft_wire::KEEPALIVE).and_then(|()| conn.flush()))
                }
                Err(RecvTimeoutError::Disconnected) => return Ended::Closed,
            };
            if let Err(error) = wrote {
                return Ended::Broken { sent, error };
            }
        }
    }
}

/// A dialled raft connection.
enum Conn {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

/// The client TLS of raft connections: none (plain peer URLs), or what the peer TLS flags
/// gave, or why they gave nothing usable (reported at each dial to an https peer).
type RaftTls = Result<Option<Arc<rustls::ClientConfig>>, String>;

/// A shard's [`Transport`]: hands its messages to the member's [`PeerRouter`].
#[derive(Clone, Debug)]
pub struct PeerTransport {
    shard: u32,
    router: Arc<PeerRouter>,
}

impl PeerTransport {
    /// Returns shard `shard`'s transport over `router`.
    pub fn new(shard: u32, router: Arc<PeerRouter>) -> Self {
        Self { shard, router }
    }

    /// Returns the transport of a member alone (raft ID 1): there is no one to send to.
    pub fn alone(shard: u32) -> Self {
        Self::new(shard, PeerRouter::new(1, 0, &[], ClusterConfig::default()))
    }
}

impl Transport for PeerTransport {
    fn send(&self, msgs: Vec<Message>) {
        crate::round_trace::mark(crate::round_trace::Mark::RaftSent, msgs.len());
        self.router.enqueue(self.shard, msgs);
    }
}

/// Returns the doubling sequence of reconnect waits, for tests of the backoff bounds.
#[cfg(test)]
fn backoffs(cfg: &ClusterConfig, n: usize) -> Vec<Duration> {
    let mut b = cfg.reconnect_backoff_min;
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(b);
        b = (b * 2).min(cfg.reconnect_backoff_max);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_ceiling() {
        let cfg = ClusterConfig::default();
        let b = backoffs(&cfg, 12);
        assert_eq!(b[0], cfg.reconnect_backoff_min);
        assert_eq!(b[1], cfg.reconnect_backoff_min * 2);
        assert_eq!(*b.last().expect("some"), cfg.reconnect_backoff_max);
    }

    #[tokio::test]
    async fn messages_are_grouped_per_peer_and_a_full_queue_drops() {
        let cfg = ClusterConfig { peer_queue: 1, ..ClusterConfig::default() };
        let router = PeerRouter::new(1, 9, &[(1, "http://127.0.0.1:1".into()), (2, "http://127.0.0.1:2".into())], cfg);
        let msg = |to| Message { to, from: 1, ..Default::default() };
        let t = PeerTransport::new(3, Arc::clone(&router));
        t.send(vec![msg(2), msg(1), msg(2), msg(7)]);
        t.send(vec![msg(2)]); // the queue holds one parcel: dropped
        let (_, _, rx, _) = router.waiting.lock().drain(..).next().expect("one peer");
        let first = rx.try_recv().expect("a parcel");
        assert_eq!(first.raft.iter().map(|(s, m)| (*s, m.to)).collect::<Vec<_>>(), vec![(3, 2), (3, 2)]);
        assert!(rx.try_recv().is_err(), "the second parcel did not fit");
        let (batch, _) = router.cut_batch(2, first, &rx);
        assert_eq!((batch.cluster_id, batch.from, batch.to, batch.messages.len()), (9, 1, 2, 2));
    }

    /// Reads frames from `conn` until a batch arrives; answers it and the keep-alives before it.
    fn next_batch(conn: &mut std::net::TcpStream, reader: &mut raft_wire::FrameReader) -> (RaftBatch, usize) {
        use prost::Message as _;
        let mut keepalives = 0;
        loop {
            while let Some(body) = reader.take().expect("a frame within the limit") {
                if body.is_empty() {
                    keepalives += 1;
                } else {
                    return (RaftBatch::decode(body).expect("a batch"), keepalives);
                }
            }
            assert!(reader.fill(conn).expect("the sender writes within the timeout") > 0, "the sender closed");
        }
    }

    fn accept_raft(listener: &std::net::TcpListener) -> std::net::TcpStream {
        use std::io::Read as _;
        let (mut conn, _) = listener.accept().expect("the sender dials");
        conn.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        let mut prelude = [0; 8];
        conn.read_exact(&mut prelude).expect("the prelude");
        assert_eq!(&prelude, raft_wire::PRELUDE);
        conn
    }

    #[test]
    fn the_sender_frames_batches_keeps_alive_and_dials_again_after_a_broken_connection() {
        sender_frames_keeps_alive_and_redials(false);
    }

    #[test]
    fn shard_threads_writing_themselves_keep_the_same_frames_order_and_redial() {
        sender_frames_keeps_alive_and_redials(true);
    }

    fn sender_frames_keeps_alive_and_redials(direct_writes: bool) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let _entered = rt.enter();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let cfg = ClusterConfig {
            keepalive_interval: Duration::from_millis(20),
            reconnect_backoff_min: Duration::from_millis(10),
            direct_writes,
            ..ClusterConfig::default()
        };
        let router = PeerRouter::new(1, 9, &[(2, url)], cfg);
        let unreachable = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&unreachable);
        router.on_unreachable(Box::new(move |peer| {
            assert_eq!(peer, 2);
            seen.fetch_add(1, Ordering::SeqCst);
        }));
        router.start();
        let msg = |to, index| Message { to, from: 1, index, ..Default::default() };
        let t = PeerTransport::new(3, Arc::clone(&router));

        let mut conn = accept_raft(&listener);
        let mut reader = raft_wire::FrameReader::new(1 << 20);
        t.send(vec![msg(2, 1), msg(2, 2)]);
        let (batch, _) = next_batch(&mut conn, &mut reader);
        assert_eq!((batch.cluster_id, batch.from, batch.to), (9, 1, 2));
        let got: Vec<_> = batch
            .messages
            .iter()
            .map(|m| (m.shard, Message::decode(m.message.as_ref()).expect("a message").index))
            .collect();
        assert_eq!(got, vec![(3, 1), (3, 2)], "one parcel, one batch, in order");

        std::thread::sleep(Duration::from_millis(150));
        t.send(vec![msg(2, 3)]);
        let (batch, keepalives) = next_batch(&mut conn, &mut reader);
        assert_eq!(batch.messages.len(), 1);
        assert!(keepalives >= 2, "an idle connection carries keep-alives ({keepalives} seen)");
        if !direct_writes {
            let written = router.queues.read().get(&2).map_or(0, |out| out.link.written());
            assert_eq!(written, 0, "switched off, shard threads never write the connection");
        }

        // The peer goes away: the keep-alives find the broken connection, the shards hear of it,
        // and the sender dials again; what is sent then arrives on the new connection.
        drop(conn);
        let mut conn = accept_raft(&listener);
        assert!(unreachable.load(Ordering::SeqCst) >= 1, "the broken connection was reported");
        let mut reader = raft_wire::FrameReader::new(1 << 20);
        t.send(vec![msg(2, 4)]);
        let (batch, _) = next_batch(&mut conn, &mut reader);
        let index = Message::decode(batch.messages[0].message.as_ref()).expect("a message").index;
        assert_eq!(index, 4);
        router.remove_peer(2);
    }

    /// A shard thread writes to an idle connection itself; then several shard threads send at
    /// once, some messages far larger than the socket buffers, to a peer that reads in bursts:
    /// frames arrive whole (never interleaved) and each shard's messages in the order it sent
    /// them, whichever thread wrote them.
    #[test]
    fn shards_write_an_idle_link_themselves_and_concurrent_shards_keep_whole_frames_in_order() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let _entered = rt.enter();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let (shards, per_shard) = (4u32, 400u64);
        // No keep-alive during the test, so nothing but the shards competes for the link; room
        // in the queue for everything, so a drop would be a lost message, not an ordering fault.
        let cfg = ClusterConfig {
            peer_queue: 10_000,
            keepalive_interval: Duration::from_secs(3_600),
            ..ClusterConfig::default()
        };
        let router = PeerRouter::new(1, 9, &[(2, url)], cfg);
        router.start();
        let mut conn = accept_raft(&listener);
        let link = router.queues.read().get(&2).map(|out| Arc::clone(&out.link)).expect("the peer's link");
        // Bounded: ten seconds of polling.
        for _ in 0..10_000 {
            if link.attached() {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(link.attached(), "the sender lends its connection");
        let mut reader = raft_wire::FrameReader::new(64 << 20);
        PeerTransport::new(9, Arc::clone(&router)).send(vec![Message {
            to: 2,
            from: 1,
            index: 1,
            ..Default::default()
        }]);
        let (batch, _) = next_batch(&mut conn, &mut reader);
        assert_eq!((batch.messages.len(), batch.messages[0].shard), (1, 9));
        assert_eq!(link.written(), 1, "the idle link took the shard thread's frame at once");

        let senders: Vec<_> = (0..shards)
            .map(|shard| {
                let t = PeerTransport::new(shard, Arc::clone(&router));
                std::thread::spawn(move || {
                    for index in 1..=per_shard {
                        // Every 25th message carries 256 KiB: more than a socket takes at once
                        // while the reader pauses, so writes are cut short and queued.
                        let data = if index % 25 == 0 { vec![shard as u8; 256 << 10] } else { Vec::new() };
                        let entry = ballast_raft::Entry { index, data, ..Default::default() };
                        t.send(vec![Message { to: 2, from: 1, index, entries: vec![entry], ..Default::default() }]);
                        if index % 40 == 0 {
                            // Let the queue drain now and then, so shard threads write again.
                            std::thread::sleep(Duration::from_millis(1));
                        }
                    }
                })
            })
            .collect();
        let mut last = vec![0u64; shards as usize];
        let (mut got, mut batches) = (0, 0);
        while got < u64::from(shards) * per_shard {
            let (batch, _) = next_batch(&mut conn, &mut reader);
            for m in batch.messages {
                let msg = Message::decode(m.message.as_ref()).expect("a whole message");
                let at = &mut last[m.shard as usize];
                assert_eq!(msg.index, *at + 1, "shard {} out of order", m.shard);
                *at = msg.index;
                got += 1;
            }
            batches += 1;
            if batches % 10 == 0 {
                // A reader in bursts: the socket fills meanwhile.
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        for s in senders {
            s.join().expect("sender");
        }
        router.remove_peer(2);
    }
}
