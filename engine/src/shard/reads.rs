//! [`ReadQueue`]: reads of a shard with followers, waiting until they may be served.
//!
//! A linearizable read needs two things: a **read index** (the leader's commit index at a
//! moment after the read arrived, confirmed by a quorum, so no newer leader can have committed
//! more), applied here; and a state with **nothing uncommitted** in it (the leader evaluates
//! writes before they commit). A serializable read needs only the second. The shard asks for
//! one read index per round for every read that arrived in it ([`ReadQueue::request_index`]),
//! files the batch under its index when raft confirms it ([`ReadQueue::confirmed`]), and serves
//! the batches whose index is applied ([`ReadQueue::take_ready`]). A request lost with a
//! leader change is asked again after an election timeout ([`ReadQueue::retry_stale`]); a read
//! whose client gave up is dropped then.
//!
//! A request's context must be unique across the members: the leader's raft keeps one pending
//! request per context and silently drops a second one with the same bytes, so two members
//! asking with equal contexts at once would leave one waiting a whole retry interval. A context
//! is therefore the member's ID and a counter started at a random value (so a restarted member
//! does not reuse its earlier contexts), as etcd builds its request IDs from its member ID.

use std::time::{Duration, Instant};

use ballast_proto::etcdserverpb::{RangeRequest, RangeResponse, TxnRequest, TxnResponse};

use super::msg::Reply;
use crate::error::EngineError;

/// A read waiting to be served.
#[derive(Debug)]
pub(crate) enum PendingRead {
    /// A Range.
    Range(RangeRequest, Reply<RangeResponse>),
    /// A Txn that cannot write.
    Txn(TxnRequest, Reply<TxnResponse>),
}

impl PendingRead {
    fn is_closed(&self) -> bool {
        match self {
            PendingRead::Range(_, r) => r.is_closed(),
            PendingRead::Txn(_, r) => r.is_closed(),
        }
    }

    fn fail(self, e: EngineError) {
        match self {
            PendingRead::Range(_, r) => {
                let _ = r.send(Err(e));
            }
            PendingRead::Txn(_, r) => {
                let _ = r.send(Err(e));
            }
        }
    }
}

/// Reads waiting for a read index or for their index to be applied.
#[derive(Debug)]
pub(crate) struct ReadQueue {
    /// Arrived this round; a read index is asked for them at the end of the intake.
    unsent: Vec<PendingRead>,
    /// Asked for: (request context, when, reads).
    sent: Vec<(u64, Instant, Vec<PendingRead>)>,
    /// Confirmed at an index (0 for serializable reads).
    ready: Vec<(u64, Vec<PendingRead>)>,
    /// This member's ID: the first half of every context it asks with.
    member_id: u64,
    next_ctx: u64,
}

/// What asks raft for a read index (the shard's raft node; a fake in tests).
pub(crate) trait ReadIndex {
    fn read_index(&mut self, ctx: Vec<u8>);
}

impl<L: ballast_raft::LogStore, S: ballast_raft::StateMachine, T: ballast_raft::Transport> ReadIndex
    for ballast_raft::RaftNode<L, S, T>
{
    fn read_index(&mut self, ctx: Vec<u8>) {
        ballast_raft::RaftNode::read_index(self, ctx);
    }
}

impl ReadQueue {
    /// An empty queue for the member `member_id`.
    pub(crate) fn new(member_id: u64) -> Self {
        Self {
            unsent: Vec::new(),
            sent: Vec::new(),
            ready: Vec::new(),
            member_id,
            // Random, so a restarted member does not ask again with a context of its earlier life.
            next_ctx: rand::random::<u64>(),
        }
    }

