//! KV scenarios: puts, single-key gets, list pages, and the Kubernetes update shape (txn CAS).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ballast_proto::etcdserverpb::{
    compare::{CompareResult, CompareTarget, TargetUnion},
    request_op::Request,
    response_op::Response,
    Compare, PutRequest, PutResponse, RangeRequest, RangeResponse, RequestOp, TxnRequest, TxnResponse,
};
use bytes::Bytes;

use super::{closed_loop, open_loop, Rng};
use crate::grpc::{self, Unary};
use crate::stats::Outcome;

const VALUE_LEN: usize = 256;

/// The value every put writes, shared rather than built per request: the client's cost per
/// request is part of what limits throughput on a machine it shares with the server.
static VALUE: [u8; VALUE_LEN] = [b'v'; VALUE_LEN];

fn value() -> Bytes {
    Bytes::from_static(&VALUE)
}

fn key(prefix: &str, i: u64) -> Bytes {
    Bytes::from(format!("{prefix}{i:08}"))
}

/// Worker `w`'s connection (round robin).
fn on(conns: &[Unary], w: usize) -> &Unary {
    &conns[w % conns.len()]
}

fn prefix_end(prefix: &str) -> Bytes {
    let mut end = prefix.as_bytes().to_vec();
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    Bytes::from(end)
}

/// Writes `n` keys `prefix00000000..` with 256-byte values in txns of 128 puts, 16 in flight.
/// Returns each key's mod revision.
async fn preload(url: &str, prefix: &str, n: u64) -> anyhow::Result<Vec<i64>> {
    let prefix = prefix.to_string();
    preload_keys(url, n, move |k| key(&prefix, k)).await
}

/// Writes keys `key_of(0..n)` in txns of 128 consecutive keys, 16 at a time; returns each key's
/// revision. On a sharded engine each run of 128 must fall in one shard.
async fn preload_keys(
    url: &str,
    n: u64,
    key_of: impl Fn(u64) -> Bytes + Clone + Send + 'static,
) -> anyhow::Result<Vec<i64>> {
    let conns = grpc::connections(url, 4).await?;
    let revs = Arc::new(Mutex::new(vec![0i64; n as usize]));
    let batches: Vec<u64> = (0..n).step_by(128).collect();
    for group in batches.chunks(16) {
        let mut tasks = Vec::new();
        for (i, &start) in group.iter().enumerate() {
            let kv = conns[i % conns.len()].clone();
            let key_of = key_of.clone();
            let revs = revs.clone();
            tasks.push(tokio::spawn(async move {
                let end = (start + 128).min(n);
                let success = (start..end)
                    .map(|k| RequestOp {
                        request: Some(Request::RequestPut(PutRequest {
                            key: key_of(k),
                            value: value(),
                            ..Default::default()
                        })),
                    })
                    .collect();
                let txn = TxnRequest { compare: vec![], success, failure: vec![] };
                let resp: TxnResponse = kv.call(grpc::TXN, &txn).await?;
                let rev = resp.header.map_or(0, |h| h.revision);
                let mut r = revs.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
                for k in start..end {
                    r[k as usize] = rev;
                }
                anyhow::Ok(())
            }));
        }
        for t in tasks {
            t.await??;
        }
    }
    let out = revs.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.clone();
    Ok(out)
}

pub(crate) async fn put(url: &str, inflight: usize, duration: Duration, seed: u64) -> anyhow::Result<Outcome> {
    put_keys(url, inflight, duration, seed, |k| key("put/", k)).await
}

/// Puts to pods of 64 namespaces (`/registry/pods/ns<k % 64>/<k>`): on a sharded engine the
/// writes spread over its shards, as Kubernetes' writes do.
pub(crate) async fn put_namespaced(
    url: &str,
    inflight: usize,
    duration: Duration,
    seed: u64,
) -> anyhow::Result<Outcome> {
    put_keys(url, inflight, duration, seed, |k| pod_key(k % 64, k)).await
}

