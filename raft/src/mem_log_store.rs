//! [`MemLogStore`]: the in-memory [`LogStore`], on raft-rs's own `MemStorage`.

use raft::eraftpb::{ConfState, Entry, HardState, Snapshot};
use raft::storage::MemStorage;
use raft::{GetEntriesContext, RaftState, Storage};

use crate::error::RaftError;
use crate::log_store::LogStore;

/// An in-memory raft log. Clones share the same log, so a test can "restart" a node by building
/// a new one over a clone.
#[derive(Clone, Default)]
pub struct MemLogStore {
    inner: MemStorage,
}

impl std::fmt::Debug for MemLogStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let core = self.inner.rl();
        f.debug_struct("MemLogStore").field("hard_state", core.hard_state()).finish()
    }
}

impl MemLogStore {
    /// Returns an empty log.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Storage for MemLogStore {
    fn initial_state(&self) -> raft::Result<RaftState> {
        self.inner.initial_state()
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        ctx: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        self.inner.entries(low, high, max_size, ctx)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        self.inner.term(idx)
    }

    fn first_index(&self) -> raft::Result<u64> {
        self.inner.first_index()
    }

    fn last_index(&self) -> raft::Result<u64> {
        self.inner.last_index()
    }

    fn snapshot(&self, request_index: u64, to: u64) -> raft::Result<Snapshot> {
        self.inner.snapshot(request_index, to)
    }
}

impl LogStore for MemLogStore {
    fn append(&self, entries: &[Entry], hard_state: Option<&HardState>, _sync: bool) -> Result<(), RaftError> {
        let mut core = self.inner.wl();
        if !entries.is_empty() {
            core.append(entries)?;
        }
        if let Some(hs) = hard_state {
            core.set_hardstate(hs.clone());
        }
        Ok(())
    }

    fn set_commit(&self, commit: u64) -> Result<(), RaftError> {
        self.inner.wl().mut_hard_state().commit = commit;
        Ok(())
    }

    fn compact(&self, index: u64) -> Result<(), RaftError> {
        Ok(self.inner.wl().compact(index)?)
    }

    fn apply_snapshot(&self, snapshot: &Snapshot) -> Result<(), RaftError> {
        Ok(self.inner.wl().apply_snapshot(snapshot.clone())?)
    }

    fn set_conf_state(&self, conf_state: &ConfState) -> Result<(), RaftError> {
        self.inner.wl().set_conf_state(conf_state.clone());
        Ok(())
    }
}
