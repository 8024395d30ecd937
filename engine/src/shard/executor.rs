//! The thread each shard runs on: one OS thread per shard (`ballast-shard-<n>`) that owns the
//! shard's state and runs its loop, [`Shard::run`], and nothing else.
//!
//! Between rounds the loop blocks on its mailbox with a deadline (its next tick, or the watch
//! catch-up interval while watchers lag). The network plane's tokio threads `try_send` into the
//! mailbox, and a send to a waiting shard unparks its thread. RocksDB does its own blocking file
//! I/O, so an async executor would have nothing but that mailbox and one timer to multiplex.
//!
//! Why not glommio, which ARCHITECTURE.md names: glommio 0.9.0 (the release on crates.io) can
//! park its executor for good while the shard's task is runnable. When the executor's preemption
//! timer fires between its I/O poll and its run of the task queues, `run_task_queues` reports
//! "nothing ran" and the executor sleeps in `io_uring_enter`; the task, already woken, is never
//! woken again, so every later request to the shard times out. Our test suite hit it about once
//! in twenty full runs (a shard stalled for good in `slow_watcher`); a program that feeds a
//! glommio task from another thread hangs within 100,000 messages at a 100 µs preemption timer
//! and at once at 1 µs. The fix is in glommio's repository, not in a release. A plain thread keeps
//! what the design asks of the executor (one owner thread per shard, message passing only) and
//! measured the same as glommio on the put and txn benchmarks (benches/README.md).

use std::sync::Arc;
use std::thread::JoinHandle;

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

use super::stall::Heartbeat;
use super::{Shard, ShardConfig};
use crate::error::{EngineError, Result};
use crate::storage::KvBackend;

/// Where shard threads run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ShardPlacement {
    /// Any CPU, as the kernel schedules them. The default: on a machine where the network
    /// plane's threads and the shards outnumber the cores, pinned shards cannot move away from
    /// a busy core (measured in `benches/results`, see the README).
    #[default]
    Unbound,
    /// Shard `n` pinned to the `n mod k`-th of the `k` CPUs the process may run on: one core per
    /// shard when there are as many cores as shards.
    PerCore,
}

/// Starts `shard` (shard number `index`) on a thread of its own.
///
/// # Errors
/// `Executor` when the thread cannot be started or pinned.
pub fn spawn<B: KvBackend + Clone + Send + 'static>(
    shard: Shard<B>,
    index: usize,
    cfg: &ShardConfig,
    beat: Arc<Heartbeat>,
) -> Result<JoinHandle<Result<()>>> {
    let fail = |reason: String| EngineError::Executor { shard: index, reason };
    let cpu = match cfg.placement {
        ShardPlacement::Unbound => None,
        ShardPlacement::PerCore => Some(nth_allowed_cpu(index).map_err(fail)?),
    };
    // The thread pins itself before it runs anything and reports whether that worked, so a
    // placement that cannot be had fails the start rather than a shard later.
    let (pinned_tx, pinned_rx) = std::sync::mpsc::sync_channel::<std::result::Result<(), String>>(1);
    let thread = std::thread::Builder::new()
        .name(format!("ballast-shard-{index}"))
        .spawn(move || {
            crate::round_trace::set_shard(index as u32);
            let pinned = cpu.map_or(Ok(()), pin_current_thread);
            let ok = pinned.is_ok();
            let _ = pinned_tx.send(pinned);
            if !ok {
                return Ok(()); // the spawner reports the failure
            }
            let result = shard.run(&beat);
            // What the round trace buffered, written before the member exits.
            crate::round_trace::flush();
            if let Err(e) = &result {
                // Said at once, at error level, with the cause: every request to this shard fails
                // from now on and the member exits (as etcd does on a fatal storage error).
                tracing::error!(shard = index, error = %e, "shard stopped on an error; the member exits");
                beat.fail(e.to_string());
            }
            result
        })
        .map_err(|e| fail(e.to_string()))?;
    match pinned_rx.recv() {
        Ok(Ok(())) => Ok(thread),
        Ok(Err(reason)) => Err(fail(reason)),
        Err(_) => Err(fail("the shard thread ended before it started".into())),
    }
}

/// Returns the `index mod k`-th of the `k` CPUs this process may run on.
fn nth_allowed_cpu(index: usize) -> std::result::Result<usize, String> {
    let allowed = sched_getaffinity(Pid::from_raw(0)).map_err(|e| format!("reading the CPU affinity: {e}"))?;
    let cpus: Vec<usize> = (0..CpuSet::count()).filter(|&c| allowed.is_set(c).unwrap_or(false)).collect();
    if cpus.is_empty() {
        return Err("the process may run on no CPU".into());
    }
    Ok(cpus[index % cpus.len()])
}

