//! [`Forwarders`]: writes a member sends on to the member leading their shard, over one
//! long-lived `ForwardWrites` stream per leading member.
//!
//! A unary call per write costs an HTTP/2 stream, its headers and a task on both sides; under
//! load that was most of what a forwarded write cost beyond the write itself. Here each leading
//! member has a queue ([`ClusterConfig::forward_queue`]) and one task that takes whatever is
//! queued at once, sends it as one [`ForwardBatch`] (up to
//! [`ClusterConfig::max_forward_batch`] writes), and hands each answer to its writer as it
//! comes back. A writer whose queue is full waits: the slow-consumer policy here is
//! back-pressure, as the writes are acknowledged to nobody yet and must not be dropped.
//!
//! Failures keep the unary call's meaning, which the caller maps to etcd's errors: a stream
//! that could not be opened carried nothing (safe to retry elsewhere); a stream that broke with
//! writes in flight fails them as "may have been applied".

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ballast_proto::ballastpb::{ForwardAnswers, ForwardBatch, ForwardItem, ForwardResponse, RaftCommand};
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};
use tonic::{Code, Status};

use super::transport::PeerRouter;

/// What a writer waits on: the leader's answer or the status the write failed with.
type Reply = oneshot::Sender<Result<ForwardResponse, Status>>;

/// One write waiting to be sent.
struct Queued {
    shard: u32,
    write: RaftCommand,
    reply: Reply,
}

/// The forwarding queues of a member, one per member it sends writes to.
#[derive(Default)]
pub struct Forwarders {
    queues: Mutex<HashMap<u64, mpsc::Sender<Queued>>>,
}

impl std::fmt::Debug for Forwarders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forwarders").field("peers", &self.queues.lock().len()).finish()
    }
}

impl PeerRouter {
    /// Sends `write` for shard `shard` to `peer` (which leads it) and waits, at most `timeout`,
    /// for its answer.
    ///
    /// # Errors
    /// The status the leader answered, or one standing for a transport failure (see the module
    /// doc); `DeadlineExceeded` when `timeout` passes first.
    pub async fn forward_write(
        self: &Arc<Self>,
        peer: u64,
        shard: u32,
        write: RaftCommand,
        timeout: Duration,
    ) -> Result<ForwardResponse, Status> {
        let (reply, answer) = oneshot::channel();
        let queue = self.forward_queue(peer)?;
        let queued = Queued { shard, write, reply };
        let wait = async {
            queue.send(queued).await.map_err(|_| unsent("the forwarding queue closed"))?;
            answer.await.map_err(|_| Status::unavailable("the forwarding stream dropped the write"))?
        };
        tokio::time::timeout(timeout, wait)
            .await
            .unwrap_or_else(|_| Err(Status::deadline_exceeded("forwarded write timed out")))
    }

    /// Returns the queue to `peer`, starting its task when there is none (or it ended).
    fn forward_queue(self: &Arc<Self>, peer: u64) -> Result<mpsc::Sender<Queued>, Status> {
        let mut queues = self.forwarders().queues.lock();
        if let Some(q) = queues.get(&peer).filter(|q| !q.is_closed()) {
            return Ok(q.clone());
        }
        let runtime = self.runtime().ok_or_else(|| unsent("the peer router is not running"))?;
        let (tx, rx) = mpsc::channel(self.config().forward_queue);
        queues.insert(peer, tx.clone());
        let router = Arc::clone(self);
        runtime.spawn(async move { router.forward_loop(peer, rx).await });
        Ok(tx)
    }

    /// Sends what `rx` brings to `peer` until the queue is dropped or the peer is forgotten;
    /// a broken stream is opened again with the next write.
    async fn forward_loop(self: Arc<Self>, peer: u64, mut rx: mpsc::Receiver<Queued>) {
        let mut next_id = 0u64;
        while let Some(first) = rx.recv().await {
            let Some(mut client) = self.client(peer) else {
                let _ = first.reply.send(Err(unsent("not a peer of this member")));
                // Fail what is queued too, and end: the next write makes a new queue.
                rx.close();
                while let Ok(q) = rx.try_recv() {
                    let _ = q.reply.send(Err(unsent("not a peer of this member")));
                }
                return;
            };
            let (batches, outbound) = mpsc::channel::<ForwardBatch>(self.config().stream_window);
            let mut waiting: HashMap<u64, Reply> = HashMap::new();
            let batch = self.cut_forward_batch(first, &mut rx, &mut next_id, &mut waiting);
            // The first batch is queued before the call: a stream that cannot be opened fails it
            // with the connection error, which says nothing was sent.
            let _ = batches.try_send(batch);
            let opened = client.forward_writes(tokio_stream::wrappers::ReceiverStream::new(outbound)).await;
            let mut answers = match opened {
                Ok(r) => r.into_inner(),
                Err(status) => {
                    for (_, reply) in waiting.drain() {
                        let _ = reply.send(Err(status.clone()));
                    }
                    continue;
                }
            };
            let ended = loop {
                tokio::select! {
                    queued = rx.recv() => {
                        let Some(first) = queued else { break None };
                        let batch = self.cut_forward_batch(first, &mut rx, &mut next_id, &mut waiting);
                        if batches.send(batch).await.is_err() {
                            break Some(Status::unavailable("the forwarding stream closed"));
                        }
                    }
                    got = answers.message() => match got {
                        Ok(Some(a)) => deliver(a, &mut waiting),
                        Ok(None) => break Some(Status::unavailable("the forwarding stream ended")),
                        Err(status) => break Some(status),
                    },
                }
            };
            // Writes in flight on a broken stream may have been applied: their writers hear
            // an error that is not retried (see the module doc).
            let status = ended.unwrap_or_else(|| Status::unavailable("the forwarding stream ended"));
            for (_, reply) in waiting.drain() {
                let _ = reply.send(Err(in_flight(&status)));
            }
        }
    }

    /// Joins `first` and whatever else is queued into one batch, remembering each writer.
    fn cut_forward_batch(
        &self,
        first: Queued,
        rx: &mut mpsc::Receiver<Queued>,
        next_id: &mut u64,
        waiting: &mut HashMap<u64, Reply>,
    ) -> ForwardBatch {
        let mut items = Vec::new();
        let mut next = Some(first);
        while let Some(q) = next {
            *next_id += 1;
            waiting.insert(*next_id, q.reply);
            items.push(ForwardItem { id: *next_id, shard: q.shard, write: Some(q.write) });
            next = if items.len() < self.config().max_forward_batch { rx.try_recv().ok() } else { None };
        }
        ForwardBatch { cluster_id: self.cluster_id(), items }
    }
}

/// Hands each answer to its writer.
fn deliver(answers: ForwardAnswers, waiting: &mut HashMap<u64, Reply>) {
    for a in answers.answers {
        let Some(reply) = waiting.remove(&a.id) else { continue };
        let result = match a.response {
            Some(r) => Ok(r),
            None => Err(Status::new(Code::from_i32(a.code), a.message)),
        };
        let _ = reply.send(result);
    }
}

/// A failure before anything was sent: worded as a connection failure, which the caller may
/// retry.
fn unsent(why: &str) -> Status {
    Status::unavailable(format!("forwarding: connect: {why}"))
}

/// The status of a write in flight on a stream that broke with `status`: never worded as a
/// connection failure, since the write may have been applied.
fn in_flight(status: &Status) -> Status {
    tracing::debug!(%status, "forwarding stream broke with writes in flight");
    Status::unavailable("forwarding stream broke with the write in flight")
}
