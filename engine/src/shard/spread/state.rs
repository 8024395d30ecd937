//! [`Spread`]: what a shard whose leaders are spread keeps of its dealings with the revision
//! group; the shard names it, and its rounds (the parent module) work on it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use flume::WeakSender;

use crate::cluster::allocation::{Granted, RevisionGroup};
use crate::shard::ShardMsg;

/// Where a shard's round stands with the allocator.
#[derive(Debug)]
pub(super) enum GrantState {
    Idle,
    Asked(u64, Instant),
    Held(Granted),
}

/// A shard's dealings with the revision group.
#[derive(Debug)]
pub(in crate::shard) struct Spread {
    pub(super) group: Arc<RevisionGroup>,
    /// The shard's own mailbox, for grants to come back by (weak: the loop still ends when the
    /// network plane drops every handle).
    pub(super) mailbox: WeakSender<ShardMsg>,
    pub(super) state: GrantState,
    /// The last round number asked for.
    pub(super) round: u64,
    /// Every round up to this one is finished: its grant, if any came, was returned.
    pub(super) done_through: u64,
    pub(super) retry_at: Option<Instant>,
    /// Grants of allocators older than the one last reported to are refused.
    pub(super) min_epoch: u64,
    /// (epoch, term) of the last report sent.
    pub(super) reported: Option<(u64, u64)>,
    /// Shard 0: the ceiling entry in flight: (index, term, ceiling, epoch).
    pub(super) ceiling: Option<(u64, u64, i64, u64)>,
    /// When each peer was last reported unreachable: a member that just died may still count
    /// as active in raft's progress for up to an election timeout, and a leadership handed to
    /// it stalls the shard's writes until raft gives the transfer up.
    pub(super) unreachable: Vec<(u64, Instant)>,
}

impl Spread {
    pub(in crate::shard) fn new(group: Arc<RevisionGroup>, mailbox: WeakSender<ShardMsg>) -> Self {
        Self {
            group,
            mailbox,
            state: GrantState::Idle,
            round: 0,
            done_through: 0,
            retry_at: None,
            min_epoch: 0,
            reported: None,
            ceiling: None,
            unreachable: Vec::new(),
        }
    }

    /// Records that `peer` could not be reached just now.
    pub(in crate::shard) fn note_unreachable(&mut self, peer: u64, now: Instant) {
        self.unreachable.retain(|(p, _)| *p != peer);
        self.unreachable.push((peer, now));
    }

    /// True when `peer` was reported unreachable less than `within` ago.
    pub(super) fn recently_unreachable(&self, peer: u64, now: Instant, within: Duration) -> bool {
        self.unreachable.iter().any(|(p, at)| *p == peer && now.saturating_duration_since(*at) < within)
    }

    /// True while a grant waits to be used by the next round.
    pub(in crate::shard) fn holds_grant(&self) -> bool {
        matches!(self.state, GrantState::Held(_))
    }
}
