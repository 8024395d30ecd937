//! Scenario dispatch and the closed- and open-loop runners they share.

mod kv;
mod watch;
mod watch_light;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::stats::{CpuMark, Outcome, Samples};

/// Every scenario id.
pub(crate) const ALL: &[&str] = &[
    "put_c1_v256",
    "put_c16_v256",
    "put_c100_v256",
    "put_c1000_v256",
    "put_ns64_c16_v256",
    "put_ns64_c100_v256",
    "put_r2000_v256",
    "get_linearizable_c1",
    "get_linearizable_c100",
    "get_serializable_c1",
    "get_serializable_c100",
    "list_page500_of100k_c1",
    "list_ns_page500_of100k_c1",
    "txn_cas_c16_k1000",
    "txn_cas_c100_k1000",
    "txn_cas_ns8_c100_k1000",
    "watch_fanout_w1000_r100_prevkv",
    "watch_fanout_w10000_r10_prevkv",
    "watch_fanout_w100000_r10_prevkv",
    "watch_fanout_s100_w10000_r100_prevkv",
    "watch_fanout_s100_w100000_r10_prevkv",
    "watch_idle_s100_w100000_prevkv",
    "put_c100_v256_watch_idle_w100000",
    "metrics_scrape_s100_w100000",
];

/// Runs scenario `id` against `url`.
pub(crate) async fn run(url: &str, id: &str, duration: Duration, seed: u64) -> anyhow::Result<Outcome> {
    let mut out = match id {
        "put_c1_v256" => kv::put(url, 1, duration, seed).await?,
        "put_c16_v256" => kv::put(url, 16, duration, seed).await?,
        "put_c100_v256" => kv::put(url, 100, duration, seed).await?,
        "put_c1000_v256" => kv::put(url, 1000, duration, seed).await?,
        "put_ns64_c16_v256" => kv::put_namespaced(url, 16, duration, seed).await?,
        "put_ns64_c100_v256" => kv::put_namespaced(url, 100, duration, seed).await?,
        "put_r2000_v256" => kv::put_at_rate(url, 2_000, duration, seed).await?,
        "get_linearizable_c1" => kv::get(url, 1, false, duration, seed).await?,
        "get_linearizable_c100" => kv::get(url, 100, false, duration, seed).await?,
        "get_serializable_c1" => kv::get(url, 1, true, duration, seed).await?,
        "get_serializable_c100" => kv::get(url, 100, true, duration, seed).await?,
        "list_page500_of100k_c1" => kv::list_page(url, duration, seed).await?,
        "list_ns_page500_of100k_c1" => kv::list_page_namespaced(url, duration, seed).await?,
        "txn_cas_c16_k1000" => kv::txn_cas(url, 16, duration, seed).await?,
        "txn_cas_c100_k1000" => kv::txn_cas(url, 100, duration, seed).await?,
        "txn_cas_ns8_c100_k1000" => kv::txn_cas_namespaced(url, 100, duration, seed).await?,
        "watch_fanout_w1000_r100_prevkv" => watch::fanout(url, 1000, 1000, 100, duration).await?,
        "watch_fanout_w10000_r10_prevkv" => watch::fanout(url, 10_000, 10_000, 10, duration).await?,
        "watch_fanout_w100000_r10_prevkv" => watch::fanout(url, 100_000, 100_000, 10, duration).await?,
        "watch_fanout_s100_w10000_r100_prevkv" => watch::fanout(url, 10_000, 100, 100, duration).await?,
        "watch_fanout_s100_w100000_r10_prevkv" => watch::fanout(url, 100_000, 100, 10, duration).await?,
        "watch_idle_s100_w100000_prevkv" => watch::idle(url, 100, 1000).await?,
        "put_c100_v256_watch_idle_w100000" => watch::idle_put(url, 100, 1000, 100, duration, seed).await?,
        "metrics_scrape_s100_w100000" => watch::metrics_scrape(url, 100, 1000, 100).await?,
        other => anyhow::bail!("unknown scenario {other}; see `ballast-load list`"),
    };
    out.scenario = id.to_string();
    Ok(out)
}

/// A small deterministic generator (xorshift64*), so runs pick the same keys for a seed.
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
    }
}

/// Runs `inflight` workers, each issuing `op(worker, rng)` back to back until `duration` passes.
pub(crate) async fn closed_loop<F, Fut>(inflight: usize, duration: Duration, seed: u64, op: F) -> Outcome
where
    F: Fn(usize, Rng) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = (Rng, bool)> + Send + 'static,
{
    let op = Arc::new(op);
    let cpu = CpuMark::now();
    let start = Instant::now();
    let deadline = start + duration;
    let mut tasks = Vec::new();
    for w in 0..inflight {
        let op = op.clone();
        tasks.push(tokio::spawn(async move {
            let mut rng = Rng::new(seed.wrapping_add(w as u64 * 7919));
            let (mut ok, mut errors, mut lat) = (0u64, 0u64, Samples::default());
            while Instant::now() < deadline {
                let t0 = Instant::now();
                let (next, success) = op(w, rng).await;
                rng = next;
                if success {
                    ok += 1;
                    lat.push(t0.elapsed());
                } else {
                    errors += 1;
                }
            }
            (ok, errors, lat)
        }));
    }
    let mut out = Outcome::default();
    for t in tasks {
        if let Ok((ok, errors, lat)) = t.await {
            out.ops += ok;
            out.errors += errors;
            out.latency.extend(lat);
        }
    }
    out.secs = start.elapsed().as_secs_f64();
    out.cpu = cpu.since();
    out
}

/// Starts `op(i, rng)` about `rate` times a second for `duration`, each on a task of its own
/// whatever the earlier ones are doing: an open loop, as a control plane's many independent
/// writers are, where `closed_loop`'s writers each wait for their answer before the next
/// request. Arrivals are a Poisson process (exponential gaps), timed by a thread of its own
/// because tokio's timer wakes at millisecond ticks, which would send them in bursts. A
/// request's latency runs from the start of its task, just after its arrival.
pub(crate) async fn open_loop<F, Fut>(rate: u32, duration: Duration, seed: u64, op: F) -> Outcome
where
    F: Fn(usize, Rng) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = (Rng, bool)> + Send + 'static,
{
    let op = Arc::new(op);
    let cpu = CpuMark::now();
    let start = Instant::now();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let pacer = std::thread::spawn(move || {
        let mut gaps = Rng::new(seed);
        let mut due = start;
        let mut i = 0usize;
        loop {
            // An exponential gap of mean 1/rate from a uniform draw in (0, 1].
            let u = (gaps.below(1 << 53) + 1) as f64 / (1u64 << 53) as f64;
            due += Duration::from_secs_f64(-u.ln() / f64::from(rate.max(1)));
            if due >= start + duration {
                break;
            }
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
            if tx.send(i).is_err() {
                break;
            }
            i += 1;
        }
    });
    let mut tasks = tokio::task::JoinSet::new();
    while let Some(i) = rx.recv().await {
        let op = op.clone();
        tasks.spawn(async move {
            let t0 = Instant::now();
            let (_, ok) = op(i, Rng::new(seed.wrapping_add(i as u64 * 7919))).await;
            (ok, t0.elapsed())
        });
    }
    let _ = pacer.join();
    let mut out = Outcome::default();
    while let Some(done) = tasks.join_next().await {
        match done {
            Ok((true, lat)) => {
                out.ops += 1;
                out.latency.push(lat);
            }
            _ => out.errors += 1,
        }
    }
    out.secs = start.elapsed().as_secs_f64();
    out.cpu = cpu.since();
    out
}
