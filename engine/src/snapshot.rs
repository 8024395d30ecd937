//! Snapshot archives: the format `Maintenance.Snapshot` streams (written by
//! [`crate::api::maintenance`]) and [`restore`], which unpacks one into a new data directory
//! (`ballast snapshot restore`).
//!
//! # Format
//! The line `BALLAST-SNAPSHOT 1\n`; then for each file a big-endian `u32` name length, the name,
//! a big-endian `u64` size and the bytes; then a `u32` zero, zero bytes up to a multiple of 512,
//! and the SHA-256 of everything before it (32 bytes). Names are a shard's RocksDB checkpoint
//! files: bare (`CURRENT`, `000012.sst`) for a one-shard member, `shard-<n>/<file>` for each shard
//! of a sharded one, all shards copied at one revision. (A raft snapshot's archive, fetched by
//! one member from another, has the same form and holds one shard's replicated state instead,
//! as entries of key-value pairs named `<column family>-<n>.pairs`: see `raft_snapshot`.) etcd's bbolt stream has the same tail
//! (page-aligned data plus SHA-256), which is what `etcdctl snapshot save` checks.
//!
//! # Restoring
//! As `etcdctl snapshot restore` does for etcd, [`restore`] fills a data directory that does not
//! exist yet (or is empty) and leaves the member's identity to its first start: the member and
//! cluster IDs the snapshot's member had are dropped, so the restored member takes new ones from
//! its own peer URLs and cluster token, a new cluster with the snapshot's data. The shard count
//! stays the snapshot's: start the member with the same `--shards`.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{EngineError, Result};
use crate::storage::rocks::{RocksBackend, RocksOptions};
use crate::storage::{KvBackend, StorageError};

pub use crate::snapshot_format::MAGIC;

/// Length of the SHA-256 trailer.
const DIGEST_LEN: u64 = 32;

/// What [`restore`] unpacked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    /// Shards in the snapshot; the member must be started with this `--shards`.
    pub shards: u32,
    /// Files written.
    pub files: usize,
    /// Bytes written.
    pub bytes: u64,
}

