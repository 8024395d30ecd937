//! The engine's metrics: plain atomics written where things happen and read by the `/metrics`
//! scrape (`api::metrics` renders them in Prometheus text). Nothing here locks, allocates or
//! talks to a shard, so counting costs an atomic add and a scrape never waits on a mailbox.
//!
//! Process-wide series (disk latencies, gRPC calls, proposals) live in [`GLOBAL`], as etcd's
//! live in Prometheus' default registry; per-shard series in each shard's [`ShardGauges`].

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of [`Histogram`] buckets in seconds: etcd's disk histograms' buckets
/// (exponential from 1 ms, doubling, 14 buckets up to 8.192 s).
pub const DISK_BUCKETS: [f64; 14] =
    [0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096, 8.192];

/// A latency histogram over [`DISK_BUCKETS`].
#[derive(Debug, Default)]
pub struct Histogram {
    /// Observations per bucket (not cumulative; the scrape sums them).
    buckets: [AtomicU64; 14],
    /// Observations above the last bound.
    over: AtomicU64,
    sum_nanos: AtomicU64,
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        match DISK_BUCKETS.iter().position(|&b| secs <= b) {
            Some(i) => self.buckets[i].fetch_add(1, Ordering::Relaxed),
            None => self.over.fetch_add(1, Ordering::Relaxed),
        };
        self.sum_nanos.fetch_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// Returns the cumulative count at each bound, the total count and the sum in seconds.
    pub fn snapshot(&self) -> ([u64; 14], u64, f64) {
        let mut cumulative = [0u64; 14];
        let mut total = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            total += b.load(Ordering::Relaxed);
            cumulative[i] = total;
        }
        total += self.over.load(Ordering::Relaxed);
        (cumulative, total, self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9)
    }
}

/// The gRPC methods counted in `grpc_server_handled_total`, as (service, method, type).
pub const GRPC_METHODS: &[(&str, &str, &str)] = &[
    ("etcdserverpb.KV", "Range", "unary"),
    ("etcdserverpb.KV", "Put", "unary"),
    ("etcdserverpb.KV", "DeleteRange", "unary"),
    ("etcdserverpb.KV", "Txn", "unary"),
    ("etcdserverpb.KV", "Compact", "unary"),
    ("etcdserverpb.Watch", "Watch", "bidi_stream"),
    ("etcdserverpb.Lease", "LeaseGrant", "unary"),
    ("etcdserverpb.Lease", "LeaseRevoke", "unary"),
    ("etcdserverpb.Lease", "LeaseKeepAlive", "bidi_stream"),
    ("etcdserverpb.Lease", "LeaseTimeToLive", "unary"),
    ("etcdserverpb.Lease", "LeaseLeases", "unary"),
    ("etcdserverpb.Cluster", "MemberAdd", "unary"),
    ("etcdserverpb.Cluster", "MemberRemove", "unary"),
    ("etcdserverpb.Cluster", "MemberUpdate", "unary"),
    ("etcdserverpb.Cluster", "MemberList", "unary"),
    ("etcdserverpb.Cluster", "MemberPromote", "unary"),
    ("etcdserverpb.Maintenance", "Alarm", "unary"),
    ("etcdserverpb.Maintenance", "Status", "unary"),
    ("etcdserverpb.Maintenance", "Defragment", "unary"),
    ("etcdserverpb.Maintenance", "Hash", "unary"),
    ("etcdserverpb.Maintenance", "HashKV", "unary"),
    ("etcdserverpb.Maintenance", "Snapshot", "server_stream"),
    ("etcdserverpb.Maintenance", "MoveLeader", "unary"),
    ("v3lockpb.Lock", "Lock", "unary"),
    ("v3lockpb.Lock", "Unlock", "unary"),
    ("v3electionpb.Election", "Campaign", "unary"),
    ("v3electionpb.Election", "Proclaim", "unary"),
    ("v3electionpb.Election", "Leader", "unary"),
    ("v3electionpb.Election", "Observe", "server_stream"),
    ("v3electionpb.Election", "Resign", "unary"),
    ("grpc.health.v1.Health", "Check", "unary"),
    ("grpc.health.v1.Health", "Watch", "server_stream"),
];

/// gRPC status codes 0 to 16, by the names grpc-go's metrics give them.
pub const GRPC_CODES: [&str; 17] = [
    "OK",
    "Canceled",
    "Unknown",
    "InvalidArgument",
    "DeadlineExceeded",
    "NotFound",
    "AlreadyExists",
    "PermissionDenied",
    "ResourceExhausted",
    "FailedPrecondition",
    "Aborted",
    "OutOfRange",
    "Unimplemented",
    "Internal",
    "Unavailable",
    "DataLoss",
    "Unauthenticated",
];

const METHODS: usize = GRPC_METHODS.len();

/// Process-wide series.
#[derive(Debug)]
pub struct Global {
    /// Durations of synced writes (the raft log's fsync): `etcd_disk_wal_fsync_duration_seconds`.
    pub wal_fsync: Histogram,
    /// Durations of every backend write: `etcd_disk_backend_commit_duration_seconds`.
    pub backend_commit: Histogram,
    /// Writes proposed and not yet answered: `etcd_server_proposals_pending`.
    pub proposals_pending: AtomicI64,
    /// Writes that failed for want of a leader, a timeout or a stop:
    /// `etcd_server_proposals_failed_total`.
    pub proposals_failed: AtomicU64,
    /// Calls answered, by method (index in [`GRPC_METHODS`]) and code.
    handled: [[AtomicU64; 17]; METHODS],
}

