//! What both load tools (`ballast-load` for the etcd protocol, `ballast-kube-load` for the
//! Kubernetes API) record and print, so their result lines have one shape and
//! `benches/run.sh` and `benches/kube-run.sh` read them alike: latency [`Samples`], process
//! CPU ([`cpu_secs`], [`CpuMark`]) and memory ([`status_kb`]) from `/proc`, the
//! [`Outcome`] JSON line, and the command-line arguments every scenario run takes
//! ([`RunArgs`]).

use std::time::Duration;

/// What every `run` takes besides its target: the scenario, how long, and whose resources to
/// report.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Scenario id (see `list`).
    #[arg(long)]
    pub scenario: String,
    /// How long the timed part runs, in seconds.
    #[arg(long, default_value_t = 10)]
    pub duration: u64,
    /// The server's process id: its CPU time (and for some scenarios memory) over the timed
    /// part is reported (same machine).
    #[arg(long)]
    pub server_pid: Option<u32>,
}

impl RunArgs {
    /// Returns the timed part's length.
    pub fn duration(&self) -> Duration {
        Duration::from_secs(self.duration)
    }
}

/// Prints scenario ids, one per line (the `list` command).
pub fn print_scenarios(ids: &[&str]) {
    for id in ids {
        println!("{id}");
    }
}

/// Latencies in microseconds.
#[derive(Debug, Default)]
pub struct Samples {
    us: Vec<u32>,
}

impl Samples {
    /// Records one latency (saturating at about 71 minutes).
    pub fn push(&mut self, d: Duration) {
        self.us.push(d.as_micros().min(u128::from(u32::MAX)) as u32);
    }

    /// Takes in another worker's samples.
    pub fn extend(&mut self, other: Samples) {
        self.us.extend(other.us);
    }

    /// Returns how many latencies were recorded.
    pub fn len(&self) -> usize {
        self.us.len()
    }

    /// Returns whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.us.is_empty()
    }

    /// Returns the `q` quantile in milliseconds (0 when empty).
    pub fn quantile_ms(&mut self, q: f64) -> f64 {
        if self.us.is_empty() {
            return 0.0;
        }
        self.us.sort_unstable();
        let i = ((self.us.len() as f64 - 1.0) * q).round() as usize;
        f64::from(self.us[i]) / 1000.0
    }
}

/// CPU seconds (user + system) used so far by `pid` ("self" for this process), from
/// `/proc/<pid>/stat`, whose times are in USER_HZ (100 per second on Linux).
pub fn cpu_secs(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces; the fields after its closing parenthesis do not.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

/// Reads a `kB` field (`VmRSS`, `VmHWM`) of `/proc/<pid>/status`.
pub fn status_kb(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find(|l| l.starts_with(field) && l[field.len()..].starts_with(':'))?;
    line[field.len() + 1..].trim().trim_end_matches("kB").trim().parse().ok()
}

/// CPU used by the server and by this client between [`CpuMark::now`] and [`CpuMark::since`].
/// Both share the machine's cores, so throughput alone understates what the server could do.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuMark {
    server_pid: Option<u32>,
    server: Option<f64>,
    client: Option<f64>,
}

impl CpuMark {
    /// Reads the CPU time of `server_pid` (when given) and of this process.
    pub fn now(server_pid: Option<u32>) -> Self {
        Self { server_pid, server: server_pid.and_then(|p| cpu_secs(&p.to_string())), client: cpu_secs("self") }
    }

    /// Returns (server, client) CPU seconds used since `self`.
    pub fn since(self) -> (Option<f64>, Option<f64>) {
        let now = Self::now(self.server_pid);
        (now.server.zip(self.server).map(|(b, a)| b - a), now.client.zip(self.client).map(|(b, a)| b - a))
    }
}

/// One scenario's result.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The scenario id.
    pub scenario: String,
    /// Completed operations in the timed part.
    pub ops: u64,
    /// Failed operations.
    pub errors: u64,
    /// Length of the timed part.
    pub secs: f64,
    /// One latency per completed operation.
    pub latency: Samples,
    /// Scenario-specific figures, printed as extra JSON fields.
    pub extra: Vec<(&'static str, f64)>,
    /// Server and client CPU seconds over the timed part.
    pub cpu: (Option<f64>, Option<f64>),
}

impl Outcome {
    /// Returns the result as one JSON line.
    pub fn into_json(mut self) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_and_the_result_line() {
        let mut out = Outcome { scenario: "s".into(), ops: 4, secs: 2.0, cpu: (Some(1.0), None), ..Outcome::default() };
        for ms in [4, 1, 3, 2] {
            out.latency.push(Duration::from_millis(ms));
        }
        out.extra.push(("items", 7.0));
        let line: String = out.into_json();
        assert!(
            line.starts_with(r#"{"scenario":"s","ops":4,"errors":0,"secs":2.00,"ops_per_sec":2.0,"p50_ms":3.000"#),
            "{line}"
        );
        assert!(
            line.ends_with(r#""max_ms":4.000,"server_cpu_s":1.00,"server_cpu_us_per_op":250000.0,"items":7.000}"#),
            "{line}"
        );
    }

    #[test]
    fn this_process_has_cpu_and_memory_readings() {
        assert!(cpu_secs("self").is_some());
        assert!(status_kb(std::process::id(), "VmRSS").is_some_and(|kb| kb > 0));
        assert_eq!(status_kb(std::process::id(), "NoSuchField"), None);
    }
}
