//! [`RevisionCounter`]: the one revision sequence every shard of a member writes with.
//!
//! etcd has one store revision; Ballast keeps that contract with several shards by handing out
//! revisions from one counter (see `engine/SHARDING.md`). A shard takes a revision only when the
//! write it evaluates changes a key, so a client alone on the cluster sees dense revisions, and it
//! records the revision in the write's raft entry, so a replay after a crash gives an
//! acknowledged write the revision it was acknowledged with.
//!
//! The counter also tells every shard the member's current revision: a Range on one shard reports
//! the counter's value in its header (at least the revision of every write acknowledged before
//! the read), and a read at an older revision is answered from the shard's own history, since no
//! other shard's revision changes its keys.

use std::sync::atomic::{AtomicI64, Ordering};

/// The member's revision counter, shared by its shards (`Arc`).
///
/// All operations are sequentially consistent: the resolved-revision bookkeeping that cross-shard
/// reads need orders a shard's announcement of a pending revision before it takes one.
#[derive(Debug)]
pub struct RevisionCounter {
    last: AtomicI64,
}

impl RevisionCounter {
    /// A counter whose last revision is `last` (etcd's store starts at revision 1).
    pub fn new(last: i64) -> Self {
        Self { last: AtomicI64::new(last.max(1)) }
    }

    /// Returns the last revision handed out (or observed).
    pub fn last(&self) -> i64 {
        self.last.load(Ordering::SeqCst)
    }

    /// Hands out the next revision.
    pub fn allocate(&self) -> i64 {
        self.last.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Sets the counter back to `last`: a leader that steps down with revisions handed out to
    /// writes that never committed reopens its state and counts again from what is applied
    /// (only a member whose shards share no counter with shards led elsewhere may).
    pub fn reset(&self, last: i64) {
        self.last.store(last.max(1), Ordering::SeqCst);
    }

    /// Raises the counter to at least `rev`: a revision found on disk or in a replayed raft entry
    /// is never handed out again.
    pub fn observe(&self, rev: i64) {
        self.last.fetch_max(rev, Ordering::SeqCst);
    }
}

impl Default for RevisionCounter {
    fn default() -> Self {
        Self::new(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_after_the_highest_revision_seen() {
        let c = RevisionCounter::new(0);
        assert_eq!(c.last(), 1, "etcd's store starts at revision 1");
        assert_eq!(c.allocate(), 2);
        c.observe(10);
        c.observe(4);
        assert_eq!(c.last(), 10);
        assert_eq!(c.allocate(), 11);
    }

    #[test]
    fn concurrent_allocations_are_distinct_and_dense() {
        let c = std::sync::Arc::new(RevisionCounter::new(1));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let c = std::sync::Arc::clone(&c);
                std::thread::spawn(move || (0..1000).map(|_| c.allocate()).collect::<Vec<_>>())
            })
            .collect();
        let mut all: Vec<i64> = threads.into_iter().flat_map(|t| t.join().expect("thread")).collect();
        all.sort_unstable();
        assert_eq!(all, (2..4002).collect::<Vec<_>>());
    }
}