/// Why an archive could not be restored.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// The archive is damaged, truncated or not a Ballast snapshot.
    #[error("{path}: not a usable Ballast snapshot: {why}")]
    BadArchive {
        /// The archive.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// The data directory already holds something.
    #[error("data-dir {0} exists and is not empty; restore needs a new directory")]
    DataDirInUse(PathBuf),
    /// Reading the archive or writing the directory failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The restored store could not be opened to reset its identity.
    #[error("{0}")]
    Engine(#[from] EngineError),
}

impl From<StorageError> for RestoreError {
    fn from(e: StorageError) -> Self {
        Self::Engine(e.into())
    }
}

/// Unpacks the archive at `archive` into `data_dir`, which must not exist or be empty, after
/// checking its checksum. On failure nothing is left in `data_dir`.
///
/// # Errors
/// [`RestoreError`]: a damaged archive, a data directory in use, or an I/O failure.
pub fn restore(archive: &Path, data_dir: &Path) -> Result<Restored, RestoreError> {
    if std::fs::read_dir(data_dir).is_ok_and(|mut d| d.next().is_some()) {
        return Err(RestoreError::DataDirInUse(data_dir.to_path_buf()));
    }
    let bad = |why: String| RestoreError::BadArchive { path: archive.to_path_buf(), why };
    let body = verify_digest(archive).map_err(|e| match e {
        RestoreError::Io(e) => bad(e.to_string()),
        e => e,
    })?;
    let result = unpack(archive, body, data_dir);
    if result.is_err() {
        let _ = std::fs::remove_dir_all(data_dir);
    }
    result
}

/// Reads a leader's state fetched for a raft snapshot (an archive of `raft_snapshot::cut`'s
/// entries) from `stream` as it arrives, writing it into table files of backend `B` in the
/// directory a one-shard store would have under `dir` (`raft_snapshot::TableWriter`, which
/// also builds the store's state from the pairs when given `rebuild`) and checking the SHA-256
/// trailer at its end; answers that directory once every file is written and synced, and the
/// state built. The archive is never stored: memory holds a few entries, and a damaged or cut
/// short archive leaves nothing behind in `dir` and no state.
///
/// # Errors
/// [`RestoreError`]: a damaged archive or an I/O failure (of `stream` too).
pub(crate) fn unpack_state_stream<B: KvBackend>(
    stream: impl Read,
    dir: &Path,
    rebuild: Option<crate::mvcc::IndexRebuild>,
) -> Result<crate::raft_snapshot::Fetched, RestoreError> {
    let what = dir.join("<fetched snapshot>");
    let tables = crate::data_dir::shard_db_dir(dir, 0);
    let result = (|| -> Result<Option<crate::mvcc::Rebuilt>, RestoreError> {
        std::fs::create_dir_all(&tables)?;
        let mut writer = crate::raft_snapshot::TableWriter::start::<B>(&tables, rebuild)?;
        let mut r = HashingReader { inner: BufReader::with_capacity(1 << 20, stream), hasher: Sha256::new(), read: 0 };
        let bad = |why: String| RestoreError::BadArchive { path: what.clone(), why };
        if !read_magic(&mut r)? {
            return Err(bad("it does not start with the Ballast snapshot header".into()));
        }
        while let Some(name) = read_name(&mut r).map_err(bad)? {
            let size = read_size(&mut r).map_err(bad)?;
            if size > crate::raft_snapshot::MAX_STATE_ENTRY_BYTES {
                return Err(bad(format!("{name} holds {size} bytes")));
            }
            let mut pairs = vec![0u8; size as usize];
            r.read_exact(&mut pairs).map_err(|_| bad(format!("{name} is cut short")))?;
            writer.push(&name, pairs).map_err(|e| bad(format!("{name}: {e}")))?;
        }
        check_trailer(&mut r, &what)?;
        writer.finish().map_err(|e| bad(e.to_string()))
    })();
    match result {
        Ok(rebuilt) => Ok(crate::raft_snapshot::Fetched { tables, rebuilt }),
        Err(e) => {
            let _ = std::fs::remove_dir_all(dir);
            Err(e)
        }
    }
}

/// Reads an archive's padding and SHA-256 trailer after its file list from `r` and checks
/// them, and that nothing follows.
fn check_trailer<R: Read>(r: &mut HashingReader<R>, what: &Path) -> Result<(), RestoreError> {
    let bad = |why: &str| RestoreError::BadArchive { path: what.to_path_buf(), why: why.to_string() };
    let padding = (512 - r.read % 512) % 512;
    let copied = std::io::copy(&mut (&mut *r).take(padding), &mut std::io::sink())?;
    if copied != padding {
        return Err(bad("it ends inside its padding"));
    }
    let digest = std::mem::take(&mut r.hasher).finalize();
    let mut want = [0u8; DIGEST_LEN as usize];
    r.inner.read_exact(&mut want).map_err(|_| bad("it ends inside its SHA-256"))?;
    if digest.as_slice() != want {
        return Err(bad("its SHA-256 does not match (damaged or cut short)"));
    }
    if r.inner.read(&mut [0u8; 1])? != 0 {
        return Err(bad("bytes follow its SHA-256"));
    }
    Ok(())
}

/// A reader that hashes what passes through it and counts it.
struct HashingReader<R> {
    inner: R,
    hasher: Sha256,
    read: u64,
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.read += n as u64;
        Ok(n)
    }
}

