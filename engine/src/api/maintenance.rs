//! The `etcdserverpb.Maintenance` service: status, hashes, defragmentation, alarms and
//! snapshots.
//!
//! # Snapshots
//! etcd streams its bbolt file; Ballast streams RocksDB checkpoints of every shard, taken at one
//! revision, as the archive [`crate::snapshot`] describes. Its tail is etcd's (page-aligned data
//! plus SHA-256), which is what `etcdctl snapshot save` checks (`size % 512 == 32`); it stores the
//! archive as is. `etcdctl snapshot status/restore` expect bbolt and do not apply: `ballast
//! snapshot restore` unpacks the archive into a new data directory.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use ballast_proto::ballastpb::raft_command::Command;
use ballast_proto::etcdserverpb::{
    alarm_request::AlarmAction, maintenance_server::Maintenance, AlarmMember, AlarmRequest, AlarmResponse, AlarmType,
    DefragmentRequest, DefragmentResponse, HashKvRequest, HashKvResponse, HashRequest, HashResponse, MoveLeaderRequest,
    MoveLeaderResponse, ResponseHeader, SnapshotRequest, SnapshotResponse, StatusRequest, StatusResponse,
};
use futures::{Stream, StreamExt};
use sha2::{Digest, Sha256};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::{unexpected, Api, ETCD_COMPAT_VERSION};
use crate::error::EngineError;
use crate::shard::cut::Cut;
use crate::shard::{ShardMsg, ShardStatus, WriteResponse};

/// Bytes per snapshot message; etcd's own send buffer is 32 KiB.
const SNAPSHOT_CHUNK: usize = 32 * 1024;

/// Serves the maintenance RPCs.
#[derive(Debug, Clone)]
pub struct MaintenanceService {
    api: Api,
}

impl MaintenanceService {
    /// Returns the service over `api`.
    pub fn new(api: Api) -> Self {
        Self { api }
    }

    /// A header at `revision`, or at the current revision when 0 (etcd's `header.fill`).
    fn header(&self, revision: i64) -> Option<ResponseHeader> {
        let mut h = self.api.header();
        if let Some(h) = h.as_mut().filter(|_| revision != 0) {
            h.revision = revision;
        }
        h
    }
}

impl MaintenanceService {
    /// The member's status from every shard's: sizes and raft figures add up (each shard is
    /// its own raft group; with one shard they are that group's), the term is the highest, the
    /// revision is the member's, and alarms are those any shard raised.
    async fn status_all(&self) -> crate::Result<ShardStatus> {
        let all = self.api.call_all(ShardMsg::Status).await?;
        let mut st = ShardStatus { revision: self.api.revs.last(), leader: all[0].leader, ..Default::default() };
        for s in &all {
            st.db_size += s.db_size;
            st.raft_index += s.raft_index;
            st.raft_applied_index += s.raft_applied_index;
            st.raft_term = st.raft_term.max(s.raft_term);
            st.alarms.extend(&s.alarms);
        }
        st.alarms.sort_unstable();
        st.alarms.dedup();
        Ok(st)
    }
}

/// One hash from the shards' hashes: a shard's own with one shard (etcd's value for the same
/// data), else a CRC32 of the shards' hashes in shard order. Members compare hashes only with
/// members of the same shard count.
fn combine_hashes(hashes: &[u32]) -> u32 {
    if let [one] = hashes {
        return *one;
    }
    let mut h = crc32fast::Hasher::new();
    for x in hashes {
        h.update(&x.to_be_bytes());
    }
    h.finalize()
}

fn alarm_name(a: i32) -> &'static str {
    match AlarmType::try_from(a) {
        Ok(AlarmType::Nospace) => "NOSPACE",
        Ok(AlarmType::Corrupt) => "CORRUPT",
        _ => "NONE",
    }
}

#[tonic::async_trait]
impl Maintenance for MaintenanceService {
    async fn alarm(&self, req: Request<AlarmRequest>) -> Result<Response<AlarmResponse>, Status> {
        let r = req.into_inner();
        match AlarmAction::try_from(r.action) {
            Ok(AlarmAction::Get) => {
                let st = self.status_all().await?;
                let alarms = st
                    .alarms
                    .into_iter()
                    .filter(|a| r.alarm == 0 || *a == r.alarm)
                    .map(|alarm| AlarmMember { member_id: self.api.member.id, alarm })
                    .collect();
                Ok(Response::new(AlarmResponse { header: self.header(st.revision), alarms }))
            }
            _ => match self.api.write_all(Command::Alarm(r)).await? {
                WriteResponse::Alarm(resp) => Ok(Response::new(resp)),
                _ => Err(unexpected("alarm")),
            },
        }
    }

