//! Watch hub tests on the in-memory backend: ordering of created responses and events, history
//! catch-up, compaction cancels, progress, and the slow-consumer policy.

use ballast_proto::etcdserverpb::{PutRequest, WatchCreateRequest, WatchResponse};
use bytes::Bytes;
use tokio::sync::mpsc;

use super::*;
use crate::apply::kv::apply_put;
use crate::lease::Lessor;
use crate::storage::{MemBackend, WriteOpts};

struct Fixture {
    store: MvccStore<MemBackend>,
    leases: Lessor,
    hub: WatchHub,
    hdr: HeaderInfo,
}

impl Fixture {
    fn new(cfg: WatchConfig) -> Self {
        let backend = MemBackend::new();
        let (store, live) = MvccStore::open(backend.clone()).expect("open");
        let leases = Lessor::restore(&backend, live, 2, std::time::Instant::now()).expect("leases");
        let hub = WatchHub::new(cfg, store.current_rev());
        Self { store, leases, hub, hdr: HeaderInfo { cluster_id: 1, member_id: 2, raft_term: 3 } }
    }

    fn put(&mut self, k: &str, v: &str) {
        let r = PutRequest {
            key: Bytes::copy_from_slice(k.as_bytes()),
            value: Bytes::copy_from_slice(v.as_bytes()),
            ..Default::default()
        };
        apply_put(&mut self.store, &mut self.leases, &r).expect("put");
        let events = self.store.flush(WriteOpts::default()).expect("flush");
        self.hub.publish(&events, self.store.current_rev(), &self.hdr);
    }

    fn watch(&mut self, stream: StreamId, key: &str, start: i64) {
        let req = WatchCreateRequest {
            key: Bytes::copy_from_slice(key.as_bytes()),
            start_revision: start,
            prev_kv: true,
            ..Default::default()
        };
        self.hub.create(stream, &req, &self.store, &self.hdr);
    }

    fn catch_up(&mut self) {
        self.hub.catch_up(&self.store, &self.hdr).expect("catch up");
    }
}

fn drain(rx: &mut mpsc::Receiver<WatchResponse>) -> Vec<WatchResponse> {
    let mut out = Vec::new();
    while let Ok(r) = rx.try_recv() {
        out.push(r);
    }
    out
}

fn revs(resps: &[WatchResponse]) -> Vec<i64> {
    resps.iter().flat_map(|r| r.events.iter().map(|e| e.kv.as_ref().map_or(0, |kv| kv.mod_revision))).collect()
}

#[test]
fn created_then_events_with_prev_kv() {
    let mut f = Fixture::new(WatchConfig::default());
    let (tx, mut rx) = mpsc::channel(8);
    f.hub.open_stream(1, tx);
    f.watch(1, "a", 0);
    f.put("a", "1");
    f.put("b", "1");
    f.put("a", "2");
    let got = drain(&mut rx);
    assert!(got[0].created && got[0].events.is_empty());
    assert_eq!(revs(&got[1..]), vec![2, 4]);
    assert_eq!(got[2].events[0].prev_kv.as_ref().map(|kv| kv.value.clone()), Some(Bytes::from_static(b"1")));
}

#[test]
fn history_then_ring_and_compaction_cancel() {
    // A ring of one event forces the history path for old revisions.
    let mut f = Fixture::new(WatchConfig { ring_events: 1, ..WatchConfig::default() });
    for i in 0..5 {
        f.put("k", &i.to_string());
    }
    let (tx, mut rx) = mpsc::channel(8);
    f.hub.open_stream(1, tx);
    f.watch(1, "k", 2);
    f.catch_up();
    f.catch_up();
    let got = drain(&mut rx);
    assert!(got[0].created);
    assert_eq!(revs(&got), vec![2, 3, 4, 5, 6], "every revision once, in order");

    f.store.compact(5).expect("compact");
    f.store.flush(WriteOpts::default()).expect("flush");
    f.watch(1, "k", 3);
    f.catch_up();
    let got = drain(&mut rx);
    assert!(got[0].created);
    assert!(got[1].canceled);
    assert_eq!(got[1].compact_revision, 5);
}

#[test]
fn slow_stream_lags_then_catches_up_without_loss() {
    let mut f = Fixture::new(WatchConfig::default());
    let (slow_tx, mut slow_rx) = mpsc::channel(2);
    let (fast_tx, mut fast_rx) = mpsc::channel(64);
    f.hub.open_stream(1, slow_tx);
    f.hub.open_stream(2, fast_tx);
    f.watch(1, "k", 0);
    f.watch(2, "k", 0);
    for i in 0..20 {
        f.put("k", &i.to_string());
    }
    // The fast stream got everything at once; the slow one holds only what fits.
    assert_eq!(revs(&drain(&mut fast_rx)), (2..22).collect::<Vec<_>>());
    let mut slow = drain(&mut slow_rx);
    assert!(f.hub.has_lagging());
    for _ in 0..10 {
        f.catch_up();
        slow.extend(drain(&mut slow_rx));
    }
    assert_eq!(revs(&slow), (2..22).collect::<Vec<_>>(), "nothing lost, nothing repeated");
    assert!(!f.hub.has_lagging());
}

#[test]
fn progress_waits_for_sync_and_duplicate_ids_are_refused() {
    let mut f = Fixture::new(WatchConfig { ring_events: 1, ..WatchConfig::default() });
    f.put("k", "0");
    f.put("k", "1");
    let (tx, mut rx) = mpsc::channel(8);
    f.hub.open_stream(1, tx);
    f.watch(1, "k", 2); // behind: progress must wait
    f.hub.request_progress(1, f.store.current_rev(), &f.hdr);
    let got = drain(&mut rx);
    assert_eq!(got.len(), 1, "only the created response so far");
    f.catch_up(); // history, up to the ring's start
    f.catch_up(); // the ring
    let got = drain(&mut rx);
    assert_eq!(revs(&got), vec![2, 3]);
    let progress = got.last().expect("progress");
    assert_eq!((progress.watch_id, progress.events.len(), progress.header.map(|h| h.revision)), (-1, 0, Some(3)));

    let chosen = WatchCreateRequest { key: Bytes::from_static(b"x"), watch_id: 7, ..Default::default() };
    f.hub.create(1, &chosen, &f.store, &f.hdr);
    assert_eq!(drain(&mut rx)[0].watch_id, 7, "a client-chosen ID is used");
    f.hub.create(1, &chosen, &f.store, &f.hdr);
    let got = drain(&mut rx);
    assert!(got[0].created && got[0].canceled && got[0].watch_id == -1);
    assert_eq!(got[0].cancel_reason, DUPLICATE_WATCH_ID);
}

#[test]
fn a_burst_of_creates_leaves_no_queue_behind() {
    let mut f = Fixture::new(WatchConfig::default());
    let (tx, mut rx) = mpsc::channel(2);
    f.hub.open_stream(1, tx);
    for i in 0..500 {
        f.watch(1, &format!("k{i}"), 0);
    }
    let queued = f.hub.streams[&1].pending.len();
    assert!(queued >= 490, "the channel holds 2; the rest waits in order ({queued})");
    let mut created = Vec::new();
    while created.len() < 500 {
        created.extend(drain(&mut rx));
        f.catch_up();
    }
    let ids: Vec<i64> = created.iter().map(|r| r.watch_id).collect();
    assert_eq!(ids, (0..500).collect::<Vec<i64>>(), "every created response, in order");
    let s = &f.hub.streams[&1];
    assert!(s.pending.is_empty() && s.pending.capacity() <= PENDING_KEPT, "{}", s.pending.capacity());
}
