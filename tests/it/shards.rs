//! Keys of several shards: kube-shaped keys (`/registry/<resource>/<namespace>/<name>`) spread
//! over the engine's shards. The etcd semantics (one revision order, LISTs across namespaces
//! that are snapshots, paging, a watch over every namespace from a LIST's revision) run against
//! all three targets; what only a sharded member does (refusing cross-shard writes, numbering
//! one stream's watchers across shards, keeping its shard count) runs against
//! `ballast engine --shards 8`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ballast_proto::etcdserverpb::{
    watch_client::WatchClient, watch_request::RequestUnion, WatchCreateRequest, WatchProgressRequest, WatchRequest,
};
use etcd_client::{Compare, CompareOp, GetOptions, Txn, TxnOp};
use tokio::sync::{mpsc, Mutex};
use tokio_stream::wrappers::ReceiverStream;

use crate::harness::{Server, Target};

both_targets!(
    one_client_sees_dense_revisions,
    list_across_namespaces_is_a_snapshot,
    paged_list_across_namespaces,
    watch_across_namespaces_from_a_list,
    history_across_namespaces_comes_in_batches
);

fn pod(ns: usize, name: usize) -> String {
    format!("/registry/pods/ns{ns}/pod-{name}")
}

const PODS: &str = "/registry/pods/";
const PODS_END: &str = "/registry/pods0";

/// Writers putting pods over many namespaces until stopped, recording every acknowledged write
/// as (key, value, revision).
struct Writers {
    writes: Arc<Mutex<Vec<(String, String, i64)>>>,
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Writers {
    /// Starts `n` writers; writer `w`'s `i`-th put goes to namespace `(w * 7 + i) % namespaces`,
    /// name `i % names`, so every writer touches every namespace and keys are rewritten often.
    async fn start(s: &Server, n: usize, namespaces: usize, names: usize) -> Writers {
        let writes: Arc<Mutex<Vec<(String, String, i64)>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for w in 0..n {
            let mut c = s.client().await;
            let (writes, stop) = (writes.clone(), stop.clone());
            tasks.push(tokio::spawn(async move {
                let mut i = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    let (k, v) = (pod((w * 7 + i) % namespaces, i % names), format!("{w}-{i}"));
                    let r = c.put(k.clone(), v.clone(), None).await.expect("put");
                    writes.lock().await.push((k, v, r.header().expect("header").revision()));
                    i += 1;
                }
            }));
        }
        Writers { writes, stop, tasks }
    }

    /// Stops the writers and returns their writes in revision order.
    async fn finish(self) -> Vec<(String, String, i64)> {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            t.await.expect("writer");
        }
        let mut writes = self.writes.lock().await.clone();
        writes.sort_by_key(|w| w.2);
        writes
    }
}

/// A client alone on the member that writes keys of many namespaces sees revisions r, r+1, ...
async fn one_client_sees_dense_revisions(s: Server) {
    let mut c = s.client().await;
    let first = c.put(pod(0, 0), "v", None).await.expect("put").header().expect("header").revision();
    for i in 1..40 {
        let r = c.put(pod(i, 0), "v", None).await.expect("put");
        assert_eq!(r.header().expect("header").revision(), first + i as i64, "revision of write {i}");
    }
    // A delete of nothing and a failed compare take no revision.
    c.delete(pod(99, 0), None).await.expect("delete");
    let txn = Txn::new().when([Compare::version(pod(1, 0), CompareOp::Equal, 5)]).and_then([TxnOp::put(
        pod(1, 0),
        "w",
        None,
    )]);
    assert!(!c.txn(txn).await.expect("txn").succeeded());
    let r = c.put(pod(2, 1), "v", None).await.expect("put");
    assert_eq!(r.header().expect("header").revision(), first + 40);
}

/// A LIST over every namespace, taken while writers change pods in all of them, is the state at
/// its header revision: what replaying the acknowledged writes up to that revision gives.
async fn list_across_namespaces_is_a_snapshot(s: Server) {
    let writers = Writers::start(&s, 8, 24, 5).await;
    let mut c = s.client().await;
    let mut lists = Vec::new();
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(15)).await;
        let r = c.get(PODS, Some(GetOptions::new().with_range(PODS_END))).await.expect("list");
        let rev = r.header().expect("header").revision();
        let got: BTreeMap<String, (String, i64)> = r
            .kvs()
            .iter()
            .map(|kv| {
                let key = kv.key_str().expect("utf-8").to_string();
                (key, (kv.value_str().expect("utf-8").to_string(), kv.mod_revision()))
            })
            .collect();
        assert_eq!(r.count() as usize, got.len());
        lists.push((rev, got));
    }
    let writes = writers.finish().await;
    let mut changed_between = 0;
    for (rev, got) in &lists {
        let mut expected = BTreeMap::new();
        for (k, v, r) in writes.iter().filter(|w| w.2 <= *rev) {
            expected.insert(k.clone(), (v.clone(), *r));
        }
        assert_eq!(got, &expected, "LIST at revision {rev} is not the replayed state");
        changed_between += usize::from(writes.iter().any(|w| w.2 > *rev));
    }
    assert!(changed_between > 0, "the writers were still writing during the LISTs");
}

