//! [`Allocator`]: the revision counter of a cluster whose shard leaders live on different
//! members, kept by shard 0's leader; a shard leader takes revisions from it one round at a time
//! (`engine/SHARDING.md`, "Multi-member clusters with several shards").
//!
//! Sans-IO: the caller (the network plane for remote shard leaders, the member's own shards
//! in-process) feeds requests, releases, reports, the committed ceiling and the clock, and
//! delivers the grants each call returns. Nothing here blocks, sleeps or talks to the network.
//!
//! * **One round at a time.** A shard leader asks for as many revisions as its round has writes
//!   (`want`); the grant is the range `[start, start + count)` and makes its round the
//!   **holder**. No other range is granted until the holder **releases** it, saying how many
//!   revisions it used (writes that change nothing take none) and at which raft index of its
//!   shard it proposed them; the next grant starts right after the used ones, so revisions stay
//!   dense. A request for no revisions (a linearizable read asking where the cluster stands) is
//!   answered in queue order without becoming the holder.
//! * **Ceiling.** Nothing at or above the **ceiling** is granted. The ceiling is raised by an
//!   entry in shard 0's raft log ([`Allocator::ceiling_wanted`], [`Allocator::ceiling_committed`])
//!   ahead of need, so a new allocator (shard 0's next leader) starts at the ceiling it applied:
//!   above every revision any earlier allocator granted. The revisions between the last one used
//!   and the ceiling are the gap clients see after shard 0's leader changes.
//! * **Abandoned grants.** A holder that does not release within `grant_timeout` (its member
//!   died or is cut off) is abandoned: its whole range is skipped (a gap) and the next request is
//!   granted. Its round may still commit in its shard, at an index nobody has told the
//!   allocator, so the resolved revision stays below the range until the shard says where its
//!   rounds end: a late release, or a **report** from the shard's leader that it is done with
//!   the round (same term) or that it leads in a later term (then every entry of earlier terms
//!   is at or below the index it reports: its term's first entry).
//! * **Resolved facts.** The allocator knows which shard took which revisions and at which raft
//!   index: once every shard reported in this allocator's epoch (bounding its rounds of earlier
//!   epochs), every revision below the first unresolved one (the holder's start or an abandoned
//!   range's start) is at or below `indexes[shard]` of its shard, or never commits. That is a
//!   [`Fact`] as `cluster::resolved` takes it. Raising an index only ever weakens a fact, so
//!   reports and releases raise them freely.
//!
//! ```text
//!   ceiling 1000, next 101
//!   shard 2 asks 3   -> grant [101, 104), holder
//!   shard 1 asks 2   -> queued
//!   read asks 0      -> queued (behind shard 1)
//!   shard 2 releases 2 used at index 57 -> next 103, indexes[2] = 57
//!                    -> shard 1 granted [103, 105), holder; read waits
//!   shard 1 releases 2 at index 40      -> next 105; read granted start 105 (reads at 104)
//!   fact: revision 104, indexes [.., 40, 57, ..]
//! ```

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::resolved::Fact;

/// One round of one shard's leader: the identity a grant, its release and the shard's reports
/// refer to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoundId {
    /// The shard.
    pub shard: u32,
    /// The shard leader's raft term.
    pub term: u64,
    /// The leader's round number, increasing for the life of its shard loop.
    pub round: u64,
}

/// A request for revisions, with whatever the caller needs to deliver the grant (`waiter`).
#[derive(Debug)]
pub struct Request<W> {
    /// The round asking.
    pub id: RoundId,
    /// How many revisions the round may take (its write count); 0 asks only where the cluster
    /// stands.
    pub want: i64,
    /// With `want` 0: hold the counter until released, as a round does (a snapshot taken at
    /// one revision while no shard takes any).
    pub hold: bool,
    /// Where the grant goes.
    pub waiter: W,
}

/// Revisions `[start, start + count)` granted to round `id` by the allocator of `epoch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    /// Shard 0's raft term while the granting member leads it.
    pub epoch: u64,
    /// The round it is for.
    pub id: RoundId,
    /// The first revision granted; `start - 1` is at least every revision of an acknowledged
    /// write.
    pub start: i64,
    /// How many revisions from `start` the round may take.
    pub count: i64,
}

/// A round's return of its grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Release {
    /// The epoch of the grant.
    pub epoch: u64,
    /// The round.
    pub id: RoundId,
    /// Revisions used, from the grant's start (0: the round proposed nothing with revisions).
    pub used: i64,
    /// The raft index of the shard's entry holding them (ignored when `used` is 0).
    pub index: u64,
}

