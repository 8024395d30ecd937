//! Latency samples, process memory and CPU readings, and the JSON result line.

use std::time::Duration;

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

    pub(crate) fn len(&self) -> usize {
        self.us.len()
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

/// Reads a `kB` field (`VmRSS`, `VmHWM`) of `/proc/<pid>/status`.
pub(crate) fn status_kb(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find(|l| l.starts_with(field) && l[field.len()..].starts_with(':'))?;
    line[field.len() + 1..].trim().trim_end_matches("kB").trim().parse().ok()
}

/// CPU seconds (user + system) used so far by `pid`, from `/proc/<pid>/stat` (USER_HZ = 100).
pub(crate) fn cpu_secs(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
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
        for (k, v) in &self.extra {
            s.push_str(&format!(",\"{k}\":{v:.3}"));
        }
        s.push('}');
        s
    }
}