/// kube's paged LIST: limit 7, later pages at the first page's revision, starting after the
/// last key; every pod comes back once, in key order, while other pods are written.
async fn paged_list_across_namespaces(s: Server) {
    let mut c = s.client().await;
    let mut all = Vec::new();
    for ns in 0..12 {
        for p in 0..5 {
            c.put(pod(ns, p), "v", None).await.expect("put");
            all.push(pod(ns, p));
        }
    }
    all.sort();
    let first = c.get(PODS, Some(GetOptions::new().with_range(PODS_END).with_limit(7))).await.expect("page");
    let rev = first.header().expect("header").revision();
    assert!(first.more());
    assert_eq!(first.count(), 60);
    let mut seen: Vec<String> = first.kvs().iter().map(|kv| kv.key_str().expect("utf-8").to_string()).collect();
    c.put(pod(3, 99), "later", None).await.expect("put");
    loop {
        let mut start = seen.last().expect("a page").clone().into_bytes();
        start.push(0);
        let opts = GetOptions::new().with_range(PODS_END).with_limit(7).with_revision(rev);
        let page = c.get(start, Some(opts)).await.expect("page");
        seen.extend(page.kvs().iter().map(|kv| kv.key_str().expect("utf-8").to_string()));
        if !page.more() {
            break;
        }
    }
    assert_eq!(seen, all, "each pod once, in key order, as of the first page");
}

/// kube's LIST-then-WATCH over every namespace while pods change in all of them: the watch from
/// the LIST's revision + 1 delivers exactly the later writes, in revision order, each once, with
/// the previous value it replaced.
async fn watch_across_namespaces_from_a_list(s: Server) {
    let writers = Writers::start(&s, 6, 16, 3).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut c = s.client().await;
    let list = c.get(PODS, Some(GetOptions::new().with_range(PODS_END))).await.expect("list");
    let from = list.header().expect("header").revision();
    let opts = etcd_client::WatchOptions::new().with_range(PODS_END).with_start_revision(from + 1).with_prev_key();
    let mut stream = c.watch(PODS, Some(opts)).await.expect("watch");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let writes = writers.finish().await;
    let last = writes.last().expect("writes").2;
    let mut seen: Vec<(String, String, i64, Option<String>)> = Vec::new();
    while seen.last().is_none_or(|e| e.2 < last) {
        let r = tokio::time::timeout(Duration::from_secs(10), stream.message())
            .await
            .expect("events within 10 s")
            .expect("stream ok")
            .expect("stream open");
        for e in r.events() {
            let kv = e.kv().expect("kv");
            let prev = e.prev_kv().map(|p| p.value_str().expect("utf-8").to_string());
            seen.push((
                kv.key_str().expect("utf-8").into(),
                kv.value_str().expect("utf-8").into(),
                kv.mod_revision(),
                prev,
            ));
        }
    }
    // Expected: every write after the LIST, with the value each key had before it.
    let mut state: BTreeMap<String, String> = BTreeMap::new();
    let mut expected = Vec::new();
    for (k, v, r) in &writes {
        if *r > from {
            expected.push((k.clone(), v.clone(), *r, state.get(k).cloned()));
        }
        state.insert(k.clone(), v.clone());
    }
    assert!(expected.len() > 20, "too few writes after the LIST to mean anything: {}", expected.len());
    assert_eq!(seen, expected);
}

