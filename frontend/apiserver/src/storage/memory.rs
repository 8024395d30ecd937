//! `MemStorage`: the [`Storage`] seam in process memory, with etcd's revision and watch
//! semantics, so registry, watch-cache and chain tests run without an etcd process. The
//! conformance suite (`tests/it/storage.rs`) holds it to the same answers as stock etcd and the
//! Ballast engine.
//!
//! The model is etcd's MVCC, small:
//!
//! * One store-wide revision, 1 when empty (as a fresh etcd). Every change takes the next one; a
//!   write whose precondition fails, or a delete of an absent key, takes none.
//! * Each key keeps its versions, oldest first: `(revision, create_revision, value)`, a `None`
//!   value being a deletion (a tombstone). A read at revision R answers each key's newest
//!   version at or below R.
//! * An event log holds every change (with the previous value) from the compaction point on;
//!   watches read it by position, so a watch is a cursor, not a queue: it holds no events, and
//!   a slow reader costs nothing but its place in the log.
//! * [`MemStorage::compact`] at C drops every version superseded at or before C (and
//!   tombstones at or before C), and the log below C. Reads below C, and watches whose next
//!   change is below C, answer `Compacted`, as etcd does.
//!
//! Worked example (keys `/a`, `/b`):
//!
//! ```text
//! rev 2  create /a "1"     /a: [(2, c2, "1")]
//! rev 3  update /a "2" @2  /a: [(2, c2, "1"), (3, c2, "2")]
//! rev 4  create /b "x"     /b: [(4, c4, "x")]
//! rev 5  delete /a @3      /a: [(2, c2, "1"), (3, c2, "2"), (5, -, tombstone)]
//! list @3 -> /a "2"; list @5 -> /b "x"
//! compact 4                /a: [(3, c2, "2"), (5, -, tombstone)]   (the version at 2 goes:
//!                          nothing at or after 4 reads it; the one at 3 still answers @4)
//! compact 5                /a: []  (gone: its newest version at or below 5 is a tombstone)
//! list @3 -> Compacted
//! ```
//!
//! Lock order: one mutex, `MemStorage::state`; it is never held across an await.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use tokio::sync::watch;

use super::{BoxFuture, KeyValue, ListPage, Storage, StorageError, StorageEvent, WatchEvents, WatchItem, WatchStream};

/// One version of a key.
#[derive(Debug, Clone)]
struct Version {
    revision: i64,
    create_revision: i64,
    /// `None` for a deletion.
    value: Option<Bytes>,
}

/// One change, as a watch reports it.
#[derive(Debug, Clone)]
struct Change {
    key: Bytes,
    value: Option<Bytes>,
    prev_value: Option<Bytes>,
    revision: i64,
}

#[derive(Debug)]
struct State {
    /// The newest revision.
    revision: i64,
    /// The compaction point (0 before any compaction).
    compacted: i64,
    /// Every key's versions, oldest first.
    keys: BTreeMap<Bytes, Vec<Version>>,
    /// Every change from the compaction point on, in revision order.
    log: VecDeque<Change>,
}

impl State {
    /// Returns the newest live version of `key`.
    fn live(&self, key: &[u8]) -> Option<&Version> {
        self.keys.get(key).and_then(|v| v.last()).filter(|v| v.value.is_some())
    }

    /// Writes `value` (`None` deletes) at `key` as the next revision; returns it.
    fn write(&mut self, key: &[u8], value: Option<Bytes>) -> i64 {
        let prev = self.live(key).cloned();
        self.revision += 1;
        let revision = self.revision;
        let create_revision = match (&prev, &value) {
            (Some(p), Some(_)) => p.create_revision,
            (None, Some(_)) => revision,
            (_, None) => 0,
        };
        let key = Bytes::copy_from_slice(key);
        self.keys.entry(key.clone()).or_default().push(Version { revision, create_revision, value: value.clone() });
        self.log.push_back(Change { key, value, prev_value: prev.and_then(|p| p.value), revision });
        revision
    }

    /// Returns why a write expecting `expected` as the key's mod_revision may not happen.
    fn precondition(&self, key: &[u8], expected: i64) -> Result<(), StorageError> {
        match self.live(key) {
            Some(v) if v.revision == expected => Ok(()),
            Some(v) => Err(StorageError::Conflict { current: v.revision }),
            // etcd compares an absent key's mod_revision as 0.
            None if expected == 0 => Ok(()),
            None => Err(StorageError::KeyNotFound),
        }
    }
}

/// Returns whether `key` is in etcd's range `[start, end)` (an empty `end` is `start` alone, a
/// `"\0"` end is every key from `start` on).
fn in_range(key: &[u8], start: &[u8], end: &[u8]) -> bool {
    match end {
        [] => key == start,
        [0] => key >= start,
        _ => key >= start && key < end,
    }
}

