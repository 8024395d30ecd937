//! The watch cache: one upstream etcd watch per resource feeding every client watch of that
//! resource (kube's `Cacher`), so a thousand informers cost one etcd watch, and each change is
//! decoded once and encoded at most once per event type.
//!
//! * Each resource (storage key prefix) gets a [`ResourceCache`] on its first watch. A task
//!   reads the upstream watch, decodes each change into a [`CachedEvent`], keeps the newest
//!   `capacity` of them in a window, and offers each to every subscriber's bounded queue.
//! * A subscriber starting after revision N is served from the window when every change after N
//!   is in it or still to come (`N >= window_start`); otherwise [`WatchCaches::subscribe`]
//!   returns `None` and the caller reads history from etcd directly, which also gives etcd's
//!   own answer (410) for compacted revisions. Correctness first: the cache never answers for
//!   revisions it has not seen.
//! * Slow consumers: a subscriber whose queue is full when a change arrives is terminated (its
//!   queue is closed, so its stream ends and the client re-watches from its last revision), as
//!   kube's `cacheWatcher` does. It never holds back the others or grows memory. Terminations
//!   are counted.
//! * Progress: the task asks etcd for a progress notification every `progress_interval`; each
//!   one is passed on, so subscribers can send bookmarks at a revision that is complete.
//! * When the upstream watch ends (etcd went away), every subscriber's stream ends and the next
//!   watch builds a new cache.
//!
//! * A cache is started once however many watches ask for it at the same moment: the first
//!   starts it, the rest wait for it (a per-resource gate).
//!
//! Worked example, `capacity` 3, a cache started at revision 10:
//!
//! ```text
//! changes 11 12 13 14 arrive  window [12 13 14], window_start 11 (11 was evicted)
//! subscribe(after 12)         backlog 13 14, then every change as it arrives
//! subscribe(after 11)         backlog 12 13 14: every change after 11 is still here
//! subscribe(after 10)         None: 11 is gone, the watch reads etcd (which may answer 410)
//! subscribe(after 100)        no backlog; changes up to 100 are skipped by the watch itself
//! ```
//!
//! Lock order: `WatchCaches::caches` before `ResourceCache::state`; no lock is held across an
//! await except a resource's start gate, which is held only while starting that cache.

// #[PerformanceCriticalPath]

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::registry::{object, ResourceKind};
use crate::storage::decode_errors;
use crate::storage::{prefix_end, SharedStorage, StorageError, StorageEvent, WatchItem};

/// Watch cache tuning.
#[derive(Debug, Clone, Copy)]
pub struct WatchCacheConfig {
    /// Changes kept per resource for watches that start a little in the past (the usual
    /// list-then-watch gap). kube sizes its window dynamically from 100 up; 1024 covers a
    /// list-to-watch gap under heavy write load while bounding memory to about a thousand
    /// objects per resource.
    pub capacity: usize,
    /// Items queued per client watch before it counts as too slow and is terminated. Large
    /// enough to absorb a burst (a deletecollection of a few hundred objects) for a client
    /// that keeps up on average; small enough that a stuck client costs little memory.
    pub client_queue: usize,
    /// How often each upstream watch asks etcd for a progress notification, which is what
    /// bookmarks are made from. kube sends bookmarks about once a minute.
    pub progress_interval: Duration,
    /// How long a LIST at a resourceVersion newer than the store's waits for the store to
    /// reach it before it is answered 504 "Too large resource version" (kube's cacher waits
    /// 3 s): a client that read a newer revision from another server gets its answer once this
    /// one catches up, and one asking for a revision that does not exist yet is not held long.
    pub fresh_wait: Duration,
}

impl Default for WatchCacheConfig {
    fn default() -> Self {
        WatchCacheConfig {
            capacity: 1024,
            client_queue: 256,
            progress_interval: Duration::from_secs(60),
            fresh_wait: Duration::from_secs(3),
        }
    }
}

/// Which event a change is to a given client (selector transitions decide it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// The object appeared (or started matching).
    Added,
    /// The object changed.
    Modified,
    /// The object went away (or stopped matching); the object is its previous state.
    Deleted,
}

