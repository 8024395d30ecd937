//! Opening a data directory and serving it over the etcd v3 gRPC API.
//!
//! [`Engine::start`] opens RocksDB under `<data-dir>/db`, settles the member's identity and the
//! cluster's membership (kept in the store when the cluster is bootstrapped, from
//! `--initial-cluster` or, without it, as a member alone), starts the shard executors and returns
//! a handle; [`Engine::serve`] runs the gRPC servers on every client listen address, and the
//! peer service on the peer addresses of a member with peers, until the shutdown future
//! completes, then stops the shards after in-flight requests are answered.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use ballast_proto::ballastpb::{
    peer_client::PeerClient, peer_server::PeerServer, HelloRequest, SnapshotDescriptor, SnapshotFetchRequest,
};
use ballast_proto::etcdserverpb::{
    cluster_server::ClusterServer, kv_server::KvServer, lease_server::LeaseServer,
    maintenance_server::MaintenanceServer,
};
use futures::StreamExt;

use crate::api::authority::AuthorityFix;
use crate::api::ping_policy::PingPolicy;
use crate::api::watch_grpc::WatchServer;
use crate::api::{client_server::GrpcDeadline, health::HealthService, http::HttpLayer, metrics::GrpcMetricsLayer};
use crate::api::{cluster::ClusterService, kv::KvService, lease::LeaseService, maintenance::MaintenanceService};
use crate::api::{election::ElectionService, lock::LockService};
use crate::api::{learner::LearnerLayer, peer::PeerService, unary::KvUnaryLayer, watch::WatchService};
use crate::api::{Api, ApiContext, MemberInfo};
use crate::auth::{AuthConfig, AuthShared, AuthState};
use crate::clock::{Clock, SystemClock};
use crate::cluster::{members, ClusterConfig, ClusterView, Member, Membership, PeerRouter, PeerTls, PeerTransport};
use crate::error::{EngineError, Result};
use crate::header::HeaderInfo;
use crate::mvcc::RevisionCounter;
use crate::raft_snapshot::{Fetched, SnapshotConfig, SnapshotFetch};
use crate::shard::stall::{self, StallWatch};
use crate::shard::{executor, Colocation, Shard, ShardConfig, ShardGroup, ShardHandle};
use crate::shard_map::ShardMap;
use crate::storage::rocks::{RocksBackend, RocksOptions};
use crate::storage::{Cf, KvBackend, StorageError, WriteBatch, WriteOpts};
use ballast_proto::coalesce::CoalescingStream;
use ballast_proto::etcdserverpb::auth_server::AuthServer;
use ballast_proto::healthpb::health_server::HealthServer;
use ballast_proto::v3electionpb::election_server::ElectionServer;
use ballast_proto::v3lockpb::lock_server::LockServer;

/// Everything needed to run one engine member.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Member name (etcd `--name`).
    pub name: String,
    /// Data directory (etcd `--data-dir`).
    pub data_dir: PathBuf,
    /// Addresses the gRPC API listens on.
    pub listen_client: Vec<SocketAddr>,
    /// Addresses the client port serves with TLS (`https://` in etcd's `--listen-client-urls`).
    pub listen_client_tls: Vec<SocketAddr>,
    /// Unix socket paths the client port serves on (`unix://` listen URLs).
    pub listen_client_unix: Vec<PathBuf>,
    /// Unix socket paths the client port serves with TLS on (`unixs://` listen URLs).
    pub listen_client_unix_tls: Vec<PathBuf>,
    /// The client port's TLS material (etcd `--cert-file`, `--key-file`, `--trusted-ca-file`,
    /// `--client-cert-auth`); needed by `listen_client_tls`.
    pub client_tls: Option<PeerTls>,
    /// Addresses that serve only the plain HTTP endpoints (etcd `--listen-metrics-urls`).
    pub listen_metrics: Vec<SocketAddr>,
    /// Client URLs advertised in `MemberList`.
    pub advertise_client_urls: Vec<String>,
    /// Peer URLs advertised in `MemberList`; they also seed the member ID.
    pub advertise_peer_urls: Vec<String>,
    /// Seeds the member and cluster IDs (etcd `--initial-cluster-token`).
    pub cluster_token: String,
    /// The members of a new cluster (etcd `--initial-cluster`, `name=peerURL,...`); None: this
    /// member alone. Read only when the data directory is new.
    pub initial_cluster: Option<String>,
    /// etcd's `--initial-cluster-state`: true (`existing`) when joining a running cluster.
    pub join_existing: bool,
    /// Addresses the peer service listens on (etcd `--listen-peer-urls`); bound when the
    /// cluster has other members.
    pub listen_peer: Vec<SocketAddr>,
    /// Peer connection tuning.
    pub cluster: ClusterConfig,
    /// Largest write request in bytes (etcd `--max-request-bytes`).
    pub max_request_bytes: usize,
    /// Most ops per txn branch (etcd `--max-txn-ops`).
    pub max_txn_ops: usize,
    /// How long a request may wait for its answer.
    pub request_timeout: Duration,
    /// RocksDB tuning.
    pub rocks: RocksOptions,
    /// Shard tuning.
    pub shard: ShardConfig,
    /// Shards of the key space (`--shards`), fixed when the data directory is created: the
    /// shard map places keys by it (`engine/SHARDING.md`). 1 (the default) is etcd's layout.
    pub shards: u32,
    /// HTTP/2 flow-control window of a client connection, in bytes. 16 MiB is where grpc-go's
    /// (etcd's) window stops growing. It also sizes h2's budget for small DATA frames not yet
    /// read (half the window; past it the connection is closed with ENHANCE_YOUR_CALM): every
    /// watch create on a fresh stream is one such frame, and at hyper's 1 MiB default a client
    /// opening a few thousand watch streams at once lost the whole connection.
    pub http2_connection_window: u32,
    /// How long a member whose shard stopped on an error (a storage error such as running out
    /// of file descriptors) keeps answering its health endpoints, which name the shard and the
    /// cause, before it exits non-zero. 2 s lets a probe or an operator polling `/livez` see
    /// why; etcd exits at once, and every request but the health endpoints already fails.
    pub fatal_exit_delay: Duration,
    /// How long a stopping member waits for its servers to finish what they serve before it
    /// stops its shards. Unary calls end within a round; a watch never ends on its own, so the
    /// wait is cut off. 2 s lets calls in flight answer without holding a restart back.
    pub shutdown_drain: Duration,
    /// The client port's HTTP/2 limits (etcd's `--max-concurrent-streams`,
    /// `--grpc-keepalive-interval`, `--grpc-keepalive-timeout`).
    pub grpc_limits: crate::api::GrpcLimits,
    /// etcd's `--cors` (default `*`, every origin).
    pub cors: Vec<String>,
    /// Authentication (etcd's `--auth-token`, `--auth-token-ttl`, `--bcrypt-cost`).
    pub auth: AuthConfig,
    /// Where the shards' rounds are traced (`--round-trace-file`, [`crate::round_trace`]);
    /// None (the default): not traced.
    pub round_trace_file: Option<PathBuf>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            name: "default".into(),
            data_dir: PathBuf::from("default.ballast"),
            listen_client: vec![SocketAddr::from(([127, 0, 0, 1], 2379))],
            listen_metrics: Vec::new(),
            listen_client_tls: Vec::new(),
            listen_client_unix: Vec::new(),
            listen_client_unix_tls: Vec::new(),
            client_tls: None,
            advertise_client_urls: vec!["http://127.0.0.1:2379".into()],
            advertise_peer_urls: vec!["http://127.0.0.1:2380".into()],
            cluster_token: "etcd-cluster".into(),
            initial_cluster: None,
            join_existing: false,
            listen_peer: Vec::new(),
            cluster: ClusterConfig::default(),
            max_request_bytes: 1_572_864,
            max_txn_ops: 128,
            request_timeout: Duration::from_secs(7),
            rocks: RocksOptions::default(),
            shard: ShardConfig::default(),
            shards: 1,
            http2_connection_window: 16 << 20,
            fatal_exit_delay: Duration::from_secs(2),
            shutdown_drain: Duration::from_secs(2),
            grpc_limits: crate::api::GrpcLimits::default(),
            cors: vec!["*".into()],
            auth: AuthConfig::default(),
            round_trace_file: None,
        }
    }
}

