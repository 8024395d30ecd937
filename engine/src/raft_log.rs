//! [`BackendLogStore`]: a shard's raft log, hard state and conf state in `Cf::Raft`.
//!
//! Layout (all keys in `Cf::Raft`):
//!
//! ```text
//! "e" + index (u64 BE)   -> Entry            the log; contiguous from first_index to last_index
//! "hs"                   -> HardState        term, vote, commit
//! "cs"                   -> ConfState        voters and learners
//! "sm"                   -> SnapshotMetadata index/term of the last entry compacted away
//! ```
//!
//! A copy of the newest entries stays in memory (`tail`), so the Ready loop reading back entries
//! it just appended never touches the disk. The copy is bounded by a count and by bytes
//! ([`BackendLogStore::with_tail_bytes`]): by count alone, 4,096 entries of large objects (a
//! CustomResourceDefinition's schema runs to hundreds of KB, and each of its writes is an entry)
//! held hundreds of MB; an entry past either bound is read from RocksDB. raft-rs reads through `&self` from the shard thread
//! only; the lock exists because raft-rs owns one handle and the Ready loop another.
//!
//! Writes per round: an append of entries goes out with the hard state and, on a follower, with
//! the applied state of the round before ([`NextAppend`]), as one synced write. A hard state
//! whose only change is the commit index is kept in memory until the next write of the log:
//! raft's commit index may be lost (the leader tells it again), and on open the saved one is
//! raised to the applied index, which raft-rs requires.

// #[PerformanceCriticalPath]
use std::collections::VecDeque;
use std::sync::Arc;

use ballast_raft::{ConfState, Entry, HardState, LogStore, RaftError, Snapshot, SnapshotMetadata};
use parking_lot::{Mutex, RwLock};
use prost_011::Message;
use raft::{GetEntriesContext, RaftState, Storage, StorageError as RaftStorageError};

use crate::raft_snapshot::SnapshotConfig;
use crate::round_trace::{self, Mark};
use crate::storage::{Cf, KvBackend, ScanOrder, StorageError, WriteBatch, WriteOpts};

mod keys;
pub use keys::META_APPLIED_INDEX;

const HARD_STATE: &[u8] = b"hs";
const CONF_STATE: &[u8] = b"cs";
const SNAP_META: &[u8] = b"sm";

/// Makes a restored shard's raft state that of a member alone (raft ID 1) whose log ends at the
/// state's applied index: the log, the old members and their votes go. A snapshot taken on a
/// member of a cluster holds that cluster's voters, which a restored member, starting a new
/// cluster, could never reach; and entries past the applied index were not necessarily
/// committed, so they must not be committed now.
///
/// # Errors
/// A storage error, or `Corrupt` for undecodable records.
pub fn restart_as_lone_voter<B: KvBackend>(backend: &B) -> Result<(), StorageError> {
    let applied = applied_index(backend)?;
    let mut term = 0;
    if let Some(v) = backend.get(Cf::Raft, &entry_key(applied))? {
        term = Entry::decode(v.as_slice()).map_err(|_| corrupt("log entry"))?.term;
    } else if let Some(v) = backend.get(Cf::Raft, SNAP_META)? {
        let m = SnapshotMetadata::decode(v.as_slice()).map_err(|_| corrupt("snapshot metadata"))?;
        if m.index == applied {
            term = m.term;
        }
    }
    if let Some(v) = backend.get(Cf::Raft, HARD_STATE)? {
        // No entry to tell: the newest term the member knew is a safe one for the applied index.
        if term == 0 {
            term = HardState::decode(v.as_slice()).map_err(|_| corrupt("hard state"))?.term;
        }
    }
    let mut wb = WriteBatch::new();
    wb.delete_range(Cf::Raft, entry_key(0), entry_key(u64::MAX));
    let m = SnapshotMetadata { index: applied, term, ..Default::default() };
    wb.put(Cf::Raft, SNAP_META.to_vec(), m.encode_to_vec());
    let hs = HardState { term, vote: 0, commit: applied };
    wb.put(Cf::Raft, HARD_STATE.to_vec(), hs.encode_to_vec());
    let cs = ConfState { voters: vec![1], ..Default::default() };
    wb.put(Cf::Raft, CONF_STATE.to_vec(), cs.encode_to_vec());
    backend.write(wb, WriteOpts { sync: true })
}

