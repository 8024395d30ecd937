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

pub mod accept;
pub mod auth;
pub mod authority;
pub mod client_server;
pub mod cluster;
mod concurrency;
mod context;
pub mod election;
mod evaluator_snapshot;
mod forwarded;
mod gateway;
mod gojson;
mod grpc_message;
pub mod health;
pub mod hpack;
pub mod http;
mod http_response;
pub mod kv;
pub mod learner;
pub mod lease;
pub mod lock;
pub mod maintenance;
pub mod message_limit;
pub mod metrics;
pub mod pbjson;
pub mod peer;
pub mod peer_raft;
pub mod ping_policy;
mod reads;
pub mod resolved;
pub mod route;
pub mod status;
pub mod tls;
pub mod unary;
pub mod watch;
mod watch_cross;
pub mod watch_grpc;
mod watch_shards;
mod watch_stream;

use context::unexpected;
pub use context::{Api, ApiContext, GrpcLimits, MemberInfo, ETCD_COMPAT_VERSION};
pub use forwarded::PeerAnswerSink;