/// gRPC framing on top of the largest request (etcd's `grpcOverheadBytes`), so an oversize
/// request reaches our own size check and gets etcd's error instead of a transport error.
const GRPC_OVERHEAD_BYTES: usize = 512 * 1024;

use crate::cluster::placement::META_LEADER_PLACEMENT;
use crate::data_dir::{shard_db_dir, META_CLUSTER_ID, META_MEMBER_ID, META_SHARD_COUNT};

/// A started engine member.
#[derive(Debug)]
pub struct Engine {
    api: Api,
    shard_threads: Vec<std::thread::JoinHandle<Result<()>>>,
    beats: Vec<Arc<stall::Heartbeat>>,
    listen: Vec<SocketAddr>,
    listen_metrics: Vec<SocketAddr>,
    listen_tls: Vec<SocketAddr>,
    listen_unix: Vec<PathBuf>,
    listen_unix_tls: Vec<PathBuf>,
    client_tls: Option<PeerTls>,
    listen_peer: Vec<SocketAddr>,
    peer_tls: Option<PeerTls>,
    http2_connection_window: u32,
    resolved_interval: Duration,
    fatal_exit_delay: Duration,
    shutdown_drain: Duration,
}

/// Records the shard count in a new data directory; refuses another count for an existing one
/// (the shard map would place keys elsewhere than they are).
fn settle_shard_count(backend: &RocksBackend, shards: u32) -> Result<()> {
    let stored = match backend.get(Cf::Meta, META_SHARD_COUNT)? {
        Some(v) => u32::from_be_bytes(
            v.as_slice().try_into().map_err(|_| StorageError::Corrupt { cf: "meta", what: "shard count" })?,
        ),
        // A directory whose shard 0 already holds data predates shard counts: one shard.
        None if backend.get(Cf::Meta, META_MEMBER_ID)?.is_some() => 1,
        None => {
            let mut wb = WriteBatch::new();
            wb.put(Cf::Meta, META_SHARD_COUNT.to_vec(), shards.to_be_bytes().to_vec());
            backend.write(wb, WriteOpts { sync: true })?;
            shards
        }
    };
    if stored != shards {
        return Err(EngineError::ShardCount(format!(
            "the data directory was created with --shards {stored}; it cannot be opened with --shards {shards}"
        )));
    }
    Ok(())
}

