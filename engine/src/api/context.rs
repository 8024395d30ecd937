//! What every service shares: the member's shards and how to reach them ([`ApiContext`]), its
//! identity ([`MemberInfo`]), the gRPC limits, and the paths a request takes to the shard that
//! answers it (here or, forwarded, at the member that leads it).

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use ballast_proto::ballastpb::{forward_request, forward_response, ForwardRequest, RaftCommand};
use ballast_proto::etcdserverpb::{LeaseTimeToLiveRequest, LeaseTimeToLiveResponse};
use parking_lot::RwLock;

use crate::cluster::allocation::{Granted, RevisionGroup};
use crate::cluster::placement::Placement;
use crate::cluster::resolved::{Fact, Resolution};
use crate::cluster::revision_group::{Release, RoundId};
use crate::cluster::{Membership, PeerRouter};
use crate::error::{EngineError, Result};
use crate::mvcc::RevisionCounter;
use crate::shard::{Colocation, Reply, ShardHandle, ShardMsg, WriteResponse};
use crate::shard_map::ShardMap;
use ballast_proto::ballastpb::raft_command::Command;

/// The version string `Status` reports. kube-apiserver enables watch progress requests only
/// for servers at 3.5.13 or later, and etcdctl prints it.
pub const ETCD_COMPAT_VERSION: &str = "3.5.16";

/// This member, as `MemberList` shows it.
#[derive(Clone, Debug)]
pub struct MemberInfo {
    /// The member ID (etcd style: a hash of the peer URLs and cluster token).
    pub id: u64,
    /// The cluster ID.
    pub cluster_id: u64,
    /// The member's name.
    pub name: String,
    /// URLs other members reach this one on.
    pub peer_urls: Vec<String>,
    /// URLs clients reach this one on.
    pub client_urls: Vec<String>,
}

/// What every service shares.
#[derive(Debug)]
pub struct ApiContext {
    /// The member's shards, by shard number.
    pub shards: Vec<ShardHandle>,
    /// Which shard owns a key.
    pub map: ShardMap,
    /// The member's revision counter, shared by its shards.
    pub revs: Arc<RevisionCounter>,
    /// This member.
    pub member: MemberInfo,
    /// Largest accepted write request in bytes (etcd `--max-request-bytes`, default 1.5 MiB).
    pub max_request_bytes: usize,
    /// Most ops per txn branch (etcd `--max-txn-ops`, default 128).
    pub max_txn_ops: usize,
    /// How long a request may wait for its answer. 7 s is etcd's default (5 s plus two
    /// election timeouts).
    pub request_timeout: Duration,
    /// Where snapshot checkpoints are staged before streaming.
    pub snapshot_dir: PathBuf,
    /// Batches buffered per watch stream from each shard (see `WatchConfig::stream_buffer`).
    pub watch_stream_buffer: usize,
    /// Batches a stream over several shards buffers for its client (`WatchConfig::merge_buffer`).
    pub watch_merge_buffer: usize,
    /// How often a client stream over several shards re-checks them while it holds events of a
    /// watcher over several shards (see `watch_shards`): the added delivery latency when the
    /// shard that holds the others back has nothing to send. `WatchConfig::merge_tick`.
    pub watch_merge_tick: std::time::Duration,
    /// Most events per response of a watcher over several shards (`WatchConfig::catchup_batch_events`).
    pub watch_catchup_batch: usize,
    /// Fragment size for such watchers (`WatchConfig::max_response_bytes`).
    pub watch_max_response_bytes: usize,
    /// Numbers watch streams and snapshots.
    pub next_id: AtomicU64,
    /// The cluster's members (shared with shard 0, which applies changes to it).
    pub membership: Arc<RwLock<Membership>>,
    /// True while this member is a learner (kept by shard 0's `ClusterView`).
    pub learner: Arc<std::sync::atomic::AtomicBool>,
    /// Seeds the IDs of members added later (etcd `--initial-cluster-token`).
    pub cluster_token: String,
    /// Other members' names and client URLs as they announced them (`Peer.Hello`), by member
    /// ID: MemberList shows a member that has not answered yet as unstarted, as etcd does.
    pub peer_attributes: RwLock<std::collections::HashMap<u64, (String, Vec<String>)>>,
    /// Connections to the other members.
    pub router: Arc<PeerRouter>,
    /// How long a write waits between looks for a shard's leader while an election runs. 10 ms
    /// is a tenth of a heartbeat: the wait ends soon after a leader is known.
    pub leader_poll: Duration,
    /// What the member's shards share about their leadership (several shards only).
    pub colocation: Option<Arc<Colocation>>,
    /// The revision group, where the shards' leaders are spread over the members (see
    /// `cluster::revision_group`) or may be once a growing cluster switches; None where one
    /// member orders every write for good. Its peer side is served whenever it exists; the
    /// member's own paths use it through [`ApiContext::spread_group`].
    pub revisions: Option<Arc<RevisionGroup>>,
    /// How the member's shards place their leaders right now (`cluster::placement`).
    pub placement: Arc<Placement>,
    /// How often a linearizable read waits for this member to hold its revision
    /// (`ClusterConfig::read_poll`).
    pub read_poll: Duration,
    /// Up to which revision every shard here holds every write, as the evaluating member (or
    /// the revision allocator) reported it (`cluster::resolved`).
    pub resolution: Arc<Resolution>,
    /// Every shard's backend, for `/metrics` to read the database size without asking a shard.
    pub backends: Vec<crate::storage::rocks::RocksBackend>,
    /// Every shard's heartbeat, in shard order: the health endpoints read a stopped shard's
    /// cause from it.
    pub beats: Vec<Arc<crate::shard::stall::Heartbeat>>,
    /// The client port's HTTP/2 limits.
    pub grpc_limits: GrpcLimits,
    /// The cluster's auth store (published by shard 0) and this member's tokens.
    pub auth: Arc<crate::auth::AuthShared>,
    /// etcd's `--client-cert-auth`: a request without a token is from the user its verified
    /// client certificate names (its subject's common name).
    pub client_cert_auth: bool,
    /// etcd's `--cors`: origins whose browsers may call the HTTP endpoints and the gateway;
    /// empty or `*` is every origin.
    pub cors: Vec<String>,
}

