//! Writes a member sends on to the member leading their shard, over one
//! long-lived `ForwardWrites` stream per leading member.
//!
//! A unary call per write costs an HTTP/2 stream, its headers and a task on both sides; under
//! load that was most of what a forwarded write cost beyond the write itself. Here each leading
//! member has a queue ([`ClusterConfig::forward_queue`]); the stream's sender takes whatever is
//! queued at once as one [`ForwardBatch`] (up to [`ClusterConfig::max_forward_batch`] writes),
//! and one task per queue opens the stream and hands each answer to its writer as it comes
//! back. A writer whose queue is full waits: the slow-consumer policy here is
//! back-pressure, as the writes are acknowledged to nobody yet and must not be dropped.
//!
//! Failures keep the unary call's meaning, which the caller maps to etcd's errors: a stream
//! that could not be opened carried nothing (safe to retry elsewhere); a stream that broke with
//! writes in flight fails them as "may have been applied".

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use ballast_proto::ballastpb::{ForwardAnswers, ForwardBatch, ForwardItem, ForwardResponse, RaftCommand};
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};
use tokio_stream::Stream;
use tonic::{Code, Status};

use super::forward_queue::{Queued, Reply};
use super::transport::PeerRouter;

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
    async fn forward_loop(self: Arc<Self>, peer: u64, rx: mpsc::Receiver<Queued>) {
        let rx = Arc::new(Mutex::new(rx));
        loop {
            let Some(first) = std::future::poll_fn(|cx| rx.lock().poll_recv(cx)).await else { return };
            let Some(mut client) = self.client(peer) else {
                let _ = first.reply.send(Err(unsent("not a peer of this member")));
                // Fail what is queued too, and end: the next write makes a new queue.
                let mut rx = rx.lock();
                rx.close();
                while let Ok(q) = rx.try_recv() {
                    let _ = q.reply.send(Err(unsent("not a peer of this member")));
                }
                return;
            };
            let in_flight_writes = Arc::new(Mutex::new(InFlight::default()));
            // The first batch goes first on the stream: a stream that cannot be opened fails it
            // with the connection error, which says nothing was sent.
            let batch = {
                let mut waiting = in_flight_writes.lock();
                self.cut_forward_batch(Some(first), &mut rx.lock(), &mut waiting)
            };
            let outbound = ForwardOutbound {
                router: Arc::clone(&self),
                rx: Arc::clone(&rx),
                waiting: Arc::clone(&in_flight_writes),
                first: batch,
            };
            let first_ids = in_flight_writes.lock().next_id;
            let (status, opened) = match client.forward_writes(outbound).await {
                Ok(r) => {
                    let mut answers = r.into_inner();
                    loop {
                        match answers.message().await {
                            Ok(Some(a)) => deliver(a, &mut in_flight_writes.lock().replies),
                            Ok(None) => break (Status::unavailable("the forwarding stream ended"), true),
                            Err(status) => break (status, true),
                        }
                    }
                }
                Err(status) => (status, false),
            };
            let mut waiting = in_flight_writes.lock();
            // The stream of a broken connection may still be held by the HTTP/2 client for a
            // moment: it takes no more writes (set under the lock it cuts batches under).
            waiting.retired = true;
            // Writes in flight on a broken stream may have been applied: their writers hear an
            // error that is not retried (see the module doc). A stream that could not be opened
            // fails its first batch with the connection's error, as a unary call would; what the
            // stream took after that batch may have gone out before the failure.
            if !waiting.replies.is_empty() {
                let broken = in_flight(&status);
                for (id, reply) in waiting.replies.drain() {
                    let failed = if !opened && id <= first_ids { status.clone() } else { broken.clone() };
                    let _ = reply.send(Err(failed));
                }
            }
        }
    }

    /// Joins `first` (or the queue's first write) and whatever else is queued into one batch,
    /// remembering each writer; `None` when nothing is queued.
    fn cut_forward_batch(
        &self,
        first: Option<Queued>,
        rx: &mut mpsc::Receiver<Queued>,
        waiting: &mut InFlight,
    ) -> Option<ForwardBatch> {
        let mut items = Vec::new();
        let mut next = first.or_else(|| rx.try_recv().ok());
        while let Some(q) = next {
            waiting.next_id += 1;
            waiting.replies.insert(waiting.next_id, q.reply);
            items.push(ForwardItem { id: waiting.next_id, shard: q.shard, write: Some(q.write) });
            next = if items.len() < self.config().max_forward_batch { rx.try_recv().ok() } else { None };
        }
        (!items.is_empty()).then(|| ForwardBatch { cluster_id: self.cluster_id(), items })
    }
}

/// The writes sent on one stream and not answered yet.
#[derive(Default)]
struct InFlight {
    next_id: u64,
    replies: HashMap<u64, Reply>,
    /// Set once the stream is given up: its request stream ends.
    retired: bool,
}

/// The request stream of one `ForwardWrites` call. HTTP/2 polls it when the stream has room,
/// and each poll cuts what the queue holds into one batch: the queue's waker is the HTTP/2
/// sender's own, so a queued write goes to the socket with no task between (a task handing
/// batches on through a channel of its own cost one more wake-up and hand-over per batch).
struct ForwardOutbound {
    router: Arc<PeerRouter>,
    /// The member's queue to the peer, shared by its streams in turn.
    rx: Arc<Mutex<mpsc::Receiver<Queued>>>,
    waiting: Arc<Mutex<InFlight>>,
    /// The batch cut before the call.
    first: Option<ForwardBatch>,
}

impl Stream for ForwardOutbound {
    type Item = ForwardBatch;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ForwardBatch>> {
        if let Some(first) = self.first.take() {
            return Poll::Ready(Some(first));
        }
        // The writers are remembered under the lock the loop retires the stream under, so none
        // is added once the loop has failed the stream's writers.
        let mut waiting = self.waiting.lock();
        if waiting.retired {
            return Poll::Ready(None);
        }
        let mut rx = self.rx.lock();
        match rx.poll_recv(cx) {
            Poll::Ready(Some(first)) => Poll::Ready(self.router.cut_forward_batch(Some(first), &mut rx, &mut waiting)),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
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