/// Returns this member's ID and the cluster's membership: as stored in `backend` (shard 0), or
/// bootstrapped and stored on first start, from `--initial-cluster` or as a member alone (etcd
/// derives the IDs the same way, see `cluster::members`). A data directory from before
/// membership was stored keeps its IDs and becomes a member alone.
fn identity(backend: &RocksBackend, cfg: &EngineConfig) -> Result<(u64, Membership, u32)> {
    let read = |k: &[u8]| -> Result<Option<u64>> {
        match backend.get(Cf::Meta, k)? {
            Some(v) => Ok(Some(u64::from_be_bytes(
                v.as_slice().try_into().map_err(|_| StorageError::Corrupt { cf: "meta", what: "identity" })?,
            ))),
            None => Ok(None),
        }
    };
    let stored = (read(META_MEMBER_ID)?, read(META_CLUSTER_ID)?);
    if let (Some(member), Some(_)) = stored {
        if let Some(m) = Membership::load(backend)? {
            return Ok((member, m, 0));
        }
    }
    let mut told = 0;
    let membership = match (stored, &cfg.initial_cluster) {
        ((Some(member), Some(cluster)), _) => Membership {
            cluster_id: cluster,
            members: vec![Member {
                id: member,
                name: cfg.name.clone(),
                peer_urls: cfg.advertise_peer_urls.clone(),
                is_learner: false,
                raft_id: 1,
            }],
        },
        _ if cfg.join_existing => {
            let (m, placement) = join_membership(cfg)?;
            told = placement;
            m
        }
        (_, Some(text)) => {
            members::parse_initial_cluster(text, &cfg.name, &cfg.advertise_peer_urls, &cfg.cluster_token)?
        }
        (_, None) => {
            let id = members::member_id(&cfg.advertise_peer_urls, &cfg.cluster_token);
            Membership {
                cluster_id: members::cluster_id(&[id]),
                members: vec![Member {
                    id,
                    name: cfg.name.clone(),
                    peer_urls: cfg.advertise_peer_urls.clone(),
                    is_learner: false,
                    raft_id: 1,
                }],
            }
        }
    };
    let Some(me) = membership.by_name(&cfg.name).map(|m| m.id) else {
        return Err(EngineError::BadCluster(format!(
            "couldn't find local name {:?} in the initial cluster configuration",
            cfg.name
        )));
    };
    membership.save(backend)?;
    let mut wb = WriteBatch::new();
    wb.put(Cf::Meta, META_MEMBER_ID.to_vec(), me.to_be_bytes().to_vec());
    wb.put(Cf::Meta, META_CLUSTER_ID.to_vec(), membership.cluster_id.to_be_bytes().to_vec());
    backend.write(wb, WriteOpts { sync: true })?;
    Ok((me, membership, told))
}

/// Returns how this member places its shards' leaders (`cluster::PLACEMENT_*`, see
/// `cluster::revision_group` and `cluster::placement`), and records the choice on its first
/// start: every member of a cluster must place leaders alike, so a restart keeps the recorded
/// placement whatever the flag says (the switch of a growing cluster records spread when it
/// applies), and a joining member takes the one the cluster `told` it (0: not told). Spreading
/// needs several shards, and several members at the first start or a member started alone that
/// asked for it (`ClusterConfig::spread_alone`). A member started alone without the flag records
/// a growing cluster (one member leads until it has `ClusterConfig::spread_at_voters` voters,
/// then it switches), and with `--spread-shard-leaders=false` one member leading for good. A
/// joiner not told a placement and finding the raft ID 1 of a member bootstrapped alone (a
/// member of an older build) takes one member leading. A directory that predates the record
/// (`existed`) keeps one member leading every shard, the placement it had.
fn settle_leader_placement(
    backend: &RocksBackend,
    cfg: &EngineConfig,
    membership: &Membership,
    existed: bool,
    told: u32,
) -> Result<u32> {
    use crate::cluster::{PLACEMENT_GROWING, PLACEMENT_SPREAD, PLACEMENT_TOGETHER};
    let stored = match backend.get(Cf::Meta, META_LEADER_PLACEMENT)? {
        Some(v) => Some(u32::from_be_bytes(
            v.as_slice().try_into().map_err(|_| StorageError::Corrupt { cf: "meta", what: "leader placement" })?,
        )),
        None => None,
    };
    let alone = membership.members.len() == 1;
    let placement = match (stored, told) {
        (Some(p), _) => p,
        (None, _) if existed => PLACEMENT_TOGETHER,
        (None, PLACEMENT_SPREAD | PLACEMENT_TOGETHER | PLACEMENT_GROWING) => told,
        (None, _) => {
            let several = !alone && !membership.members.iter().any(|m| m.raft_id == 1);
            let can_spread = cfg.shards > 1 && (several || (alone && cfg.cluster.spread_alone));
            match cfg.cluster.spread_leaders {
                true if can_spread => PLACEMENT_SPREAD,
                true if alone && cfg.shards > 1 => PLACEMENT_GROWING,
                _ => PLACEMENT_TOGETHER,
            }
        }
    };
    if stored.is_none() {
        let mut wb = WriteBatch::new();
        wb.put(Cf::Meta, META_LEADER_PLACEMENT.to_vec(), placement.to_be_bytes().to_vec());
        backend.write(wb, WriteOpts { sync: true })?;
    }
    // A growing cluster is what the default flag asks of a member started alone; an explicit
    // `--spread-shard-leaders` on a member alone asks for spread at once.
    let asked = match (cfg.cluster.spread_leaders, alone && cfg.cluster.spread_alone) {
        (false, _) => PLACEMENT_TOGETHER,
        (true, true) => PLACEMENT_SPREAD,
        (true, false) if placement == PLACEMENT_GROWING => PLACEMENT_GROWING,
        (true, false) if alone => placement,
        (true, false) => PLACEMENT_SPREAD,
    };
    if placement != asked && cfg.shards > 1 {
        tracing::warn!(
            placement,
            "the cluster's shard leaders are placed as its data directory records, not as --spread-shard-leaders says"
        );
    }
    Ok(placement)
}

