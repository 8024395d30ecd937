//! The shared result types (`ballast-bench-stats`), and which server this run measures.

use std::sync::OnceLock;

pub(crate) use ballast_bench_stats::{Outcome, Samples};

/// The server process whose CPU time results report, when given (`--server-pid`).
pub(crate) static SERVER_PID: OnceLock<u32> = OnceLock::new();

/// CPU of the measured server and of this client from now on (see [`ballast_bench_stats::CpuMark`]).
pub(crate) struct CpuMark;

impl CpuMark {
    pub(crate) fn now() -> ballast_bench_stats::CpuMark {
        ballast_bench_stats::CpuMark::now(SERVER_PID.get().copied())
    }
}
