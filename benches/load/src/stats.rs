//! The shared result types (`ballast-bench-stats`), and which server this run measures.

use std::sync::OnceLock;

pub(crate) use ballast_bench_stats::{Outcome, Samples};

/// The server process whose CPU time results report, when given (`--server-pid`).
pub(crate) static SERVER_PID: OnceLock<u32> = OnceLock::new();

/// Server processes whose CPU times are summed in results (`--server-pids`, e.g. every member of
/// a cluster); when given, they are measured instead of `--server-pid`'s alone.
pub(crate) static SERVER_PIDS: OnceLock<Vec<u32>> = OnceLock::new();

/// CPU of the measured server (or servers) and of this client from now on (see
/// [`ballast_bench_stats::CpuMark`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct CpuMark {
    server: Option<f64>,
    client: Option<f64>,
}

impl CpuMark {
    pub(crate) fn now() -> Self {
        Self { server: server_cpu(), client: ballast_bench_stats::cpu_secs("self") }
    }

    /// Returns (server, client) CPU seconds used since `self`.
    pub(crate) fn since(self) -> (Option<f64>, Option<f64>) {
        let now = Self::now();
        (now.server.zip(self.server).map(|(b, a)| b - a), now.client.zip(self.client).map(|(b, a)| b - a))
    }
}

/// CPU seconds used so far by the measured server processes together; None when one of them
/// cannot be read (or none was given).
fn server_cpu() -> Option<f64> {
    match SERVER_PIDS.get() {
        Some(pids) if !pids.is_empty() => {
            pids.iter().map(|p| ballast_bench_stats::cpu_secs(&p.to_string())).sum::<Option<f64>>()
        }
        _ => SERVER_PID.get().and_then(|p| ballast_bench_stats::cpu_secs(&p.to_string())),
    }
}