/// Asks the other members named in `--initial-cluster` for the cluster's membership, for a
/// member joining a running cluster after `MemberAdd` (etcd asks its peers the same way): the
/// new member's ID was chosen by the cluster, and it finds itself by its peer URLs.
fn join_membership(cfg: &EngineConfig) -> Result<(Membership, u32)> {
    let Some(text) = &cfg.initial_cluster else {
        return Err(EngineError::BadCluster("--initial-cluster-state existing needs --initial-cluster".into()));
    };
    let urls: Vec<String> = members::urls_by_name(text)?
        .into_iter()
        .filter(|(name, _)| *name != cfg.name)
        .flat_map(|(_, urls)| urls)
        .collect();
    let timeout = cfg.request_timeout;
    let cluster = cfg.cluster.clone();
    // Engine::start is synchronous and may run inside the caller's runtime: ask on a thread of
    // its own with a small runtime.
    let fetched = std::thread::spawn(move || -> Option<(u32, Membership, u32)> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
        rt.block_on(async move {
            for url in urls {
                let Ok(ep) = cluster.endpoint(&url) else { continue };
                let Ok(Ok(ch)) = tokio::time::timeout(timeout, ep.connect()).await else { continue };
                let mut client = PeerClient::new(ch);
                if let Ok(r) = client.members(HelloRequest { cluster_id: 0, from: 0 }).await {
                    let r = r.into_inner();
                    let placement = r.leader_placement;
                    return Some((r.shards, Membership::from_record(r), placement));
                }
            }
            None
        })
    })
    .join()
    .ok()
    .flatten();
    let Some((shards, membership, placement)) = fetched else {
        return Err(EngineError::BadCluster(
            "could not get the cluster's members from any peer in --initial-cluster".into(),
        ));
    };
    if shards != 0 && shards != cfg.shards {
        return Err(EngineError::ShardCount(format!(
            "the cluster runs {shards} shards; start this member with --shards {shards}, not --shards {}",
            cfg.shards
        )));
    }
    let mut mine = cfg.advertise_peer_urls.clone();
    mine.sort();
    let Some(me) = membership.members.iter().find(|m| {
        let mut u = m.peer_urls.clone();
        u.sort();
        u == mine
    }) else {
        return Err(EngineError::BadCluster(format!(
            "the cluster has no member with peer URLs {}; add it with MemberAdd first",
            cfg.advertise_peer_urls.join(",")
        )));
    };
    let mut membership = membership.clone();
    let id = me.id;
    if let Some(m) = membership.members.iter_mut().find(|m| m.id == id) {
        m.name = cfg.name.clone();
    }
    Ok((membership, placement))
}