/// The in-memory storage. Cheap to clone: clones share one store.
#[derive(Debug, Clone)]
pub struct MemStorage {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    state: Mutex<State>,
    /// The newest revision, for watches waiting for changes (sent while `state` is held).
    revision: watch::Sender<i64>,
}

impl Default for MemStorage {
    fn default() -> Self {
        Self::new()
    }
}

impl MemStorage {
    /// Returns an empty store at revision 1.
    pub fn new() -> Self {
        let state = State { revision: 1, compacted: 0, keys: BTreeMap::new(), log: VecDeque::new() };
        MemStorage { inner: Arc::new(Inner { state: Mutex::new(state), revision: watch::Sender::new(1) }) }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs a write on the state and wakes the watches if it took a revision.
    fn write<T>(&self, f: impl FnOnce(&mut State) -> Result<T, StorageError>) -> Result<T, StorageError> {
        let mut state = self.state();
        let before = state.revision;
        let out = f(&mut state);
        if state.revision != before {
            self.inner.revision.send_replace(state.revision);
        }
        out
    }

    /// Returns the newest revision.
    pub fn revision(&self) -> i64 {
        self.state().revision
    }

    /// Writes `value` at `key` unconditionally (etcd's plain Put, for tests that store what
    /// another writer would); returns the new revision.
    pub fn put(&self, key: &[u8], value: Vec<u8>) -> i64 {
        let revision = self.write(|s| Ok(s.write(key, Some(Bytes::from(value)))));
        revision.unwrap_or_else(|_: StorageError| unreachable!("a plain put has no precondition"))
    }

    /// Compacts history at `revision`, as etcd's Compact: reads below it and watches whose next
    /// change is below it answer `Compacted` from then on.
    ///
    /// # Errors
    ///
    /// Returns `Compacted` when `revision` is at or below the compaction point or above the
    /// newest revision (etcd's ErrCompacted and ErrFutureRev share that code).
    pub fn compact(&self, revision: i64) -> Result<(), StorageError> {
        let mut state = self.state();
        if revision <= state.compacted || revision > state.revision {
            return Err(StorageError::Compacted { requested: revision, compacted: state.compacted });
        }
        state.compacted = revision;
        state.keys.retain(|_, versions| {
            // The newest version at or below the compaction point answers reads at it; older
            // ones answer nothing any more. A tombstone there answers "absent", as no version.
            let keep_from = versions.iter().rposition(|v| v.revision <= revision).unwrap_or(0);
            versions.drain(..keep_from);
            if versions.first().is_some_and(|v| v.revision <= revision && v.value.is_none()) {
                versions.remove(0);
            }
            !versions.is_empty()
        });
        while state.log.front().is_some_and(|c| c.revision < revision) {
            state.log.pop_front();
        }
        // Wake the watches: any now below the compaction point must end.
        self.inner.revision.send_modify(|_| {});
        Ok(())
    }

    fn read(&self, start: &[u8], end: &[u8], limit: i64, revision: i64) -> Result<ListPage, StorageError> {
        let state = self.state();
        let at = if revision > 0 { revision } else { state.revision };
        if at < state.compacted || at > state.revision {
            return Err(StorageError::Compacted { requested: revision, compacted: state.compacted });
        }
        let lower = Bound::Included(Bytes::copy_from_slice(start));
        let upper = match end {
            [] => Bound::Included(Bytes::copy_from_slice(start)),
            [0] => Bound::Unbounded,
            _ => Bound::Excluded(Bytes::copy_from_slice(end)),
        };
        let mut kvs = Vec::new();
        let mut count = 0;
        for (key, versions) in state.keys.range((lower, upper)) {
            let Some(v) = versions.iter().rev().find(|v| v.revision <= at) else { continue };
            let Some(value) = &v.value else { continue };
            count += 1;
            if limit <= 0 || (kvs.len() as i64) < limit {
                kvs.push(KeyValue {
                    key: key.clone(),
                    value: value.clone(),
                    mod_revision: v.revision,
                    create_revision: v.create_revision,
                });
            }
        }
        Ok(ListPage { more: count > kvs.len() as i64, kvs, revision: state.revision, count })
    }
}

impl Storage for MemStorage {
    // Each future does its work when first polled, as a request over the network would.

    fn get<'a>(&'a self, key: &'a [u8]) -> BoxFuture<'a, Result<(Option<KeyValue>, i64), StorageError>> {
        Box::pin(async move {
            let state = self.state();
            let kv = state.live(key).map(|v| KeyValue {
                key: Bytes::copy_from_slice(key),
                value: v.value.clone().unwrap_or_default(),
                mod_revision: v.revision,
                create_revision: v.create_revision,
            });
            Ok((kv, state.revision))
        })
    }

