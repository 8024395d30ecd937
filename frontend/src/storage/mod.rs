//! Storage: the frontend's only path to state, over the etcd v3 API.
//!
//! * [`etcd3`]: `Etcd3Storage`, reads, compare-and-swap writes and watches on any etcd v3 server
//!   (stock etcd or the Ballast engine). It deals in keys, bytes and revisions; it knows nothing
//!   of Kubernetes objects, which live in `registry`.
//!
//! Revisions are the etcd revisions, which the registry exposes as `resourceVersion`.

pub mod etcd3;

pub use etcd3::{Etcd3Storage, KeyValue, ListPage, StorageEvent, WatchEvents, WatchItem};

/// Storage failures, in the terms callers can act on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// The key does not exist (for update and delete).
    #[error("key not found")]
    KeyNotFound,
    /// The key already exists (for create).
    #[error("key already exists")]
    KeyExists,
    /// The key's mod_revision is not the one the caller expected.
    #[error("the key's mod_revision is {current}")]
    Conflict {
        /// The key's mod_revision now.
        current: i64,
    },
    /// The asked-for revision is older than the store's compaction point. Uses kube's text,
    /// since watch clients see it verbatim in the ERROR event.
    #[error("too old resource version: {requested} ({compacted})")]
    Compacted {
        /// The revision the caller asked for.
        requested: i64,
        /// The store's compaction revision (0 when the store did not say).
        compacted: i64,
    },
    /// The etcd client failed (transport, gRPC status).
    #[error("etcd request failed")]
    Etcd(#[from] etcd_client::Error),
    /// The store answered with something the protocol does not allow here.
    #[error("unexpected etcd response: {0}")]
    Protocol(&'static str),
}
