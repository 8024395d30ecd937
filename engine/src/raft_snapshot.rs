//! Raft snapshots of a shard: how a follower too far behind the leader's log catches up.
//!
//! The state never travels inside a raft message. When raft asks the leader's log store for a
//! snapshot, the leader takes a RocksDB checkpoint of the shard at its applied index
//! (`<data-dir>/snapshots/raft-<shard>-<index>`, reused while raft asks again for the same
//! index) and sends a [`SnapshotDescriptor`] naming it. The follower fetches the checkpoint over
//! the peer port as a snapshot archive (`Peer.FetchSnapshot`, streamed in chunks that are
//! unpacked into the checkpoint's files as they arrive, the SHA-256 checked at the end, so memory
//! stays bounded whatever the size and the archive is never stored whole), and installs it:
//!
//! 1. a marker ([`SnapshotInstall`]) is written to the shard's meta, synced;
//! 2. the replicated column families (`kv`, `lease`, and `meta` except the member's own keys)
//!    are replaced by the checkpoint's ([`install`]): `kv` and `lease` are bulk loaded, written
//!    once as sorted table files that RocksDB takes in whole, past its write-ahead log and
//!    memtables (a copy through ordinary writes wrote every byte about four times);
//! 3. the raft log is replaced by the snapshot's metadata (`LogStore::apply_snapshot`);
//! 4. the marker and the unpacked files are removed.
//!
//! A start that finds the marker repeats 2–4 ([`resume`]): every step can be done twice, so an
//! install cut short by `kill -9` is finished, never half applied.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ballast_proto::ballastpb::{SnapshotDescriptor, SnapshotInstall};
use ballast_raft::{ConfState, LogStore, Snapshot, SnapshotMetadata};
use prost::Message;

use crate::error::{EngineError, Result};
use crate::storage::{Cf, KvBackend, ScanOrder, StorageError, WriteBatch, WriteOpts};

/// Shard meta key of the install marker.
pub const META_SNAPSHOT_INSTALL: &[u8] = b"snapshot_install";

/// Meta keys that belong to the member rather than to the replicated state: a snapshot's state
/// replaces the rest of `meta`, never these (its sender is another member).
pub const MEMBER_LOCAL_META: [&[u8]; 4] = [b"member_id", b"cluster_id", b"shard_count", META_SNAPSHOT_INSTALL];

/// Fetches the checkpoint a descriptor names from its member and unpacks it into the given
/// directory; answers the directory to open with [`KvBackend::open_checkpoint`].
pub type SnapshotFetch = Arc<dyn Fn(&SnapshotDescriptor, &Path) -> Result<PathBuf> + Send + Sync>;

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

/// Replaces `live`'s replicated state with `src`'s: `kv` and `lease` whole (bulk loaded, see
/// [`KvBackend::bulk_load_from`], with `staging` as scratch space), `meta` except
/// [`MEMBER_LOCAL_META`]. Synced at the end; running it twice gives the same state.
///
/// # Errors
/// A storage error.
pub fn install<B: KvBackend>(live: &B, src: &B, staging: &Path) -> Result<()> {
    // Every key of these families is shorter than this bound.
    let end = [0xff; 64];
    for cf in [Cf::Kv, Cf::Lease] {
        live.drop_range(cf, &[], &end)?;
    }
    let mut wb = WriteBatch::new();
    live.scan(Cf::Meta, &[], None, ScanOrder::Forward, &mut |k, _| {
        if !MEMBER_LOCAL_META.contains(&k) {
            wb.delete(Cf::Meta, k.to_vec());
        }
        true
    })?;
    live.write(std::mem::take(&mut wb), WriteOpts { sync: false })?;
    for cf in [Cf::Kv, Cf::Lease] {
        live.bulk_load_from(cf, src, staging)?;
    }
    let _ = std::fs::remove_dir_all(staging);
    // `meta` is a handful of keys.
    src.scan(Cf::Meta, &[], None, ScanOrder::Forward, &mut |k, v| {
        if !MEMBER_LOCAL_META.contains(&k) {
            wb.put(Cf::Meta, k.to_vec(), v.to_vec());
        }
        true
    })?;
    live.write(wb, WriteOpts { sync: true })?;
    Ok(())
}

