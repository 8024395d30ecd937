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
//! ```text
//!   m1: shard0 L  shard1 L  shard2 L  -> all ready: m1 evaluates
//!   kill m1; shard0 elects m2, shard1 m3, shard2 m2
//!   m3 leads shard1, anchor is m2 -> m3 transfers shard1 to m2 -> m2 leads all: m2 evaluates
//! ```

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use super::NOTHING_PENDING;

/// What a member's shards tell each other about their leadership.
#[derive(Debug)]
pub struct Colocation {
    /// Per shard: this member leads it and applied every entry of earlier terms.
    ready: Vec<AtomicBool>,
    /// Per shard: the leader's raft ID as this member last saw it (0: none).
    leaders: Vec<AtomicU64>,
    /// Per shard: its pending mark (`ShardHandle::published_through`), shared with its handle.
    marks: Vec<Arc<AtomicI64>>,
}

impl Colocation {
    /// State for `shards` shards, none ready.
    pub fn new(shards: usize) -> Self {
        Self {
            ready: (0..shards).map(|_| AtomicBool::new(false)).collect(),
            leaders: (0..shards).map(|_| AtomicU64::new(0)).collect(),
            marks: (0..shards).map(|_| Arc::new(AtomicI64::new(NOTHING_PENDING))).collect(),
        }
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
