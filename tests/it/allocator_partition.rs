//! The revision allocator's member stops with a round of one of its shards replicated but not
//! committed, whose revision is below one another shard committed meanwhile. The round commits
//! under its shard's next leader, after the other, so a watch over both shards on a survivor
//! must hold the later revision until it has the earlier one: a member may take no resolved
//! revision from a new allocator until every shard has reported to it (engine/SHARDING.md,
//! "Reports").
//!
//! The proxies of `partition` open that window on demand, on three members with six shards and
//! spread leaders (A leads shard 0, where the allocator runs, and shard X; B leads Y; C
//! watches):
//!
//! 1. Everything B sends A arrives a [`DELAY`] late, and nothing passes between A and C (the
//!    connections stay open). A still reaches B at once.
//! 2. A put to Y through B: Y's round asks A's allocator for its revision; the ask arrives a
//!    [`DELAY`] later.
//! 3. Meanwhile a put to X through A: A takes revision `r_x` at once and appends the round on
//!    B only; B's acknowledgement is delayed, so the round cannot commit for a [`DELAY`], and
//!    C's log does not have it.
//! 4. Y's ask arrives: A grants `r_y > r_x`, and Y's round commits on B and C.
//! 5. SIGSTOP of A before B's acknowledgement of X's round reaches it.
//!
//! B then leads X (C's log is behind) and commits the round at `r_x`; shard 0's leader, on B
//! or C, starts a new allocator. Nothing of A's facts about `r_x` reached C, so only the
//! allocator's rule keeps C's watch from releasing `r_y` first. With that rule broken (a new
//! allocator resolving its earlier revisions before every shard reported), this test failed 7
//! of 11 runs: it does when shard 0's election finishes before X's (each waits its own
//! randomized election timeout).

use std::time::Duration;

use ballast_engine::shard_map::ShardMap;

use crate::cluster_harness::spawn_put_watch;
use crate::harness::wait_for;
use crate::partition::{ProxiedCluster, Target};

const SHARDS: u32 = 6;
/// How late B's messages reach A. Y's round commits about a `DELAY` after the faults start,
/// and B's acknowledgement of X's round (sent half a `DELAY` in) would reach A half a `DELAY`
/// after that: the window for stopping A. Below the election timeout (1 s), so that A, which
/// hears only B, keeps hearing a quorum and leading (check quorum).
const DELAY: Duration = Duration::from_millis(700);
/// Times the puts are made before giving up on a machine too slow to open the window.
const ATTEMPTS: usize = 3;
/// The watched prefix: every shard holds some of its keys.
const PREFIX: &str = "/registry/pods/";

