//! The plain HTTP endpoints on the client port (and on `--listen-metrics-urls`), through curl:
//! `/health`, `/version`, `/metrics` with etcd's series names, beside gRPC on the same port.

use std::process::Command;
use std::time::Duration;

use crate::harness::{free_port, Server, Target};

both_targets!(health_version_and_not_found, metrics_names_and_grpc_counts);

/// `curl -s -w '\n%{http_code}'`: returns (status, body).
fn curl(url: &str) -> (u16, String) {
    let out =
        Command::new("curl").args(["-s", "--max-time", "10", "-w", "\n%{http_code}", url]).output().expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').expect("curl's status line");
    (code.trim().parse().expect("status code"), body.to_string())
}

fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("bad json {e}: {body}"))
}

async fn health_version_and_not_found(s: Server) {
    for q in ["", "?exclude=NOSPACE", "?serializable=true"] {
        let (code, body) = curl(&format!("{}/health{q}", s.url()));
        assert_eq!(code, 200, "/health{q}: {body}");
        let j = json(&body);
        assert_eq!(j["health"].as_str(), Some("true"), "{body}");
        if s.target.is_ballast() {
            // etcd 3.5's answer (3.4 has no reason field); Ballast reports 3.5.
            assert_eq!(j["reason"].as_str(), Some(""), "{body}");
        }
    }
    let (code, body) = curl(&format!("{}/version", s.url()));
    assert_eq!(code, 200);
    let v = json(&body);
    assert!(v["etcdserver"].as_str().is_some_and(|v| v.starts_with("3.")), "{body}");
    assert!(v["etcdcluster"].as_str().is_some_and(|v| v.starts_with("3.") && v.ends_with(".0")), "{body}");
    assert_eq!(curl(&format!("{}/nope", s.url())), (404, "404 page not found\n".to_string()));
    // Scrapes are answered whatever the method; the probes answer GET only.
    for method in ["POST", "PUT", "DELETE"] {
        let code = |path: &str| {
            let out = Command::new("curl")
                .args(["-s", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}", "-X", method])
                .arg(format!("{}/{path}", s.url()))
                .output()
                .expect("curl");
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        assert_eq!((code("metrics"), code("health"), code("version")), ("200".into(), "405".into(), "405".into()));
    }
    if s.target.is_ballast() {
        // etcd 3.6's probes; 3.4 has none.
        assert_eq!(curl(&format!("{}/livez", s.url())), (200, "ok".to_string()));
        assert_eq!(curl(&format!("{}/readyz", s.url())), (200, "ok".to_string()));
    }
    // gRPC on the same port still works.
    let mut c = s.client().await;
    c.put("k", "v", None).await.expect("put beside HTTP");
}

/// Returns the value of the series line `name{labels}` (or `name` alone), if any.
fn series(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')).and_then(|v| v.parse().ok()))
}

const ETCD_SERIES: [&str; 9] = [
    "etcd_server_has_leader",
    "etcd_server_leader_changes_seen_total",
    "etcd_server_proposals_committed_total",
    "etcd_server_proposals_applied_total",
    "etcd_server_proposals_pending",
    "etcd_server_proposals_failed_total",
    "etcd_disk_wal_fsync_duration_seconds_count",
    "etcd_disk_backend_commit_duration_seconds_count",
    "etcd_mvcc_db_total_size_in_bytes",
];

async fn metrics_names_and_grpc_counts(s: Server) {
    let mut c = s.client().await;
    // Puts run while the scrapes do: a scrape answers under load.
    let load = tokio::spawn(async move {
        for i in 0..200 {
            c.put(format!("m/{i}"), "v", None).await.expect("put");
        }
        c.get("m/0", None).await.expect("get");
        let _ = c.get("", None).await; // InvalidArgument: "key is not provided"
    });
    for _ in 0..5 {
        let (code, text) = curl(&format!("{}/metrics", s.url()));
        assert_eq!(code, 200);
        assert_eq!(series(&text, "etcd_server_has_leader"), Some(1.0), "{text}");
    }
    load.await.expect("load");
    let (_, text) = curl(&format!("{}/metrics", s.url()));
    for name in ETCD_SERIES {
        assert!(series(&text, name).is_some(), "{name} missing");
    }
    assert!(series(&text, "etcd_server_leader_changes_seen_total") >= Some(1.0));
    assert!(series(&text, "etcd_server_proposals_applied_total") >= Some(200.0), "{text}");
    assert!(series(&text, "etcd_disk_wal_fsync_duration_seconds_count") >= Some(1.0));
    assert!(series(&text, "etcd_mvcc_db_total_size_in_bytes") > Some(0.0));
    assert!(text.contains("etcd_disk_wal_fsync_duration_seconds_bucket{le=\"+Inf\"}"));
    let put = "grpc_server_handled_total{grpc_code=\"OK\",grpc_method=\"Put\",grpc_service=\"etcdserverpb.KV\",grpc_type=\"unary\"}";
    assert!(series(&text, put) >= Some(200.0), "{text}");
    let bad = "grpc_server_handled_total{grpc_code=\"InvalidArgument\",grpc_method=\"Range\",grpc_service=\"etcdserverpb.KV\",grpc_type=\"unary\"}";
    assert_eq!(series(&text, bad), Some(1.0), "{text}");
    if s.target.is_ballast() {
        assert_eq!(series(&text, "ballast_shard_has_leader{shard=\"0\"}"), Some(1.0), "{text}");
        assert!(series(&text, "ballast_shard_mailbox_depth{shard=\"0\"}").is_some());
        assert!(series(&text, "ballast_shard_watchers{shard=\"0\"}").is_some());
    }
}

/// `--listen-metrics-urls`: a plain HTTP listener with `/metrics` and `/health`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_metrics_urls() {
    for target in [Target::Ballast, Target::Etcd] {
        let port = free_port();
        let url = format!("http://127.0.0.1:{port}");
        let s = Server::start_args(target, &[format!("--listen-metrics-urls={url}")], &[]).await;
        let ok =
            crate::harness::wait_for(Duration::from_secs(5), async || curl(&format!("{url}/health")).0 == 200).await;
        assert!(ok, "{target:?}: /health on the metrics URL");
        let (code, text) = curl(&format!("{url}/metrics"));
        assert_eq!(code, 200, "{target:?}");
        assert_eq!(series(&text, "etcd_server_has_leader"), Some(1.0), "{target:?}");
        drop(s);
    }
}
