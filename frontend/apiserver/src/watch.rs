//! Watches on a collection, with kube's selector semantics: an object that starts matching is
//! `ADDED`, one that stops matching is `DELETED` (its previous state at the event's revision).
//!
//! Sources: the resource's shared watch cache ([`crate::watch_cache`]) when it can serve the
//! start point, else a watch of this request's own on etcd (start points older than the cache
//! window, whose history only etcd has, and whose compaction etcd reports).
//!
//! Start points (`resourceVersion`):
//! * unset or `"0"`: synthetic `ADDED` for every current object, then changes after that list's
//!   revision;
//! * `N`: changes after revision N; a compacted N ends the watch with an `ERROR` 410 event
//!   (`too old resource version: N (compacted)`).
//!
//! A change whose stored value does not decode ends the watch with an `ERROR` event (500
//! `InternalError` naming the key), as kube does; it is never passed on as a `DELETED`.
//!
//! With `sendInitialEvents=true` the current state is sent first whatever the start point, then,
//! if bookmarks are allowed, a `BOOKMARK` annotated `k8s.io/initial-events-end: "true"` (the
//! watch-list protocol).
//!
//! Bookmarks (`allowWatchBookmarks=true`): at most one per bookmark interval, at a revision
//! etcd reported complete through a progress notification, never below what was delivered;
//! and one more as the watch times out, as kube sends shortly before its deadline.

// #[PerformanceCriticalPath]

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::error::ApiError;
use crate::registry::object;
use crate::registry::selectors::{FieldSelector, LabelSelector};
use crate::registry::store::{parse_resource_version, ListOptions, Store};
use crate::registry::ResourceKind;
use crate::storage::{prefix_end, StorageError, WatchEvents, WatchItem};
use crate::watch_cache::{CacheItem, CachedEvent, EventType, Subscription, WatchCaches};

/// Watch options from the query.
#[derive(Debug, Clone, Default)]
pub struct WatchOptions {
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// `resourceVersion`.
    pub resource_version: String,
    /// `sendInitialEvents=true`.
    pub send_initial_events: bool,
    /// `allowWatchBookmarks=true`.
    pub allow_bookmarks: bool,
}

/// One thing a watch yields.
#[derive(Debug, Clone)]
pub enum WatchOutput {
    /// A change (or an initial object) as an event of type `kind`.
    Event {
        /// The event type for this client.
        kind: EventType,
        /// The decoded change, shared with the other clients of the cache.
        event: Arc<CachedEvent>,
    },
    /// A bookmark at `revision`; `initial_events_end` marks the end of watch-list initial
    /// events.
    Bookmark {
        /// The revision every earlier change was delivered up to.
        revision: i64,
        /// Whether this is the watch-list end marker.
        initial_events_end: bool,
    },
    /// A final error, as a `Status`.
    Error(Value),
}

#[derive(Debug)]
enum Source {
    Cache(Subscription),
    // Boxed: an etcd stream is much larger than a cache subscription, and most watches are
    // cached.
    Direct(Box<WatchEvents>),
}

/// One running watch.
#[derive(Debug)]
pub struct Watch {
    kind: &'static ResourceKind,
    key_prefix: Vec<u8>,
    labels: LabelSelector,
    fields: FieldSelector,
    initial: VecDeque<WatchOutput>,
    source: Source,
    /// Changes at or below this revision are not sent (they precede the start point).
    after: i64,
    /// The newest revision sent (event or bookmark).
    delivered: i64,
    /// A revision every change up to which was sent: a progress notification's, or one an
    /// event of a later revision followed (a transaction's events share a revision).
    complete: i64,
    /// The revision of the newest event taken from the source.
    last_event: i64,
    allow_bookmarks: bool,
    bookmark_interval: Duration,
    next_bookmark: tokio::time::Instant,
    /// When a watch of its own next asks etcd for progress (cached watches get it from the
    /// cache).
    next_progress_request: tokio::time::Instant,
    done: bool,
}

fn initial_event(obj: Value, revision: i64) -> WatchOutput {
    WatchOutput::Event { kind: EventType::Added, event: Arc::new(CachedEvent::current_only(obj, revision)) }
}

impl Watch {
    /// Starts a watch on `kind` in `namespace` ("" = all).
    ///
    /// # Errors
    ///
    /// Returns `BadRequest` for a bad resourceVersion and storage errors.
    pub async fn start(
        store: &Store,
        caches: &WatchCaches,
        kind: &'static ResourceKind,
        namespace: &str,
        opts: WatchOptions,
    ) -> Result<Watch, ApiError> {
        let prefix = kind.collection_prefix(store.prefix(), namespace);
        let mut initial = VecDeque::new();
        let from_state = opts.send_initial_events || opts.resource_version.is_empty() || opts.resource_version == "0";
        let after = if from_state {
            let list_opts =
                ListOptions { labels: opts.labels.clone(), fields: opts.fields.clone(), ..ListOptions::default() };
            let list = store.list(kind, namespace, &list_opts).await?;
            let revision = parse_resource_version(list["metadata"]["resourceVersion"].as_str().unwrap_or("0"))?;
            if let Value::Object(mut l) = list {
                if let Some(Value::Array(items)) = l.remove("items") {
                    initial.extend(items.into_iter().map(|o| initial_event(o, revision)));
                }
            }
            if opts.send_initial_events && opts.allow_bookmarks {
                initial.push_back(WatchOutput::Bookmark { revision, initial_events_end: true });
            }
            revision
        } else {
            parse_resource_version(&opts.resource_version)?
        };
        // The cache watches the whole resource; a namespaced watch filters by key prefix.
        let resource_prefix = kind.collection_prefix(store.prefix(), "");
        let source = match caches.subscribe(kind, &resource_prefix, after).await? {
            Some(sub) => Source::Cache(sub),
            None => {
                let end = prefix_end(prefix.as_bytes());
                Source::Direct(Box::new(store.storage().watch(prefix.as_bytes(), &end, after).await?))
            }
        };
        let bookmark_interval = caches.config().progress_interval;
        Ok(Watch {
            kind,
            key_prefix: prefix.into_bytes(),
            labels: opts.labels,
            fields: opts.fields,
            initial,
            source,
            after,
            delivered: after,
            complete: after,
            last_event: after,
            allow_bookmarks: opts.allow_bookmarks,
            bookmark_interval,
            next_bookmark: tokio::time::Instant::now() + bookmark_interval,
            next_progress_request: tokio::time::Instant::now() + bookmark_interval,
            done: false,
        })
    }