/// A shard leader's word on its rounds: every entry of its shard that holds revisions of a
/// grant of an earlier epoch, of an earlier term, or of its own rounds up to `done_through`, is
/// at or below `index`, or never commits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Report {
    /// The allocator's epoch the leader reports to.
    pub epoch: u64,
    /// The shard.
    pub shard: u32,
    /// The leader's term.
    pub term: u64,
    /// The leader will never use a grant for a round at or below this one.
    pub done_through: u64,
    /// The bound: the leader's last proposed index, at least its term's first entry.
    pub index: u64,
}

/// Tunables of the allocator.
#[derive(Clone, Copy, Debug)]
pub struct AllocatorConfig {
    /// How long a holder may keep its grant before it is abandoned. A round holds it for its
    /// evaluation (CPU only) and one message to the allocator, so 1 s (etcd's election timeout)
    /// is reached by a holder that died or was cut off, or on a machine so overloaded that a
    /// member gets no CPU for that long (then, as an election would, it costs a gap).
    pub grant_timeout: Duration,
    /// How far the ceiling is raised ahead of the counter. Each raise is one entry in shard 0's
    /// log; 1,000 revisions keep that below one entry per thousand writes, and bound the gap a
    /// change of shard 0's leader leaves.
    pub ceiling_step: i64,
    /// How long a remote call to the allocator may take beyond the waits the allocator itself
    /// makes (a grant waits for the holder before it, up to `grant_timeout`). 1 s covers a busy
    /// peer; a call given up is asked again.
    pub call_slack: Duration,
    /// Revisions a round asks for beyond the writes it holds when it asks: writes that arrive
    /// while it waits for the grant join the round instead of waiting for the next one (a round
    /// returns what it did not use, so asking ahead leaves no gap, except when the grant is
    /// abandoned). 256 writes fill a round at the 100 in flight a busy client keeps without
    /// letting an abandoned grant's gap grow far.
    pub ask_ahead: i64,
    /// How soon a round asks again after a request that was not granted (no allocator known,
    /// another epoch, a transport failure). 10 ms is about a heartbeat's tenth, as the network
    /// plane's wait for a leader.
    pub retry_after: Duration,
}

impl AllocatorConfig {
    /// How long a round waits for the answer to its request before it gives it up and asks
    /// again (the answer was lost: a full mailbox drops it): longer than any wait the allocator
    /// makes (twice the grant timeout) plus a call's slack.
    pub fn give_up_after(&self) -> Duration {
        self.grant_timeout * 2 + self.call_slack * 2
    }
}

impl Default for AllocatorConfig {
    fn default() -> Self {
        Self {
            grant_timeout: Duration::from_secs(1),
            ceiling_step: 1_000,
            call_slack: Duration::from_secs(1),
            retry_after: Duration::from_millis(10),
            ask_ahead: 256,
        }
    }
}

/// The counter of one allocator epoch (see the module doc).
#[derive(Debug)]
pub struct Allocator<W> {
    cfg: AllocatorConfig,
    epoch: u64,
    /// The next revision to grant; while a round holds a grant, its start.
    next: i64,
    /// Nothing at or above it is granted (committed in shard 0's log).
    ceiling: i64,
    holder: Option<(Grant, Instant)>,
    queue: VecDeque<Request<W>>,
    /// Grants whose holder never released them and whose shard has not said where they end.
    abandoned: Vec<Grant>,
    /// Per shard: it reported in this epoch (its rounds of earlier epochs are bounded).
    reported: Vec<bool>,
    /// Per shard: the raft index every resolved revision of the shard is at or below.
    indexes: Vec<u64>,
}

impl<W> Allocator<W> {
    /// The allocator of `epoch` over `shards` shards: its first revision is the committed
    /// `ceiling` of earlier epochs, or the one after `last` (the highest revision this member
    /// has seen) when that is higher. It grants nothing until a ceiling above it commits.
    pub fn new(cfg: AllocatorConfig, epoch: u64, shards: usize, ceiling: i64, last: i64) -> Self {
        let base = ceiling.max(last + 1).max(2);
        Self {
            cfg,
            epoch,
            next: base,
            ceiling: base,
            holder: None,
            queue: VecDeque::new(),
            abandoned: Vec::new(),
            reported: vec![false; shards],
            indexes: vec![0; shards],
        }
    }

    /// This allocator's epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The next revision to grant.
    pub fn next(&self) -> i64 {
        self.next
    }

    /// Queues `req` and returns the grants that can be made now, each with its waiter.
    pub fn request(&mut self, req: Request<W>, now: Instant) -> Vec<(W, Grant)> {
        self.queue.push_back(req);
        self.pump(now)
    }