    fn list<'a>(
        &'a self,
        start: &'a [u8],
        end: &'a [u8],
        limit: i64,
        revision: i64,
    ) -> BoxFuture<'a, Result<ListPage, StorageError>> {
        Box::pin(async move { self.read(start, end, limit, revision) })
    }

    fn create<'a>(&'a self, key: &'a [u8], value: Vec<u8>) -> BoxFuture<'a, Result<i64, StorageError>> {
        Box::pin(async move {
            self.write(|s| match s.live(key) {
                Some(_) => Err(StorageError::KeyExists),
                None => Ok(s.write(key, Some(Bytes::from(value)))),
            })
        })
    }

    fn update<'a>(&'a self, key: &'a [u8], value: Vec<u8>, expected: i64) -> BoxFuture<'a, Result<i64, StorageError>> {
        Box::pin(async move {
            self.write(|s| {
                s.precondition(key, expected)?;
                Ok(s.write(key, Some(Bytes::from(value))))
            })
        })
    }

    fn delete<'a>(&'a self, key: &'a [u8], expected: i64) -> BoxFuture<'a, Result<i64, StorageError>> {
        Box::pin(async move {
            self.write(|s| {
                s.precondition(key, expected)?;
                // Deleting an absent key changes nothing and takes no revision, as in etcd.
                Ok(match s.live(key) {
                    Some(_) => s.write(key, None),
                    None => s.revision,
                })
            })
        })
    }

    fn watch<'a>(
        &'a self,
        start: &'a [u8],
        end: &'a [u8],
        after_revision: i64,
    ) -> BoxFuture<'a, Result<WatchEvents, StorageError>> {
        Box::pin(async move {
            let stream = MemWatchStream {
                storage: self.clone(),
                start: start.to_vec(),
                end: end.to_vec(),
                requested: after_revision,
                next: after_revision + 1,
                progress_requested: false,
                revisions: self.inner.revision.subscribe(),
            };
            Ok(WatchEvents::new(Box::new(stream)))
        })
    }
}

/// A watch on a [`MemStorage`]: a cursor into its change log.
#[derive(Debug)]
pub struct MemWatchStream {
    storage: MemStorage,
    start: Vec<u8>,
    end: Vec<u8>,
    /// The revision the watch was asked to start after.
    requested: i64,
    /// The revision of the next change to look at.
    next: i64,
    /// Whether a progress notification is owed.
    progress_requested: bool,
    revisions: watch::Receiver<i64>,
}

impl MemWatchStream {
    /// Returns the next item if one is ready; `Ok(None)` when the caller must wait.
    fn poll_log(&mut self) -> Result<Option<WatchItem>, StorageError> {
        let state = self.storage.state();
        // Marks the current revision as seen while the state is locked, so a write after this
        // point wakes the wait that follows.
        self.revisions.borrow_and_update();
        if self.next < state.compacted {
            return Err(StorageError::Compacted { requested: self.requested, compacted: state.compacted });
        }
        let from = state.log.partition_point(|c| c.revision < self.next);
        let found = state.log.range(from..).find(|c| in_range(&c.key, &self.start, &self.end));
        if let Some(change) = found {
            self.next = change.revision + 1;
            return Ok(Some(WatchItem::Event(StorageEvent {
                key: change.key.to_vec(),
                value: change.value.as_ref().map(|v| v.to_vec()),
                prev_value: change.prev_value.as_ref().map(|v| v.to_vec()),
                revision: change.revision,
            })));
        }
        // Every change up to the newest revision was looked at: none is left to return.
        self.next = self.next.max(state.revision + 1);
        if self.progress_requested {
            // That is what etcd's progress notification says.
            self.progress_requested = false;
            return Ok(Some(WatchItem::Progress(state.revision)));
        }
        Ok(None)
    }

    async fn next_item(&mut self) -> Result<Option<WatchItem>, StorageError> {
        loop {
            if let Some(item) = self.poll_log()? {
                return Ok(Some(item));
            }
            // Cancel-safe: nothing was taken; a dropped wait loses nothing.
            if self.revisions.changed().await.is_err() {
                return Ok(None);
            }
        }
    }
}

impl WatchStream for MemWatchStream {
    fn next_item(&mut self) -> BoxFuture<'_, Result<Option<WatchItem>, StorageError>> {
        Box::pin(MemWatchStream::next_item(self))
    }

    fn request_progress(&mut self) -> BoxFuture<'_, Result<(), StorageError>> {
        self.progress_requested = true;
        Box::pin(std::future::ready(Ok(())))
    }
}
