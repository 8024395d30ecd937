//! Request semantics: what etcd does with each request, independent of how it arrived.
//!
//! [`check`] runs before a request is proposed (stateless validation, etcd's gRPC layer); [`kv`]
//! runs when a committed request is applied (etcd's applier), against the MVCC store and the
//! lease table.

pub mod check;
pub mod kv;
pub mod range_merge;

pub use kv::LeaseView;
