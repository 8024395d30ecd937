//! Applier tests on the in-memory backend: the revision model and txn semantics, each checked
//! against what etcd 3.4 answers.

use ballast_proto::etcdserverpb::{
    compare::{CompareResult, CompareTarget, TargetUnion},
    request_op::Request,
    response_op::Response,
    Compare, DeleteRangeRequest, PutRequest, RangeRequest, RequestOp, TxnRequest,
};
use bytes::Bytes;

use super::*;
use crate::error::EngineError;
use crate::lease::Lessor;
use crate::mvcc::MvccStore;
use crate::storage::{MemBackend, WriteOpts};

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

struct Fixture {
    store: MvccStore<MemBackend>,
    leases: Lessor,
}

impl Fixture {
    fn new() -> Self {
        let backend = MemBackend::new();
        let (store, live) = MvccStore::open(backend.clone()).expect("open");
        let leases = Lessor::restore(&backend, live, 2, std::time::Instant::now()).expect("leases");
        Self { store, leases }
    }

    fn put(&mut self, k: &str, v: &str) -> i64 {
        let r = PutRequest { key: b(k), value: b(v), ..Default::default() };
        let resp = apply_put(&mut self.store, &mut self.leases, &r).expect("put");
        self.store.flush(WriteOpts::default()).expect("flush");
        resp.header.map(|h| h.revision).unwrap_or_default()
    }

    fn get(&self, k: &str, end: &str) -> RangeResponse {
        range(&self.store, &RangeRequest { key: b(k), range_end: b(end), ..Default::default() }).expect("range")
    }

    fn txn(&mut self, t: TxnRequest) -> Result<TxnResponse> {
        let r = apply_txn(&mut self.store, &mut self.leases, &{ t });
        self.store.flush(WriteOpts::default()).expect("flush");
        r
    }
}

fn put_op(k: &str, v: &str) -> RequestOp {
    RequestOp { request: Some(Request::RequestPut(PutRequest { key: b(k), value: b(v), ..Default::default() })) }
}

fn get_op(k: &str) -> RequestOp {
    RequestOp { request: Some(Request::RequestRange(RangeRequest { key: b(k), ..Default::default() })) }
}

fn cmp(k: &str, target: CompareTarget, result: CompareResult, u: TargetUnion) -> Compare {
    Compare { key: b(k), target: target as i32, result: result as i32, target_union: Some(u), range_end: Bytes::new() }
}

#[test]
fn revision_model() {
    let mut f = Fixture::new();
    assert_eq!(f.get("a", "").header.map(|h| h.revision), Some(1), "an empty store is at revision 1");
    assert_eq!(f.put("a", "1"), 2);
    assert_eq!(f.put("a", "2"), 3);
    let kv = f.get("a", "").kvs.remove(0);
    assert_eq!((kv.create_revision, kv.mod_revision, kv.version), (2, 3, 2));
    // A txn writing three keys creates one revision.
    let t = TxnRequest {
        compare: vec![],
        success: vec![put_op("x", "1"), put_op("y", "1"), put_op("z", "1")],
        failure: vec![],
    };
    assert_eq!(f.txn(t).expect("txn").header.map(|h| h.revision), Some(4));
    // Deleting nothing and read-only txns create none.
    let d = apply_delete(&mut f.store, &mut f.leases, &DeleteRangeRequest { key: b("nope"), ..Default::default() })
        .expect("del");
    assert_eq!((d.deleted, d.header.map(|h| h.revision)), (0, Some(4)));
    let ro = TxnRequest { compare: vec![], success: vec![get_op("a")], failure: vec![] };
    assert_eq!(f.txn(ro).expect("txn").header.map(|h| h.revision), Some(4));
    // A deleted key restarts at version 1 with a new create revision.
    apply_delete(&mut f.store, &mut f.leases, &DeleteRangeRequest { key: b("a"), ..Default::default() }).expect("del");
    f.store.flush(WriteOpts::default()).expect("flush");
    assert_eq!(f.put("a", "3"), 6);
    let kv = f.get("a", "").kvs.remove(0);
    assert_eq!((kv.create_revision, kv.version), (6, 1));
    // Historical reads see the old value, header shows the current revision.
    let old = range(&f.store, &RangeRequest { key: b("a"), revision: 3, ..Default::default() }).expect("range");
    assert_eq!((old.kvs[0].value.as_ref(), old.header.map(|h| h.revision)), (&b"2"[..], Some(6)));
    assert!(range(&f.store, &RangeRequest { key: b("a"), revision: 5, ..Default::default() })
        .expect("range")
        .kvs
        .is_empty());
    assert!(matches!(
        range(&f.store, &RangeRequest { key: b("a"), revision: 7, ..Default::default() }),
        Err(EngineError::FutureRev)
    ));
}