/// The client port's HTTP/2 limits, with etcd's flags and defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GrpcLimits {
    /// Most concurrent streams per client connection (`--max-concurrent-streams`). etcd's
    /// default is unlimited (2^32 - 1): a client multiplexes all its watches over one
    /// connection and etcd does not cap them; lower it to bound one client's share.
    pub max_concurrent_streams: u32,
    /// How often the server pings a connection that has been quiet (`--grpc-keepalive-interval`,
    /// etcd's 2 h): finds peers that vanished without closing.
    pub keepalive_interval: Duration,
    /// How long a ping may go unanswered before the connection is closed
    /// (`--grpc-keepalive-timeout`, etcd's 20 s).
    pub keepalive_timeout: Duration,
    /// The least time a client must leave between its pings while it has a stream open
    /// (`--grpc-keepalive-min-time`, etcd's 5 s); with none open, two hours. A client pinging
    /// more often is sent GOAWAY `too_many_pings` ([`ping_policy`]): pings cost the server a
    /// write each, and a client that floods them is broken or hostile.
    pub keepalive_min_time: Duration,
    /// Streams a client may reset before the server took them, after which the connection is
    /// closed with ENHANCE_YOUR_CALM (the HTTP/2 rapid-reset attack, CVE-2023-44487). 20 is
    /// hyper's default; grpc-go bounds such resets similarly.
    pub max_pending_accept_reset_streams: usize,
}

impl Default for GrpcLimits {
    fn default() -> Self {
        GrpcLimits {
            max_concurrent_streams: u32::MAX,
            keepalive_interval: Duration::from_secs(2 * 60 * 60),
            keepalive_timeout: Duration::from_secs(20),
            keepalive_min_time: Duration::from_secs(5),
            max_pending_accept_reset_streams: 20,
        }
    }
}

impl ApiContext {
    /// Rejects a write whose encoding exceeds the request limit.
    ///
    /// # Errors
    /// `RequestTooLarge`.
    pub fn check_size(&self, m: &impl prost::Message) -> Result<()> {
        if m.encoded_len() > self.max_request_bytes {
            return Err(EngineError::RequestTooLarge);
        }
        Ok(())
    }

    /// Returns `shard N stopped: <cause>` for the first shard whose loop ended with an error
    /// (the member is then on its way out), or None while every shard runs.
    pub fn stopped_shard(&self) -> Option<String> {
        self.beats
            .iter()
            .enumerate()
            .find_map(|(n, beat)| beat.failure().map(|cause| format!("shard {n} stopped: {cause}")))
    }

