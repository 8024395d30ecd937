//! KV RPCs through the etcd-client crate: Range options, Put flags, DeleteRange, Txn, Compact,
//! the revision model, response headers and etcd's error codes and texts.

use etcd_client::{
    Compare, CompareOp, DeleteOptions, Error, GetOptions, PutOptions, SortOrder, SortTarget, Txn, TxnOp, TxnOpResponse,
};

use crate::harness::Server;

/// Returns the gRPC code and message of an etcd-client error.
pub(crate) fn status(e: Error) -> (tonic::Code, String) {
    match e {
        Error::GRpcStatus(s) => (s.code(), s.message().to_string()),
        other => panic!("expected a gRPC status, got {other:?}"),
    }
}

all_targets!(
    revision_model,
    range_options,
    put_flags_and_errors,
    delete_range,
    txn_semantics,
    txn_errors,
    compaction,
    oversize_and_empty_key,
    garbage_on_the_wire
);

async fn revision_model(s: Server) {
    let mut c = s.client().await;
    let empty = c.get("nothing", None).await.expect("get");
    let h = empty.header().expect("header");
    assert_eq!(h.revision(), 1, "an empty store is at revision 1");
    assert!(h.cluster_id() != 0 && h.member_id() != 0 && h.raft_term() != 0);
    let r = c.put("a", "1", None).await.expect("put");
    assert_eq!(r.header().expect("header").revision(), 2);
    let t =
        Txn::new().and_then(vec![TxnOp::put("x", "1", None), TxnOp::put("y", "1", None), TxnOp::put("z", "1", None)]);
    assert_eq!(c.txn(t).await.expect("txn").header().expect("header").revision(), 3, "one revision per txn");
    let ro = Txn::new().and_then(vec![TxnOp::get("a", None)]);
    assert_eq!(c.txn(ro).await.expect("txn").header().expect("header").revision(), 3, "read-only txn");
    let d = c.delete("missing", None).await.expect("delete");
    assert_eq!((d.deleted(), d.header().expect("header").revision()), (0, 3), "deleting nothing");
    c.put("a", "2", None).await.expect("put");
    let kv = c.get("a", None).await.expect("get").kvs()[0].clone();
    assert_eq!((kv.create_revision(), kv.mod_revision(), kv.version(), kv.value()), (2, 4, 2, &b"2"[..]));
    // A historical read shows the old value; the header shows the current revision.
    let old = c.get("a", Some(GetOptions::new().with_revision(2))).await.expect("get");
    assert_eq!((old.kvs()[0].value(), old.header().expect("header").revision()), (&b"1"[..], 4));
    let future = c.get("a", Some(GetOptions::new().with_revision(100))).await.expect_err("future");
    assert_eq!(
        status(future),
        (tonic::Code::OutOfRange, "etcdserver: mvcc: required revision is a future revision".into())
    );
}

