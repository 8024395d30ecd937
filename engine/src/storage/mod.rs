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

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

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

/// Bytes of one write batch when [`KvBackend::ingest_tables`]'s plain version writes a table file
/// in. 4 MiB keeps memory flat while a large state is copied, with few enough batches that the
/// copy runs at disk speed.
pub const BULK_BATCH_BYTES: usize = 4 << 20;

/// Largest table file [`KvBackend::write_tables`] writes before starting the next. 64 MiB is
/// RocksDB's own target size for its table files, so ingested files need no splitting by later
/// compactions.
pub const TABLE_FILE_BYTES: u64 = 64 << 20;

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

    /// Calls `visit(key, value)` for every key of `cf` in order, until it returns false: one
    /// pass over a whole family read once (the start-up rebuild of the index), which RocksDB's
    /// reads ahead and keeps out of its block cache, where it would push out what reads use.
    ///
    /// # Errors
    /// Returns the backend's read error.
    fn scan_once(&self, cf: Cf, visit: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<(), StorageError> {
        self.scan(cf, &[], None, ScanOrder::Forward, visit)
    }

    /// Reclaims space held by deleted data in every column family (etcd's defragment).
    ///
    /// # Errors
    /// Returns the backend's error.
    fn compact_all(&self) -> Result<(), StorageError>;

    /// Returns the approximate on-disk size of the live data in bytes.
    fn approximate_size(&self) -> u64;

    /// Removes every key of `cf` in `[start, end)`, ahead of a [`KvBackend::ingest_tables`]
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

    /// Writes the sorted pairs of `cf` that `chunks` yields (each chunk pairs in the form
    /// [`encode_pair`] writes, keys ascending across chunks) into new table files in the
    /// existing directory `dir`, named `<cf>-<n>.<ext>` (`n` from 0, four digits), at most about
    /// [`TABLE_FILE_BYTES`] each, each synced; answers them, none for no pairs. What
    /// [`KvBackend::ingest_tables`] of the same backend takes in (a follower receiving a raft
    /// snapshot writes them as the pairs arrive).
    ///
    /// This version writes the chunks as they are; RocksDB's writes its own table files, which
    /// it takes in whole.
    ///
    /// # Errors
    /// Returns the file system's or the backend's error, or `Corrupt` for a chunk that does
    /// not decode or keys out of order.
    fn write_tables(cf: Cf, dir: &Path, chunks: &mut dyn Iterator<Item = Vec<u8>>) -> Result<Vec<PathBuf>, StorageError>
    where
        Self: Sized,
    {
        let mut written = Vec::new();
        let mut out: Option<(BufWriter<File>, u64)> = None;
        let finish = |out: Option<(BufWriter<File>, u64)>| -> Result<(), StorageError> {
            if let Some((w, _)) = out {
                w.into_inner().map_err(std::io::IntoInnerError::into_error)?.sync_all()?;
            }
            Ok(())
        };
        let mut last: Option<Vec<u8>> = None;
        for chunk in chunks {
            decode_pairs(&chunk, &mut |k, _| {
                if last.as_deref().is_some_and(|l| l >= k) {
                    return Err(StorageError::Corrupt { cf: "staging", what: "keys out of order" });
                }
                last = Some(k.to_vec());
                Ok(())
            })?;
            if out.as_ref().is_some_and(|(_, n)| *n >= TABLE_FILE_BYTES) {
                finish(out.take())?;
            }
            let (w, n) = match &mut out {
                Some(o) => o,
                None => {
                    let path = dir.join(format!("{}-{:04}.pairs", cf.name(), written.len()));
                    let w = BufWriter::new(File::create(&path)?);
                    written.push(path);
                    out.insert((w, 0))
                }
            };
            w.write_all(&chunk)?;
            *n += chunk.len() as u64;
        }
        finish(out)?;
        Ok(written)
    }

    /// Takes the table files [`KvBackend::write_tables`] wrote for `cf` into this store, over
    /// what is there (installing a raft snapshot, gigabytes at a time; into a range
    /// [`KvBackend::drop_range`] emptied when it replaces one). The files stay where they are,
    /// so a caller cut short can take them in again; `staging` is a scratch directory beside
    /// them. Not atomic: a caller that can be cut short marks its work and repeats it.
    ///
    /// This version writes the pairs in batches of [`BULK_BATCH_BYTES`], not synced until the
    /// next synced write; RocksDB's links the files into the store whole, past its write-ahead
    /// log and memtables, durable when it returns.
    ///
    /// # Errors
    /// Returns the backend's or the file system's error, or `Corrupt` for a damaged file.
    fn ingest_tables(&self, cf: Cf, files: &[PathBuf], staging: &Path) -> Result<(), StorageError> {
        let _ = staging;
        let bad = || StorageError::Corrupt { cf: "staging", what: "table file" };
        for path in files {
            let mut r = BufReader::new(File::open(path)?);
            let mut take = |first: bool| -> Result<Option<Vec<u8>>, StorageError> {
                let mut len = [0u8; 4];
                match r.read_exact(&mut len) {
                    Err(e) if first && e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
                    other => other.map_err(|_| bad())?,
                }
                let mut part = vec![0u8; u32::from_be_bytes(len) as usize];
                r.read_exact(&mut part).map_err(|_| bad())?;
                Ok(Some(part))
            };
            let mut wb = WriteBatch::new();
            while let Some(k) = take(true)? {
                let v = take(false)?.ok_or_else(bad)?;
                wb.put(cf, k, v);
                if wb.size_bytes() >= BULK_BATCH_BYTES {
                    self.write(std::mem::take(&mut wb), WriteOpts { sync: false })?;
                }
            }
            self.write(wb, WriteOpts { sync: false })?;
        }
        Ok(())
    }

    /// Writes a consistent, openable copy of the whole store into the empty or absent directory
    /// `dir` (RocksDB checkpoint: hard links where possible).
    ///
    /// # Errors
    /// Returns the backend's or the file system's error.
    fn checkpoint(&self, dir: &Path) -> Result<(), StorageError>;

    /// Opens a copy [`KvBackend::checkpoint`] wrote, to read it (sending a raft snapshot's state
    /// from it).
    ///
    /// # Errors
    /// Returns the backend's or the file system's error.
    fn open_checkpoint(dir: &Path) -> Result<Self, StorageError>
    where
        Self: Sized;
}

