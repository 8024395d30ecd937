//! [`PeerRouter`] and [`PeerTransport`]: raft messages from this member's shards to the other
//! members, one long-lived gRPC stream per peer carrying every shard's messages.
//!
//! A shard's Ready round hands its messages to [`PeerTransport::send`] on the shard thread,
//! which never blocks: each peer has a bounded queue ([`ClusterConfig::peer_queue`]) and a
//! message that does not fit is dropped (raft resends what is lost; the slow-consumer policy of
//! this fan-out). Each peer's `Raft` stream is the queue itself ([`Outbound`]): when HTTP/2
//! has room it takes everything queued at once and cuts it into one [`RaftBatch`], so flow
//! control pushes back on the queue when the peer reads slowly. One task per peer
//! ([`PeerRouter::start`]) holds the call open; when the connection fails the task
//! tells every shard the peer is unreachable (raft then probes instead of streaming appends),
//! drops what was queued, and reconnects with a doubling backoff.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
#[cfg(test)]
use std::time::Duration;

use ballast_proto::ballastpb::{peer_client::PeerClient, RaftBatch, ShardRaftMessage};
use ballast_raft::{Message, Transport};
use parking_lot::{Mutex, RwLock};
use prost_011::Message as _;
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tonic::transport::Channel;

use super::forward_queue::Forwarders;
use super::ClusterConfig;

/// What one shard queued for one peer in one Ready round.
type Parcel = Vec<(u32, Message)>;

