//! Watch fan-out: W watchers (a stream each, or many to a stream) on one prefix with prev_kv, the
//! way kube-apiserver watches, while one writer puts at a fixed rate. Delivery latency is measured
//! from the moment each put was sent to the moment a watcher received its event (both in this
//! process, so one clock).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ballast_proto::etcdserverpb::{watch_request::RequestUnion, PutRequest, WatchCreateRequest, WatchRequest};
use bytes::Bytes;
use tokio::sync::Mutex;
use tokio_stream::wrappers::ReceiverStream;

use super::watch_light;
use crate::conn;
use crate::stats::{CpuMark, Outcome, Samples};

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// How long the fan-out waits for its watchers to be created before the first put. Stock etcd
/// took 13.5 s to register 100,000 watchers over 100 streams on this machine, and one stream per
/// watcher costs it more; past this the run goes on with the watchers that were created, and says
/// how many.
const REGISTER_WAIT: Duration = Duration::from_secs(120);

/// Longest wait for one put's acknowledgement: a server that falls behind under the fan-out must
/// not hold the run open; a put not acknowledged by then counts as not acknowledged.
const PUT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long watchers keep reading after the writer's last acknowledgement; what has not arrived
/// then is reported as missed.
const DRAIN_WAIT: Duration = Duration::from_secs(5);

/// Resolves once the writer is done and the drain deadline it set has passed.
async fn drained(mut stop: tokio::sync::watch::Receiver<Option<Instant>>) {
    let until = match stop.wait_for(Option::is_some).await {
        Ok(t) => *t,
        Err(_) => None,
    };
    if let Some(t) = until {
        tokio::time::sleep_until(t.into()).await;
    }
}