impl Engine {
    /// Opens the data directory and starts the shard threads.
    ///
    /// # Errors
    /// A storage or raft error (for example another process holding the directory's lock), or
    /// `ShardCount` when `cfg.shards` is not the count the directory was created with.
    pub fn start(cfg: &EngineConfig) -> Result<Self> {
        let map = ShardMap::new(cfg.shards).map_err(|e| EngineError::ShardCount(e.to_string()))?;
        if let Some(path) = &cfg.round_trace_file {
            crate::round_trace::open(path).map_err(StorageError::from)?;
        }
        std::fs::create_dir_all(&cfg.data_dir).map_err(StorageError::from)?;
        let first = RocksBackend::open(&shard_db_dir(&cfg.data_dir, 0), &cfg.rocks)?;
        settle_shard_count(&first, cfg.shards)?;
        let existed = first.get(Cf::Meta, META_MEMBER_ID)?.is_some();
        let (member_id, membership, told) = identity(&first, cfg)?;
        let placement = settle_leader_placement(&first, cfg, &membership, existed, told)?;
        let spread = placement == crate::cluster::PLACEMENT_SPREAD && cfg.shards > 1;
        // A growing cluster builds the revision group too, for the switch to find.
        let grouped = spread || (placement == crate::cluster::PLACEMENT_GROWING && cfg.shards > 1);
        let placement = Arc::new(crate::cluster::placement::Placement::new(
            if cfg.shards > 1 { placement } else { crate::cluster::PLACEMENT_TOGETHER },
            cfg.shards as usize,
            cfg.cluster.spread_at_voters,
        ));
        let cluster_id = membership.cluster_id;
        let me = membership.get(member_id).cloned().ok_or_else(|| {
            EngineError::BadCluster(format!("member {member_id:x} is not in its own cluster's membership"))
        })?;
        let peers: Vec<(u64, String)> = membership
            .members
            .iter()
            .filter(|m| m.id != member_id)
            .filter_map(|m| m.peer_urls.first().map(|u| (m.raft_id, u.clone())))
            .collect();
        let router = PeerRouter::new(me.raft_id, cluster_id, &peers, cfg.cluster.clone());
        let conf = ballast_raft::ConfState {
            voters: membership.voters(),
            learners: membership.learners(),
            ..Default::default()
        };
        let learner = Arc::new(std::sync::atomic::AtomicBool::new(me.is_learner));
        let membership = Arc::new(parking_lot::RwLock::new(membership));
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        // Filled by shard 0 as it opens (the store is in its data).
        let auth = Arc::new(AuthShared::new(AuthState::default(), cfg.auth.clone(), Arc::clone(&clock)));
        let view = ClusterView {
            membership: Arc::clone(&membership),
            router: Arc::clone(&router),
            me: member_id,
            learner: Arc::clone(&learner),
            auth: Arc::clone(&auth),
        };
        let mut shard_cfg = cfg.shard.clone();
        shard_cfg.watch.max_response_bytes = cfg.max_request_bytes;
        shard_cfg.raft.id = me.raft_id;
        let ids = HeaderInfo { cluster_id, member_id, raft_term: 0 };
        let revs = Arc::new(RevisionCounter::default());
        let colocation = (cfg.shards > 1).then(|| Arc::new(Colocation::new(cfg.shards as usize)));
        let revisions = match tokio::runtime::Handle::try_current() {
            Ok(runtime) if grouped => Some(Arc::new(crate::cluster::allocation::RevisionGroup::new(
                cfg.shards as usize,
                cfg.cluster.allocator,
                Arc::clone(&clock),
                crate::cluster::allocation::GroupMembers {
                    me: me.raft_id,
                    cluster_id,
                    router: Arc::clone(&router),
                    membership: Arc::clone(&membership),
                    runtime,
                },
            ))),
            _ => None,
        };
        // State a stop cut short while sending it to a follower: nobody streams it any more.
        crate::raft_snapshot::remove_outgoing(&cfg.data_dir.join("snapshots"));
        // Every shard replays its log before any runs, so the counter starts above every
        // revision any shard recorded.
        let mut opened = Vec::new();
        let mut backends = Vec::new();
        let peer_answers: Arc<dyn crate::shard::PeerAnswers> = crate::api::PeerAnswerSink::new(Arc::clone(&router));
        for s in 0..cfg.shards {
            let backend =
                if s == 0 { first.clone() } else { RocksBackend::open(&shard_db_dir(&cfg.data_dir, s), &cfg.rocks)? };
            backends.push(backend.clone());
            let transport = PeerTransport::new(s, Arc::clone(&router));
            opened.push(Shard::open(
                backend,
                shard_cfg.clone(),
                Arc::clone(&revs),
                ids,
                Arc::clone(&clock),
                ShardGroup {
                    conf: conf.clone(),
                    transport,
                    cluster: (s == 0).then(|| view.clone()),
                    snapshots: Some(SnapshotConfig {
                        dir: cfg.data_dir.join("snapshots"),
                        shard: s,
                        me: me.raft_id,
                        fetch: snapshot_fetch(Arc::clone(&router), cluster_id),
                    }),
                    colocation: colocation.as_ref().map(|c| (s, Arc::clone(c))),
                    revisions: revisions.clone(),
                    placement: Some(Arc::clone(&placement)),
                    peer_answers: Some(peer_answers.clone()),
                },
            )?);
        }
        let mut handles = Vec::new();
        let mut shard_threads = Vec::new();
        let epoch = clock.now();
        let mut beats = Vec::new();
        for (s, (shard, handle)) in opened.into_iter().enumerate() {
            handles.push(handle);
            let beat = Arc::new(stall::Heartbeat::new(epoch));
            beats.push(Arc::clone(&beat));
            shard_threads.push(executor::spawn(shard, s, &shard_cfg, beat)?);
        }
        let resolution = Arc::new(crate::cluster::resolved::Resolution::new(cfg.cluster.resolved_facts));
        if let Some(group) = &revisions {
            let (resolution, shards) = (Arc::clone(&resolution), cfg.shards as usize);
            group.set_fact_sink(Box::new(move |fact| {
                if fact.applied.len() == shards {
                    resolution.offer(fact);
                }
            }));
        }
        if let (Some(group), Some(first)) = (&revisions, handles.first()) {
            let first = first.clone();
            group.set_waker(Box::new(move || {
                let _ = first.send(crate::shard::ShardMsg::Wake);
            }));
        }
        let unreachable: Vec<ShardHandle> = handles.clone();
        router.on_unreachable(Box::new(move |peer| {
            for sh in &unreachable {
                let _ = sh.send(crate::shard::ShardMsg::Unreachable(peer));
            }
        }));
        let watched = beats.iter().map(Arc::downgrade).collect();
        StallWatch::spawn(epoch, watched, shard_cfg.stall_threshold).map_err(StorageError::from)?;
        let api = Arc::new(ApiContext {
            shards: handles,
            map,
            revs,
            member: MemberInfo {
                id: member_id,
                cluster_id,
                name: cfg.name.clone(),
                peer_urls: cfg.advertise_peer_urls.clone(),
                client_urls: cfg.advertise_client_urls.clone(),
            },
            max_request_bytes: cfg.max_request_bytes,
            max_txn_ops: cfg.max_txn_ops,
            request_timeout: cfg.request_timeout,
            snapshot_dir: cfg.data_dir.join("snapshots"),
            watch_stream_buffer: shard_cfg.watch.stream_buffer,
            watch_merge_buffer: shard_cfg.watch.merge_buffer,
            watch_merge_tick: shard_cfg.watch.merge_tick,
            watch_catchup_batch: shard_cfg.watch.catchup_batch_events,
            watch_max_response_bytes: shard_cfg.watch.max_response_bytes,
            next_id: AtomicU64::new(1),
            membership,
            learner,
            cluster_token: cfg.cluster_token.clone(),
            peer_attributes: parking_lot::RwLock::new(std::collections::HashMap::new()),
            router,
            leader_poll: Duration::from_millis(10),
            colocation,
            revisions,
            placement,
            read_poll: cfg.cluster.read_poll,
            resolution,
            backends,
            beats: beats.clone(),
            grpc_limits: cfg.grpc_limits,
            auth,
            client_cert_auth: cfg.client_tls.as_ref().is_some_and(|t| t.client_cert_auth),
            cors: cfg.cors.clone(),
        });
        Ok(Self {
            api,
            shard_threads,
            beats,
            listen: cfg.listen_client.clone(),
            listen_metrics: cfg.listen_metrics.clone(),
            listen_tls: cfg.listen_client_tls.clone(),
            listen_unix: cfg.listen_client_unix.clone(),
            listen_unix_tls: cfg.listen_client_unix_tls.clone(),
            client_tls: cfg.client_tls.clone(),
            listen_peer: cfg.listen_peer.clone(),
            peer_tls: cfg.cluster.tls.clone(),
            http2_connection_window: cfg.http2_connection_window,
            resolved_interval: cfg.cluster.resolved_interval,
            fatal_exit_delay: cfg.fatal_exit_delay,
            shutdown_drain: cfg.shutdown_drain,
        })
    }

