//! Watch completeness over HTTP: bookmarks from progress notifications, `timeoutSeconds`,
//! 410 Expired for compacted start points (before and after the watch cache exists),
//! watch-list initial events, many clients on one shared upstream watch, and undecodable stored
//! values (an ERROR event, never a DELETED).

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::harness::{both_backends, Backend, Cluster, Credentials, Options};
use ballast_apiserver::watch_cache::WatchCacheConfig;

both_backends!(
    bookmarks_and_timeouts,
    compacted_start_points_are_410,
    watch_list_sends_initial_events_then_a_marker,
    many_clients_share_one_upstream_watch,
    simultaneous_first_watches_start_one_cache,
    a_slow_client_is_cut_off_and_others_keep_up,
    an_undecodable_value_is_an_error_not_a_deletion
);

const JSON: Option<&str> = Some("application/json");

async fn create_cm(c: &Cluster, ns: &str, name: &str) -> i64 {
    let body = json!({"metadata": {"name": name}, "data": {"k": name}}).to_string();
    let r = c.request(Credentials::Admin, "POST", &format!("/api/v1/namespaces/{ns}/configmaps"), JSON, body).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    rv_of(&r.json())
}

fn rv_of(obj: &Value) -> i64 {
    obj["metadata"]["resourceVersion"].as_str().and_then(|r| r.parse().ok()).expect("numeric resourceVersion")
}

async fn list_rv(c: &Cluster, path: &str) -> i64 {
    rv_of(&c.request(Credentials::Admin, "GET", path, None, "").await.json())
}

/// Runs a watch that the server ends (`timeoutSeconds`) and returns its events.
async fn watch_events(c: &Cluster, path_and_query: &str) -> Vec<Value> {
    let r = c.request(Credentials::Admin, "GET", path_and_query, None, "").await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    String::from_utf8_lossy(&r.body)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON event per line"))
        .collect()
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap_or("")).collect()
}

async fn bookmarks_and_timeouts(backend: Backend) {
    let watch_cache = WatchCacheConfig { progress_interval: Duration::from_millis(200), ..WatchCacheConfig::default() };
    let c =
        Cluster::start_with(Options { backend: Some(backend), watch_cache: Some(watch_cache), ..Options::default() })
            .await;
    let path = "/api/v1/namespaces/default/configmaps";
    let rv = list_rv(&c, path).await;
    let writer = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        create_cm(&c, "default", "during").await
    };
    let started = Instant::now();
    let query = format!("{path}?watch=true&allowWatchBookmarks=true&timeoutSeconds=2&resourceVersion={rv}");
    let (events, written) = tokio::join!(watch_events(&c, &query), writer);
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(1900) && took < Duration::from_secs(6), "timeoutSeconds=2 took {took:?}");
    let bookmarks: Vec<&Value> = events.iter().filter(|e| e["type"] == "BOOKMARK").collect();
    assert!(!bookmarks.is_empty(), "no bookmark in {events:?}");
    for b in &bookmarks {
        let obj = &b["object"];
        assert_eq!((obj["kind"].as_str(), obj["apiVersion"].as_str()), (Some("ConfigMap"), Some("v1")));
        assert!(obj["metadata"].get("name").is_none(), "bookmarks carry only the resourceVersion: {obj}");
        assert!(rv_of(obj) >= rv);
    }
    assert!(types(&events).contains(&"ADDED"), "{events:?}");
    // A bookmark after the write carries a revision at or past it; revisions never go back.
    let rvs: Vec<i64> = events.iter().map(|e| rv_of(&e["object"])).collect();
    assert!(rvs.windows(2).all(|w| w[0] <= w[1]), "{rvs:?}");

    // The watch's last line, as it times out, is a bookmark at or past the write.
    let last_event = events.last().expect("events");
    assert_eq!(last_event["type"], "BOOKMARK", "{events:?}");
    assert!(rv_of(&last_event["object"]) >= written);

    // Without allowWatchBookmarks there are none.
    let events = watch_events(&c, &format!("{path}?watch=true&timeoutSeconds=1&resourceVersion={rv}")).await;
    assert_eq!(types(&events), ["ADDED"]);
}

async fn compacted_start_points_are_410(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let path = "/api/v1/namespaces/default/configmaps";
    let old = create_cm(&c, "default", "a").await;
    create_cm(&c, "default", "b").await;
    // From a revision still in history: the changes after it.
    let events = watch_events(&c, &format!("{path}?watch=true&timeoutSeconds=1&resourceVersion={old}")).await;
    assert_eq!(types(&events), ["ADDED"]);
    assert_eq!(events[0]["object"]["metadata"]["name"], "b");

    let now = create_cm(&c, "default", "c").await;
    let mut etcd = c.etcd_client().await;
    etcd.compact(now, None).await.expect("compact");
    let events = watch_events(&c, &format!("{path}?watch=true&timeoutSeconds=5&resourceVersion={old}")).await;
    assert_eq!(types(&events), ["ERROR"], "{events:?}");
    let status = &events[0]["object"];
    assert_eq!(
        (status["kind"].as_str(), status["code"].as_i64(), status["reason"].as_str()),
        (Some("Status"), Some(410), Some("Expired"))
    );
    let message = status["message"].as_str().unwrap_or("");
    assert!(message.starts_with(&format!("too old resource version: {old} (")), "{message}");
    // The current revision still works, through the cache.
    let events = watch_events(&c, &format!("{path}?watch=true&timeoutSeconds=1&resourceVersion={now}")).await;
    assert!(events.is_empty(), "{events:?}");
}

