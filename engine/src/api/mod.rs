//! The etcd v3 gRPC services: request validation, size limits and translation to shard messages.
//!
//! Each service file is thin: it checks what etcd's gRPC layer checks (`apply::check`), sends a
//! [`ShardMsg`] and waits for the answer with the request timeout. [`status`] is the only place
//! an [`EngineError`](crate::EngineError) becomes a `tonic::Status`.

pub mod cluster;
pub mod kv;
pub mod lease;
pub mod maintenance;
pub mod status;
pub mod watch;

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{EngineError, Result};
use crate::shard::{ShardHandle, ShardMsg, WriteResponse};
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
    /// The shard holding every key (one shard until sharding lands).
    pub shard: ShardHandle,
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
    /// Responses buffered per watch stream (see `WatchConfig::stream_buffer`).
    pub watch_stream_buffer: usize,
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

    /// Proposes `cmd` and waits for its applied answer.
    ///
    /// # Errors
    /// The apply error, or a shard/transport error.
    pub async fn write(&self, cmd: Command) -> Result<WriteResponse> {
        self.shard.call(self.request_timeout, |tx| ShardMsg::Write(cmd, tx)).await
    }

    /// Returns a full response header at the shard's current revision, as etcd fills headers of
    /// responses that do not read the store.
    pub fn header(&self) -> Option<ballast_proto::etcdserverpb::ResponseHeader> {
        Some(ballast_proto::etcdserverpb::ResponseHeader {
            cluster_id: self.member.cluster_id,
            member_id: self.member.id,
            revision: self.shard.revision(),
            raft_term: self.shard.term(),
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