    async fn status(&self, _req: Request<StatusRequest>) -> Result<Response<StatusResponse>, Status> {
        let st = self.status_all().await?;
        let errors =
            st.alarms.iter().map(|a| format!("memberID:{} alarm:{} ", self.api.member.id, alarm_name(*a))).collect();
        Ok(Response::new(StatusResponse {
            header: self.header(st.revision),
            version: ETCD_COMPAT_VERSION.to_string(),
            db_size: st.db_size,
            leader: self.api.member_of_raft_id(st.leader),
            raft_index: st.raft_index,
            raft_term: st.raft_term,
            raft_applied_index: st.raft_applied_index,
            errors,
            db_size_in_use: st.db_size,
            is_learner: self.api.membership.read().get(self.api.member.id).is_some_and(|m| m.is_learner),
        }))
    }

    async fn defragment(&self, req: Request<DefragmentRequest>) -> Result<Response<DefragmentResponse>, Status> {
        self.api.permit_admin(&req).await.map_err(super::status::unconverted_auth)?;
        self.api.call_all(ShardMsg::Defragment).await?;
        Ok(Response::new(DefragmentResponse { header: self.header(0) }))
    }

    async fn hash(&self, req: Request<HashRequest>) -> Result<Response<HashResponse>, Status> {
        self.api.permit_admin(&req).await.map_err(super::status::unconverted_auth)?;
        let hashes = self.api.call_all(ShardMsg::Hash).await?;
        let hash = combine_hashes(&hashes);
        Ok(Response::new(HashResponse { header: self.header(self.api.revs.last()), hash }))
    }

    async fn hash_kv(&self, req: Request<HashKvRequest>) -> Result<Response<HashKvResponse>, Status> {
        self.api.permit_admin(&req).await.map_err(super::status::unconverted_auth)?;
        let rev = req.into_inner().revision;
        let mut parts = self.api.call_all(|tx| ShardMsg::HashKv(rev, tx)).await?;
        if parts.len() == 1 {
            return Ok(Response::new(parts.swap_remove(0)));
        }
        let hashes: Vec<u32> = parts.iter().map(|p| p.hash).collect();
        let mut resp = parts.swap_remove(0);
        resp.hash = combine_hashes(&hashes);
        resp.header = self.header(self.api.revs.last());
        Ok(Response::new(resp))
    }

    type SnapshotStream = SnapshotChunks;

    async fn snapshot(&self, req: Request<SnapshotRequest>) -> Result<Response<Self::SnapshotStream>, Status> {
        self.api.permit_admin(&req).await.map_err(super::status::unconverted_auth)?;
        if !self.api.evaluates() && self.api.spread_group().is_none() {
            // This member's shards apply their logs on their own schedules, so no moment holds
            // one revision's state of every shard here: the member that orders every write takes
            // the snapshot, and this one passes its stream on.
            return Ok(Response::new(self.api.snapshot_from_evaluator().await?));
        }
        let n = self.api.next_id.fetch_add(1, Ordering::Relaxed);
        std::fs::create_dir_all(&self.api.snapshot_dir)
            .map_err(|e| Status::unavailable(format!("etcdserver: snapshot: {e}")))?;
        let dir = self.api.snapshot_dir.join(format!("snap-{n}"));
        let _ = std::fs::remove_dir_all(&dir);
        // One shard's checkpoint is the archive's files; with several, each shard's goes into
        // `shard-<n>/`, all taken at one revision (see `shard::cut`).
        let revision = if self.api.shards.len() == 1 {
            self.api.call(0, |tx| ShardMsg::Checkpoint(dir.clone(), None, tx)).await
        } else if !self.api.evaluates() {
            std::fs::create_dir_all(&dir).map_err(|e| Status::unavailable(format!("etcdserver: snapshot: {e}")))?;
            self.checkpoint_while_held(&dir).await
        } else {
            std::fs::create_dir_all(&dir).map_err(|e| Status::unavailable(format!("etcdserver: snapshot: {e}")))?;
            self.checkpoint_at_one_revision(&dir).await
        };
        let revision = match revision {
            Ok(r) => r,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e.into());
            }
        };
        let header = self.header(revision);
        // Four chunks in flight keep the disk and the network busy without buffering the store.
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tokio::task::spawn_blocking(move || {
            let result = stream_archive(&dir, header, &tx);
            let _ = std::fs::remove_dir_all(&dir);
            if let Err(e) = result {
                let _ = tx.blocking_send(Err(Status::unavailable(format!("etcdserver: snapshot: {e}"))));
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx).map(|x| x))))
    }

    async fn move_leader(&self, req: Request<MoveLeaderRequest>) -> Result<Response<MoveLeaderResponse>, Status> {
        // etcd: only the leader moves leadership, to a voting member, and answers once the
        // target leads (or the request times out).
        let target = req.into_inner().target_id;
        let transferee = self.api.membership.read().get(target).filter(|m| !m.is_learner).map(|m| m.raft_id);
        let Some(transferee) = transferee else { return Err(EngineError::BadLeaderTransferee.into()) };
        if !self.api.first().is_leader() {
            return Err(EngineError::NotLeader.into());
        }
        if transferee == self.api.raft_id() {
            return Ok(Response::new(MoveLeaderResponse { header: self.header(0) }));
        }
        // Led together, every shard moves. Spread, shard 0's leadership moves (the leader
        // Status names, and the revision allocator); the other shards keep their leaders, and
        // the balance moves some of the target's to others if it now leads too many.
        let moved: Vec<&crate::shard::ShardHandle> = match self.api.spread_group() {
            Some(_) => vec![self.api.first()],
            None => self.api.shards.iter().collect(),
        };
        let calls =
            moved.iter().map(|sh| sh.call(self.api.request_timeout, |tx| ShardMsg::TransferLeader(transferee, tx)));
        futures::future::join_all(calls).await.into_iter().collect::<Result<Vec<()>, _>>()?;
        let deadline = tokio::time::Instant::now() + self.api.request_timeout;
        while moved.iter().any(|sh| sh.leader() != transferee) {
            if tokio::time::Instant::now() >= deadline {
                return Err(EngineError::Timeout.into());
            }
            tokio::time::sleep(self.api.leader_poll).await;
        }
        Ok(Response::new(MoveLeaderResponse { header: self.header(0) }))
    }
}

