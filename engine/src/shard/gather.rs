//! How long a shard leader with followers holds its next round for the writers its last round
//! answered ([`ShardConfig::round_gather`](super::ShardConfig::round_gather)).
//!
//! A leader has one round in flight (engine/SHARDING.md); writes that arrive meanwhile form the
//! next round, which starts the moment the last one is applied. With a fixed number of writers
//! each waiting for its answer before it writes again, that splits them into two groups that
//! take turns: at 16 in flight, rounds of 8. Each round costs every member an fdatasync and the
//! leader an append and an acknowledgement per follower whatever its size, and on a machine
//! whose cores are all busy that per-round cost is most of a put's. So once a round's answers
//! are out, the next round waits, for at most the window, until as many writes are queued as
//! were just answered plus those already waiting: the writers just answered come back within a
//! client's turnaround and join the others, and the two groups merge into one round. A lone
//! writer's next write reaches the target by itself and starts its round at once, and a writer
//! that does not come back costs one window, after which the target is what came. Rounds
//! already large do not wait (`ShardConfig::round_gather_most`): their per-round cost is spread
//! thin, and that many writers take longer than the window to come back through their clients.
//!
//! While it waits the leader does not tell the followers the commit index on its own (the
//! round that follows carries it), which also spares the message a round otherwise ends with
//! when no write is waiting. A write another member forwarded here is answered to its client
//! by that member once it applied it, so its writer comes back only after that member heard
//! the commit index: while such writes arrive (within `quiet` of the last one), the leader
//! tells the index at once and waits all the same ([`Gather::quiet_commit`]).
//!
//! Those writers also take longer to come back: the commit index must reach their member, that
//! member apply the round and answer, and their next write be forwarded again. So a round that
//! answered forwarded writes waits a window of its own
//! ([`ShardConfig::round_gather_forwarded`](super::ShardConfig::round_gather_forwarded)).

use std::time::{Duration, Instant};

/// The writes a round answered.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Answered {
    /// How many.
    pub(super) writes: usize,
    /// Whether any of them came from another member.
    pub(super) forwarded: bool,
}

impl Answered {
    /// `writes` answered, none of them forwarded.
    #[cfg(test)]
    fn local(writes: usize) -> Self {
        Self { writes, forwarded: false }
    }
}

/// The leader's next round's wait.
#[derive(Debug)]
pub(super) struct Gather {
    window: Duration,
    forwarded_window: Duration,
    most: usize,
    quiet: Duration,
    target: usize,
    until: Option<Instant>,
    forwarded_at: Option<Instant>,
}

impl Gather {
    /// Returns the policy: wait at most `window` (zero: never) for at most `most` writes, or
    /// `forwarded_window` after a round with forwarded writes, and tell the commit index at once
    /// within `quiet` of a forwarded write.
    pub(super) fn new(window: Duration, forwarded_window: Duration, most: usize, quiet: Duration) -> Self {
        Self { window, forwarded_window, most, quiet, target: 0, until: None, forwarded_at: None }
    }

    /// A round's writes got their answers with `waiting` writes queued.
    pub(super) fn answered(&mut self, round: Answered, waiting: usize, now: Instant) {
        let target = round.writes + waiting;
        let window = if round.forwarded { self.forwarded_window } else { self.window };
        if window.is_zero() || round.writes == 0 || target > self.most {
            self.until = None;
            return;
        }
        self.target = target;
        self.until = Some(now + window);
    }

    /// A write forwarded by another member arrived: for a while the followers hear the commit
    /// index at once.
    pub(super) fn forwarded(&mut self, now: Instant) {
        self.forwarded_at = Some(now);
    }

    /// True while the next round waits and the followers need not hear the commit index before
    /// it (no forwarded write came lately).
    pub(super) fn quiet_commit(&self, waiting: usize, now: Instant) -> bool {
        let forwarded = self.forwarded_at.is_some_and(|at| now.saturating_duration_since(at) < self.quiet);
        !forwarded && self.holding(waiting, now).is_some()
    }