/// Appends the pair `key`, `value` to `buf` in the form a raft snapshot carries the state and
/// [`KvBackend::write_tables`] reads: each a big-endian `u32` length, then its bytes.
pub fn encode_pair(buf: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    for part in [key, value] {
        buf.extend_from_slice(&(part.len() as u32).to_be_bytes());
        buf.extend_from_slice(part);
    }
}

/// What [`decode_pairs`] calls with each pair.
pub type PairVisitor<'a> = dyn FnMut(&[u8], &[u8]) -> Result<(), StorageError> + 'a;

/// Calls `visit(key, value)` for each pair [`encode_pair`] wrote into `chunk`, in order.
///
/// # Errors
/// `Corrupt` when `chunk` ends inside a pair, or the first error of `visit`.
pub fn decode_pairs(mut chunk: &[u8], visit: &mut PairVisitor<'_>) -> Result<(), StorageError> {
    fn take<'a>(chunk: &mut &'a [u8]) -> Result<&'a [u8], StorageError> {
        let bad = || StorageError::Corrupt { cf: "staging", what: "a pair cut short" };
        let (len, rest) = chunk.split_first_chunk::<4>().ok_or_else(bad)?;
        let len = u32::from_be_bytes(*len) as usize;
        let part = rest.get(..len).ok_or_else(bad)?;
        *chunk = &rest[len..];
        Ok(part)
    }
    while !chunk.is_empty() {
        let key = take(&mut chunk)?;
        let value = take(&mut chunk)?;
        visit(key, value)?;
    }
    Ok(())
}

/// Every pair of `cf` in `b`, as [`encode_pair`] chunks of a few pairs each (tests).
#[cfg(test)]
pub(crate) fn chunks_of(b: &impl KvBackend, cf: Cf) -> Vec<Vec<u8>> {
    let mut chunks = vec![Vec::new()];
    b.scan_once(cf, &mut |k, v| {
        let last = chunks.last_mut().expect("invariant: never empty");
        encode_pair(last, k, v);
        if last.len() > 4096 {
            chunks.push(Vec::new());
        }
        true
    })
    .expect("scan");
    chunks.retain(|c| !c.is_empty());
    chunks
}