    /// Returns shard `s`'s handle.
    pub fn shard(&self, s: u32) -> &ShardHandle {
        &self.shards[s as usize]
    }

    /// Asks every shard to stop once it has handled what is queued before the request.
    pub fn stop_shards(&self) {
        for sh in &self.shards {
            let _ = sh.send(ShardMsg::Shutdown);
        }
    }

    /// Returns shard 0, which answers for the member where every shard holds the same state
    /// (leases, alarms) or none does (raft status figures of a one-shard member).
    pub fn first(&self) -> &ShardHandle {
        &self.shards[0]
    }

    /// Asks shard `s` with the message built by `make` and waits for its answer.
    ///
    /// # Errors
    /// The shard's answer, `Timeout`, `Stopped` or `TooManyRequests`.
    pub async fn call<T>(&self, s: u32, make: impl FnOnce(Reply<T>) -> ShardMsg) -> Result<T> {
        self.shard(s).call(self.request_timeout, make).await
    }

    /// Asks every shard with the message built by `make`, at once, and returns their answers in
    /// shard order, or the first error in shard order.
    ///
    /// # Errors
    /// Any shard's error.
    pub async fn call_all<T>(&self, make: impl Fn(Reply<T>) -> ShardMsg) -> Result<Vec<T>> {
        let calls = self.shards.iter().map(|sh| sh.call(self.request_timeout, &make));
        futures::future::join_all(calls).await.into_iter().collect()
    }

