//! Time, behind a seam: the only place the engine reads the clock, so tests can drive leases
//! and intervals with [`ManualClock`] instead of sleeping.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// A source of monotonic time.
pub trait Clock: Send + Sync + std::fmt::Debug + 'static {
    /// Returns the current instant.
    fn now(&self) -> Instant;
}

/// The system's monotonic clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[allow(clippy::disallowed_methods)] // The one sanctioned call of Instant::now.
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// Returns the wall clock's seconds since the Unix epoch (0 before it): etcd mixes them into
/// the ID of a member added to a running cluster.
#[allow(clippy::disallowed_methods)] // The one sanctioned call of SystemTime::now.
pub fn unix_seconds() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Returns the wall clock's microseconds since the Unix epoch (0 before it): the round trace's
/// time (`round_trace`), which must line up between the members on one machine.
#[allow(clippy::disallowed_methods)] // Wall-clock time for the trace, as `unix_seconds`.
pub fn unix_micros() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

/// A clock that moves only when told to.
#[derive(Clone, Debug)]
pub struct ManualClock {
    now: Arc<Mutex<Instant>>,
}

impl ManualClock {
    /// Returns a clock stopped at the system's current instant.
    pub fn new() -> Self {
        Self { now: Arc::new(Mutex::new(SystemClock.now())) }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        *self.now.lock() += by;
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        *self.now.lock()
    }
}
