//! Request semantics: what etcd does with each request, independent of how it arrived.
//!
//! [`check`] runs before a request is proposed (stateless validation, etcd's gRPC layer); [`kv`]
//! is etcd's applier, run when the leader evaluates a write and when a replayed entry is applied,
//! against the MVCC store and the lease table; [`range_merge`] makes one answer of a Range that
//! several shards answered.

pub mod check;
pub mod kv;
pub mod range_merge;

pub use kv::LeaseView;