    /// Proposes `cmd` on shard `s` and waits for its applied answer. A member that does not lead
    /// the shard sends the write to the leader over the peer port and answers once it has
    /// applied the write itself (as etcd answers a write to a follower only after the follower
    /// applied it); while the shard has no leader the write waits for one, up to the request
    /// timeout.
    ///
    /// # Errors
    /// The apply error, or a shard/transport error.
    pub async fn write(&self, s: u32, cmd: Command) -> Result<WriteResponse> {
        let m = &crate::metrics::GLOBAL;
        let _pending = crate::metrics::PendingProposal::start();
        let answer = self.write_unmetered(s, cmd).await;
        if matches!(
            answer,
            Err(EngineError::NoLeader | EngineError::Timeout | EngineError::LeaderChanged | EngineError::Stopped)
        ) {
            m.proposals_failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        answer
    }

    async fn write_unmetered(&self, s: u32, cmd: Command) -> Result<WriteResponse> {
        if !self.router.has_peers() {
            return self.call(s, |tx| ShardMsg::Write(cmd, tx)).await;
        }
        let deadline = tokio::time::Instant::now() + self.request_timeout;
        let request = forward_request::Request::Write(RaftCommand { command: Some(cmd), ..Default::default() });
        let answer = self.on_leader(s, deadline, request).await?;
        match answer {
            forward_response::Response::Put(r) => Ok(WriteResponse::Put(r)),
            forward_response::Response::DeleteRange(r) => Ok(WriteResponse::DeleteRange(r)),
            forward_response::Response::Txn(r) => Ok(WriteResponse::Txn(r)),
            forward_response::Response::Compaction(r) => Ok(WriteResponse::Compaction(r)),
            forward_response::Response::LeaseGrant(r) => Ok(WriteResponse::LeaseGrant(r)),
            forward_response::Response::LeaseRevoke(r) => Ok(WriteResponse::LeaseRevoke(r)),
            forward_response::Response::Alarm(r) => Ok(WriteResponse::Alarm(r)),
            forward_response::Response::Auth(r) => Ok(WriteResponse::Auth(r)),
            _ => Err(EngineError::Remote(unexpected("a forwarded write"))),
        }
    }

    /// Makes a membership change on shard 0's leader and answers the member it added or changed.
    ///
    /// # Errors
    /// etcd's membership errors, or a shard or transport error.
    pub async fn member_change(
        &self,
        request: forward_request::Request,
    ) -> Result<ballast_proto::ballastpb::MemberRecord> {
        let deadline = tokio::time::Instant::now() + self.request_timeout;
        match self.on_leader(0, deadline, request).await? {
            forward_response::Response::Member(m) => Ok(m),
            _ => Err(EngineError::Remote(unexpected("a forwarded membership change"))),
        }
    }

    /// Renews lease `id` on shard `s`'s leader (which keeps the deadlines); answers the granted
    /// TTL, 0 when the lease is gone.
    ///
    /// # Errors
    /// A shard or transport error.
    pub async fn keep_alive(&self, s: u32, id: i64) -> Result<i64> {
        if !self.router.has_peers() {
            return self.call(s, |tx| ShardMsg::LeaseKeepAlive(id, tx)).await;
        }
        let deadline = tokio::time::Instant::now() + self.request_timeout;
        match self.on_leader(s, deadline, forward_request::Request::LeaseKeepAlive(id)).await? {
            forward_response::Response::LeaseKeepAliveTtl(ttl) => Ok(ttl),
            _ => Err(EngineError::Remote(unexpected("a forwarded keep-alive"))),
        }
    }

    /// Asks shard `s`'s leader for a lease's remaining TTL.
    ///
    /// # Errors
    /// A shard or transport error.
    pub async fn time_to_live(&self, s: u32, r: LeaseTimeToLiveRequest) -> Result<LeaseTimeToLiveResponse> {
        if !self.router.has_peers() {
            return self.call(s, |tx| ShardMsg::LeaseTimeToLive(r, tx)).await;
        }
        let deadline = tokio::time::Instant::now() + self.request_timeout;
        match self.on_leader(s, deadline, forward_request::Request::LeaseTimeToLive(r)).await? {
            forward_response::Response::LeaseTimeToLive(mut resp) => {
                resp.header = self.header();
                Ok(resp)
            }
            _ => Err(EngineError::Remote(unexpected("a forwarded time-to-live"))),
        }
    }

    /// Serves `request` on shard `s` here when this member leads it, else on its leader over
    /// the peer port, waiting for a leader while there is none. A refusal that proves the
    /// request was not taken (not leader, no leader, or "leader changed" from the shard itself:
    /// raft refused the round, or another leader's entry took its index) is retried; anything
    /// else is the answer, including a "leader changed" made up for a connection lost with the
    /// request in flight, which may have been applied.
    pub(super) async fn on_leader(
        &self,
        s: u32,
        deadline: tokio::time::Instant,
        request: forward_request::Request,
    ) -> Result<forward_response::Response> {
        loop {
            let leader = self.shard(s).leader();
            let (answer, untaken) = if leader == 0 {
                (Err(EngineError::NoLeader), true)
            } else if leader == self.raft_id() {
                let answer = self.serve_forwarded(s, request.clone(), false).await.map(|(r, _)| r);
                let untaken = matches!(answer, Err(EngineError::LeaderChanged));
                (answer, untaken)
            } else {
                let answer = self.forward(leader, s, deadline, request.clone()).await;
                let untaken =
                    matches!(&answer, Err(EngineError::Remote(st)) if st.message() == "etcdserver: leader changed");
                (answer, untaken)
            };
            let retry = untaken || matches!(answer, Err(EngineError::NoLeader | EngineError::NotLeader));
            match answer {
                Err(_) if retry && tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(self.leader_poll).await;
                }
                Err(EngineError::NoLeader | EngineError::NotLeader) => return Err(EngineError::Timeout),
                other => return other,
            }
        }
    }

    /// Sends `request` to the member with raft ID `leader` and, for a write, waits until this
    /// member applied it too.
    async fn forward(
        &self,
        leader: u64,
        s: u32,
        deadline: tokio::time::Instant,
        request: forward_request::Request,
    ) -> Result<forward_response::Response> {
        // The peer connections are known by raft ID, which differs from the member ID for a
        // member bootstrapped alone (`cluster::members`).
        let known = self.membership.read().by_raft_id(leader).is_some();
        let Some(mut client) = known.then(|| self.router.client(leader)).flatten() else {
            return Err(EngineError::NoLeader);
        };
        let is_write = !matches!(
            request,
            forward_request::Request::LeaseKeepAlive(_)
                | forward_request::Request::LeaseTimeToLive(_)
                | forward_request::Request::Range(_)
                | forward_request::Request::ReadTxn(_)
        );
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let resp = match request {
            // Writes share one stream per leading member (`cluster::forwarding`).
            forward_request::Request::Write(cmd) => {
                self.router.forward_write(leader, s, cmd, left).await.map_err(from_peer_status)?
            }
            request => {
                let mut req = tonic::Request::new(ForwardRequest {
                    cluster_id: self.member.cluster_id,
                    shard: s,
                    request: Some(request),
                });
                req.set_timeout(left);
                client.forward(req).await.map_err(from_peer_status)?.into_inner()
            }
        };
        let Some(mut answer) = resp.response else {
            return Err(EngineError::Remote(unexpected("a forwarded request")));
        };
        if is_write {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            self.shard(s).call(left, |tx| ShardMsg::WaitApplied(resp.applied_index, tx)).await?;
        }
        set_member(&mut answer, self.member.id);
        Ok(answer)
    }