/// Fan-out: `watchers` watchers spread evenly over `streams` watch streams (over 8 connections),
/// all on one prefix with prev_kv, while one writer on a ninth connection puts `rate` times a
/// second for `duration`.
/// With `streams == watchers` every watcher has a stream of its own; with fewer, each stream
/// multiplexes many watchers, as clientv3 (and so kube-apiserver) puts every watch made with
/// the same context metadata on one stream. Every phase has a deadline (registration, each put,
/// the drain), so a server that cannot keep up still ends the run in bounded time, with what it
/// delivered.
pub(crate) async fn fanout(
    url: &str,
    watchers: usize,
    streams: usize,
    rate: u64,
    duration: Duration,
) -> anyhow::Result<Outcome> {
    let chans = Arc::new(conn::channels(url, 8).await?);
    // The writer has a connection of its own, as etcd's `benchmark watch-latency` gives its put
    // client: on a shared one, an acknowledgement waits behind watch data the client has not
    // read yet, and delivery latency (counted from the send) would measure that queue.
    let kv = conn::kv(&conn::channels(url, 1).await?, 0);
    let delivered = Arc::new(AtomicU64::new(0));
    let canceled = Arc::new(AtomicU64::new(0));
    let created = Arc::new(AtomicU64::new(0));
    let samples = Arc::new(Mutex::new(Samples::default()));
    // Set once the writer is done, to the drain deadline: every watcher stops then.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(None::<Instant>);
    let register_start = Instant::now();
    let streams = streams.clamp(1, watchers.max(1));
    let mut tasks = Vec::new();
    for s in 0..streams {
        // The first `watchers % streams` streams carry one more.
        let per_stream = watchers / streams + usize::from(s < watchers % streams);
        let (chans, delivered, canceled, created, samples, stop) =
            (chans.clone(), delivered.clone(), canceled.clone(), created.clone(), samples.clone(), stop_rx.clone());
        tasks.push(tokio::spawn(async move {
            let mut local = Samples::default();
            // Counted here and added once at the end: a shared counter bumped per event by every
            // stream's task costs the client more than the rest of its bookkeeping.
            let mut mine = 0u64;
            let body = async {
                let (tx, rx) = tokio::sync::mpsc::channel(per_stream.max(1));
                for _ in 0..per_stream {
                    let req = WatchCreateRequest {
                        key: Bytes::from_static(b"fan/"),
                        range_end: Bytes::from_static(b"fan0"),
                        prev_kv: true,
                        ..Default::default()
                    };
                    // Queued before the call: grpc-go servers send headers with their first
                    // response.
                    let _ = tx.send(WatchRequest { request_union: Some(RequestUnion::CreateRequest(req)) }).await;
                }
                let channel = chans[s % chans.len()].clone();
                let Ok(mut stream) = watch_light::watch(channel, ReceiverStream::new(rx)).await else { return };
                let mut open = per_stream;
                while let Ok(Some(msg)) = stream.message().await {
                    if msg.created {
                        created.fetch_add(1, Ordering::Relaxed);
                    }
                    if msg.canceled {
                        canceled.fetch_add(1, Ordering::Relaxed);
                        open -= 1;
                        if open == 0 {
                            break;
                        }
                    }
                    if !msg.stamps.is_empty() {
                        let now = now_ns();
                        for sent in &msg.stamps {
                            local.push(Duration::from_nanos(now.saturating_sub(*sent)));
                            mine += 1;
                        }
                    }
                }
                drop(tx);
            };
            tokio::select! {
                () = body => {}
                () = drained(stop) => {}
            }
            delivered.fetch_add(mine, Ordering::Relaxed);
            samples.lock().await.extend(local);
        }));
    }
    // Every watcher should be registered before the first put.
    let deadline = Instant::now() + REGISTER_WAIT;
    while created.load(Ordering::Relaxed) < watchers as u64 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let registered = created.load(Ordering::Relaxed);
    let register_secs = register_start.elapsed().as_secs_f64();
    // Open loop: each put is its own task, so a slow acknowledgement does not lower the rate.
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
            match tokio::time::timeout(PUT_TIMEOUT, kv.put(req)).await {
                Ok(Ok(_)) => Some(t0.elapsed()),
                // Reported on stderr, which the run scripts keep out of the result line.
                Ok(Err(status)) => {
                    eprintln!("put failed after {:?}: {status}", t0.elapsed());
                    None
                }
                Err(_) => {
                    eprintln!("put not acknowledged within {PUT_TIMEOUT:?}");
                    None
                }
            }
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
    let _ = stop_tx.send(Some(Instant::now() + DRAIN_WAIT));
    for t in tasks {
        let _ = t.await;
    }
    let cpu = cpu.since();
    let mut latency = std::mem::take(&mut *samples.lock().await);
    let got = delivered.load(Ordering::Relaxed);
    // Puts not acknowledged may still have been applied and delivered; count against what was
    // acknowledged, as before, but never report more missed than possible.
    let expected = puts * registered;
    let mut out = Outcome { ops: got, errors: expected.saturating_sub(got), secs, ..Default::default() };
    out.extra = vec![
        ("streams", streams as f64),
        ("register_secs", register_secs),
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

/// Which keys idle watchers watch: each its own prefix (kube-apiserver's shape) or its own key.
#[derive(Clone, Copy, Debug)]
enum IdleKeys {
    Prefix,
    Single,
}

/// Idle watchers held open: created on `streams` streams, released by [`Held::release`].
struct Held {
    registered: u64,
    total: u64,
    secs: f64,
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Held {
    async fn release(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// Creates `streams` watch streams each carrying `per_stream` watchers with prev_kv, each on its
/// own prefix or key under `idle/` (kube-apiserver multiplexes its watches over a few streams the
/// same way), and returns once all are created (or after 240 s).
async fn hold_idle(url: &str, streams: usize, per_stream: usize, keys: IdleKeys) -> anyhow::Result<Held> {
    let chans = Arc::new(conn::channels(url, 8).await?);
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
                let (key, range_end) = match keys {
                    IdleKeys::Prefix => (Bytes::from(format!("idle/{n:08}/")), Bytes::from(format!("idle/{n:08}0"))),
                    IdleKeys::Single => (Bytes::from(format!("idle/{n:08}")), Bytes::new()),
                };
                let req = WatchCreateRequest { key, range_end, prev_kv: true, ..Default::default() };
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
            // Hold the watchers (and the request side open) until released.
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
    Ok(Held { registered: created.load(Ordering::Relaxed), total, secs, stop: stop_tx, tasks })
}

/// Idle watchers: `streams` streams of `per_stream` watchers, each on its own prefix with prev_kv,
/// and no writes. Reports the server's resident memory growth per watcher; needs `--server-pid`.
pub(crate) async fn idle(url: &str, streams: usize, per_stream: usize) -> anyhow::Result<Outcome> {
    let before = server_rss();
    let held = hold_idle(url, streams, per_stream, IdleKeys::Prefix).await?;
    // Let the server settle (buffers freed after the create burst) before reading its memory.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = server_rss();
    let (registered, total, secs) = (held.registered, held.total, held.secs);
    held.release().await;
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

/// Writes past idle watchers: `streams` streams of `per_stream` watchers, each on its own key
/// with prev_kv, none of which the writes touch, while `inflight` clients put 256-byte values to
/// other keys (the `put_c*` scenario). What it shows is the cost idle watchers add to each write:
/// none, when the server finds a write's watchers by key rather than by visiting every watcher.
pub(crate) async fn idle_put(
    url: &str,
    streams: usize,
    per_stream: usize,
    inflight: usize,
    duration: Duration,
    seed: u64,
) -> anyhow::Result<Outcome> {
    let held = hold_idle(url, streams, per_stream, IdleKeys::Single).await?;
    let mut out = super::kv::put(url, inflight, duration, seed).await?;
    out.extra.push(("register_secs", held.secs));
    out.extra.push(("watchers_registered", held.registered as f64));
    held.release().await;
    Ok(out)
}

/// `/metrics` scraped `scrapes` times, one after the other, while `streams` streams of
/// `per_stream` idle watchers are registered: the scrape's latency with that many watchers (a
/// scrape that visited every watcher would grow with them). Plain `http://` endpoints only.
pub(crate) async fn metrics_scrape(
    url: &str,
    streams: usize,
    per_stream: usize,
    scrapes: usize,
) -> anyhow::Result<Outcome> {
    let held = hold_idle(url, streams, per_stream, IdleKeys::Prefix).await?;
    let authority =
        url.strip_prefix("http://").ok_or_else(|| anyhow::anyhow!("metrics_scrape needs an http:// endpoint"))?;
    let mut latency = Samples::default();
    let mut bytes = 0usize;
    let mut errors = 0u64;
    let cpu = CpuMark::now();
    let start = Instant::now();
    for _ in 0..scrapes {
        let began = Instant::now();
        match scrape(authority).await {
            Ok(n) => {
                latency.push(began.elapsed());
                bytes = n;
            }
            Err(_) => errors += 1,
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu = cpu.since();
    let mut out = Outcome { ops: latency.len() as u64, errors, secs, latency, cpu, ..Default::default() };
    out.extra.push(("register_secs", held.secs));
    out.extra.push(("watchers_registered", held.registered as f64));
    out.extra.push(("scrape_bytes", bytes as f64));
    held.release().await;
    Ok(out)
}

/// One `GET /metrics` over a fresh HTTP/1.1 connection, as Prometheus scrapes; returns the
/// response's size.
async fn scrape(authority: &str) -> anyhow::Result<usize> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(authority).await?;
    let req = format!("GET /metrics HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    tcp.write_all(req.as_bytes()).await?;
    let mut resp = Vec::new();
    tcp.read_to_end(&mut resp).await?;
    if !resp.starts_with(b"HTTP/1.1 200") {
        anyhow::bail!("scrape answered {}", String::from_utf8_lossy(&resp[..resp.len().min(40)]));
    }
    Ok(resp.len())
}