    /// Returns a probe of what stopped the member (`shard N stopped: cause`, as the health
    /// endpoints say it), usable after [`Engine::serve`] has taken the engine: the all-in-one
    /// frontend's health checks ask it.
    pub fn stopped_shard_probe(&self) -> impl Fn() -> Option<String> + Send + Sync + 'static {
        let api = self.api.clone();
        move || api.stopped_shard()
    }

    /// Returns every shard's heartbeat, in shard order (stalls reported so far).
    pub fn heartbeats(&self) -> &[Arc<stall::Heartbeat>] {
        &self.beats
    }

    /// Returns the handle of shard 0 (the only shard of a one-shard member).
    pub fn shard(&self) -> &ShardHandle {
        self.api.first()
    }

    /// Serves the gRPC API on every listen address until `shutdown` completes, then stops the
    /// shard.
    ///
    /// # Errors
    /// Binding a listen address failed, or the shard stopped with an error.
    pub async fn serve(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::result::Result<(), ServeError> {
        let mut listeners = Vec::new();
        for addr in &self.listen {
            listeners.push(tokio::net::TcpListener::bind(addr).await.map_err(|e| ServeError::Bind(*addr, e))?);
        }
        let (stop_tx, _) = tokio::sync::broadcast::channel::<()>(1);
        let mut servers = Vec::new();
        let receivers = crate::api::peer_raft::Receivers::default();
        // The peer port is served even by a member alone (as etcd does), so MemberAdd can grow it.
        for addr in &self.listen_peer {
            let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| ServeError::Bind(*addr, e))?;
            servers.push(serve_peers(
                self.api.clone(),
                listener,
                self.peer_tls.clone(),
                stop_tx.subscribe(),
                &receivers,
            )?);
        }
        for addr in &self.listen_metrics {
            let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| ServeError::Bind(*addr, e))?;
            servers.push(tokio::spawn(crate::api::http::serve_plain(self.api.clone(), listener, stop_tx.subscribe())));
        }
        self.api.router.start();
        tokio::spawn(learn_peers(self.api.clone()));
        if self.api.shards.len() > 1 {
            tokio::spawn(crate::api::resolved::announce(self.api.clone(), self.resolved_interval));
        }
        let window = self.http2_connection_window;
        let min_ping = self.api.grpc_limits.keepalive_min_time;
        for listener in listeners {
            // Our own listener bypasses tonic's socket options: without TCP_NODELAY, small
            // responses wait for delayed ACKs (about 40 ms per request). Each connection batches
            // the responses ready at once into one write (see `ballast_proto::coalesce`).
            let incoming =
                crate::api::accept::incoming(listener).map(move |conn| conn.map(|tcp| client_conn(tcp, min_ping)));
            servers.push(serve_client(&self.api, incoming, window, stop_tx.subscribe()));
        }
        if !self.listen_tls.is_empty() || !self.listen_unix_tls.is_empty() {
            let Some(tls) = &self.client_tls else { return Err(ServeError::NoClientTls) };
            let cfg = crate::api::tls::server_config(tls, crate::api::tls::Port::Client).map_err(ServeError::Tls)?;
            for addr in &self.listen_tls {
                let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| ServeError::Bind(*addr, e))?;
                let incoming = crate::api::tls::incoming(listener, Arc::clone(&cfg))
                    .map(move |conn| conn.map(|tls| client_conn(tls, min_ping)));
                servers.push(serve_client(&self.api, incoming, window, stop_tx.subscribe()));
            }
            for path in &self.listen_unix_tls {
                let _ = std::fs::remove_file(path);
                let listener =
                    tokio::net::UnixListener::bind(path).map_err(|e| ServeError::BindUnix(path.clone(), e))?;
                let incoming = crate::api::tls::incoming(listener, Arc::clone(&cfg))
                    .map(move |conn| conn.map(|tls| client_conn(tls, min_ping)));
                servers.push(serve_client(&self.api, incoming, window, stop_tx.subscribe()));
            }
        }
        for path in &self.listen_unix {
            // A socket file left by an earlier run is replaced, as etcd does.
            let _ = std::fs::remove_file(path);
            let listener = tokio::net::UnixListener::bind(path).map_err(|e| ServeError::BindUnix(path.clone(), e))?;
            let incoming =
                crate::api::accept::incoming(listener).map(move |conn| conn.map(|unix| client_conn(unix, min_ping)));
            servers.push(serve_client(&self.api, incoming, window, stop_tx.subscribe()));
        }
        tracing::info!(name = %self.api.member.name, member_id = format_args!("{:x}", self.api.member.id), listen = ?self.listen, "serving etcd v3 API");
        let api = self.api.clone();
        let shard_threads = self.shard_threads;
        // Serving ends when any shard stops (an error in one shard ends the member, as a disk
        // error ends an etcd member); the others are then stopped and joined.
        let (done_tx, mut done_rx) = tokio::sync::mpsc::channel(shard_threads.len());
        for t in shard_threads {
            let done_tx = done_tx.clone();
            std::thread::spawn(move || {
                let _ = done_tx.blocking_send(t.join());
            });
        }
        drop(done_tx);
        let mut shard_done = Box::pin(async move {
            let mut first: Option<std::thread::Result<Result<()>>> = None;
            let mut joined = 0;
            while let Some(r) = done_rx.recv().await {
                joined += 1;
                if joined == 1 {
                    api.stop_shards();
                }
                let failed = !matches!(r, Ok(Ok(())));
                if first.is_none() || failed && matches!(first, Some(Ok(Ok(())))) {
                    first = Some(r);
                }
            }
            first.unwrap_or(Ok(Ok(())))
        });
        let mut shutdown = Box::pin(shutdown);
        let shard_result = tokio::select! {
            () = &mut shutdown => None,
            r = &mut shard_done => Some(r),
        };
        if matches!(shard_result, Some(Err(_) | Ok(Err(_)))) {
            // The health endpoints say which shard stopped and why for a while before the
            // member exits, so probes and operators see the cause, not only a closed port.
            tracing::error!(
                delay_ms = self.fatal_exit_delay.as_millis() as u64,
                "a shard stopped on an error; the member exits after the delay"
            );
            let _ = tokio::time::timeout(self.fatal_exit_delay, &mut shutdown).await;
        }
        let _ = stop_tx.send(());
        for s in servers {
            // A server still draining long streams (watches) is cut off after the drain.
            let _ = tokio::time::timeout(self.shutdown_drain, s).await;
        }
        let shard_result = match shard_result {
            Some(r) => r,
            None => {
                self.api.stop_shards();
                shard_done.await
            }
        };
        // Raft connections' threads end within a read timeout of the stop signal; the member
        // must outlast them (`peer_raft::Receivers`).
        let read_timeout = self.api.router.config().keepalive_interval;
        if !receivers.wait(read_timeout * 4 + Duration::from_secs(1)).await {
            tracing::warn!(threads = receivers.live(), "raft connections still served at exit");
        }
        match shard_result {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(ServeError::Shard(e)),
            Err(_) => Err(ServeError::Shard(EngineError::Stopped)),
        }
    }
}