    /// Takes a round's release (a stale epoch's is ignored) and returns the grants that can be
    /// made now.
    pub fn release(&mut self, rel: Release, now: Instant) -> Vec<(W, Grant)> {
        if rel.epoch == self.epoch {
            if let Some((held, _)) = self.holder.filter(|(g, _)| g.id == rel.id) {
                let used = rel.used.clamp(0, held.count);
                self.next = held.start + used;
                self.raise_index(rel.id.shard, rel.index, used);
                self.holder = None;
            } else if let Some(pos) = self.abandoned.iter().position(|g| g.id == rel.id) {
                // A late release: its round's revisions end at this index after all.
                self.abandoned.swap_remove(pos);
                self.raise_index(rel.id.shard, rel.index, rel.used);
            }
        }
        self.pump(now)
    }

    /// Takes a shard leader's report and returns the grants that can be made now.
    pub fn report(&mut self, rep: Report, now: Instant) -> Vec<(W, Grant)> {
        if rep.epoch != self.epoch || rep.shard as usize >= self.reported.len() {
            return self.pump(now);
        }
        let s = rep.shard as usize;
        self.reported[s] = true;
        self.indexes[s] = self.indexes[s].max(rep.index);
        let bounded = |g: &Grant| {
            g.id.shard == rep.shard
                && (rep.term > g.id.term || (rep.term == g.id.term && rep.done_through >= g.id.round))
        };
        self.abandoned.retain(|g| !bounded(g));
        if let Some((held, _)) = self.holder.filter(|(g, _)| g.id.shard == rep.shard && rep.term > g.id.term) {
            // The holder was deposed: its round is bounded by the new leader's first entry, so
            // its range is skipped now rather than after the timeout.
            self.next = held.start + held.count;
            self.holder = None;
        }
        self.pump(now)
    }

    /// Abandons a holder past its deadline and returns the grants that can be made now.
    pub fn tick(&mut self, now: Instant) -> Vec<(W, Grant)> {
        if let Some((held, deadline)) = self.holder {
            if now >= deadline {
                if held.count > 0 {
                    self.abandoned.push(held);
                }
                self.next = held.start + held.count;
                self.holder = None;
            }
        }
        self.pump(now)
    }

    /// A ceiling shard 0 should commit, when the granted revisions come within half a step of
    /// the committed one or a request waits for it; None when there is room.
    pub fn ceiling_wanted(&self) -> Option<i64> {
        let front = self.queue.front().map_or(0, |r| r.want.max(0));
        let blocked = self.next + front > self.ceiling;
        let low = self.ceiling - self.next < self.cfg.ceiling_step / 2;
        (blocked || low).then(|| self.next + front + self.cfg.ceiling_step)
    }

    /// Takes a ceiling committed in shard 0's log and returns the grants that can be made now.
    pub fn ceiling_committed(&mut self, ceiling: i64, now: Instant) -> Vec<(W, Grant)> {
        self.ceiling = self.ceiling.max(ceiling);
        self.pump(now)
    }

    /// The resolved revision: every revision up to it is at or below its shard's index in
    /// [`Allocator::fact`], or never commits. None until every shard reported in this epoch: a
    /// shard that has not may still commit rounds of earlier epochs at indexes this allocator
    /// does not know, so it can say nothing about any revision, not even those below its base.
    pub fn resolved(&self) -> Option<i64> {
        if !self.reported.iter().all(|r| *r) {
            return None;
        }
        let first = self.abandoned.iter().map(|g| g.start).fold(self.next, i64::min);
        Some(first - 1)
    }

    /// What this allocator knows, as a fact for `cluster::resolved` (None: nothing yet).
    pub fn fact(&self) -> Option<Fact> {
        Some(Fact { revision: self.resolved()?, applied: self.indexes.clone() })
    }

    /// Ends the epoch (shard 0's leadership moved): returns the waiters, which are refused.
    pub fn drain(&mut self) -> Vec<W> {
        self.holder = None;
        self.queue.drain(..).map(|r| r.waiter).collect()
    }

    fn raise_index(&mut self, shard: u32, index: u64, used: i64) {
        if used > 0 {
            if let Some(i) = self.indexes.get_mut(shard as usize) {
                *i = (*i).max(index);
            }
        }
    }

