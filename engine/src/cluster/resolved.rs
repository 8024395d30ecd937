//! [`Resolution`]: the revision up to which a member that does not evaluate writes holds every
//! write of every shard, for reads and watches over several shards on it.
//!
//! In a cluster of several shards one member evaluates every write (`shard::colocate`); the
//! others apply each shard's log on its own schedule, so a revision `r` may be applied by shard
//! B before `r - 1` by shard A. The evaluating member knows, for a revision `G`, that every
//! revision up to `G` is applied in its shards, and at which raft index of each shard (its
//! applied indices read after `G`). It sends that as a **fact** — `(G, [index per shard])` — to
//! the other members every `ClusterConfig::resolved_interval` while `G` moves. A member that has
//! applied every shard up to the fact's indices holds every revision up to `G`: it may read at
//! `G` across shards and release watch events up to `G`.
//!
//! A fact stays true once made (revisions up to `G` that were not committed then never will be:
//! the evaluator leads every shard, so no entry it does not hold commits), so facts from an
//! evaluator that has since been deposed are still used; they only grow stale.
//!
//! ```text
//!   fact (G=120, [shard0: 40, shard1: 37])
//!   this member applied shard0 to 41, shard1 to 36 -> resolved stays at the previous fact
//!   shard1 applies 37                                -> resolved = 120
//! ```

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, Ordering};

use parking_lot::Mutex;

/// One fact: every revision up to `revision` is at or below these raft indexes of the shards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fact {
    /// The resolved revision.
    pub revision: i64,
    /// Per shard, the raft index an applied state must reach to hold every revision up to
    /// `revision`.
    pub applied: Vec<u64>,
}

/// Facts waiting for this member's shards to apply their indexes, and the revision resolved so
/// far.
#[derive(Debug)]
pub struct Resolution {
    waiting: Mutex<VecDeque<Fact>>,
    resolved: AtomicI64,
    capacity: usize,
}

impl Resolution {
    /// Keeps at most `capacity` facts waiting; a newer fact replaces the newest waiting one when
    /// full (it says more, and the older ones before it still resolve as the shards apply).
    pub fn new(capacity: usize) -> Self {
        Self { waiting: Mutex::new(VecDeque::new()), resolved: AtomicI64::new(1), capacity: capacity.max(1) }
    }

    /// Takes a fact sent by the evaluating member (or made here while this member evaluates).
    pub fn offer(&self, fact: Fact) {
        if fact.revision <= self.resolved.load(Ordering::SeqCst) {
            return;
        }
        let mut waiting = self.waiting.lock();
        if waiting.back().is_some_and(|b| b.revision >= fact.revision) {
            return;
        }
        if waiting.len() >= self.capacity {
            waiting.pop_back();
        }
        waiting.push_back(fact);
    }

    /// Raises the resolved revision directly: this member evaluates and knows it holds every
    /// revision up to `revision`.
    pub fn raise(&self, revision: i64) {
        self.resolved.fetch_max(revision, Ordering::SeqCst);
    }

    /// Returns the revision up to which this member's shards hold every write, given each
    /// shard's applied raft index (`applied(shard)`).
    pub fn resolved(&self, applied: impl Fn(usize) -> u64) -> i64 {
        let mut waiting = self.waiting.lock();
        while let Some(front) = waiting.front() {
            if !front.applied.iter().enumerate().all(|(s, i)| applied(s) >= *i) {
                break;
            }
            self.resolved.fetch_max(front.revision, Ordering::SeqCst);
            waiting.pop_front();
        }
        self.resolved.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fact_resolves_once_every_shard_applied_its_index() {
        let r = Resolution::new(8);
        r.offer(Fact { revision: 120, applied: vec![40, 37] });
        r.offer(Fact { revision: 130, applied: vec![41, 40] });
        assert_eq!(r.resolved(|s| [41, 36][s]), 1, "shard 1 has not applied index 37");
        assert_eq!(r.resolved(|s| [41, 37][s]), 120);
        assert_eq!(r.resolved(|s| [41, 39][s]), 120);
        assert_eq!(r.resolved(|s| [41, 40][s]), 130);
        r.offer(Fact { revision: 125, applied: vec![1, 1] });
        assert_eq!(r.resolved(|_| 100), 130, "an older fact never lowers it");
    }

    #[test]
    fn a_full_queue_keeps_the_newest_fact() {
        let r = Resolution::new(2);
        for (rev, i) in [(10, 1), (20, 2), (30, 3)] {
            r.offer(Fact { revision: rev, applied: vec![i] });
        }
        assert_eq!(r.resolved(|_| 1), 10);
        assert_eq!(r.resolved(|_| 2), 10, "the fact at 20 was replaced by the one at 30");
        assert_eq!(r.resolved(|_| 3), 30);
        r.raise(50);
        assert_eq!(r.resolved(|_| 0), 50);
    }
}