impl MaintenanceService {
    /// Copies every shard's state into `dir/shard-<n>` at one revision where the shards'
    /// leaders are spread: the revision allocator grants nothing while the copies are made (a
    /// hold), this member waits until it holds every revision up to the hold's, and every copy
    /// then holds exactly those. A hold the allocator gave up on (it lasted longer than the
    /// grant timeout) shows as a shard past the revision, and the client gets a retryable
    /// Unavailable.
    async fn checkpoint_while_held(&self, dir: &Path) -> Result<i64, EngineError> {
        let hold = self.api.cluster_revision(true).await?;
        let at = hold.grant.start - 1;
        let copies = async {
            self.api.wait_resolved(at).await?;
            let calls = self.api.shards.iter().enumerate().map(|(s, shard)| {
                let target = dir.join(format!("shard-{s}"));
                shard.call(self.api.request_timeout, |tx| ShardMsg::Checkpoint(target, None, tx))
            });
            futures::future::join_all(calls).await.into_iter().collect::<Result<Vec<i64>, _>>()
        }
        .await;
        self.api.release_hold(&hold);
        copies?;
        if self.api.shards.iter().any(|sh| sh.own_rev() > at) {
            return Err(EngineError::SnapshotCut);
        }
        Ok(at)
    }

    /// Copies every shard's state into `dir/shard-<n>` at one revision, which it returns: every
    /// shard is asked at once and copies only when all stand still (see `shard::cut`).
    async fn checkpoint_at_one_revision(&self, dir: &Path) -> Result<i64, EngineError> {
        // The shards give up waiting for each other well before the caller gives up on them.
        let cut = Arc::new(Cut::new(self.api.shards.len(), self.api.request_timeout / 2));
        let calls = self.api.shards.iter().enumerate().map(|(s, shard)| {
            let (cut, target) = (Arc::clone(&cut), dir.join(format!("shard-{s}")));
            async move {
                let r = shard
                    .call(self.api.request_timeout, |tx| ShardMsg::Checkpoint(target, Some(Arc::clone(&cut)), tx))
                    .await;
                if r.is_err() {
                    cut.fail(); // the others must not wait for a shard that will never come
                }
                r
            }
        });
        // Every shard answers the revision the cut read, so any one answer is the snapshot's.
        let revisions = futures::future::join_all(calls).await.into_iter().collect::<Result<Vec<i64>, _>>()?;
        Ok(revisions.first().copied().unwrap_or(0))
    }
}

pub(crate) type ChunkSender = tokio::sync::mpsc::Sender<Result<SnapshotResponse, Status>>;

/// A snapshot's chunks as Maintenance.Snapshot streams them.
pub type SnapshotChunks = Pin<Box<dyn Stream<Item = Result<SnapshotResponse, Status>> + Send + 'static>>;

