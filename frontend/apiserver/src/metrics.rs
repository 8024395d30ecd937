//! The metric registry: request metrics in kube-apiserver's names and labels, which
//! `filters::metrics` records, flow control and audit count into, and `/metrics` renders.
//!
//! * `apiserver_request_total{verb,dry_run,group,version,resource,subresource,scope,component,code}`
//! * `apiserver_request_duration_seconds{verb,dry_run,group,version,resource,subresource,scope,component}`
//!   (kube's buckets; WATCH and CONNECT are not observed, their duration is the client's choice)
//! * `apiserver_current_inflight_requests{request_kind}` (set by flow control)
//! * `apiserver_longrunning_requests{verb,group,version,resource,subresource,scope,component}`
//! * `apiserver_audit_event_total`, `apiserver_audit_error_total{plugin}` (set by audit)
//!
//! Series live behind short mutex sections (no await inside); their number is bounded by
//! verbs × resources × codes.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;

use crate::body::Request;
use crate::request_info::{query_pairs, query_param, RequestInfo};

/// kube-apiserver's `apiserver_request_duration_seconds` buckets (seconds).
pub const DURATION_BUCKETS: [f64; 23] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0, 30.0,
    45.0, 60.0,
];

/// The label values of one request (without the code).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct RequestLabels {
    pub(crate) verb: String,
    dry_run: String,
    group: String,
    version: String,
    resource: String,
    subresource: String,
    scope: &'static str,
}

#[derive(Debug, Clone, Default)]
struct Histogram {
    buckets: [u64; DURATION_BUCKETS.len()],
    count: u64,
    sum: f64,
}

/// The metric registry, shared by the filters and `/metrics`.
#[derive(Debug, Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(RequestLabels, u16), u64>>,
    durations: Mutex<BTreeMap<RequestLabels, Histogram>>,
    longrunning: Mutex<BTreeMap<RequestLabels, i64>>,
    /// Read-only requests holding a max-in-flight slot.
    pub inflight_read_only: AtomicI64,
    /// Mutating requests holding a max-in-flight slot.
    pub inflight_mutating: AtomicI64,
    /// Audit events generated (`apiserver_audit_event_total`).
    pub audit_events: AtomicU64,
    /// Audit events dropped because the writer's buffer was full or the writer failed
    /// (`apiserver_audit_error_total{plugin="log"}`).
    pub audit_errors: AtomicU64,
}

/// kube's `CleanScope`.
fn scope(info: &RequestInfo) -> &'static str {
    if !info.name.is_empty() || info.verb == "create" {
        "resource"
    } else if !info.namespace.is_empty() {
        "namespace"
    } else if info.is_resource_request {
        "cluster"
    } else {
        ""
    }
}

/// kube's reported verb: the HTTP method, with LIST and WATCH for collection reads, APPLY for
/// server-side apply and CONNECT for connect subresources.
fn reported_verb(info: &RequestInfo, req: &Request) -> String {
    if !info.is_resource_request {
        return req.method().as_str().to_ascii_uppercase();
    }
    let apply = req
        .headers()
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/apply-patch"));
    match info.verb.as_str() {
        "get" => "GET",
        "list" => "LIST",
        "watch" => "WATCH",
        "create" => "POST",
        "update" => "PUT",
        "patch" if apply => "APPLY",
        "patch" => "PATCH",
        "delete" => "DELETE",
        "deletecollection" => "DELETECOLLECTION",
        _ if matches!(info.subresource.as_str(), "exec" | "attach" | "portforward" | "proxy") => "CONNECT",
        other => return other.to_ascii_uppercase(),
    }
    .to_string()
}

pub(crate) fn labels(info: &RequestInfo, req: &Request) -> RequestLabels {
    let pairs = query_pairs(req.uri().query());
    let dry_run = query_param(&pairs, "dryRun").unwrap_or("").to_string();
    RequestLabels {
        verb: reported_verb(info, req),
        dry_run,
        group: info.api_group.clone(),
        version: info.api_version.clone(),
        resource: info.resource.clone(),
        subresource: info.subresource.clone(),
        scope: scope(info),
    }
}

fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn label_text(l: &RequestLabels, with_dry_run: bool) -> String {
    let mut s = String::from("component=\"apiserver\"");
    if with_dry_run {
        let _ = write!(s, ",dry_run=\"{}\"", escape(&l.dry_run));
    }
    let _ = write!(
        s,
        ",group=\"{}\",resource=\"{}\",scope=\"{}\",subresource=\"{}\",verb=\"{}\",version=\"{}\"",
        escape(&l.group),
        escape(&l.resource),
        l.scope,
        escape(&l.subresource),
        escape(&l.verb),
        escape(&l.version)
    );
    s
}

