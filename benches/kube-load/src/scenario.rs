//! The scenarios. Latency is measured per request at the client; throughput is completed
//! requests per second of the timed part (preloading is not timed).
//!
//! * `get_c16`: GET of one of 1,000 configmaps, 16 in flight over 4 connections.
//! * `create_c16`: POST of new configmaps, 16 in flight over 4 connections.
//! * `apply_deploy_c16`: server-side apply (`application/apply-patch+yaml`, JSON body) of a
//!   typical Deployment (two containers with ports, env, resources, probes) to one of 100
//!   deployments, each apply a new image tag, 16 in flight over 4 connections: with
//!   `--server-pid`, the server CPU per apply.
//! * `update_c16`: PUT of one of 1,000 configmaps with a changed value, 16 in flight over 4
//!   connections (a managedFields entry is recorded on every write).
//! * `list_pods10k_c1`: LIST of 10,000 pods in one namespace without a limit, one at a time;
//!   also the frontend's resident memory sampled every 2 ms (peak minus the level before).
//! * `cr_*`, `list_cm1k_c4`: custom resources against ConfigMaps, see [`crate::custom`].
//! * `watch_w{W}_r{R}`: W watches on one namespace's pods (100 HTTP/2 streams per connection,
//!   under the server's 200), while a writer creates R pods per second, each stamped with its
//!   send time; delivery latency is receipt minus stamp (one clock, this process).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use rand::Rng;
use serde_json::{json, Value};

use crate::client::{Conn, Target};
use crate::custom;
use crate::stats::{status_kb, CpuMark, Outcome, Samples};

/// Every scenario id, in run order.
pub(crate) const ALL: &[&str] = &[
    "get_c16",
    "create_c16",
    "update_c16",
    "apply_deploy_c16",
    "list_pods10k_c1",
    "cr_get_c16",
    "cr_create_c16",
    "list_cm1k_c4",
    "cr_list1k_c4",
    "cr_list10k_c1",
    "cr_create_large_c4",
    "cr_create_large_noschema_c4",
    "watch_w1000_r100",
    "watch_w10000_r10",
    "watch_w10000_r100",
];

const STAMP: &str = "bench.ballast/sent-ns";

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// Runs scenario `id`.
pub(crate) async fn run(t: &Target, id: &str, duration: Duration, pid: Option<u32>) -> anyhow::Result<Outcome> {
    let cpu = CpuMark::now(pid);
    let mut out = match id {
        "get_c16" => get(t, 16, duration).await?,
        "create_c16" => create(t, 16, duration).await?,
        "update_c16" => update(t, 16, duration).await?,
        "apply_deploy_c16" => apply_deployments(t, 16, duration).await?,
        "list_pods10k_c1" => list(t, 10_000, duration, pid).await?,
        "cr_get_c16" => custom::get(t, 16, duration).await?,
        "cr_create_c16" => custom::create(t, 16, duration).await?,
        "list_cm1k_c4" => custom::list_configmaps(t, duration).await?,
        "cr_list1k_c4" => custom::list(t, 1000, 256, 4, duration, None).await?,
        "cr_list10k_c1" => custom::list(t, 10_000, 1300, 1, duration, pid).await?,
        "cr_create_large_c4" => custom::create_large(t, true, 4, duration).await?,
        "cr_create_large_noschema_c4" => custom::create_large(t, false, 4, duration).await?,
        _ => match parse_watch(id) {
            Some((w, r)) => watch(t, w, r, duration, pid).await?,
            None => bail!("unknown scenario {id}"),
        },
    };
    out.scenario = id.to_string();
    // Over the whole scenario, preloading included (the first repeat of a scenario that preloads
    // shows it).
    out.cpu = cpu.since();
    Ok(out)
}

fn parse_watch(id: &str) -> Option<(usize, u64)> {
    let rest = id.strip_prefix("watch_w")?;
    let (w, r) = rest.split_once("_r")?;
    Some((w.parse().ok()?, r.parse().ok()?))
}

pub(crate) async fn ensure_namespace(c: &Conn, name: &str) -> anyhow::Result<()> {
    let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    let a = c.call("POST", "/api/v1/namespaces", Bytes::from(body.to_string())).await?;
    if a.status != 201 && a.status != 409 {
        bail!("creating namespace {name}: {} {}", a.status, String::from_utf8_lossy(&a.body));
    }
    Ok(())
}

