//! `RevisionLinks`: a member's one long-lived `Peer.Revisions` stream to the member running
//! the revision allocator, carrying the requests, releases and reports of all its shards.
//!
//! A unary call per request and per release cost an HTTP/2 stream, its headers and a task on
//! both sides, twice per round of every shard led away from the allocator, plus a `Resolved`
//! call per fact; that was most of what spread leaders cost beyond the writes themselves. Here
//! each allocator member has a queue ([`ClusterConfig::revision_queue`]) and one task that takes
//! whatever is queued at once (a round's release, another shard's request, a report) and sends
//! it as one [`RevisionBatch`], in queue order; grants come back as they are made, and the
//! allocator's resolved facts come down the same stream.
//!
//! Failures keep the unary calls' meaning: a request whose stream could not be opened or broke
//! is answered with no grant (its round asks again); a release or report lost with a broken
//! stream is covered as a lost call was, by the allocator's grant timeout and the shard's next
//! report. A grant that comes back for a request its round gave up on is released unused.
//!
//! [`ClusterConfig::revision_queue`]: super::ClusterConfig::revision_queue

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use ballast_proto::ballastpb::{
    revision_item, ReleaseRequest, ReportRequest, ReserveRequest, ReserveResponse, RevisionAnswers, RevisionBatch,
    RevisionItem,
};
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};

use super::resolved::Fact;
use super::transport::PeerRouter;

/// Where a request's grant goes (None: refused or lost).
pub(super) type GrantReply = oneshot::Sender<Option<ReserveResponse>>;

/// What takes the facts the allocator sends down a stream.
pub type FactSink = Box<dyn Fn(Fact) + Send + Sync>;

/// One message for the allocator.
pub(super) enum Up {
    /// A round's request; its release goes back unused if nobody takes the grant.
    Reserve(ReserveRequest, GrantReply),
    Release(ReleaseRequest),
    Report(ReportRequest),
}

/// A request sent and not yet answered.
struct Waiting {
    req: ReserveRequest,
    reply: GrantReply,
}

/// The streams of a member to allocator members, one queue and task per member.
pub(super) struct RevisionLinks {
    router: Arc<PeerRouter>,
    me: u64,
    queues: Mutex<HashMap<u64, mpsc::Sender<Up>>>,
    facts: OnceLock<FactSink>,
}

impl std::fmt::Debug for RevisionLinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RevisionLinks").field("peers", &self.queues.lock().len()).finish()
    }
}

impl RevisionLinks {
    /// The links of member `me` (raft ID) over `router`'s connections.
    pub(super) fn new(router: Arc<PeerRouter>, me: u64) -> Self {
        Self { router, me, queues: Mutex::new(HashMap::new()), facts: OnceLock::new() }
    }

    /// Sets what takes the facts that come down the streams (set once).
    pub(super) fn set_fact_sink(&self, sink: FactSink) {
        let _ = self.facts.set(sink);
    }

