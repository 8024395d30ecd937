//! Watch hub tests on the in-memory backend: ordering of created responses and events, history
//! catch-up, compaction cancels, progress, the slow-consumer policy and control credits.

use ballast_proto::etcdserverpb::{
    watch_create_request::FilterType, DeleteRangeRequest, PutRequest, WatchCreateRequest, WatchResponse,
};
use bytes::Bytes;

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

fn drain(rx: &mut WatchReceiver) -> Vec<WatchResponse> {
    let mut out = Vec::new();
    while let Some(batch) = rx.try_recv() {
        out.extend(batch.iter().map(WireResponse::decode));
    }
    out
}

fn revs(resps: &[WatchResponse]) -> Vec<i64> {
    revs_where(resps, |_| true)
}

/// The revisions of the events sent to watcher `id`, in order.
fn revs_of(resps: &[WatchResponse], id: i64) -> Vec<i64> {
    revs_where(resps, |r| r.watch_id == id)
}

fn revs_where(resps: &[WatchResponse], keep: impl Fn(&WatchResponse) -> bool) -> Vec<i64> {
    resps
        .iter()
        .filter(|r| keep(r))
        .flat_map(|r| r.events.iter().map(|e| e.kv.as_ref().map_or(0, |kv| kv.mod_revision)))
        .collect()
}