async fn range_options(s: Server) {
    let mut c = s.client().await;
    for (k, v) in [("p/a", "3"), ("p/b", "1"), ("p/c", "2"), ("q", "0")] {
        c.put(k, v, None).await.expect("put");
    }
    let r = c.get("p/", Some(GetOptions::new().with_prefix().with_limit(2))).await.expect("get");
    assert_eq!((r.kvs().len(), r.more(), r.count()), (2, true, 3), "count ignores the limit");
    let r = c
        .get("p/", Some(GetOptions::new().with_prefix().with_sort(SortTarget::Value, SortOrder::Ascend)))
        .await
        .expect("get");
    let keys: Vec<&[u8]> = r.kvs().iter().map(|kv| kv.key()).collect();
    assert_eq!(keys, vec![&b"p/b"[..], b"p/c", b"p/a"]);
    let r = c
        .get("p/", Some(GetOptions::new().with_prefix().with_sort(SortTarget::Key, SortOrder::Descend)))
        .await
        .expect("get");
    assert_eq!(r.kvs()[0].key(), b"p/c");
    let r = c.get("p/a", Some(GetOptions::new().with_range("p/c"))).await.expect("get");
    assert_eq!(r.kvs().len(), 2, "[key, range_end) is half-open");
    let r = c.get("p/b", Some(GetOptions::new().with_from_key())).await.expect("get");
    assert_eq!(
        r.kvs().iter().map(|kv| kv.key().to_vec()).collect::<Vec<_>>(),
        vec![b"p/b".to_vec(), b"p/c".to_vec(), b"q".to_vec()]
    );
    let r = c.get("", Some(GetOptions::new().with_all_keys())).await.expect("get");
    assert_eq!(r.count(), 4);
    let r = c.get("p/", Some(GetOptions::new().with_prefix().with_keys_only())).await.expect("get");
    assert!(r.kvs().iter().all(|kv| kv.value().is_empty()) && r.kvs().len() == 3);
    let r = c.get("p/", Some(GetOptions::new().with_prefix().with_count_only())).await.expect("get");
    assert_eq!((r.kvs().len(), r.count()), (0, 3));
    let r = c.get("p/", Some(GetOptions::new().with_prefix().with_serializable())).await.expect("get");
    assert_eq!(r.kvs().len(), 3);
    // p/a was written at 2, p/b at 3, p/c at 4.
    let r = c
        .get("p/", Some(GetOptions::new().with_prefix().with_min_mod_revision(3).with_max_mod_revision(3)))
        .await
        .expect("get");
    assert_eq!((r.kvs().len(), r.kvs()[0].key(), r.count()), (1, &b"p/b"[..], 3), "filters do not change count");
    let r = c.get("p/", Some(GetOptions::new().with_prefix().with_min_create_revision(4))).await.expect("get");
    assert_eq!(r.kvs().len(), 1);
}

async fn put_flags_and_errors(s: Server) {
    let mut c = s.client().await;
    let r = c.put("k", "v1", Some(PutOptions::new().with_prev_key())).await.expect("put");
    assert!(r.prev_key().is_none(), "no previous value for a new key");
    let r = c.put("k", "v2", Some(PutOptions::new().with_prev_key())).await.expect("put");
    assert_eq!(r.prev_key().map(|kv| kv.value().to_vec()), Some(b"v1".to_vec()));
    let lease = c.lease_grant(60, None).await.expect("lease").id();
    c.put("k", "v3", Some(PutOptions::new().with_lease(lease))).await.expect("put with lease");
    c.put("k", "", Some(PutOptions::new().with_ignore_value().with_ignore_lease())).await.expect("ignore both");
    let kv = c.get("k", None).await.expect("get").kvs()[0].clone();
    assert_eq!((kv.value(), kv.lease()), (&b"v3"[..], lease), "ignore_value keeps the value");
    c.put("k", "v4", Some(PutOptions::new().with_ignore_lease())).await.expect("ignore lease");
    let kv = c.get("k", None).await.expect("get").kvs()[0].clone();
    assert_eq!((kv.value(), kv.lease()), (&b"v4"[..], lease), "ignore_lease keeps the lease");
    let e = c.put("absent", "", Some(PutOptions::new().with_ignore_value())).await.expect_err("missing key");
    assert_eq!(status(e), (tonic::Code::InvalidArgument, "etcdserver: key not found".into()));
    let e = c.put("k", "x", Some(PutOptions::new().with_ignore_value())).await.expect_err("value with ignore_value");
    assert_eq!(status(e), (tonic::Code::InvalidArgument, "etcdserver: value is provided".into()));
    let e = c
        .put("k", "", Some(PutOptions::new().with_ignore_lease().with_lease(lease)))
        .await
        .expect_err("lease with ignore_lease");
    // A put without ignore_lease drops the lease.
    c.put("k", "", Some(PutOptions::new().with_ignore_value())).await.expect("ignore value");
    assert_eq!(c.get("k", None).await.expect("get").kvs()[0].lease(), 0);
    assert_eq!(status(e), (tonic::Code::InvalidArgument, "etcdserver: lease is provided".into()));
    let e = c.put("k", "x", Some(PutOptions::new().with_lease(12345))).await.expect_err("unknown lease");
    assert_eq!(status(e), (tonic::Code::NotFound, "etcdserver: requested lease not found".into()));
}

