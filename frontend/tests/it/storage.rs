//! The storage seam's conformance suite: one set of checks on the [`Storage`] trait, run on the
//! in-memory twin (`MemStorage`), stock etcd (the reference) and the Ballast engine (one shard
//! and eight). Whatever the registry relies on is pinned here: revisions (one per change, none
//! for a failed precondition), `mod_revision`/`create_revision`, create/update/delete
//! preconditions, reads at past revisions and pages, compaction (reads and watches below it
//! answer `Compacted`), watches from a revision (every change after it, in order, with previous
//! values, filtered by range) and progress notifications.
//!
//! `conformance!` defines `<check>::{memory, etcd, ballast, ballast_8_shards}`.

use std::sync::Arc;
use std::time::Duration;

use ballast_apiserver::storage::{prefix_end, Etcd3Storage, SharedStorage, StorageError, WatchEvents, WatchItem};

use crate::harness::{Backend, StorageServer};

macro_rules! conformance {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            use crate::harness::Backend;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn memory() {
                super::$name(super::Subject::start(Backend::Memory).await).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn etcd() {
                super::$name(super::Subject::start(Backend::Etcd).await).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn ballast() {
                super::$name(super::Subject::start(Backend::Ballast).await).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn ballast_8_shards() {
                super::$name(super::Subject::start(Backend::BallastSharded).await).await
            }
        }
    )*};
}

conformance!(
    revisions_and_preconditions,
    reads_at_past_revisions_and_pages,
    compaction_ends_old_reads_and_watches,
    watches_deliver_every_change_after_their_start,
    progress_notifications_follow_delivered_changes,
);

/// One implementation under test, with what the trait leaves out (compaction).
pub(crate) struct Subject {
    storage: SharedStorage,
    server: StorageServer,
}

impl Subject {
    pub(crate) async fn start(backend: Backend) -> Subject {
        let server = StorageServer::start(backend).await;
        let storage: SharedStorage = match &server {
            StorageServer::Memory(mem) => Arc::new(mem.clone()),
            real => Arc::new(
                Etcd3Storage::connect(&[real.endpoint().to_string()], &Default::default()).await.expect("connect"),
            ),
        };
        Subject { storage, server }
    }

    /// Compacts history at `revision` (etcd's Compact; `MemStorage::compact`).
    async fn compact(&self, revision: i64) {
        match &self.server {
            StorageServer::Memory(mem) => mem.compact(revision).expect("compact"),
            real => {
                let mut client = etcd_client::Client::connect([real.endpoint()], None).await.expect("etcd client");
                client.compact(revision, None).await.expect("compact");
            }
        }
    }

    /// Returns the store's revision.
    async fn revision(&self) -> i64 {
        self.storage.get(b"/conformance/no-such-key").await.expect("get").1
    }
}

/// Returns the next item of `events`, within 10 s.
async fn next(events: &mut WatchEvents) -> Result<Option<WatchItem>, StorageError> {
    tokio::time::timeout(Duration::from_secs(10), events.next_item()).await.expect("a watch item within 10 s")
}

/// Returns the next change of `events` as (key, value, previous value, revision).
async fn must_next_event(events: &mut WatchEvents) -> (String, Option<String>, Option<String>, i64) {
    loop {
        match next(events).await.expect("watch") {
            Some(WatchItem::Event(e)) => {
                let text = |b: Option<Vec<u8>>| b.map(|b| String::from_utf8(b).expect("utf-8"));
                return (String::from_utf8(e.key).expect("utf-8"), text(e.value), text(e.prev_value), e.revision);
            }
            Some(WatchItem::Progress(_)) => continue,
            None => panic!("the watch ended"),
        }
    }
}