    /// Queues `up` for `peer`. A full queue refuses a request at once (its round asks again)
    /// and makes a release or report wait for room on the runtime.
    pub(super) fn send(self: &Arc<Self>, runtime: &tokio::runtime::Handle, peer: u64, up: Up) {
        let queue = self.queue(runtime, peer);
        match queue.try_send(up) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(Up::Reserve(_, reply))) => {
                let _ = reply.send(None);
            }
            Err(mpsc::error::TrySendError::Full(up)) => {
                runtime.spawn(async move {
                    let _ = queue.send(up).await;
                });
            }
            Err(mpsc::error::TrySendError::Closed(up)) => refuse(up),
        }
    }

    /// Returns the queue to `peer`, starting its task when there is none (or it ended).
    fn queue(self: &Arc<Self>, runtime: &tokio::runtime::Handle, peer: u64) -> mpsc::Sender<Up> {
        let mut queues = self.queues.lock();
        if let Some(q) = queues.get(&peer).filter(|q| !q.is_closed()) {
            return q.clone();
        }
        let (tx, rx) = mpsc::channel(self.router.config().revision_queue);
        queues.insert(peer, tx.clone());
        let links = Arc::clone(self);
        runtime.spawn(async move { links.run(peer, rx).await });
        tx
    }

    /// Sends what `rx` brings to `peer` until the queue is dropped or the peer is forgotten; a
    /// broken stream is opened again with the next message.
    async fn run(self: Arc<Self>, peer: u64, mut rx: mpsc::Receiver<Up>) {
        let mut next_id = 0u64;
        while let Some(first) = rx.recv().await {
            let Some(mut client) = self.router.client(peer) else {
                refuse(first);
                rx.close();
                while let Ok(up) = rx.try_recv() {
                    refuse(up);
                }
                return;
            };
            let (batches, outbound) = mpsc::channel::<RevisionBatch>(self.router.config().stream_window);
            let mut waiting: HashMap<u64, Waiting> = HashMap::new();
            let batch = self.cut(first, &mut rx, &mut next_id, &mut waiting);
            // Queued before the call, so a stream that cannot be opened refuses its requests.
            let _ = batches.try_send(batch);
            let opened = client.revisions(tokio_stream::wrappers::ReceiverStream::new(outbound)).await;
            let mut answers = match opened {
                Ok(r) => r.into_inner(),
                Err(status) => {
                    tracing::debug!(%status, "revision stream not opened");
                    for (_, w) in waiting.drain() {
                        let _ = w.reply.send(None);
                    }
                    continue;
                }
            };
            loop {
                tokio::select! {
                    queued = rx.recv() => {
                        let Some(first) = queued else { break };
                        let batch = self.cut(first, &mut rx, &mut next_id, &mut waiting);
                        if batches.send(batch).await.is_err() {
                            break;
                        }
                    }
                    got = answers.message() => match got {
                        Ok(Some(a)) => {
                            let unclaimed = self.deliver(a, &mut waiting);
                            if !unclaimed.is_empty() && batches.send(self.batch(unclaimed)).await.is_err() {
                                break;
                            }
                        }
                        Ok(None) => break,
                        Err(status) => {
                            tracing::debug!(%status, "revision stream broke");
                            break;
                        }
                    },
                }
            }
            for (_, w) in waiting.drain() {
                let _ = w.reply.send(None);
            }
        }
    }

    /// Joins `first` and whatever else is queued into one batch, remembering each request.
    fn cut(
        &self,
        first: Up,
        rx: &mut mpsc::Receiver<Up>,
        next_id: &mut u64,
        waiting: &mut HashMap<u64, Waiting>,
    ) -> RevisionBatch {
        let mut items = Vec::new();
        let mut next = Some(first);
        while let Some(up) = next {
            let item = match up {
                Up::Reserve(req, reply) => {
                    *next_id += 1;
                    waiting.insert(*next_id, Waiting { req, reply });
                    RevisionItem { id: *next_id, item: Some(revision_item::Item::Reserve(req)) }
                }
                Up::Release(r) => RevisionItem { id: 0, item: Some(revision_item::Item::Release(r)) },
                Up::Report(r) => RevisionItem { id: 0, item: Some(revision_item::Item::Report(r)) },
            };
            items.push(item);
            next = if items.len() < self.router.config().max_revision_batch { rx.try_recv().ok() } else { None };
        }
        self.batch(items)
    }

    fn batch(&self, items: Vec<RevisionItem>) -> RevisionBatch {
        RevisionBatch { cluster_id: self.router.cluster_id(), from: self.me, items }
    }

    /// Hands each grant to its round and the fact to the sink; returns the releases of grants
    /// whose rounds gave up on them.
    fn deliver(&self, a: RevisionAnswers, waiting: &mut HashMap<u64, Waiting>) -> Vec<RevisionItem> {
        let mut unclaimed = Vec::new();
        for answer in a.answers {
            let Some(w) = waiting.remove(&answer.id) else { continue };
            let Some(granted) = answer.granted else {
                let _ = w.reply.send(None);
                continue;
            };
            let epoch = granted.epoch;
            if w.reply.send(Some(granted)).is_err() {
                let rel = ReleaseRequest { cluster_id: w.req.cluster_id, epoch, id: w.req.id, used: 0, index: 0 };
                unclaimed.push(RevisionItem { id: 0, item: Some(revision_item::Item::Release(rel)) });
            }
        }
        if let (Some(f), Some(sink)) = (a.fact, self.facts.get()) {
            sink(Fact { revision: f.revision, applied: f.applied_index });
        }
        unclaimed
    }
}