/// Wraps an accepted client connection: responses batched into one write, etcd's keepalive
/// enforcement (pings more often than `min_ping` allows end the connection), and the
/// `:authority` fix.
fn client_conn<T>(conn: T, min_ping: Duration) -> AuthorityFix<PingPolicy<CoalescingStream<T>>> {
    AuthorityFix::new(PingPolicy::new(CoalescingStream::new(conn), min_ping, Arc::new(SystemClock)))
}

/// Serves the client port's services (gRPC and the HTTP endpoints) on the connections of
/// `incoming` until `stop` fires.
fn serve_client<IO, S>(
    api: &Api,
    incoming: S,
    window: u32,
    mut stop: tokio::sync::broadcast::Receiver<()>,
) -> tokio::task::JoinHandle<std::result::Result<(), tonic::transport::Error>>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + tonic::transport::server::Connected + Unpin + Send + 'static,
    S: futures::Stream<Item = std::io::Result<IO>> + Send + 'static,
{
    let limit = api.max_request_bytes + GRPC_OVERHEAD_BYTES;
    // Requests are bounded by --max-request-bytes; responses are not (etcd answers a Range of any
    // size up to gRPC's 2 GiB ceiling), so the send limit is stated explicitly rather than left
    // to tonic's default.
    let send = usize::MAX;
    let limits = api.grpc_limits;
    let routes = tonic::service::Routes::new(
        KvServer::new(KvService::new(api.clone())).max_decoding_message_size(limit).max_encoding_message_size(send),
    )
    .add_service(WatchServer::new(WatchService::new(api.clone()), limit))
    .add_service(
        LeaseServer::new(LeaseService::new(api.clone()))
            .max_decoding_message_size(limit)
            .max_encoding_message_size(send),
    )
    .add_service(
        ClusterServer::new(ClusterService::new(api.clone()))
            .max_decoding_message_size(limit)
            .max_encoding_message_size(send),
    )
    .add_service(
        AuthServer::new(crate::api::auth::AuthService::new(api.clone()))
            .max_decoding_message_size(limit)
            .max_encoding_message_size(send),
    )
    .add_service(HealthServer::new(HealthService::new(api.clone())))
    .add_service(LockServer::new(LockService::new(api.clone())))
    .add_service(ElectionServer::new(ElectionService::new(api.clone())))
    .add_service(
        MaintenanceServer::new(MaintenanceService::new(api.clone()))
            .max_decoding_message_size(limit)
            .max_encoding_message_size(send),
    );
    // HTTP requests (the gateway, health, metrics) are routed before a gRPC call's deadline
    // applies: the gateway reads `grpc-timeout` with its own meaning.
    let svc = tower::ServiceBuilder::new()
        .layer(crate::api::message_limit::MessageLimitLayer)
        .layer(HttpLayer::new(api.clone()))
        .layer_fn(GrpcDeadline::new)
        .layer(GrpcMetricsLayer)
        .layer(LearnerLayer::new(api.clone()))
        .layer(KvUnaryLayer::new(KvService::new(api.clone()), limit))
        .service(routes);
    tokio::spawn(async move {
        let stop = async move {
            let _ = stop.recv().await;
        };
        crate::api::client_server::serve(svc, incoming, window, limits, stop).await;
        Ok(())
    })
}