async fn delete_range(s: Server) {
    let mut c = s.client().await;
    for k in ["d/1", "d/2", "d/3", "e"] {
        c.put(k, k, None).await.expect("put");
    }
    let r = c.delete("d/", Some(DeleteOptions::new().with_prefix().with_prev_key())).await.expect("delete");
    assert_eq!(
        (r.deleted(), r.prev_kvs().len(), r.header().expect("header").revision()),
        (3, 3, 6),
        "one revision for all"
    );
    assert_eq!(r.prev_kvs()[0].key(), b"d/1");
    let left = c.get("", Some(GetOptions::new().with_all_keys())).await.expect("get");
    assert_eq!(left.kvs().len(), 1);
    // A deleted key comes back at version 1.
    c.put("d/1", "again", None).await.expect("put");
    let kv = c.get("d/1", None).await.expect("get").kvs()[0].clone();
    assert_eq!((kv.version(), kv.create_revision()), (1, 7));
}

async fn txn_semantics(s: Server) {
    let mut c = s.client().await;
    c.put("k", "v", None).await.expect("put");
    // Kubernetes' create: MOD(absent) == 0 holds.
    let t = Txn::new()
        .when(vec![Compare::mod_revision("new", CompareOp::Equal, 0)])
        .and_then(vec![TxnOp::put("new", "1", None)]);
    let r = c.txn(t).await.expect("txn");
    assert!(r.succeeded());
    match &r.op_responses()[0] {
        TxnOpResponse::Put(p) => assert_eq!(p.header().expect("header").revision(), 3),
        other => panic!("unexpected {other:?}"),
    }
    // A value compare on an absent key fails, even against "".
    let t = Txn::new().when(vec![Compare::value("absent", CompareOp::Equal, "")]).or_else(vec![TxnOp::get("k", None)]);
    let r = c.txn(t).await.expect("txn");
    assert!(!r.succeeded());
    match &r.op_responses()[0] {
        TxnOpResponse::Get(g) => assert_eq!(g.kvs()[0].value(), b"v"),
        other => panic!("unexpected {other:?}"),
    }
    // Every compare target and result.
    let cmps = vec![
        Compare::version("k", CompareOp::Equal, 1),
        Compare::create_revision("k", CompareOp::Less, 3),
        Compare::mod_revision("k", CompareOp::Greater, 1),
        Compare::value("k", CompareOp::NotEqual, "w"),
        Compare::lease("k", CompareOp::Equal, 0),
    ];
    assert!(c.txn(Txn::new().when(cmps)).await.expect("txn").succeeded());
    // Optimistic update with a stale revision fails and returns the current object.
    let t = Txn::new()
        .when(vec![Compare::mod_revision("k", CompareOp::Equal, 1)])
        .and_then(vec![TxnOp::put("k", "x", None)])
        .or_else(vec![TxnOp::get("k", None)]);
    assert!(!c.txn(t).await.expect("txn").succeeded());
    // Reads later in a txn see its earlier writes; nested txns work.
    let nested =
        Txn::new().when(vec![Compare::version("k", CompareOp::Equal, 1)]).and_then(vec![TxnOp::put("n", "1", None)]);
    let t = Txn::new().and_then(vec![TxnOp::put("k", "w", None), TxnOp::get("k", None), TxnOp::txn(nested)]);
    let r = c.txn(t).await.expect("txn");
    match &r.op_responses()[1] {
        TxnOpResponse::Get(g) => assert_eq!(g.kvs()[0].value(), b"w"),
        other => panic!("unexpected {other:?}"),
    }
    match &r.op_responses()[2] {
        TxnOpResponse::Txn(t) => assert!(t.succeeded(), "nested compares see the state before the txn"),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(c.get("n", None).await.expect("get").kvs().len(), 1);
    // Range compares: every key in the range must hold.
    let t = Txn::new().when(vec![Compare::version("k", CompareOp::Greater, 0).with_range("o")]);
    assert!(c.txn(t).await.expect("txn").succeeded());
}

async fn txn_errors(s: Server) {
    let mut c = s.client().await;
    let t = Txn::new().and_then(vec![TxnOp::put("a", "1", None), TxnOp::put("a", "2", None)]);
    assert_eq!(
        status(c.txn(t).await.expect_err("dup")),
        (tonic::Code::InvalidArgument, "etcdserver: duplicate key given in txn request".into())
    );
    let t = Txn::new()
        .and_then(vec![TxnOp::put("b", "1", None), TxnOp::delete("a", Some(DeleteOptions::new().with_range("c")))]);
    assert_eq!(status(c.txn(t).await.expect_err("dup")).1, "etcdserver: duplicate key given in txn request");
    let ops: Vec<TxnOp> = (0..129).map(|i| TxnOp::put(format!("k{i}"), "v", None)).collect();
    assert_eq!(
        status(c.txn(Txn::new().and_then(ops)).await.expect_err("too many")),
        (tonic::Code::InvalidArgument, "etcdserver: too many operations in txn request".into())
    );
    let t = Txn::new()
        .and_then(vec![TxnOp::put("x", "1", None), TxnOp::put("y", "1", Some(PutOptions::new().with_lease(999)))]);
    assert_eq!(status(c.txn(t).await.expect_err("lease")).0, tonic::Code::NotFound);
    assert!(c.get("x", None).await.expect("get").kvs().is_empty(), "a failed txn writes nothing");
    assert_eq!(c.get("x", None).await.expect("get").header().expect("header").revision(), 1);
    // A nested txn may use only what its parent leaves of the limit: 128 less the parent's 101.
    let nested = |inner: usize| {
        let mut ops: Vec<TxnOp> = (0..100).map(|i| TxnOp::put(format!("o{i}"), "v", None)).collect();
        let inner: Vec<TxnOp> = (0..inner).map(|i| TxnOp::put(format!("n{i}"), "v", None)).collect();
        ops.push(TxnOp::txn(Txn::new().and_then(inner)));
        Txn::new().and_then(ops)
    };
    assert_eq!(
        status(c.txn(nested(28)).await.expect_err("nested too many")).1,
        "etcdserver: too many operations in txn request"
    );
    c.txn(nested(27)).await.expect("a nested txn within what its parent leaves");
}

async fn compaction(s: Server) {
    let mut c = s.client().await;
    for i in 0..5 {
        c.put("k", format!("{i}"), None).await.expect("put");
    }
    c.compact(4, None).await.expect("compact");
    let e = c.get("k", Some(GetOptions::new().with_revision(3))).await.expect_err("compacted");
    assert_eq!(status(e), (tonic::Code::OutOfRange, "etcdserver: mvcc: required revision has been compacted".into()));
    let at = c.get("k", Some(GetOptions::new().with_revision(4))).await.expect("the compacted revision is readable");
    assert_eq!(at.kvs()[0].value(), b"2");
    assert_eq!(
        status(c.compact(4, None).await.expect_err("again")).1,
        "etcdserver: mvcc: required revision has been compacted"
    );
    assert_eq!(
        status(c.compact(100, None).await.expect_err("future")).1,
        "etcdserver: mvcc: required revision is a future revision"
    );
    assert_eq!(c.get("k", None).await.expect("get").kvs()[0].version(), 5, "versions survive compaction");
}

async fn oversize_and_empty_key(s: Server) {
    let mut c = s.client().await;
    // Between the 1.5 MiB request limit and the gRPC frame limit (limit + 512 KiB), so the
    // server itself answers, as etcd does.
    let big = vec![b'x'; 1_700_000];
    let e = c.put("big", big, None).await.expect_err("too large");
    let (code, msg) = status(e);
    assert_eq!(code, tonic::Code::InvalidArgument, "{msg}");
    assert_eq!(msg, "etcdserver: request is too large");
    assert!(c.get("big", None).await.expect("get").kvs().is_empty());
    let e = c.put("", "v", None).await.expect_err("empty key");
    assert_eq!(status(e), (tonic::Code::InvalidArgument, "etcdserver: key is not provided".into()));
    let e = c.get("", None).await.expect_err("empty key");
    assert_eq!(status(e).1, "etcdserver: key is not provided");
}

async fn garbage_on_the_wire(s: Server) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let junk: [&[u8]; 3] = [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x04\x08\x00\x00\x00\x00\x00garbage-frames",
        &[0xff; 4096],
    ];
    for bytes in junk {
        let mut conn = tokio::net::TcpStream::connect(s.endpoint()).await.expect("connect");
        let _ = conn.write_all(bytes).await;
        let mut buf = [0u8; 256];
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), conn.read(&mut buf)).await;
    }
    let mut c = s.client().await;
    c.put("still", "alive", None).await.expect("the server survives malformed connections");
    assert_eq!(c.get("still", None).await.expect("get").kvs().len(), 1);
}
