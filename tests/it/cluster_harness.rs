//! Clusters of real member processes for tests: [`Cluster`] starts `n` Ballast engine members or
//! `n` stock etcd members on loopback with one `--initial-cluster`, and
//! [`both_clusters!`] runs a test body against a 3-member Ballast cluster and a 3-member etcd
//! cluster, so the expectations are etcd's.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::{EventType, WatchOptions};

use crate::harness::{free_port, wait_for, Server, Target};

/// The flag that makes a cluster of several shards keep every shard's leader on one member
/// (their leaders spread over the members without it).
pub(crate) const TOGETHER: &str = "--spread-shard-leaders=false";

/// A cluster owned by one test; its members are killed when it is dropped.
pub(crate) struct Cluster {
    pub(crate) target: Target,
    pub(crate) members: Vec<Server>,
}

impl Cluster {
    /// Starts `n` members at once (a member serves only once a quorum is up) and waits until
    /// every one answers and one of them leads. Ports are picked free but may be taken by
    /// another test before the members bind them, so a cluster that does not come up is
    /// started again on new ports, three times at most.
    pub(crate) async fn start(target: Target, n: usize) -> Cluster {
        Self::start_with_args(target, n, &[]).await
    }

    /// As [`Cluster::start`], with more flags for every member.
    pub(crate) async fn start_with_args(target: Target, n: usize, args: &[&str]) -> Cluster {
        for attempt in 0..3 {
            if let Some(c) = Self::try_start(target, n, args).await {
                return c;
            }
            eprintln!("attempt {attempt}: the {target:?} cluster did not start");
        }
        panic!("{target:?}: no cluster of {n} members started in three attempts");
    }

    async fn try_start(target: Target, n: usize, args: &[&str]) -> Option<Cluster> {
        let ports: Vec<(u16, u16)> = (0..n).map(|_| (free_port(), free_port())).collect();
        // Members given peer TLS flags speak https to each other.
        let https = args.iter().any(|a| a.starts_with("--peer-cert-file"));
        let scheme = if https { "https" } else { "http" };
        let ic = ports
            .iter()
            .enumerate()
            .map(|(i, (_, peer))| format!("m{}={scheme}://127.0.0.1:{peer}", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        let mut members: Vec<Server> = ports
            .iter()
            .enumerate()
            .map(|(i, (port, peer))| Server::member_of(target, &format!("m{}", i + 1), *port, *peer, &ic))
            .collect();
        for m in &mut members {
            m.extra_args = args.iter().map(|a| a.to_string()).collect();
            m.peer_https = https;
            m.spawn_member();
        }
        for m in &members {
            if !m.ready().await {
                eprintln!("{target:?} member {} did not start; log:\n{}", m.name(), m.log_tail());
                return None;
            }
        }
        let c = Cluster { target, members };
        c.leader().await;
        Some(c)
    }

    /// True when the members were started with one member leading every shard.
    pub(crate) fn together(&self) -> bool {
        self.members.iter().any(|m| m.extra_args.iter().any(|a| a == TOGETHER))
    }

    /// Returns every member's `127.0.0.1:<port>`.
    pub(crate) fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(Server::endpoint).collect()
    }

    /// Returns the index of the member every running member names as leader, waiting up to 15 s
    /// for them to agree.
    pub(crate) async fn leader(&self) -> usize {
        let mut found = None;
        let agreed = wait_for(Duration::from_secs(15), async || {
            let mut leaders = Vec::new();
            for m in self.members.iter().filter(|m| m.is_running()) {
                let Ok(mut c) = etcd_client::Client::connect([m.endpoint()], None).await else { return false };
                let Ok(st) = c.status().await else { return false };
                leaders.push(st.leader());
            }
            let Some(&first) = leaders.first() else { return false };
            if first == 0 || leaders.iter().any(|l| *l != first) {
                return false;
            }
            found = self.index_of(first).await;
            found.is_some()
        })
        .await;
        assert!(agreed, "{:?}: the running members did not agree on a leader", self.target);
        found.expect("a leader")
    }

    /// Returns the index of the member with etcd member ID `id`.
    pub(crate) async fn index_of(&self, id: u64) -> Option<usize> {
        for (i, m) in self.members.iter().enumerate().filter(|(_, m)| m.is_running()) {
            let Ok(mut c) = etcd_client::Client::connect([m.endpoint()], None).await else { continue };
            if let Ok(st) = c.status().await {
                if st.header().map(|h| h.member_id()) == Some(id) {
                    return Some(i);
                }
            }
        }
        None
    }

    /// Returns the member IDs by member index.
    pub(crate) async fn ids(&self) -> Vec<u64> {
        let mut ids = Vec::new();
        for m in &self.members {
            let st = m.client().await.status().await.expect("status");
            ids.push(st.header().expect("header").member_id());
        }
        ids
    }

    /// Waits until every running member has applied revision `rev` (serializable reads of
    /// its own state), up to 20 s.
    pub(crate) async fn wait_caught_up(&self, rev: i64) {
        for m in self.members.iter().filter(|m| m.is_running()) {
            let ok = wait_for(Duration::from_secs(20), async || {
                let Ok(mut c) = etcd_client::Client::connect([m.endpoint()], None).await else { return false };
                // Every key, counted: with several shards a range over all of them is answered at
                // the revision up to which every shard of the member holds every write (a
                // single key's answer speaks for its own shard only).
                let opts = etcd_client::GetOptions::new().with_serializable().with_from_key().with_count_only();
                matches!(c.get("\0", Some(opts)).await, Ok(r) if r.header().is_some_and(|h| h.revision() >= rev))
            })
            .await;
            assert!(
                ok,
                "{:?} member {} did not reach revision {rev}; log:\n{}",
                self.target,
                m.endpoint(),
                m.log_tail()
            );
        }
    }
}

/// Defines `<name>::ballast` and `<name>::etcd`, each running `async fn <name>(Cluster)` on a
/// fresh 3-member cluster.
macro_rules! both_clusters {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn ballast() {
                super::$name(crate::cluster_harness::Cluster::start(crate::harness::Target::Ballast, 3).await).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn etcd() {
                super::$name(crate::cluster_harness::Cluster::start(crate::harness::Target::Etcd, 3).await).await
            }
        }
    )*};
}

