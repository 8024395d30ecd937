//! Watch fan-out: W watchers (one stream each) on one prefix with prev_kv, the way
//! kube-apiserver watches, while one writer puts at a fixed rate. Delivery latency is measured
//! from the moment each put was sent to the moment a watcher received its event (both in this
//! process, so one clock).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ballast_proto::etcdserverpb::{watch_request::RequestUnion, PutRequest, WatchCreateRequest, WatchRequest};
use bytes::Bytes;
use tokio::sync::Mutex;
use tokio_stream::wrappers::ReceiverStream;

use crate::conn;
use crate::stats::{CpuMark, Outcome, Samples};

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

pub(crate) async fn fanout(url: &str, watchers: usize, rate: u64, duration: Duration) -> anyhow::Result<Outcome> {
    let chans = Arc::new(conn::channels(url, 8).await?);
    let delivered = Arc::new(AtomicU64::new(0));
    let canceled = Arc::new(AtomicU64::new(0));
    let created = Arc::new(AtomicU64::new(0));
    let samples = Arc::new(Mutex::new(Samples::default()));
    // Set once the writer is done: watchers then wait at most until the drain deadline.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(None::<Instant>);
    let mut tasks = Vec::new();
    for w in 0..watchers {
        let (chans, delivered, canceled, created, samples, mut stop) =
            (chans.clone(), delivered.clone(), canceled.clone(), created.clone(), samples.clone(), stop_rx.clone());
        tasks.push(tokio::spawn(async move {
            let mut client = conn::watch(&chans, w);
            let (tx, rx) = tokio::sync::mpsc::channel(1);
            let req = WatchCreateRequest {
                key: Bytes::from_static(b"fan/"),
                range_end: Bytes::from_static(b"fan0"),
                prev_kv: true,
                ..Default::default()
            };
            // Queued before the call: grpc-go servers send headers with their first response.
            let _ = tx.send(WatchRequest { request_union: Some(RequestUnion::CreateRequest(req)) }).await;
            let Ok(resp) = client.watch(ReceiverStream::new(rx)).await else { return };
            let mut stream = resp.into_inner();
            let mut local = Samples::default();
            loop {
                let until = *stop.borrow();
                let msg = match until {
                    Some(t) => {
                        match tokio::time::timeout(t.saturating_duration_since(Instant::now()), stream.message()).await
                        {
                            Ok(Ok(Some(m))) => m,
                            _ => break,
                        }
                    }
                    None => tokio::select! {
                        m = stream.message() => match m {
                            Ok(Some(m)) => m,
                            _ => break,
                        },
                        _ = stop.changed() => continue,
                    },
                };
                if msg.created {
                    created.fetch_add(1, Ordering::Relaxed);
                }
                if msg.canceled {
                    canceled.fetch_add(1, Ordering::Relaxed);
                    break;
                }
                let now = now_ns();
                for e in &msg.events {
                    let sent = e.kv.as_ref().and_then(|kv| {
                        std::str::from_utf8(&kv.value[..20.min(kv.value.len())]).ok()?.parse::<u64>().ok()
                    });
                    if let Some(sent) = sent {
                        local.push(Duration::from_nanos(now.saturating_sub(sent)));
                        delivered.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            samples.lock().await.extend(local);
            drop(tx);
        }));
    }
    // Every watcher must be registered before the first put.
    let deadline = Instant::now() + Duration::from_secs(60);
    while created.load(Ordering::Relaxed) < watchers as u64 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let registered = created.load(Ordering::Relaxed);
    // Open loop: each put is its own task, so a slow acknowledgement does not lower the rate.
    let kv = conn::kv(&chans, 0);
    let mut sent = 0u64;
    let mut inflight = Vec::new();
    let cpu = CpuMark::now();
    let start = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_nanos(1_000_000_000 / rate.max(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    while start.elapsed() < duration {
        tick.tick().await;
        let mut value = format!("{:020}", now_ns()).into_bytes();
        value.resize(256, b'v');
        let req = PutRequest {
            key: Bytes::from(format!("fan/{:03}", sent % 100)),
            value: Bytes::from(value),
            ..Default::default()
        };
        sent += 1;
        let mut kv = kv.clone();
        inflight.push(tokio::spawn(async move {
            let t0 = Instant::now();
            kv.put(req).await.ok().map(|_| t0.elapsed())
        }));
    }
    let mut puts = 0u64;
    let mut put_lat = Samples::default();
    for t in inflight {
        if let Ok(Some(lat)) = t.await {
            puts += 1;
            put_lat.push(lat);
        }
    }
    let secs = duration.as_secs_f64();
    // Stragglers get 5 s to arrive; what is still missing then is reported as missed.
    let _ = stop_tx.send(Some(Instant::now() + Duration::from_secs(5)));
    for t in tasks {
        let _ = t.await;
    }
    let cpu = cpu.since();
    let mut latency = std::mem::take(&mut *samples.lock().await);
    let got = delivered.load(Ordering::Relaxed);
    let expected = puts * registered;
    let mut out = Outcome { ops: got, errors: expected.saturating_sub(got), secs, ..Default::default() };
    out.extra = vec![
        ("watchers_registered", registered as f64),
        ("puts_sent", sent as f64),
        ("puts", puts as f64),
        ("put_p99_ms", put_lat.quantile_ms(0.99)),
        ("events_expected", expected as f64),
        ("events_missed", expected.saturating_sub(got) as f64),
        ("watchers_canceled", canceled.load(Ordering::Relaxed) as f64),
        ("delivery_p50_ms", latency.quantile_ms(0.5)),
        ("delivery_p99_ms", latency.quantile_ms(0.99)),
    ];
    out.latency = latency;
    out.cpu = cpu;
    Ok(out)
}

/// Resident memory of the server process in bytes, from `/proc/<pid>/status`.
fn server_rss() -> Option<u64> {
    let pid = crate::stats::SERVER_PID.get()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
}

/// Idle watchers: `streams` watch streams each carrying `per_stream` watchers on their own
/// prefix with prev_kv (kube-apiserver multiplexes its watches over a few streams the same way),
/// and no writes. Reports the server's resident memory growth per watcher; needs `--server-pid`.
pub(crate) async fn idle(url: &str, streams: usize, per_stream: usize) -> anyhow::Result<Outcome> {
    let chans = Arc::new(conn::channels(url, 8).await?);
    let before = server_rss();
    let created = Arc::new(AtomicU64::new(0));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for s in 0..streams {
        let (chans, created, mut stop) = (chans.clone(), created.clone(), stop_rx.clone());
        tasks.push(tokio::spawn(async move {
            let mut client = conn::watch(&chans, s);
            let (tx, rx) = tokio::sync::mpsc::channel(per_stream.max(1));
            for w in 0..per_stream {
                let n = s * per_stream + w;
                let req = WatchCreateRequest {
                    key: Bytes::from(format!("idle/{n:08}/")),
                    range_end: Bytes::from(format!("idle/{n:08}0")),
                    prev_kv: true,
                    ..Default::default()
                };
                let _ = tx.send(WatchRequest { request_union: Some(RequestUnion::CreateRequest(req)) }).await;
            }
            let Ok(resp) = client.watch(ReceiverStream::new(rx)).await else { return };
            let mut stream = resp.into_inner();
            let mut mine = 0;
            while mine < per_stream {
                match stream.message().await {
                    Ok(Some(m)) if m.created => {
                        mine += 1;
                        created.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(Some(_)) => {}
                    _ => return,
                }
            }
            // Hold the watchers (and the request side open) until the measurement is taken.
            let _ = stop.wait_for(|s| *s).await;
            drop(tx);
        }));
    }
    let total = (streams * per_stream) as u64;
    let deadline = Instant::now() + Duration::from_secs(240);
    while created.load(Ordering::Relaxed) < total && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let secs = start.elapsed().as_secs_f64();
    // Let the server settle (buffers freed after the create burst) before reading its memory.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = server_rss();
    let registered = created.load(Ordering::Relaxed);
    let _ = stop_tx.send(true);
    for t in tasks {
        let _ = t.await;
    }
    let mut out = Outcome { ops: registered, errors: total - registered, secs, ..Default::default() };
    if let (Some(b), Some(a)) = (before, after) {
        out.extra.push(("server_rss_before_mib", b as f64 / 1048576.0));
        out.extra.push(("server_rss_after_mib", a as f64 / 1048576.0));
        if registered > 0 {
            out.extra.push(("bytes_per_watcher", a.saturating_sub(b) as f64 / registered as f64));
        }
    }
    out.extra.push(("watchers_registered", registered as f64));
    Ok(out)
}