/// Puts at `rate` a second from independent writers (`open_loop`) over 16 connections: what a
/// put costs in latency when nobody waits for anybody, the load a server's batching sees
/// from many clients.
pub(crate) async fn put_at_rate(url: &str, rate: u32, duration: Duration, seed: u64) -> anyhow::Result<Outcome> {
    let conns = Arc::new(grpc::connections(url, 16).await?);
    Ok(open_loop(rate, duration, seed, move |i, mut rng: Rng| {
        let conns = conns.clone();
        async move {
            let req = PutRequest { key: key("put/", rng.below(100_000)), value: value(), ..Default::default() };
            let ok = on(&conns, i).call::<_, PutResponse>(grpc::PUT, &req).await.is_ok();
            (rng, ok)
        }
    })
    .await)
}

async fn put_keys(
    url: &str,
    inflight: usize,
    duration: Duration,
    seed: u64,
    key_of: fn(u64) -> Bytes,
) -> anyhow::Result<Outcome> {
    let conns = Arc::new(grpc::connections(url, inflight.min(16)).await?);
    Ok(closed_loop(inflight, duration, seed, move |w, mut rng: Rng| {
        let conns = conns.clone();
        async move {
            let req = PutRequest { key: key_of(rng.below(100_000)), value: value(), ..Default::default() };
            let ok = on(&conns, w).call::<_, PutResponse>(grpc::PUT, &req).await.is_ok();
            (rng, ok)
        }
    })
    .await)
}

pub(crate) async fn get(
    url: &str,
    inflight: usize,
    serializable: bool,
    duration: Duration,
    seed: u64,
) -> anyhow::Result<Outcome> {
    preload(url, "get/", 1000).await?;
    let conns = Arc::new(grpc::connections(url, inflight.min(16)).await?);
    Ok(closed_loop(inflight, duration, seed, move |w, mut rng: Rng| {
        let conns = conns.clone();
        async move {
            let req = RangeRequest { key: key("get/", rng.below(1000)), serializable, ..Default::default() };
            let resp = on(&conns, w).call::<_, RangeResponse>(grpc::RANGE, &req).await;
            let ok = matches!(resp, Ok(r) if r.kvs.len() == 1);
            (rng, ok)
        }
    })
    .await)
}

/// Kubernetes' paged LIST: 500 keys from a 100k-key prefix, with the count etcd computes.
pub(crate) async fn list_page(url: &str, duration: Duration, seed: u64) -> anyhow::Result<Outcome> {
    preload(url, "list/", 100_000).await?;
    let conns = Arc::new(grpc::connections(url, 1).await?);
    Ok(closed_loop(1, duration, seed, move |w, mut rng: Rng| {
        let conns = conns.clone();
        async move {
            let req = RangeRequest {
                key: key("list/", rng.below(99_500)),
                range_end: prefix_end("list/"),
                limit: 500,
                ..Default::default()
            };
            let resp = on(&conns, w).call::<_, RangeResponse>(grpc::RANGE, &req).await;
            let ok = matches!(resp, Ok(r) if r.kvs.len() == 500);
            (rng, ok)
        }
    })
    .await)
}

/// Pods of one namespace per 1,536 keys (a multiple of the preload's 128, so each preload txn
/// stays in one namespace, hence one shard).
fn namespaced_pod(k: u64) -> Bytes {
    pod_key(k / 1536, k)
}

/// Pod `k`'s key in namespace `ns<ns>`, as kube-apiserver stores pods.
fn pod_key(ns: u64, k: u64) -> Bytes {
    Bytes::from(format!("/registry/pods/ns{ns}/pod-{k:08}"))
}