/// A watch over every namespace from long ago: the history comes in responses of at most 1,000
/// revisions (etcd's watchBatchMaxRevs), each revision whole, in order; with `fragment`, no
/// response is much larger than the request limit, and the fragments add up to the same events. On several shards the history is merged from all of them, and the batches and
/// fragments must still hold.
async fn history_across_namespaces_comes_in_batches(s: Server) {
    const PUTS: usize = 2_400;
    // 6 KiB values, twice per event with prev_kv: any response of more than about 170 events
    // is above the fragment limits, so `fragment` has to split (merged responses included).
    let value = "v".repeat(6 << 10);
    let mut c = s.client().await;
    let first = c.put(pod(0, 0), value.as_str(), None).await.expect("put").header().expect("header").revision();
    let mut tasks = Vec::new();
    for t in 0..8 {
        let mut c = c.clone();
        let value = value.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..PUTS / 8 {
                c.put(pod((t * 7 + i) % 16, i), value.as_str(), None).await.expect("put");
            }
        }));
    }
    for t in tasks {
        t.await.expect("writer");
    }
    let last = c.get("x", None).await.expect("get").header().expect("header").revision();
    assert_eq!(last, first + PUTS as i64, "one revision per put");
    for fragment in [false, true] {
        let mut wc = WatchClient::connect(s.url()).await.expect("connect").max_decoding_message_size(64 << 20);
        let (tx, rx) = mpsc::channel(4);
        let mut req = create(PODS, PODS_END);
        if let Some(RequestUnion::CreateRequest(c)) = &mut req.request_union {
            c.start_revision = first;
            c.fragment = fragment;
        }
        tx.send(req).await.expect("queue create");
        let mut stream = wc.watch(ReceiverStream::new(rx)).await.expect("watch").into_inner();
        let mut revs: Vec<i64> = Vec::new();
        // Events of the response being reassembled from fragments.
        let mut pending = 0usize;
        while revs.last().is_none_or(|r| *r < last) {
            let r = tokio::time::timeout(Duration::from_secs(20), stream.message())
                .await
                .expect("history within 20 s")
                .expect("stream ok")
                .expect("stream open");
            assert!(!r.canceled, "canceled: {}", r.cancel_reason);
            if fragment {
                // etcd splits at its request limit plus gRPC overhead (1.5 MiB + 512 KiB);
                // a fragment may pass it by the one event that reached it.
                let size = prost::Message::encoded_len(&r);
                assert!(size <= 1_572_864 + 524_288 + 8192, "a fragment of {size} bytes");
            }
            pending += r.events.len();
            revs.extend(r.events.iter().map(|e| e.kv.as_ref().expect("kv").mod_revision));
            if !r.fragment {
                let batch: std::collections::BTreeSet<i64> = revs[revs.len() - pending..].iter().copied().collect();
                assert!(batch.len() <= 1000, "a response of {} revisions (fragment: {fragment})", batch.len());
                pending = 0;
            }
        }
        let expected: Vec<i64> = (first..=last).collect();
        assert_eq!(revs, expected, "every revision once, in order (fragment: {fragment})");
        drop(tx);
    }
}

async fn sharded() -> Server {
    Server::start(Target::BallastSharded).await
}

