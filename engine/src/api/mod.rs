//! The etcd v3 gRPC services: request validation, size limits and translation to shard messages.
//!
//! Each service file is thin: it checks what etcd's gRPC layer checks (`apply::check`), routes
//! the request by the shard map ([`route`]), sends [`ShardMsg`]s and waits for the answers with
//! the request timeout. [`status`] is the only place an [`EngineError`](crate::EngineError)
//! becomes a `tonic::Status`.
//!
//! With several shards: key requests go to the shard of their key; a Range over keys of several
//! shards asks each of them at one revision and merges (`apply::range_merge`); a Txn or
//! DeleteRange over keys of several shards is refused (`EngineError::CrossShard`); a watch
//! stream spans every shard and merges watchers over several shards in revision order
//! (`watch_shards`); leases, compaction and alarms go to every shard, and shard 0 answers for
//! the member.

pub mod cluster;
mod grpc_message;
pub mod kv;
pub mod lease;
pub mod maintenance;
pub mod route;
pub mod status;
pub mod unary;
pub mod watch;
pub mod watch_grpc;
mod watch_shards;

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{EngineError, Result};
use crate::mvcc::RevisionCounter;
use crate::shard::{Reply, ShardHandle, ShardMsg, WriteResponse};
use crate::shard_map::ShardMap;
use ballast_proto::ballastpb::raft_command::Command;

/// The version string `Status` reports. kube-apiserver enables watch progress requests only
/// for servers at 3.5.13 or later, and etcdctl prints it.
pub const ETCD_COMPAT_VERSION: &str = "3.5.16";

/// This member, as `MemberList` shows it.
#[derive(Clone, Debug)]
pub struct MemberInfo {
    /// The member ID (etcd style: a hash of the peer URLs and cluster token).
    pub id: u64,
    /// The cluster ID.
    pub cluster_id: u64,
    /// The member's name.
    pub name: String,
    /// URLs other members reach this one on.
    pub peer_urls: Vec<String>,
    /// URLs clients reach this one on.
    pub client_urls: Vec<String>,
}

/// What every service shares.
#[derive(Debug)]
pub struct ApiContext {
    /// The member's shards, by shard number.
    pub shards: Vec<ShardHandle>,
    /// Which shard owns a key.
    pub map: ShardMap,
    /// The member's revision counter, shared by its shards.
    pub revs: Arc<RevisionCounter>,
    /// This member.
    pub member: MemberInfo,
    /// Largest accepted write request in bytes (etcd `--max-request-bytes`, default 1.5 MiB).
    pub max_request_bytes: usize,
    /// Most ops per txn branch (etcd `--max-txn-ops`, default 128).
    pub max_txn_ops: usize,
    /// How long a request may wait for its answer. 7 s is etcd's default (5 s plus two
    /// election timeouts).
    pub request_timeout: Duration,
    /// Where snapshot checkpoints are staged before streaming.
    pub snapshot_dir: PathBuf,
    /// Batches buffered per watch stream from each shard (see `WatchConfig::stream_buffer`).
    pub watch_stream_buffer: usize,
    /// Batches a stream over several shards buffers for its client (`WatchConfig::merge_buffer`).
    pub watch_merge_buffer: usize,
    /// How often a client stream over several shards re-checks them while it holds events of a
    /// watcher over several shards (see `watch_shards`): the added delivery latency when the
    /// shard that holds the others back has nothing to send. `WatchConfig::merge_tick`.
    pub watch_merge_tick: std::time::Duration,
    /// Most events per response of a watcher over several shards (`WatchConfig::catchup_batch_events`).
    pub watch_catchup_batch: usize,
    /// Fragment size for such watchers (`WatchConfig::max_response_bytes`).
    pub watch_max_response_bytes: usize,
    /// Numbers watch streams and snapshots.
    pub next_id: AtomicU64,
}

impl ApiContext {
    /// Rejects a write whose encoding exceeds the request limit.
    ///
    /// # Errors
    /// `RequestTooLarge`.
    pub fn check_size(&self, m: &impl prost::Message) -> Result<()> {
        if m.encoded_len() > self.max_request_bytes {
            return Err(EngineError::RequestTooLarge);
        }
        Ok(())
    }

    /// Returns shard `s`'s handle.
    pub fn shard(&self, s: u32) -> &ShardHandle {
        &self.shards[s as usize]
    }

    /// Asks every shard to stop once it has handled what is queued before the request.
    pub fn stop_shards(&self) {
        for sh in &self.shards {
            let _ = sh.send(ShardMsg::Shutdown);
        }
    }

    /// Returns shard 0, which answers for the member where every shard holds the same state
    /// (leases, alarms) or none does (raft status figures of a one-shard member).
    pub fn first(&self) -> &ShardHandle {
        &self.shards[0]
    }

    /// Asks shard `s` with the message built by `make` and waits for its answer.
    ///
    /// # Errors
    /// The shard's answer, `Timeout`, `Stopped` or `TooManyRequests`.
    pub async fn call<T>(&self, s: u32, make: impl FnOnce(Reply<T>) -> ShardMsg) -> Result<T> {
        self.shard(s).call(self.request_timeout, make).await
    }

    /// Asks every shard with the message built by `make`, at once, and returns their answers in
    /// shard order, or the first error in shard order.
    ///
    /// # Errors
    /// Any shard's error.
    pub async fn call_all<T>(&self, make: impl Fn(Reply<T>) -> ShardMsg) -> Result<Vec<T>> {
        let calls = self.shards.iter().map(|sh| sh.call(self.request_timeout, &make));
        futures::future::join_all(calls).await.into_iter().collect()
    }

    /// Proposes `cmd` on shard `s` and waits for its applied answer.
    ///
    /// # Errors
    /// The apply error, or a shard/transport error.
    pub async fn write(&self, s: u32, cmd: Command) -> Result<WriteResponse> {
        self.call(s, |tx| ShardMsg::Write(cmd, tx)).await
    }

    /// Proposes `cmd` on every shard (lease and compaction requests, whose state every shard
    /// keeps) and returns shard 0's answer, or the first error in shard order.
    ///
    /// # Errors
    /// Any shard's error.
    pub async fn write_all(&self, cmd: Command) -> Result<WriteResponse> {
        let mut answers = self.call_all(|tx| ShardMsg::Write(cmd.clone(), tx)).await?;
        Ok(answers.swap_remove(0))
    }

    /// Returns a full response header at the member's current revision, as etcd fills headers
    /// of responses that do not read the store.
    pub fn header(&self) -> Option<ballast_proto::etcdserverpb::ResponseHeader> {
        Some(ballast_proto::etcdserverpb::ResponseHeader {
            cluster_id: self.member.cluster_id,
            member_id: self.member.id,
            revision: self.revs.last(),
            raft_term: self.first().term(),
        })
    }

    /// Returns the member ID for a raft node ID (one member until clustering lands).
    pub fn member_of_raft_id(&self, raft_id: u64) -> u64 {
        if raft_id == 0 {
            0
        } else {
            self.member.id
        }
    }
}

/// Shared handle passed to every service.
pub type Api = Arc<ApiContext>;

fn unexpected(what: &'static str) -> tonic::Status {
    tonic::Status::internal(format!("etcdserver: unexpected response to {what}"))
}
