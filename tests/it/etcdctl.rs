//! etcdctl 3.4 sessions against the server, asserting what etcdctl prints.

use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

use crate::harness::{fails, ok, Server};

all_targets!(etcdctl_kv, etcdctl_txn, etcdctl_watch, etcdctl_lease, etcdctl_compaction, etcdctl_maintenance);

fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("bad json {e}: {out}"))
}

async fn etcdctl_kv(s: Server) {
    assert_eq!(ok(&s.etcdctl(&["put", "foo", "bar"])), "OK\n");
    ok(&s.etcdctl(&["put", "foo2", "baz"]));
    ok(&s.etcdctl(&["put", "zoo", "z"]));
    assert_eq!(ok(&s.etcdctl(&["get", "foo"])), "foo\nbar\n");
    assert_eq!(ok(&s.etcdctl(&["get", "foo", "--prefix", "--keys-only"])), "foo\n\nfoo2\n\n");
    assert_eq!(ok(&s.etcdctl(&["get", "foo", "zoo"])), "foo\nbar\nfoo2\nbaz\n", "[foo, zoo)");
    assert_eq!(ok(&s.etcdctl(&["get", "foo2", "--from-key", "--print-value-only"])), "baz\nz\n");
    assert_eq!(ok(&s.etcdctl(&["get", "f", "--prefix", "--limit=1", "--print-value-only"])), "bar\n");
    assert_eq!(
        ok(&s.etcdctl(&["get", "foo", "--prefix", "--sort-by=VALUE", "--order=DESCEND", "--print-value-only"])),
        "baz\nbar\n"
    );
    ok(&s.etcdctl(&["put", "foo", "bar2"]));
    assert_eq!(ok(&s.etcdctl(&["get", "foo", "--rev=2", "--print-value-only"])), "bar\n");
    let j = json(&ok(&s.etcdctl(&["get", "f", "--prefix", "--limit=1", "-w", "json"])));
    assert_eq!((j["more"].as_bool(), j["count"].as_i64()), (Some(true), Some(2)), "{j}");
    assert_eq!(j["header"]["revision"].as_i64(), Some(5));
    let j = json(&ok(&s.etcdctl(&["get", "foo", "-w", "json"])));
    let kv = &j["kvs"][0];
    assert_eq!(
        (kv["create_revision"].as_i64(), kv["mod_revision"].as_i64(), kv["version"].as_i64()),
        (Some(2), Some(5), Some(2))
    );
    assert_eq!(ok(&s.etcdctl(&["del", "foo", "--prefix", "--prev-kv"])), "2\nfoo\nbar2\nfoo2\nbaz\n");
    assert!(fails(&s.etcdctl(&["get", "foo", "--rev=100"]))
        .contains("etcdserver: mvcc: required revision is a future revision"));
    assert!(fails(&s.etcdctl(&["put", "", "x"])).contains("etcdserver: key is not provided"));
}

async fn etcdctl_txn(s: Server) {
    ok(&s.etcdctl(&["put", "k", "v"]));
    let script = "mod(\"k\") > \"0\"\n\nput k yes\n\nput k no\n\n";
    assert_eq!(ok(&s.etcdctl_stdin(&["txn"], script)), "SUCCESS\n\nOK\n");
    assert_eq!(ok(&s.etcdctl(&["get", "k", "--print-value-only"])), "yes\n");
    let script = "value(\"k\") = \"nope\"\n\nput k yes2\n\nget k\n\n";
    assert_eq!(ok(&s.etcdctl_stdin(&["txn"], script)), "FAILURE\n\nk\nyes\n");
    let j = json(&ok(&s.etcdctl_stdin(&["txn", "-w", "json"], "create(\"absent\") = \"0\"\n\nput absent 1\n\n\n")));
    assert_eq!(j["succeeded"].as_bool(), Some(true), "{j}");
    assert_eq!(j["header"]["revision"].as_i64(), Some(4));
}