/// Checks the archive's size and SHA-256 trailer; returns the length of what the digest covers.
fn verify_digest(archive: &Path) -> Result<u64, RestoreError> {
    let bad = |why: &str| RestoreError::BadArchive { path: archive.to_path_buf(), why: why.to_string() };
    let mut f = File::open(archive)?;
    let len = f.metadata()?.len();
    if len < MAGIC.len() as u64 + 4 + DIGEST_LEN || len % 512 != DIGEST_LEN {
        return Err(bad("its size is not that of a snapshot (512-byte pages plus a SHA-256)"));
    }
    let body = len - DIGEST_LEN;
    let mut hasher = Sha256::new();
    let mut left = body;
    let mut buf = vec![0u8; 1 << 16];
    while left > 0 {
        let want = left.min(buf.len() as u64) as usize;
        let n = f.read(&mut buf[..want])?;
        if n == 0 {
            return Err(bad("it ends early"));
        }
        hasher.update(&buf[..n]);
        left -= n as u64;
    }
    let mut want = [0u8; DIGEST_LEN as usize];
    f.read_exact(&mut want)?;
    if hasher.finalize().as_slice() != want {
        return Err(bad("its SHA-256 does not match (damaged or cut short)"));
    }
    Ok(body)
}

/// Where an archive entry goes: (shard, file name inside that shard's checkpoint).
fn place(name: &str) -> Option<(u32, &str)> {
    let plain = |f: &str| !f.is_empty() && f != "." && f != ".." && !f.contains('/') && !f.contains('\\');
    match name.split_once('/') {
        None => plain(name).then_some((0, name)),
        Some((dir, file)) => {
            let n: u32 = dir.strip_prefix("shard-")?.parse().ok()?;
            (plain(file) && dir == format!("shard-{n}")).then_some((n, file))
        }
    }
}

fn unpack(archive: &Path, body: u64, data_dir: &Path) -> Result<Restored, RestoreError> {
    let mut r = BufReader::new(File::open(archive)?).take(body);
    let (count, files, bytes) = unpack_files(&mut r, archive, data_dir)?;
    // The first start settles a new identity from its own flags, as after etcd's restore.
    let first = RocksBackend::open(&crate::data_dir::shard_db_dir(data_dir, 0), &RocksOptions::default())?;
    crate::data_dir::prepare_restored(&first, count)?;
    crate::raft_log::restart_as_lone_voter(&first)?;
    drop(first);
    for s in 1..count {
        let shard = RocksBackend::open(&crate::data_dir::shard_db_dir(data_dir, s), &RocksOptions::default())?;
        crate::raft_log::restart_as_lone_voter(&shard)?;
    }
    Ok(Restored { shards: count, files, bytes })
}

/// Reads an archive's first bytes: whether they are Ballast's header.
fn read_magic(r: &mut impl Read) -> std::io::Result<bool> {
    let mut magic = vec![0u8; MAGIC.len()];
    r.read_exact(&mut magic)?;
    Ok(magic == MAGIC)
}

/// Reads the next file name of an archive's list: `None` at the empty name that ends it; the
/// error says where the archive is damaged.
fn read_name(r: &mut impl Read) -> Result<Option<String>, String> {
    let mut word = [0u8; 4];
    r.read_exact(&mut word).map_err(|_| "it ends inside its file list".to_string())?;
    let name_len = u32::from_be_bytes(word) as usize;
    if name_len == 0 {
        return Ok(None);
    }
    if name_len > 4096 {
        return Err(format!("a file name of {name_len} bytes"));
    }
    let mut name = vec![0u8; name_len];
    r.read_exact(&mut name).map_err(|_| "it ends inside a file name".to_string())?;
    String::from_utf8(name).map(Some).map_err(|_| "a file name is not UTF-8".to_string())
}

/// Reads the size that follows a file's name in an archive.
fn read_size(r: &mut impl Read) -> Result<u64, String> {
    let mut size = [0u8; 8];
    r.read_exact(&mut size).map_err(|_| "it ends inside a file header".to_string())?;
    Ok(u64::from_be_bytes(size))
}

