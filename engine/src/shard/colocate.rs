//! [`Colocation`]: the shards of a member led together, so one member orders every write.
//!
//! A member's shards take revisions from one in-process counter (`mvcc::RevisionCounter`). In a
//! cluster of several members that counter is only safe to take from while no other member
//! takes revisions for any shard, so a member **evaluates writes only while it leads every
//! shard** and has applied every entry of earlier terms in each (its counter then stands above
//! every committed revision of the cluster: a replayed or applied entry raises it). A member
//! that leads some shards but not all holds their writes; the shards follow shard 0's leader
//! (the *anchor*) by leader transfer, so after an election the cluster settles on one member
//! leading everything within a few heartbeats.
//!
//! Why this is safe without a revision group: two members never evaluate at once in a way that
//! can commit. A member that still believes it leads shard `s` after another member took it over
//! cannot commit in `s`; a member that becomes the evaluator leads every shard in a new term, so
//! no entry it does not hold can commit any more (raft's leader completeness), and everything it
//! holds is applied before it evaluates. The counter is never set back on a member of several
//! shards: revisions a deposed evaluator took for rounds that never committed leave a gap (see
//! `engine/SHARDING.md`).
//!
//! Membership changes are raft conf changes of shard 0 (which carries the member records); the
//! leader of every other shard follows shard 0's configuration one change at a time
//! ([`next_conf_change`]), and MemberAdd and friends answer once every shard has it.
//!
//! ```text
//!   m1: shard0 L  shard1 L  shard2 L  -> all ready: m1 evaluates
//!   kill m1; shard0 elects m2, shard1 m3, shard2 m2
//!   m3 leads shard1, anchor is m2 -> m3 transfers shard1 to m2 -> m2 leads all: m2 evaluates
//! ```

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use ballast_raft::ConfChangeType;
use parking_lot::Mutex;

/// A pending mark's value while the shard has no revision it has not yet published (the marks
/// live here, shared by a member's shards, see `ShardHandle::published_through`).
pub const NOTHING_PENDING: i64 = i64::MAX;

/// What a member's shards tell each other about their leadership.
#[derive(Debug)]
pub struct Colocation {
    /// Per shard: this member leads it and applied every entry of earlier terms.
    ready: Vec<AtomicBool>,
    /// Per shard: the leader's raft ID as this member last saw it (0: none).
    leaders: Vec<AtomicU64>,
    /// Per shard: its pending mark (`ShardHandle::published_through`), shared with its handle.
    marks: Vec<Arc<AtomicI64>>,
    /// Per shard: its voters and learners as this member last applied them.
    confs: Vec<Mutex<Conf>>,
}

/// A group's voters and learners, each sorted.
pub type Conf = (Vec<u64>, Vec<u64>);

/// The next conf change that brings a group from `have` to `want` (shard 0's configuration), one
/// at a time as raft takes them: missing voters first (a learner among them is promoted), then
/// missing learners, then members to remove. Never removes `me`: a member removed from shard 0
/// stops, and another member's leadership removes it from the rest.
pub fn next_conf_change(have: &Conf, want: &Conf, me: u64) -> Option<(ConfChangeType, u64)> {
    let (hv, hl) = have;
    let (wv, wl) = want;
    if let Some(id) = wv.iter().find(|id| !hv.contains(id)) {
        return Some((ConfChangeType::AddNode, *id));
    }
    if let Some(id) = wl.iter().find(|id| !hl.contains(id) && !hv.contains(id)) {
        return Some((ConfChangeType::AddLearnerNode, *id));
    }
    hv.iter()
        .chain(hl)
        .find(|id| **id != me && !wv.contains(id) && !wl.contains(id))
        .map(|id| (ConfChangeType::RemoveNode, *id))
}

impl Colocation {
    /// State for `shards` shards, none ready.
    pub fn new(shards: usize) -> Self {
        Self {
            ready: (0..shards).map(|_| AtomicBool::new(false)).collect(),
            leaders: (0..shards).map(|_| AtomicU64::new(0)).collect(),
            marks: (0..shards).map(|_| Arc::new(AtomicI64::new(NOTHING_PENDING))).collect(),
            confs: (0..shards).map(|_| Mutex::new((Vec::new(), Vec::new()))).collect(),
        }
    }

    /// Records shard `s`'s configuration as this member applied it.
    pub fn set_conf(&self, s: u32, conf: Conf) {
        if let Some(c) = self.confs.get(s as usize) {
            *c.lock() = conf;
        }
    }

