//! Merge tests: merged shard answers against one store holding every key, both served by the
//! real `kv::range` over `MvccStore` on `MemBackend`.
//!
//! Why real stores rather than a model: the merge's contract is "equal to what the single-store
//! code answers", so the single-store code is the oracle; a model would test the merge against
//! our reading of that code, the very thing that could be wrong.
//!
//! Keeping revisions identical: a store assigns each changing write `current + 1`, so every
//! store must change something on every step. Each partition `p` owns a pad key `pad/<p>`. A step
//! writes its real op on the owning partition and puts `pad/<p>` on every other partition; the
//! whole store applies the real op and all those pad puts in one txn. Every store then gains
//! exactly one revision per step, and the whole store holds exactly the union of the partitions,
//! pads included, with the same create/mod revisions and versions. Pads are ordinary keys that
//! ranges see on both sides, and they share mod revisions with the step's real key, which gives
//! the sort tie-breaks something to decide. Deletes are only of live keys, so they change
//! something.

use ballast_proto::etcdserverpb::{
    request_op::Request, DeleteRangeRequest, PutRequest, RangeRequest, RangeResponse, RequestOp, TxnRequest,
};
use bytes::Bytes;
use proptest::prelude::*;

use super::*;
use crate::apply::kv::{apply_txn, range, LeaseView};
use crate::mvcc::MvccStore;
use crate::shard_map::{ShardMap, Shards};
use crate::storage::{MemBackend, WriteOpts};

/// No leases: the generated writes never attach one.
struct NoLeases;

impl LeaseView for NoLeases {
    fn exists(&self, _id: i64) -> bool {
        false
    }
    fn attach(&mut self, _id: i64, _key: &Bytes) {}
    fn detach(&mut self, _id: i64, _key: &[u8]) {}
}

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn put(key: Bytes, value: Bytes) -> RequestOp {
    RequestOp { request: Some(Request::RequestPut(PutRequest { key, value, ..Default::default() })) }
}

fn delete(key: Bytes) -> RequestOp {
    RequestOp { request: Some(Request::RequestDeleteRange(DeleteRangeRequest { key, ..Default::default() })) }
}

fn must_open() -> MvccStore<MemBackend> {
    MvccStore::open(MemBackend::new()).expect("open an empty store").0
}

/// One store with every key and one store per partition, at identical revisions.
struct Cluster {
    whole: MvccStore<MemBackend>,
    parts: Vec<MvccStore<MemBackend>>,
}

impl Cluster {
    fn new(partitions: usize) -> Self {
        Self { whole: must_open(), parts: (0..partitions).map(|_| must_open()).collect() }
    }

    /// Puts `key` (owned by partition `owner`), or deletes it when `value` is None; see the
    /// module comment for how the other partitions keep step.
    fn must_write(&mut self, owner: usize, key: Bytes, value: Option<Bytes>) {
        let step = self.whole.current_rev();
        let real = match value {
            Some(v) => put(key, v),
            None => delete(key),
        };
        let mut whole_ops = vec![real.clone()];
        for p in (0..self.parts.len()).filter(|&p| p != owner) {
            let pad = put(b(&format!("pad/{p}")), b(&format!("v{}", step % 3)));
            whole_ops.push(pad.clone());
            must_txn(&mut self.parts[p], vec![pad]);
        }
        must_txn(&mut self.parts[owner], vec![real]);
        must_txn(&mut self.whole, whole_ops);
        for part in &self.parts {
            assert_eq!(part.current_rev(), self.whole.current_rev(), "invariant: stores stay at one revision");
        }
    }

    fn is_live(&self, key: &Bytes) -> bool {
        self.whole.get(key, self.whole.current_rev()).expect("get").is_some()
    }

    /// Returns what the whole store answers and what the merged partition answers are.
    fn both(&self, req: &RangeRequest) -> (RangeResponse, RangeResponse) {
        let want = range(&self.whole, req).expect("whole-store range");
        let at = if req.revision > 0 { req.revision } else { self.whole.current_rev() };
        let shard_req = shard_request(req, at);
        let parts = self.parts.iter().map(|s| range(s, &shard_req).expect("shard range")).collect();
        (want, merge_ranges(req, parts))
    }
}

