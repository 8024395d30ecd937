//! Lease RPCs through the etcd-client crate.

use std::time::Duration;

use ballast_proto::etcdserverpb::{lease_client::LeaseClient, LeaseKeepAliveRequest};
use etcd_client::{GetOptions, LeaseGrantOptions, LeaseTimeToLiveOptions, PutOptions};
use tokio_stream::wrappers::ReceiverStream;

use crate::harness::{wait_for, Server};
use crate::kv::status;

all_targets!(lease_lifecycle, lease_expiry_deletes_keys);

async fn lease_lifecycle(s: Server) {
    let mut c = s.client().await;
    let g = c.lease_grant(1, None).await.expect("grant");
    assert_eq!(g.ttl(), 2, "TTLs are raised to the minimum");
    let e = c.lease_grant(60, Some(LeaseGrantOptions::new().with_id(g.id()))).await.expect_err("exists");
    assert_eq!(status(e), (tonic::Code::FailedPrecondition, "etcdserver: lease already exists".into()));
    let id = c.lease_grant(60, Some(LeaseGrantOptions::new().with_id(4242))).await.expect("grant").id();
    assert_eq!(id, 4242);
    c.put("l/a", "1", Some(PutOptions::new().with_lease(id))).await.expect("put");
    c.put("l/b", "1", Some(PutOptions::new().with_lease(id))).await.expect("put");
    let ttl = c.lease_time_to_live(id, Some(LeaseTimeToLiveOptions::new().with_keys())).await.expect("ttl");
    assert_eq!(ttl.granted_ttl(), 60);
    assert!(ttl.ttl() > 50 && ttl.ttl() <= 60);
    // etcd lists a lease's keys in Go map order, which is random: compare as a set.
    let mut keys = ttl.keys().to_vec();
    keys.sort();
    assert_eq!(keys, [b"l/a".to_vec(), b"l/b".to_vec()]);
    let unknown = c.lease_time_to_live(777, None).await.expect("ttl of unknown");
    assert_eq!(unknown.ttl(), -1);
    let (mut keeper, mut answers) = c.lease_keep_alive(id).await.expect("keep alive");
    keeper.keep_alive().await.expect("send");
    let a = tokio::time::timeout(Duration::from_secs(10), answers.message())
        .await
        .expect("answer")
        .expect("ok")
        .expect("open");
    assert_eq!((a.id(), a.ttl()), (id, 60));
    let listed: Vec<i64> = c.leases().await.expect("leases").leases().iter().map(|l| l.id()).collect();
    assert!(listed.contains(&id) && listed.contains(&g.id()));
    let before =
        c.get("l/", Some(GetOptions::new().with_prefix())).await.expect("get").header().expect("header").revision();
    c.lease_revoke(id).await.expect("revoke");
    let after = c.get("l/", Some(GetOptions::new().with_prefix())).await.expect("get");
    assert!(after.kvs().is_empty(), "revoke deletes attached keys");
    assert_eq!(after.header().expect("header").revision(), before + 1, "in one revision");
    let e = c.lease_revoke(id).await.expect_err("gone");
    assert_eq!(status(e), (tonic::Code::NotFound, "etcdserver: requested lease not found".into()));
    // A keep-alive for a lease that is gone answers TTL 0 on the wire, not an error (the
    // etcd-client crate turns that into its own "lease not found").
    let mut lc = LeaseClient::connect(s.url()).await.expect("connect");
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tx.send(LeaseKeepAliveRequest { id }).await.expect("send");
    let call = tokio::time::timeout(Duration::from_secs(10), lc.lease_keep_alive(ReceiverStream::new(rx)));
    let mut answers = call.await.expect("call within 10 s").expect("keep alive").into_inner();
    let a = tokio::time::timeout(Duration::from_secs(10), answers.message())
        .await
        .expect("answer")
        .expect("ok")
        .expect("open");
    assert_eq!((a.id, a.ttl), (id, 0));
}

async fn lease_expiry_deletes_keys(s: Server) {
    let mut c = s.client().await;
    let id = c.lease_grant(2, None).await.expect("grant").id();
    c.put("exp", "v", Some(PutOptions::new().with_lease(id))).await.expect("put");
    let gone = wait_for(Duration::from_secs(15), async || {
        c.get("exp", None).await.map(|r| r.kvs().is_empty()).unwrap_or(false)
    })
    .await;
    assert!(gone, "an expired lease deletes its keys");
    assert_eq!(c.lease_time_to_live(id, None).await.expect("ttl").ttl(), -1);
}
