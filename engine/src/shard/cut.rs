//! [`Cut`]: a point at which every shard of a member stands still, for a snapshot that is one
//! revision across shards.
//!
//! Shards take revisions only while they evaluate a round's writes, and apply a round before
//! they answer the next messages (see `shard`). So when every shard is inside its message
//! handling at once, no revision is being taken and each one the member's counter has handed out
//! is in exactly one shard's applied state. Each shard that takes a cut's message waits in it
//! until all have arrived; then each copies its own state, which no shard can change before that
//! copy because the copy runs on the shard's own thread before it takes its next message.
//!
//! The wait is bounded: a shard that cannot take the message (a full mailbox, a stopped shard)
//! or one that stays in a long round past the deadline fails the cut for all, and every shard
//! goes on without copying anything.

use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// A cut across `parties` shards.
#[derive(Debug)]
pub struct Cut {
    parties: usize,
    /// How long a shard waits for the others.
    patience: Duration,
    state: Mutex<CutState>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct CutState {
    arrived: usize,
    failed: bool,
    /// The member's revision, read by the last shard to arrive, while all stand still.
    revision: i64,
}

impl Cut {
    /// A cut of `parties` shards, each waiting at most `patience` for the others.
    pub fn new(parties: usize, patience: Duration) -> Self {
        Self { parties, patience, state: Mutex::new(CutState::default()), changed: Condvar::new() }
    }

    /// Called by a shard: waits until every shard has arrived and returns the member's revision
    /// at that moment (`current`, read by the last to arrive), or None when the cut failed or
    /// timed out (it then fails for everyone). A shard's own copy taken after this holds exactly
    /// its writes up to that revision.
    pub fn arrive(&self, current: impl FnOnce() -> i64) -> Option<i64> {
        let mut st = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if st.failed {
            return None;
        }
        st.arrived += 1;
        if st.arrived == self.parties {
            st.revision = current();
        }
        self.changed.notify_all();
        let (mut st, _) = self
            .changed
            .wait_timeout_while(st, self.patience, |s| !s.failed && s.arrived < self.parties)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if st.arrived < self.parties {
            st.failed = true;
            self.changed.notify_all();
        }
        (!st.failed).then_some(st.revision)
    }

    /// Fails the cut (a shard could not be asked): shards waiting in it, and any still to come,
    /// go on without it.
    pub fn fail(&self) {
        let mut st = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        st.failed = true;
        self.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn every_party_passes_once_all_have_arrived() {
        let cut = Arc::new(Cut::new(3, Duration::from_secs(20)));
        let threads: Vec<_> = (0..3)
            .map(|n| {
                let cut = Arc::clone(&cut);
                std::thread::spawn(move || cut.arrive(|| 40 + n))
            })
            .collect();
        let revisions: Vec<Option<i64>> = threads.into_iter().map(|t| t.join().expect("party")).collect();
        assert!(revisions[0].is_some(), "{revisions:?}");
        assert!(revisions.iter().all(|r| *r == revisions[0]), "one revision, the last arrival's: {revisions:?}");
    }

    #[test]
    fn a_missing_party_fails_the_cut_for_all_after_the_deadline() {
        let cut = Arc::new(Cut::new(3, Duration::from_millis(50)));
        let waiting = {
            let cut = Arc::clone(&cut);
            std::thread::spawn(move || cut.arrive(|| 1))
        };
        assert_eq!(cut.arrive(|| 1), None, "two of three never make a cut");
        assert_eq!(waiting.join().expect("party"), None);
        assert_eq!(cut.arrive(|| 1), None, "a late party finds the cut failed");
    }

    #[test]
    fn a_failed_cut_releases_waiting_parties_at_once() {
        let cut = Arc::new(Cut::new(2, Duration::from_secs(600)));
        let waiting = {
            let cut = Arc::clone(&cut);
            std::thread::spawn(move || cut.arrive(|| 1))
        };
        // Whether the party is already waiting or not, the failure reaches it.
        cut.fail();
        assert_eq!(waiting.join().expect("party"), None);
    }
}