fn must_txn(store: &mut MvccStore<MemBackend>, success: Vec<RequestOp>) {
    let before = store.current_rev();
    apply_txn(store, &mut NoLeases, &TxnRequest { compare: vec![], success, failure: vec![] }).expect("txn");
    store.flush(WriteOpts::default()).expect("flush");
    assert_eq!(store.current_rev(), before + 1, "invariant: every step changes something");
}

fn kv(key: &str, value: &str, create: i64, modified: i64, version: i64) -> KeyValue {
    KeyValue {
        key: b(key),
        value: b(value),
        create_revision: create,
        mod_revision: modified,
        version,
        ..Default::default()
    }
}

fn keys(resp: &RangeResponse) -> Vec<&[u8]> {
    resp.kvs.iter().map(|kv| kv.key.as_ref()).collect()
}

#[test]
fn worked_example_from_the_module_doc() {
    let req = RangeRequest {
        limit: 2,
        sort_order: SortOrder::Descend as i32,
        sort_target: SortTarget::Mod as i32,
        ..Default::default()
    };
    let shard0 = RangeResponse {
        kvs: vec![kv("c", "", 9, 9, 1), kv("a", "", 5, 5, 1)],
        more: true,
        count: 3,
        ..Default::default()
    };
    let shard1 = RangeResponse { kvs: vec![kv("d", "", 7, 7, 1)], more: false, count: 1, ..Default::default() };
    let merged = merge_ranges(&req, vec![shard0, shard1]);
    assert_eq!(keys(&merged), [&b"c"[..], b"d"]);
    assert!(merged.more);
    assert_eq!(merged.count, 4);
}

#[test]
fn ties_break_by_key_and_descend_reverses_them() {
    let parts = || {
        vec![
            RangeResponse { kvs: vec![kv("a", "x", 2, 5, 1), kv("c", "x", 2, 5, 1)], count: 2, ..Default::default() },
            RangeResponse { kvs: vec![kv("b", "x", 2, 5, 1)], count: 1, ..Default::default() },
        ]
    };
    let mut req = RangeRequest { sort_target: SortTarget::Mod as i32, ..Default::default() };
    assert_eq!(keys(&merge_ranges(&req, parts())), [&b"a"[..], b"b", b"c"], "no order names ascending");
    req.sort_order = SortOrder::Descend as i32;
    let mut descending = parts();
    for p in &mut descending {
        p.kvs.reverse();
    }
    assert_eq!(keys(&merge_ranges(&req, descending)), [&b"c"[..], b"b", b"a"]);
}

#[test]
fn keys_only_sorted_by_value_asks_shards_for_values() {
    let req = RangeRequest { keys_only: true, sort_target: SortTarget::Value as i32, ..Default::default() };
    let sent = shard_request(&req, 7);
    assert!(!sent.keys_only);
    assert_eq!(sent.revision, 7);
    let parts = vec![
        RangeResponse { kvs: vec![kv("a", "2", 2, 2, 1)], count: 1, ..Default::default() },
        RangeResponse { kvs: vec![kv("b", "1", 3, 3, 1)], count: 1, ..Default::default() },
    ];
    let merged = merge_ranges(&req, parts);
    assert_eq!(keys(&merged), [&b"b"[..], b"a"]);
    assert!(merged.kvs.iter().all(|kv| kv.value.is_empty()));
    // Other keys_only requests pass through.
    assert!(shard_request(&RangeRequest { keys_only: true, ..Default::default() }, 7).keys_only);
}

#[test]
fn count_only_sums_and_no_parts_is_empty() {
    let req = RangeRequest { count_only: true, ..Default::default() };
    let parts = vec![
        RangeResponse { header: Some(Default::default()), count: 3, ..Default::default() },
        RangeResponse { count: 4, ..Default::default() },
    ];
    let merged = merge_ranges(&req, parts);
    assert_eq!((merged.count, merged.more, merged.kvs.len()), (7, false, 0));
    assert!(merged.header.is_some(), "the first part's header is kept");
    assert_eq!(merge_ranges(&req, vec![]), RangeResponse::default());
}

