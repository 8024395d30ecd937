//! Maintenance and Cluster RPCs through the etcd-client crate. Where Ballast legitimately
//! differs from etcd (version string, hash values, snapshot bytes) the shape is checked.

use etcd_client::{AlarmAction, AlarmType};

use crate::harness::Server;

all_targets!(status_hash_and_members, snapshot_defrag_alarm);

fn version_at_least(v: &str, want: (u32, u32, u32)) -> bool {
    let parts: Vec<u32> = v.split('.').filter_map(|p| p.parse().ok()).collect();
    parts.len() == 3 && (parts[0], parts[1], parts[2]) >= want
}

async fn status_hash_and_members(s: Server) {
    let mut c = s.client().await;
    c.put("a", "1", None).await.expect("put");
    c.put("a", "2", None).await.expect("put");
    let st = c.status().await.expect("status");
    assert!(version_at_least(st.version(), (3, 4, 0)), "{}", st.version());
    if s.target.is_ballast() {
        // kube-apiserver enables watch progress requests only from 3.5.13 on.
        assert!(version_at_least(st.version(), (3, 5, 13)), "{}", st.version());
    }
    let header = st.header().expect("header");
    if s.cluster_size() == 1 {
        assert_eq!(st.leader(), header.member_id(), "a single member leads");
    } else {
        assert!(st.leader() != 0 && st.leader() != header.member_id(), "the follower names another member as leader");
    }
    assert!(st.db_size() > 0 && st.raft_index() > 0 && st.raft_term() > 0);
    assert_eq!(header.revision(), 3);

    let h1 = c.hash_kv(0).await.expect("hashkv");
    let h2 = c.hash_kv(0).await.expect("hashkv");
    assert_eq!(h1.hash(), h2.hash(), "hashing is deterministic");
    c.compact(2, None).await.expect("compact");
    let h3 = c.hash_kv(3).await.expect("hashkv");
    assert_eq!(h3.compact_version(), 2);
    c.hash().await.expect("hash");

    let members = c.member_list().await.expect("members");
    assert_eq!(members.members().len(), s.cluster_size());
    // etcd 3.4 leaves the revision of membership answers at 0.
    assert_eq!(members.header().expect("header").revision(), 0);
    let m = members.members().iter().find(|m| m.id() == header.member_id()).expect("the member lists itself");
    assert_eq!(m.name(), s.name());
    assert_eq!(m.client_urls(), &[s.url()]);
    assert!(members.members().iter().any(|m| m.id() == st.leader()), "the leader is a member");
}

async fn snapshot_defrag_alarm(s: Server) {
    let mut c = s.client().await;
    for i in 0..100 {
        c.put(format!("s/{i}"), vec![b'v'; 100], None).await.expect("put");
    }
    let mut stream = c.snapshot().await.expect("snapshot");
    let mut bytes = 0usize;
    while let Some(chunk) = stream.message().await.expect("chunk") {
        bytes += chunk.blob().len();
    }
    assert!(bytes > 10_000, "snapshot of {bytes} bytes");
    assert_eq!(bytes % 512, 32, "page-aligned data plus a SHA-256 trailer, as etcdctl checks");
    c.defragment().await.expect("defrag");
    let alarms = c.alarm(AlarmAction::Get, AlarmType::None, None).await.expect("alarms");
    assert!(alarms.alarms().is_empty());
    assert_eq!(c.get("s/99", None).await.expect("get").kvs().len(), 1, "defrag keeps data");
}