/// Answers a request that could not be sent with no grant; a release or report is dropped.
fn refuse(up: Up) {
    if let Up::Reserve(_, reply) = up {
        let _ = reply.send(None);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicI64, Ordering};

    use ballast_proto::ballastpb::{ResolvedRevision, RevisionAnswer, RoundId};

    use super::*;
    use crate::cluster::ClusterConfig;

    fn reserve(round: u64) -> ReserveRequest {
        let id = RoundId { shard: 2, term: 3, round };
        ReserveRequest { cluster_id: 9, epoch: 5, id: Some(id), want: 4, hold: false }
    }

    fn grant(id: u64, start: i64) -> RevisionAnswer {
        let granted = ReserveResponse { epoch: 5, start, count: 4, resolved: start - 1, applied_index: vec![1, 2] };
        RevisionAnswer { id, granted: Some(granted) }
    }

    #[test]
    fn a_batch_keeps_queue_order_and_a_grant_nobody_takes_is_released() {
        let router = PeerRouter::new(1, 9, &[(1, "http://127.0.0.1:1".into())], ClusterConfig::default());
        let links = RevisionLinks::new(router, 1);
        let seen = Arc::new(AtomicI64::new(0));
        let sink = Arc::clone(&seen);
        links.set_fact_sink(Box::new(move |f| sink.store(f.revision, Ordering::SeqCst)));

        let (tx, mut rx) = mpsc::channel(8);
        let (taken, mut granted) = oneshot::channel();
        let (gone, dropped) = oneshot::channel();
        let (refused, mut no) = oneshot::channel();
        let release = ReleaseRequest { cluster_id: 9, epoch: 5, id: reserve(0).id, used: 2, index: 40 };
        tx.try_send(Up::Reserve(reserve(2), gone)).expect("room");
        tx.try_send(Up::Reserve(reserve(3), refused)).expect("room");
        let (mut next_id, mut waiting) = (0, HashMap::new());
        // A round's release and the next requests travel together, the release first.
        let batch = links.cut(Up::Release(release), &mut rx, &mut next_id, &mut waiting);
        tx.try_send(Up::Reserve(reserve(4), taken)).expect("room");
        let second = links.cut(rx.try_recv().expect("queued"), &mut rx, &mut next_id, &mut waiting);
        assert_eq!((batch.cluster_id, batch.from, batch.items.len(), second.items.len()), (9, 1, 3, 1));
        assert!(matches!(batch.items[0].item, Some(revision_item::Item::Release(r)) if r == release));
        assert_eq!(batch.items.iter().map(|i| i.id).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert_eq!(waiting.len(), 3);

        drop(dropped);
        let fact = ResolvedRevision { cluster_id: 9, revision: 77, applied_index: vec![3, 4] };
        let answers = RevisionAnswers {
            answers: vec![grant(1, 100), RevisionAnswer { id: 2, granted: None }, grant(3, 104)],
            fact: Some(fact),
        };
        let unclaimed = links.deliver(answers, &mut waiting);
        assert!(waiting.is_empty());
        assert_eq!(granted.try_recv().expect("answered").map(|g| g.start), Some(104));
        assert_eq!(no.try_recv().expect("answered"), None, "a refusal is no grant");
        // The grant of the round that gave up goes back unused, for that round.
        let want = ReleaseRequest { cluster_id: 9, epoch: 5, id: reserve(2).id, used: 0, index: 0 };
        assert_eq!(unclaimed.len(), 1);
        assert!(matches!(unclaimed[0].item, Some(revision_item::Item::Release(r)) if r == want));
        assert_eq!(seen.load(Ordering::SeqCst), 77, "the fact reached the sink");
    }
}
