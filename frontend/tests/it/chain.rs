//! The handler chain end to end: audit events by policy (levels, stages, bodies, annotations,
//! impersonated user, Audit-Id), request timeouts against a frozen etcd (watches exempt),
//! the in-flight limit's 429, and the metrics those requests move.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::harness::{wait_for, Backend, Cluster, Credentials, Options, ALICE_TOKEN, BOB_TOKEN};

const JSON: Option<&str> = Some("application/json");

const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: None
    nonResourceURLs: ["/healthz*", "/livez*", "/readyz*"]
  - level: None
    users: ["bob"]
  - level: RequestResponse
    resources:
      - group: ""
        resources: ["configmaps"]
  - level: Request
    resources:
      - group: ""
        resources: ["secrets"]
  - level: Metadata
"#;

fn read_events(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("audit line is not JSON ({e}): {l}")))
        .collect()
}

fn audit_id(r: &crate::harness::RawResponse) -> String {
    r.headers.get("audit-id").and_then(|v| v.to_str().ok()).expect("Audit-Id header").to_string()
}

/// Returns the value of the first metric line starting with `prefix`.
fn metric(text: &str, prefix: &str) -> Option<f64> {
    text.lines().find(|l| l.starts_with(prefix)).and_then(|l| l.rsplit(' ').next()).and_then(|v| v.parse().ok())
}