impl EventType {
    /// Returns the wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One decoded change, shared by every subscriber.
#[derive(Debug)]
pub struct CachedEvent {
    /// The storage key.
    pub key: Vec<u8>,
    /// The change's revision.
    pub revision: i64,
    /// The object after the change (`None` for a deletion; see `decode_error`).
    pub current: Option<Value>,
    /// The object before the change, with the change's revision as its resourceVersion.
    pub previous: Option<Value>,
    /// Why the value after or before the change could not be decoded (naming the key), when
    /// it could not: such a change is an error for the watches it concerns, never an event.
    decode_error: Option<String>,
    lines: [OnceLock<Bytes>; 3],
}

impl CachedEvent {
    /// Decodes a storage change into `kind`'s served form (kinds sharing storage, such as
    /// core and events.k8s.io events, convert here).
    ///
    /// A value that does not decode is logged and counted ([`decode_errors`]) and recorded in
    /// the event as [`CachedEvent::decode_error`]; it never reads as an absent object, which
    /// would turn an update into a `DELETED` event.
    pub fn decode(change: &StorageEvent, kind: &ResourceKind) -> CachedEvent {
        let mut decode_error = None;
        let mut decode = |bytes: &Option<Vec<u8>>| {
            let bytes = bytes.as_ref()?;
            match object::from_storage_as(kind, bytes, change.revision) {
                Ok(obj) => Some(Value::Object(obj)),
                Err(e) => {
                    let resource = match kind.group {
                        "" => kind.resource.to_string(),
                        group => format!("{}.{group}", kind.resource),
                    };
                    decode_errors::record(&resource, &change.key, &e.to_string());
                    decode_error.get_or_insert_with(|| {
                        format!(
                            "unable to decode the stored object at key \"{}\" (revision {}): {e}",
                            String::from_utf8_lossy(&change.key),
                            change.revision
                        )
                    });
                    None
                }
            }
        };
        let current = decode(&change.value);
        let previous = decode(&change.prev_value);
        CachedEvent {
            key: change.key.clone(),
            revision: change.revision,
            current,
            previous,
            decode_error,
            lines: Default::default(),
        }
    }

    /// Returns an event holding only a current object (initial events of a watch).
    pub fn current_only(obj: Value, revision: i64) -> CachedEvent {
        CachedEvent {
            key: Vec::new(),
            revision,
            current: Some(obj),
            previous: None,
            decode_error: None,
            lines: Default::default(),
        }
    }

    /// Returns why the stored value after or before this change could not be decoded, naming
    /// the key, or `None` when both decoded.
    pub fn decode_error(&self) -> Option<&str> {
        self.decode_error.as_deref()
    }

    /// Returns the object an event of type `t` carries.
    pub fn object(&self, t: EventType) -> Option<&Value> {
        match t {
            EventType::Added | EventType::Modified => self.current.as_ref(),
            EventType::Deleted => self.previous.as_ref(),
        }
    }