/// A shard state machine's write that goes out with the log's next append, as one write with
/// one sync: a follower applies round k in the Ready that persists round k+1
/// (`StateMachine::apply_before_append`), so each of its rounds costs one write instead of
/// two. The state machine and the log store share one.
#[derive(Clone, Debug, Default)]
pub struct NextAppend(Arc<Mutex<Option<WriteBatch>>>);

impl NextAppend {
    /// Queues `wb` for the next append, after anything queued before it.
    pub fn push(&self, wb: WriteBatch) {
        let mut slot = self.0.lock();
        match slot.as_mut() {
            Some(queued) => queued.extend(wb),
            None => *slot = Some(wb),
        }
    }

    fn take(&self) -> Option<WriteBatch> {
        self.0.lock().take()
    }
}

/// Reads the state machine's applied index (0 when none is saved).
fn applied_index<B: KvBackend>(backend: &B) -> Result<u64, StorageError> {
    match backend.get(Cf::Meta, META_APPLIED_INDEX)? {
        Some(v) => Ok(u64::from_be_bytes(v.as_slice().try_into().map_err(|_| corrupt("applied index"))?)),
        None => Ok(0),
    }
}

fn entry_key(index: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(9);
    k.push(b'e');
    k.extend_from_slice(&index.to_be_bytes());
    k
}

#[derive(Debug, Default)]
struct Inner {
    hard_state: HardState,
    conf_state: ConfState,
    /// Index and term of the entry just before the first one kept.
    snap_index: u64,
    snap_term: u64,
    last_index: u64,
    /// The newest entries, contiguous, ending at `last_index`.
    tail: VecDeque<Entry>,
    /// The bytes of `tail`'s entries (their encoded sizes).
    tail_bytes: usize,
}

impl Inner {
    fn first_index(&self) -> u64 {
        self.snap_index + 1
    }

    fn tail_first(&self) -> u64 {
        self.tail.front().map_or(self.last_index + 1, |e| e.index)
    }

    /// The entry at `index` when the tail keeps it.
    fn in_tail(&self, index: u64) -> Option<&Entry> {
        let first = self.tail_first();
        (index >= first && index <= self.last_index).then(|| &self.tail[(index - first) as usize])
    }

    fn push_tail(&mut self, e: Entry) {
        self.tail_bytes += e.encoded_len();
        self.tail.push_back(e);
    }

    fn pop_tail_front(&mut self) {
        if let Some(e) = self.tail.pop_front() {
            self.tail_bytes -= e.encoded_len();
        }
    }

    /// Drops the oldest entries until at most `cap` entries of at most `cap_bytes` remain,
    /// keeping the newest entry whatever its size.
    fn trim_tail(&mut self, cap: usize, cap_bytes: usize) {
        while self.tail.len() > cap || (self.tail.len() > 1 && self.tail_bytes > cap_bytes) {
            self.pop_tail_front();
        }
    }
}

/// The raft log of one shard, on a [`KvBackend`].
pub struct BackendLogStore<B: KvBackend> {
    backend: B,
    inner: Arc<RwLock<Inner>>,
    tail_cap: usize,
    /// Most bytes of entries `tail` holds (see the module doc); unbounded unless set.
    tail_cap_bytes: usize,
    /// Where snapshots for followers are checkpointed; None: the member has no followers to
    /// send one to (raft is told to try later).
    snapshots: Option<Arc<SnapshotConfig>>,
    /// The state machine's write that rides on the next append.
    next_append: NextAppend,
}