#[test]
fn more_from_a_shard_survives_an_uncut_merge() {
    // Shard 0 had more than the limit; shard 1 had nothing: nothing to cut, yet more is true.
    let req = RangeRequest { limit: 1, ..Default::default() };
    let parts = vec![
        RangeResponse { kvs: vec![kv("a", "", 2, 2, 1)], more: true, count: 2, ..Default::default() },
        RangeResponse::default(),
    ];
    let merged = merge_ranges(&req, parts);
    assert_eq!((merged.kvs.len(), merged.more, merged.count), (1, true, 2));
}

/// A kube-shaped cluster: pods in ten namespaces and some nodes, on four shards by the shard
/// map, with some pods updated and some deleted.
fn kube_cluster() -> (Cluster, ShardMap) {
    let map = ShardMap::new(4).expect("valid");
    let mut c = Cluster::new(4);
    let write = |c: &mut Cluster, key: String, value: Option<&str>| {
        let shard = map.shard_of(key.as_bytes()) as usize;
        c.must_write(shard, b(&key), value.map(b));
    };
    for i in 0..10 {
        for j in 0..5 {
            write(&mut c, format!("/registry/pods/ns{i}/pod{j}"), Some("{}"));
        }
        write(&mut c, format!("/registry/nodes/node{i}"), Some("{}"));
    }
    write(&mut c, "/registry/pods/ns3/pod1".into(), None);
    write(&mut c, "/registry/pods/ns7/pod4".into(), Some("{\"v\":2}"));
    write(&mut c, "/registry/pods/ns0/pod0".into(), None);
    (c, map)
}

#[test]
fn the_kube_cluster_spreads_pods_over_shards() {
    let (c, _) = kube_cluster();
    let pods = RangeRequest { key: b("/registry/pods/"), range_end: b("/registry/pods0"), ..Default::default() };
    let with_pods = c.parts.iter().filter(|s| range(s, &pods).expect("range").count > 0).count();
    assert!(with_pods > 1, "the paging test needs pods on several shards");
}

/// Pages `[key, end)` the way kube lists: `limit` keys a page, each next page starting at the
/// last key plus `\0`, every page at the first page's revision; pages are routed by the shard
/// map. Writes land between pages, which the pinned revision must hide.
fn must_page(c: &mut Cluster, map: ShardMap, key: &str, end: &str, limit: i64) -> Vec<Bytes> {
    let mut req = RangeRequest { key: b(key), range_end: b(end), limit, ..Default::default() };
    let mut got = Vec::new();
    let mut pages = 0;
    loop {
        let at = if req.revision > 0 { req.revision } else { c.whole.current_rev() };
        let page = match map.shards_of(&req.key, &req.range_end) {
            Shards::One(s) => range(&c.parts[s as usize], &shard_request(&req, at)).expect("range"),
            Shards::All => {
                let sent = shard_request(&req, at);
                merge_ranges(&req, c.parts.iter().map(|s| range(s, &sent).expect("range")).collect())
            }
        };
        let (want, _) = c.both(&RangeRequest { revision: at, ..req.clone() });
        assert_eq!(page.kvs, want.kvs, "page {pages}");
        assert_eq!(page.more, want.more, "page {pages}");
        got.extend(page.kvs.iter().map(|kv| kv.key.clone()));
        pages += 1;
        let Some(last) = page.kvs.last().filter(|_| page.more) else { break };
        req.key = [&last.key[..], b"\0"].concat().into();
        req.revision = at;
        // A write between pages: a new pod in the listed range and an update of a listed one.
        c.must_write(map.shard_of(b"/registry/pods/ns5/late") as usize, b("/registry/pods/ns5/late"), Some(b("{}")));
        c.must_write(map.shard_of(&last.key) as usize, last.key.clone(), Some(b("{\"late\":1}")));
    }
    got
}

#[test]
fn paging_a_multi_shard_range_returns_every_key_once() {
    for limit in [1, 3, 7, 100] {
        let (mut c, map) = kube_cluster();
        let before = c.whole.current_rev();
        let want: Vec<Bytes> = range(
            &c.whole,
            &RangeRequest { key: b("/registry/pods/"), range_end: b("/registry/pods0"), ..Default::default() },
        )
        .expect("range")
        .kvs
        .into_iter()
        .map(|kv| kv.key)
        .collect();
        let got = must_page(&mut c, map, "/registry/pods/", "/registry/pods0", limit);
        assert_eq!(got, want, "limit {limit}");
        assert_eq!(want.len(), 48);
        assert!(limit >= 48 || c.whole.current_rev() > before, "writes landed between pages");
    }
}