async fn metrics(c: &Cluster) -> String {
    let r = c.request(Credentials::Admin, "GET", "/metrics", None, "").await;
    assert_eq!(r.status, 200);
    String::from_utf8_lossy(&r.body).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_log_follows_the_policy() {
    let c = Cluster::start_with(Options {
        configure: Some(Box::new(|config, dir| {
            std::fs::write(dir.join("policy.yaml"), POLICY).expect("policy");
            config.audit_policy_file = Some(dir.join("policy.yaml"));
            config.audit_log_path = Some(dir.join("audit/audit.log"));
        })),
        ..Options::default()
    })
    .await;
    let log = c.dir.path().join("audit/audit.log");

    let cm = c
        .request(
            Credentials::Admin,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            JSON,
            r#"{"metadata":{"name":"a"},"data":{"k":"v"}}"#,
        )
        .await;
    assert_eq!(cm.status, 201);
    let secret = c
        .request(
            Credentials::Admin,
            "POST",
            "/api/v1/namespaces/default/secrets",
            JSON,
            r#"{"metadata":{"name":"s"},"stringData":{"p":"w"}}"#,
        )
        .await;
    assert_eq!(secret.status, 201);
    // A client-chosen audit ID is kept.
    let list = c
        .request_with_headers(
            Credentials::Admin,
            "GET",
            "/api/v1/namespaces",
            &[("Audit-ID", "my-audit-id"), ("User-Agent", "audit-test/1.0")],
            None,
            "",
        )
        .await;
    assert_eq!(audit_id(&list), "my-audit-id");
    let health = c.request(Credentials::Admin, "GET", "/healthz", None, "").await;
    let bobs = c.request(Credentials::Token(BOB_TOKEN), "GET", "/api/v1/namespaces", None, "").await;
    let denied =
        c.request(Credentials::Token(ALICE_TOKEN), "GET", "/api/v1/namespaces/default/secrets", None, "").await;
    assert_eq!(denied.status, 403);
    let impersonated = c
        .request_with_headers(
            Credentials::Admin,
            "GET",
            "/api/v1/namespaces/default/configmaps/a",
            &[("Impersonate-User", "carol"), ("Impersonate-Group", "dev")],
            None,
            "",
        )
        .await;
    assert_eq!(impersonated.status, 403, "carol has no grants");
    let unauthenticated = c.request(Credentials::Token("wrong"), "GET", "/api/v1/namespaces", None, "").await;
    assert_eq!(unauthenticated.status, 401);
    let watch = c.request(Credentials::Admin, "GET", "/api/v1/namespaces?watch=true&timeoutSeconds=1", None, "").await;
    assert_eq!(watch.status, 200);

    let wanted = [audit_id(&cm), audit_id(&secret), audit_id(&denied), audit_id(&impersonated), audit_id(&watch)];
    let all_written = wait_for(Duration::from_secs(10), async || {
        let events = read_events(&log);
        wanted.iter().all(|id| events.iter().any(|e| e["auditID"] == *id && e["stage"] == "ResponseComplete"))
            && events.iter().any(|e| e["auditID"] == "my-audit-id")
            && events.iter().any(|e| e["auditID"] == audit_id(&unauthenticated).as_str())
    })
    .await;
    let events = read_events(&log);
    assert!(all_written, "missing events in {events:#?}");
    let find = |id: &str, stage: &str| {
        events
            .iter()
            .find(|e| e["auditID"] == id && e["stage"] == stage)
            .unwrap_or_else(|| panic!("no {stage} event for {id} in {events:#?}"))
            .clone()
    };

    // RequestResponse for configmaps: both bodies, the decision and kube's allow reason.
    let e = find(&audit_id(&cm), "ResponseComplete");
    assert_eq!(e["apiVersion"], "audit.k8s.io/v1");
    assert_eq!(e["kind"], "Event");
    assert_eq!(e["level"], "RequestResponse");
    assert_eq!(e["verb"], "create");
    assert_eq!(e["requestURI"], "/api/v1/namespaces/default/configmaps");
    assert_eq!(e["user"]["username"], "kubernetes-admin");
    assert_eq!(e["sourceIPs"], json!(["127.0.0.1"]));
    assert_eq!(e["objectRef"], json!({"resource": "configmaps", "namespace": "default", "apiVersion": "v1"}));
    assert_eq!(e["responseStatus"]["code"], 201);
    assert_eq!(e["requestObject"]["data"]["k"], "v");
    assert_eq!(e["responseObject"]["metadata"]["name"], "a");
    assert_eq!(e["annotations"]["authorization.k8s.io/decision"], "allow");
    assert_eq!(
        e["annotations"]["authorization.k8s.io/reason"],
        r#"RBAC: allowed by ClusterRoleBinding "cluster-admin" of ClusterRole "cluster-admin" to Group "system:masters""#
    );
    assert!(e["requestReceivedTimestamp"].as_str().is_some_and(|t| t.len() == 27 && t.ends_with('Z')), "{e}");
    assert!(e["stageTimestamp"].as_str().is_some_and(|t| t >= e["requestReceivedTimestamp"].as_str().unwrap_or("")));
    // Request for secrets: the request body only.
    let e = find(&audit_id(&secret), "ResponseComplete");
    assert_eq!(e["level"], "Request");
    assert_eq!(e["requestObject"]["stringData"]["p"], "w");
    assert!(e.get("responseObject").is_none(), "{e}");
    // Metadata for the rest: no bodies; the user agent as sent.
    let e = find("my-audit-id", "ResponseComplete");
    assert_eq!((e["level"].as_str(), e["verb"].as_str()), (Some("Metadata"), Some("list")));
    assert_eq!(e["userAgent"], "audit-test/1.0");
    assert!(e.get("requestObject").is_none() && e.get("responseObject").is_none());
    // A denial: forbid, and the Status in responseStatus.
    let e = find(&audit_id(&denied), "ResponseComplete");
    assert_eq!(e["annotations"]["authorization.k8s.io/decision"], "forbid");
    assert_eq!(e["responseStatus"]["code"], 403);
    assert_eq!(e["responseStatus"]["reason"], "Forbidden");
    assert_eq!(
        e["responseStatus"]["message"],
        r#"secrets is forbidden: User "alice" cannot list resource "secrets" in API group "" in the namespace "default""#
    );
    // Impersonation: the real user and the impersonated one (with system:authenticated added).
    let e = find(&audit_id(&impersonated), "ResponseComplete");
    assert_eq!(e["user"]["username"], "kubernetes-admin");
    assert_eq!(e["impersonatedUser"], json!({"username": "carol", "groups": ["dev", "system:authenticated"]}));
    // A refused authentication: no user, the 401 and what was tried.
    let e = find(&audit_id(&unauthenticated), "ResponseStarted");
    assert_eq!(e["user"], json!({}));
    assert_eq!(e["responseStatus"]["code"], 401);
    assert_eq!(e["responseStatus"]["message"], "Authentication failed, attempted: bearer");
    // A watch: ResponseStarted, then ResponseComplete when its stream ended.
    let started = find(&audit_id(&watch), "ResponseStarted");
    assert_eq!(started["verb"], "watch");
    find(&audit_id(&watch), "ResponseComplete");
    // Omitted stage, None-level paths and users.
    assert!(events.iter().all(|e| e["stage"] != "RequestReceived"));
    assert!(events.iter().all(|e| e["auditID"] != audit_id(&health).as_str()));
    assert!(events.iter().all(|e| e["auditID"] != audit_id(&bobs).as_str() && e["user"]["username"] != "bob"));

    let text = metrics(&c).await;
    assert!(metric(&text, "apiserver_audit_event_total").is_some_and(|n| n >= events.len() as f64), "{text}");
    assert_eq!(metric(&text, "apiserver_audit_error_total{plugin=\"log\"}"), Some(0.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_in_flight_limit_and_metrics() {
    // Stock etcd: the test freezes the store (SIGSTOP) to hold requests in flight.
    let c = Cluster::start_with(Options {
        backend: Some(Backend::Etcd),
        max_requests_inflight: Some(1),
        configure: Some(Box::new(|config, dir| {
            config.request_timeout = Duration::from_secs(2);
            std::fs::write(dir.join("policy.yaml"), "rules: [{level: Metadata}]").expect("policy");
            config.audit_policy_file = Some(dir.join("policy.yaml"));
            config.audit_log_path = Some(dir.join("audit.log"));
        })),
        ..Options::default()
    })
    .await;
    // Warm-up traffic, then the counters it moved.
    assert_eq!(c.request(Credentials::Admin, "GET", "/api/v1/namespaces", None, "").await.status, 200);
    assert_eq!(c.request(Credentials::Token("wrong"), "GET", "/api/v1/namespaces", None, "").await.status, 401);
    let text = metrics(&c).await;
    let lists = "apiserver_request_total{code=\"200\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"namespaces\",scope=\"cluster\",subresource=\"\",verb=\"LIST\",version=\"v1\"}";
    assert_eq!(metric(&text, lists), Some(1.0), "{text}");
    assert!(metric(&text, "apiserver_request_total{code=\"401\"").is_some(), "{text}");
    assert!(text.contains("apiserver_request_duration_seconds_bucket{component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"namespaces\",scope=\"cluster\",subresource=\"\",verb=\"LIST\",version=\"v1\",le=\"60\"} 2"), "the 200 and the 401: {text}");
    c.must_kubectl(&["get", "namespaces"]).await;
    assert!(metric(&metrics(&c).await, lists).is_some_and(|n| n >= 2.0));
    // Metrics are for cluster-admin and system:monitoring, not every user.
    let r = c.request(Credentials::Token(BOB_TOKEN), "GET", "/metrics", None, "").await;
    assert_eq!(r.status, 403);
    assert_eq!(r.json()["message"], r#"forbidden: User "bob" cannot get path "/metrics""#);

    // A watch opened before etcd freezes outlives the request timeout: it is exempt.
    let watcher = {
        let c = &c;
        async move {
            let started = Instant::now();
            let r =
                c.request(Credentials::Admin, "GET", "/api/v1/namespaces?watch=true&timeoutSeconds=4", None, "").await;
            (r.status, started.elapsed())
        }
    };
    let (watch_result, ()) = tokio::join!(watcher, async {
        let open = wait_for(Duration::from_secs(5), async || {
            metric(&metrics(&c).await, "apiserver_longrunning_requests{component=\"apiserver\",group=\"\",resource=\"namespaces\",scope=\"cluster\",subresource=\"\",verb=\"WATCH\",version=\"v1\"}") == Some(1.0)
        })
        .await;
        assert!(open, "the watch is counted as long-running");
        c.etcd.pause();

        // alice's list holds the only read-only slot while authorization waits on etcd...
        let first = async {
            let started = Instant::now();
            let r = c.request(Credentials::Token(ALICE_TOKEN), "GET", "/api/v1/namespaces", None, "").await;
            (r, started.elapsed())
        };
        let second = async {
            let holding = wait_for(Duration::from_secs(5), async || {
                metric(&metrics(&c).await, "apiserver_current_inflight_requests{request_kind=\"readOnly\"}")
                    == Some(1.0)
            })
            .await;
            assert!(holding, "the first request holds the slot");
            // ...so the next one is refused at once with 429 and Retry-After.
            c.request(Credentials::Token(ALICE_TOKEN), "GET", "/api/v1/namespaces/default/configmaps", None, "").await
        };
        let ((timed_out, took), refused) = tokio::join!(first, second);
        assert_eq!(refused.status, 429, "{}", String::from_utf8_lossy(&refused.body));
        assert_eq!(refused.headers["retry-after"], "1");
        assert_eq!(refused.json()["reason"], "TooManyRequests");
        assert_eq!(timed_out.status, 504, "{}", String::from_utf8_lossy(&timed_out.body));
        let status = timed_out.json();
        assert_eq!(status["reason"], "Timeout");
        assert_eq!(status["message"], "Timeout: request did not complete within the allotted timeout");
        assert!(took >= Duration::from_secs(2) && took < Duration::from_secs(10), "{took:?}");
        // The audit event of the timed-out request completes with the 504 the client got.
        let id = audit_id(&timed_out);
        let log = c.dir.path().join("audit.log");
        let audited = wait_for(Duration::from_secs(5), async || {
            read_events(&log).iter().any(|e| {
                e["auditID"] == id.as_str() && e["stage"] == "ResponseComplete" && e["responseStatus"]["code"] == 504
            })
        })
        .await;
        assert!(audited, "no 504 event for {id}: {:#?}", read_events(&log));
        // A shorter ?timeout= is honoured; a malformed one is a 400.
        let started = Instant::now();
        let r = c.request(Credentials::Admin, "GET", "/api/v1/namespaces?timeout=500ms", None, "").await;
        assert_eq!(r.status, 504);
        assert!(started.elapsed() < Duration::from_millis(1900), "{:?}", started.elapsed());
        let r = c.request(Credentials::Admin, "GET", "/api/v1/namespaces?timeout=soon", None, "").await;
        assert_eq!(r.status, 400);
        c.etcd.resume();
    });
    let (status, lasted) = watch_result;
    assert_eq!(status, 200);
    assert!(lasted >= Duration::from_secs(3), "the watch ran its own course: {lasted:?}");

    let text = metrics(&c).await;
    assert!(metric(&text, "apiserver_request_total{code=\"429\"").is_some(), "{text}");
    assert!(metric(&text, "apiserver_request_total{code=\"504\"").is_some(), "{text}");
    assert_eq!(metric(&text, "apiserver_current_inflight_requests{request_kind=\"readOnly\"}"), Some(0.0));
    assert!(text.contains("verb=\"WATCH\",version=\"v1\"} 0"), "the watch left the long-running gauge: {text}");
    // After etcd thaws, requests succeed again.
    assert_eq!(c.request(Credentials::Token(ALICE_TOKEN), "GET", "/api/v1/namespaces", None, "").await.status, 403);
}