impl<B: KvBackend + Clone> Clone for BackendLogStore<B> {
    fn clone(&self) -> Self {
        Self {
            backend: self.backend.clone(),
            inner: Arc::clone(&self.inner),
            tail_cap: self.tail_cap,
            tail_cap_bytes: self.tail_cap_bytes,
            snapshots: self.snapshots.clone(),
            next_append: self.next_append.clone(),
        }
    }
}

impl<B: KvBackend> std::fmt::Debug for BackendLogStore<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.inner.read();
        f.debug_struct("BackendLogStore")
            .field("first_index", &inner.first_index())
            .field("last_index", &inner.last_index)
            .field("commit", &inner.hard_state.commit)
            .finish()
    }
}

fn corrupt(what: &'static str) -> StorageError {
    StorageError::Corrupt { cf: "raft", what }
}

fn store_err(e: StorageError) -> RaftError {
    RaftError::Store(Box::new(e))
}

fn to_raft(e: StorageError) -> raft::Error {
    raft::Error::Store(RaftStorageError::Other(Box::new(e)))
}

impl<B: KvBackend + Clone> BackendLogStore<B> {
    /// Loads the log state from `backend`, keeping up to `tail_cap` newest entries in memory.
    ///
    /// # Errors
    /// Returns a storage error or `Corrupt` for undecodable records.
    pub fn open(backend: B, tail_cap: usize) -> Result<Self, StorageError> {
        let mut inner = Inner::default();
        if let Some(v) = backend.get(Cf::Raft, HARD_STATE)? {
            inner.hard_state = HardState::decode(v.as_slice()).map_err(|_| corrupt("hard state"))?;
        }
        // The commit index is saved only with other writes of the log, so the applied index
        // may be past it; every applied entry was committed.
        inner.hard_state.commit = inner.hard_state.commit.max(applied_index(&backend)?);
        if let Some(v) = backend.get(Cf::Raft, CONF_STATE)? {
            inner.conf_state = ConfState::decode(v.as_slice()).map_err(|_| corrupt("conf state"))?;
        }
        if let Some(v) = backend.get(Cf::Raft, SNAP_META)? {
            let m = SnapshotMetadata::decode(v.as_slice()).map_err(|_| corrupt("snapshot metadata"))?;
            inner.snap_index = m.index;
            inner.snap_term = m.term;
        }
        inner.last_index = inner.snap_index;
        let mut tail = VecDeque::new();
        let mut bad = false;
        backend.scan(Cf::Raft, b"e", Some(b"f"), ScanOrder::Reverse, &mut |_, v| {
            match Entry::decode(v) {
                Ok(e) => tail.push_front(e),
                Err(_) => bad = true,
            }
            !bad && tail.len() < tail_cap.max(1)
        })?;
        if bad {
            return Err(corrupt("entry"));
        }
        if let Some(last) = tail.back() {
            inner.last_index = last.index;
        }
        inner.tail_bytes = tail.iter().map(Entry::encoded_len).sum();
        inner.tail = tail;
        Ok(Self {
            backend,
            inner: Arc::new(RwLock::new(inner)),
            tail_cap: tail_cap.max(1),
            tail_cap_bytes: usize::MAX,
            snapshots: None,
            next_append: NextAppend::default(),
        })
    }

    /// Bounds the entries kept in memory to `bytes` as well (the newest entry is kept whatever
    /// its size); the entries loaded by [`BackendLogStore::open`] are trimmed to it at once.
    pub fn with_tail_bytes(mut self, bytes: usize) -> Self {
        self.tail_cap_bytes = bytes;
        self.inner.write().trim_tail(self.tail_cap, bytes);
        self
    }

    /// Returns the handle through which the state machine's write rides on the next append.
    pub fn next_append(&self) -> NextAppend {
        self.next_append.clone()
    }

    /// Lets this log answer raft's snapshot requests with checkpoints (see `raft_snapshot`).
    pub fn with_snapshots(mut self, cfg: SnapshotConfig) -> Self {
        self.snapshots = Some(Arc::new(cfg));
        self
    }

