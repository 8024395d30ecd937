//! etcd's gRPC-JSON gateway through curl: the `/v3/` paths, base64 bytes and 64-bit integers as
//! strings, etcd's error bodies, and the `/v3/watch` stream, against both servers.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::Server;

both_targets!(gateway_kv_lease_status, gateway_errors, gateway_watch);

/// POSTs `body` to `/v3/<path>`; returns (HTTP status, body).
fn post(s: &Server, path: &str, body: &str) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-s", "--max-time", "10", "-w", "\n%{http_code}", "-X", "POST", "-d", body])
        .arg(format!("{}/v3/{path}", s.url()))
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').expect("status line");
    (code.trim().parse().expect("status"), body.to_string())
}

fn ok_json(s: &Server, path: &str, body: &Value) -> Value {
    let (code, text) = post(s, path, &body.to_string());
    assert_eq!(code, 200, "{path}: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}: {text}"))
}

async fn gateway_kv_lease_status(s: Server) {
    let put = ok_json(&s, "kv/put", &json!({"key": "Zm9v", "value": "YmFy"}));
    let rev = put["header"]["revision"].as_str().expect("revision as a string").to_string();
    let r = ok_json(&s, "kv/range", &json!({"key": "Zm9v"}));
    assert_eq!(r["count"], "1");
    assert_eq!(r["kvs"][0]["value"], "YmFy");
    assert_eq!(r["kvs"][0]["create_revision"], rev.as_str());
    assert!(r["kvs"][0].get("lease").is_none(), "defaults are left out: {r}");
    let none = ok_json(&s, "kv/range", &json!({"key": "bm9wZQ=="}));
    assert!(none.get("kvs").is_none() && none.get("count").is_none(), "{none}");
    let t = ok_json(
        &s,
        "kv/txn",
        &json!({"compare": [{"key": "Zm9v", "result": "EQUAL", "target": "VALUE", "value": "YmFy"}],
               "success": [{"request_put": {"key": "Zm9v", "value": "YmF6"}}]}),
    );
    assert_eq!(t["succeeded"], true, "{t}");
    assert!(t["responses"][0]["response_put"]["header"]["revision"].is_string(), "{t}");
    let d = ok_json(&s, "kv/deleterange", &json!({"key": "Zm9v", "prev_kv": true}));
    assert_eq!((d["deleted"].as_str(), d["prev_kvs"][0]["value"].as_str()), (Some("1"), Some("YmF6")), "{d}");
    ok_json(&s, "kv/compaction", &json!({"revision": rev}));
    let g = ok_json(&s, "lease/grant", &json!({"TTL": 30}));
    assert_eq!(g["TTL"], "30");
    let id = g["ID"].as_str().expect("ID as a string").to_string();
    let l = ok_json(&s, "lease/leases", &json!({}));
    assert_eq!(l["leases"][0]["ID"], id.as_str());
    let ttl = ok_json(&s, "lease/timetolive", &json!({"ID": id}));
    assert_eq!(ttl["grantedTTL"], "30", "{ttl}");
    ok_json(&s, "lease/revoke", &json!({"ID": id}));
    let st = ok_json(&s, "maintenance/status", &json!({}));
    assert!(st["version"].as_str().is_some_and(|v| v.starts_with("3.")), "{st}");
    assert!(st["dbSize"].is_string() && st["leader"].is_string(), "{st}");
}

fn error_of(s: &Server, path: &str, body: &str) -> (u16, Value) {
    let (code, text) = post(s, path, body);
    (code, serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path} {body}: {e}: {text}")))
}

async fn gateway_errors(s: Server) {
    let (code, e) = error_of(&s, "kv/put", r#"{"key":""}"#);
    assert_eq!(
        (code, &e),
        (
            400,
            &json!({"error": "etcdserver: key is not provided", "message": "etcdserver: key is not provided", "code": 3})
        )
    );
    let (code, e) = error_of(&s, "kv/range", "");
    assert_eq!((code, e["code"].as_i64()), (400, Some(3)), "an empty body is an empty request: {e}");
    for p in ["a", "b", "c"] {
        ok_json(&s, "kv/put", &json!({"key": "Zm9v", "value": base64_of(p)}));
    }
    ok_json(&s, "kv/compaction", &json!({"revision": "3"}));
    let (code, e) = error_of(&s, "kv/range", r#"{"key":"Zm9v","revision":"2"}"#);
    assert_eq!((code, e["code"].as_i64()), (400, Some(11)), "{e}");
    assert_eq!(e["error"], "etcdserver: mvcc: required revision has been compacted");
    for bad in ["notjson", r#"{"key":123}"#, "[1,2"] {
        let (code, e) = error_of(&s, "kv/range", bad);
        assert_eq!((code, e["code"].as_i64()), (400, Some(3)), "{bad}: {e}");
        assert!(e["error"].as_str().is_some_and(|m| !m.is_empty()) && e["error"] == e["message"], "{bad}: {e}");
    }
    let (code, _) = post(&s, "nope/x", "{}");
    assert_eq!(code, 404);
}

fn base64_of(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

async fn gateway_watch(s: Server) {
    let mut curl = Command::new("curl")
        .args([
            "-s",
            "-N",
            "--max-time",
            "10",
            "-X",
            "POST",
            "-d",
            r#"{"create_request":{"key":"d2s=","prev_kv":true}}"#,
        ])
        .arg(format!("{}/v3/watch", s.url()))
        .stdout(Stdio::piped())
        .spawn()
        .expect("curl");
    let rx = crate::harness::stdout_lines(&mut curl);
    let next = || -> Value {
        let line = rx.recv_timeout(Duration::from_secs(10)).expect("a watch line");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    };
    assert_eq!(next()["result"]["created"], true);
    ok_json(&s, "kv/put", &json!({"key": "d2s=", "value": "MQ=="}));
    ok_json(&s, "kv/put", &json!({"key": "d2s=", "value": "Mg=="}));
    let first = next();
    assert_eq!(first["result"]["events"][0]["kv"]["value"], "MQ==", "{first}");
    assert!(first["result"]["events"][0].get("type").is_none(), "PUT is the default and left out");
    let second = next();
    let ev = &second["result"]["events"][0];
    assert_eq!((ev["kv"]["version"].as_str(), ev["prev_kv"]["value"].as_str()), (Some("2"), Some("MQ==")), "{second}");
    let _ = curl.kill();
    let _ = curl.wait();
}