/// Lists the archive's files: those of `dir`, and those of its subdirectories (one per shard) as
/// `<subdirectory>/<name>`.
fn files_of(dir: &Path) -> std::io::Result<Vec<(String, PathBuf, u64)>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if meta.is_file() {
            files.push((name, entry.path(), meta.len()));
        } else if meta.is_dir() {
            for inner in std::fs::read_dir(entry.path())? {
                let inner = inner?;
                let meta = inner.metadata()?;
                if meta.is_file() {
                    let inner_name = inner.file_name().to_string_lossy().into_owned();
                    files.push((format!("{name}/{inner_name}"), inner.path(), meta.len()));
                }
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Streams `dir` as a snapshot archive; returns Ok(()) also when the client went away.
pub(crate) fn stream_archive(dir: &Path, header: Option<ResponseHeader>, tx: &ChunkSender) -> std::io::Result<()> {
    let files = files_of(dir)?;
    let body: u64 = crate::snapshot::MAGIC.len() as u64
        + files.iter().map(|(name, _, size)| 4 + name.len() as u64 + 8 + size).sum::<u64>()
        + 4;
    let padding = (512 - body % 512) % 512;
    let total = body + padding + 32;
    let entries = files.into_iter().map(|(name, path, _)| Ok((name, Entry::File(path))));
    stream_files(entries, total, SNAPSHOT_CHUNK, header, tx)
}

/// What an archive entry holds.
pub(crate) enum Entry {
    /// A file, read when its turn comes.
    File(PathBuf),
    /// Bytes a producer made (a raft snapshot's state).
    Bytes(Vec<u8>),
}

/// Streams `files` (name in the archive, entry) as a snapshot archive, each file read when its
/// turn comes, so a producer can hand over entries as it makes them; `total` is the archive's
/// size for `remaining_bytes`, 0 when not known in advance; `chunk` the bytes of one message.
/// Returns Ok(()) also when the client went away; the first error of `files` ends the stream
/// without its trailer.
pub(crate) fn stream_files(
    files: impl IntoIterator<Item = std::io::Result<(String, Entry)>>,
    total: u64,
    chunk_bytes: usize,
    header: Option<ResponseHeader>,
    tx: &ChunkSender,
) -> std::io::Result<()> {
    let mut out = ArchiveWriter {
        tx,
        header,
        buf: Vec::with_capacity(chunk_bytes),
        chunk_bytes,
        sent: 0,
        total,
        hasher: Sha256::new(),
        gone: false,
    };
    out.write(crate::snapshot::MAGIC);
    let mut body = crate::snapshot::MAGIC.len() as u64;
    let mut chunk = vec![0u8; chunk_bytes];
    for file in files {
        let (name, entry) = file?;
        let (bytes, mut file, size) = match entry {
            Entry::File(path) => {
                let f = std::fs::File::open(&path)?;
                let size = f.metadata()?.len();
                (None, Some(f), size)
            }
            Entry::Bytes(b) => {
                let size = b.len() as u64;
                (Some(b), None, size)
            }
        };
        out.write(&(name.len() as u32).to_be_bytes());
        out.write(name.as_bytes());
        out.write(&size.to_be_bytes());
        body += 4 + name.len() as u64 + 8 + size;
        if let Some(b) = &bytes {
            out.write(b);
        }
        if let Some(f) = file.as_mut() {
            let mut left = size;
            while left > 0 && !out.gone {
                let n = f.read(&mut chunk[..(left.min(chunk_bytes as u64) as usize)])?;
                if n == 0 {
                    return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, format!("{name} shrank")));
                }
                out.write(&chunk[..n]);
                left -= n as u64;
            }
        }
        if out.gone {
            return Ok(());
        }
    }
    out.write(&0u32.to_be_bytes());
    body += 4;
    let padding = (512 - body % 512) % 512;
    out.write(&vec![0u8; padding as usize]);
    let digest = out.hasher.clone().finalize();
    out.buf.extend_from_slice(&digest);
    out.flush();
    Ok(())
}

struct ArchiveWriter<'a> {
    tx: &'a ChunkSender,
    header: Option<ResponseHeader>,
    buf: Vec<u8>,
    chunk_bytes: usize,
    sent: u64,
    total: u64,
    hasher: Sha256,
    gone: bool,
}

impl ArchiveWriter<'_> {
    fn write(&mut self, bytes: &[u8]) {
        self.hasher.update(bytes);
        self.buf.extend_from_slice(bytes);
        while self.buf.len() >= self.chunk_bytes && !self.gone {
            let rest = self.buf.split_off(self.chunk_bytes);
            let chunk = std::mem::replace(&mut self.buf, rest);
            self.send(chunk);
        }
    }

    fn flush(&mut self) {
        let chunk = std::mem::take(&mut self.buf);
        if !chunk.is_empty() {
            self.send(chunk);
        }
    }

    fn send(&mut self, chunk: Vec<u8>) {
        self.sent += chunk.len() as u64;
        let resp = SnapshotResponse {
            header: self.header,
            remaining_bytes: self.total.saturating_sub(self.sent),
            blob: chunk.into(),
            version: String::new(),
        };
        if self.tx.blocking_send(Ok(resp)).is_err() {
            self.gone = true;
        }
    }
}
