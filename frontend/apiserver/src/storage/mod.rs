//! Storage: the frontend's only path to state, the seam between the registry and etcd.
//!
//! * [`Storage`]: the trait the registry, the watch cache and the authorizer use. It deals in
//!   keys, bytes and etcd revisions (which the registry exposes as `resourceVersion`); it knows
//!   nothing of Kubernetes objects, which live in `registry`.
//! * [`etcd3`]: `Etcd3Storage`, the implementation on any etcd v3 server (stock etcd or the
//!   Ballast engine), and the only code that speaks the etcd protocol.
//! * [`decode_errors`]: stored values that did not decode, logged and counted (callers decode;
//!   this module only keeps the count).
//! * [`memory`]: `MemStorage`, an in-process implementation with etcd's revision and watch
//!   semantics, for fast tests. A conformance suite (the frontend's `tests/it/storage.rs`) runs
//!   the same checks on it, on stock etcd and on the Ballast engine.
//!
//! The trait holds what every implementation must answer the same way. Anything
//! implementation-specific (connecting, compacting, etcd's own errors) stays in inherent
//! methods; the one etcd notion on it, a watch's progress request, is what bookmarks are made
//! of, and `MemStorage` answers it exactly as etcd does.
//!
//! Worked example, on any implementation of a fresh store (revision 1):
//!
//! ```text
//! create  /a "1"      -> revision 2   (/a: create_revision 2, mod_revision 2)
//! update  /a "2" @2   -> revision 3   (/a: create_revision 2, mod_revision 3)
//! update  /a "3" @2   -> Conflict { current: 3 }
//! delete  /a @3       -> revision 4   (a watch after 1 sees put@2, put@3, delete@4 with prev values)
//! list    [/, 0) @3   -> /a "2"       (a read at a past revision, until it is compacted)
//! compact 3; list @2  -> Compacted    (and a watch starting below 3 ends with Compacted)
//! ```

pub mod decode_errors;
pub mod etcd3;
pub mod memory;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;

pub use etcd3::{Etcd3Storage, Etcd3WatchStream};
pub use memory::MemStorage;

/// A boxed future of the storage seam (the trait is used as `dyn Storage`).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The storage the frontend runs on, shared by the registry, the watch cache and the authorizer.
pub type SharedStorage = Arc<dyn Storage>;

/// Keys, values and revisions with etcd's semantics: every change takes the next revision of
/// one store-wide counter; reads may ask for a past revision until it is compacted; a watch
/// delivers every change after its start revision, in order, with the previous value.
///
/// Implementations must be cheap to share (`Arc`) and their watch streams cancel-safe.
pub trait Storage: Send + Sync + std::fmt::Debug + 'static {
    /// Reads one key at the newest revision; returns it (if present) and the store's revision.
    ///
    /// # Errors
    ///
    /// Returns the implementation's failure.
    fn get<'a>(&'a self, key: &'a [u8]) -> BoxFuture<'a, Result<(Option<KeyValue>, i64), StorageError>>;

    /// Reads up to `limit` keys (0 = all) in `[start, end)` at `revision` (0 = newest). The
    /// page's `revision` is the store's current revision, also for a read at a past one.
    ///
    /// # Errors
    ///
    /// Returns `Compacted` when `revision` is older than the store's history (or newer than
    /// its present, which etcd reports with the same code).
    fn list<'a>(
        &'a self,
        start: &'a [u8],
        end: &'a [u8],
        limit: i64,
        revision: i64,
    ) -> BoxFuture<'a, Result<ListPage, StorageError>>;

    /// Writes `value` at `key` only if the key does not exist; returns the new revision.
    ///
    /// # Errors
    ///
    /// Returns `KeyExists` when the key is present.
    fn create<'a>(&'a self, key: &'a [u8], value: Vec<u8>) -> BoxFuture<'a, Result<i64, StorageError>>;

    /// Replaces the value at `key` only if its mod_revision is still `expected` (0 for an
    /// absent key, as etcd compares); returns the new revision.
    ///
    /// # Errors
    ///
    /// Returns `KeyNotFound` when the key is gone and `Conflict` when it changed since.
    fn update<'a>(&'a self, key: &'a [u8], value: Vec<u8>, expected: i64) -> BoxFuture<'a, Result<i64, StorageError>>;

    /// Deletes `key` only if its mod_revision is still `expected`; returns the deletion's
    /// revision.
    ///
    /// # Errors
    ///
    /// Returns `KeyNotFound` when the key is gone and `Conflict` when it changed since.
    fn delete<'a>(&'a self, key: &'a [u8], expected: i64) -> BoxFuture<'a, Result<i64, StorageError>>;

    /// Starts a watch on `[start, end)` for changes after `after_revision`, with previous values.
    ///
    /// # Errors
    ///
    /// Returns the implementation's failure to start it; a compacted start revision shows up
    /// as `Compacted` from [`WatchEvents::next`].
    fn watch<'a>(
        &'a self,
        start: &'a [u8],
        end: &'a [u8],
        after_revision: i64,
    ) -> BoxFuture<'a, Result<WatchEvents, StorageError>>;
}

