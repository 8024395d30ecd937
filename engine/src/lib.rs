//! Ballast's engine: an etcd v3 server whose state is MVCC on RocksDB, replicated by raft.
//!
//! # Map (reading order)
//! * [`storage`]: the seam to RocksDB ([`storage::KvBackend`], with an in-memory twin). Nothing
//!   else imports `rocksdb`.
//! * [`mvcc`]: etcd's revision model: key index generations, history keyed by revision, reads at
//!   any revision, compaction.
//! * [`apply`]: what each request means: validation before proposing ([`apply::check`]) and the
//!   applier ([`apply::kv`]) for Range, Put, DeleteRange and Txn.
//! * [`auth`]: etcd's auth store (users, roles, permissions; kept by shard 0's state machine,
//!   changed through shard 0's raft log), permission checks and tokens.
//! * [`lease`]: the lease table; [`watch`]: watch streams, the event ring, slow-consumer policy,
//!   events encoded once for every watcher ([`watch::wire`]).
//! * [`raft_log`]: the raft log on the storage seam; [`raft_snapshot`]: how a follower too far
//!   behind catches up from a checkpoint of its leader; [`shard`]: one shard, its raft node, state
//!   machine and loop (the only code that touches the shard's state), the thread it
//!   runs on ([`shard::executor`]) and the stall reports ([`shard::stall`]); [`shard_map`]: which
//!   shard owns a key and which shards a range touches (see `engine/SHARDING.md`).
//! * [`cluster`]: the members of the cluster (etcd's IDs, the stored membership) and the peer
//!   transport that carries every shard's raft messages to them.
//! * [`api`]: the etcd v3 gRPC services (Watch's gRPC server written by hand,
//!   [`api::watch_grpc`], to send pre-encoded events); [`api::status`] is the one mapping of [`EngineError`]
//!   to gRPC status codes and etcd's message text.
//! * [`metrics`]: the atomics behind `/metrics` (rendered by [`api::metrics`]).
//! * [`fd_limit`]: the open-file limit, raised and checked at start-up; [`round_trace`]: an
//!   optional timeline of the shards' rounds (`--round-trace-file`).
//! * [`server`]: opening a data directory and serving it; [`snapshot`]: the snapshot archive and
//!   restoring one into a new data directory; `data_dir`: where shards live in a data directory
//!   and the member's identity keys, which both use.
//!
//! # Layering
//! `storage` <- `mvcc` <- `apply`/`auth`/`lease`/`watch` <- `cluster` <- `shard` <- `api` <- `server`. Lower layers
//! never call upward. The network plane (tonic on tokio) reaches a shard only through its message
//! channel ([`shard::ShardHandle`]); the shard's executor thread owns its state and never blocks
//! on the network.

pub mod api;
pub mod apply;
pub mod auth;
pub mod clock;
pub mod cluster;
pub(crate) mod data_dir;
pub mod error;
pub mod fd_limit;
pub mod header;
pub mod lease;
pub mod metrics;
pub mod mvcc;
pub mod raft_log;
pub mod raft_snapshot;
pub mod round_trace;
pub mod server;
pub mod shard;
pub mod shard_map;
pub mod snapshot;
pub mod snapshot_format;
pub mod storage;
pub mod watch;

pub use error::{EngineError, Result};
pub use server::{Engine, EngineConfig, ServeError};
