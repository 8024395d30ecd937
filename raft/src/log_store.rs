//! [`LogStore`]: the durable raft log seam.

use raft::eraftpb::{ConfState, Entry, HardState, Snapshot};

use crate::error::RaftError;

/// Durable log storage. raft-rs reads through [`raft::Storage`] (`&self`), so implementations are
/// cheap clonable handles with interior mutability: `RawNode` owns one clone and [`RaftNode`]
/// keeps another to write.
///
/// [`RaftNode`]: crate::RaftNode
pub trait LogStore: raft::Storage + Clone + Send + 'static {
    /// Appends `entries` (replacing any conflicting suffix from `entries[0].index` on) and, if
    /// given, saves the hard state, in one write; durable on return when `sync` is true.
    ///
    /// # Errors
    /// The store's write error; the member must stop.
    fn append(&self, entries: &[Entry], hard_state: Option<&HardState>, sync: bool) -> Result<(), RaftError>;

    /// Records the commit index in the hard state. It need not be written at once: raft's
    /// commit index may be lost in a crash (the leader tells it again), so a store may keep
    /// the index in memory and save it with the next write of the log. A store that does
    /// must give back at least the state machine's applied index as the commit index after a
    /// restart: raft-rs refuses to start with applied entries past its commit index.
    ///
    /// # Errors
    /// The store's write error.
    fn set_commit(&self, commit: u64) -> Result<(), RaftError>;

    /// Discards entries before `index`.
    ///
    /// # Errors
    /// The store's write error.
    fn compact(&self, index: u64) -> Result<(), RaftError>;

    /// Replaces the log with a snapshot's metadata: every entry up to it is gone.
    ///
    /// # Errors
    /// The store's write error.
    fn apply_snapshot(&self, snapshot: &Snapshot) -> Result<(), RaftError>;

    /// Saves the conf state returned by `raft::initial_state` after a restart.
    ///
    /// # Errors
    /// The store's write error.
    fn set_conf_state(&self, conf_state: &ConfState) -> Result<(), RaftError>;
}