#[test]
fn created_then_events_with_prev_kv() {
    let mut f = Fixture::new(WatchConfig::default());
    let (tx, mut rx, _credits) = stream_channel(8);
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
    let (tx, mut rx, _credits) = stream_channel(8);
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
    let (slow_tx, mut slow_rx, _slow_credits) = stream_channel(2);
    let (fast_tx, mut fast_rx, _fast_credits) = stream_channel(64);
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

/// A round's events for the watchers of one stream go as one batch; what a stream has queued is
/// bounded by its event budget, and a watcher over it lags and is caught up, nothing lost.
#[test]
fn a_round_is_one_batch_per_stream_within_the_event_budget() {
    let cfg = WatchConfig { queued_events_per_watcher: 4, stream_buffer: 8, ..WatchConfig::default() };
    let mut f = Fixture::new(cfg);
    let (tx, mut rx, credits) = stream_channel(64);
    f.hub.open_stream(1, tx);
    for _ in 0..50 {
        assert!(credits.try_spend());
        f.watch(1, "k", 0);
    }
    assert_eq!(drain(&mut rx).iter().filter(|r| r.created).count(), 50);
    // Nothing queued: the round goes whole, one batch of 50 responses.
    f.put("k", "0");
    let batch = rx.try_recv().expect("one batch");
    assert_eq!(batch.len(), 50);
    assert!(rx.try_recv().is_none(), "one batch per round");
    // Unread, the stream's budget (4 events per watcher, each response counting as one more)
    // holds two rounds; the next ones find no room and the watchers lag.
    for i in 1..=5 {
        f.put("k", &i.to_string());
    }
    let mut got: Vec<WatchResponse> = batch.iter().map(WireResponse::decode).collect();
    let mut batches = 0;
    while let Some(b) = rx.try_recv() {
        batches += 1;
        got.extend(b.iter().map(WireResponse::decode));
    }
    assert_eq!(batches, 2, "the budget held two rounds of 50 responses");
    assert!(f.hub.has_lagging());
    for _ in 0..10 {
        f.catch_up();
        got.extend(drain(&mut rx));
    }
    assert!(!f.hub.has_lagging());
    for id in 0..50 {
        assert_eq!(revs_of(&got, id), (2..8).collect::<Vec<i64>>(), "watcher {id}: every event once, in order");
    }
}

/// Catching up, a stream with nothing queued takes one response however large, and the budget
/// bounds the rest: many lagging watchers do not land in the channel all at once.
#[test]
fn catch_up_of_many_watchers_stays_within_the_event_budget() {
    let cfg = WatchConfig { queued_events_per_watcher: 2, stream_buffer: 1, ..WatchConfig::default() };
    let mut f = Fixture::new(cfg);
    for i in 0..20 {
        f.put("k", &i.to_string());
    }
    let (tx, mut rx, credits) = stream_channel(64);
    f.hub.open_stream(1, tx);
    for _ in 0..10 {
        assert!(credits.try_spend());
        f.watch(1, "k", 2);
    }
    assert_eq!(drain(&mut rx).iter().filter(|r| r.created).count(), 10);
    let mut got = Vec::new();
    let mut passes = 0;
    while f.hub.has_lagging() {
        passes += 1;
        assert!(passes < 100, "stuck");
        f.catch_up();
        // Each watcher owes 20 events (weight 21) against a budget of 20 for the stream: one
        // response per pass.
        let batch = rx.try_recv().expect("a batch each pass");
        assert_eq!(batch.len(), 1, "pass {passes}");
        assert!(rx.try_recv().is_none());
        got.extend(batch.iter().map(WireResponse::decode));
    }
    assert_eq!(passes, 10);
    for id in 0..10 {
        assert_eq!(revs_of(&got, id), (2..22).collect::<Vec<i64>>(), "watcher {id}");
    }
}

#[test]
fn progress_waits_for_sync_and_duplicate_ids_are_refused() {
    let mut f = Fixture::new(WatchConfig { ring_events: 1, ..WatchConfig::default() });
    f.put("k", "0");
    f.put("k", "1");
    let (tx, mut rx, _credits) = stream_channel(8);
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

/// Returns the credits the request side could spend now.
fn available(c: &ControlCredits) -> usize {
    c.0.available_permits()
}

/// A client opening watchers faster than it reads: the request side stops when its credits run
/// out, so the queue never holds more than the credits, and every `created` still arrives, in
/// order.
#[test]
fn a_burst_of_creates_is_bounded_by_control_credits() {
    let mut f = Fixture::new(WatchConfig { control_credits: 4, ..WatchConfig::default() });
    let (tx, mut rx, credits) = stream_channel(2);
    f.hub.open_stream(1, tx);
    assert_eq!(available(&credits), 4);
    let mut created = Vec::new();
    let mut requested = 0;
    let mut stalls = 0;
    for round in 0.. {
        if created.len() == 500 {
            break;
        }
        assert!(round < 5_000, "stuck at {} created of {requested} requested", created.len());
        // The request side forwards while it has credits.
        while requested < 500 && credits.try_spend() {
            f.watch(1, &format!("k{requested}"), 0);
            requested += 1;
            let queued = f.hub.streams[&1].pending.len();
            assert!(queued <= 4, "the queue holds at most the credits ({queued})");
        }
        if requested < 500 {
            stalls += 1;
        }
        // The client reads one batch; the hub writes what waited and gives the credits back.
        if let Some(batch) = rx.try_recv() {
            created.extend(batch.iter().map(WireResponse::decode));
        }
        f.catch_up();
    }
    assert!(stalls > 100, "a client that reads one batch at a time holds the request side back ({stalls})");
    let ids: Vec<i64> = created.iter().map(|r| r.watch_id).collect();
    assert_eq!(ids, (0..500).collect::<Vec<i64>>(), "every created response, in order");
    let s = &f.hub.streams[&1];
    assert!(s.pending.is_empty() && s.pending.capacity() <= PENDING_KEPT, "{}", s.pending.capacity());
    assert_eq!(available(&credits), 4, "every credit came back");
    assert_eq!(f.hub.watcher_count(), 500);
}

/// Credits come back when a response is written, or at once for requests nothing answers; a
/// compaction cancel, which answers no request, returns none.
#[test]
fn every_request_returns_its_credit_once() {
    let mut f = Fixture::new(WatchConfig { control_credits: 3, ring_events: 1, ..WatchConfig::default() });
    let (tx, mut rx, credits) = stream_channel(8);
    f.hub.open_stream(1, tx);
    let rev = f.store.current_rev();
    // Nothing answers these: a progress request on a stream without watchers, a cancel of an
    // unknown ID.
    for _ in 0..10 {
        assert!(credits.try_spend());
        f.hub.request_progress(1, rev, &f.hdr);
        assert!(credits.try_spend());
        f.hub.cancel(1, 42, rev, &f.hdr);
    }
    assert!(drain(&mut rx).is_empty());
    assert_eq!(available(&credits), 3);

    // A progress request waiting for a lagging watcher keeps its credit; a second one is merged
    // into it and returns its own at once.
    for i in 0..3 {
        f.put("k", &i.to_string());
    }
    assert!(credits.try_spend());
    f.watch(1, "k", 2);
    assert!(credits.try_spend() && credits.try_spend());
    f.hub.request_progress(1, f.store.current_rev(), &f.hdr);
    f.hub.request_progress(1, f.store.current_rev(), &f.hdr);
    assert_eq!(available(&credits), 2, "the create's credit and the merged request's");
    f.catch_up();
    f.catch_up();
    let got = drain(&mut rx);
    assert!(got[0].created && got.last().is_some_and(|r| r.watch_id == -1 && !r.created), "{got:?}");
    assert_eq!(got.iter().filter(|r| r.watch_id == -1).count(), 1, "one progress answer for both requests");
    assert_eq!(available(&credits), 3);

    // A watcher canceled by compaction: a response without a request, so no credit.
    assert!(credits.try_spend());
    f.watch(1, "k", 2);
    f.store.compact(4).expect("compact");
    f.store.flush(WriteOpts::default()).expect("flush");
    f.catch_up();
    let got = drain(&mut rx);
    assert!(got.iter().any(|r| r.canceled && r.compact_revision == 4), "{got:?}");
    assert_eq!(available(&credits), 3);
}

/// A request side waiting for credits is released when the hub drops the stream.
#[test]
fn closing_a_stream_ends_the_wait_for_credits() {
    let mut f = Fixture::new(WatchConfig { control_credits: 1, ..WatchConfig::default() });
    let (tx, _rx, credits) = stream_channel(1);
    f.hub.open_stream(1, tx);
    assert!(futures::executor::block_on(credits.spend()));
    f.hub.close_stream(1);
    assert!(!futures::executor::block_on(credits.spend()), "no credit, and no waiting forever");
}

#[test]
fn queued_responses_are_small() {
    assert!(std::mem::size_of::<Outgoing>() <= 3 * std::mem::size_of::<usize>(), "a channel slot is a vector");
    // What a queued control response costs, against the response it stands for.
    assert!(std::mem::size_of::<Control>() <= 32, "{}", std::mem::size_of::<Control>());
    assert!(std::mem::size_of::<WireResponse>() > 3 * std::mem::size_of::<Control>());
}

/// A prefix watch and a half-open range watch see the same events through the hub.
#[test]
fn prefix_and_range_watchers_see_their_keys() {
    let mut f = Fixture::new(WatchConfig::default());
    let (tx, mut rx, _credits) = stream_channel(64);
    f.hub.open_stream(1, tx);
    for (key, end) in [("p/", "p0"), ("p/", "p/m"), ("", "\0")] {
        let req = WatchCreateRequest {
            key: Bytes::copy_from_slice(key.as_bytes()),
            range_end: Bytes::copy_from_slice(end.as_bytes()),
            ..Default::default()
        };
        f.hub.create(1, &req, &f.store, &f.hdr);
    }
    for k in ["p/a", "p/z", "p0", "o"] {
        f.put(k, "v");
    }
    let got = drain(&mut rx);
    let seen = |id: i64| -> Vec<i64> {
        got.iter()
            .filter(|r| r.watch_id == id)
            .flat_map(|r| r.events.iter())
            .map(|e| e.kv.as_ref().map_or(0, |kv| kv.mod_revision))
            .collect()
    };
    assert_eq!(seen(0), vec![2, 3], "p/ prefix");
    assert_eq!(seen(1), vec![2], "p/ up to p/m");
    assert_eq!(seen(2), vec![2, 3, 4, 5], "everything");
}

/// What the model test does next.
#[derive(Clone, Debug)]
enum Op {
    /// Puts `n` keys from `key` on in one round (one revision each).
    Put {
        key: usize,
        n: usize,
    },
    /// Deletes a key, or every key under it as a prefix, in one revision.
    Delete {
        key: usize,
        prefix: bool,
    },
    /// Creates a watcher on `stream`: shape (key, prefix, from, between), keys, filter (none,
    /// NOPUT, NODELETE), start (now, in the past, ahead).
    Create {
        stream: usize,
        shape: u8,
        a: usize,
        b: usize,
        filter: u8,
        start: u8,
        prev_kv: bool,
    },
    /// Cancels the `nth` watcher whose created response the client has read on `stream`.
    Cancel {
        stream: usize,
        nth: usize,
    },
    /// The client of `stream` reads what is queued.
    Read {
        stream: usize,
    },
    Progress {
        stream: usize,
    },
    CatchUp,
}

const KEYS: [&str; 8] = ["a", "a/", "a/1", "a/2", "b", "b/1", "c", "c/x"];

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        4 => (0..KEYS.len(), 1usize..4).prop_map(|(key, n)| Op::Put { key, n }),
        1 => (0..KEYS.len(), any::<bool>()).prop_map(|(key, prefix)| Op::Delete { key, prefix }),
        3 => (0usize..3, 0u8..4, 0..KEYS.len(), 0..KEYS.len(), 0u8..3, 0u8..3, any::<bool>()).prop_map(
            |(stream, shape, a, b, filter, start, prev_kv)| Op::Create { stream, shape, a, b, filter, start, prev_kv }
        ),
        1 => (0usize..3, 0usize..8).prop_map(|(stream, nth)| Op::Cancel { stream, nth }),
        3 => (0usize..3).prop_map(|stream| Op::Read { stream }),
        1 => (0usize..3).prop_map(|stream| Op::Progress { stream }),
        2 => Just(Op::CatchUp),
    ]
}