/// Returns how a shard fetches the state a raft snapshot names: over the peer port from the
/// member that sent it, as table files written as their chunks arrive (memory stays bounded
/// whatever the size, and the archive is never stored whole), building the store's state from
/// them on the way when asked to. Runs on the shard thread, which
/// waits for it: a follower installing a snapshot has nothing else it could do.
fn snapshot_fetch(router: Arc<PeerRouter>, cluster_id: u64) -> SnapshotFetch {
    Arc::new(
        move |desc: &SnapshotDescriptor,
              target: &Path,
              rebuild: Option<crate::mvcc::IndexRebuild>|
              -> Result<Fetched> {
            let Some(runtime) = router.runtime() else { return Err(EngineError::Stopped) };
            let Some(mut client) = router.client(desc.from) else { return Err(EngineError::NoLeader) };
            std::fs::create_dir_all(target).map_err(StorageError::from)?;
            let req = SnapshotFetchRequest { cluster_id, shard: desc.shard, index: desc.index, from: router.me() };
            let stream =
                runtime.block_on(async { client.fetch_snapshot(req).await }).map_err(EngineError::Remote)?.into_inner();
            let chunks = ChunkReader { runtime, stream, chunk: bytes::Bytes::new(), at: 0 };
            crate::snapshot::unpack_state_stream::<RocksBackend>(chunks, target, rebuild)
                .map_err(|e| EngineError::Remote(tonic::Status::data_loss(e.to_string())))
        },
    )
}

/// The bytes of a `Peer.FetchSnapshot` stream as a blocking reader, for a shard thread.
struct ChunkReader {
    runtime: tokio::runtime::Handle,
    stream: tonic::Streaming<ballast_proto::etcdserverpb::SnapshotResponse>,
    chunk: bytes::Bytes,
    at: usize,
}

impl std::io::Read for ChunkReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.chunk.len() {
            match self.runtime.block_on(self.stream.message()) {
                Ok(Some(c)) => (self.chunk, self.at) = (c.blob, 0),
                Ok(None) => return Ok(0),
                Err(status) => return Err(std::io::Error::other(status.message().to_string())),
            }
        }
        let n = buf.len().min(self.chunk.len() - self.at);
        buf[..n].copy_from_slice(&self.chunk[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Largest batch of raft messages a peer may send in one frame, and largest gRPC message on
/// the peer port. 64 MiB is well above a
/// batch the sender cuts (`ClusterConfig::max_batch_messages` heartbeats, or a round's entry of
/// `ShardConfig::max_round_entry_bytes` with its append) and bounds what a broken peer costs.
const PEER_MESSAGE_LIMIT: usize = 64 << 20;

/// Serves the peer port on `listener` until `stop` fires: raft connections on threads of
/// their own (`api::peer_raft`), the peer service's gRPC calls on the rest.
///
/// # Errors
/// The peer TLS material is unusable.
fn serve_peers(
    api: Api,
    listener: tokio::net::TcpListener,
    tls: Option<PeerTls>,
    mut stop: tokio::sync::broadcast::Receiver<()>,
    receivers: &crate::api::peer_raft::Receivers,
) -> std::result::Result<tokio::task::JoinHandle<std::result::Result<(), tonic::transport::Error>>, ServeError> {
    let raft_tls = tls
        .as_ref()
        .map(|tls| crate::api::tls::server_config(tls, crate::api::tls::Port::Peer))
        .transpose()
        .map_err(ServeError::Tls)?;
    let service = PeerService::new(api);
    let incoming =
        crate::api::peer_raft::split(listener, service.clone(), raft_tls, PEER_MESSAGE_LIMIT, &stop, receivers);
    Ok(tokio::spawn(async move {
        let mut builder = tonic::transport::Server::builder();
        if let Some(tls) = tls {
            builder = builder.tls_config(tls.server())?;
        }
        builder
            .add_service(
                PeerServer::new(service)
                    .max_decoding_message_size(PEER_MESSAGE_LIMIT)
                    .max_encoding_message_size(PEER_MESSAGE_LIMIT),
            )
            .serve_with_incoming_shutdown(incoming, async move {
                let _ = stop.recv().await;
            })
            .await
    }))
}

/// Asks every other member who it is (name, client URLs) until each has answered, for
/// MemberList, and again for members added later; a peer of another cluster is reported at
/// error level and asked again, since an operator may fix its flags.
async fn learn_peers(api: Api) {
    let me = api.member.id;
    loop {
        let missing: Vec<(u64, u64)> = {
            let known = api.peer_attributes.read();
            api.membership
                .read()
                .members
                .iter()
                .filter(|m| m.id != me && !known.contains_key(&m.id))
                .map(|m| (m.id, m.raft_id))
                .collect()
        };
        for (id, raft_id) in missing {
            let Some(client) = api.router.client(raft_id) else { continue };
            let mut client: PeerClient<_> = client;
            let mut req = tonic::Request::new(HelloRequest { cluster_id: api.member.cluster_id, from: me });
            req.set_timeout(Duration::from_secs(1));
            match client.hello(req).await {
                Ok(r) => {
                    let r = r.into_inner();
                    api.peer_attributes.write().insert(id, (r.name, r.client_urls));
                }
                Err(s) if s.code() == tonic::Code::FailedPrecondition => {
                    tracing::error!(peer = format_args!("{id:x}"), status = %s.message(), "peer refused this member");
                }
                Err(_) => {}
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Why serving stopped with an error.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A listen address could not be bound.
    #[error("cannot listen on {0}: {1}")]
    Bind(SocketAddr, #[source] std::io::Error),
    /// A Unix socket could not be bound.
    #[error("cannot listen on unix socket {0}: {1}")]
    BindUnix(PathBuf, #[source] std::io::Error),
    /// `https://` client URLs without `--cert-file`.
    #[error("https client URLs need --cert-file and --key-file")]
    NoClientTls,
    /// A port's TLS material is unusable.
    #[error("{0}")]
    Tls(#[source] crate::api::tls::TlsError),
    /// The shard stopped on an error.
    #[error("shard stopped: {0}")]
    Shard(#[source] EngineError),
}
