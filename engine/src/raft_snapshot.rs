//! Raft snapshots of a shard: how a follower too far behind the leader's log catches up.
//!
//! The state never travels inside a raft message. When raft asks the leader's log store for a
//! snapshot, the leader takes a RocksDB checkpoint of the shard at its applied index
//! (`<data-dir>/snapshots/raft-<shard>-<index>`, hard links, reused while raft asks again for
//! the same index) and sends a [`SnapshotDescriptor`] naming it. The follower fetches the state
//! over the peer port (`Peer.FetchSnapshot`). Only the replicated state travels, never the
//! leader's raft log: the leader reads the checkpoint's `kv`, `lease` and `meta` (less
//! [`MEMBER_LOCAL_META`]) once, in key order, and streams the pairs as they are read, in
//! archive entries of [`STATE_ENTRY_BYTES`] ([`cut`]); it writes nothing to disk. The follower
//! writes the pairs into table files as they arrive ([`TableWriter`]: RocksDB's own format,
//! the keys at sequence number 0 as ingestion requires, synced), on a thread beside the one
//! that receives and hashes the stream, and checks the SHA-256 at the end; memory stays bounded
//! whatever the size and the state is read once on the leader and written once on the
//! follower. On a third thread, in front of the writer's, the follower also builds its store's
//! in-memory state (key index, newest values, live keys' leases: [`crate::mvcc::IndexRebuild`])
//! from the `kv` pairs, which are the history records in the order a reopen would read them
//! back, so that after the install the state is ready without a pass over the tables. The
//! built state lives in memory only: a fetch or install that fails drops it, and a start that
//! finishes an install opens the store as any start does. The follower installs the files:
//!
//! 1. a marker ([`SnapshotInstall`]) is written to the shard's meta, synced;
//! 2. the replicated column families are replaced by the files ([`install`]): `kv` and `lease`
//!    are emptied by dropping whole files and the received files are linked in whole (RocksDB's
//!    external file ingestion: they land in the bottom level, past the write-ahead log and the
//!    memtables, and are never rewritten); `meta` keeps the member's own keys;
//! 3. the raft log is replaced by the snapshot's metadata (`LogStore::apply_snapshot`);
//! 4. the marker and the received files are removed.
//!
//! A start that finds the marker repeats 2–4 ([`resume`]): the received files stay until 4 and
//! every step can be done twice, so an install cut short by `kill -9` is finished, never half
//! applied (a crash before 1 leaves the old state, and raft sends the snapshot again).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ballast_proto::ballastpb::{SnapshotDescriptor, SnapshotInstall};
use ballast_raft::{ConfState, LogStore, Snapshot, SnapshotMetadata};
use prost::Message;

use crate::data_dir::{META_CLUSTER_ID, META_MEMBER_ID, META_SHARD_COUNT};
use crate::error::{EngineError, Result};
use crate::mvcc::{IndexRebuild, Rebuilt};
use crate::storage::{encode_pair, Cf, KvBackend, ScanOrder, StorageError, WriteBatch, WriteOpts};

/// Shard meta key of the install marker.
pub const META_SNAPSHOT_INSTALL: &[u8] = b"snapshot_install";

/// Meta keys that belong to the member rather than to the replicated state: a snapshot's state
/// replaces the rest of `meta`, never these (its sender is another member).
pub const MEMBER_LOCAL_META: [&[u8]; 4] = [META_MEMBER_ID, META_CLUSTER_ID, META_SHARD_COUNT, META_SNAPSHOT_INSTALL];

/// Fetches the state a descriptor names from its member into the given directory as the table
/// files [`cut`] wrote, building the store's state on the way when given an [`IndexRebuild`]
/// ([`TableWriter`]).
pub type SnapshotFetch = Arc<dyn Fn(&SnapshotDescriptor, &Path, Option<IndexRebuild>) -> Result<Fetched> + Send + Sync>;

/// A fetched snapshot's state.
#[derive(Debug)]
pub struct Fetched {
    /// The directory of the received table files, for [`install`].
    pub tables: PathBuf,
    /// The store's in-memory state built from them, when the fetch was asked to: what opening
    /// the store on them would build (the index of [`crate::mvcc::MvccStore::open_rebuilt`]).
    pub rebuilt: Option<Rebuilt>,
}

