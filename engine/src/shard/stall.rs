//! Reporting a shard that stops polling its mailbox.
//!
//! A shard's loop is the only code that touches its state, so a round that blocks (a disk that
//! stops answering a sync, a defragmentation of a huge database, a bug that spins) stalls every
//! request for the shard's keys. [`StallWatch`], a thread of the member's own, reads each
//! shard's [`Heartbeat`] and warns *while* a round has run longer than the threshold (a shard
//! stuck for good is reported too), then once more when the shard polls again, with how long it
//! was away.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Weak;
use std::time::{Duration, Instant};

/// One shard's liveness as its loop reports it.
#[derive(Debug)]
pub struct Heartbeat {
    epoch: Instant,
    /// Nanoseconds after `epoch` at which the running round began; 0 while the shard waits for
    /// messages (an idle shard is not stalled).
    busy_since: AtomicU64,
    /// Stalls reported so far.
    stalls: AtomicU64,
    /// Why the shard's loop ended with an error, set once when it did: the health endpoints
    /// report it (which shard, and the storage or raft error) while the member exits.
    failure: std::sync::OnceLock<String>,
}

impl Heartbeat {
    /// A heartbeat whose times count from `epoch` (shared by every shard of a member so one
    /// watch thread can compare them with its own clock).
    pub fn new(epoch: Instant) -> Self {
        Self { epoch, busy_since: AtomicU64::new(0), stalls: AtomicU64::new(0), failure: std::sync::OnceLock::new() }
    }

    /// Records that the shard's loop ended with `reason`; the first reason stays.
    pub fn fail(&self, reason: String) {
        let _ = self.failure.set(reason);
    }

    /// Returns why the shard's loop ended with an error, if it did.
    pub fn failure(&self) -> Option<&str> {
        self.failure.get().map(String::as_str)
    }

    /// The loop starts a round.
    pub fn busy(&self) {
        // At least 1: 0 means idle.
        let nanos = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX).max(1);
        self.busy_since.store(nanos, Ordering::Relaxed);
    }

    /// The loop waits for messages.
    pub fn idle(&self) {
        self.busy_since.store(0, Ordering::Relaxed);
    }

    /// Whether the shard is running a round (rather than waiting for messages).
    pub fn is_busy(&self) -> bool {
        self.busy_since.load(Ordering::Relaxed) != 0
    }

    /// Returns how many stalls have been reported for this shard.
    pub fn stalls(&self) -> u64 {
        self.stalls.load(Ordering::Relaxed)
    }

    /// How long the running round has lasted at `now_nanos` (after the epoch), or `None` if the
    /// shard is idle.
    fn busy_for(&self, now_nanos: u64) -> Option<(u64, Duration)> {
        match self.busy_since.load(Ordering::Relaxed) {
            0 => None,
            since => Some((since, Duration::from_nanos(now_nanos.saturating_sub(since)))),
        }
    }
}

/// The thread that reports stalled shards. It ends by itself once every shard's heartbeat is
/// dropped (the member stopped).
#[derive(Debug)]
pub struct StallWatch;

impl StallWatch {
    /// Starts watching `shards` (shard n's heartbeat at index n), reporting a round that has
    /// lasted longer than `threshold`.
    ///
    /// # Errors
    /// The thread could not be started.
    pub fn spawn(
        epoch: Instant,
        shards: Vec<Weak<Heartbeat>>,
        threshold: Duration,
    ) -> std::io::Result<std::thread::JoinHandle<()>> {
        // A quarter of the threshold: a stall is reported at most 25% late, and the thread wakes
        // a handful of times a second at the default.
        let every = (threshold / 4).max(Duration::from_millis(1));
        std::thread::Builder::new().name("ballast-stall-watch".into()).spawn(move || {
            // Per shard: the start of the round last reported as stalled, until the shard moves on.
            let mut reported: Vec<Option<u64>> = vec![None; shards.len()];
            loop {
                std::thread::sleep(every);
                let now = u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
                let mut alive = false;
                for (shard, beat) in shards.iter().enumerate() {
                    let Some(beat) = beat.upgrade() else { continue };
                    alive = true;
                    let busy = beat.busy_for(now);
                    match (busy, reported[shard]) {
                        (Some((since, lasted)), None) if lasted > threshold => {
                            beat.stalls.fetch_add(1, Ordering::Relaxed);
                            reported[shard] = Some(since);
                            tracing::warn!(
                                shard,
                                stalled_ms = lasted.as_millis() as u64,
                                threshold_ms = threshold.as_millis() as u64,
                                "shard has not polled its mailbox; its requests wait"
                            );
                        }
                        (Some((since, _)), Some(stuck)) if since == stuck => {}
                        (_, Some(stuck)) => {
                            reported[shard] = None;
                            let away = Duration::from_nanos(now.saturating_sub(stuck));
                            tracing::warn!(
                                shard,
                                stalled_ms = away.as_millis() as u64,
                                "shard polls again after a stall"
                            );
                        }
                        _ => {}
                    }
                }
                if !alive {
                    return;
                }
            }
        })
    }
}

#[cfg(test)]
mod tests;