pub(crate) fn configmap(name: &str) -> Bytes {
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"app": "bench"}},
        "data": {"key": "v".repeat(256)}});
    Bytes::from(body.to_string())
}

/// A pod of a typical size (about 1.5 KiB stored, with the server's defaults).
fn pod(name: &str, stamp: Option<u64>) -> Bytes {
    let mut meta = json!({"name": name, "labels": {"app": "bench", "tier": "web", "pod-template-hash": "5d4f8c7b9"}});
    if let Some(ns) = stamp {
        meta["annotations"] = json!({STAMP: ns.to_string()});
    }
    let body = json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
        "spec": {"containers": [{"name": "web", "image": "registry.k8s.io/nginx:1.27",
            "ports": [{"containerPort": 80, "protocol": "TCP"}],
            "env": [{"name": "MODE", "value": "bench"}, {"name": "REPLICA", "value": name}],
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}}}],
            "nodeName": "node-1"}});
    Bytes::from(body.to_string())
}

/// Creates `bodies` (path, body) with `inflight` requests at a time; 409 counts as present.
pub(crate) async fn preload(conns: &[Conn], bodies: Vec<(String, Bytes)>, inflight: usize) -> anyhow::Result<()> {
    use futures::StreamExt;
    let mut sends = futures::stream::iter(bodies.into_iter().enumerate().map(|(i, (path, body))| {
        let c = conns[i % conns.len()].clone();
        async move { c.call("POST", &path, body).await }
    }))
    .buffer_unordered(inflight);
    while let Some(a) = sends.next().await {
        let a = a?;
        if a.status != 201 && a.status != 409 {
            bail!("preload: {} {}", a.status, String::from_utf8_lossy(&a.body));
        }
    }
    Ok(())
}

