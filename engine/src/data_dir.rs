//! Where a member's shards live in its data directory and what identifies the member there:
//! shared by the server, which opens the directory, and `snapshot`, which restores one, so
//! neither depends on the other for it.

use std::path::{Path, PathBuf};

use crate::cluster::members;
use crate::cluster::placement::META_LEADER_PLACEMENT;
use crate::error::{EngineError, Result};
use crate::storage::rocks::RocksBackend;
use crate::storage::{Cf, KvBackend, WriteBatch, WriteOpts};

/// Shard 0's record of the member's ID (u64 BE).
pub(crate) const META_MEMBER_ID: &[u8] = b"member_id";
/// Shard 0's record of the cluster's ID (u64 BE).
pub(crate) const META_CLUSTER_ID: &[u8] = b"cluster_id";
/// Shard 0's record of the member's shard count (u32 BE). Data directories from before shards
/// have none and hold one shard.
pub(crate) const META_SHARD_COUNT: &[u8] = b"shard_count";

/// The directory shard `n`'s RocksDB lives in: `<data-dir>/db` for shard 0 (etcd's one-shard
/// layout), `<data-dir>/shard-<n>/db` for the others.
pub(crate) fn shard_db_dir(data_dir: &Path, n: u32) -> PathBuf {
    if n == 0 {
        data_dir.join("db")
    } else {
        data_dir.join(format!("shard-{n}")).join("db")
    }
}

/// Readies shard 0 of a restored snapshot of `shards` shards: drops the member and cluster IDs,
/// so the next start settles new ones from its own flags, and records the shard count if the
/// snapshot's member predates its record (without it, a start with another `--shards` would be
/// taken for a new directory's first).
///
/// # Errors
/// The backend's read or write error, or `ShardCount` when shard 0 records another count than
/// the snapshot holds.
pub(crate) fn prepare_restored(backend: &RocksBackend, shards: u32) -> Result<()> {
    let mut wb = WriteBatch::new();
    wb.delete(Cf::Meta, META_MEMBER_ID.to_vec());
    wb.delete(Cf::Meta, META_CLUSTER_ID.to_vec());
    wb.delete(Cf::Meta, members::META_MEMBERSHIP.to_vec());
    // The restored cluster places its leaders as its own members' flags say.
    wb.delete(Cf::Meta, META_LEADER_PLACEMENT.to_vec());
    match backend.get(Cf::Meta, META_SHARD_COUNT)? {
        None => wb.put(Cf::Meta, META_SHARD_COUNT.to_vec(), shards.to_be_bytes().to_vec()),
        Some(v) if v.as_slice() == shards.to_be_bytes() => {}
        Some(_) => {
            return Err(EngineError::ShardCount(format!(
                "the snapshot holds {shards} shards but its shard 0 records another count"
            )))
        }
    }
    backend.write(wb, WriteOpts { sync: true })?;
    Ok(())
}