    /// Returns the JSON watch line (`{"type":...,"object":...}\n`) for type `t`, encoded on
    /// first use and shared afterwards.
    pub fn json_line(&self, t: EventType) -> Bytes {
        self.lines[t as usize]
            .get_or_init(|| {
                let mut line = Vec::with_capacity(256);
                line.extend_from_slice(b"{\"type\":\"");
                line.extend_from_slice(t.as_str().as_bytes());
                line.extend_from_slice(b"\",\"object\":");
                if serde_json::to_writer(&mut line, self.object(t).unwrap_or(&Value::Null)).is_err() {
                    line.extend_from_slice(b"null");
                }
                line.extend_from_slice(b"}\n");
                Bytes::from(line)
            })
            .clone()
    }
}

/// What a subscriber receives.
#[derive(Debug, Clone)]
pub enum CacheItem {
    /// A change.
    Event(Arc<CachedEvent>),
    /// Every change up to this revision has been delivered.
    Progress(i64),
}

#[derive(Debug)]
struct CacheState {
    /// The newest changes, oldest first.
    window: VecDeque<Arc<CachedEvent>>,
    /// Every change after this revision is in `window` or not yet seen.
    window_start: i64,
    /// The newest revision the upstream watch has reported complete.
    synced: i64,
    subscribers: Vec<mpsc::Sender<CacheItem>>,
    /// False once the upstream watch has ended.
    alive: bool,
}

/// One resource's cache.
#[derive(Debug)]
pub struct ResourceCache {
    kind: &'static ResourceKind,
    state: Mutex<CacheState>,
    terminated: AtomicU64,
    config: WatchCacheConfig,
}

/// A client's view of a resource cache: replayed history, then live items.
#[derive(Debug)]
pub struct Subscription {
    backlog: VecDeque<CacheItem>,
    rx: mpsc::Receiver<CacheItem>,
}

impl Subscription {
    /// Returns the next item, or `None` when the cache ended this subscription (upstream gone,
    /// or this subscriber was too slow).
    pub async fn next(&mut self) -> Option<CacheItem> {
        if let Some(item) = self.backlog.pop_front() {
            return Some(item);
        }
        self.rx.recv().await
    }
}

impl ResourceCache {
    /// Offers `item` to every subscriber; drops those that are gone or too slow.
    fn fan_out_locked(&self, state: &mut CacheState, item: &CacheItem) {
        state.subscribers.retain(|tx| match tx.try_send(item.clone()) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.terminated.fetch_add(1, Ordering::Relaxed);
                tracing::debug!("terminating a watch that fell behind");
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        });
    }

    fn apply(&self, item: WatchItem) {
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let out = match item {
            WatchItem::Event(change) => {
                let event = Arc::new(CachedEvent::decode(&change, self.kind));
                state.window.push_back(event.clone());
                while state.window.len() > self.config.capacity {
                    if let Some(evicted) = state.window.pop_front() {
                        state.window_start = state.window_start.max(evicted.revision);
                    }
                }
                state.synced = state.synced.max(event.revision);
                CacheItem::Event(event)
            }
            WatchItem::Progress(rev) => {
                state.synced = state.synced.max(rev);
                CacheItem::Progress(rev)
            }
        };
        self.fan_out_locked(&mut state, &out);
    }

    fn end(&self) {
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        state.alive = false;
        state.subscribers.clear();
    }

    fn subscribe(&self, after: i64) -> Option<Subscription> {
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !state.alive || after < state.window_start {
            return None;
        }
        let backlog = state.window.iter().filter(|e| e.revision > after).cloned().map(CacheItem::Event).collect();
        let (tx, rx) = mpsc::channel(self.config.client_queue.max(1));
        state.subscribers.push(tx);
        Some(Subscription { backlog, rx })
    }

    /// Returns how many subscribers were terminated for falling behind.
    pub fn terminated_slow_watchers(&self) -> u64 {
        self.terminated.load(Ordering::Relaxed)
    }
}

/// The per-resource caches of one frontend.
#[derive(Debug)]
pub struct WatchCaches {
    storage: SharedStorage,
    config: WatchCacheConfig,
    caches: Mutex<HashMap<String, Arc<ResourceCache>>>,
    /// One gate per cache key: whoever holds it is starting that cache, and everyone else
    /// asking for it waits for the result instead of starting a LIST and an upstream watch of
    /// their own. (Without it, a thousand informers arriving together started a thousand
    /// upstream watches and kept one: each cost the storage a watch and the frontend about
    /// 8 KiB of gRPC buffers until dropped, which set the process's peak memory.)
    starting: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Caches started, by (group, resource): kube's `apiserver_watch_cache_initializations_total`.
    initializations: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
}

impl WatchCaches {
    /// Creates an empty set; caches start on first use.
    pub fn new(storage: SharedStorage, config: WatchCacheConfig) -> Self {
        WatchCaches {
            storage,
            config,
            caches: Mutex::new(HashMap::new()),
            starting: Mutex::new(HashMap::new()),
            initializations: Mutex::new(BTreeMap::new()),
        }
    }