async fn revisions_and_preconditions(s: Subject) {
    let st = &s.storage;
    let r0 = s.revision().await;
    let r1 = st.create(b"/c/a", b"1".to_vec()).await.expect("create");
    assert_eq!(r1, r0 + 1, "a change takes the next revision");
    let (kv, header) = st.get(b"/c/a").await.expect("get");
    let kv = kv.expect("created");
    assert_eq!((kv.value.as_ref(), kv.mod_revision, kv.create_revision, header), (&b"1"[..], r1, r1, r1));
    assert!(matches!(st.create(b"/c/a", b"x".to_vec()).await, Err(StorageError::KeyExists)));
    let r2 = st.update(b"/c/a", b"2".to_vec(), r1).await.expect("update");
    assert_eq!(r2, r1 + 1);
    let kv = st.get(b"/c/a").await.expect("get").0.expect("present");
    assert_eq!((kv.value.as_ref(), kv.mod_revision, kv.create_revision), (&b"2"[..], r2, r1));
    assert!(
        matches!(st.update(b"/c/a", b"3".to_vec(), r1).await, Err(StorageError::Conflict { current }) if current == r2)
    );
    assert!(matches!(st.delete(b"/c/a", r1).await, Err(StorageError::Conflict { current }) if current == r2));
    assert!(matches!(st.update(b"/c/none", b"3".to_vec(), 7).await, Err(StorageError::KeyNotFound)));
    assert!(matches!(st.delete(b"/c/none", 7).await, Err(StorageError::KeyNotFound)));
    assert_eq!(s.revision().await, r2, "failed preconditions take no revision");
    let r3 = st.delete(b"/c/a", r2).await.expect("delete");
    assert_eq!(r3, r2 + 1);
    let (kv, header) = st.get(b"/c/a").await.expect("get");
    assert!(kv.is_none(), "deleted");
    assert_eq!(header, r3);
    // Re-created: a new create_revision.
    let r4 = st.create(b"/c/a", b"again".to_vec()).await.expect("create");
    let kv = st.get(b"/c/a").await.expect("get").0.expect("present");
    assert_eq!((kv.mod_revision, kv.create_revision), (r4, r4));
}

async fn reads_at_past_revisions_and_pages(s: Subject) {
    let st = &s.storage;
    let mut revs = Vec::new();
    for i in 1..=5 {
        revs.push(st.create(format!("/p/{i}").as_bytes(), format!("v{i}").into_bytes()).await.expect("create"));
    }
    st.create(b"/q", b"outside".to_vec()).await.expect("create");
    let end = prefix_end(b"/p/");
    let page = st.list(b"/p/", &end, 2, 0).await.expect("list");
    let keys: Vec<&[u8]> = page.kvs.iter().map(|kv| kv.key.as_ref()).collect();
    assert_eq!(keys, [&b"/p/1"[..], b"/p/2"]);
    assert_eq!((page.more, page.count, page.revision), (true, 5, s.revision().await));
    let all = st.list(b"/p/", &end, 0, 0).await.expect("list");
    assert_eq!((all.kvs.len(), all.more, all.count), (5, false, 5));
    assert_eq!(all.kvs[4].mod_revision, revs[4]);
    // At a past revision: what was there then; the header still says the current revision.
    let r_update = st.update(b"/p/1", b"changed".to_vec(), revs[0]).await.expect("update");
    let then = st.list(b"/p/", &end, 0, revs[2]).await.expect("list at a past revision");
    assert_eq!(then.count, 3);
    assert_eq!(then.kvs[0].value.as_ref(), b"v1");
    assert_eq!(then.revision, r_update, "a pinned read reports the current revision");
    let now = st.list(b"/p/", &end, 1, 0).await.expect("list");
    assert_eq!(now.kvs[0].value.as_ref(), b"changed");
    // A page continuing after the last key, at the first page's revision.
    let mut next_key = page.kvs[1].key.to_vec();
    next_key.push(0);
    let rest = st.list(&next_key, &end, 0, page.revision).await.expect("next page");
    assert_eq!(rest.kvs.len(), 3);
    assert_eq!(rest.kvs[0].key.as_ref(), b"/p/3");
}

