//! The storage seam: the only door between the engine and RocksDB.
//!
//! Everything above this module (raft log store, MVCC, leases) speaks [`KvBackend`] with column
//! families named by [`Cf`] and writes through a concrete [`WriteBatch`]. Only [`rocks`] imports
//! the `rocksdb` crate; [`mem`] is the in-memory implementation used by fast tests, and
//! `conformance` runs one suite against both so they cannot drift.
//!
//! This module must not know about revisions, raft or Kubernetes: it moves bytes.

pub mod mem;
pub mod rocks;

#[cfg(test)]
mod conformance;

use std::path::Path;

pub use mem::MemBackend;
pub use rocks::RocksBackend;

/// The column families the engine keeps. Each has its own key space and RocksDB tuning.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cf {
    /// Raft log entries, hard state and conf state of the shard's raft group.
    Raft,
    /// MVCC history: one record per revision, keyed by the revision (see `mvcc::revision`).
    Kv,
    /// Small engine metadata: applied index, compaction marks, identity, shard count.
    Meta,
    /// Granted leases and their TTLs.
    Lease,
}

impl Cf {
    /// Every column family, in a fixed order.
    pub const ALL: [Cf; 4] = [Cf::Raft, Cf::Kv, Cf::Meta, Cf::Lease];

    /// The column family's on-disk name.
    pub fn name(self) -> &'static str {
        match self {
            Cf::Raft => "raft",
            Cf::Kv => "kv",
            Cf::Meta => "meta",
            Cf::Lease => "lease",
        }
    }
}

/// One mutation inside a [`WriteBatch`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteOp {
    /// Sets `key` to `value`.
    Put(Cf, Vec<u8>, Vec<u8>),
    /// Removes `key`.
    Delete(Cf, Vec<u8>),
    /// Removes every key in `[start, end)`.
    DeleteRange(Cf, Vec<u8>, Vec<u8>),
}

/// An ordered set of mutations applied atomically by [`KvBackend::write`].
///
/// A concrete type rather than an associated one, so that code above the seam never grows a
/// generic parameter just to build a batch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteBatch {
    ops: Vec<WriteOp>,
    bytes: usize,
}

impl WriteBatch {
    /// Returns an empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Queues `key = value` in `cf`.
    pub fn put(&mut self, cf: Cf, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) {
        let (key, value) = (key.into(), value.into());
        self.bytes += key.len() + value.len();
        self.ops.push(WriteOp::Put(cf, key, value));
    }

    /// Queues the removal of `key` from `cf`.
    pub fn delete(&mut self, cf: Cf, key: impl Into<Vec<u8>>) {
        let key = key.into();
        self.bytes += key.len();
        self.ops.push(WriteOp::Delete(cf, key));
    }

    /// Queues the removal of every key in `[start, end)` of `cf`.
    pub fn delete_range(&mut self, cf: Cf, start: impl Into<Vec<u8>>, end: impl Into<Vec<u8>>) {
        let (start, end) = (start.into(), end.into());
        self.bytes += start.len() + end.len();
        self.ops.push(WriteOp::DeleteRange(cf, start, end));
    }

    /// Returns true when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Returns the number of queued mutations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Returns the approximate payload size in bytes (keys plus values).
    pub fn size_bytes(&self) -> usize {
        self.bytes
    }

    /// Returns the queued mutations in order.
    pub fn ops(&self) -> &[WriteOp] {
        &self.ops
    }

    /// Appends every mutation of `other` after those already queued.
    pub fn extend(&mut self, other: WriteBatch) {
        self.bytes += other.bytes;
        self.ops.extend(other.ops);
    }
}

/// Bytes of one write batch of [`KvBackend::bulk_load_from`]'s batched version. 4 MiB keeps
/// memory flat while a large state is copied, with few enough batches that the copy runs at
/// disk speed.
pub const BULK_BATCH_BYTES: usize = 4 << 20;

/// How a batch is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteOpts {
    /// Wait until the batch (and everything written before it) is on stable storage.
    pub sync: bool,
}

/// Errors from the storage backend.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The backend itself failed (I/O error, corruption, bad options).
    #[error("rocksdb: {0}")]
    Rocks(#[from] rocksdb::Error),
    /// A file system operation around the backend failed.
    #[error("storage i/o: {0}")]
    Io(#[from] std::io::Error),
    /// Stored bytes did not decode; the data directory is damaged or from another program.
    #[error("corrupt record in column family {cf}: {what}")]
    Corrupt {
        /// Which column family held the record.
        cf: &'static str,
        /// What was wrong with it.
        what: &'static str,
    },
}

/// Direction of a [`KvBackend::scan`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanOrder {
    /// Ascending key order.
    Forward,
    /// Descending key order.
    Reverse,
}

