//! `ballast-load failover`: how long a cluster takes to acknowledge writes again after its
//! leader is killed.
//!
//! Writers put in a loop through every member's endpoint (`workers` per endpoint, each request
//! with a timeout, a failed connection reopened); once writes flow, the tool sends SIGKILL to
//! `--kill-pid` (the leader, found by the caller) and measures from the kill (once kill(1) has
//! returned) to the first acknowledgement of a put sent after it: only a new leader can commit
//! that put. A put sent before the kill and acknowledged after it is reported separately
//! (`first_ack_any_ms`): it may have been committed before.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ballast_proto::etcdserverpb::{PutRequest, PutResponse};
use bytes::Bytes;

use crate::grpc::{self, Unary};

/// What the writers share.
#[derive(Debug, Default)]
struct Shared {
    /// Set once kill(1) has returned.
    killed_at: Mutex<Option<Instant>>,
    /// The first put sent after the kill and acknowledged: (ack time, endpoint index).
    first_after: Mutex<Option<(Instant, usize)>>,
    /// The first acknowledgement received after the kill, whenever its put was sent.
    first_any: Mutex<Option<Instant>>,
    acks: AtomicU64,
    errors: AtomicU64,
    stop: AtomicBool,
}

/// Runs the measurement and returns its JSON line.
pub(crate) async fn run(
    endpoints: &[String],
    kill_pid: u32,
    after: Duration,
    timeout: Duration,
    workers: usize,
    deadline: Duration,
) -> anyhow::Result<String> {
    let shared = Arc::new(Shared::default());
    let mut tasks = Vec::new();
    for (e, url) in endpoints.iter().enumerate() {
        for w in 0..workers.max(1) {
            let (shared, url) = (shared.clone(), url.clone());
            tasks.push(tokio::spawn(async move { writer(&shared, &url, e, w, timeout).await }));
        }
    }
    tokio::time::sleep(after).await;
    let before = shared.acks.load(Ordering::Relaxed);
    if before == 0 {
        shared.stop.store(true, Ordering::Relaxed);
        anyhow::bail!("no put was acknowledged in the {after:?} before the kill");
    }
    // kill(1) rather than libc: the workspace forbids unsafe code. Starting it takes a few
    // milliseconds on a busy machine, during which the leader still answers, so the clock
    // starts when kill(1) has returned, that is once the signal is sent.
    let spawned = Instant::now();
    let status = tokio::process::Command::new("kill").arg("-9").arg(kill_pid.to_string()).status().await?;
    let t0 = Instant::now();
    *lock(&shared.killed_at) = Some(t0);
    anyhow::ensure!(status.success(), "kill -9 {kill_pid} failed");
    let until = t0 + deadline;
    while lock(&shared.first_after).is_none() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    shared.stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.abort();
    }
    let ms = |t: Option<Instant>| t.map_or(-1.0, |t| t.duration_since(t0).as_secs_f64() * 1e3);
    let first_after = *lock(&shared.first_after);
    let first_any = *lock(&shared.first_any);
    Ok(format!(
        "{{\"scenario\":\"failover\",\"failover_ms\":{:.1},\"first_ack_any_ms\":{:.1},\"first_ack_endpoint\":{},\"acks_before_kill\":{},\"acks\":{},\"errors\":{},\"kill_cmd_ms\":{:.1}}}",
        ms(first_after.map(|(t, _)| t)),
        ms(first_any),
        first_after.map_or(-1, |(_, e)| e as i64),
        before,
        shared.acks.load(Ordering::Relaxed),
        shared.errors.load(Ordering::Relaxed),
        t0.duration_since(spawned).as_secs_f64() * 1e3,
    ))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Puts to `url` in a loop until told to stop.
async fn writer(shared: &Shared, url: &str, e: usize, w: usize, timeout: Duration) {
    let mut conn: Option<Unary> = None;
    let mut n = 0u64;
    while !shared.stop.load(Ordering::Relaxed) {
        if conn.is_none() {
            conn = tokio::time::timeout(timeout, Unary::connect(url)).await.ok().and_then(Result::ok);
            if conn.is_none() {
                shared.errors.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
        }
        let Some(c) = conn.as_ref() else { continue };
        n += 1;
        let req = PutRequest {
            key: Bytes::from(format!("failover/{e}/{w}/{}", n % 1000)),
            value: Bytes::from_static(&[b'v'; 256]),
            ..Default::default()
        };
        let sent = Instant::now();
        let result = tokio::time::timeout(timeout, c.call::<_, PutResponse>(grpc::PUT, &req)).await;
        let acked = Instant::now();
        if matches!(result, Ok(Ok(_))) {
            shared.acks.fetch_add(1, Ordering::Relaxed);
            if let Some(k) = *lock(&shared.killed_at) {
                if acked >= k {
                    lock(&shared.first_any).get_or_insert(acked);
                }
                if sent >= k {
                    lock(&shared.first_after).get_or_insert((acked, e));
                }
            }
        } else {
            shared.errors.fetch_add(1, Ordering::Relaxed);
            // A timed-out call may leave its connection stuck behind a dead peer: open a new one.
            conn = None;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}