    /// Returns true when this member answers reads from its own shards: it is alone, its
    /// cluster has one shard, or it leads every shard (`shard::colocate`).
    pub fn evaluates(&self) -> bool {
        !self.shards_replicated()
            || (self.spread_group().is_none() && self.colocation.as_ref().is_none_or(|c| c.all_ready()))
    }

    /// The revision group while the shards' leaders are spread: None where one member orders
    /// every write, also in a growing cluster until its switch is applied here.
    pub fn spread_group(&self) -> Option<&Arc<RevisionGroup>> {
        self.revisions.as_ref().filter(|_| self.placement.spread())
    }

    /// True for a member of a cluster of several members and several shards.
    pub fn shards_replicated(&self) -> bool {
        self.shards.len() > 1 && self.router.has_peers()
    }

    /// Returns the revision up to which reads and watches over several shards may go on this
    /// member: the counter where this member's shards order every write, else the resolved
    /// revision the evaluating member reported.
    pub fn cross_shard_last(&self) -> i64 {
        if self.evaluates() {
            return self.revs.last();
        }
        self.resolution.resolved(|s| self.shards.get(s).map_or(0, ShardHandle::applied))
    }

    /// On the member that evaluates a cluster's writes, returns what it knows: every revision
    /// up to the returned one is applied, at or below each shard's applied index.
    pub fn local_fact(&self) -> Option<Fact> {
        if let Some(group) = self.spread_group() {
            return group.fact();
        }
        if !self.shards_replicated() || !self.evaluates() {
            return None;
        }
        let last = self.revs.last();
        let revision = self.shards.iter().map(|sh| sh.published_through(last)).min().unwrap_or(last);
        // Read after the revision: a shard publishes its applied index before it clears the
        // pending mark that held the revision back.
        let applied = self.shards.iter().map(ShardHandle::applied).collect();
        Some(Fact { revision, applied })
    }

    /// Asks the revision allocator where the cluster stands (spread shard leaders): returns a
    /// revision at least that of every write acknowledged before the call, after taking the
    /// allocator's fact; with `hold`, the allocator grants nothing until the returned grant is
    /// released ([`ApiContext::release_hold`]). Retried while the allocator moves, up to the
    /// request timeout.
    ///
    /// # Errors
    /// `Timeout` when no allocator answered in time.
    pub async fn cluster_revision(&self, hold: bool) -> Result<Granted> {
        let Some(group) = self.spread_group() else { return Err(EngineError::NotCapable) };
        let deadline = tokio::time::Instant::now() + self.request_timeout;
        let round = self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // A round of no shard: reads and holds are never reported on or abandoned with a gap.
        let id = RoundId { shard: u32::MAX, term: 0, round };
        loop {
            let (tx, rx) = tokio::sync::oneshot::channel();
            group.request(id, 0, hold, Box::new(move |g| tx.send(g).is_ok()));
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if let Ok(Ok(Some(granted))) = tokio::time::timeout(left, rx).await {
                self.resolution.offer(granted.fact.clone());
                return Ok(granted);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(EngineError::Timeout);
            }
            tokio::time::sleep(self.leader_poll).await;
        }
    }

    /// Releases a hold taken with [`ApiContext::cluster_revision`].
    pub fn release_hold(&self, g: &Granted) {
        if let Some(group) = &self.revisions {
            group.release(Release { epoch: g.grant.epoch, id: g.grant.id, used: 0, index: 0 });
        }
    }