/// The member's outgoing peer connections.
pub struct PeerRouter {
    me: u64,
    cluster_id: u64,
    cfg: ClusterConfig,
    queues: RwLock<HashMap<u64, mpsc::Sender<Parcel>>>,
    waiting: parking_lot::Mutex<Vec<(u64, String, mpsc::Receiver<Parcel>)>>,
    channels: RwLock<HashMap<u64, Channel>>,
    on_unreachable: OnceLock<UnreachableHook>,
    /// The runtime the sender tasks run on, once started: a peer added later (a membership
    /// change applied on a shard thread) gets its task there.
    runtime: OnceLock<tokio::runtime::Handle>,
    /// Writes sent on to the members leading their shards.
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
        let router = Arc::new(Self {
            me,
            cluster_id,
            cfg,
            queues: RwLock::new(HashMap::new()),
            waiting: parking_lot::Mutex::new(Vec::new()),
            channels: RwLock::new(HashMap::new()),
            on_unreachable: OnceLock::new(),
            runtime: OnceLock::new(),
            forwarders: Forwarders::default(),
        });
        for (id, url) in peers {
            router.add_peer(*id, url);
        }
        router
    }

    /// Adds (or re-points) the peer with raft ID `id` at `url`; its sender task starts at once
    /// when the router runs.
    pub fn add_peer(self: &Arc<Self>, id: u64, url: &str) {
        if id == self.me {
            return;
        }
        self.remove_peer(id);
        let (tx, rx) = mpsc::channel(self.cfg.peer_queue);
        self.queues.write().insert(id, tx);
        self.waiting.lock().push((id, url.to_string(), rx));
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

    /// Forgets the peer with raft ID `id`: its queue closes, so its sender task ends.
    pub fn remove_peer(&self, id: u64) {
        self.queues.write().remove(&id);
        self.channels.write().remove(&id);
        self.waiting.lock().retain(|(peer, _, _)| *peer != id);
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
    pub(super) fn config(&self) -> &ClusterConfig {
        &self.cfg
    }

    /// Returns the queues of writes sent on to other members.
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

    /// Starts one sender task per peer on the current tokio runtime.
    pub fn start(self: &Arc<Self>) {
        let runtime = self.runtime.get_or_init(tokio::runtime::Handle::current).clone();
        for (id, url, rx) in self.waiting.lock().drain(..) {
            let router = Arc::clone(self);
            runtime.spawn(async move { router.send_loop(id, url, rx).await });
        }
    }

    fn report_unreachable(&self, peer: u64) {
        if let Some(hook) = self.on_unreachable.get() {
            hook(peer);
        }
    }

    async fn send_loop(self: Arc<Self>, peer: u64, url: String, rx: mpsc::Receiver<Parcel>) {
        let rx = Arc::new(Mutex::new(rx));
        let mut backoff = self.cfg.reconnect_backoff_min;
        loop {
            if rx.lock().is_closed() {
                return;
            }
            let Some(mut client) = self.client(peer) else { return };
            let outbound = Outbound {
                router: Arc::clone(&self),
                peer,
                rx: Arc::clone(&rx),
                retired: Arc::new(AtomicBool::new(false)),
                sent: Arc::new(AtomicBool::new(false)),
            };
            let (retired, sent) = (Arc::clone(&outbound.retired), Arc::clone(&outbound.sent));
            // The call lasts as long as the stream: a follower sends its leader only answers, so
            // a dead leader would otherwise be noticed only at its next message, which never
            // comes; the broken connection ends the call at once.
            let ended = client.raft(outbound).await;
            // The stream of a broken connection may still be held by the HTTP/2 client for a
            // moment: it must not take parcels meant for the next connection.
            retired.store(true, Ordering::SeqCst);
            if sent.load(Ordering::SeqCst) {
                backoff = self.cfg.reconnect_backoff_min;
            }
            if let Err(status) = ended {
                tracing::debug!(peer = format_args!("{peer:x}"), %url, %status, "peer stream ended");
            }
            if rx.lock().is_closed() {
                return;
            }
            self.report_unreachable(peer);
            // What was queued for the broken connection is stale; raft resends what matters.
            while rx.lock().try_recv().is_ok() {}
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(self.cfg.reconnect_backoff_max);
        }
    }

    /// Joins `first` and whatever else is queued for `peer` into one batch, up to
    /// `ClusterConfig::max_batch_messages` and `max_batch_bytes`.
    fn cut_batch(&self, peer: u64, first: Parcel, rx: &mut mpsc::Receiver<Parcel>) -> RaftBatch {
        let mut messages: Vec<ShardRaftMessage> = Vec::with_capacity(first.len());
        let mut bytes = 0;
        let mut parcel = Some(first);
        while let Some(p) = parcel.take() {
            for (shard, m) in p {
                let message: bytes::Bytes = m.encode_to_vec().into();
                bytes += message.len();
                messages.push(ShardRaftMessage { shard, message });
            }
            if messages.len() < self.cfg.max_batch_messages && bytes < self.cfg.max_batch_bytes {
                parcel = rx.try_recv().ok();
            }
        }
        crate::metrics::PEER_BYTES.sent(peer, bytes);
        RaftBatch { cluster_id: self.cluster_id, from: self.me, to: peer, messages }
    }

    fn enqueue(&self, shard: u32, msgs: Vec<Message>) {
        let queues = self.queues.read();
        let mut by_peer: HashMap<u64, Parcel> = HashMap::new();
        for m in msgs {
            if m.to == self.me {
                continue;
            }
            by_peer.entry(m.to).or_default().push((shard, m));
        }
        for (peer, parcel) in by_peer {
            match queues.get(&peer) {
                Some(q) => {
                    if q.try_send(parcel).is_err() {
                        tracing::debug!(
                            peer = format_args!("{peer:x}"),
                            shard,
                            "peer queue full; raft messages dropped"
                        );
                    }
                }
                None => {
                    tracing::debug!(peer = format_args!("{peer:x}"), shard, "raft message to an unknown member dropped")
                }
            }
        }
    }
}

/// The request stream of one connection to a peer. HTTP/2 polls it when the stream has room,
/// and each poll cuts what the peer's queue holds into one batch: the queue's waker is the
/// HTTP/2 sender's own, so a parcel a shard queues goes to the socket with no task between.
/// (A task taking the queue and handing batches on through a channel of its own, as before,
/// cost one more wake-up and hand-over per batch.)
struct Outbound {
    router: Arc<PeerRouter>,
    peer: u64,
    /// The peer's queue, shared by the connections to it in turn (one polls it at a time).
    rx: Arc<Mutex<mpsc::Receiver<Parcel>>>,
    /// Set once the connection is given up: the stream ends.
    retired: Arc<AtomicBool>,
    /// Set once a batch went out on this connection: the reconnect backoff starts over.
    sent: Arc<AtomicBool>,
}

impl Stream for Outbound {
    type Item = RaftBatch;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<RaftBatch>> {
        if self.retired.load(Ordering::SeqCst) {
            return Poll::Ready(None);
        }
        let mut rx = self.rx.lock();
        match rx.poll_recv(cx) {
            Poll::Ready(Some(first)) => {
                let batch = self.router.cut_batch(self.peer, first, &mut rx);
                self.sent.store(true, Ordering::SeqCst);
                Poll::Ready(Some(batch))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

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
        let (_, _, mut rx) = router.waiting.lock().drain(..).next().expect("one peer");
        let first = rx.try_recv().expect("a parcel");
        assert_eq!(first.iter().map(|(s, m)| (*s, m.to)).collect::<Vec<_>>(), vec![(3, 2), (3, 2)]);
        assert!(rx.try_recv().is_err(), "the second parcel did not fit");
        let batch = router.cut_batch(2, first, &mut rx);
        assert_eq!((batch.cluster_id, batch.from, batch.to, batch.messages.len()), (9, 1, 2, 2));
    }

    #[tokio::test]
    async fn the_stream_takes_everything_queued_at_once_and_ends_once_retired() {
        use tokio_stream::StreamExt as _;
        let router = PeerRouter::new(1, 9, &[(2, "http://127.0.0.1:2".into())], ClusterConfig::default());
        let (_, _, rx) = router.waiting.lock().drain(..).next().expect("one peer");
        let rx = Arc::new(Mutex::new(rx));
        let msg = |to| Message { to, from: 1, ..Default::default() };
        let t = PeerTransport::new(3, Arc::clone(&router));
        t.send(vec![msg(2)]);
        t.send(vec![msg(2), msg(2)]);
        let mut out = Outbound {
            router: Arc::clone(&router),
            peer: 2,
            rx: Arc::clone(&rx),
            retired: Arc::new(AtomicBool::new(false)),
            sent: Arc::new(AtomicBool::new(false)),
        };
        let batch = out.next().await.expect("a batch");
        assert_eq!((batch.to, batch.messages.len()), (2, 3), "both parcels in one batch");
        assert!(out.sent.load(Ordering::SeqCst));
        out.retired.store(true, Ordering::SeqCst);
        t.send(vec![msg(2)]);
        assert!(out.next().await.is_none(), "a retired connection's stream ends");
        assert!(rx.lock().try_recv().is_ok(), "the parcel waits for the next connection");
    }
}