/// Kubernetes' paged LIST across namespaces: 500 pods from a random start among 100k pods of 66
/// namespaces, with the count. On a sharded engine the page is read from every shard at one
/// revision and merged.
pub(crate) async fn list_page_namespaced(url: &str, duration: Duration, seed: u64) -> anyhow::Result<Outcome> {
    preload_keys(url, 100_000, namespaced_pod).await?;
    let conns = Arc::new(grpc::connections(url, 1).await?);
    Ok(closed_loop(1, duration, seed, move |w, mut rng: Rng| {
        let conns = conns.clone();
        async move {
            let req = RangeRequest {
                key: namespaced_pod(rng.below(100_000)),
                range_end: prefix_end("/registry/pods/"),
                limit: 500,
                ..Default::default()
            };
            // A start near the end of the key order has fewer than 500 after it.
            let resp = on(&conns, w).call::<_, RangeResponse>(grpc::RANGE, &req).await;
            let ok = matches!(resp, Ok(r) if r.kvs.len() == 500 || !r.more);
            (rng, ok)
        }
    })
    .await)
}

/// The Kubernetes update: compare MOD(key) == known revision, put on success, read on failure.
pub(crate) async fn txn_cas(url: &str, inflight: usize, duration: Duration, seed: u64) -> anyhow::Result<Outcome> {
    txn_cas_keys(url, inflight, duration, seed, |k| key("cas/", k)).await
}

/// The same update on 1,000 pods of 8 namespaces (128 each, so each preload txn stays in one
/// namespace): on a sharded engine the updates spread over the shards those namespaces map to.
pub(crate) async fn txn_cas_namespaced(
    url: &str,
    inflight: usize,
    duration: Duration,
    seed: u64,
) -> anyhow::Result<Outcome> {
    txn_cas_keys(url, inflight, duration, seed, |k| pod_key(k / 128, k)).await
}

async fn txn_cas_keys(
    url: &str,
    inflight: usize,
    duration: Duration,
    seed: u64,
    key_of: fn(u64) -> Bytes,
) -> anyhow::Result<Outcome> {
    let revs = Arc::new(Mutex::new(preload_keys(url, 1000, key_of).await?));
    let conflicts = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let conns = Arc::new(grpc::connections(url, inflight.min(16)).await?);
    let counter = conflicts.clone();
    let mut out = closed_loop(inflight, duration, seed, move |w, mut rng: Rng| {
        let conns = conns.clone();
        let revs = revs.clone();
        let conflicts = counter.clone();
        async move {
            let k = rng.below(1000);
            let known = revs.lock().map(|r| r[k as usize]).unwrap_or(0);
            let cmp = Compare {
                key: key_of(k),
                target: CompareTarget::Mod as i32,
                result: CompareResult::Equal as i32,
                target_union: Some(TargetUnion::ModRevision(known)),
                range_end: Bytes::new(),
            };
            let put = RequestOp {
                request: Some(Request::RequestPut(PutRequest { key: key_of(k), value: value(), ..Default::default() })),
            };
            let get = RequestOp {
                request: Some(Request::RequestRange(RangeRequest { key: key_of(k), ..Default::default() })),
            };
            let txn = TxnRequest { compare: vec![cmp], success: vec![put], failure: vec![get] };
            let ok = match on(&conns, w).call::<_, TxnResponse>(grpc::TXN, &txn).await {
                Ok(resp) => {
                    let new_rev = if resp.succeeded {
                        resp.header.map_or(0, |h| h.revision)
                    } else {
                        conflicts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        match resp.responses.first().and_then(|r| r.response.as_ref()) {
                            Some(Response::ResponseRange(r)) => r.kvs.first().map_or(0, |kv| kv.mod_revision),
                            _ => 0,
                        }
                    };
                    if let Ok(mut r) = revs.lock() {
                        r[k as usize] = r[k as usize].max(new_rev);
                    }
                    resp.succeeded
                }
                Err(_) => false,
            };
            (rng, ok)
        }
    })
    .await;
    // Conflicts are counted as errors by the loop; report them separately.
    let c = conflicts.load(std::sync::atomic::Ordering::Relaxed);
    out.errors = out.errors.saturating_sub(c);
    out.extra.push(("conflicts", c as f64));
    Ok(out)
}