    /// Returns whether this watch reads through the shared cache (else its own etcd watch).
    pub fn is_cached(&self) -> bool {
        matches!(self.source, Source::Cache(_))
    }

    fn passes(&self, obj: &Value) -> bool {
        self.labels.matches(&object::labels(obj)) && self.fields.matches(obj)
    }

    /// Returns what `event` is to this client, if anything.
    fn classify(&self, event: &CachedEvent) -> Option<EventType> {
        if event.revision <= self.after || !event.key.starts_with(&self.key_prefix) {
            return None;
        }
        let current_passes = event.current.as_ref().is_some_and(|o| self.passes(o));
        let previous_passes = event.previous.as_ref().is_some_and(|o| self.passes(o));
        match (current_passes, previous_passes) {
            (true, false) => Some(EventType::Added),
            (true, true) => Some(EventType::Modified),
            (false, true) => Some(EventType::Deleted),
            (false, false) => None,
        }
    }

    /// Turns a progress notification into a bookmark if one is due.
    fn progress(&mut self, revision: i64) -> Option<WatchOutput> {
        let now = tokio::time::Instant::now();
        if !self.allow_bookmarks || now < self.next_bookmark || revision < self.after {
            return None;
        }
        self.next_bookmark = now + self.bookmark_interval;
        self.complete = self.complete.max(revision);
        self.delivered = self.delivered.max(revision);
        Some(WatchOutput::Bookmark { revision: self.delivered, initial_events_end: false })
    }

    /// Returns the next item, or `None` when the watch has ended. Errors become a final
    /// `ERROR` item carrying a Status.
    pub async fn next(&mut self) -> Option<WatchOutput> {
        if let Some(e) = self.initial.pop_front() {
            return Some(e);
        }
        while !self.done {
            let (event, progress) = match &mut self.source {
                Source::Cache(sub) => match sub.next().await {
                    Some(CacheItem::Event(e)) => (Some(e), None),
                    Some(CacheItem::Progress(r)) => (None, Some(r)),
                    None => return None,
                },
                Source::Direct(events) => {
                    let wants_progress = self.allow_bookmarks;
                    let item = tokio::select! {
                        item = events.next_item() => item,
                        _ = tokio::time::sleep_until(self.next_progress_request), if wants_progress => {
                            if events.request_progress().await.is_err() {
                                return None;
                            }
                            self.next_progress_request = tokio::time::Instant::now() + self.bookmark_interval;
                            continue;
                        }
                    };
                    match item {
                        Ok(Some(WatchItem::Event(change))) => {
                            (Some(Arc::new(CachedEvent::decode(&change, self.kind))), None)
                        }
                        Ok(Some(WatchItem::Progress(r))) => (None, Some(r)),
                        Ok(None) => return None,
                        Err(e) => {
                            self.done = true;
                            let err = match e {
                                StorageError::Compacted { .. } => ApiError::Expired(e.to_string()),
                                other => ApiError::Storage(other),
                            };
                            return Some(WatchOutput::Error(err.status()));
                        }
                    }
                }
            };
            if let Some(r) = progress {
                self.complete = self.complete.max(r);
                if let Some(b) = self.progress(r) {
                    return Some(b);
                }
                continue;
            }
            let Some(event) = event else { continue };
            if event.revision > self.last_event {
                self.complete = self.complete.max(self.last_event);
                self.last_event = event.revision;
            }
            if let Some(error) = event.decode_error() {
                // kube ends a watch whose storage event does not decode with an ERROR event
                // (InternalError), never with a made-up DELETED.
                if event.revision > self.after && event.key.starts_with(&self.key_prefix) {
                    self.done = true;
                    return Some(WatchOutput::Error(ApiError::Internal(error.to_string()).status()));
                }
                continue;
            }
            if let Some(kind) = self.classify(&event) {
                self.delivered = self.delivered.max(event.revision);
                return Some(WatchOutput::Event { kind, event });
            }
        }
        None
    }

    /// Returns the bookmark to send as the watch ends on its timeout (kube sends one shortly
    /// before), so the client resumes from a recent revision; `None` without
    /// `allowWatchBookmarks` or when it would not move the client forward.
    pub fn closing_bookmark(&self) -> Option<WatchOutput> {
        // Never behind what was sent: revisions a client sees must not go back.
        (self.allow_bookmarks && self.complete > self.after && self.complete >= self.delivered)
            .then_some(WatchOutput::Bookmark { revision: self.complete, initial_events_end: false })
    }

    /// Returns the kind being watched.
    pub fn kind(&self) -> &'static ResourceKind {
        self.kind
    }
}