async fn compaction_ends_old_reads_and_watches(s: Subject) {
    let st = &s.storage;
    let r1 = st.create(b"/k/a", b"1".to_vec()).await.expect("create");
    let r2 = st.update(b"/k/a", b"2".to_vec(), r1).await.expect("update");
    let r3 = st.update(b"/k/a", b"3".to_vec(), r2).await.expect("update");
    let gone = st.create(b"/k/gone", b"x".to_vec()).await.expect("create");
    st.delete(b"/k/gone", gone).await.expect("delete");
    let end = prefix_end(b"/k/");
    s.compact(r2).await;
    assert!(
        matches!(st.list(b"/k/", &end, 0, r1).await, Err(StorageError::Compacted { requested, .. }) if requested == r1)
    );
    let at = st.list(b"/k/", &end, 0, r2).await.expect("the compaction revision itself is readable");
    assert_eq!(at.kvs.len(), 1);
    assert_eq!((at.kvs[0].value.as_ref(), at.kvs[0].mod_revision), (&b"2"[..], r2));
    let latest = st.list(b"/k/", &end, 0, 0).await.expect("list");
    assert_eq!((latest.kvs.len(), latest.kvs[0].value.as_ref()), (1, &b"3"[..]));
    // A watch starting below the compaction point ends with Compacted.
    let mut old = st.watch(b"/k/", &end, r1 - 1).await.expect("watch");
    assert!(matches!(next(&mut old).await, Err(StorageError::Compacted { .. })));
    // One starting at it sees the changes from it on.
    let mut ok = st.watch(b"/k/", &end, r2 - 1).await.expect("watch");
    let (key, value, _, rev) = must_next_event(&mut ok).await;
    assert_eq!((key.as_str(), value.as_deref(), rev), ("/k/a", Some("2"), r2));
    let (_, value, prev, rev) = must_next_event(&mut ok).await;
    assert_eq!((value.as_deref(), prev.as_deref(), rev), (Some("3"), Some("2"), r3));
}

async fn watches_deliver_every_change_after_their_start(s: Subject) {
    let st = &s.storage;
    let before = s.revision().await;
    let r1 = st.create(b"/w/a", b"1".to_vec()).await.expect("create");
    let r2 = st.update(b"/w/a", b"2".to_vec(), r1).await.expect("update");
    st.create(b"/x/outside", b"o".to_vec()).await.expect("create");
    let r4 = st.delete(b"/w/a", r2).await.expect("delete");
    let end = prefix_end(b"/w/");
    let mut w = st.watch(b"/w/", &end, before).await.expect("watch");
    assert_eq!(must_next_event(&mut w).await, ("/w/a".into(), Some("1".into()), None, r1));
    assert_eq!(must_next_event(&mut w).await, ("/w/a".into(), Some("2".into()), Some("1".into()), r2));
    assert_eq!(must_next_event(&mut w).await, ("/w/a".into(), None, Some("2".into()), r4), "the deletion");
    // Live changes follow history.
    let r5 = st.create(b"/w/b", b"live".to_vec()).await.expect("create");
    assert_eq!(must_next_event(&mut w).await, ("/w/b".into(), Some("live".into()), None, r5));
    // A watch from a later revision starts after it.
    let mut later = st.watch(b"/w/", &end, r2).await.expect("watch");
    assert_eq!(must_next_event(&mut later).await.3, r4);
    assert_eq!(must_next_event(&mut later).await.3, r5);
}

async fn progress_notifications_follow_delivered_changes(s: Subject) {
    // The watch starts at a revision the store has reached: for a start ahead of the store,
    // stock etcd answers a progress request at once (with the store's revision, below the
    // start) while the Ballast engine waits until the store reaches the start, so that case is
    // left out here.
    let st = &s.storage;
    let end = prefix_end(b"/g/");
    let r = st.create(b"/g/a", b"1".to_vec()).await.expect("create");
    let mut w = st.watch(b"/g/", &end, r - 1).await.expect("watch");
    assert_eq!(must_next_event(&mut w).await.3, r);
    w.request_progress().await.expect("request progress");
    assert!(must_next_progress(&mut w).await >= r, "progress covers the delivered change");
    // A change outside the watched range moves progress on without an event.
    let outside = st.create(b"/h/outside", b"o".to_vec()).await.expect("create");
    w.request_progress().await.expect("request progress");
    let progress = must_next_progress(&mut w).await;
    assert!(progress >= outside, "progress {progress} covers every change up to {outside}");
    let r2 = st.update(b"/g/a", b"2".to_vec(), r).await.expect("update");
    assert_eq!(must_next_event(&mut w).await.3, r2);
}

/// Returns the revision of the next progress notification of `events`; panics on a change.
async fn must_next_progress(events: &mut WatchEvents) -> i64 {
    match next(events).await.expect("watch") {
        Some(WatchItem::Progress(r)) => r,
        Some(WatchItem::Event(e)) => panic!("a change where progress was due: {e:?}"),
        None => panic!("the watch ended"),
    }
}
