//! The receiving end of raft connections on the peer port (`cluster::raft_wire` has the
//! framing, `cluster::transport` the sending end).
//!
//! A raft connection that ends (the sending member closed it, or it died: its kernel closes
//! its sockets at once) is reported as that member being unreachable, as a failed write to it
//! is: a follower learns that its leader is gone from the leader's own connection, which a
//! dead leader's process closes at once, rather than from its own writes to the leader, which
//! fail only once something is written (a keep-alive, up to a second later) and the dead end
//! answers it.
//!
//! [`split`] accepts the port's connections and looks at each one's first byte: a raft
//! connection's prelude goes to a thread of its own, everything else (gRPC, plain or TLS) to
//! the peer service's server. The thread reads frames with blocking reads and hands each
//! batch to the shards; a connection silent for `ClusterConfig::keepalive_timeout` (the sender
//! keeps an idle one alive), a batch of another cluster or for another member, or a frame over
//! the limit closes it, and the sender dials again. Each read waits at most
//! `keepalive_interval`, so the thread also ends soon after the server stops, and the server
//! waits for it ([`Receivers::wait`]): the thread holds the member's state through the peer
//! service, and the last holder of a shard's database closes it.

use std::io::{self, Read};
use std::net::TcpStream as StdTcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ballast_proto::ballastpb::RaftBatch;
use prost::Message as _;
use tokio::net::TcpStream;
use tokio::sync::broadcast;
use tokio_stream::wrappers::ReceiverStream;

use super::accept::each_connection;
use super::peer::PeerService;
use super::tls::HANDSHAKE_TIMEOUT;
use crate::clock::{Clock as _, SystemClock};
use crate::cluster::raft_wire::{FrameReader, PRELUDE};

/// Connections accepted and told apart, waiting for the gRPC server to take them: a handful.
const WAITING_GRPC: usize = 64;

/// The threads serving raft connections, counted so that a stopping member can wait for them.
///
/// A member must not exit while one runs: the thread holds the member's state through the peer
/// service, and if it lets go last, it closes the shards' databases while the process's exit
/// handlers are tearing RocksDB's own globals down, which aborts or crashes the process after
/// it said it stopped.
#[derive(Clone, Debug, Default)]
pub struct Receivers {
    live: Arc<AtomicUsize>,
}

impl Receivers {
    /// How many threads are serving raft connections.
    pub fn live(&self) -> usize {
        self.live.load(Ordering::SeqCst)
    }

    /// Waits until no thread serves a raft connection, for at most `limit`; true if none is
    /// left. After the stop signal each ends within one read timeout (`keepalive_interval`).
    pub async fn wait(&self, limit: Duration) -> bool {
        let gone = async {
            while self.live() > 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(limit, gone).await.is_ok()
    }

    fn enter(&self) -> Live {
        self.live.fetch_add(1, Ordering::SeqCst);
        Live(self.live.clone())
    }
}

/// One thread counted in [`Receivers`] until it drops this.
#[derive(Debug)]
struct Live(Arc<AtomicUsize>);

impl Drop for Live {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Accepts the peer port's connections from `listener`: raft connections are served on
/// threads of their own (counted in `receivers`) until `stop` fires; the others are returned
/// for the gRPC server. `tls` is the peer port's TLS, for raft connections from members with
/// peer TLS; `limit` bounds a frame.
pub fn split(
    listener: tokio::net::TcpListener,
    service: PeerService,
    tls: Option<Arc<rustls::ServerConfig>>,
    limit: usize,
    stop: &broadcast::Receiver<()>,
    receivers: &Receivers,
) -> ReceiverStream<io::Result<TcpStream>> {
    let receivers = receivers.clone();
    let (tx, rx) = tokio::sync::mpsc::channel(WAITING_GRPC);
    let stop = stop.resubscribe();
    let closed = tx.clone();
    tokio::spawn(each_connection(listener, async move { closed.closed().await }, move |tcp, peer| {
        let (tx, service, tls, stop) = (tx.clone(), service.clone(), tls.clone(), stop.resubscribe());
        let receivers = receivers.clone();
        tokio::spawn(async move {
            let mut first = [0u8; 1];
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, tcp.peek(&mut first)).await {
                Ok(Ok(1)) if first[0] == PRELUDE[0] => {
                    let live = receivers.enter();
                    let receiver = Receiver { peer, service, tls, limit, stop, from: None, _live: live };
                    if let Err(e) = receiver.start(tcp) {
                        tracing::warn!(error = %e, "cannot serve a raft connection");
                    }
                }
                Ok(Ok(_)) => {
                    let _ = tx.send(Ok(tcp)).await;
                }
                Ok(Err(e)) => tracing::debug!(%peer, error = %e, "peer connection failed before it spoke"),
                Err(_) => tracing::debug!(%peer, "peer connection silent; closed"),
            }
        });
    }));
    ReceiverStream::new(rx)
}

/// One raft connection's receiving thread.
struct Receiver {
    /// The remote address, for logs.
    peer: String,
    service: PeerService,
    tls: Option<Arc<rustls::ServerConfig>>,
    limit: usize,
    stop: broadcast::Receiver<()>,
    /// The raft ID of the member sending on this connection, once a batch of this cluster and
    /// for this member came.
    from: Option<u64>,
    /// Counts this thread in [`Receivers`]; the last field, so it is dropped after the service.
    _live: Live,
}

impl Receiver {
    /// Moves `tcp` to a thread of its own that serves it.
    fn start(self, tcp: TcpStream) -> io::Result<()> {
        let tcp = tcp.into_std()?;
        tcp.set_nonblocking(false)?;
        std::thread::Builder::new().name("peer-in".into()).spawn(move || self.serve(tcp))?;
        Ok(())
    }