fn pin_current_thread(cpu: usize) -> std::result::Result<(), String> {
    let mut set = CpuSet::new();
    set.set(cpu).map_err(|e| format!("CPU {cpu}: {e}"))?;
    // Pid 0 is the calling thread.
    sched_setaffinity(Pid::from_raw(0), &set).map_err(|e| format!("pinning to CPU {cpu}: {e}"))
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // these tests measure real threads and deadlines
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::clock::SystemClock;
    use crate::header::HeaderInfo;
    use crate::mvcc::RevisionCounter;
    use crate::shard::msg::ShardMsg;
    use crate::storage::mem::MemBackend;

    /// Opens a shard on an empty in-memory backend and starts it on its thread as shard `index`.
    fn start(index: usize, placement: ShardPlacement) -> (JoinHandle<Result<()>>, crate::shard::ShardHandle) {
        let cfg = ShardConfig { placement, ..ShardConfig::default() };
        let ids = HeaderInfo { cluster_id: 1, member_id: 2, raft_term: 0 };
        let (shard, handle) = Shard::open(
            MemBackend::new(),
            cfg.clone(),
            Arc::new(RevisionCounter::default()),
            ids,
            Arc::new(SystemClock),
            crate::shard::ShardGroup::alone(index as u32),
        )
        .expect("open a shard");
        let beat = Arc::new(Heartbeat::new(Instant::now()));
        (spawn(shard, index, &cfg, beat).expect("start the shard thread"), handle)
    }

    /// Sends a Status request and waits for its answer on the calling (non-tokio) thread.
    fn must_status(h: &crate::shard::ShardHandle, what: &str) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        h.send(ShardMsg::Status(tx)).expect("the mailbox takes the request");
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut rx = rx;
        loop {
            match rx.try_recv() {
                Ok(r) => {
                    r.expect("a status");
                    return;
                }
                Err(tokio::sync::oneshot::error::TryRecvError::Empty) => {
                    assert!(Instant::now() < deadline, "{what}: the shard did not answer within 20 s");
                    std::thread::yield_now();
                }
                Err(e) => panic!("{what}: {e}"),
            }
        }
    }

    /// The shard's thread must pick up every request sent from other threads, whether it is
    /// waiting on its mailbox or busy when the send comes: a lost wake-up leaves a request (and
    /// every one after it) unanswered, as with the glommio executor this replaced (module doc).
    #[test]
    fn every_request_from_other_threads_is_answered() {
        let (thread, handle) = start(3, ShardPlacement::Unbound);
        let senders: Vec<_> = (0..2)
            .map(|t| {
                let h = handle.clone();
                std::thread::spawn(move || {
                    for i in 0..20_000 {
                        must_status(&h, &format!("sender {t}, request {i}"));
                    }
                })
            })
            .collect();
        for s in senders {
            s.join().expect("a sender");
        }
        handle.send(ShardMsg::Shutdown).expect("shutdown");
        thread.join().expect("the shard thread").expect("the shard stops cleanly");
    }

    /// `PerCore` pins the shard's thread to one CPU, the one its index picks from those allowed.
    #[test]
    fn per_core_placement_pins_the_shard_thread() {
        let index = 5;
        let (thread, handle) = start(index, ShardPlacement::PerCore);
        must_status(&handle, "pinned shard");
        let want = nth_allowed_cpu(index).expect("an allowed CPU");
        let name = format!("ballast-shard-{index}");
        let pinned: Vec<String> = std::fs::read_dir("/proc/self/task")
            .expect("/proc/self/task")
            .filter_map(|t| t.ok())
            .filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == name))
            .map(|t| {
                let status = std::fs::read_to_string(t.path().join("status")).expect("a thread's status");
                let line = status.lines().find(|l| l.starts_with("Cpus_allowed_list:")).expect("Cpus_allowed_list");
                line.trim_start_matches("Cpus_allowed_list:").trim().to_string()
            })
            .collect();
        assert_eq!(pinned, vec![want.to_string()], "the CPUs {name} may run on");
        handle.send(ShardMsg::Shutdown).expect("shutdown");
        thread.join().expect("the shard thread").expect("the shard stops cleanly");
    }
}