    /// Appends this set's metrics to a Prometheus text exposition.
    pub fn render_metrics(&self, out: &mut String) {
        use std::fmt::Write as _;
        out.push_str("# HELP apiserver_watch_cache_initializations_total Counter of watch cache initializations broken by resource type.\n");
        out.push_str("# TYPE apiserver_watch_cache_initializations_total counter\n");
        let counts = self.initializations.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for ((group, resource), n) in counts.iter() {
            let _ = writeln!(
                out,
                "apiserver_watch_cache_initializations_total{{group=\"{group}\",resource=\"{resource}\"}} {n}"
            );
        }
    }

    /// Returns the configuration.
    pub fn config(&self) -> WatchCacheConfig {
        self.config
    }

    /// The map key: the storage prefix and the served group version, since kinds that share
    /// storage (core and events.k8s.io events) encode their events differently.
    fn key(kind: &ResourceKind, prefix: &str) -> String {
        format!("{prefix} {}", kind.api_version())
    }

    fn live(&self, key: &str) -> Option<Arc<ResourceCache>> {
        let caches = self.caches.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // A cache of a retired kind is not reused (it decodes with that kind's converter);
        // it ends at its next event or progress tick.
        caches
            .get(key)
            .filter(|c| !c.kind.strategy.retired() && c.state.lock().map(|s| s.alive).unwrap_or(false))
            .cloned()
    }