/// A key-value store with column families, atomic batches and ordered scans.
///
/// Implementations are shared handles: every method takes `&self`.
pub trait KvBackend: Send + Sync + 'static {
    /// Applies `batch` atomically.
    ///
    /// # Errors
    /// Returns the backend's error; then nothing of the batch is visible.
    fn write(&self, batch: WriteBatch, opts: WriteOpts) -> Result<(), StorageError>;

    /// Returns the value of `key` in `cf`.
    ///
    /// # Errors
    /// Returns the backend's read error.
    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError>;

    /// Returns the values of several keys of `cf`, in the order asked.
    ///
    /// # Errors
    /// Returns the first read error.
    fn multi_get(&self, cf: Cf, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StorageError> {
        keys.iter().map(|k| self.get(cf, k)).collect()
    }

    /// Calls `visit(key, value)` for every key of `cf` in `[start, end)` (`end = None`: no upper
    /// bound) in `order`, until `visit` returns false.
    ///
    /// # Errors
    /// Returns the backend's read error.
    fn scan(
        &self,
        cf: Cf,
        start: &[u8],
        end: Option<&[u8]>,
        order: ScanOrder,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StorageError>;

    /// Reclaims space held by deleted data in every column family (etcd's defragment).
    ///
    /// # Errors
    /// Returns the backend's error.
    fn compact_all(&self) -> Result<(), StorageError>;

    /// Returns the approximate on-disk size of the live data in bytes.
    fn approximate_size(&self) -> u64;

    /// Removes every key of `cf` in `[start, end)`, ahead of a [`KvBackend::bulk_load_from`]
    /// into that range. Not synced until the next synced write. RocksDB's drops whole files and
    /// compacts the rest away at once, so the files loaded next overlap nothing.
    ///
    /// # Errors
    /// Returns the backend's error.
    fn drop_range(&self, cf: Cf, start: &[u8], end: &[u8]) -> Result<(), StorageError> {
        let mut wb = WriteBatch::new();
        wb.delete_range(cf, start, end);
        self.write(wb, WriteOpts { sync: false })
    }

    /// Writes every key of `src`'s `cf` into this store's `cf`, over what is there (installing a
    /// raft snapshot's checkpoint, gigabytes at a time). `staging` is an empty or absent scratch
    /// directory. Not atomic, and not synced until the next synced write: a caller that can be
    /// cut short marks its work and repeats it.
    ///
    /// This version copies in batches of [`BULK_BATCH_BYTES`]; RocksDB's writes sorted table
    /// files and hands them to the store whole, past the write-ahead log and the memtables.
    ///
    /// # Errors
    /// Returns the backend's or the file system's error.
    fn bulk_load_from(&self, cf: Cf, src: &Self, staging: &Path) -> Result<(), StorageError>
    where
        Self: Sized,
    {
        let _ = staging;
        let mut wb = WriteBatch::new();
        let mut failed = None;
        src.scan(cf, &[], None, ScanOrder::Forward, &mut |k, v| {
            wb.put(cf, k.to_vec(), v.to_vec());
            if wb.size_bytes() >= BULK_BATCH_BYTES {
                if let Err(e) = self.write(std::mem::take(&mut wb), WriteOpts { sync: false }) {
                    failed = Some(e);
                    return false;
                }
            }
            true
        })?;
        if let Some(e) = failed {
            return Err(e);
        }
        self.write(wb, WriteOpts { sync: false })
    }

    /// Writes a consistent, openable copy of the whole store into the empty or absent directory
    /// `dir` (RocksDB checkpoint: hard links where possible).
    ///
    /// # Errors
    /// Returns the backend's or the file system's error.
    fn checkpoint(&self, dir: &Path) -> Result<(), StorageError>;

    /// Opens a copy [`KvBackend::checkpoint`] wrote, to read it (installing a raft snapshot).
    ///
    /// # Errors
    /// Returns the backend's or the file system's error.
    fn open_checkpoint(dir: &Path) -> Result<Self, StorageError>
    where
        Self: Sized;
}