    /// Shard `s`'s configuration as this member last recorded it.
    pub fn conf(&self, s: u32) -> Conf {
        self.confs.get(s as usize).map(|c| c.lock().clone()).unwrap_or_default()
    }

    /// True when every shard's configuration here is shard 0's.
    pub fn converged(&self) -> bool {
        let first = self.conf(0);
        self.confs.iter().all(|c| *c.lock() == first)
    }

    /// Shard `s`'s pending mark, for the shard to set and its handle to read.
    pub fn mark(&self, s: u32) -> Arc<AtomicI64> {
        self.marks.get(s as usize).map_or_else(|| Arc::new(AtomicI64::new(NOTHING_PENDING)), Arc::clone)
    }

    /// The revision up to which every shard of the member has published every event it will
    /// ever have, given `last`, the counter read before this call: no shard has a round in
    /// flight at or below it. A watcher of one shard is never moved past it, so revisions a
    /// round in flight on another shard took, should that round never commit and the numbers
    /// be taken again by the next evaluating member, are still delivered.
    pub fn published_through(&self, last: i64) -> i64 {
        self.marks
            .iter()
            .map(|m| match m.load(Ordering::SeqCst) {
                NOTHING_PENDING => last,
                mark => last.min(mark - 1),
            })
            .min()
            .unwrap_or(last)
    }

    /// Records shard `s`'s leadership after one of its rounds.
    pub fn note(&self, s: u32, leader: u64, ready: bool) {
        if let (Some(r), Some(l)) = (self.ready.get(s as usize), self.leaders.get(s as usize)) {
            l.store(leader, Ordering::SeqCst);
            r.store(ready, Ordering::SeqCst);
        }
    }

    /// True while this member leads every shard with its earlier terms applied: it may take
    /// revisions.
    pub fn all_ready(&self) -> bool {
        self.ready.iter().all(|r| r.load(Ordering::SeqCst))
    }

    /// Shard 0's leader as last seen (0: none), which every other shard's leadership follows.
    pub fn anchor(&self) -> u64 {
        self.leaders.first().map_or(0, |l| l.load(Ordering::SeqCst))
    }

    /// Every shard's leader as last seen (0: none), by shard.
    pub fn leaders(&self) -> Vec<u64> {
        self.leaders.iter().map(|l| l.load(Ordering::SeqCst)).collect()
    }

    /// The number of shards.
    pub fn shards(&self) -> usize {
        self.ready.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_when_every_shard_is() {
        let c = Colocation::new(3);
        assert!(!c.all_ready());
        c.note(0, 7, true);
        c.note(1, 7, true);
        assert!(!c.all_ready(), "shard 2 is not led here yet");
        assert_eq!(c.anchor(), 7);
        c.note(2, 7, true);
        assert!(c.all_ready());
        c.note(1, 9, false);
        assert!(!c.all_ready(), "losing one shard stops evaluation everywhere");
        c.note(5, 1, true);
        assert_eq!(c.shards(), 3, "an unknown shard is ignored");
    }

    #[test]
    fn conf_changes_follow_shard_0_one_at_a_time() {
        let want = (vec![1, 2, 4], vec![]);
        // A learner among the wanted voters is promoted first, then the removed member goes.
        let have = (vec![1, 2, 3], vec![4]);
        assert_eq!(next_conf_change(&have, &want, 1), Some((ConfChangeType::AddNode, 4)));
        let have = (vec![1, 2, 3, 4], vec![]);
        assert_eq!(next_conf_change(&have, &want, 1), Some((ConfChangeType::RemoveNode, 3)));
        assert_eq!(next_conf_change(&want, &want, 1), None);
        let learner = (vec![1, 2], vec![5]);
        assert_eq!(next_conf_change(&(vec![1, 2], vec![]), &learner, 1), Some((ConfChangeType::AddLearnerNode, 5)));
        // The leader never removes itself.
        assert_eq!(next_conf_change(&(vec![1, 2], vec![]), &(vec![2], vec![]), 1), None);
    }

    #[test]
    fn published_through_stops_below_every_round_in_flight() {
        let c = Colocation::new(2);
        assert_eq!(c.published_through(10), 10);
        c.mark(1).store(8, Ordering::SeqCst);
        assert_eq!(c.published_through(10), 7);
        c.mark(0).store(5, Ordering::SeqCst);
        assert_eq!(c.published_through(10), 4);
        c.mark(0).store(NOTHING_PENDING, Ordering::SeqCst);
        c.mark(1).store(NOTHING_PENDING, Ordering::SeqCst);
        assert_eq!(c.published_through(12), 12);
    }
}
