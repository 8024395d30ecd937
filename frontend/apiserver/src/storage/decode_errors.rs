//! Stored values that could not be decoded: logged and counted, never mistaken for absence.
//!
//! A value under a resource's keys may not be an object this server can read (another writer
//! sharing the store, such as a kube-apiserver storing protobuf, or a damaged value). Callers
//! surface it as kube does (a watch ends with an `ERROR` event, a read answers 500, both naming
//! the key) and record it here; nothing may treat it as a deletion or as a missing object.
//!
//! The count is kube's `apiserver_storage_decode_errors_total{resource}`. It is process-wide,
//! as kube's metric registry is, because decoding happens in places that share no state (the
//! watch cache, a watch's own etcd stream, the authorizer).

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Decode failures by resource.
static DECODE_ERRORS: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());

/// Logs an undecodable value at `key` of `resource` and counts it.
pub fn record(resource: &str, key: &[u8], error: &str) {
    tracing::warn!(resource, key = %String::from_utf8_lossy(key), error, "stored value cannot be decoded");
    *DECODE_ERRORS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .entry(resource.to_string())
        .or_default() += 1;
}

/// Returns how many undecodable values of `resource` were met so far.
pub fn count(resource: &str) -> u64 {
    DECODE_ERRORS.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(resource).copied().unwrap_or(0)
}

/// Appends the counter to a Prometheus text exposition.
pub fn render_metrics(out: &mut String) {
    use std::fmt::Write as _;
    out.push_str(
        "# HELP apiserver_storage_decode_errors_total Number of stored object decode errors split by object type\n",
    );
    out.push_str("# TYPE apiserver_storage_decode_errors_total counter\n");
    let counts = DECODE_ERRORS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    for (resource, n) in counts.iter() {
        let _ = writeln!(out, "apiserver_storage_decode_errors_total{{resource=\"{resource}\"}} {n}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_counted_per_resource_and_rendered() {
        let before = count("decode-errors-test");
        record("decode-errors-test", b"/registry/x/a", "not JSON");
        record("decode-errors-test", b"/registry/x/b", "not JSON");
        assert_eq!(count("decode-errors-test"), before + 2);
        let mut out = String::new();
        render_metrics(&mut out);
        assert!(
            out.contains(&format!(
                "apiserver_storage_decode_errors_total{{resource=\"decode-errors-test\"}} {}",
                before + 2
            )),
            "{out}"
        );
    }
}