    fn read_entry(&self, index: u64) -> raft::Result<Entry> {
        if let Some(e) = self.inner.read().in_tail(index) {
            return Ok(e.clone());
        }
        match self.backend.get(Cf::Raft, &entry_key(index)).map_err(to_raft)? {
            Some(v) => Entry::decode(v.as_slice()).map_err(|_| to_raft(corrupt("entry"))),
            None => Err(raft::Error::Store(RaftStorageError::Unavailable)),
        }
    }
}

impl<B: KvBackend + Clone> Storage for BackendLogStore<B> {
    fn initial_state(&self) -> raft::Result<RaftState> {
        let inner = self.inner.read();
        Ok(RaftState::new(inner.hard_state.clone(), inner.conf_state.clone()))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _ctx: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        let max_size = max_size.into();
        if low < self.inner.read().first_index() {
            return Err(raft::Error::Store(RaftStorageError::Compacted));
        }
        let mut out = Vec::with_capacity((high - low) as usize);
        let mut size = 0u64;
        for index in low..high {
            let e = self.read_entry(index)?;
            size += e.encoded_len() as u64;
            if !out.is_empty() && max_size.is_some_and(|m| size > m) {
                break;
            }
            out.push(e);
        }
        Ok(out)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        {
            let inner = self.inner.read();
            if idx == inner.snap_index {
                return Ok(inner.snap_term);
            }
            if idx < inner.first_index() {
                return Err(raft::Error::Store(RaftStorageError::Compacted));
            }
            if idx > inner.last_index {
                return Err(raft::Error::Store(RaftStorageError::Unavailable));
            }
            // raft asks for the term before every append it sends: read it where the entry is
            // kept, rather than copying a whole round's entry out of the tail for it.
            if let Some(e) = inner.in_tail(idx) {
                return Ok(e.term);
            }
        }
        Ok(self.read_entry(idx)?.term)
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.inner.read().first_index())
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.inner.read().last_index)
    }

    fn snapshot(&self, request_index: u64, to: u64) -> raft::Result<Snapshot> {
        // raft-rs retries later on this error.
        let later = || raft::Error::Store(RaftStorageError::SnapshotTemporarilyUnavailable);
        let Some(cfg) = &self.snapshots else { return Err(later()) };
        let usable_from = request_index.max(self.inner.read().snap_index);
        let index = match crate::raft_snapshot::prepare(&self.backend, cfg, usable_from) {
            Ok(index) => index,
            Err(e) => {
                tracing::warn!(error = %e, to, "no checkpoint for a follower's snapshot; raft asks again later");
                return Err(later());
            }
        };
        let term = self.term(index)?;
        let conf_state = self.inner.read().conf_state.clone();
        Ok(crate::raft_snapshot::message(cfg, index, term, conf_state))
    }
}

impl<B: KvBackend + Clone> LogStore for BackendLogStore<B> {
    fn append(&self, entries: &[Entry], hard_state: Option<&HardState>, sync: bool) -> Result<(), RaftError> {
        // The state machine's part first: it never writes `Cf::Raft`, so the order within the
        // batch does not matter, and the one write is atomic.
        let mut wb = self.next_append.take().unwrap_or_default();
        let mut inner = self.inner.write();
        if let Some(first) = entries.first() {
            if first.index <= inner.last_index {
                // A new leader overwrote our suffix: drop it before appending.
                wb.delete_range(Cf::Raft, entry_key(first.index), entry_key(inner.last_index + 1));
            }
            for e in entries {
                wb.put(Cf::Raft, entry_key(e.index), e.encode_to_vec());
            }
        }
        if let Some(hs) = hard_state {
            let saved = &inner.hard_state;
            let commit_only = hs.term == saved.term && hs.vote == saved.vote;
            // A moved commit index alone is not worth a write of its own (see the module doc):
            // it is saved with the next write that goes out anyway.
            if !commit_only || !wb.is_empty() || sync {
                wb.put(Cf::Raft, HARD_STATE.to_vec(), hs.encode_to_vec());
            }
        }
        if wb.is_empty() && !sync {
            if let Some(hs) = hard_state {
                inner.hard_state = hs.clone();
            }
            return Ok(());
        }
        round_trace::mark(Mark::LogWriteStart, entries.len());
        self.backend.write(wb, WriteOpts { sync }).map_err(store_err)?;
        round_trace::mark(Mark::LogWriteEnd, usize::from(sync));
        if let Some(first) = entries.first() {
            let keep = inner.tail.iter().take_while(|e| e.index < first.index).count();
            let dropped: usize = inner.tail.iter().skip(keep).map(Entry::encoded_len).sum();
            inner.tail.truncate(keep);
            inner.tail_bytes -= dropped;
            for e in entries {
                inner.push_tail(e.clone());
            }
            inner.trim_tail(self.tail_cap, self.tail_cap_bytes);
            inner.last_index = entries.last().map_or(inner.last_index, |e| e.index);
        }
        if let Some(hs) = hard_state {
            inner.hard_state = hs.clone();
        }
        Ok(())
    }

