//! Latency samples, CPU accounting and the JSON result line.

use std::sync::OnceLock;
use std::time::Duration;

/// The server process whose CPU time results report, when given (`--server-pid`).
pub(crate) static SERVER_PID: OnceLock<u32> = OnceLock::new();

/// CPU seconds (user + system) used so far by `pid` ("self" for this process), from
/// `/proc/<pid>/stat`, whose times are in USER_HZ (100 per second on Linux).
fn cpu_secs(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces; the fields after its closing parenthesis do not.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

/// CPU used by the server and by this client between [`CpuMark::now`] and [`CpuMark::since`].
/// Both share the machine's cores, so throughput alone understates what the server could do.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CpuMark {
    server: Option<f64>,
    client: Option<f64>,
}

impl CpuMark {
    pub(crate) fn now() -> Self {
        Self { server: SERVER_PID.get().and_then(|p| cpu_secs(&p.to_string())), client: cpu_secs("self") }
    }

    /// Returns (server, client) CPU seconds used since `self`.
    pub(crate) fn since(self) -> (Option<f64>, Option<f64>) {
        let now = Self::now();
        (now.server.zip(self.server).map(|(b, a)| b - a), now.client.zip(self.client).map(|(b, a)| b - a))
    }
}

/// Latencies in microseconds.
#[derive(Debug, Default)]
pub(crate) struct Samples {
    us: Vec<u32>,
}

impl Samples {
    pub(crate) fn push(&mut self, d: Duration) {
        self.us.push(d.as_micros().min(u128::from(u32::MAX)) as u32);
    }

    pub(crate) fn extend(&mut self, other: Samples) {
        self.us.extend(other.us);
    }

    /// Returns the `q` quantile in milliseconds (0 when empty).
    pub(crate) fn quantile_ms(&mut self, q: f64) -> f64 {
        if self.us.is_empty() {
            return 0.0;
        }
        self.us.sort_unstable();
        let i = ((self.us.len() as f64 - 1.0) * q).round() as usize;
        f64::from(self.us[i]) / 1000.0
    }
}

/// One scenario's result.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub(crate) scenario: String,
    pub(crate) ops: u64,
    pub(crate) errors: u64,
    pub(crate) secs: f64,
    pub(crate) latency: Samples,
    /// Scenario-specific figures, printed as extra JSON fields.
    pub(crate) extra: Vec<(&'static str, f64)>,
    /// Server and client CPU seconds over the timed part.
    pub(crate) cpu: (Option<f64>, Option<f64>),
}

impl Outcome {
    pub(crate) fn into_json(mut self) -> String {
        let rate = if self.secs > 0.0 { self.ops as f64 / self.secs } else { 0.0 };
        let mut s = format!(
            "{{\"scenario\":\"{}\",\"ops\":{},\"errors\":{},\"secs\":{:.2},\"ops_per_sec\":{:.1},\"p50_ms\":{:.3},\"p99_ms\":{:.3},\"max_ms\":{:.3}",
            self.scenario,
            self.ops,
            self.errors,
            self.secs,
            rate,
            self.latency.quantile_ms(0.5),
            self.latency.quantile_ms(0.99),
            self.latency.quantile_ms(1.0)
        );
        if let Some(server) = self.cpu.0 {
            s.push_str(&format!(",\"server_cpu_s\":{server:.2}"));
            if self.ops > 0 {
                s.push_str(&format!(",\"server_cpu_us_per_op\":{:.1}", server * 1e6 / self.ops as f64));
            }
        }
        if let Some(client) = self.cpu.1 {
            s.push_str(&format!(",\"client_cpu_s\":{client:.2}"));
        }
        for (k, v) in &self.extra {
            s.push_str(&format!(",\"{k}\":{v:.3}"));
        }
        s.push('}');
        s
    }
}