/// The scratch directory [`install`] uses beside an unpacked checkpoint.
pub fn staging_dir(checkpoint: &Path) -> PathBuf {
    checkpoint.with_extension("ingest")
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

/// Removes the install marker (synced) and the unpacked files it names.
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
/// A storage error, or the unpacked checkpoint is gone.
pub fn resume<B: KvBackend, L: LogStore>(live: &B, log: &L) -> Result<()> {
    let Some(m) = marker(live)? else { return Ok(()) };
    tracing::warn!(index = m.index, dir = %m.dir, "finishing a snapshot install cut short");
    let src = B::open_checkpoint(Path::new(&m.dir))?;
    install(live, &src, &staging_dir(Path::new(&m.dir)))?;
    drop(src);
    let cs = ConfState { voters: m.voters.clone(), learners: m.learners.clone(), ..Default::default() };
    let snap = Snapshot {
        data: Vec::new(),
        metadata: Some(SnapshotMetadata { index: m.index, term: m.term, conf_state: Some(cs) }),
    };
    log.apply_snapshot(&snap).map_err(EngineError::Raft)?;
    clear(live)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::mem::MemBackend;

    fn put(b: &MemBackend, cf: Cf, k: &[u8], v: &[u8]) {
        let mut wb = WriteBatch::new();
        wb.put(cf, k.to_vec(), v.to_vec());
        b.write(wb, WriteOpts { sync: true }).expect("write");
    }

    #[test]
    fn install_replaces_the_replicated_state_and_keeps_the_members_own_keys() {
        let live = MemBackend::new();
        put(&live, Cf::Kv, b"old", b"1");
        put(&live, Cf::Lease, b"old-lease", b"1");
        put(&live, Cf::Meta, b"member_id", b"me");
        put(&live, Cf::Meta, b"applied_index", b"old");
        put(&live, Cf::Raft, b"e1", b"entry");
        let src = MemBackend::new();
        put(&src, Cf::Kv, b"new", b"2");
        put(&src, Cf::Meta, b"member_id", b"leader");
        put(&src, Cf::Meta, b"applied_index", b"new");
        let staging = std::env::temp_dir().join("unused-by-the-in-memory-store");
        install(&live, &src, &staging).expect("install");
        install(&live, &src, &staging).expect("installing twice gives the same state");
        assert_eq!(live.get(Cf::Kv, b"old").expect("get"), None);
        assert_eq!(live.get(Cf::Kv, b"new").expect("get"), Some(b"2".to_vec()));
        assert_eq!(live.get(Cf::Lease, b"old-lease").expect("get"), None);
        assert_eq!(live.get(Cf::Meta, b"member_id").expect("get"), Some(b"me".to_vec()), "the member's own ID stays");
        assert_eq!(live.get(Cf::Meta, b"applied_index").expect("get"), Some(b"new".to_vec()));
        assert_eq!(live.get(Cf::Raft, b"e1").expect("get"), Some(b"entry".to_vec()), "the raft log is not touched");
    }

    #[test]
    fn an_install_cut_short_is_finished_at_the_next_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = MemBackend::new();
        put(&src, Cf::Kv, b"k", b"v");
        let cp = dir.path().join("incoming");
        src.checkpoint(&cp).expect("checkpoint");
        let live = MemBackend::new();
        let log = crate::raft_log::BackendLogStore::open(live.clone(), 16).expect("log");
        mark(
            &live,
            &SnapshotInstall {
                index: 42,
                term: 3,
                voters: vec![1, 2, 3],
                learners: vec![],
                dir: cp.display().to_string(),
            },
        )
        .expect("mark");
        resume(&live, &log).expect("resume");
        assert_eq!(live.get(Cf::Kv, b"k").expect("get"), Some(b"v".to_vec()));
        assert_eq!(marker(&live).expect("marker"), None);
        assert_eq!(raft::Storage::first_index(&log).expect("first"), 43, "the log starts after the snapshot");
        assert!(!cp.exists(), "the unpacked files are removed");
    }
}