#[test]
fn paging_one_namespace_stays_on_one_shard() {
    let (mut c, map) = kube_cluster();
    assert!(matches!(map.shards_of(b"/registry/pods/ns2/", b"/registry/pods/ns20"), Shards::One(_)));
    let got = must_page(&mut c, map, "/registry/pods/ns2/", "/registry/pods/ns20", 2);
    let want: Vec<Bytes> = (0..5).map(|j| b(&format!("/registry/pods/ns2/pod{j}"))).collect();
    assert_eq!(got, want);
}

/// Keys from a small alphabet, so random ranges hold several of them.
fn key() -> impl Strategy<Value = String> {
    "[ab/]{1,4}"
}

/// A random Range: every sort order and target (plus an unknown value of each), limits around
/// the key count (0 and negative mean none), revision filters, keys_only, count_only, and
/// `range_end` empty, `"\0"`, a key (pads included) or past every key.
fn range_request(max_rev: i64) -> impl Strategy<Value = RangeRequest> {
    let rev = move || prop_oneof![2 => Just(0i64), 1 => 1..=max_rev];
    let end = prop_oneof![Just(String::new()), Just("\0".to_string()), key(), "pad/[0-3]", Just("z".to_string()),];
    (
        (prop_oneof![key(), Just("\0".to_string())], end, 0..=3i32, 0..=5i32, -1..=6i64),
        (any::<bool>(), prop::bool::weighted(0.15), rev(), rev(), rev(), rev(), rev()),
    )
        .prop_map(
            |(
                (key, end, sort_order, sort_target, limit),
                (keys_only, count_only, min_mod, max_mod, min_create, max_create, revision),
            )| RangeRequest {
                key: b(&key),
                range_end: b(&end),
                sort_order,
                sort_target,
                limit,
                keys_only,
                count_only,
                min_mod_revision: min_mod,
                max_mod_revision: max_mod,
                min_create_revision: min_create,
                max_create_revision: max_create,
                revision,
                ..Default::default()
            },
        )
}

/// A partition count, distinct keys each with its owning partition, and steps
/// `(key index, value or delete)`.
type History = (usize, Vec<(String, usize)>, Vec<(usize, Option<u8>)>);

/// A random [`History`], its values from a small set so value sorts meet ties.
fn history() -> impl Strategy<Value = History> {
    (1usize..=4).prop_flat_map(|partitions| {
        let keys = proptest::collection::btree_set(key(), 1..10)
            .prop_flat_map(move |keys| {
                let n = keys.len();
                (Just(keys), proptest::collection::vec(0..partitions, n))
            })
            .prop_map(|(keys, owners)| keys.into_iter().zip(owners).collect::<Vec<_>>());
        let steps = proptest::collection::vec((0usize..10, prop::option::weighted(0.8, 0u8..3)), 1..30);
        (Just(partitions), keys, steps)
    })
}

const STEPS_MAX: i64 = 30;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    // The merge of per-partition answers equals the whole store's answer, field by field.
    #[test]
    fn merged_answers_equal_one_store(
        (partitions, keys, steps) in history(),
        requests in proptest::collection::vec(range_request(STEPS_MAX + 1), 12),
    ) {
        let mut c = Cluster::new(partitions);
        for (i, value) in steps {
            let (key, owner) = &keys[i % keys.len()];
            let key = b(key);
            // A delete of a missing key would change nothing and create no revision: put instead.
            let value = match value {
                None if !c.is_live(&key) => Some(b("v0")),
                v => v.map(|v| b(&format!("v{v}"))),
            };
            c.must_write(*owner, key, value);
        }
        let current = c.whole.current_rev();
        for mut req in requests {
            // Revisions past the history would be FutureRev on every store alike.
            req.revision = req.revision.min(current);
            let (want, got) = c.both(&req);
            prop_assert_eq!(&got.kvs, &want.kvs, "kvs of {:?}", req);
            prop_assert_eq!(got.more, want.more, "more of {:?}", req);
            prop_assert_eq!(got.count, want.count, "count of {:?}", req);
            prop_assert_eq!(&got.header, &want.header, "header of {:?}", req);
        }
    }
}
