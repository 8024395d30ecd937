//! A cluster grown by MemberAdd from one member started alone with `--shards 6` and no
//! `--spread-shard-leaders`: one member leads every shard until the cluster has three voters,
//! then the cluster switches to spread leaders at one entry of shard 0's log and each member
//! leads two shards. Across the switch (and a kill -9 of shard 0's member during or after it)
//! every acknowledged write is on every member at its revision, HashKV agrees, one client's
//! revisions strictly increase, a watch opened before the growth sees every revision once, in
//! order, and serializable reads over every shard on a survivor of the kill never show a
//! revision without the acknowledged writes below it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::GetOptions;

use crate::cluster::{assert_watch_saw_all, check_acknowledged, watched, writes_with_fault};
use crate::cluster_harness::{put_any, spawn_put_watch, Cluster};
use crate::cluster_shards::{
    add_member, assert_leaders_spread, assert_running_lead_evenly, leaderships, start_added_member,
};
use crate::harness::{ok, wait_for, Server, Target};

const PREFIX: &str = "/registry/configmaps/";

/// One client writing keys of every shard in turn through whichever member answers (the
/// members known so far, `endpoints`), until `stop`; returns every acknowledged write in the
/// order acknowledged.
fn spawn_writer(
    endpoints: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Vec<(String, String, i64)>> {
    tokio::spawn(async move {
        let mut acked = Vec::new();
        let mut i = 0usize;
        while !stop.load(Ordering::SeqCst) {
            let eps = endpoints.lock().expect("endpoints").clone();
            let (key, value) = (format!("{PREFIX}ns{}/g{i:04}", i % 12), format!("v{i}"));
            if let Some(rev) = put_any(&eps, i, &key, &value, Duration::from_secs(20)).await {
                acked.push((key, value, rev));
            }
            i += 1;
        }
        acked
    })
}

/// What one serializable read of a prefix answered: its header revision and every (key, mod
/// revision) it held.
type ReadAt = (i64, Vec<(String, i64)>);

/// Reads `prefix` serializably on `m` every 10 ms until `stop`, keeping each answer. A read
/// over several shards is answered at the member's resolved revision, so each answer must hold
/// every write committed at or below its header revision ([`assert_reads_whole`]).
async fn spawn_serializable_reads(
    m: &Server,
    prefix: String,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Vec<ReadAt>> {
    let mut client = m.client().await;
    tokio::spawn(async move {
        let mut reads = Vec::new();
        while !stop.load(Ordering::SeqCst) {
            let opts = GetOptions::new().with_prefix().with_serializable();
            // A read refused or timed out while the shards elect leaders says nothing.
            if let Ok(r) = client.get(prefix.as_str(), Some(opts)).await {
                let rev = r.header().map_or(0, |h| h.revision());
                let kvs =
                    r.kvs().iter().map(|kv| (kv.key_str().expect("utf-8").to_string(), kv.mod_revision())).collect();
                reads.push((rev, kvs));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        reads
    })
}

/// Every read holds every acknowledged write at or below its header revision, at its revision:
/// a read across shards never shows a later revision without an earlier one.
fn assert_reads_whole(reads: &[ReadAt], acked: &BTreeMap<String, (String, i64)>) {
    for (at, kvs) in reads {
        for (key, (_, rev)) in acked.iter().filter(|(_, (_, r))| r <= at) {
            assert!(
                kvs.contains(&(key.clone(), *rev)),
                "a serializable read at revision {at} lacks {key} written at {rev} ({} keys read)",
                kvs.len()
            );
        }
    }
}

/// Checks one client's acknowledged revisions strictly increase and returns them as a map.
fn acknowledged(writes: &[(String, String, i64)]) -> BTreeMap<String, (String, i64)> {
    let revs: Vec<i64> = writes.iter().map(|(_, _, r)| *r).collect();
    assert!(revs.windows(2).all(|w| w[1] > w[0]), "one client's revisions strictly increase: {revs:?}");
    writes.iter().map(|(k, v, r)| (k.clone(), (v.clone(), *r))).collect()
}

/// Waits until the watch collected every acknowledged write, then checks it saw each once.
async fn assert_watch_complete(seen: &Mutex<Vec<(String, i64)>>, acked: &BTreeMap<String, (String, i64)>) {
    let all = wait_for(Duration::from_secs(20), async || {
        let seen = seen.lock().expect("seen");
        acked.iter().all(|(k, (_, r))| seen.contains(&(k.clone(), *r)))
    })
    .await;
    let seen = seen.lock().expect("seen").clone();
    assert!(all, "the watch opened before the growth missed writes ({} seen of {})", seen.len(), acked.len());
    assert_watch_saw_all(&seen, acked);
}

/// Every member answers `etcdctl endpoint status` and names one leader, as an operator checks.
fn assert_status_everywhere(c: &Cluster) {
    let eps = c.members.iter().filter(|m| m.is_running()).map(Server::endpoint).collect::<Vec<_>>().join(",");
    let out = ok(&c.members[0].etcdctl(&[&format!("--endpoints={eps}"), "endpoint", "status", "-w", "json"]));
    let status: serde_json::Value = serde_json::from_str(&out).expect("status json");
    let rows = status.as_array().expect("rows");
    let answered: std::collections::BTreeSet<&str> =
        rows.iter().map(|r| r["Endpoint"].as_str().expect("endpoint")).collect();
    assert_eq!(answered.len(), c.members.iter().filter(|m| m.is_running()).count(), "{out}");
    let leaders: Vec<u64> = rows.iter().map(|r| r["Status"]["leader"].as_u64().expect("leader")).collect();
    assert!(leaders.iter().all(|l| *l != 0 && *l == leaders[0]), "one leader named by every member: {out}");
}

/// Grows one member started alone with `--shards 6` to three by MemberAdd while a client
/// writes and a watch opened before the growth runs; after the switch each member leads two
/// shards and nothing was lost, repeated or reordered. Then kills -9 the member leading shard 0
/// (the revision allocator's) during writes, and checks the same after its restart, and that
/// serializable reads over every shard on a survivor during the writes were whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_started_alone_switches_to_spread_leaders_at_three() {
    let mut c = Cluster::start_with_args(Target::Ballast, 1, &["--shards", "6"]).await;
    assert_eq!(leaderships(&c, 6), vec![6], "a member alone leads every shard");
    let first = c.members[0].client().await.put(format!("{PREFIX}ns0/first"), "v", None).await.expect("put");
    let from = first.header().expect("header").revision() + 1;
    let (watch, seen) = spawn_put_watch(c.members[0].client().await, PREFIX, from).await;
    let endpoints = Arc::new(Mutex::new(c.endpoints()));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = spawn_writer(Arc::clone(&endpoints), Arc::clone(&stop));
    add_member(&mut c, "m2", false).await;
    *endpoints.lock().expect("endpoints") = c.endpoints();
    // Two voters: still one member leading every shard.
    let r = c.members[0].client().await.put(format!("{PREFIX}ns0/two"), "v", None).await.expect("put");
    c.wait_caught_up(r.header().expect("header").revision()).await;
    assert_eq!(leaderships(&c, 6), vec![6, 0], "two voters keep one member leading");
    add_member(&mut c, "m3", false).await;
    *endpoints.lock().expect("endpoints") = c.endpoints();
    assert_eq!(assert_leaders_spread(&c, 6).await, vec![2, 2, 2], "three voters: two shards each");
    tokio::time::sleep(Duration::from_millis(500)).await; // writes after the switch as well
    stop.store(true, Ordering::SeqCst);
    let writes = writer.await.expect("writer");
    let acked = acknowledged(&writes);
    assert!(acked.len() >= 10, "writes were acknowledged during the growth ({})", acked.len());
    check_acknowledged(&c, &acked).await;
    assert_watch_complete(&seen, &acked).await;
    watch.abort();
    // For the log (not asserted: the balance's leader transfers right after the switch may
    // skip revisions, as any leadership move with spread leaders may): gaps the watch saw.
    let revs: Vec<i64> = seen.lock().expect("seen").iter().map(|(_, r)| *r).collect();
    let gaps: Vec<(i64, i64)> = revs.windows(2).filter(|w| w[1] != w[0] + 1).map(|w| (w[0], w[1])).collect();
    eprintln!("{} revisions watched from {from}; gaps: {gaps:?}", revs.len());
    assert!(c.members[0].full_log().contains("switch to spread leaders proposed"), "the first member switched");
    assert_status_everywhere(&c);
    // A watch from revision 1 on a member that joined sees the same writes, in order.
    let later = watched(&c.members[2], PREFIX, &acked).await;
    assert_watch_saw_all(&later, &acked);

    // Kill -9 of shard 0's member (the allocator's) after the switch, during writes to every
    // shard: the others acknowledge, and the restarted member leads its share again.
    // Serializable reads of every shard on the same survivor, answered at its resolved revision.
    let allocator = c.leader().await;
    let survivor = &c.members[(allocator + 1) % 3];
    let (watch, seen) = spawn_put_watch(survivor.client().await, PREFIX, 1).await;
    let stop_reads = Arc::new(AtomicBool::new(false));
    let reader = spawn_serializable_reads(survivor, format!("{PREFIX}k"), Arc::clone(&stop_reads)).await;
    let acked = writes_with_fault(&mut c, &format!("{PREFIX}k"), 4, 20, 10, |c| c.members[allocator].kill9()).await;
    stop_reads.store(true, Ordering::SeqCst);
    let reads = reader.await.expect("reader");
    assert!(acked.len() >= 75, "the survivors kept acknowledging writes ({} of 80)", acked.len());
    assert!(reads.len() >= 10, "the survivor answered serializable reads during the writes ({})", reads.len());
    assert_reads_whole(&reads, &acked);
    assert_running_lead_evenly(&c, 6).await;
    c.members[allocator].restart().await;
    check_acknowledged(&c, &acked).await;
    assert_watch_complete(&seen, &acked).await;
    watch.abort();
    assert_eq!(assert_leaders_spread(&c, 6).await, vec![2, 2, 2], "the restarted member leads two again");
    assert_status_everywhere(&c);
}

/// Kills -9 the first member (it leads every shard and makes the switch) the moment its log
/// says it proposed the switch entry, during writes: the entry may or may not have committed, so
/// the survivors either spread already or one of them leads every shard and switches itself.
/// Once the third member (added just before) is started, the survivors acknowledge writes; after
/// the restart each member leads two shards, every acknowledged write is everywhere at its
/// revision, HashKV is equal, and a watch opened before the kill saw every write once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_switching_member_loses_nothing() {
    Box::pin(fault_during_the_switch("switch to spread leaders proposed", 0, "-9")).await;
}

/// Pauses the second member (SIGSTOP) the moment the first logs that it begins the switch, then
/// kills -9 the first, before the third member runs: the switch entry usually never reaches a
/// quorum (the second member would have to hold it), so the next member to lead every shard
/// begins the switch again itself; either way, the same checks as above hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switch_cut_short_is_made_by_the_next_leader() {
    Box::pin(fault_during_the_switch("switching the shards' leaders", 1, "-STOP")).await;
}

/// Grows one member with `--shards 6` to two under writes, then adds a third by MemberAdd and,
/// the moment the first member's log says `marker`, sends `signal` to member `target`; then
/// kills -9 the first member, resumes the second, starts the third and checks what the tests
/// above describe.
async fn fault_during_the_switch(marker: &'static str, target: usize, signal: &'static str) {
    let mut c = Cluster::start_with_args(Target::Ballast, 1, &["--shards", "6"]).await;
    let endpoints = Arc::new(Mutex::new(c.endpoints()));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = spawn_writer(Arc::clone(&endpoints), Arc::clone(&stop));
    add_member(&mut c, "m2", false).await;
    *endpoints.lock().expect("endpoints") = c.endpoints();
    let (watch, seen) = spawn_put_watch(c.members[1].client().await, PREFIX, 1).await;
    // The switch begins once MemberAdd made three voters, before the third member runs.
    let (log, pid) = (c.members[0].log_path(), c.members[target].pid().expect("running"));
    // Set before the signal is sent, so a request the fault cuts short sees it.
    let fired = Arc::new(AtomicBool::new(false));
    let fire = Arc::clone(&fired);
    let faulter = std::thread::spawn(move || {
        // The add below may be refused for a while, and the switch then waits for every shard
        // to apply the new voter: progress the machine's load delays, hence the long bound.
        let until = std::time::Instant::now() + Duration::from_secs(60);
        while std::time::Instant::now() < until {
            if std::fs::read_to_string(&log).unwrap_or_default().contains(marker) {
                fire.store(true, Ordering::SeqCst);
                let _ = std::process::Command::new("kill").args([signal, &pid.to_string()]).status();
                return true;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        false
    });
    let peer = crate::harness::free_port();
    let url = format!("http://127.0.0.1:{peer}");
    // MemberAdd is refused as etcd refuses it ("unhealthy cluster") until the first member has
    // heard from the second one since its last election timeout, and while the shards still
    // take the second member in ("another membership change is in progress"), neither of which
    // the test waits for: tried until it is accepted (a try that timed out may have been, and
    // the next finds the URL taken) or the fault came, which may cut its answer short; the
    // member list says below whether it was added.
    let mut refusals = Vec::new();
    let tried = wait_for(Duration::from_secs(20), async || {
        let o = c.members[0].etcdctl(&["member", "add", "m3", &format!("--peer-urls={url}")]);
        let err = String::from_utf8_lossy(&o.stderr).trim().to_string();
        if o.status.success() || err.contains("etcdserver: Peer URLs already exists") || fired.load(Ordering::SeqCst) {
            return true;
        }
        let expected = [
            "etcdserver: unhealthy cluster",
            "another membership change is in progress",
            "context deadline exceeded",
            "etcdserver: request timed out",
        ];
        assert!(expected.iter().any(|e| err.contains(e)), "member add m3: {err}");
        refusals.push(err);
        false
    })
    .await;
    eprintln!("member add m3 refused {} times before it was accepted: {refusals:?}", refusals.len());
    assert!(tried, "member add m3 was never accepted: {refusals:?}");
    let faulted = tokio::task::spawn_blocking(move || faulter.join().expect("faulter")).await.expect("join");
    assert!(faulted, "the first member never logged {marker:?}; its log:\n{}", c.members[0].log_tail());
    c.members[0].kill9();
    c.members[1].signal(18);
    let listed = wait_for(Duration::from_secs(20), async || {
        let out = c.members[1].etcdctl(&["member", "list"]);
        String::from_utf8_lossy(&out.stdout).contains(&url)
    })
    .await;
    assert!(listed, "m3 was added before the fault");
    start_added_member(&mut c, "m3", peer).await;
    *endpoints.lock().expect("endpoints") = c.endpoints();
    assert_running_lead_evenly(&c, 6).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::SeqCst);
    let writes = writer.await.expect("writer");
    let acked = acknowledged(&writes);
    // For the log (either way is right): whether a survivor proposed the switch again.
    let again = c.members[1..].iter().any(|m| m.full_log().contains("switch to spread leaders proposed"));
    eprintln!("{} writes acknowledged; a survivor proposed the switch again: {again}", acked.len());
    c.members[0].restart().await;
    assert_eq!(assert_leaders_spread(&c, 6).await, vec![2, 2, 2]);
    check_acknowledged(&c, &acked).await;
    assert_watch_complete(&seen, &acked).await;
    watch.abort();
    assert_status_everywhere(&c);
}