/// As [`both_clusters!`], with the Ballast members started with `--shards 4` (stock etcd has
/// one keyspace): the same expectations hold for a cluster whose keys live in several shards,
/// whether their leaders spread over the members (`ballast`, the default) or one member leads
/// them all (`ballast_together`).
macro_rules! sharded_clusters {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn ballast() {
                let c = crate::cluster_harness::Cluster::start_with_args(
                    crate::harness::Target::Ballast,
                    3,
                    &["--shards", "4"],
                )
                .await;
                Box::pin(super::$name(c)).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn ballast_together() {
                let c = crate::cluster_harness::Cluster::start_with_args(
                    crate::harness::Target::Ballast,
                    3,
                    &["--shards", "4", crate::cluster_harness::TOGETHER],
                )
                .await;
                Box::pin(super::$name(c)).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn etcd() {
                let c = crate::cluster_harness::Cluster::start(crate::harness::Target::Etcd, 3).await;
                Box::pin(super::$name(c)).await
            }
        }
    )*};
}

/// Starts `m4`, the member `etcdctl member add m4 --peer-urls=http://127.0.0.1:<peer>` added
/// (its output is `added`), joining the cluster with `extra_args`; returns its member ID (hex,
/// as etcdctl printed it) and the member, not waited for.
pub(crate) fn spawn_added_member(c: &Cluster, added: &str, peer: u16, extra_args: Vec<String>) -> (String, Server) {
    let id = added.split_whitespace().nth(1).expect("Member <id> added").to_string();
    let ic = added
        .lines()
        .find_map(|l| l.strip_prefix("ETCD_INITIAL_CLUSTER=\""))
        .map(|l| l.trim_end_matches('"').to_string())
        .expect("the initial cluster for the new member");
    let mut m4 = Server::member_of(c.target, "m4", free_port(), peer, &ic);
    m4.join = true;
    m4.extra_args = extra_args;
    m4.spawn_member();
    (id, m4)
}

/// Puts `key` through the members in turn (starting at `start`) until one acknowledges it;
/// returns the acknowledged revision, or None when none did within `deadline`. A try that
/// times out (3 s) may still be applied later: callers check the acknowledged one.
pub(crate) async fn put_any(
    endpoints: &[String],
    start: usize,
    key: &str,
    value: &str,
    deadline: Duration,
) -> Option<i64> {
    let until = std::time::Instant::now() + deadline;
    let mut i = start;
    while std::time::Instant::now() < until {
        let ep = &endpoints[i % endpoints.len()];
        i += 1;
        let attempt = async {
            let mut c = etcd_client::Client::connect([ep.as_str()], None).await.ok()?;
            c.put(key, value, None).await.ok()
        };
        if let Ok(Some(r)) = tokio::time::timeout(Duration::from_secs(3), attempt).await {
            return Some(r.header().expect("header").revision());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

/// The (key, revision) of every PUT a watch delivered, in the order they arrived.
pub(crate) type SeenPuts = Arc<Mutex<Vec<(String, i64)>>>;

/// Watches `prefix` through `client` from revision `from` and collects (key, revision) of every
/// PUT, asserting that revisions strictly increase (so none repeats) as they arrive: an event
/// out of order ends the task with that panic.
pub(crate) async fn spawn_put_watch(
    mut client: etcd_client::Client,
    prefix: &str,
    from: i64,
) -> (tokio::task::JoinHandle<()>, SeenPuts) {
    let opts = WatchOptions::new().with_prefix().with_start_revision(from);
    let mut stream = client.watch(prefix, Some(opts)).await.expect("watch");
    let seen = SeenPuts::default();
    let into = Arc::clone(&seen);
    let task = tokio::spawn(async move {
        let _keep = client;
        let mut last = 0;
        while let Ok(Some(resp)) = stream.message().await {
            for ev in resp.events() {
                let kv = ev.kv().expect("kv");
                assert!(kv.mod_revision() > last, "watch events out of order: {} after {last}", kv.mod_revision());
                last = kv.mod_revision();
                if ev.event_type() == EventType::Put {
                    into.lock().expect("seen").push((kv.key_str().expect("utf-8").to_string(), kv.mod_revision()));
                }
            }
        }
    });
    (task, seen)
}

/// The shards of `shards` that the member serving clients at `url` leads, as its `/metrics`
/// says.
pub(crate) fn shards_led(url: &str, shards: u32) -> Vec<u32> {
    let out = std::process::Command::new("curl")
        .args(["-s", "--max-time", "10", &format!("{url}/metrics")])
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout);
    (0..shards).filter(|s| text.contains(&format!("ballast_shard_is_leader{{shard=\"{s}\"}} 1"))).collect()
}