/// Reads an archive's header and files from `r` (up to and including the empty name that ends
/// the list) into their shards' directories under `data_dir`; answers the shard count, files
/// and bytes. `archive` names the archive in errors.
fn unpack_files(r: &mut impl Read, archive: &Path, data_dir: &Path) -> Result<(u32, usize, u64), RestoreError> {
    let bad = |why: String| RestoreError::BadArchive { path: archive.to_path_buf(), why };
    if !read_magic(r)? {
        return Err(bad("it does not start with the Ballast snapshot header".into()));
    }
    let (mut files, mut bytes) = (0usize, 0u64);
    let mut shards = std::collections::BTreeSet::new();
    let mut plain_names = false;
    while let Some(name) = read_name(r).map_err(bad)? {
        let (shard, file) = place(&name).ok_or_else(|| bad(format!("unexpected file name {name:?}")))?;
        plain_names |= !name.contains('/');
        let size = read_size(r).map_err(bad)?;
        let dir = crate::data_dir::shard_db_dir(data_dir, shard);
        std::fs::create_dir_all(&dir)?;
        let mut out = BufWriter::new(File::create(dir.join(file))?);
        let copied = std::io::copy(&mut Read::take(&mut *r, size), &mut out)?;
        if copied != size {
            return Err(bad(format!("{name} is cut short ({copied} of {size} bytes)")));
        }
        out.into_inner().map_err(std::io::IntoInnerError::into_error)?.sync_all()?;
        shards.insert(shard);
        files += 1;
        bytes += size;
    }
    let count = shards.len() as u32;
    if count == 0 {
        return Err(bad("it holds no files".into()));
    }
    if shards.iter().copied().ne(0..count) || (plain_names && count > 1) {
        return Err(bad(format!("its shards are not 0..{count}: {shards:?}")));
    }
    Ok((count, files, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_shard_directories_and_nothing_escapes() {
        assert_eq!(place("CURRENT"), Some((0, "CURRENT")));
        assert_eq!(place("shard-3/000012.sst"), Some((3, "000012.sst")));
        for bad in ["", "..", "shard-1/..", "shard-x/a", "shard-01/a", "a/b", "shard-1/a/b", "/etc/passwd", "shard-1/"]
        {
            assert_eq!(place(bad), None, "{bad:?}");
        }
    }

    /// Builds an archive of `entries` the way the Snapshot RPC writes one.
    fn archive(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        for (name, data) in entries {
            out.extend_from_slice(&(name.len() as u32).to_be_bytes());
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(&(data.len() as u64).to_be_bytes());
            out.extend_from_slice(data);
        }
        out.extend_from_slice(&0u32.to_be_bytes());
        out.resize(out.len().div_ceil(512) * 512, 0);
        let digest = Sha256::digest(&out);
        out.extend_from_slice(&digest);
        out
    }

    #[test]
    fn a_damaged_archive_is_refused_and_leaves_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("snap");
        let mut bytes = archive(&[("CURRENT", b"MANIFEST-000001\n")]);
        bytes[MAGIC.len() + 6] ^= 1;
        std::fs::write(&path, &bytes).expect("write");
        let data = dir.path().join("data");
        let err = restore(&path, &data).expect_err("a flipped bit");
        assert!(err.to_string().contains("SHA-256 does not match"), "{err}");
        assert!(!data.exists());
        std::fs::write(&path, &bytes[..bytes.len() - 1]).expect("write");
        assert!(restore(&path, &data).expect_err("cut short").to_string().contains("size"));
    }

    #[test]
    fn shards_must_be_numbered_from_zero_without_gaps() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("snap");
        std::fs::write(&path, archive(&[("shard-0/CURRENT", b"x"), ("shard-2/CURRENT", b"x")])).expect("write");
        let data = dir.path().join("data");
        let err = restore(&path, &data).expect_err("shard 1 missing");
        assert!(err.to_string().contains("shards are not 0..2"), "{err}");
        assert!(!data.exists(), "nothing is left behind");
    }

    #[test]
    fn a_data_directory_in_use_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("snap");
        std::fs::write(&path, archive(&[("CURRENT", b"x")])).expect("write");
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).expect("mkdir");
        std::fs::write(data.join("keep"), b"mine").expect("write");
        assert!(matches!(restore(&path, &data), Err(RestoreError::DataDirInUse(_))));
        assert_eq!(std::fs::read(data.join("keep")).expect("still there"), b"mine");
    }

    #[test]
    fn a_fetched_state_is_unpacked_as_it_streams_and_a_bad_one_leaves_nothing() {
        use crate::storage::{encode_pair, Cf, MemBackend, ScanOrder, WriteBatch, WriteOpts};
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut kv, mut meta) = (Vec::new(), Vec::new());
        encode_pair(&mut kv, b"k1", &[7u8; 3000]);
        encode_pair(&mut kv, b"k2", b"v");
        encode_pair(&mut meta, b"applied_index", b"9");
        let bytes = archive(&[("kv-000000.pairs", &kv), ("meta-000000.pairs", &meta)]);
        let target = dir.path().join("incoming");
        // One byte at a time: the reader is a stream of chunks of any size.
        let trickle = std::io::BufReader::with_capacity(1, bytes.as_slice());
        let tables = unpack_state_stream::<MemBackend>(trickle, &target, None).expect("unpacked").tables;
        assert_eq!(tables, crate::data_dir::shard_db_dir(&target, 0));
        let live = MemBackend::new();
        let mut wb = WriteBatch::new();
        wb.put(Cf::Kv, b"old".to_vec(), b"x".to_vec());
        live.write(wb, WriteOpts::default()).expect("write");
        crate::raft_snapshot::install(&live, &tables, &dir.path().join("staging")).expect("install");
        let mut got = Vec::new();
        live.scan(Cf::Kv, b"", None, ScanOrder::Forward, &mut |k, v| {
            got.push((k.to_vec(), v.len()));
            true
        })
        .expect("scan");
        assert_eq!(got, [(b"k1".to_vec(), 3000), (b"k2".to_vec(), 1)]);
        assert_eq!(live.get(Cf::Meta, b"applied_index").expect("get"), Some(b"9".to_vec()));

        let mut flipped = bytes.clone();
        *flipped.last_mut().expect("digest") ^= 1;
        let other = dir.path().join("flipped");
        let err =
            unpack_state_stream::<MemBackend>(flipped.as_slice(), &other, None).expect_err("a flipped digest bit");
        assert!(err.to_string().contains("SHA-256 does not match"), "{err}");
        assert!(!other.exists(), "nothing is left behind");

        for (cut, why) in [(bytes.len() - 1, "inside its SHA-256"), (bytes.len() - 40, "inside its padding")] {
            let err = unpack_state_stream::<MemBackend>(&bytes[..cut], &other, None).expect_err("cut short");
            assert!(err.to_string().contains(why), "{cut}: {err}");
            assert!(!other.exists());
        }
        let mut longer = bytes.clone();
        longer.push(0);
        let err = unpack_state_stream::<MemBackend>(longer.as_slice(), &other, None).expect_err("trailing");
        assert!(err.to_string().contains("follow"), "{err}");
        for (entries, why) in [
            (vec![("raft-000000.pairs", &kv)], "no replicated column family"),
            (vec![("meta-000000.pairs", &meta), ("kv-000000.pairs", &kv)], "out of order"),
            (vec![("kv-000000.pairs", &kv[..kv.len() - 1].to_vec())], "cut short"),
        ] {
            let entries: Vec<(&str, &[u8])> = entries.iter().map(|(n, b)| (*n, b.as_slice())).collect();
            let err = unpack_state_stream::<MemBackend>(archive(&entries).as_slice(), &other, None).expect_err(why);
            assert!(err.to_string().contains(why), "{why}: {err}");
            assert!(!other.exists());
        }
    }
}