#[test]
fn range_options() {
    let mut f = Fixture::new();
    for (k, v) in [("a", "3"), ("b", "1"), ("c", "2")] {
        f.put(k, v);
    }
    let r = range(&f.store, &RangeRequest { key: b("a"), range_end: b("\0"), limit: 2, ..Default::default() })
        .expect("range");
    assert_eq!((r.kvs.len(), r.more, r.count), (2, true, 3), "count ignores the limit");
    let r = range(&f.store, &RangeRequest { key: b("a"), range_end: b("d"), sort_target: 4, ..Default::default() })
        .expect("range");
    let keys: Vec<_> = r.kvs.iter().map(|kv| kv.key.clone()).collect();
    assert_eq!(keys, vec![b("b"), b("c"), b("a")], "a non-key target without order sorts ascending");
    let r = range(&f.store, &RangeRequest { key: b("a"), range_end: b("d"), sort_order: 2, ..Default::default() })
        .expect("range");
    assert_eq!(r.kvs[0].key, b("c"));
    let r = range(&f.store, &RangeRequest { key: b("a"), range_end: b("d"), count_only: true, ..Default::default() })
        .expect("range");
    assert_eq!((r.kvs.len(), r.count), (0, 3));
    let r = range(
        &f.store,
        &RangeRequest { key: b("a"), range_end: b("d"), keys_only: true, min_mod_revision: 3, ..Default::default() },
    )
    .expect("range");
    assert_eq!(
        r.kvs.iter().map(|kv| (kv.key.clone(), kv.value.len())).collect::<Vec<_>>(),
        vec![(b("b"), 0), (b("c"), 0)]
    );
    assert_eq!(r.count, 3, "count is not affected by revision filters");
}

#[test]
fn txn_compares_and_branches() {
    let mut f = Fixture::new();
    f.put("k", "v");
    // Kubernetes create: MOD(absent) == 0 holds; VALUE compare on an absent key fails.
    let create = TxnRequest {
        compare: vec![cmp("new", CompareTarget::Mod, CompareResult::Equal, TargetUnion::ModRevision(0))],
        success: vec![put_op("new", "1")],
        failure: vec![],
    };
    let r = f.txn(create).expect("txn");
    assert!(r.succeeded);
    let Some(Response::ResponsePut(p)) = &r.responses[0].response else { panic!("put response expected") };
    assert_eq!(p.header.map(|h| h.revision), Some(3), "the put's header carries the new revision");
    let val = TxnRequest {
        compare: vec![cmp("absent", CompareTarget::Value, CompareResult::Equal, TargetUnion::Value(Bytes::new()))],
        success: vec![],
        failure: vec![get_op("k")],
    };
    let r = f.txn(val).expect("txn");
    assert!(!r.succeeded);
    let Some(Response::ResponseRange(g)) = &r.responses[0].response else { panic!("range response expected") };
    assert_eq!(g.kvs[0].value, b("v"));
    // Reads later in a txn see earlier writes of the same txn.
    let rw = TxnRequest { compare: vec![], success: vec![put_op("k", "w"), get_op("k")], failure: vec![] };
    let r = f.txn(rw).expect("txn");
    let Some(Response::ResponseRange(g)) = &r.responses[1].response else { panic!("range response expected") };
    assert_eq!((g.kvs[0].value.as_ref(), g.kvs[0].mod_revision), (&b"w"[..], 4));
    // Nested txn branches are decided against the state before the outer txn.
    let nested = TxnRequest {
        compare: vec![cmp("k", CompareTarget::Version, CompareResult::Equal, TargetUnion::Version(2))],
        success: vec![put_op("k", "x")],
        failure: vec![],
    };
    let outer = TxnRequest {
        compare: vec![],
        success: vec![put_op("other", "1"), RequestOp { request: Some(Request::RequestTxn(nested)) }],
        failure: vec![],
    };
    let r = f.txn(outer).expect("txn");
    let Some(Response::ResponseTxn(n)) = &r.responses[1].response else { panic!("txn response expected") };
    assert!(n.succeeded);
    assert_eq!(f.get("k", "").kvs[0].value, b("x"));
}

#[test]
fn failed_checks_write_nothing() {
    let mut f = Fixture::new();
    let before = f.store.current_rev();
    let with_lease = PutRequest { key: b("k"), value: b("v"), lease: 42, ..Default::default() };
    let t = TxnRequest {
        compare: vec![],
        success: vec![put_op("a", "1"), RequestOp { request: Some(Request::RequestPut(with_lease)) }],
        failure: vec![],
    };
    assert!(matches!(f.txn(t), Err(EngineError::LeaseNotFound)));
    assert_eq!(f.store.current_rev(), before);
    assert!(f.get("a", "").kvs.is_empty(), "no partial write");
    let ignore = PutRequest { key: b("missing"), ignore_value: true, ..Default::default() };
    assert!(matches!(apply_put(&mut f.store, &mut f.leases, &ignore), Err(EngineError::KeyNotFound)));
}
