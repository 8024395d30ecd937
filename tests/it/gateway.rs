//! etcd's gRPC-JSON gateway through curl: the `/v3/` paths, base64 bytes and 64-bit integers as
//! strings, etcd's error bodies, and the `/v3/watch` stream, against both servers; and every
//! other path (cluster, maintenance, lock, election, the streams) as one transcript that must
//! read the same on Ballast as on stock etcd.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::{Server, Target};

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
    // Unknown fields are skipped and what follows the first JSON value is not read, as by
    // etcd's gateway.
    let (code, e) = error_of(&s, "kv/range", r#"{"nope":1}"#);
    assert_eq!((code, e["error"].as_str()), (400, Some("etcdserver: key is not provided")), "{e}");
    let (code, text) = post(&s, "kv/range", r#"{"key":"Zm9v","nope":{"deep":[1]}} trailing"#);
    assert_eq!(code, 200, "{text}");
    for bad in ["notjson", r#"{"key":123}"#, "[1,2", r#"{"key":"!!!"}"#, r#""x""#] {
        let (code, e) = error_of(&s, "kv/range", bad);
        assert_eq!((code, e["code"].as_i64()), (400, Some(3)), "{bad}: {e}");
        assert!(e["error"].as_str().is_some_and(|m| !m.is_empty()) && e["error"] == e["message"], "{bad}: {e}");
    }
    let (code, _) = post(&s, "nope/x", "{}");
    assert_eq!(code, 404);
    // Only POST; etcd 3.4's `/v3beta/` prefix too.
    let get = Command::new("curl")
        .args(["-s", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}"])
        .arg(format!("{}/v3/kv/range", s.url()))
        .output()
        .expect("curl");
    assert_eq!(String::from_utf8_lossy(&get.stdout), "405");
    let beta = Command::new("curl")
        .args(["-s", "--max-time", "10", "-X", "POST", "-d", r#"{"key":"Zm9v"}"#])
        .arg(format!("{}/v3beta/kv/range", s.url()))
        .output()
        .expect("curl");
    let beta: Value = serde_json::from_slice(&beta.stdout).expect("json from /v3beta/");
    assert_eq!(beta["kvs"][0]["value"], "Yw==", "{beta}");
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

/// Fields whose values differ between two servers (IDs, revisions, sizes, versions, hashes,
/// snapshot bytes): a transcript keeps that they are there, not what they hold.
const VARYING: [&str; 20] = [
    "ID",
    "lease",
    "key",
    "rev",
    "create_revision",
    "mod_revision",
    "version",
    "hash",
    "dbSize",
    "dbSizeInUse",
    "leader",
    "raftIndex",
    "raftTerm",
    "raftAppliedIndex",
    "blob",
    "remaining_bytes",
    "peerURLs",
    "clientURLs",
    "TTL",
    "name",
];

/// Drops response headers and blanks the values of [`VARYING`] fields, recursively.
fn normalize(v: &mut Value) {
    match v {
        Value::Object(o) => {
            o.remove("header");
            // Members are in ID order, and IDs differ between servers: compare them as a set.
            if let Some(Value::Array(members)) = o.get_mut("members") {
                members.iter_mut().for_each(normalize);
                members.sort_by_key(Value::to_string);
            }
            for (k, val) in o.iter_mut() {
                if VARYING.contains(&k.as_str()) && !val.is_object() {
                    *val = Value::String("<v>".into());
                } else {
                    normalize(val);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(normalize),
        _ => {}
    }
}

/// One transcript line: the HTTP status and the normalized body (each line of a stream).
fn line(code: u16, body: &str) -> String {
    let parts: Vec<String> = body
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| match serde_json::from_str::<Value>(l) {
            Ok(mut v) => {
                normalize(&mut v);
                v.to_string()
            }
            Err(_) => l.to_string(),
        })
        .collect();
    format!("{code} {}", parts.join(" | "))
}

/// The first line of a stream that does not end by itself (`/v3/election/observe`).
fn first_stream_line(s: &Server, path: &str, body: &str) -> Value {
    let mut curl = Command::new("curl")
        .args(["-s", "-N", "--max-time", "10", "-X", "POST", "-d", body])
        .arg(format!("{}/v3/{path}", s.url()))
        .stdout(Stdio::piped())
        .spawn()
        .expect("curl");
    let rx = crate::harness::stdout_lines(&mut curl);
    let first = rx.recv_timeout(Duration::from_secs(10)).expect("a stream line");
    let _ = curl.kill();
    let _ = curl.wait();
    serde_json::from_str(&first).unwrap_or_else(|e| panic!("{path}: {e}: {first}"))
}

/// POSTs `body` to `/v3/<path>`, records the answer in `seen` and returns its (first) JSON.
fn call(s: &Server, seen: &mut Vec<String>, path: &str, body: &str) -> Value {
    let (code, text) = post(s, path, body);
    seen.push(format!("{path}: {}", line(code, &text)));
    serde_json::from_str::<Value>(text.lines().next().unwrap_or("")).unwrap_or(Value::Null)
}

/// Every gateway path beyond KV, Lease basics and Auth, on a fresh `target`: cluster membership
/// (a learner added, listed and removed), maintenance (status, alarm, defragment, hash,
/// leadership transfer, the snapshot stream), the keep-alive stream, Lock and Election (with
/// the observe stream), and their errors. Returns the transcript.
async fn paths_transcript(target: Target) -> Vec<String> {
    let s = Server::start(target).await;
    let mut seen = Vec::new();
    // Cluster: a learner (the single voter keeps its quorum) added, listed, refused promotion
    // while it has never caught up, and removed; unknown members.
    let list = call(&s, &mut seen, "cluster/member/list", "{}");
    assert_eq!(list["members"].as_array().map(Vec::len), Some(1), "{list}");
    let peer = format!("http://127.0.0.1:{}", crate::harness::free_port());
    let added = call(&s, &mut seen, "cluster/member/add", &json!({"peerURLs": [peer], "isLearner": true}).to_string());
    let learner = added["member"]["ID"].as_str().expect("the new member's ID").to_string();
    assert_eq!(added["member"]["isLearner"], true, "{added}");
    // Listed in ID order, as etcd lists members.
    let list = call(&s, &mut seen, "cluster/member/list", "{}");
    let ids: Vec<u64> = list["members"]
        .as_array()
        .expect("members")
        .iter()
        .map(|m| m["ID"].as_str().and_then(|id| id.parse().ok()).expect("a member ID"))
        .collect();
    assert!(ids.len() == 2 && ids[0] < ids[1], "{list}");
    call(&s, &mut seen, "cluster/member/promote", &json!({"ID": learner}).to_string());
    call(&s, &mut seen, "cluster/member/remove", &json!({"ID": learner}).to_string());
    call(&s, &mut seen, "cluster/member/add", r#"{"peerURLs":["not a url"]}"#);
    call(&s, &mut seen, "cluster/member/remove", r#"{"ID":"12345"}"#);
    call(&s, &mut seen, "cluster/member/update", r#"{"ID":"12345","peerURLs":["http://127.0.0.1:1"]}"#);
    call(&s, &mut seen, "cluster/member/promote", r#"{"ID":"12345"}"#);
    // Maintenance (a key first: Ballast's hash of an empty store is 0, which JSON leaves out).
    call(&s, &mut seen, "kv/put", &json!({"key": base64_of("h"), "value": base64_of("v")}).to_string());
    call(&s, &mut seen, "maintenance/status", "{}");
    call(&s, &mut seen, "maintenance/alarm", "{}");
    call(&s, &mut seen, "maintenance/alarm", r#"{"action":"GET","alarm":"NOSPACE"}"#);
    call(&s, &mut seen, "maintenance/defragment", "{}");
    let hash = call(&s, &mut seen, "maintenance/hash", "{}");
    assert!(hash["hash"].is_u64(), "a uint32 is a JSON number: {hash}");
    call(&s, &mut seen, "maintenance/transfer-leadership", r#"{"targetID":"12345"}"#);
    // The snapshot stream: `{"result":...}` lines, each with a piece of the snapshot (its layout
    // is each server's own, so not compared further).
    let (code, text) = post(&s, "maintenance/snapshot", "{}");
    let blobs: Vec<usize> = text
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            decode_base64(v["result"]["blob"].as_str().unwrap_or_else(|| panic!("a blob: {l}"))).len()
        })
        .collect();
    assert!(blobs.iter().all(|&n| n > 0) && blobs.iter().sum::<usize>() > 1024, "{blobs:?}");
    seen.push(format!("maintenance/snapshot: {code}, every line a result with a blob"));
    // Leases: the keep-alive stream answers each request and ends with the body; 3.4's aliases.
    let grant = call(&s, &mut seen, "lease/grant", r#"{"TTL":60}"#);
    let lease = grant["ID"].as_str().expect("lease ID").to_string();
    let (code, text) = post(&s, "lease/keepalive", &json!({"ID": lease}).to_string());
    let kept: Value = serde_json::from_str(text.lines().next().unwrap_or("")).expect("a keep-alive line");
    assert_eq!((code, kept["result"]["ID"].as_str()), (200, Some(lease.as_str())), "{text}");
    seen.push(format!("lease/keepalive: {}", line(code, &text)));
    call(&s, &mut seen, "kv/lease/timetolive", &json!({"ID": lease}).to_string());
    call(&s, &mut seen, "kv/lease/leases", "{}");
    // Lock: `<name>/<lease in hex>` on the caller's lease.
    let locked = call(&s, &mut seen, "lock/lock", &json!({"name": base64_of("lk"), "lease": lease}).to_string());
    let key = locked["key"].as_str().expect("the lock's key").to_string();
    let id: i64 = lease.parse().expect("numeric lease");
    assert_eq!(decode_base64(&key), format!("lk/{id:x}").into_bytes());
    call(&s, &mut seen, "lock/unlock", &json!({"key": key}).to_string());
    call(&s, &mut seen, "lock/unlock", "{}");
    // Election: campaign, leader, proclaim, observe, resign.
    let name = base64_of("el");
    let won = call(
        &s,
        &mut seen,
        "election/campaign",
        &json!({"name": name, "lease": lease, "value": base64_of("v1")}).to_string(),
    );
    let leader = won["leader"].clone();
    assert_eq!(leader["name"], name.as_str(), "{won}");
    let now = call(&s, &mut seen, "election/leader", &json!({"name": name}).to_string());
    assert_eq!(now["kv"]["value"], base64_of("v1"), "{now}");
    call(&s, &mut seen, "election/proclaim", &json!({"leader": leader, "value": base64_of("v2")}).to_string());
    let observed = first_stream_line(&s, "election/observe", &json!({"name": name}).to_string());
    assert_eq!(observed["result"]["kv"]["value"], base64_of("v2"), "{observed}");
    let mut observed = observed;
    normalize(&mut observed);
    seen.push(format!("election/observe first line: {observed}"));
    call(&s, &mut seen, "election/resign", &json!({"leader": leader}).to_string());
    call(&s, &mut seen, "election/leader", &json!({"name": name}).to_string());
    call(&s, &mut seen, "election/proclaim", "{}");
    call(&s, &mut seen, "election/resign", "{}");
    bad_bodies(&s, &mut seen);
    timeouts_and_headers(&s, &mut seen, &lease);
    seen
}

/// Bodies etcd's gateway cannot read, each answered with Go's words for it (jsonpb's and
/// `encoding/json`'s): truncated, not JSON, wrong types, bad base64, unknown enum names,
/// numbers that overflow or are not integers; and odd ones it reads.
const BAD_BODIES: [(&str, &str); 77] = [
    ("kv/range", "notjson"),
    ("kv/range", "x"),
    ("kv/range", "{"),
    ("kv/range", r#"{"key":"#),
    ("kv/range", r#"{"key":"Zm9v""#),
    ("kv/range", "[1,2"),
    ("kv/range", "-"),
    ("kv/range", "[1,2]"),
    ("kv/range", r#""x""#),
    ("kv/range", "123"),
    ("kv/range", "1x"),
    ("kv/range", "true"),
    ("kv/range", "null"),
    ("kv/range", " "),
    ("kv/range", "\u{1}"),
    ("kv/range", "é"),
    ("kv/range", "\\"),
    ("kv/range", r#"{"key":"Zm9v",}"#),
    ("kv/range", "{'key':'Zm9v'}"),
    ("kv/range", r#"{"a":tru}"#),
    ("kv/range", r#"{"a":1.}"#),
    ("kv/range", r#"{"a":1e}"#),
    ("kv/range", r#"{"a":01}"#),
    ("kv/range", r#"{"a":"\q"}"#),
    ("kv/range", r#"{"a":"\u12g4"}"#),
    ("kv/range", "{\"a\":\"\u{1}\"}"),
    ("kv/range", r#"{"a" 1}"#),
    ("kv/range", r#"{"a":1 "b"}"#),
    ("kv/range", "[1 2]"),
    ("kv/range", r#"{"key":"Zm9v"} trailing"#),
    ("kv/range", r#"{"key":"Zm9v"}{"#),
    ("kv/range", r#"{"key":123}"#),
    ("kv/range", r#"{"key":true}"#),
    ("kv/range", r#"{"key":{}}"#),
    ("kv/range", r#"{"key":[102,111,111]}"#),
    ("kv/range", r#"{"key":[300]}"#),
    ("kv/range", r#"{"key":["a"]}"#),
    ("kv/range", r#"{"key":"!!!"}"#),
    ("kv/range", r#"{"key":"Zm9"}"#),
    ("kv/range", r#"{"key":"Zm9v="}"#),
    ("kv/range", r#"{"key":"Zm-_"}"#),
    ("kv/range", r#"{"key":"Zg="}"#),
    ("kv/range", r#"{"key":"Zg==Zg=="}"#),
    ("kv/range", r#"{"key":"Zm9vZm9vZm9v!"}"#),
    ("kv/range", r#"{"key":"Zm9v\n"}"#),
    ("kv/range", r#"{"k\u0065y":"Zm9v","Key":1}"#),
    ("kv/range", r#"{"key":"Zm9v","key":"YmFy"}"#),
    ("kv/range", r#"{"key":"Zm9v","rangeEnd":1,"range_end":"AA=="}"#),
    ("kv/range", r#"{"limit":true,"key":1}"#),
    ("kv/range", r#"{"key":"Zm9v","limit":"abc"}"#),
    ("kv/range", r#"{"key":"Zm9v","limit":1.5}"#),
    ("kv/range", r#"{"key":"Zm9v","limit":"1.5"}"#),
    ("kv/range", r#"{"key":"Zm9v","limit":1e3}"#),
    ("kv/range", r#"{"key":"Zm9v","limit":99999999999999999999}"#),
    ("kv/range", r#"{"key":"Zm9v","limit":"99999999999999999999"}"#),
    ("kv/range", r#"{"key":"Zm9v","limit":""}"#),
    ("kv/range", r#"{"key":"Zm9v","limit":"-"}"#),
    ("kv/range", r#"{"key":"Zm9v","limit":"1 2"}"#),
    ("kv/range", r#"{"key":"Zm9v","limit":"true"}"#),
    ("kv/range", r#"{"key":"Zm9v","limit":"null","revision":" 0"}"#),
    ("kv/range", r#"{"key":"Zm9v","revision":"0x10"}"#),
    ("kv/range", r#"{"key":"Zm9v","sort_order":"NOPE"}"#),
    ("kv/range", r#"{"key":"Zm9v","sort_order":"\u0031"}"#),
    ("kv/range", r#"{"key":"Zm9v","sort_order":true}"#),
    ("kv/range", r#"{"key":"Zm9v","sort_order":99999999999}"#),
    ("kv/range", r#"{"key":"Zm9v","serializable":"true"}"#),
    ("kv/txn", r#"{"compare":{"key":"Zm9v"}}"#),
    ("kv/txn", r#"{"compare":[{"key":"Zm9v","result":"NOPE"}]}"#),
    ("kv/txn", r#"{"success":[{"request_put":"x"}]}"#),
    ("kv/txn", r#"{"success":[{"request_put":null}]}"#),
    ("lease/grant", r#"{"TTL":1e20}"#),
    ("maintenance/alarm", r#"{"action":"GET","memberID":-1}"#),
    ("cluster/member/add", r#"{"peerURLs":[1]}"#),
    // The first message of a bidirectional stream is read after the call opens: Unknown, 500.
    ("watch", "{"),
    ("watch", r#"{"create_request":{"key":"Zm9v","filters":["NOPUT","x"]}}"#),
    ("lease/keepalive", r#"{"ID":"x"}"#),
    ("election/observe", r#"{"name":1}"#),
];

fn bad_bodies(s: &Server, seen: &mut Vec<String>) {
    for (path, body) in BAD_BODIES {
        let (code, text) = post(s, path, body);
        seen.push(format!("{path} {body}: {}", line(code, &text)));
    }
}

/// POSTs `body` to `path` (under `/`) with `headers`; returns the status, the headers named in
/// `keep` (as `name: value`, in that order) and the body.
fn post_headers(s: &Server, path: &str, body: &str, headers: &[&str], keep: &[&str]) -> (u16, Vec<String>, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-s", "-i", "--max-time", "20", "-X", "POST", "--data-binary", body]);
    for h in headers {
        cmd.args(["-H", h]);
    }
    if path.starts_with("OPTIONS ") {
        cmd.args(["-X", "OPTIONS"]);
    }
    let out = cmd.arg(format!("{}/{}", s.url(), path.trim_start_matches("OPTIONS "))).output().expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let code = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|c| c.parse().ok()).unwrap_or(0);
    let fields: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let kept = keep
        .iter()
        .filter_map(|k| fields.iter().find(|(name, _)| name == k).map(|(name, v)| format!("{name}: {v}")))
        .collect();
    (code, kept, body.to_string())
}

/// `Grpc-Timeout` (unparsable, passed before the call, passed while it waits, passed in the
/// middle of a stream), CORS headers on every HTTP answer and the preflight, and paths etcd
/// 3.4's gateway does not serve (`maintenance/downgrade`).
fn timeouts_and_headers(s: &Server, seen: &mut Vec<String>, lease: &str) {
    const KEEP: [&str; 6] = [
        "content-type",
        "access-control-allow-origin",
        "access-control-allow-methods",
        "access-control-allow-headers",
        "x-content-type-options",
        "allow",
    ];
    let other = call(s, seen, "lease/grant", r#"{"TTL":60}"#);
    let other = other["ID"].as_str().expect("lease ID").to_string();
    let held = json!({"name": base64_of("held"), "lease": lease}).to_string();
    call(s, seen, "lock/lock", &held);
    let wait = json!({"name": base64_of("held"), "lease": other}).to_string();
    let cases: [(&str, &str, &[&str]); 17] = [
        ("v3/kv/range", r#"{"key":"Zm9v"}"#, &["Grpc-Timeout: 10S"]),
        ("v3/kv/range", r#"{"key":"Zm9v"}"#, &["Grpc-Timeout: 0n"]),
        ("v3/kv/range", r#"{"key":"Zm9v"}"#, &["Grpc-Timeout: 1n"]),
        ("v3/kv/range", r#"{"key":"Zm9v"}"#, &["Grpc-Timeout: -5S"]),
        ("v3/kv/range", r#"{"key":"Zm9v"}"#, &["Grpc-Timeout: 1.5S"]),
        ("v3/kv/range", r#"{"key":"Zm9v"}"#, &["Grpc-Timeout: 5s"]),
        ("v3/kv/range", "x", &["Grpc-Timeout: x"]),
        // A lock another lease holds, a leaderless election and a watch: each waits past it.
        ("v3/lock/lock", &wait, &["Grpc-Timeout: 1S"]),
        ("v3/election/observe", r#"{"name":"bm9uZQ=="}"#, &["Grpc-Timeout: 1S"]),
        ("v3/watch", r#"{"create_request":{"key":"Zm9v"}}"#, &["Grpc-Timeout: 2S"]),
        ("v3/kv/range", r#"{"key":"Zm9v"}"#, &["Origin: http://a.example"]),
        ("OPTIONS v3/kv/range", "", &["Origin: http://a.example", "Access-Control-Request-Method: POST"]),
        ("OPTIONS health", "", &[]),
        ("health", "", &[]),
        ("v3/maintenance/downgrade", r#"{"action":"VALIDATE","version":"3.4"}"#, &[]),
        ("v3/nope", "{}", &["Grpc-Timeout: x"]),
        ("nope", "{}", &[]),
    ];
    for (path, body, headers) in cases {
        let (code, kept, text) = post_headers(s, path, body, headers, &KEEP);
        // A deadline passing in the middle of a stream is reported by etcd's gateway as code 4
        // (504) or, when its context notices before the gRPC stream does, as code 2 (500).
        let text = text.replace(
            r#""grpc_code":2,"http_code":500,"message":"context deadline exceeded","http_status":"Internal Server Error""#,
            r#""grpc_code":4,"http_code":504,"message":"context deadline exceeded","http_status":"Gateway Timeout""#,
        );
        // Before a stream's first message etcd's answer races too: 504 with the unary error
        // body, or 500 with the stream's error line. Either is the deadline's error.
        let answer = if path == "v3/election/observe" && code != 200 && text.contains("context deadline exceeded") {
            "the deadline's error".to_string()
        } else {
            line(code, &text)
        };
        seen.push(format!("{path} {headers:?}: {answer} [{}]", kept.join("; ")));
    }
}

fn decode_base64(s: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(s).unwrap_or_else(|e| panic!("{e}: {s}"))
}

fn assert_same(etcd: &[String], ballast: &[String]) {
    for (e, b) in etcd.iter().zip(ballast) {
        assert_eq!(b, e, "Ballast differs from etcd\netcd:\n{}\nBallast:\n{}", etcd.join("\n"), ballast.join("\n"));
    }
    assert_eq!(ballast.len(), etcd.len());
}

/// The paths' transcript on Ballast reads as on stock etcd, line by line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_paths_match_etcd() {
    let etcd = Box::pin(paths_transcript(Target::Etcd)).await;
    let ballast = Box::pin(paths_transcript(Target::Ballast)).await;
    assert_same(&etcd, &ballast);
}

/// With `--cors` naming origins, a listed origin is echoed and others get no CORS headers,
/// on both servers alike.
async fn cors_transcript(target: Target) -> Vec<String> {
    let s =
        Server::start_args(target, &["--cors".into(), "http://a.example:8080,http://b.example:8080".into()], &[]).await;
    let keep = ["access-control-allow-origin", "access-control-allow-methods"];
    let mut seen = Vec::new();
    for origin in ["Origin: http://b.example:8080", "Origin: http://c.example:8080", "X-None: 1"] {
        for path in ["v3/kv/range", "OPTIONS v3/kv/range", "version"] {
            let (code, kept, _) = post_headers(&s, path, "{}", &[origin], &keep);
            seen.push(format!("{path} {origin}: {code} [{}]", kept.join("; ")));
        }
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_cors_origins_match_etcd() {
    let etcd = Box::pin(cors_transcript(Target::Etcd)).await;
    let ballast = Box::pin(cors_transcript(Target::Ballast)).await;
    assert_same(&etcd, &ballast);
}