    /// Returns until when the next round waits, with `waiting` writes queued; None: it may
    /// start.
    pub(super) fn holding(&self, waiting: usize, now: Instant) -> Option<Instant> {
        self.until.filter(|until| now < *until && waiting < self.target)
    }

    /// A round started (or this member stopped leading): the wait is over.
    pub(super) fn clear(&mut self) {
        self.until = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock as _, SystemClock};

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_next_round_waits_for_the_writers_just_answered_and_those_waiting() {
        let t0 = SystemClock.now();
        let mut g = Gather::new(MS, MS, 32, Duration::from_secs(1));
        assert_eq!(g.holding(3, t0), None, "nothing answered yet: no wait");
        g.answered(Answered::local(8), 8, t0);
        assert_eq!(g.holding(8, t0), Some(t0 + MS), "the other group is waiting: wait for the answered");
        assert_eq!(g.holding(15, t0 + MS / 2), Some(t0 + MS));
        assert_eq!(g.holding(16, t0 + MS / 2), None, "everyone is back");
        assert_eq!(g.holding(9, t0 + MS), None, "the window is over: go with what came");
        g.clear();
        assert_eq!(g.holding(0, t0), None, "a round started");
    }

    #[test]
    fn a_lone_writer_never_waits() {
        let t0 = SystemClock.now();
        let mut g = Gather::new(MS, MS, 32, Duration::from_secs(1));
        g.answered(Answered::local(1), 0, t0);
        assert!(g.holding(0, t0).is_some(), "the commit index is not sent while the writer turns around");
        assert_eq!(g.holding(1, t0), None, "its next write starts the round at once");
    }

    #[test]
    fn after_forwarded_writes_the_commit_index_is_told_while_waiting() {
        let t0 = SystemClock.now();
        let mut g = Gather::new(MS, MS, 32, Duration::from_secs(1));
        g.answered(Answered::local(8), 0, t0);
        assert!(g.quiet_commit(1, t0), "no forwarded write: the next round carries the index");
        g.forwarded(t0);
        assert!(g.holding(1, t0).is_some(), "the round still waits");
        assert!(!g.quiet_commit(1, t0), "but the followers hear the index now");
        let later = t0 + Duration::from_secs(2);
        g.answered(Answered::local(8), 0, later);
        assert!(g.quiet_commit(1, later), "after the quiet time the index waits for the round again");
        assert!(!g.quiet_commit(8, later), "nothing waits once the writers are back");
    }

    #[test]
    fn a_zero_window_never_waits() {
        let t0 = SystemClock.now();
        let mut off = Gather::new(Duration::ZERO, Duration::ZERO, 32, Duration::from_secs(1));
        off.answered(Answered::local(8), 0, t0);
        assert_eq!(off.holding(1, t0), None);
    }

    #[test]
    fn large_rounds_do_not_wait() {
        let t0 = SystemClock.now();
        let mut g = Gather::new(MS, MS, 32, Duration::from_secs(1));
        g.answered(Answered::local(20), 12, t0);
        assert!(g.holding(12, t0).is_some(), "32 writes are waited for");
        g.answered(Answered::local(20), 13, t0);
        assert_eq!(g.holding(13, t0), None, "33 are not");
    }

    #[test]
    fn a_round_with_forwarded_writes_waits_the_longer_window() {
        let t0 = SystemClock.now();
        let mut g = Gather::new(MS, 4 * MS, 32, Duration::from_secs(1));
        g.answered(Answered::local(8), 8, t0);
        assert_eq!(g.holding(8, t0), Some(t0 + MS), "local writers come back within the short window");
        g.answered(Answered { writes: 8, forwarded: true }, 8, t0);
        assert_eq!(g.holding(8, t0 + 2 * MS), Some(t0 + 4 * MS), "forwarded writers take their member's apply too");
        assert_eq!(g.holding(16, t0 + 2 * MS), None, "everyone is back");
        assert_eq!(g.holding(8, t0 + 4 * MS), None, "the longer window is over");
    }
}