fn two_shards_apart() -> (String, String) {
    let map = ballast_engine::shard_map::ShardMap::new(8).expect("8 shards");
    let a = pod(0, 0);
    let b = (1..100).map(|ns| pod(ns, 0)).find(|k| map.shard_of(k.as_bytes()) != map.shard_of(a.as_bytes()));
    (a, b.expect("100 namespaces are not all on one of 8 shards"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_shard_writes_are_refused_naming_the_shards() {
    let s = sharded().await;
    let mut c = s.client().await;
    let (a, b) = two_shards_apart();
    let txn = Txn::new().and_then([TxnOp::put(a.as_str(), "1", None), TxnOp::put(b.as_str(), "1", None)]);
    let err = c.txn(txn).await.expect_err("a txn over two shards");
    let etcd_client::Error::GRpcStatus(st) = err else { panic!("not a gRPC status: {err:?}") };
    assert_eq!(st.code(), tonic::Code::FailedPrecondition);
    assert!(st.message().contains("spans shards") && st.message().contains("8 shards"), "{}", st.message());
    let err = c.delete(PODS, Some(etcd_client::DeleteOptions::new().with_prefix())).await.expect_err("delete");
    let etcd_client::Error::GRpcStatus(st) = err else { panic!("not a gRPC status: {err:?}") };
    assert_eq!(st.code(), tonic::Code::FailedPrecondition);
    // Nothing was written by either.
    let r = c.get(PODS, Some(GetOptions::new().with_prefix().with_count_only())).await.expect("count");
    assert_eq!(r.count(), 0);
    // A txn within one namespace is served.
    let txn = Txn::new().and_then([TxnOp::put(a.as_str(), "1", None), TxnOp::put(format!("{a}-2"), "1", None)]);
    assert!(c.txn(txn).await.expect("one-shard txn").succeeded());
}

fn create(key: &str, range_end: &str) -> WatchRequest {
    WatchRequest {
        request_union: Some(RequestUnion::CreateRequest(WatchCreateRequest {
            key: key.as_bytes().to_vec().into(),
            range_end: range_end.as_bytes().to_vec().into(),
            prev_kv: true,
            ..Default::default()
        })),
    }
}

/// One stream, watchers on two shards and one over every namespace: automatic IDs are distinct,
/// each gets its events (the namespace-wide one in revision order), and a progress request is
/// answered once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_stream_watches_on_several_shards() {
    let s = sharded().await;
    let mut c = s.client().await;
    let (a, b) = two_shards_apart();
    let mut wc = WatchClient::connect(s.url()).await.expect("connect");
    let (tx, rx) = mpsc::channel(16);
    tx.send(create(&a, "")).await.expect("send");
    let mut stream = wc.watch(ReceiverStream::new(rx)).await.expect("watch").into_inner();
    let next = async |stream: &mut tonic::Streaming<_>| {
        tokio::time::timeout(Duration::from_secs(10), stream.message())
            .await
            .expect("a response within 10 s")
            .expect("stream ok")
            .expect("stream open")
    };
    let first: ballast_proto::etcdserverpb::WatchResponse = next(&mut stream).await;
    assert!(first.created);
    tx.send(create(&b, "")).await.expect("send");
    let second: ballast_proto::etcdserverpb::WatchResponse = next(&mut stream).await;
    assert!(second.created);
    assert_ne!(first.watch_id, second.watch_id, "IDs are per stream, not per shard");
    tx.send(create(PODS, PODS_END)).await.expect("send");
    let all: ballast_proto::etcdserverpb::WatchResponse = next(&mut stream).await;
    assert!(all.created && !all.canceled, "{all:?}");
    assert!(![first.watch_id, second.watch_id].contains(&all.watch_id));

    let ra = c.put(a.as_str(), "1", None).await.expect("put").header().expect("header").revision();
    let rb = c.put(b.as_str(), "2", None).await.expect("put").header().expect("header").revision();
    let mut got = Vec::new();
    while got.len() < 4 {
        let r: ballast_proto::etcdserverpb::WatchResponse = next(&mut stream).await;
        for e in &r.events {
            let kv = e.kv.as_ref().expect("kv");
            got.push((r.watch_id, String::from_utf8(kv.key.to_vec()).expect("utf-8"), kv.mod_revision));
        }
    }
    let mut namespace_wide: Vec<_> = got.iter().filter(|g| g.0 == all.watch_id).cloned().collect();
    assert_eq!(namespace_wide, vec![(all.watch_id, a.clone(), ra), (all.watch_id, b.clone(), rb)], "in revision order");
    got.retain(|g| g.0 != all.watch_id);
    got.sort_by_key(|g| g.2);
    assert_eq!(got, vec![(first.watch_id, a.clone(), ra), (second.watch_id, b.clone(), rb)]);
    namespace_wide.clear();

    tx.send(WatchRequest { request_union: Some(RequestUnion::ProgressRequest(WatchProgressRequest {})) })
        .await
        .expect("send");
    let p: ballast_proto::etcdserverpb::WatchResponse = next(&mut stream).await;
    assert_eq!((p.watch_id, p.events.len(), p.created, p.canceled), (-1, 0, false, false));
    assert_eq!(p.header.as_ref().map(|h| h.revision), Some(rb));
    // Only one progress answer: the next responses are the next event's, one per watcher of it.
    let rc = c.put(a.as_str(), "3", None).await.expect("put").header().expect("header").revision();
    for _ in 0..2 {
        let e: ballast_proto::etcdserverpb::WatchResponse = next(&mut stream).await;
        assert_eq!(e.events.first().and_then(|e| e.kv.as_ref()).map(|kv| kv.mod_revision), Some(rc), "{e:?}");
    }
}

/// The shard count is fixed when the data directory is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopening_with_another_shard_count_fails() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let (port, peer) = (crate::harness::free_port(), crate::harness::free_port());
    let run = |shards: &str| {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ballast"))
            .args(["engine", "--name", "t"])
            .arg(format!("--data-dir={}", data.display()))
            .arg(format!("--listen-client-urls=http://127.0.0.1:{port}"))
            // Not the default peer port, which another process on the machine may hold.
            .arg(format!("--listen-peer-urls=http://127.0.0.1:{peer}"))
            .arg(format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer}"))
            .arg(format!("--shards={shards}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn");
        // A start that succeeds keeps running: stop it after a second.
        std::thread::sleep(Duration::from_secs(1));
        let running = child.try_wait().expect("wait").is_none();
        if running {
            let _ = child.kill();
        }
        let out = child.wait_with_output().expect("output");
        (running, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (running, log) = run("4");
    assert!(running, "the first start creates the directory with 4 shards: {log}");
    let (running, log) = run("2");
    assert!(!running, "opening a 4-shard directory with --shards 2 must fail");
    assert!(log.contains("--shards 4") && log.contains("--shards 2"), "{log}");
}