    fn set_commit(&self, commit: u64) -> Result<(), RaftError> {
        // Saved with the next write of the log (see the module doc).
        self.inner.write().hard_state.commit = commit;
        Ok(())
    }

    fn compact(&self, index: u64) -> Result<(), RaftError> {
        let term = match self.term(index.saturating_sub(1)) {
            Ok(t) => t,
            Err(_) => return Ok(()), // already compacted past it, or not there yet
        };
        let mut inner = self.inner.write();
        if index <= inner.first_index() || index > inner.last_index + 1 {
            return Ok(());
        }
        let meta = SnapshotMetadata { index: index - 1, term, ..Default::default() };
        let mut wb = WriteBatch::new();
        wb.delete_range(Cf::Raft, entry_key(inner.first_index()), entry_key(index));
        wb.put(Cf::Raft, SNAP_META.to_vec(), meta.encode_to_vec());
        self.backend.write(wb, WriteOpts::default()).map_err(store_err)?;
        inner.snap_index = index - 1;
        inner.snap_term = term;
        while inner.tail.front().is_some_and(|e| e.index < index) {
            inner.pop_tail_front();
        }
        Ok(())
    }

    fn apply_snapshot(&self, snapshot: &Snapshot) -> Result<(), RaftError> {
        let meta = snapshot.get_metadata();
        let mut inner = self.inner.write();
        let mut wb = WriteBatch::new();
        wb.delete_range(Cf::Raft, entry_key(0), entry_key(u64::MAX));
        let m = SnapshotMetadata { index: meta.index, term: meta.term, ..Default::default() };
        wb.put(Cf::Raft, SNAP_META.to_vec(), m.encode_to_vec());
        let mut hs = inner.hard_state.clone();
        hs.commit = hs.commit.max(meta.index);
        hs.term = hs.term.max(meta.term);
        wb.put(Cf::Raft, HARD_STATE.to_vec(), hs.encode_to_vec());
        let cs = meta.conf_state.clone().unwrap_or_default();
        wb.put(Cf::Raft, CONF_STATE.to_vec(), cs.encode_to_vec());
        self.backend.write(wb, WriteOpts { sync: true }).map_err(store_err)?;
        inner.hard_state = hs;
        inner.conf_state = cs;
        inner.snap_index = meta.index;
        inner.snap_term = meta.term;
        inner.last_index = meta.index;
        inner.tail.clear();
        inner.tail_bytes = 0;
        Ok(())
    }

    fn set_conf_state(&self, conf_state: &ConfState) -> Result<(), RaftError> {
        let mut wb = WriteBatch::new();
        wb.put(Cf::Raft, CONF_STATE.to_vec(), conf_state.encode_to_vec());
        self.backend.write(wb, WriteOpts { sync: true }).map_err(store_err)?;
        self.inner.write().conf_state = conf_state.clone();
        Ok(())
    }
}

#[cfg(test)]
mod tests;
