//! The executor each shard runs on: a glommio `LocalExecutor` of its own, one thread that owns
//! the shard's state and polls nothing else.
//!
//! The shard's loop is one task; it awaits its mailbox (a channel the network plane's threads
//! send into; glommio wakes the executor when a send comes from a foreign thread) or its next
//! timer, and yields to the executor between rounds once its preemption budget is spent, so the
//! executor's own stall detector measures single rounds. RocksDB does its own file I/O, so the
//! executor's io_uring rings carry only the wake-ups and timers; its registered I/O memory is
//! kept at glommio's minimum.

use std::sync::Arc;

use glommio::{ExecutorJoinHandle, LocalExecutorBuilder, Placement};

use super::stall::{ExecutorStallHandler, Heartbeat};
use super::{Shard, ShardConfig};
use crate::error::{EngineError, Result};
use crate::storage::KvBackend;

/// glommio's floor for registered I/O memory; the shard does no I/O through the executor.
const IO_MEMORY_BYTES: usize = 64 << 10;

/// Where shard executors run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ShardPlacement {
    /// Any CPU, as the kernel schedules them. The default: on a machine where the network
    /// plane's threads and the shards outnumber the cores, pinned shards cannot move away from
    /// a busy core (measured in `benches/results`, see the README).
    #[default]
    Unbound,
    /// Shard `n` pinned to online CPU `n mod cpus`: one core per shard when there are as many
    /// cores as shards.
    PerCore,
}

/// Starts `shard` (shard number `index`) on an executor thread of its own.
///
/// # Errors
/// `Executor` when the executor cannot be created (for example io_uring is not available).
pub fn spawn<B: KvBackend + Clone + 'static>(
    shard: Shard<B>,
    index: usize,
    cfg: &ShardConfig,
    beat: Arc<Heartbeat>,
) -> Result<ExecutorJoinHandle<Result<()>>> {
    let placement = match cfg.placement {
        ShardPlacement::Unbound => Placement::Unbound,
        ShardPlacement::PerCore => {
            let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
            Placement::Fixed(index % cpus)
        }
    };
    LocalExecutorBuilder::new(placement)
        .name(&format!("ballast-shard-{index}"))
        .io_memory(IO_MEMORY_BYTES)
        .preempt_timer(cfg.preempt_interval)
        .detect_stalls(Some(Box::new(ExecutorStallHandler { threshold: cfg.stall_threshold })))
        .spawn(move || async move { shard.run(beat).await })
        .map_err(|e| EngineError::Executor { shard: index, reason: e.to_string() })
}