impl Metrics {
    pub(crate) fn record(&self, labels: &RequestLabels, code: u16, seconds: Option<f64>) {
        if let Ok(mut requests) = self.requests.lock() {
            *requests.entry((labels.clone(), code)).or_default() += 1;
        }
        let Some(seconds) = seconds else { return };
        if let Ok(mut durations) = self.durations.lock() {
            let h = durations.entry(labels.clone()).or_default();
            h.count += 1;
            h.sum += seconds;
            for (i, bound) in DURATION_BUCKETS.iter().enumerate() {
                if seconds <= *bound {
                    h.buckets[i] += 1;
                }
            }
        }
    }

    pub(crate) fn add_longrunning(&self, labels: &RequestLabels, delta: i64) {
        if let Ok(mut longrunning) = self.longrunning.lock() {
            *longrunning.entry(labels.clone()).or_default() += delta;
        }
    }

    /// Renders every metric in the Prometheus text format (version 0.0.4).
    pub fn render(&self) -> String {
        let mut out = String::new();
        out.push_str("# HELP apiserver_request_total Requests answered, by verb, dry run, group, version, resource, subresource, scope, component and HTTP code.\n");
        out.push_str("# TYPE apiserver_request_total counter\n");
        if let Ok(requests) = self.requests.lock() {
            for ((l, code), n) in requests.iter() {
                let _ = writeln!(out, "apiserver_request_total{{code=\"{code}\",{}}} {n}", label_text(l, true));
            }
        }
        out.push_str("# HELP apiserver_request_duration_seconds Time from receiving a request to its response, by verb, dry run, group, version, resource, subresource, scope and component.\n");
        out.push_str("# TYPE apiserver_request_duration_seconds histogram\n");
        if let Ok(durations) = self.durations.lock() {
            for (l, h) in durations.iter() {
                let labels = label_text(l, true);
                for (i, bound) in DURATION_BUCKETS.iter().enumerate() {
                    let _ = writeln!(
                        out,
                        "apiserver_request_duration_seconds_bucket{{{labels},le=\"{bound}\"}} {}",
                        h.buckets[i]
                    );
                }
                let _ = writeln!(out, "apiserver_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}", h.count);
                let _ = writeln!(out, "apiserver_request_duration_seconds_sum{{{labels}}} {}", h.sum);
                let _ = writeln!(out, "apiserver_request_duration_seconds_count{{{labels}}} {}", h.count);
            }
        }
        out.push_str("# HELP apiserver_current_inflight_requests Requests holding a max-in-flight slot, by kind.\n");
        out.push_str("# TYPE apiserver_current_inflight_requests gauge\n");
        let _ = writeln!(
            out,
            "apiserver_current_inflight_requests{{request_kind=\"mutating\"}} {}",
            self.inflight_mutating.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "apiserver_current_inflight_requests{{request_kind=\"readOnly\"}} {}",
            self.inflight_read_only.load(Ordering::Relaxed)
        );
        out.push_str("# HELP apiserver_longrunning_requests Long-running requests (watches, connects) now open.\n");
        out.push_str("# TYPE apiserver_longrunning_requests gauge\n");
        if let Ok(longrunning) = self.longrunning.lock() {
            for (l, n) in longrunning.iter() {
                let _ = writeln!(out, "apiserver_longrunning_requests{{{}}} {n}", label_text(l, false));
            }
        }
        out.push_str("# HELP apiserver_audit_event_total Audit events generated and sent to the audit backend.\n");
        out.push_str("# TYPE apiserver_audit_event_total counter\n");
        let _ = writeln!(out, "apiserver_audit_event_total {}", self.audit_events.load(Ordering::Relaxed));
        out.push_str("# HELP apiserver_audit_error_total Audit events the backend failed to write or dropped.\n");
        out.push_str("# TYPE apiserver_audit_error_total counter\n");
        let _ = writeln!(
            out,
            "apiserver_audit_error_total{{plugin=\"log\"}} {}",
            self.audit_errors.load(Ordering::Relaxed)
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_buckets() {
        let m = Metrics::default();
        let info = crate::request_info::parse(&http::Method::GET, "/api/v1/namespaces", None);
        let req =
            http::Request::builder().uri("/api/v1/namespaces").body(crate::body::request_body("")).expect("request");
        let l = labels(&info, &req);
        m.record(&l, 200, Some(0.03));
        m.record(&l, 200, Some(0.3));
        let text = m.render();
        assert!(text.contains(
            "apiserver_request_total{code=\"200\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"namespaces\",scope=\"cluster\",subresource=\"\",verb=\"LIST\",version=\"v1\"} 2"
        ));
        assert!(text.contains("le=\"0.025\"} 0"));
        assert!(text.contains("le=\"0.05\"} 1"));
        assert!(text.contains("le=\"+Inf\"} 2"));
    }
}
