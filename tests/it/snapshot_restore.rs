//! Snapshots restored into a new member: `etcdctl snapshot save`, then `ballast snapshot
//! restore` (stock etcd: `etcdctl snapshot restore`, so the expectations are etcd's own), then a
//! server started on the restored directory. And, with eight shards, that a snapshot taken under
//! writes is one revision across the shards.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use etcd_client::{GetOptions, PutOptions};

use crate::harness::{ok, Server, Target};

both_targets!(restore_round_trip);

/// Unpacks `snapshot` into `data` the way the target's own tooling does.
fn restore(target: Target, snapshot: &Path, data: &Path, peer: &str) {
    let out = if target.is_ballast() {
        Command::new(env!("CARGO_BIN_EXE_ballast"))
            .args(["snapshot", "restore"])
            .arg(snapshot)
            .arg("--data-dir")
            .arg(data)
            .output()
            .expect("ballast snapshot restore")
    } else {
        Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .args(["snapshot", "restore"])
            .arg(snapshot)
            .arg(format!("--data-dir={}", data.display()))
            .args(["--name", "t"])
            .arg(format!("--initial-cluster=t={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .output()
            .expect("etcdctl snapshot restore")
    };
    assert!(
        out.status.success(),
        "restore failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every key with its value, revisions, version and lease, in key order.
type Listing = Vec<(Vec<u8>, Vec<u8>, i64, i64, i64, i64)>;

async fn listing(c: &mut etcd_client::Client, prefix: &str) -> (Listing, i64) {
    let r = c.get(prefix, Some(GetOptions::new().with_prefix())).await.expect("range");
    let rev = r.header().expect("header").revision();
    let kvs = r
        .kvs()
        .iter()
        .map(|kv| {
            (kv.key().to_vec(), kv.value().to_vec(), kv.create_revision(), kv.mod_revision(), kv.version(), kv.lease())
        })
        .collect();
    (kvs, rev)
}

async fn restore_round_trip(s: Server) {
    let mut c = s.client().await;
    for i in 0..40 {
        // Keys of several shards on a sharded engine, and one outside `/registry/`.
        c.put(format!("/registry/configmaps/ns{}/k{i}", i % 7), format!("v{i}"), None).await.expect("put");
    }
    c.put("/registry/configmaps/ns0/k0", "again", None).await.expect("put");
    c.delete("/registry/configmaps/ns1/k1", None).await.expect("delete");
    let lease = c.lease_grant(600, None).await.expect("grant").id();
    c.put("/registry/leases/ns0/held", "x", Some(PutOptions::new().with_lease(lease))).await.expect("put");
    c.put("plain", "p", None).await.expect("put");
    let compacted = c.get("plain", None).await.expect("get").header().expect("header").revision() - 5;
    c.compact(compacted, None).await.expect("compact");
    let (before, rev) = listing(&mut c, "").await;
    let member = c.status().await.expect("status").header().expect("header").member_id();

    let file = tempfile::tempdir().expect("tempdir");
    let snap = file.path().join("snap.db");
    let saved = ok(&s.etcdctl(&["snapshot", "save", snap.to_str().expect("utf-8 path")]));
    assert!(saved.contains("Snapshot saved at"), "{saved}");
    // Writes after the snapshot are not in it.
    c.put("plain", "later", None).await.expect("put");
    let target = s.target;
    let old_peer = s.peer_url();
    drop(s);

    let r = Server::start_with(target, |data, peer| restore(target, &snap, data, peer)).await;
    let mut c = r.client().await;
    let (after, rev_after) = listing(&mut c, "").await;
    assert_eq!(after, before, "every key, value, revision, version and lease as at the snapshot");
    assert_eq!(rev_after, rev, "the restored store is at the snapshot's revision");
    let leases: Vec<i64> = c.leases().await.expect("leases").leases().iter().map(|l| l.id()).collect();
    assert_eq!(leases, vec![lease], "the lease came back with its key");
    let err = c.get("plain", Some(GetOptions::new().with_revision(compacted - 1))).await.expect_err("compacted");
    assert!(err.to_string().contains("required revision has been compacted"), "{err}");
    let put = c.put("plain", "new", None).await.expect("put");
    assert_eq!(put.header().expect("header").revision(), rev + 1, "revisions go on from the snapshot's");
    let new_member = c.status().await.expect("status").header().expect("header").member_id();
    // etcd's rule: a member's ID comes from its peer URLs and the cluster token, here the
    // restored member's own flags.
    let own = {
        use sha1::Digest;
        let digest = sha1::Sha1::new().chain_update(r.peer_url()).chain_update("etcd-cluster").finalize();
        u64::from_be_bytes(digest[..8].try_into().expect("eight bytes"))
    };
    assert_eq!(new_member, own, "a restored member takes the ID its own flags give it");
    if r.peer_url() != old_peer {
        assert_ne!(new_member, member, "a restored member is a new cluster, with IDs of its own");
    }
}

mod one_revision_across_shards {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ballast_8_shards() {
        Box::pin(super::snapshot_is_one_revision_across_shards()).await
    }
}

mod restored_shard_count {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ballast_8_shards() {
        super::a_restored_member_keeps_its_shard_count().await
    }
}

/// A snapshot of eight shards restores into a directory that only `--shards 8` opens: another
/// count would place keys where they are not, so the start is refused with the reason.
async fn a_restored_member_keeps_its_shard_count() {
    let s = Server::start(Target::BallastSharded).await;
    s.client().await.put("/registry/configmaps/ns1/a", "1", None).await.expect("put");
    let dir = tempfile::tempdir().expect("tempdir");
    let snap = dir.path().join("snap.db");
    ok(&s.etcdctl(&["snapshot", "save", snap.to_str().expect("utf-8 path")]));
    let data = dir.path().join("data");
    restore(Target::BallastSharded, &snap, &data, "unused");
    let port = crate::harness::free_port();
    let out = Command::new("timeout")
        .arg("60")
        .arg(env!("CARGO_BIN_EXE_ballast"))
        .args(["engine", "--shards", "1", "--name", "t"])
        .arg(format!("--data-dir={}", data.display()))
        .arg(format!("--listen-client-urls=http://127.0.0.1:{port}"))
        .arg(format!("--advertise-client-urls=http://127.0.0.1:{port}"))
        .output()
        .expect("ballast engine");
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success(), "a restored 8-shard directory opened with --shards 1: {said}");
    assert!(said.contains("created with --shards 8"), "{said}");
}

/// A snapshot taken while a client writes one key after another, round-robin over eight
/// namespaces (so over several shards), holds exactly the first `m` writes for some `m`: no
/// write is missing while a later one is there, whichever shards they went to.
async fn snapshot_is_one_revision_across_shards() {
    let s = Server::start(Target::BallastSharded).await;
    Box::pin(snapshots_hold_a_prefix_of_the_writes(&s, &s)).await;
}

/// Writes one key after another through `writer`, round-robin over eight namespaces, takes
/// three snapshots through `snapshotter` meanwhile, restores each into an eight-shard member,
/// and checks it holds exactly the first `m` writes for some `m` at least the count acknowledged
/// before it was asked for.
pub(crate) async fn snapshots_hold_a_prefix_of_the_writes(writer: &Server, snapshotter: &Server) {
    let s = writer;
    let acked = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicUsize::new(0));
    let writer = {
        let (acked, stop, mut c) = (Arc::clone(&acked), Arc::clone(&stop), s.client().await);
        tokio::spawn(async move {
            let mut i = 0usize;
            // Bounded: at most 20,000 writes, and it stops 300 writes after the snapshot.
            while i < 20_000 && stop.load(Ordering::SeqCst) == 0 || i < stop.load(Ordering::SeqCst) {
                c.put(format!("/registry/configmaps/ns{}/k{i:06}", i % 8), i.to_string(), None).await.expect("put");
                i += 1;
                acked.store(i, Ordering::SeqCst);
            }
        })
    };
    assert!(
        crate::harness::wait_for(std::time::Duration::from_secs(30), async || acked.load(Ordering::SeqCst) >= 200)
            .await,
        "the writer got going"
    );
    let mut c = snapshotter.client().await;
    let file = tempfile::tempdir().expect("tempdir");
    let mut snapshots = Vec::new();
    for n in 0..3 {
        let acked_before = acked.load(Ordering::SeqCst);
        let mut stream = c.snapshot().await.expect("snapshot");
        let mut bytes = Vec::new();
        while let Some(chunk) = stream.message().await.expect("chunk") {
            bytes.extend_from_slice(chunk.blob());
        }
        let path = file.path().join(format!("snap-{n}.db"));
        std::fs::write(&path, &bytes).expect("write snapshot");
        snapshots.push((path, acked_before));
    }
    stop.store(acked.load(Ordering::SeqCst) + 300, Ordering::SeqCst);
    writer.await.expect("writer");
    for (path, acked_before) in snapshots {
        let r =
            Server::start_with(Target::BallastSharded, |data, peer| restore(Target::BallastSharded, &path, data, peer))
                .await;
        let mut c = r.client().await;
        let (kvs, rev) = listing(&mut c, "/registry/configmaps/").await;
        let mut seen: Vec<usize> =
            kvs.iter().map(|kv| String::from_utf8_lossy(&kv.1).parse().expect("a write's number")).collect();
        seen.sort_unstable();
        let m = seen.len();
        assert!(
            seen.iter().copied().eq(0..m),
            "the snapshot holds writes 0..{m} with holes: {:?}",
            (0..m).filter(|i| seen.binary_search(i).is_err()).take(10).collect::<Vec<_>>()
        );
        assert!(m >= acked_before, "every write acknowledged before the snapshot is in it ({m} < {acked_before})");
        let newest = kvs.iter().map(|kv| kv.3).max().unwrap_or(0);
        assert_eq!(newest, rev, "the restored revision is the newest write's");
    }
}