    /// Grants from the front of the queue while nothing is held: requests for no revisions at
    /// once, then one holder, if the ceiling leaves room for it.
    fn pump(&mut self, now: Instant) -> Vec<(W, Grant)> {
        let mut out = Vec::new();
        while self.holder.is_none() {
            let Some(front) = self.queue.front() else { break };
            let want = front.want.max(0);
            let hold = want > 0 || front.hold;
            if self.next + want > self.ceiling {
                break;
            }
            let Some(req) = self.queue.pop_front() else { break };
            let grant = Grant { epoch: self.epoch, id: req.id, start: self.next, count: want };
            if hold {
                self.holder = Some((grant, now + self.cfg.grant_timeout));
            }
            out.push((req.waiter, grant));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};

    fn id(shard: u32, term: u64, round: u64) -> RoundId {
        RoundId { shard, term, round }
    }

    fn ask(a: &mut Allocator<&'static str>, who: &'static str, rid: RoundId, want: i64, now: Instant) -> Vec<Grant> {
        a.request(Request { id: rid, want, hold: false, waiter: who }, now).into_iter().map(|(_, g)| g).collect()
    }

    fn open(shards: usize, ceiling: i64, last: i64) -> (Allocator<&'static str>, Instant) {
        let now = ManualClock::new().now();
        let mut a = Allocator::new(AllocatorConfig::default(), 7, shards, ceiling, last);
        let c = a.ceiling_wanted().expect("a new allocator has no room");
        assert!(a.ceiling_committed(c, now).is_empty());
        for s in 0..shards as u32 {
            a.report(Report { epoch: 7, shard: s, term: 1, done_through: 0, index: 1 }, now);
        }
        (a, now)
    }

    #[test]
    fn grants_one_round_at_a_time_and_stay_dense() {
        let (mut a, now) = open(3, 0, 100);
        let g = ask(&mut a, "s2", id(2, 1, 1), 3, now);
        assert_eq!(g, vec![Grant { epoch: 7, id: id(2, 1, 1), start: 101, count: 3 }]);
        assert!(ask(&mut a, "s1", id(1, 1, 1), 2, now).is_empty(), "a round holds the counter");
        assert!(ask(&mut a, "read", id(0, 1, 9), 0, now).is_empty(), "a read waits its turn");
        assert_eq!(a.resolved(), Some(100), "the holder's range is not resolved");
        // Two of three used: the next grant starts right after them.
        let next = a.release(Release { epoch: 7, id: id(2, 1, 1), used: 2, index: 57 }, now);
        assert_eq!(next, vec![("s1", Grant { epoch: 7, id: id(1, 1, 1), start: 103, count: 2 })]);
        let next = a.release(Release { epoch: 7, id: id(1, 1, 1), used: 2, index: 40 }, now);
        assert_eq!(next, vec![("read", Grant { epoch: 7, id: id(0, 1, 9), start: 105, count: 0 })]);
        assert_eq!(a.fact(), Some(Fact { revision: 104, applied: vec![1, 40, 57] }));
        // A round that used nothing leaves the counter where it was.
        ask(&mut a, "s0", id(0, 1, 2), 5, now);
        a.release(Release { epoch: 7, id: id(0, 1, 2), used: 0, index: 0 }, now);
        assert_eq!(a.next(), 105);
        assert_eq!(
            a.fact().expect("every shard reported").applied,
            vec![1, 40, 57],
            "no index for a round that used nothing"
        );
    }

    #[test]
    fn nothing_is_granted_at_or_above_the_ceiling() {
        let now = ManualClock::new().now();
        let cfg = AllocatorConfig { ceiling_step: 10, ..Default::default() };
        let mut a: Allocator<&str> = Allocator::new(cfg, 3, 1, 50, 20);
        assert_eq!(a.next(), 50, "a new epoch starts at the ceiling earlier epochs committed");
        assert!(ask(&mut a, "s0", id(0, 1, 1), 4, now).is_empty(), "no room before a ceiling commits");
        assert_eq!(a.ceiling_wanted(), Some(64));
        let g = a.ceiling_committed(64, now);
        assert_eq!(g[0].1.start, 50);
        a.release(Release { epoch: 3, id: id(0, 1, 1), used: 4, index: 9 }, now);
        assert_eq!(a.ceiling_wanted(), None, "10 left of a step of 10");
        ask(&mut a, "s0", id(0, 1, 2), 8, now);
        a.release(Release { epoch: 3, id: id(0, 1, 2), used: 8, index: 10 }, now);
        assert_eq!(a.ceiling_wanted(), Some(72), "raised ahead of need");
        assert!(ask(&mut a, "s0", id(0, 1, 3), 5, now).is_empty(), "62 + 5 is above 64");
        assert_eq!(a.ceiling_wanted(), Some(77));
        assert_eq!(a.ceiling_committed(77, now).len(), 1);
    }

    #[test]
    fn an_abandoned_grant_is_skipped_and_holds_resolution_until_its_shard_reports() {
        let (mut a, now) = open(2, 0, 10);
        ask(&mut a, "s1", id(1, 4, 8), 3, now);
        ask(&mut a, "s0", id(0, 2, 1), 1, now);
        assert!(a.tick(now + Duration::from_millis(10)).is_empty(), "within the grant timeout");
        let g = a.tick(now + Duration::from_secs(2));
        assert_eq!(g[0].1.start, 14, "the abandoned range [11, 14) is a gap");
        a.release(Release { epoch: 7, id: id(0, 2, 1), used: 1, index: 30 }, now);
        assert_eq!(a.resolved(), Some(10), "shard 1's round may still commit somewhere");
        // The same leader done with an older round says nothing about round 8.
        a.report(Report { epoch: 7, shard: 1, term: 4, done_through: 7, index: 90 }, now);
        assert_eq!(a.resolved(), Some(10));
        // Its shard's next leader bounds every entry of earlier terms.
        a.report(Report { epoch: 7, shard: 1, term: 5, done_through: 0, index: 95 }, now);
        assert_eq!(a.fact(), Some(Fact { revision: 14, applied: vec![30, 95] }));

        // A late release resolves an abandoned grant too.
        ask(&mut a, "s1", id(1, 5, 1), 2, now);
        a.tick(now + Duration::from_secs(4));
        assert_eq!(a.resolved(), Some(14));
        a.release(Release { epoch: 7, id: id(1, 5, 1), used: 1, index: 99 }, now);
        assert_eq!(a.fact(), Some(Fact { revision: 16, applied: vec![30, 99] }));
    }

    #[test]
    fn a_new_leader_of_the_holders_shard_ends_the_hold_at_once() {
        let (mut a, now) = open(2, 0, 10);
        ask(&mut a, "s1", id(1, 4, 8), 3, now);
        assert!(ask(&mut a, "s0", id(0, 2, 1), 1, now).is_empty());
        let g = a.report(Report { epoch: 7, shard: 1, term: 5, done_through: 0, index: 70 }, now);
        assert_eq!(g[0].1.start, 14, "the deposed holder's range is skipped");
        assert_eq!(a.resolved(), Some(13), "and bounded by the new leader's first entry");
    }

    #[test]
    fn a_new_epoch_resolves_nothing_until_every_shard_reported() {
        let now = ManualClock::new().now();
        let mut a: Allocator<&str> = Allocator::new(AllocatorConfig::default(), 9, 2, 2_000, 1_500);
        let c = a.ceiling_wanted().expect("no room yet");
        a.ceiling_committed(c, now);
        ask(&mut a, "s0", id(0, 3, 1), 1, now);
        a.release(Release { epoch: 9, id: id(0, 3, 1), used: 1, index: 5 }, now);
        // Not even 1,999: shard 1 may still commit rounds of the last epoch below 2,000 at
        // indexes nobody told this allocator, and a fact claiming them would let a member
        // release a watch's later events before them.
        assert_eq!(a.fact(), None, "shard 1 may hold rounds of the last epoch");
        a.report(Report { epoch: 8, shard: 1, term: 3, done_through: 4, index: 50 }, now);
        assert_eq!(a.fact(), None, "a report to another epoch is not one to this");
        a.report(Report { epoch: 9, shard: 0, term: 3, done_through: 1, index: 5 }, now);
        a.report(Report { epoch: 9, shard: 1, term: 3, done_through: 4, index: 50 }, now);
        assert_eq!(a.fact(), Some(Fact { revision: 2_000, applied: vec![5, 50] }));
        // A release of another epoch's grant changes nothing.
        a.release(Release { epoch: 8, id: id(0, 3, 1), used: 9, index: 500 }, now);
        assert_eq!(a.next(), 2_001);
        assert!(ask(&mut a, "s1", id(1, 3, 5), 2, now).len() == 1);
        assert_eq!(a.drain(), Vec::<&str>::new());
    }

    #[test]
    fn a_hold_for_no_revisions_stops_every_grant_until_released() {
        let (mut a, now) = open(1, 0, 10);
        let g = a.request(Request { id: id(0, 1, 1), want: 0, hold: true, waiter: "snapshot" }, now);
        assert_eq!(g[0].1.start, 11, "the snapshot is taken at 10");
        assert!(ask(&mut a, "s0", id(0, 1, 2), 1, now).is_empty());
        let g = a.release(Release { epoch: 7, id: id(0, 1, 1), used: 0, index: 0 }, now);
        assert_eq!(g[0].1.start, 11);
    }
}