/// Runs `workers` loops of `op` for `duration`; returns the outcome.
pub(crate) async fn closed_loop<F, Fut>(conns: &[Conn], workers: usize, duration: Duration, op: F) -> Outcome
where
    F: Fn(Conn, usize, u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Option<Duration>> + Send,
{
    let start = Instant::now();
    let deadline = start + duration;
    let mut tasks = Vec::new();
    for w in 0..workers {
        let (c, op) = (conns[w % conns.len()].clone(), op.clone());
        tasks.push(tokio::spawn(async move {
            let (mut samples, mut ok, mut errors, mut seq) = (Samples::default(), 0u64, 0u64, 0u64);
            while Instant::now() < deadline {
                match op(c.clone(), w, seq).await {
                    Some(latency) => {
                        ok += 1;
                        samples.push(latency);
                    }
                    None => errors += 1,
                }
                seq += 1;
            }
            (samples, ok, errors)
        }));
    }
    let mut out = Outcome::default();
    for t in tasks {
        if let Ok((samples, ok, errors)) = t.await {
            out.latency.extend(samples);
            out.ops += ok;
            out.errors += errors;
        }
    }
    out.secs = start.elapsed().as_secs_f64();
    out
}

async fn get(t: &Target, workers: usize, duration: Duration) -> anyhow::Result<Outcome> {
    let conns = t.connect_many(4).await?;
    let objects = 1000;
    let bodies = (0..objects)
        .map(|i| ("/api/v1/namespaces/default/configmaps".to_string(), configmap(&format!("get-{i}"))))
        .collect();
    preload(&conns, bodies, 32).await?;
    Ok(closed_loop(&conns, workers, duration, move |c, _, _| async move {
        let i = rand::thread_rng().gen_range(0..objects);
        let t0 = Instant::now();
        let a = c.call("GET", &format!("/api/v1/namespaces/default/configmaps/get-{i}"), Bytes::new()).await;
        a.is_ok_and(|a| a.status == 200).then(|| t0.elapsed())
    })
    .await)
}

async fn create(t: &Target, workers: usize, duration: Duration) -> anyhow::Result<Outcome> {
    let conns = t.connect_many(4).await?;
    let run: u32 = rand::thread_rng().gen();
    Ok(closed_loop(&conns, workers, duration, move |c, w, seq| async move {
        let body = configmap(&format!("create-{run:08x}-{w}-{seq}"));
        let t0 = Instant::now();
        let a = c.call("POST", "/api/v1/namespaces/default/configmaps", body).await;
        a.is_ok_and(|a| a.status == 201).then(|| t0.elapsed())
    })
    .await)
}

async fn list(t: &Target, pods: usize, duration: Duration, pid: Option<u32>) -> anyhow::Result<Outcome> {
    let conns = t.connect_many(4).await?;
    let ns = "bench-list";
    ensure_namespace(&conns[0], ns).await?;
    let path = format!("/api/v1/namespaces/{ns}/pods");
    list_of(&conns, &path, pods, &|i| pod(&format!("pod-{i:05}"), None), 1, duration, pid).await
}

/// LISTs the collection at `path` (filled up to `count` objects made by `body`) with
/// `workers` requests in flight; with `pid`, the server's resident memory is sampled every
/// 2 ms (peak minus the level before).
pub(crate) async fn list_of(
    conns: &[Conn],
    path: &str,
    count: usize,
    body: &dyn Fn(usize) -> Bytes,
    workers: usize,
    duration: Duration,
    pid: Option<u32>,
) -> anyhow::Result<Outcome> {
    // Preload only what is missing, so repeated runs on one server reuse the objects.
    let probe = conns[0].call("GET", &format!("{path}?limit=1"), Bytes::new()).await?;
    let probe: Value = serde_json::from_slice(&probe.body)?;
    let have = probe["metadata"]["remainingItemCount"].as_u64().unwrap_or(0) as usize
        + probe["items"].as_array().map_or(0, Vec::len);
    if have < count {
        let bodies = (0..count).map(|i| (path.to_string(), body(i))).collect();
        preload(conns, bodies, 32).await?;
    }
    // Settle, then take the baseline memory.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_before = pid.and_then(|p| status_kb(p, "VmRSS")).unwrap_or(0);
    let hwm_before = pid.and_then(|p| status_kb(p, "VmHWM")).unwrap_or(0);
    let peak = Arc::new(AtomicU64::new(rss_before));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, stop) = (peak.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                if let Some(kb) = pid.and_then(|p| status_kb(p, "VmRSS")) {
                    peak.fetch_max(kb, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    };
    let bytes = Arc::new(AtomicU64::new(0));
    let items = Arc::new(AtomicU64::new(0));
    let (b, n, path) = (bytes.clone(), items.clone(), path.to_string());
    let out = closed_loop(conns, workers, duration, move |c, _, _| {
        let (path, b, n) = (path.clone(), b.clone(), n.clone());
        async move {
            let t0 = Instant::now();
            let Ok(a) = c.call("GET", &path, Bytes::new()).await else { return None };
            let latency = t0.elapsed();
            b.store(a.body.len() as u64, Ordering::Relaxed);
            // Counting items costs a parse, outside the timed request (the latency was taken
            // when the last byte arrived); it proves the list is whole.
            let got = serde_json::from_slice::<Value>(&a.body)
                .ok()
                .and_then(|v| v["items"].as_array().map(Vec::len))
                .unwrap_or(0);
            n.store(got as u64, Ordering::Relaxed);
            (a.status == 200 && got >= count).then_some(latency)
        }
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    let _ = sampler.await;
    let mut out = out;
    let mib = |kb: u64| kb as f64 / 1024.0;
    out.extra.push(("items", items.load(Ordering::Relaxed) as f64));
    out.extra.push(("list_mib", bytes.load(Ordering::Relaxed) as f64 / (1024.0 * 1024.0)));
    out.extra.push(("rss_before_mib", mib(rss_before)));
    out.extra.push(("rss_peak_extra_mib", mib(peak.load(Ordering::Relaxed).saturating_sub(rss_before))));
    out.extra.push(("hwm_before_mib", mib(hwm_before)));
    out.extra.push(("hwm_after_mib", mib(pid.and_then(|p| status_kb(p, "VmHWM")).unwrap_or(0))));
    Ok(out)
}

/// Finds the stamp in one watch event line.
fn stamp_of(line: &[u8]) -> Option<u64> {
    let key = format!("\"{STAMP}\":\"");
    let at = line.windows(key.len()).position(|w| w == key.as_bytes())? + key.len();
    let digits = line[at..].iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&line[at..at + digits]).ok()?.parse().ok()
}

async fn watch(
    t: &Target,
    watchers: usize,
    rate: u64,
    duration: Duration,
    pid: Option<u32>,
) -> anyhow::Result<Outcome> {
    const STREAMS_PER_CONN: usize = 100;
    let writer = t.connect_many(2).await?;
    let ns = format!("bench-watch-{:08x}", rand::thread_rng().gen::<u32>());
    ensure_namespace(&writer[0], &ns).await?;
    let path = format!("/api/v1/namespaces/{ns}/pods");
    let listed: Value = serde_json::from_slice(&writer[0].call("GET", &path, Bytes::new()).await?.body)?;
    let rv = listed["metadata"]["resourceVersion"].as_str().context("list without resourceVersion")?.to_string();

    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_before = pid.and_then(|p| status_kb(p, "VmRSS")).unwrap_or(0);
    let conns = t.connect_many(watchers.div_ceil(STREAMS_PER_CONN)).await?;
    let samples = Arc::new(Mutex::new(Samples::default()));
    let delivered = Arc::new(AtomicU64::new(0));
    let registered = Arc::new(AtomicU64::new(0));
    let ended = Arc::new(AtomicU64::new(0));
    let drain = Arc::new(Mutex::new(None::<Instant>));
    let reg_start = Instant::now();
    let watch_path = format!("{path}?watch=true&resourceVersion={rv}&timeoutSeconds=3600");
    let mut tasks = Vec::with_capacity(watchers);
    for w in 0..watchers {
        let c = conns[w / STREAMS_PER_CONN].clone();
        let (samples, delivered, registered, ended, drain, watch_path) =
            (samples.clone(), delivered.clone(), registered.clone(), ended.clone(), drain.clone(), watch_path.clone());
        tasks.push(tokio::spawn(async move {
            let Ok(mut body) = c.stream(&watch_path).await else {
                ended.fetch_add(1, Ordering::Relaxed);
                return;
            };
            registered.fetch_add(1, Ordering::Relaxed);
            let (mut local, mut buf, mut n) = (Samples::default(), BytesMut::new(), 0u64);
            loop {
                let until = *drain.lock().unwrap_or_else(|e| e.into_inner());
                let frame = match until {
                    Some(t) => {
                        match tokio::time::timeout(t.saturating_duration_since(Instant::now()), body.frame()).await {
                            Ok(f) => f,
                            Err(_) => break,
                        }
                    }
                    None => match tokio::time::timeout(Duration::from_millis(500), body.frame()).await {
                        Ok(f) => f,
                        Err(_) => continue,
                    },
                };
                let Some(Ok(frame)) = frame else { break };
                let Ok(data) = frame.into_data() else { continue };
                buf.extend_from_slice(&data);
                while let Some(end) = buf.iter().position(|b| *b == b'\n') {
                    let line = buf.split_to(end + 1);
                    if let Some(sent) = stamp_of(&line) {
                        local.push(Duration::from_nanos(now_ns().saturating_sub(sent)));
                        n += 1;
                    }
                }
            }
            delivered.fetch_add(n, Ordering::Relaxed);
            samples.lock().unwrap_or_else(|e| e.into_inner()).extend(local);
        }));
    }
    let reg_deadline = Instant::now() + Duration::from_secs(120);
    while (registered.load(Ordering::Relaxed) + ended.load(Ordering::Relaxed)) < watchers as u64
        && Instant::now() < reg_deadline
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let registration_secs = reg_start.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_idle = pid.and_then(|p| status_kb(p, "VmRSS")).unwrap_or(0);

    // The writer: `rate` creates per second, each stamped just before it is sent.
    let start = Instant::now();
    let total = rate * duration.as_secs();
    let mut ticker = tokio::time::interval(Duration::from_nanos(1_000_000_000 / rate.max(1)));
    let acked = Arc::new(AtomicU64::new(0));
    let mut writes = Vec::new();
    for i in 0..total {
        ticker.tick().await;
        let (c, acked, path) = (writer[i as usize % writer.len()].clone(), acked.clone(), path.clone());
        writes.push(tokio::spawn(async move {
            let body = pod(&format!("w-{i:06}"), Some(now_ns()));
            if c.call("POST", &path, body).await.is_ok_and(|a| a.status == 201) {
                acked.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for w in writes {
        let _ = w.await;
    }
    let secs = start.elapsed().as_secs_f64();
    let rss_peak = pid.and_then(|p| status_kb(p, "VmRSS")).unwrap_or(0);
    *drain.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now() + Duration::from_secs(5));
    for task in tasks {
        let _ = task.await;
    }
    let acked = acked.load(Ordering::Relaxed);
    let registered = registered.load(Ordering::Relaxed);
    let delivered = delivered.load(Ordering::Relaxed);
    let latency = std::mem::take(&mut *samples.lock().unwrap_or_else(|e| e.into_inner()));
    let mut out = Outcome { ops: delivered, secs, latency, ..Outcome::default() };
    let expected = acked * registered;
    out.extra.push(("watchers_registered", registered as f64));
    out.extra.push(("registration_secs", registration_secs));
    out.extra.push(("writes_acked", acked as f64));
    out.extra.push(("events_expected", expected as f64));
    out.extra.push(("events_missed", expected.saturating_sub(delivered) as f64));
    out.extra.push((
        "rss_per_watcher_bytes",
        if registered > 0 { rss_idle.saturating_sub(rss_before) as f64 * 1024.0 / registered as f64 } else { 0.0 },
    ));
    out.extra.push(("rss_before_mib", rss_before as f64 / 1024.0));
    out.extra.push(("rss_idle_mib", rss_idle as f64 / 1024.0));
    out.extra.push(("rss_after_writes_mib", rss_peak as f64 / 1024.0));
    out.extra.push(("sample_count", out.latency.len() as f64));
    Ok(out)
}

async fn update(t: &Target, workers: usize, duration: Duration) -> anyhow::Result<Outcome> {
    let conns = t.connect_many(4).await?;
    let objects = 1000;
    let bodies = (0..objects)
        .map(|i| ("/api/v1/namespaces/default/configmaps".to_string(), configmap(&format!("update-{i}"))))
        .collect();
    preload(&conns, bodies, 32).await?;
    Ok(closed_loop(&conns, workers, duration, move |c, w, seq| async move {
        let i = rand::thread_rng().gen_range(0..objects);
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("update-{i}"), "labels": {"app": "bench"}},
            "data": {"key": "v".repeat(256), "seq": format!("{w}-{seq}")}});
        let t0 = Instant::now();
        let a = c
            .call("PUT", &format!("/api/v1/namespaces/default/configmaps/update-{i}"), Bytes::from(body.to_string()))
            .await;
        a.is_ok_and(|a| a.status == 200).then(|| t0.elapsed())
    })
    .await)
}

/// A typical Deployment's applied configuration: what `kubectl apply --server-side` sends.
fn deployment(name: &str, tag: &str) -> Bytes {
    let container = |n: &str, port: u32| {
        json!({"name": n, "image": format!("registry.k8s.io/{n}:{tag}"),
            "ports": [{"containerPort": port, "name": "http"}],
            "env": [{"name": "MODE", "value": "bench"}, {"name": "LOG", "value": "info"}],
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
            "readinessProbe": {"httpGet": {"path": "/healthz", "port": port}, "periodSeconds": 5}})
    };
    let body = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name, "tier": "web"}},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name, "tier": "web"}},
                "spec": {"containers": [container("web", 8080), container("sidecar", 9090)]}}}});
    Bytes::from(body.to_string())
}

async fn apply_deployments(t: &Target, workers: usize, duration: Duration) -> anyhow::Result<Outcome> {
    let conns = t.connect_many(4).await?;
    let objects = 100;
    let run: u32 = rand::thread_rng().gen();
    Ok(closed_loop(&conns, workers, duration, move |c, w, seq| async move {
        let i = rand::thread_rng().gen_range(0..objects);
        let body = deployment(&format!("apply-{i}"), &format!("{run:x}-{w}-{seq}"));
        let t0 = Instant::now();
        let path = format!("/apis/apps/v1/namespaces/default/deployments/apply-{i}?fieldManager=bench&force=true");
        let a = c.call_typed("PATCH", &path, "application/apply-patch+yaml", body).await;
        a.is_ok_and(|a| a.status == 200 || a.status == 201).then(|| t0.elapsed())
    })
    .await)
}
