//! Model-based property test: random sequences of put, delete, txn, range, compact and restart
//! run against the real applier on RocksDB and against a plain model of etcd's MVCC (a full copy
//! of the key space per revision), comparing every response field that etcd defines.

use std::collections::BTreeMap;
use std::time::Instant;

use ballast_engine::apply::kv::{apply_delete, apply_put, apply_txn, range};
use ballast_engine::lease::Lessor;
use ballast_engine::mvcc::MvccStore;
use ballast_engine::storage::rocks::{RocksBackend, RocksOptions};
use ballast_engine::storage::WriteOpts;
use ballast_engine::EngineError;
use ballast_proto::etcdserverpb::{
    compare::{CompareResult, CompareTarget, TargetUnion},
    request_op::Request,
    response_op::Response,
    Compare, DeleteRangeRequest, PutRequest, RangeRequest, RequestOp, TxnRequest,
};
use bytes::Bytes;
use proptest::prelude::*;

const KEYS: [&str; 5] = ["a", "b", "b0", "c", "d"];

#[derive(Clone, Debug)]
enum Op {
    Put {
        key: usize,
        value: u8,
        prev_kv: bool,
    },
    Delete {
        key: usize,
        end: Option<usize>,
        prev_kv: bool,
    },
    /// Compare MOD(key) == the model's current mod revision plus `skew` (0 = should succeed).
    Cas {
        key: usize,
        skew: i64,
        value: u8,
    },
    Get {
        key: usize,
        end: Option<usize>,
        back: i64,
        limit: i64,
    },
    Compact {
        back: i64,
    },
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0..KEYS.len();
    prop_oneof![
        4 => (k.clone(), any::<u8>(), any::<bool>()).prop_map(|(key, value, prev_kv)| Op::Put { key, value, prev_kv }),
        2 => (k.clone(), proptest::option::of(0..KEYS.len()), any::<bool>()).prop_map(|(key, end, prev_kv)| Op::Delete { key, end, prev_kv }),
        2 => (k.clone(), prop_oneof![Just(0i64), -2i64..3], any::<u8>()).prop_map(|(key, skew, value)| Op::Cas { key, skew, value }),
        3 => (k.clone(), proptest::option::of(0..KEYS.len()), 0i64..6, 0i64..3).prop_map(|(key, end, back, limit)| Op::Get { key, end, back, limit }),
        1 => (0i64..6).prop_map(|back| Op::Compact { back }),
        1 => Just(Op::Restart),
    ]
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Kv {
    key: String,
    value: Vec<u8>,
    create: i64,
    modified: i64,
    version: i64,
}

/// etcd's MVCC as a list of whole states: `states[r]` is the key space after revision `r`.
struct Model {
    states: Vec<BTreeMap<String, Kv>>,
    compacted: i64,
}

impl Model {
    fn new() -> Self {
        Self { states: vec![BTreeMap::new(), BTreeMap::new()], compacted: 0 }
    }
    fn cur(&self) -> i64 {
        self.states.len() as i64 - 1
    }
    fn now(&self) -> &BTreeMap<String, Kv> {
        &self.states[self.states.len() - 1]
    }
    fn in_range(key: &str, start: &str, end: Option<&str>) -> bool {
        match end {
            None => key == start,
            Some(e) => key >= start && key < e,
        }
    }
    fn put(&mut self, key: &str, value: &[u8]) -> (i64, Option<Kv>) {
        let rev = self.cur() + 1;
        let mut next = self.now().clone();
        let prev = next.get(key).cloned();
        let kv = Kv {
            key: key.to_string(),
            value: value.to_vec(),
            create: prev.as_ref().map_or(rev, |p| p.create),
            modified: rev,
            version: prev.as_ref().map_or(1, |p| p.version + 1),
        };
        next.insert(key.to_string(), kv);
        self.states.push(next);
        (rev, prev)
    }
}

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn kvs(got: &[ballast_proto::mvccpb::KeyValue]) -> Vec<Kv> {
    got.iter()
        .map(|kv| Kv {
            key: String::from_utf8_lossy(&kv.key).into_owned(),
            value: kv.value.to_vec(),
            create: kv.create_revision,
            modified: kv.mod_revision,
            version: kv.version,
        })
        .collect()
}

struct Real {
    dir: tempfile::TempDir,
    store: Option<(MvccStore<RocksBackend>, Lessor)>,
}

impl Real {
    fn open(dir: tempfile::TempDir) -> Self {
        let backend = RocksBackend::open(dir.path(), &RocksOptions::default()).expect("open rocksdb");
        // A value cache with room for about three of the five keys, so reads mix cached values
        // with RocksDB lookups and admission is refused part of the time.
        let (store, live) = MvccStore::open_with(backend.clone(), 450, Default::default()).expect("open store");
        let lessor = Lessor::restore(&backend, live, 2, Instant::now()).expect("leases");
        Self { dir, store: Some((store, lessor)) }
    }
    fn restart(self) -> Self {
        let Real { dir, store } = self;
        drop(store); // releases the RocksDB lock
        Real::open(dir)
    }
    fn parts(&mut self) -> &mut (MvccStore<RocksBackend>, Lessor) {
        self.store.as_mut().expect("store is open")
    }
    fn flush(&mut self) {
        self.parts().0.flush(WriteOpts { sync: false }).expect("flush");
    }
}

fn check(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut model = Model::new();
    let mut real = Real::open(tempfile::tempdir().expect("tempdir"));
    for op in ops {
        match op {
            Op::Put { key, value, prev_kv } => {
                let (store, leases) = real.parts();
                let resp = apply_put(
                    store,
                    leases,
                    &PutRequest { key: b(KEYS[key]), value: Bytes::from(vec![value]), prev_kv, ..Default::default() },
                )
                .expect("put");
                real.flush();
                let (rev, prev) = model.put(KEYS[key], &[value]);
                prop_assert_eq!(resp.header.map(|h| h.revision), Some(rev));
                prop_assert_eq!(resp.prev_kv.map(|p| kvs(&[p])), if prev_kv { prev.map(|p| vec![p]) } else { None });
            }
            Op::Delete { key, end, prev_kv } => {
                let end_key = end.map(|e| KEYS[e]);
                let (store, leases) = real.parts();
                let req =
                    DeleteRangeRequest { key: b(KEYS[key]), range_end: end_key.map(b).unwrap_or_default(), prev_kv };
                let resp = apply_delete(store, leases, &req).expect("delete");
                real.flush();
                let doomed: Vec<Kv> =
                    model.now().values().filter(|kv| Model::in_range(&kv.key, KEYS[key], end_key)).cloned().collect();
                if !doomed.is_empty() {
                    let mut next = model.now().clone();
                    for kv in &doomed {
                        next.remove(&kv.key);
                    }
                    model.states.push(next);
                }
                prop_assert_eq!(resp.deleted, doomed.len() as i64);
                prop_assert_eq!(resp.header.map(|h| h.revision), Some(model.cur()));
                prop_assert_eq!(kvs(&resp.prev_kvs), if prev_kv { doomed } else { vec![] });
            }
            Op::Cas { key, skew, value } => {
                let k = KEYS[key];
                let current_mod = model.now().get(k).map_or(0, |kv| kv.modified);
                let expect = current_mod + skew;
                let cmp = Compare {
                    key: b(k),
                    target: CompareTarget::Mod as i32,
                    result: CompareResult::Equal as i32,
                    target_union: Some(TargetUnion::ModRevision(expect)),
                    range_end: Bytes::new(),
                };
                let put = RequestOp {
                    request: Some(Request::RequestPut(PutRequest {
                        key: b(k),
                        value: Bytes::from(vec![value]),
                        ..Default::default()
                    })),
                };
                let get = RequestOp {
                    request: Some(Request::RequestRange(RangeRequest { key: b(k), ..Default::default() })),
                };
                let (store, leases) = real.parts();
                let resp = apply_txn(
                    store,
                    leases,
                    &TxnRequest { compare: vec![cmp], success: vec![put], failure: vec![get] },
                )
                .expect("txn");
                real.flush();
                let should = expect == current_mod;
                prop_assert_eq!(resp.succeeded, should);
                if should {
                    model.put(k, &[value]);
                } else {
                    let Some(Response::ResponseRange(r)) = &resp.responses[0].response else {
                        return Err(TestCaseError::fail("failure branch must answer a range"));
                    };
                    prop_assert_eq!(kvs(&r.kvs), model.now().get(k).cloned().into_iter().collect::<Vec<_>>());
                }
                prop_assert_eq!(resp.header.map(|h| h.revision), Some(model.cur()));
            }
            Op::Get { key, end, back, limit } => {
                let end_key = end.map(|e| KEYS[e]);
                let at = if back == 0 { 0 } else { (model.cur() - back).max(1) };
                let (store, _) = real.parts();
                let req = RangeRequest {
                    key: b(KEYS[key]),
                    range_end: end_key.map(b).unwrap_or_default(),
                    revision: at,
                    limit,
                    ..Default::default()
                };
                let got = range(store, &req);
                let read_at = if at == 0 { model.cur() } else { at };
                if read_at < model.compacted {
                    prop_assert!(
                        matches!(got, Err(EngineError::Compacted { .. })),
                        "expected Compacted, got {:?}",
                        got
                    );
                    continue;
                }
                let resp = got.expect("range");
                let all: Vec<Kv> = model.states[read_at as usize]
                    .values()
                    .filter(|kv| Model::in_range(&kv.key, KEYS[key], end_key))
                    .cloned()
                    .collect();
                let shown: Vec<Kv> =
                    if limit > 0 { all.iter().take(limit as usize).cloned().collect() } else { all.clone() };
                prop_assert_eq!(kvs(&resp.kvs), shown);
                prop_assert_eq!(resp.count, all.len() as i64);
                prop_assert_eq!(resp.more, limit > 0 && all.len() > limit as usize);
                prop_assert_eq!(resp.header.map(|h| h.revision), Some(model.cur()));
            }
            Op::Compact { back } => {
                let target = (model.cur() - back).max(1);
                let (store, _) = real.parts();
                let got = store.compact(target);
                real.flush();
                if target <= model.compacted {
                    prop_assert!(
                        matches!(got, Err(EngineError::Compacted { .. })),
                        "expected Compacted, got {:?}",
                        got
                    );
                } else {
                    prop_assert!(got.is_ok(), "compact failed: {:?}", got);
                    model.compacted = target;
                }
            }
            Op::Restart => real = real.restart(),
        }
        prop_assert_eq!(real.parts().0.current_rev(), model.cur());
        prop_assert_eq!(real.parts().0.compact_rev(), model.compacted);
    }
    Ok(())
}

proptest! {
    // 256 cases x up to 60 ops, each with a RocksDB in a temp dir: about 10 s in debug builds.
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn mvcc_matches_model(ops in proptest::collection::vec(op(), 1..60)) {
        check(ops)?;
    }
}