    /// Waits until this member's shards hold every revision up to `at` (its resolved revision
    /// reaches it), up to the request timeout.
    ///
    /// # Errors
    /// `Timeout`.
    pub async fn wait_resolved(&self, at: i64) -> Result<i64> {
        let deadline = tokio::time::Instant::now() + self.request_timeout;
        loop {
            let resolved = self.cross_shard_last();
            if resolved >= at {
                return Ok(resolved);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(EngineError::Timeout);
            }
            tokio::time::sleep(self.read_poll).await;
        }
    }

    /// Returns true while this member is a learner of its cluster.
    pub fn is_learner(&self) -> bool {
        self.learner.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Returns this member's raft ID.
    pub fn raft_id(&self) -> u64 {
        self.membership.read().get(self.member.id).map_or(self.member.id, |m| m.raft_id)
    }

    /// Proposes `cmd` on every shard (lease and compaction requests, whose state every shard
    /// keeps) and returns shard 0's answer, or the first error in shard order.
    ///
    /// # Errors
    /// Any shard's error.
    pub async fn write_all(&self, cmd: Command) -> Result<WriteResponse> {
        let writes = (0..self.shards.len() as u32).map(|s| self.write(s, cmd.clone()));
        let mut answers = futures::future::join_all(writes).await.into_iter().collect::<Result<Vec<_>>>()?;
        Ok(answers.swap_remove(0))
    }

    /// Returns a full response header at the member's current revision, as etcd fills headers
    /// of responses that do not read the store.
    pub fn header(&self) -> Option<ballast_proto::etcdserverpb::ResponseHeader> {
        Some(ballast_proto::etcdserverpb::ResponseHeader {
            cluster_id: self.member.cluster_id,
            member_id: self.member.id,
            revision: self.revs.last(),
            raft_term: self.first().term(),
        })
    }

    /// Returns the member ID for a raft node ID (0 for none or an unknown one).
    pub fn member_of_raft_id(&self, raft_id: u64) -> u64 {
        self.membership.read().by_raft_id(raft_id).map_or(0, |m| m.id)
    }
}

/// Turns a peer's answer into the error to give the client: statuses that say the request was
/// refused untaken become the errors the retry loop knows; the rest go to the client as they
/// are (they are etcd's already), transport failures as etcd's "leader changed" (the request
/// may or may not have been applied).
pub(super) fn from_peer_status(status: tonic::Status) -> EngineError {
    let unsent = || {
        // A connection that could not be made carried nothing: safe to try again.
        let text = format!("{status:?}").to_ascii_lowercase();
        text.contains("connect") && !text.contains("reset")
    };
    match (status.code(), status.message()) {
        (tonic::Code::FailedPrecondition, "etcdserver: not leader") => EngineError::NotLeader,
        (tonic::Code::Unavailable, m) if !m.starts_with("etcdserver:") && unsent() => EngineError::NoLeader,
        (tonic::Code::Unavailable, "etcdserver: no leader") => EngineError::NoLeader,
        (tonic::Code::Unavailable, m) if !m.starts_with("etcdserver:") => EngineError::LeaderChanged,
        (tonic::Code::Unknown | tonic::Code::Internal | tonic::Code::Cancelled, m) if !m.starts_with("etcdserver:") => {
            EngineError::LeaderChanged
        }
        (tonic::Code::DeadlineExceeded, _) => EngineError::Timeout,
        _ => EngineError::Remote(status),
    }
}

/// Puts `member` in the header of a forwarded answer: the client hears from the member it asked.
fn set_member(answer: &mut forward_response::Response, member: u64) {
    use forward_response::Response as R;
    let header = match answer {
        R::Put(r) => r.header.as_mut(),
        R::DeleteRange(r) => r.header.as_mut(),
        R::Txn(r) => r.header.as_mut(),
        R::Compaction(r) => r.header.as_mut(),
        R::LeaseGrant(r) => r.header.as_mut(),
        R::LeaseRevoke(r) => r.header.as_mut(),
        R::Alarm(r) => r.header.as_mut(),
        R::LeaseTimeToLive(r) => r.header.as_mut(),
        R::Range(r) => r.header.as_mut(),
        R::LeaseKeepAliveTtl(_) | R::Member(_) | R::Auth(_) => None,
    };
    if let Some(h) = header {
        h.member_id = member;
    }
}

/// Shared handle passed to every service.
pub type Api = Arc<ApiContext>;

pub(super) fn unexpected(what: &'static str) -> tonic::Status {
    tonic::Status::internal(format!("etcdserver: unexpected response to {what}"))
}