async fn watch_list_sends_initial_events_then_a_marker(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let path = "/api/v1/namespaces/default/configmaps";
    for name in ["x", "y"] {
        create_cm(&c, "default", name).await;
    }
    let q =
        "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1";
    let events = watch_events(&c, &format!("{path}?{q}")).await;
    assert_eq!(types(&events)[..3], ["ADDED", "ADDED", "BOOKMARK"], "{events:?}");
    let marker = &events[2]["object"];
    assert_eq!(marker["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
    assert!(rv_of(marker) >= rv_of(&events[1]["object"]));
    // sendInitialEvents without NotOlderThan is refused.
    let r = c.request(Credentials::Admin, "GET", &format!("{path}?watch=true&sendInitialEvents=true"), None, "").await;
    assert_eq!(r.status, 422);
}

async fn many_clients_share_one_upstream_watch(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    for ns in ["one", "two"] {
        let body = json!({"metadata": {"name": ns}}).to_string();
        assert_eq!(c.request(Credentials::Admin, "POST", "/api/v1/namespaces", JSON, body).await.status, 201);
    }
    let rv = list_rv(&c, "/api/v1/configmaps").await;
    // Warm the resource's cache so the clients below start inside its window.
    watch_events(&c, &format!("/api/v1/configmaps?watch=true&timeoutSeconds=1&resourceVersion={rv}")).await;
    let watchers = (0..6).map(|i| {
        let ns = if i % 2 == 0 { "one" } else { "two" };
        let c = &c;
        async move {
            let events = watch_events(
                c,
                &format!("/api/v1/namespaces/{ns}/configmaps?watch=true&timeoutSeconds=2&resourceVersion={rv}"),
            )
            .await;
            (ns, events)
        }
    });
    let writer = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        for i in 0..3 {
            create_cm(&c, "one", &format!("a{i}")).await;
        }
        create_cm(&c, "two", "b0").await;
    };
    let (results, ()) = tokio::join!(futures::future::join_all(watchers), writer);
    for (ns, events) in results {
        let names: Vec<&str> = events.iter().map(|e| e["object"]["metadata"]["name"].as_str().unwrap_or("")).collect();
        let want: &[&str] = if ns == "one" { &["a0", "a1", "a2"] } else { &["b0"] };
        assert_eq!(names, want, "{ns}: {events:?}");
    }
    // All namespaces, from the same start point, after the fact: replayed from the window.
    let events =
        watch_events(&c, &format!("/api/v1/configmaps?watch=true&timeoutSeconds=1&resourceVersion={rv}")).await;
    assert_eq!(events.len(), 4, "{events:?}");
}

/// Watches arriving together on a resource nobody watched yet start its cache (a LIST and an
/// upstream watch) once: the rest wait for it rather than each starting one of their own.
async fn simultaneous_first_watches_start_one_cache(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let rv = list_rv(&c, "/api/v1/configmaps").await;
    let path = format!("/api/v1/configmaps?watch=true&timeoutSeconds=1&resourceVersion={rv}");
    let results = futures::future::join_all((0..16).map(|_| watch_events(&c, &path))).await;
    assert!(results.iter().all(Vec::is_empty), "{results:?}");
    let r = c.request(Credentials::Admin, "GET", "/metrics", None, "").await;
    let text = String::from_utf8_lossy(&r.body);
    let line = "apiserver_watch_cache_initializations_total{group=\"\",resource=\"configmaps\"} 1";
    assert!(text.lines().any(|l| l == line), "want {line} in:\n{text}");
}

/// Reads `stream` until `needle` was seen `want` times, the server ends the stream, or
/// `deadline` passes; returns how many times it was seen and whether the server ended the
/// stream. Counts only new bytes on each read (the answers here run to megabytes).
async fn read_counting(
    stream: &mut (impl tokio::io::AsyncRead + Unpin),
    deadline: tokio::time::Instant,
    needle: &[u8],
    want: usize,
) -> (usize, bool) {
    use tokio::io::AsyncReadExt;
    let mut seen = 0;
    // The unscanned tail of what was read: a needle may straddle two reads.
    let mut tail: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        if seen >= want {
            return (seen, false);
        }
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (seen, true),
            Ok(Ok(n)) => {
                tail.extend_from_slice(&buf[..n]);
                seen += tail.windows(needle.len()).filter(|w| *w == needle).count();
                // The terminating chunk of a chunked answer.
                if tail.ends_with(b"\r\n0\r\n\r\n") {
                    return (seen, true);
                }
                let keep = tail.len().min(needle.len() - 1);
                tail.drain(..tail.len() - keep);
            }
            Err(_) => return (seen, false),
        }
    }
}

