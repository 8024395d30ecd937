//! The Lock and Election services through a raw gRPC client, and `etcdctl lock` / `etcdctl
//! elect` sessions (etcdctl 3.4 builds these on KV, Lease and Watch itself), against both
//! servers.

use std::process::Stdio;
use std::time::Duration;

use ballast_proto::v3electionpb::{
    election_client::ElectionClient, CampaignRequest, LeaderKey, LeaderRequest, ProclaimRequest, ResignRequest,
};
use ballast_proto::v3lockpb::{lock_client::LockClient, LockRequest, UnlockRequest};

use crate::harness::{ok, Server};

both_targets!(grpc_lock_queue, grpc_election, etcdctl_lock_and_elect);

async fn lease(s: &Server) -> i64 {
    s.client().await.lease_grant(60, None).await.expect("lease").id()
}

/// Resolves `fut` within 10 s.
async fn soon<T>(fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), fut).await.expect("within 10 s")
}

async fn grpc_lock_queue(s: Server) {
    let mut c = LockClient::connect(s.url()).await.expect("connect");
    let (a, b) = (lease(&s).await, lease(&s).await);
    let first = soon(c.lock(LockRequest { name: b"l".to_vec().into(), lease: a })).await.expect("lock").into_inner();
    assert_eq!(first.key.as_ref(), format!("l/{a:x}").as_bytes());
    let mut c2 = c.clone();
    let mut second = tokio::spawn(async move { c2.lock(LockRequest { name: b"l".to_vec().into(), lease: b }).await });
    assert!(
        tokio::time::timeout(Duration::from_millis(500), &mut second).await.is_err(),
        "the second owner waits while the first holds the lock"
    );
    let unlocked = c.unlock(UnlockRequest { key: first.key.clone() }).await.expect("unlock").into_inner();
    let got = soon(second).await.expect("task").expect("second lock").into_inner();
    assert_eq!(got.key.as_ref(), format!("l/{b:x}").as_bytes());
    let (u, g) = (unlocked.header.expect("header").revision, got.header.expect("header").revision);
    assert!(g >= u, "the second owner's answer is at or after the unlock ({g} < {u})");
    let kv = s.client().await.get("l/", Some(etcd_client::GetOptions::new().with_prefix())).await.expect("get");
    assert_eq!(kv.kvs().len(), 1, "only the owner's key is left");
    assert_eq!(kv.kvs()[0].lease(), b);
}

async fn grpc_election(s: Server) {
    let mut c = ElectionClient::connect(s.url()).await.expect("connect");
    let none = c.leader(LeaderRequest { name: b"e".to_vec().into() }).await.expect_err("no leader yet");
    assert_eq!(none.message(), "election: no leader");
    let (a, b) = (lease(&s).await, lease(&s).await);
    let won = soon(c.campaign(CampaignRequest { name: b"e".to_vec().into(), lease: a, value: b"v1".to_vec().into() }))
        .await
        .expect("campaign")
        .into_inner();
    let me = won.leader.expect("leader key");
    assert_eq!((me.key.as_ref(), me.lease), (format!("e/{a:x}").as_bytes(), a));
    let leader = c.leader(LeaderRequest { name: b"e".to_vec().into() }).await.expect("leader").into_inner();
    let kv = leader.kv.expect("kv");
    assert_eq!((kv.value.as_ref(), kv.create_revision), (b"v1".as_slice(), me.rev));
    let mut observe = c.observe(LeaderRequest { name: b"e".to_vec().into() }).await.expect("observe").into_inner();
    let seen = soon(observe.message()).await.expect("observe").expect("a leader");
    assert_eq!(seen.kv.expect("kv").value.as_ref(), b"v1");
    c.proclaim(ProclaimRequest { leader: Some(me.clone()), value: b"v2".to_vec().into() }).await.expect("proclaim");
    let seen = soon(observe.message()).await.expect("observe").expect("the new value");
    assert_eq!(seen.kv.expect("kv").value.as_ref(), b"v2");
    let stale = LeaderKey { rev: me.rev + 100, ..me.clone() };
    let err =
        c.proclaim(ProclaimRequest { leader: Some(stale), value: b"x".to_vec().into() }).await.expect_err("stale");
    assert_eq!(err.message(), "election: not leader");
    let err = c.proclaim(ProclaimRequest { leader: None, value: b"x".to_vec().into() }).await.expect_err("no key");
    assert_eq!(err.message(), "\"leader\" field must be provided");
    let mut c2 = c.clone();
    let mut next = tokio::spawn(async move {
        c2.campaign(CampaignRequest { name: b"e".to_vec().into(), lease: b, value: b"w".to_vec().into() }).await
    });
    assert!(tokio::time::timeout(Duration::from_millis(500), &mut next).await.is_err(), "the next campaigner waits");
    c.resign(ResignRequest { leader: Some(me) }).await.expect("resign");
    let won = soon(next).await.expect("task").expect("campaign").into_inner();
    assert_eq!(won.leader.expect("leader key").key.as_ref(), format!("e/{b:x}").as_bytes());
    let seen = soon(observe.message()).await.expect("observe").expect("the next leader");
    assert_eq!(seen.kv.expect("kv").value.as_ref(), b"w");
}

/// Reads `n` lines of a running etcdctl's stdout (10 s at most).
fn lines(child: &mut std::process::Child, n: usize) -> Vec<String> {
    let rx = crate::harness::stdout_lines(child);
    (0..n).map_while(|_| rx.recv_timeout(Duration::from_secs(10)).ok()).collect()
}

async fn etcdctl_lock_and_elect(s: Server) {
    assert_eq!(ok(&s.etcdctl(&["lock", "mylock", "echo", "held"])), "held\n");
    let mut holder = s.etcdctl_spawn(&["lock", "mylock"]);
    let held = lines(&mut holder, 1);
    assert!(held.first().is_some_and(|k| k.starts_with("mylock/")), "{held:?}");
    let waiting = std::process::Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={}", s.endpoint()))
        .args(["lock", "mylock", "echo", "second"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("etcdctl");
    let mut waiting = waiting;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(waiting.try_wait().expect("status").is_none(), "the second etcdctl lock waits");
    // SIGINT: etcdctl unlocks and ends, as on an operator's Ctrl-C.
    let _ = std::process::Command::new("kill").arg("-INT").arg(holder.id().to_string()).status();
    let _ = holder.wait();
    assert_eq!(lines(&mut waiting, 1), vec!["second".to_string()]);
    let _ = waiting.wait();

    let mut leader = s.etcdctl_spawn(&["elect", "myelection", "p1"]);
    let won = lines(&mut leader, 2);
    assert!(
        won.first().is_some_and(|k| k.starts_with("myelection/")) && won.get(1) == Some(&"p1".to_string()),
        "{won:?}"
    );
    let mut observer = s.etcdctl_spawn(&["elect", "-l", "myelection"]);
    assert_eq!(lines(&mut observer, 2), won, "the observer sees the leader");
    for c in [&mut leader, &mut observer] {
        let _ = c.kill();
        let _ = c.wait();
    }
}