/// A namespace whose pods live on `shard`.
fn namespace_of(map: &ShardMap, shard: u32) -> String {
    (0..)
        .map(|i| format!("ns{i}"))
        .find(|ns| map.shard_of(format!("{PREFIX}{ns}/p").as_bytes()) == shard)
        .expect("some namespace maps to every shard")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_the_stopped_allocator_left_uncommitted_is_watched_in_order() {
    let c = ProxiedCluster::start_with(Target::Ballast, &["--shards", &SHARDS.to_string()]).await;
    let mut led = Vec::new();
    let spread = wait_for(Duration::from_secs(30), async || {
        led = c.members.iter().map(|m| m.led_shards(SHARDS)).collect();
        led.iter().all(|l| l.len() == 2)
    })
    .await;
    assert!(spread, "each member leads two shards once the cluster settles: {led:?}");
    let a = led.iter().position(|l| l.contains(&0)).expect("a member leads shard 0");
    let (b, other) = ((a + 1) % 3, (a + 2) % 3);
    let x = *led[a].iter().find(|s| **s != 0).expect("A leads a second shard");
    let y = led[b][0];
    let map = ShardMap::new(SHARDS).expect("shard count");
    let (ns_x, ns_y) = (namespace_of(&map, x), namespace_of(&map, y));

    // Both shards have written before, and the watch starts after that.
    let client_a = c.members[a].client().await.expect("connect A");
    let client_b = c.members[b].client().await.expect("connect B");
    client_a.clone().put(format!("{PREFIX}{ns_x}/before"), "0", None).await.expect("put to X");
    let start = client_b.clone().put(format!("{PREFIX}{ns_y}/before"), "0", None).await.expect("put to Y");
    let start = start.header().expect("header").revision() + 1;
    let watcher = c.members[other].client().await.expect("connect C");
    let (watch, seen) = spawn_put_watch(watcher, PREFIX, start).await;

    // On a slow machine X's round may commit before Y's (B's delayed acknowledgement came
    // first): nothing was left uncommitted, so the faults are lifted and the puts made again.
    let mut window = None;
    for attempt in 0..ATTEMPTS {
        let (key_x, key_y) = (format!("{PREFIX}{ns_x}/x{attempt}"), format!("{PREFIX}{ns_y}/y{attempt}"));
        c.one_way_delay(b, a, DELAY);
        c.blackhole_between(a, other);
        let put_y = tokio::spawn({
            let (mut client, key) = (client_b.clone(), key_y.clone());
            async move { client.put(key, "y", None).await.map(|r| r.header().expect("header").revision()) }
        });
        // Y's ask is on its way to A; X's round takes its revision at A now.
        tokio::time::sleep(DELAY / 2).await;
        let put_x = tokio::spawn({
            let (mut client, key) = (client_a.clone(), key_x.clone());
            async move { client.put(key, "x", None).await }
        });
        let r_y = tokio::time::timeout(Duration::from_secs(10), put_y).await;
        let r_y = r_y.expect("Y's put answered").expect("task").expect("Y's put acknowledged");
        if !put_x.is_finished() {
            // SIGSTOP: its connections stay open, so B and C elect shard 0's and X's leaders
            // each after its own election timeout, not both at once.
            c.members[a].signal(19);
            put_x.abort();
            window = Some((key_x, key_y, r_y));
            break;
        }
        let x_answer = put_x.await.expect("task");
        assert!(x_answer.is_ok(), "X's put failed with every member up: {x_answer:?}");
        c.heal();
        // B's delayed messages arrive and A's blackholed connections to C are redialled.
        tokio::time::sleep(2 * DELAY).await;
    }
    let (key_x, key_y, r_y) =
        window.unwrap_or_else(|| panic!("in {ATTEMPTS} attempts X's round always committed before Y's"));
    c.heal();

    // X's round commits under X's next leader, at the revision A gave it.
    let mut r_x = None;
    let committed = wait_for(Duration::from_secs(30), async || {
        r_x = c.members[other].local_get(&key_x).await.map(|(_, rev)| rev);
        r_x.is_some()
    })
    .await;
    assert!(committed, "X's replicated round committed under its new leader");
    let r_x = r_x.expect("committed");
    assert!(r_x < r_y, "A gave X's round {r_x} before it granted Y's {r_y}: the window this test is about");
    // The watch task ends with a panic at an event out of order, before recording it.
    let both = wait_for(Duration::from_secs(30), async || {
        let seen = seen.lock().expect("seen");
        watch.is_finished() || seen.iter().any(|(k, _)| *k == key_x) && seen.iter().any(|(k, _)| *k == key_y)
    })
    .await;
    if watch.is_finished() {
        watch.await.expect("the watch on C delivered revisions in order");
    } else {
        watch.abort();
    }
    let seen = seen.lock().expect("seen").clone();
    assert!(both, "the watch on C delivered both puts: {seen:?}");
    let revs: Vec<i64> = seen.iter().map(|(_, r)| *r).collect();
    assert!(revs.windows(2).all(|w| w[0] < w[1]), "the watch on C delivered revisions in order: {seen:?}");
    assert!(seen.contains(&(key_x.clone(), r_x)) && seen.contains(&(key_y.clone(), r_y)), "{seen:?}");
}
