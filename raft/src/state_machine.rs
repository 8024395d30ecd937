//! [`StateMachine`]: what committed entries do.

use raft::eraftpb::{Entry, Snapshot};

use crate::error::RaftError;

/// A replicated state machine, applied one round at a time.
pub trait StateMachine {
    /// What one applied round produces (replies, events, errors: the engine decides).
    type Output;

    /// Applies one round's committed entries, in index order, as one batch. Entries with empty
    /// data (leader no-ops) and conf-change entries are included so the machine can advance its
    /// applied index; [`RaftNode`](crate::RaftNode) applies conf changes to raft itself right
    /// after this call.
    fn apply(&mut self, entries: &[Entry]) -> Self::Output;

    /// As [`StateMachine::apply`], for a round applied just before the log store's
    /// [`LogStore::append`](crate::LogStore::append) of newer entries in the same Ready (a
    /// follower persisting round k+1 while it applies round k): a machine whose state shares the
    /// log's store may hand its write to that append, so both go out as one write with one
    /// sync. The round is not answered before the append returns. By default, `apply`.
    fn apply_before_append(&mut self, entries: &[Entry]) -> Self::Output {
        self.apply(entries)
    }

    /// Called when this member stops leading, before any entry of the round is applied: a
    /// machine that applies its own proposals before they commit must drop them here, since the
    /// next leader may replace them.
    ///
    /// # Errors
    /// The machine cannot go back to its applied state; the member must stop.
    fn on_step_down(&mut self) -> Result<(), RaftError> {
        Ok(())
    }

    /// Returns the last applied index (persisted by the machine atomically with its data).
    fn applied_index(&self) -> u64;

    /// Replaces the state with the one a raft snapshot describes (how the state travels is
    /// the machine's business: the snapshot's data may only name it). Called before the log
    /// store takes the snapshot's metadata; [`StateMachine::restored`] follows once it has.
    ///
    /// # Errors
    /// The state cannot be restored; the member must stop.
    fn restore(&mut self, snapshot: &Snapshot) -> Result<(), RaftError>;

    /// Called once the log store holds the snapshot [`StateMachine::restore`] installed.
    ///
    /// # Errors
    /// The machine cannot finish the install; the member must stop.
    fn restored(&mut self) -> Result<(), RaftError> {
        Ok(())
    }
}