/// A client that stops reading is terminated once its queue is full; the others get every
/// event.
async fn a_slow_client_is_cut_off_and_others_keep_up(backend: Backend) {
    let watch_cache = WatchCacheConfig { client_queue: 4, ..WatchCacheConfig::default() };
    let c =
        Cluster::start_with(Options { backend: Some(backend), watch_cache: Some(watch_cache), ..Options::default() })
            .await;
    let path = "/api/v1/namespaces/default/configmaps";
    let rv = list_rv(&c, path).await;
    // Warm the cache so both clients below read through it.
    watch_events(&c, &format!("{path}?watch=true&timeoutSeconds=1&resourceVersion={rv}")).await;
    let head =
        format!("GET {path}?watch=true&timeoutSeconds=120&resourceVersion={rv} HTTP/1.1\r\nhost: localhost\r\n\r\n");
    let mut slow = c.open_stream(Credentials::Admin, &head).await;
    let mut fast = c.open_stream(Credentials::Admin, &head).await;
    const WRITES: usize = 100;
    let big = "x".repeat(96 * 1024);
    let added = b"{\"type\":\"ADDED\"";
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let writer = async {
        for i in 0..WRITES {
            let body = json!({"metadata": {"name": format!("big-{i}")}, "data": {"blob": big}}).to_string();
            let r = c.request(Credentials::Admin, "POST", path, JSON, body).await;
            assert_eq!(r.status, 201);
        }
    };
    let reader = read_counting(&mut fast, deadline, added, WRITES);
    let ((fast_seen, fast_ended), ()) = tokio::join!(reader, writer);
    assert!(!fast_ended, "the reading client's watch must stay open");
    assert_eq!(fast_seen, WRITES);
    // The client that did not read: its stream ends early, short of the events.
    let (slow_seen, slow_ended) = read_counting(&mut slow, deadline, added, usize::MAX).await;
    assert!(slow_ended, "the slow client's stream must end");
    eprintln!("slow client saw {slow_seen} of {WRITES} events");
    assert!(slow_seen < WRITES, "the slow client got all {slow_seen} events: it was not cut off");
}

/// Asserts that `events` is one ERROR event: a 500 naming `key`.
fn assert_decode_error(events: &[Value], key: &str) {
    assert_eq!(types(events), ["ERROR"], "{events:?}");
    let status = &events[0]["object"];
    assert_eq!((status["code"].as_i64(), status["reason"].as_str()), (Some(500), Some("InternalError")), "{status}");
    let message = status["message"].as_str().unwrap_or("");
    assert!(message.contains(&format!("\"{key}\"")), "the key is named: {message}");
}

/// A value another writer stored in a format this server cannot read (kube-apiserver with
/// protobuf storage writes `k8s\0` and a protobuf envelope) ends the watch with a 500 naming the
/// key, whether the watch reads etcd directly or through the shared cache; before, the update
/// reached clients as a DELETED event.
async fn an_undecodable_value_is_an_error_not_a_deletion(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let path = "/api/v1/namespaces/default/configmaps";
    let key = "/registry/configmaps/default/x";
    let garbage: &[u8] = b"k8s\x00\x0a\x0f\x0a\x02v1\x12\x09ConfigMap";
    let rv = create_cm(&c, "default", "x").await;
    let mut etcd = c.etcd_client().await;
    etcd.put(key, garbage, None).await.expect("etcd put");
    // The first watch of the resource starts its cache at the current revision, after `rv`:
    // this one reads etcd's history itself.
    let events = watch_events(&c, &format!("{path}?watch=true&timeoutSeconds=5&resourceVersion={rv}")).await;
    assert_decode_error(&events, key);
    // Through the cache: the change arrives while the watch runs. (A LIST of configmaps
    // answers 500 now; another collection gives the store's revision.)
    let now = list_rv(&c, "/api/v1/namespaces/default/secrets").await;
    let name_y = "/registry/configmaps/default/y";
    let writer = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        create_cm(&c, "default", "y").await;
        let mut etcd = c.etcd_client().await;
        etcd.put(name_y, garbage, None).await.expect("etcd put");
    };
    let query = format!("{path}?watch=true&timeoutSeconds=5&resourceVersion={now}");
    let (events, ()) = tokio::join!(watch_events(&c, &query), writer);
    assert_eq!(types(&events[..1]), ["ADDED"], "{events:?}");
    assert_decode_error(&events[1..], name_y);
    let metrics = c.request(Credentials::Admin, "GET", "/metrics", None, "").await;
    let metrics = String::from_utf8_lossy(&metrics.body);
    assert!(metrics.contains("apiserver_storage_decode_errors_total{resource=\"configmaps\"}"), "{metrics}");
}