impl Global {
    const fn new() -> Self {
        Self {
            wal_fsync: Histogram::new_const(),
            backend_commit: Histogram::new_const(),
            proposals_pending: AtomicI64::new(0),
            proposals_failed: AtomicU64::new(0),
            handled: [const { [const { AtomicU64::new(0) }; 17] }; METHODS],
        }
    }

    /// Counts a call of method `method` (index in [`GRPC_METHODS`]) answered with `code`.
    pub fn handled(&self, method: usize, code: usize) {
        if let Some(c) = self.handled.get(method).and_then(|m| m.get(code)) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Returns how many calls of `method` were answered with `code`.
    pub fn handled_count(&self, method: usize, code: usize) -> u64 {
        self.handled[method][code].load(Ordering::Relaxed)
    }
}

impl Histogram {
    const fn new_const() -> Self {
        Self { buckets: [const { AtomicU64::new(0) }; 14], over: AtomicU64::new(0), sum_nanos: AtomicU64::new(0) }
    }
}

/// The process's series.
pub static GLOBAL: Global = Global::new();

/// Returns the index in [`GRPC_METHODS`] of a request path `/service/method`.
pub fn grpc_method_index(path: &str) -> Option<usize> {
    let (service, method) = path.strip_prefix('/')?.split_once('/')?;
    GRPC_METHODS.iter().position(|(s, m, _)| *s == service && *m == method)
}

/// Counts one write in `proposals_pending` while it lives (a write whose caller went away is
/// dropped, not finished).
#[derive(Debug)]
pub struct PendingProposal(());

impl PendingProposal {
    /// Counts a write as pending.
    pub fn start() -> Self {
        GLOBAL.proposals_pending.fetch_add(1, Ordering::Relaxed);
        Self(())
    }
}

impl Drop for PendingProposal {
    fn drop(&mut self) {
        GLOBAL.proposals_pending.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Bytes exchanged with each peer on the raft connections (raft messages, forwarded writes and
/// their answers), by the peer's raft ID: `etcd_network_peer_sent_bytes_total` and
/// `etcd_network_peer_received_bytes_total`. Counted per frame, not per request; the map is
/// written only when a peer is first seen.
#[derive(Debug, Default)]
pub struct PeerBytes {
    peers: parking_lot::RwLock<std::collections::BTreeMap<u64, (AtomicU64, AtomicU64)>>,
}

impl PeerBytes {
    fn add(&self, peer: u64, sent: u64, received: u64) {
        if let Some((s, r)) = self.peers.read().get(&peer) {
            s.fetch_add(sent, Ordering::Relaxed);
            r.fetch_add(received, Ordering::Relaxed);
            return;
        }
        let mut peers = self.peers.write();
        let (s, r) = peers.entry(peer).or_default();
        s.fetch_add(sent, Ordering::Relaxed);
        r.fetch_add(received, Ordering::Relaxed);
    }

    /// Counts `n` bytes sent to `peer`.
    pub fn sent(&self, peer: u64, n: usize) {
        self.add(peer, n as u64, 0);
    }

    /// Counts `n` bytes received from `peer`.
    pub fn received(&self, peer: u64, n: usize) {
        self.add(peer, 0, n as u64);
    }

    /// Returns (peer raft ID, sent, received) for every peer seen.
    pub fn snapshot(&self) -> Vec<(u64, u64, u64)> {
        self.peers.read().iter().map(|(p, (s, r))| (*p, s.load(Ordering::Relaxed), r.load(Ordering::Relaxed))).collect()
    }
}

/// The process's peer traffic.
pub static PEER_BYTES: std::sync::LazyLock<PeerBytes> = std::sync::LazyLock::new(PeerBytes::default);

/// One shard's series, written by the shard's loop.
#[derive(Debug, Default)]
pub struct ShardGauges {
    /// Times the shard saw a new leader: `etcd_server_leader_changes_seen_total`.
    pub leader_changes: AtomicU64,
    /// The raft commit index: `etcd_server_proposals_committed_total`.
    pub committed: AtomicU64,
    /// Messages the last round took from the mailbox.
    pub round_messages: AtomicU64,
    /// Watchers registered, as of the last tick.
    pub watchers: AtomicU64,
    /// Watch streams behind the newest revision (lagging: served from the ring or history), as
    /// of the last tick.
    pub slow_watch_streams: AtomicU64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(500));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(10));
        let (b, count, sum) = h.snapshot();
        assert_eq!((b[0], b[1], b[2], b[13], count), (1, 1, 2, 2, 3));
        assert!((sum - 10.0035).abs() < 1e-9, "{sum}");
    }

    #[test]
    fn methods_are_found_by_path() {
        assert_eq!(grpc_method_index("/etcdserverpb.KV/Range"), Some(0));
        assert_eq!(GRPC_METHODS[grpc_method_index("/grpc.health.v1.Health/Check").expect("check")].1, "Check");
        assert_eq!(grpc_method_index("/etcdserverpb.KV/Nope"), None);
        assert_eq!(grpc_method_index("health"), None);
    }
}