    /// The bytes raft carries for the request `ctx` of this member.
    fn context(&self, ctx: u64) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(16);
        bytes.extend_from_slice(&self.member_id.to_be_bytes());
        bytes.extend_from_slice(&ctx.to_be_bytes());
        bytes
    }

    /// Queues a read; a serializable one needs no read index.
    pub(crate) fn add(&mut self, read: PendingRead, serializable: bool) {
        if serializable {
            match self.ready.first_mut() {
                Some((0, reads)) => reads.push(read),
                _ => self.ready.insert(0, (0, vec![read])),
            }
        } else {
            self.unsent.push(read);
        }
    }

    /// Asks for one read index for every read that arrived since the last call.
    pub(crate) fn request_index(&mut self, raft: &mut impl ReadIndex, now: Instant) {
        if self.unsent.is_empty() {
            return;
        }
        self.next_ctx = self.next_ctx.wrapping_add(1);
        raft.read_index(self.context(self.next_ctx));
        self.sent.push((self.next_ctx, now, std::mem::take(&mut self.unsent)));
    }

    /// Files the batches raft confirmed: (request context, read index).
    pub(crate) fn confirmed(&mut self, states: Vec<(Vec<u8>, u64)>) {
        for (ctx, index) in states {
            let Some((member, ctx)) = ctx.split_first_chunk::<8>() else { continue };
            let Ok(ctx) = <[u8; 8]>::try_from(ctx).map(u64::from_be_bytes) else { continue };
            if u64::from_be_bytes(*member) != self.member_id {
                continue;
            }
            if let Some(pos) = self.sent.iter().position(|(c, _, _)| *c == ctx) {
                let (_, _, reads) = self.sent.swap_remove(pos);
                self.ready.push((index, reads));
            }
        }
    }

    /// Takes the reads whose index is applied (the caller checked the state holds nothing
    /// uncommitted).
    pub(crate) fn take_ready(&mut self, applied: u64) -> Vec<PendingRead> {
        if self.ready.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::new();
        self.ready.retain_mut(|(index, reads)| {
            if *index <= applied {
                out.append(reads);
                false
            } else {
                true
            }
        });
        out
    }

    /// Asks again for the reads whose request is older than `after` (lost with a leader
    /// change or while there was none), dropping those whose client is gone.
    pub(crate) fn retry_stale(&mut self, now: Instant, after: Duration) {
        let (stale, fresh): (Vec<_>, Vec<_>) =
            self.sent.drain(..).partition(|(_, at, _)| now.saturating_duration_since(*at) >= after);
        self.sent = fresh;
        for (_, _, reads) in stale {
            self.unsent.extend(reads.into_iter().filter(|r| !r.is_closed()));
        }
    }

    /// Fails every waiting read with the error `make` builds.
    pub(crate) fn fail_all(&mut self, make: impl Fn() -> EngineError) {
        let all = self
            .unsent
            .drain(..)
            .chain(self.sent.drain(..).flat_map(|(_, _, r)| r))
            .chain(self.ready.drain(..).flat_map(|(_, r)| r));
        for read in all {
            read.fail(make());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, SystemClock};

    #[derive(Default)]
    struct Asked(Vec<Vec<u8>>);

    impl ReadIndex for Asked {
        fn read_index(&mut self, ctx: Vec<u8>) {
            self.0.push(ctx);
        }
    }

    fn range() -> (PendingRead, tokio::sync::oneshot::Receiver<crate::Result<RangeResponse>>) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        (PendingRead::Range(RangeRequest::default(), tx), rx)
    }

    #[test]
    fn a_round_asks_once_and_its_reads_wait_for_their_index() {
        let mut q = ReadQueue::new(1);
        let mut raft = Asked::default();
        let now = SystemClock.now();
        let (a, _ra) = range();
        let (b, _rb) = range();
        q.add(a, false);
        q.add(b, false);
        q.request_index(&mut raft, now);
        q.request_index(&mut raft, now);
        assert_eq!(raft.0.len(), 1, "one read index for the round's reads");
        assert!(q.take_ready(100).is_empty(), "nothing is served before its index is confirmed");
        q.confirmed(vec![(raft.0[0].clone(), 7)]);
        assert!(q.take_ready(6).is_empty(), "index 7 is not applied at 6");
        assert_eq!(q.take_ready(7).len(), 2);
    }

    #[test]
    fn serializable_reads_need_no_index_and_lost_requests_are_asked_again() {
        let mut q = ReadQueue::new(1);
        let mut raft = Asked::default();
        let now = SystemClock.now();
        let (s, _rs) = range();
        q.add(s, true);
        assert_eq!(q.take_ready(0).len(), 1);
        let (a, ra) = range();
        let (b, rb) = range();
        q.add(a, false);
        q.add(b, false);
        q.request_index(&mut raft, now);
        drop(rb); // this client gave up
        q.retry_stale(now + Duration::from_millis(10), Duration::from_secs(1));
        q.request_index(&mut raft, now);
        assert_eq!(raft.0.len(), 1, "a recent request is not asked again");
        q.retry_stale(now + Duration::from_secs(2), Duration::from_secs(1));
        q.request_index(&mut raft, now + Duration::from_secs(2));
        assert_eq!(raft.0.len(), 2, "a stale request is asked again");
        q.confirmed(vec![(raft.0[0].clone(), 1)]);
        assert!(q.take_ready(10).is_empty(), "the first request's answer no longer counts");
        q.confirmed(vec![(raft.0[1].clone(), 3)]);
        assert_eq!(q.take_ready(10).len(), 1, "only the read whose client waits is served");
        drop(ra);
    }

    #[test]
    fn members_ask_with_contexts_no_other_member_uses() {
        // Two members that have each asked the same number of times must still differ: the
        // leader drops a request whose context it already holds.
        let now = SystemClock.now();
        let (mut a, mut b) = (ReadQueue::new(1), ReadQueue::new(2));
        b.next_ctx = a.next_ctx;
        let (mut asked_a, mut asked_b) = (Asked::default(), Asked::default());
        let (ra, _wa) = range();
        let (rb, _wb) = range();
        a.add(ra, false);
        b.add(rb, false);
        a.request_index(&mut asked_a, now);
        b.request_index(&mut asked_b, now);
        assert_ne!(asked_a.0[0], asked_b.0[0]);
        a.confirmed(vec![(asked_b.0[0].clone(), 5)]);
        assert!(a.take_ready(10).is_empty(), "another member's answer is not this member's");
        a.confirmed(vec![(asked_a.0[0].clone(), 5)]);
        assert_eq!(a.take_ready(10).len(), 1);
    }
}