    /// Returns the cache of `prefix`, starting it (and its upstream watch) if needed.
    ///
    /// # Errors
    ///
    /// Returns storage errors from starting the upstream watch.
    pub async fn cache(&self, kind: &'static ResourceKind, prefix: &str) -> Result<Arc<ResourceCache>, StorageError> {
        let key = Self::key(kind, prefix);
        if let Some(c) = self.live(&key) {
            return Ok(c);
        }
        let gate = {
            let mut starting = self.starting.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            starting.entry(key.clone()).or_default().clone()
        };
        let _turn = gate.lock().await;
        // Started by whoever held the gate before us.
        if let Some(c) = self.live(&key) {
            return Ok(c);
        }
        let end = prefix_end(prefix.as_bytes());
        let start = self.storage.list(prefix.as_bytes(), &end, 1, 0).await?.revision;
        let mut events = self.storage.watch(prefix.as_bytes(), &end, start).await?;
        let cache = Arc::new(ResourceCache {
            kind,
            state: Mutex::new(CacheState {
                window: VecDeque::new(),
                window_start: start,
                synced: start,
                subscribers: Vec::new(),
                alive: true,
            }),
            terminated: AtomicU64::new(0),
            config: self.config,
        });
        self.caches.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(key, cache.clone());
        *self
            .initializations
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry((kind.group, kind.resource))
            .or_default() += 1;
        let feeder = cache.clone();
        let interval = self.config.progress_interval;
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
            loop {
                if feeder.kind.strategy.retired() {
                    break;
                }
                tokio::select! {
                    item = events.next_item() => match item {
                        Ok(Some(_)) if feeder.kind.strategy.retired() => break,
                        Ok(Some(item)) => feeder.apply(item),
                        Ok(None) | Err(_) => break,
                    },
                    _ = ticker.tick() => {
                        if events.request_progress().await.is_err() {
                            break;
                        }
                    }
                }
            }
            feeder.end();
        });
        Ok(cache)
    }

    /// Subscribes to `prefix`'s changes after revision `after`; `None` when the cache cannot
    /// serve that start point (older than its window) and history must come from etcd.
    ///
    /// # Errors
    ///
    /// Returns storage errors from starting the cache.
    pub async fn subscribe(
        &self,
        kind: &'static ResourceKind,
        prefix: &str,
        after: i64,
    ) -> Result<Option<Subscription>, StorageError> {
        Ok(self.cache(kind, prefix).await?.subscribe(after))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(key: &str, rev: i64) -> WatchItem {
        let value = serde_json::json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": key}});
        WatchItem::Event(StorageEvent {
            key: key.as_bytes().to_vec(),
            value: Some(serde_json::to_vec(&value).expect("json")),
            prev_value: None,
            revision: rev,
        })
    }

    fn cache(capacity: usize, client_queue: usize) -> ResourceCache {
        ResourceCache {
            kind: &crate::registry::testing::CONFIGMAPS,
            state: Mutex::new(CacheState {
                window: VecDeque::new(),
                window_start: 10,
                synced: 10,
                subscribers: Vec::new(),
                alive: true,
            }),
            terminated: AtomicU64::new(0),
            config: WatchCacheConfig {
                capacity,
                client_queue,
                progress_interval: Duration::from_secs(60),
                ..WatchCacheConfig::default()
            },
        }
    }

    fn revision(item: Option<CacheItem>) -> i64 {
        match item {
            Some(CacheItem::Event(e)) => e.revision,
            Some(CacheItem::Progress(r)) => -r,
            None => 0,
        }
    }

    #[tokio::test]
    async fn subscribers_replay_the_window_then_follow() {
        let c = cache(3, 8);
        assert!(c.subscribe(9).is_none(), "before the window: history must come from etcd");
        for rev in 11..=14 {
            c.apply(change("a", rev));
        }
        // Capacity 3 evicted revision 11: the window now starts after it.
        assert!(c.subscribe(10).is_none());
        let mut s = c.subscribe(12).expect("inside the window");
        c.apply(WatchItem::Progress(15));
        c.apply(change("b", 16));
        let got: Vec<i64> =
            [s.next().await, s.next().await, s.next().await, s.next().await].into_iter().map(revision).collect();
        assert_eq!(got, [13, 14, -15, 16]);
        let mut future = c.subscribe(100).expect("a future start point waits for the changes");
        c.apply(change("c", 17));
        assert_eq!(revision(future.rx.try_recv().ok()), 17, "the subscriber skips old revisions itself");
    }

    #[tokio::test]
    async fn a_slow_subscriber_is_terminated_without_holding_back_others() {
        let c = cache(100, 2);
        let mut slow = c.subscribe(10).expect("subscribe");
        let mut fast = c.subscribe(10).expect("subscribe");
        for rev in 11..=20 {
            c.apply(change("a", rev));
            assert_eq!(revision(fast.next().await), rev);
        }
        assert_eq!(c.terminated_slow_watchers(), 1);
        assert_eq!(revision(slow.next().await), 11);
        assert_eq!(revision(slow.next().await), 12);
        assert!(slow.next().await.is_none(), "the slow subscriber's stream ends");
        c.end();
        assert!(fast.next().await.is_none(), "the end of the upstream ends every stream");
        assert!(c.subscribe(20).is_none());
    }

    #[test]
    fn an_undecodable_value_is_a_decode_error_naming_the_key() {
        let WatchItem::Event(mut update) = change("a", 5) else { unreachable!() };
        update.prev_value = update.value.take();
        update.value = Some(b"k8s\x00\x0a".to_vec());
        let before = decode_errors::count("configmaps");
        let e = CachedEvent::decode(&update, &crate::registry::testing::CONFIGMAPS);
        let error = e.decode_error().expect("a decode error");
        assert!(error.contains("\"a\"") && error.contains("revision 5"), "{error}");
        assert!(e.current.is_none() && e.previous.is_some());
        assert!(decode_errors::count("configmaps") > before);
        let WatchItem::Event(fine) = change("b", 6) else { unreachable!() };
        assert!(CachedEvent::decode(&fine, &crate::registry::testing::CONFIGMAPS).decode_error().is_none());
    }

    #[test]
    fn lines_are_encoded_once_and_shared() {
        let WatchItem::Event(change) = change("a", 5) else { unreachable!() };
        let e = CachedEvent::decode(&change, &crate::registry::testing::CONFIGMAPS);
        let line = e.json_line(EventType::Added);
        assert_eq!(line.as_ptr(), e.json_line(EventType::Added).as_ptr());
        let v: Value = serde_json::from_slice(&line).expect("json");
        assert_eq!(v["type"], "ADDED");
        assert_eq!(v["object"]["metadata"]["resourceVersion"], "5");
    }
}