    fn serve(mut self, mut tcp: StdTcpStream) {
        let cfg = self.service.cluster_config();
        let (poll, idle) = (cfg.keepalive_interval, cfg.keepalive_timeout);
        let ended = (|| {
            tcp.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
            let mut prelude = [0; PRELUDE.len()];
            tcp.read_exact(&mut prelude)?;
            if &prelude != PRELUDE {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "not a raft connection"));
            }
            match self.tls.clone() {
                None => {
                    tcp.set_read_timeout(Some(poll))?;
                    self.frames(&mut tcp, idle)
                }
                Some(tls) => {
                    let mut conn = rustls::ServerConnection::new(tls).map_err(io::Error::other)?;
                    while conn.is_handshaking() {
                        conn.complete_io(&mut tcp)?;
                    }
                    tcp.set_read_timeout(Some(poll))?;
                    self.frames(&mut rustls::StreamOwned::new(conn, tcp), idle)
                }
            }
        })();
        if let Err(e) = ended {
            tracing::debug!(peer = %self.peer, error = %e, "raft connection from peer ended");
        }
        if let (Some(from), false) = (self.from, self.stopping()) {
            self.service.peer_gone(from);
        }
    }

    /// True once the server is stopping (its stop signal was sent, or its sender is gone).
    fn stopping(&mut self) -> bool {
        !matches!(self.stop.try_recv(), Err(broadcast::error::TryRecvError::Empty))
    }

    /// Hands each batch read from `conn` to the shards until the connection ends.
    fn frames(&mut self, conn: &mut impl Read, idle: Duration) -> io::Result<()> {
        let mut reader = FrameReader::new(self.limit);
        let mut heard = SystemClock.now();
        loop {
            while let Some(body) = reader.take()? {
                if body.is_empty() {
                    continue;
                }
                let bytes = body.len();
                let batch = RaftBatch::decode(body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                let from = batch.from;
                self.service.take_raft(batch).map_err(|s| io::Error::other(s.message().to_string()))?;
                crate::metrics::PEER_BYTES.received(from, bytes);
                self.from = Some(from);
            }
            match reader.fill(conn) {
                Ok(0) => return Ok(()),
                // A peer that keeps sending never lets a read time out: the stop is checked
                // after every read.
                Ok(_) if self.stopping() => return Ok(()),
                Ok(_) => heard = SystemClock.now(),
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    if self.stopping() {
                        return Ok(());
                    }
                    if SystemClock.now().saturating_duration_since(heard) > idle {
                        return Err(io::Error::new(io::ErrorKind::TimedOut, "nothing heard from the peer"));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}