/// One create request of the model, with the revision the store was at.
struct Created {
    req: WatchCreateRequest,
    at_rev: i64,
}

impl Created {
    fn wants(&self, (rev, key, put): &(i64, String, bool)) -> bool {
        let start = if self.req.start_revision > 0 { self.req.start_revision } else { self.at_rev + 1 };
        let (k, end) = (self.req.key.as_ref(), self.req.range_end.as_ref());
        let key = key.as_bytes();
        let in_range = match end {
            [] => key == k,
            [0] => key >= k,
            _ => key >= k && key < end,
        };
        let filtered = self.req.filters.contains(&(if *put { FilterType::Noput } else { FilterType::Nodelete } as i32));
        *rev >= start && in_range && !filtered
    }
}

/// The hub against a model of what every watcher must receive: through puts and deletes of one or
/// several revisions a round, watchers of every shape created now, in the past and ahead, cancels,
/// progress requests, and streams too small for what they are sent (so watchers leave the index,
/// lag, are caught up from the ring or from history, and rejoin), every watcher gets exactly its
/// events, in order, once; a canceled one a prefix of them; and a progress response comes only
/// after each of its stream's watchers has had every event up to its revision.
#[test]
fn every_watcher_gets_exactly_its_events() {
    use proptest::prelude::*;
    let cfg = ProptestConfig { cases: 64, ..ProptestConfig::default() };
    proptest!(cfg, |(ops in proptest::collection::vec(op(), 1..120))| {
        let mut f = Fixture::new(WatchConfig { ring_events: 4, ..WatchConfig::default() });
        let mut rxs = Vec::new();
        for (i, buffer) in [2usize, 3, 64].into_iter().enumerate() {
            let (tx, rx, _credits) = stream_channel(buffer);
            f.hub.open_stream(i as u64, tx);
            rxs.push(rx);
        }
        // Per stream: creates in order, responses read, and how many created responses were read.
        let mut creates: Vec<Vec<Created>> = vec![Vec::new(), Vec::new(), Vec::new()];
        let mut logs: Vec<Vec<WatchResponse>> = vec![Vec::new(), Vec::new(), Vec::new()];
        let mut history: Vec<(i64, String, bool)> = Vec::new();
        let record = |history: &mut Vec<(i64, String, bool)>, events: &[Event]| {
            for e in events {
                let kv = e.kv.as_ref().expect("kv");
                history.push((kv.mod_revision, String::from_utf8_lossy(&kv.key).into_owned(), e.r#type == 0));
            }
        };
        for op in ops {
            match op {
                Op::Put { key, n } => {
                    for k in KEYS.iter().cycle().skip(key).take(n) {
                        let r = PutRequest { key: Bytes::from(*k), value: Bytes::from_static(b"v"), ..Default::default() };
                        apply_put(&mut f.store, &mut f.leases, &r).expect("put");
                    }
                    let events = f.store.flush(WriteOpts::default()).expect("flush");
                    record(&mut history, &events);
                    f.hub.publish(&events, f.store.current_rev(), &f.hdr);
                }
                Op::Delete { key, prefix } => {
                    let k = KEYS[key];
                    let end = if prefix { crate::mvcc::key_range::prefix_end(k.as_bytes()).to_vec() } else { Vec::new() };
                    let r = DeleteRangeRequest { key: Bytes::from(k), range_end: Bytes::from(end), ..Default::default() };
                    crate::apply::kv::apply_delete(&mut f.store, &mut f.leases, &r).expect("delete");
                    let events = f.store.flush(WriteOpts::default()).expect("flush");
                    record(&mut history, &events);
                    f.hub.publish(&events, f.store.current_rev(), &f.hdr);
                }
                Op::Create { stream, shape, a, b, filter, start, prev_kv } => {
                    let (a, b) = (KEYS[a], KEYS[b]);
                    let range_end = match shape {
                        0 => Vec::new(),
                        1 => crate::mvcc::key_range::prefix_end(a.as_bytes()).to_vec(),
                        2 => b"\0".to_vec(),
                        _ => b.as_bytes().to_vec(),
                    };
                    let current = f.store.current_rev();
                    let start_revision = match start {
                        0 => 0,
                        1 => (current - 3).max(1),
                        _ => current + 2,
                    };
                    let filters = match filter {
                        0 => vec![],
                        1 => vec![FilterType::Noput as i32],
                        _ => vec![FilterType::Nodelete as i32],
                    };
                    let req = WatchCreateRequest {
                        key: Bytes::from(a),
                        range_end: Bytes::from(range_end),
                        start_revision,
                        filters,
                        prev_kv,
                        ..Default::default()
                    };
                    f.hub.create(stream as u64, &req, &f.store, &f.hdr);
                    creates[stream].push(Created { req, at_rev: current });
                }
                Op::Cancel { stream, nth } => {
                    let ids: Vec<i64> = logs[stream].iter().filter(|r| r.created).map(|r| r.watch_id).collect();
                    if let Some(id) = ids.get(nth) {
                        f.hub.cancel(stream as u64, *id, f.store.current_rev(), &f.hdr);
                    }
                }
                Op::Read { stream } => logs[stream].extend(drain(&mut rxs[stream])),
                Op::Progress { stream } => f.hub.request_progress(stream as u64, f.store.current_rev(), &f.hdr),
                Op::CatchUp => f.catch_up(),
            }
        }
        for _ in 0..10_000 {
            for (s, rx) in rxs.iter_mut().enumerate() {
                logs[s].extend(drain(rx));
            }
            // A progress request may go on waiting for a start revision ahead of the store.
            let settled = |h: &WatchHub| h.streams.values().all(|s| s.lagging == 0 && s.pending.is_empty());
            if settled(&f.hub) {
                break;
            }
            f.catch_up();
        }
        prop_assert!(f.hub.streams.values().all(|s| s.lagging == 0 && s.pending.is_empty()), "everything caught up");
        let synced: usize = f.hub.streams.values().map(|s| s.watchers.len()).sum();
        prop_assert_eq!(f.hub.index.len(), synced, "every watcher back in the index");
        for s in 0..3 {
            // The k-th created response answers the k-th create; a canceled watcher's ID may be
            // given to a later create, so results are kept by create.
            let mut live: HashMap<i64, usize> = HashMap::new();
            let mut answered = 0;
            let mut got: Vec<Vec<(i64, String, bool)>> = creates[s].iter().map(|_| Vec::new()).collect();
            let mut canceled: HashSet<usize> = HashSet::new();
            for r in &logs[s] {
                if r.created {
                    live.insert(r.watch_id, answered);
                    answered += 1;
                    continue;
                }
                if r.canceled {
                    let n = live.remove(&r.watch_id).expect("a canceled watcher was created");
                    canceled.insert(n);
                    continue;
                }
                if r.watch_id == -1 {
                    // Progress: every watcher of the stream has had everything up to this revision.
                    let rev = r.header.as_ref().map_or(0, |h| h.revision);
                    for n in live.values() {
                        let want = history.iter().filter(|e| e.0 <= rev && creates[s][*n].wants(e)).count();
                        prop_assert_eq!(got[*n].len(), want, "stream {} create {} at progress {}", s, n, rev);
                    }
                    continue;
                }
                let n = live[&r.watch_id];
                for e in &r.events {
                    let kv = e.kv.as_ref().expect("kv");
                    prop_assert!(creates[s][n].req.prev_kv || e.prev_kv.is_none(), "prev_kv only when asked for");
                    got[n].push((kv.mod_revision, String::from_utf8_lossy(&kv.key).into_owned(), e.r#type == 0));
                }
            }
            prop_assert_eq!(answered, creates[s].len(), "every create answered");
            for (n, have) in got.iter().enumerate() {
                let want: Vec<_> = history.iter().filter(|e| creates[s][n].wants(e)).cloned().collect();
                if canceled.contains(&n) {
                    prop_assert!(want.starts_with(have), "stream {} create {}: {:?} not a prefix of {:?}", s, n, have, want);
                } else {
                    prop_assert_eq!(have, &want, "stream {} create {}", s, n);
                }
            }
        }
    });
}