/// Reads lines from a running `etcdctl watch` until `want` lines arrived (10 s at most).
fn watch_lines(child: &mut std::process::Child, want: usize) -> Vec<String> {
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut lines = Vec::new();
    while lines.len() < want {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => lines.push(l),
            Err(_) => break,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    lines
}

async fn etcdctl_watch(s: Server) {
    ok(&s.etcdctl(&["put", "w", "1"]));
    ok(&s.etcdctl(&["put", "w", "2"]));
    // History with previous values: each event prints PUT, then prev key/value, then key/value.
    let mut child = s.etcdctl_spawn(&["watch", "w", "--rev=2", "--prev-kv"]);
    let lines = watch_lines(&mut child, 8);
    assert_eq!(lines, vec!["PUT", "w", "1", "PUT", "w", "1", "w", "2"]);
    // A live watch sees a write made after it started.
    let mut child = s.etcdctl_spawn(&["watch", "live"]);
    let writer = s.etcdctl_spawn(&["put", "live", "now"]);
    let _ = writer.wait_with_output();
    let lines = watch_lines(&mut child, 3);
    // The put may land before the watch is registered; then re-put until seen (bounded).
    if lines.len() < 3 {
        let mut child = s.etcdctl_spawn(&["watch", "live", "--rev=1"]);
        let lines = watch_lines(&mut child, 3);
        assert_eq!(lines, vec!["PUT", "live", "now"]);
    } else {
        assert_eq!(lines, vec!["PUT", "live", "now"]);
    }
}

async fn etcdctl_lease(s: Server) {
    let out = ok(&s.etcdctl(&["lease", "grant", "100"]));
    // "lease 694d7a... granted with TTL(100s)"
    let id = out.split_whitespace().nth(1).expect("lease id").to_string();
    assert!(out.ends_with("granted with TTL(100s)\n"), "{out}");
    ok(&s.etcdctl(&["put", "lk", "v", &format!("--lease={id}")]));
    let ttl = ok(&s.etcdctl(&["lease", "timetolive", &id, "--keys"]));
    assert!(ttl.contains("granted with TTL(100s)") && ttl.contains("attached keys([lk])"), "{ttl}");
    let ka = ok(&s.etcdctl(&["lease", "keep-alive", "--once", &id]));
    assert_eq!(ka, format!("lease {id} keepalived with TTL(100)\n"));
    assert!(ok(&s.etcdctl(&["lease", "list"])).contains(&id));
    assert_eq!(ok(&s.etcdctl(&["lease", "revoke", &id])), format!("lease {id} revoked\n"));
    assert_eq!(ok(&s.etcdctl(&["get", "lk"])), "");
    assert!(ok(&s.etcdctl(&["lease", "timetolive", &id])).contains("already expired"));
}

async fn etcdctl_compaction(s: Server) {
    for i in 0..4 {
        ok(&s.etcdctl(&["put", "c", &i.to_string()]));
    }
    assert_eq!(ok(&s.etcdctl(&["compaction", "4"])), "compacted revision 4\n");
    assert!(
        fails(&s.etcdctl(&["get", "c", "--rev=3"])).contains("etcdserver: mvcc: required revision has been compacted")
    );
    let child = s.etcdctl_spawn(&["watch", "c", "--rev=3"]);
    let out = child.wait_with_output().expect("watch exits");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("watch was canceled (etcdserver: mvcc: required revision has been compacted)"), "{text}");
}

async fn etcdctl_maintenance(s: Server) {
    ok(&s.etcdctl(&["put", "m", "1"]));
    let st = json(&ok(&s.etcdctl(&["endpoint", "status", "-w", "json"])));
    let status = &st[0]["Status"];
    assert!(status["version"].as_str().is_some_and(|v| v.starts_with("3.")), "{st}");
    if s.cluster_size() == 1 {
        assert_eq!(status["leader"], status["header"]["member_id"]);
    } else {
        assert_ne!(status["leader"], status["header"]["member_id"], "a follower was asked");
    }
    // etcdctl 3.4 prints health results on stderr.
    let health = s.etcdctl(&["endpoint", "health"]);
    assert!(health.status.success() && String::from_utf8_lossy(&health.stderr).contains("is healthy"));
    let hk = json(&ok(&s.etcdctl(&["endpoint", "hashkv", "-w", "json"])));
    assert!(hk[0]["HashKV"]["hash"].as_u64().is_some(), "{hk}");
    let members = json(&ok(&s.etcdctl(&["member", "list", "-w", "json"])));
    let listed = members["members"].as_array().expect("members");
    assert_eq!(listed.len(), s.cluster_size());
    let me = listed.iter().find(|m| m["ID"] == status["header"]["member_id"]).expect("the member lists itself");
    assert_eq!(me["name"], s.name());
    assert_eq!(me["clientURLs"][0], s.url());
    let file = tempfile::tempdir().expect("tempdir");
    let path = file.path().join("snap.db");
    let out = s.etcdctl(&["snapshot", "save", path.to_str().expect("utf-8 path")]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Snapshot saved at"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(std::fs::metadata(&path).map(|m| m.len() > 0).unwrap_or(false));
    assert!(ok(&s.etcdctl(&["defrag"])).contains("Finished defragmenting etcd member"));
    assert_eq!(ok(&s.etcdctl(&["alarm", "list"])), "");
}