/// One implementation's watch stream, behind [`WatchEvents`].
pub trait WatchStream: Send + std::fmt::Debug {
    /// Returns the next change or progress notification, or `None` when the store closed the
    /// watch. Must be cancel-safe: an item is taken off the stream only when it is returned.
    ///
    /// # Errors
    ///
    /// Returns `Compacted` when the watch's next change is below the compaction point.
    fn next_item(&mut self) -> BoxFuture<'_, Result<Option<WatchItem>, StorageError>>;

    /// Asks for a progress notification: it comes through `next_item` once every change up
    /// to the store's revision at the time of asking was returned.
    ///
    /// # Errors
    ///
    /// Returns the implementation's failure to send the request.
    fn request_progress(&mut self) -> BoxFuture<'_, Result<(), StorageError>>;
}

/// The events of one watch, one at a time, in revision order.
#[derive(Debug)]
pub struct WatchEvents {
    stream: Box<dyn WatchStream>,
}

impl WatchEvents {
    /// Wraps an implementation's stream.
    pub fn new(stream: Box<dyn WatchStream>) -> Self {
        WatchEvents { stream }
    }

    /// Returns the next change, or `None` when the store closed the watch.
    ///
    /// # Errors
    ///
    /// Returns `Compacted` when the watch started below the compaction point, and the
    /// implementation's failure when the stream fails.
    pub async fn next(&mut self) -> Result<Option<StorageEvent>, StorageError> {
        loop {
            match self.next_item().await? {
                Some(WatchItem::Event(event)) => return Ok(Some(event)),
                Some(WatchItem::Progress(_)) => continue,
                None => return Ok(None),
            }
        }
    }

    /// Returns the next change or progress notification, or `None` when the store closed the
    /// watch. Cancel-safe: an item is taken off the stream only when it is returned.
    ///
    /// # Errors
    ///
    /// As [`WatchEvents::next`].
    pub async fn next_item(&mut self) -> Result<Option<WatchItem>, StorageError> {
        self.stream.next_item().await
    }

    /// Asks the store for a progress notification (etcd `RequestProgress`); it arrives through
    /// [`WatchEvents::next_item`] once every change up to the store's revision was sent.
    ///
    /// # Errors
    ///
    /// Returns the implementation's failure to send the request.
    pub async fn request_progress(&mut self) -> Result<(), StorageError> {
        self.stream.request_progress().await
    }
}

/// What a watch yields: a change, or a progress notification carrying a revision up to which
/// every change has been delivered.
#[derive(Debug, Clone)]
pub enum WatchItem {
    /// One change.
    Event(StorageEvent),
    /// Every change up to this revision was delivered.
    Progress(i64),
}

/// One key's current record.
#[derive(Debug, Clone)]
pub struct KeyValue {
    /// The full key.
    pub key: Bytes,
    /// The stored bytes (for a LIST page, a slice of the storage response).
    pub value: Bytes,
    /// The revision of the key's last change (the object's resourceVersion).
    pub mod_revision: i64,
    /// The revision that created the key (since its last deletion).
    pub create_revision: i64,
}

/// One page of a range read.
#[derive(Debug)]
pub struct ListPage {
    /// The records, in key order.
    pub kvs: Vec<KeyValue>,
    /// The store's revision when the page was read (the read's revision when it was 0).
    pub revision: i64,
    /// Whether keys remain in the range after the last one returned.
    pub more: bool,
    /// How many keys the whole range held at the read's revision.
    pub count: i64,
}

/// One change seen by a watch.
#[derive(Debug, Clone)]
pub struct StorageEvent {
    /// The key that changed.
    pub key: Vec<u8>,
    /// The value after the change (`None` for a deletion).
    pub value: Option<Vec<u8>>,
    /// The value before the change (`None` if the key was created).
    pub prev_value: Option<Vec<u8>>,
    /// The revision of the change.
    pub revision: i64,
}

/// Returns the exclusive end of the range of keys starting with `prefix`.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

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
    /// The store refused a write larger than its request limit (etcd's `--max-request-bytes`):
    /// the client's fault, answered 413 rather than 500.
    #[error("Request entity too large: etcdserver: request is too large")]
    RequestTooLarge,
    /// The etcd client failed (transport, gRPC status).
    #[error("etcd request failed")]
    Etcd(#[source] etcd_client::Error),
    /// The store answered with something the protocol does not allow here.
    #[error("unexpected etcd response: {0}")]
    Protocol(&'static str),
}

/// etcd's text for a request over its `--max-request-bytes` (gRPC InvalidArgument).
const ETCD_REQUEST_TOO_LARGE: &str = "etcdserver: request is too large";

impl From<etcd_client::Error> for StorageError {
    fn from(e: etcd_client::Error) -> Self {
        match &e {
            etcd_client::Error::GRpcStatus(s) if s.message() == ETCD_REQUEST_TOO_LARGE => StorageError::RequestTooLarge,
            _ => StorageError::Etcd(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::prefix_end;

    #[test]
    fn prefix_end_increments_last_byte() {
        assert_eq!(prefix_end(b"/registry/configmaps/"), b"/registry/configmaps0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
    }
}