/// Where a shard keeps checkpoints for followers and how it fetches one from its leader.
#[derive(Clone)]
pub struct SnapshotConfig {
    /// `<data-dir>/snapshots`.
    pub dir: PathBuf,
    /// The shard's number.
    pub shard: u32,
    /// This member's raft ID, named in the descriptors it sends.
    pub me: u64,
    /// Fetches a leader's checkpoint.
    pub fetch: SnapshotFetch,
}

impl std::fmt::Debug for SnapshotConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotConfig").field("dir", &self.dir).field("shard", &self.shard).finish()
    }
}

/// Returns the directory of shard `shard`'s checkpoint at `index` under `snapshots`.
pub fn checkpoint_dir(snapshots: &Path, shard: u32, index: u64) -> PathBuf {
    snapshots.join(format!("raft-{shard}-{index}"))
}

/// Returns the directory a follower unpacks shard `shard`'s incoming snapshot into.
pub fn incoming_dir(snapshots: &Path, shard: u32) -> PathBuf {
    snapshots.join(format!("incoming-{shard}"))
}

/// The name prefix of the directories earlier builds cut a snapshot's table files into for a
/// fetch (the state is now sent without files).
const OUTGOING_PREFIX: &str = "outgoing-";

/// Removes every directory earlier builds left under `snapshots` for a fetch a stop cut short.
pub fn remove_outgoing(snapshots: &Path) {
    for entry in std::fs::read_dir(snapshots).into_iter().flatten().flatten() {
        if entry.file_name().to_string_lossy().starts_with(OUTGOING_PREFIX) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn applied_index(backend: &impl KvBackend) -> Result<u64> {
    let key = crate::raft_log::META_APPLIED_INDEX;
    match backend.get(Cf::Meta, key)? {
        Some(v) => Ok(u64::from_be_bytes(
            v.as_slice().try_into().map_err(|_| StorageError::Corrupt { cf: "meta", what: "applied index" })?,
        )),
        None => Ok(0),
    }
}

/// Leader side: answers the index of a checkpoint of the shard at or after `usable_from` (the
/// raft index the follower needs and the log still continues from), taking one at the applied
/// index when there is none (older ones are removed). Runs on the shard thread, between rounds, so the store
/// holds exactly the applied state.
///
/// # Errors
/// A storage or file system error.
pub fn prepare(backend: &impl KvBackend, cfg: &SnapshotConfig, usable_from: u64) -> Result<u64> {
    // raft asks again every heartbeat while a follower waits: a checkpoint from which the
    // follower can still continue with the log is reused rather than taken anew.
    let prefix = format!("raft-{}-", cfg.shard);
    let existing = std::fs::read_dir(&cfg.dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_prefix(&prefix)?.parse::<u64>().ok())
        .filter(|i| *i >= usable_from)
        .max();
    if let Some(index) = existing {
        return Ok(index);
    }
    let index = applied_index(backend)?;
    let dir = checkpoint_dir(&cfg.dir, cfg.shard, index);
    if !dir.exists() {
        std::fs::create_dir_all(&cfg.dir).map_err(StorageError::from)?;
        for old in std::fs::read_dir(&cfg.dir).map_err(StorageError::from)?.flatten() {
            if old.file_name().to_string_lossy().starts_with(&prefix) {
                let _ = std::fs::remove_dir_all(old.path());
            }
        }
        let tmp = cfg.dir.join(format!("raft-{}-{index}.tmp", cfg.shard));
        let _ = std::fs::remove_dir_all(&tmp);
        backend.checkpoint(&tmp)?;
        std::fs::rename(&tmp, &dir).map_err(StorageError::from)?;
        tracing::info!(shard = cfg.shard, index, "checkpoint taken for a follower's snapshot");
    }
    Ok(index)
}

/// Returns the raft snapshot message naming the checkpoint at `index`.
pub fn message(cfg: &SnapshotConfig, index: u64, term: u64, conf_state: ConfState) -> Snapshot {
    let desc = SnapshotDescriptor { shard: cfg.shard, index, term, from: cfg.me };
    Snapshot {
        data: desc.encode_to_vec(),
        metadata: Some(SnapshotMetadata { index, term, conf_state: Some(conf_state) }),
    }
}

/// The column families a snapshot carries, in the order they are cut and installed.
const REPLICATED: [Cf; 3] = [Cf::Kv, Cf::Lease, Cf::Meta];

/// Bytes of pairs in one archive entry of a snapshot's state (a pair past it ends the entry):
/// 1 MiB, one peer message's worth, so the sender holds a few entries at a time and the
/// follower writes each into its table files as it arrives.
pub const STATE_ENTRY_BYTES: usize = 1 << 20;

/// Largest archive entry a follower takes. One pair past [`STATE_ENTRY_BYTES`] is the most a
/// sender writes, and a pair is far below 64 MiB (a request is at most `--max-request-bytes`,
/// 1.5 MiB by default); the bound keeps a damaged size from taking the follower's memory.
pub const MAX_STATE_ENTRY_BYTES: u64 = 64 << 20;

/// Leader side: reads the replicated state of the checkpoint at `checkpoint`, family by family
/// (`meta` without [`MEMBER_LOCAL_META`]), and hands it to `emit(name, pairs)` as archive
/// entries of about [`STATE_ENTRY_BYTES`] of [`encode_pair`]s, named `<cf>-<n>.pairs`, keys
/// ascending. Nothing is written to disk: the pairs go to the follower, which writes its own
/// table files. Reads the checkpoint, not the live store, so it runs beside the shard, at the
/// checkpoint's index.
///
/// # Errors
/// A storage error, or the first error of `emit`.
pub fn cut<B: KvBackend>(checkpoint: &Path, emit: &mut dyn FnMut(String, Vec<u8>) -> Result<()>) -> Result<()> {
    let src = B::open_checkpoint(checkpoint)?;
    for cf in REPLICATED {
        let (mut n, mut buf, mut failed) = (0u32, Vec::new(), None);
        let mut flush = |buf: &mut Vec<u8>| -> Result<()> {
            let name = format!("{}-{n:06}.pairs", cf.name());
            n += 1;
            emit(name, std::mem::take(buf))
        };
        src.scan_once(cf, &mut |k, v| {
            if cf == Cf::Meta && MEMBER_LOCAL_META.contains(&k) {
                return true;
            }
            if buf.is_empty() {
                buf.reserve(STATE_ENTRY_BYTES + k.len() + v.len() + 8);
            }
            encode_pair(&mut buf, k, v);
            if buf.len() >= STATE_ENTRY_BYTES {
                if let Err(e) = flush(&mut buf) {
                    failed = Some(e);
                    return false;
                }
            }
            true
        })?;
        if let Some(e) = failed {
            return Err(e);
        }
        if !buf.is_empty() {
            flush(&mut buf)?;
        }
    }
    Ok(())
}

/// Follower side: writes the entries [`cut`] sent into table files in a directory as they
/// arrive ([`KvBackend::write_tables`], on a thread of its own, so that writing the files
/// overlaps receiving and checking the stream), for [`install`]. Given an [`IndexRebuild`],
/// it also builds the store's in-memory state from the `kv` pairs on the way, on another
/// thread in front of the writer's: they are the history records in key order, exactly what
/// the store's open would read back from the installed files, so the member need not read
/// them back. At most a few entries wait for each thread: memory stays bounded whatever the
/// state's size (but for the value cache the build fills, within its budget).
#[derive(Debug)]
pub struct TableWriter {
    tx: Option<std::sync::mpsc::SyncSender<(Cf, Vec<u8>)>>,
    thread: Option<std::thread::JoinHandle<Result<()>>>,
    /// The thread that builds the state and hands each entry on to the writer's.
    rebuild: Option<std::thread::JoinHandle<Result<Rebuilt>>>,
    /// The family of the last entry: entries come family by family, in [`REPLICATED`] order.
    last: usize,
}

/// Entries waiting for a [`TableWriter`]'s thread: four keep it busy while the stream delivers
/// the next, 4 MiB at most (twice that with the state's build in front of it).
const TABLE_WRITER_QUEUE: usize = 4;

impl TableWriter {
    /// Starts writing table files of backend `B` into the existing directory `dir`, and, with
    /// `rebuild`, building the store's state from the `kv` entries.
    ///
    /// # Errors
    /// A thread could not be started.
    pub fn start<B: KvBackend>(dir: &Path, rebuild: Option<IndexRebuild>) -> Result<Self> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<(Cf, Vec<u8>)>(TABLE_WRITER_QUEUE);
        let dir = dir.to_path_buf();
        let thread = std::thread::Builder::new()
            .name("ballast-snapshot-tables".into())
            .spawn(move || -> Result<()> {
                let mut rx = rx.into_iter().peekable();
                while let Some(&(cf, _)) = rx.peek() {
                    let mut chunks = std::iter::from_fn(|| rx.next_if(|(c, _)| *c == cf).map(|(_, chunk)| chunk));
                    B::write_tables(cf, &dir, &mut chunks)?;
                }
                Ok(())
            })
            .map_err(StorageError::from)?;
        let Some(mut build) = rebuild else {
            return Ok(Self { tx: Some(tx), thread: Some(thread), rebuild: None, last: 0 });
        };
        let (head, rx) = std::sync::mpsc::sync_channel::<(Cf, Vec<u8>)>(TABLE_WRITER_QUEUE);
        let rebuild = std::thread::Builder::new()
            .name("ballast-snapshot-index".into())
            .spawn(move || -> Result<Rebuilt> {
                for (cf, chunk) in rx {
                    if cf == Cf::Kv {
                        // A record that does not decode fails the build (at `finish`), as it
                        // would fail the store's open; the pairs' own framing is checked here.
                        crate::storage::decode_pairs(&chunk, &mut |k, v| {
                            build.feed(k, v);
                            Ok(())
                        })?;
                    }
                    if tx.send((cf, chunk)).is_err() {
                        // The writer stopped: its error says why.
                        return Err(EngineError::Stopped);
                    }
                }
                build.finish()
            })
            .map_err(StorageError::from)?;
        Ok(Self { tx: Some(head), thread: Some(thread), rebuild: Some(rebuild), last: 0 })
    }

    /// Hands over the archive entry `name` holding `pairs`.
    ///
    /// # Errors
    /// `Corrupt` for an entry of no replicated family or out of order, or a thread's error.
    pub fn push(&mut self, name: &str, pairs: Vec<u8>) -> Result<()> {
        let rank = REPLICATED
            .iter()
            .position(|cf| {
                name.strip_prefix(cf.name()).is_some_and(|rest| rest.starts_with('-') && rest.ends_with(".pairs"))
            })
            .ok_or(StorageError::Corrupt { cf: "snapshot", what: "an entry of no replicated column family" })?;
        if rank < self.last {
            return Err(StorageError::Corrupt { cf: "snapshot", what: "an entry out of order" }.into());
        }
        self.last = rank;
        let sent = self.tx.as_ref().is_some_and(|tx| tx.send((REPLICATED[rank], pairs)).is_ok());
        if !sent {
            // A thread stopped: its error says why.
            return self.join().and(Err(EngineError::Stopped));
        }
        Ok(())
    }

    /// Waits until every file is written and synced; answers the state built, when asked for.
    ///
    /// # Errors
    /// A thread's error: the files, the state, or both are incomplete.
    pub fn finish(mut self) -> Result<Option<Rebuilt>> {
        self.join()
    }

    fn join(&mut self) -> Result<Option<Rebuilt>> {
        self.tx = None;
        // The build's thread ends first and so closes the writer's queue.
        let built = self.rebuild.take().map(|t| t.join().unwrap_or(Err(EngineError::Stopped)));
        let written = match self.thread.take() {
            Some(t) => t.join().unwrap_or(Err(EngineError::Stopped)),
            None => Ok(()),
        };
        // The writer's error first: the build stops (Stopped) because the writer did.
        written?;
        built.transpose()
    }
}

impl Drop for TableWriter {
    fn drop(&mut self) {
        let _ = self.join();
    }
}

/// The received table files in `dir` by column family, each family's in name order.
fn received_tables(dir: &Path) -> Result<Vec<(Cf, Vec<PathBuf>)>> {
    let mut by_cf: Vec<(Cf, Vec<PathBuf>)> = REPLICATED.iter().map(|cf| (*cf, Vec::new())).collect();
    for entry in std::fs::read_dir(dir).map_err(StorageError::from)? {
        let path = entry.map_err(StorageError::from)?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let slot = by_cf
            .iter_mut()
            .find(|(cf, _)| name.strip_prefix(cf.name()).is_some_and(|rest| rest.starts_with('-')))
            .ok_or(StorageError::Corrupt { cf: "snapshot", what: "a received file of no replicated column family" })?;
        slot.1.push(path);
    }
    for (_, files) in &mut by_cf {
        files.sort();
    }
    Ok(by_cf)
}

/// Replaces `live`'s replicated state with the table files [`cut`] wrote, received into
/// `tables`: `kv` and `lease` whole, `meta` except [`MEMBER_LOCAL_META`] (`staging` is scratch
/// space beside them). The files stay; running it twice gives the same state.
///
/// # Errors
/// A storage error, or `Corrupt` for a file of no replicated column family.
pub fn install<B: KvBackend>(live: &B, tables: &Path, staging: &Path) -> Result<()> {
    let received = received_tables(tables)?;
    // Every key of these families is shorter than this bound.
    let end = [0xff; 64];
    for cf in [Cf::Kv, Cf::Lease] {
        live.drop_range(cf, &[], &end)?;
    }
    // `meta` is a handful of keys; synced, with the dropped ranges, before anything is taken in.
    let mut wb = WriteBatch::new();
    live.scan(Cf::Meta, &[], None, ScanOrder::Forward, &mut |k, _| {
        if !MEMBER_LOCAL_META.contains(&k) {
            wb.delete(Cf::Meta, k.to_vec());
        }
        true
    })?;
    live.write(wb, WriteOpts { sync: true })?;
    for (cf, files) in &received {
        live.ingest_tables(*cf, files, staging)?;
    }
    // Whatever the backend took in unsynced is made durable before the marker can go.
    live.write(WriteBatch::new(), WriteOpts { sync: true })?;
    Ok(())
}

/// The scratch directory [`install`] uses beside the received files.
pub fn staging_dir(tables: &Path) -> PathBuf {
    tables.with_extension("ingest")
}

/// Writes the install marker, synced.
///
/// # Errors
/// A storage error.
pub fn mark(live: &impl KvBackend, marker: &SnapshotInstall) -> Result<()> {
    let mut wb = WriteBatch::new();
    wb.put(Cf::Meta, META_SNAPSHOT_INSTALL.to_vec(), marker.encode_to_vec());
    live.write(wb, WriteOpts { sync: true })?;
    Ok(())
}

/// Removes the install marker (synced) and the received files it names.
///
/// # Errors
/// A storage error.
pub fn clear(live: &impl KvBackend) -> Result<()> {
    if let Some(m) = marker(live)? {
        let _ = std::fs::remove_dir_all(&m.dir);
        let _ = std::fs::remove_dir_all(staging_dir(Path::new(&m.dir)));
    }
    let mut wb = WriteBatch::new();
    wb.delete(Cf::Meta, META_SNAPSHOT_INSTALL.to_vec());
    live.write(wb, WriteOpts { sync: true })?;
    Ok(())
}

/// Returns the install marker, if an install is under way.
///
/// # Errors
/// A storage error, or `Corrupt`.
pub fn marker(live: &impl KvBackend) -> Result<Option<SnapshotInstall>> {
    match live.get(Cf::Meta, META_SNAPSHOT_INSTALL)? {
        Some(v) => Ok(Some(
            SnapshotInstall::decode(v.as_slice())
                .map_err(|_| StorageError::Corrupt { cf: "meta", what: "snapshot install marker" })?,
        )),
        None => Ok(None),
    }
}

/// Finishes an install a crash cut short (see the module doc); does nothing without a marker.
///
/// # Errors
/// A storage error, or the received files are gone.
pub fn resume<B: KvBackend, L: LogStore>(live: &B, log: &L) -> Result<()> {
    let Some(m) = marker(live)? else { return Ok(()) };
    tracing::warn!(index = m.index, dir = %m.dir, "finishing a snapshot install cut short");
    install(live, Path::new(&m.dir), &staging_dir(Path::new(&m.dir)))?;
    let cs = ConfState { voters: m.voters.clone(), learners: m.learners.clone(), ..Default::default() };
    let snap = Snapshot {
        data: Vec::new(),
        metadata: Some(SnapshotMetadata { index: m.index, term: m.term, conf_state: Some(cs) }),
    };
    log.apply_snapshot(&snap).map_err(EngineError::Raft)?;
    clear(live)
}

#[cfg(test)]
mod tests;
