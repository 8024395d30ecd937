//! One shard: its raft node, its state machine and the loop that owns them.
//!
//! Reading order: [`msg`] (what can be asked), [`state_machine`] (what committed entries do),
//! then [`Shard::run`], the loop, which runs on the shard's own thread ([`executor`]) and
//! reports each round to the stall watch ([`stall`]). The loop is the only code
//! that touches the shard's state; the network plane reaches it through [`ShardHandle`]. One
//! iteration ("round"): take up to `max_msgs_per_round` messages (reads answered at once, writes
//! set aside), evaluate and propose the round's writes (see [`state_machine`]), tick raft when
//! due, run the Ready loop (one synced log write, one state write, watch fan-out), answer the
//! writes, send the followers the commit index when no next round is about to carry it, then
//! move lagging watchers forward.
//!
//! Reads are answered from state every acknowledged write is in, and never see a write that is
//! not yet committed. With a single voter, a round's reads are all answered before its writes
//! are evaluated (the messages of one round are concurrent, so either order is linearizable),
//! and every proposal is committed, written and answered in the round it is proposed. With
//! followers ([`reads`]): linearizable reads wait for a ReadIndex (one per round for all the
//! round's reads), serializable ones are served locally, and every read waits until nothing the
//! leader evaluated is uncommitted. The leader evaluates a round's writes only when its previous
//! round has committed, and proposes them as one entry, so that moment comes once per round.

pub mod balance;
pub mod colocate;
#[cfg(test)]
mod conf_change_tests;
pub mod cut;
pub mod executor;
mod gather;
pub mod msg;
mod reads;
mod spread;
pub mod stall;
pub mod state_machine;
mod switch;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ballast_proto::ballastpb::{raft_command::Command, RaftCommand};
use ballast_proto::etcdserverpb::{
    alarm_request::AlarmAction, AlarmRequest, AlarmType, HashKvResponse, LeaseLeasesResponse, LeaseRevokeRequest,
    LeaseStatus, LeaseTimeToLiveResponse,
};
use ballast_raft::{ConfState, RaftConfig, RaftNode};
use flume::{Receiver, RecvTimeoutError, Sender, TryRecvError, TrySendError};
use prost::Message;

use crate::apply::kv;
use crate::clock::Clock;
use crate::cluster::{ClusterView, PeerTransport};
use crate::error::{EngineError, Result};
use crate::header::HeaderInfo;
use crate::mvcc::RevisionCounter;
use crate::raft_log::BackendLogStore;
use crate::raft_snapshot::SnapshotConfig;
use crate::round_trace::{self, Mark};
use crate::storage::{Cf, KvBackend, ScanOrder};
use crate::watch::{WatchConfig, WatchHub};
pub use colocate::{Colocation, NOTHING_PENDING};
pub use executor::ShardPlacement;
pub use msg::{GroupProgress, PeerAnswers, Reply, ShardMsg, ShardStatus, WriteReply, WriteResponse};
use reads::{PendingRead, ReadQueue};
use spread::Spread;
use stall::Heartbeat;
use state_machine::{ApplyOutput, ShardStateMachine};

/// Tunables of a shard.
#[derive(Clone, Debug)]
pub struct ShardConfig {
    /// Raft tick. 100 ms is etcd's heartbeat interval; with `election_tick = 10` elections take
    /// etcd's 1 s.
    pub tick_interval: Duration,
    /// Raft parameters. A shard's leader lets its commit index ride on its next round's
    /// append (`RaftConfig::commit_with_next_append`) and tells followers itself when no round
    /// follows at once (see [`Shard::run`]).
    pub raft: RaftConfig,
    /// Messages waiting for the shard before callers get "too many requests". 10,000 is about
    /// etcd's gap between committed and applied entries before it refuses proposals (5,000)
    /// plus room for reads.
    pub mailbox_capacity: usize,
    /// Messages taken per round. 4,096 bounds a round's latency while still batching a burst of
    /// 1,000 in-flight writes into one log sync.
    pub max_msgs_per_round: usize,
    /// Applied entries kept in the raft log for slow followers; one further behind gets a
    /// snapshot. 5,000 is etcd's `SnapshotCatchUpEntries` default
    /// (`--experimental-snapshot-catchup-entries`).
    pub raft_log_retain: u64,
    /// Entries of the raft log kept in memory. 4,096 covers a round's worth of appends.
    pub raft_log_tail: usize,
    /// Most bytes of those entries. By count alone the copy held 4,096 writes of whatever
    /// size: creating and deleting large CustomResourceDefinitions (each write a copy of the
    /// schema) grew a member by hundreds of MB. 16 MiB still holds several rounds of the largest
    /// requests etcd accepts (1.5 MiB) and thousands of ordinary ones; older entries are read
    /// from RocksDB, which has the recent ones in its memtable.
    pub raft_log_tail_bytes: usize,
    /// Expired leases revoked per tick. 100 per 100 ms tick is etcd's `leaseRevokeRate` of
    /// 1,000/s, which keeps a mass expiry from stalling writes.
    pub lease_revokes_per_tick: usize,
    /// Minimum lease TTL in seconds: etcd's ceil(1.5 × election timeout) = 2 with defaults.
    pub min_lease_ttl: i64,
    /// Backend size that raises the NOSPACE alarm. 2 GiB is etcd's default quota.
    pub quota_backend_bytes: u64,
    /// How soon the loop retries lagging watchers when nothing else wakes it. 5 ms keeps a
    /// resumed slow watcher's catch-up fast without spinning.
    pub catch_up_interval: Duration,
    /// Watch delivery tunables.
    pub watch: WatchConfig,
    /// Where shard executors run (see [`ShardPlacement`]).
    pub placement: ShardPlacement,
    /// How long one round may run before the shard is reported as stalled. 1 s is etcd's
    /// election timeout: a shard that stops polling that long would, with followers, lose its
    /// leadership; shorter stalls (a slow sync) show in request latency already.
    pub stall_threshold: Duration,
    /// Memory for the newest value of live keys (see `mvcc::value_cache`). 256 MiB holds a
    /// typical control plane's whole live data set (kube-apiserver's watch cache holds every
    /// object anyway); beyond it, reads fall back to RocksDB and its block cache.
    pub value_cache_bytes: usize,
    /// Encoded writes one round's raft entry may carry before the rest wait for the next round.
    /// 4 MiB holds thousands of Kubernetes-sized writes (a round's worth at 1,000 in flight)
    /// while keeping one entry, and so one append message, within a few of etcd's 1 MiB
    /// `maxSizePerMsg`.
    pub max_round_entry_bytes: usize,
    /// Most raft log entries a leader keeps for a follower that has not caught up, beyond
    /// `raft_log_retain`. A follower further behind needs a raft snapshot, which is not built
    /// yet; 1,000,000 entries (a few hundred MiB of small writes) is days of a typical control
    /// plane's writes and bounds the disk a dead member can cost.
    pub raft_log_hold_max: u64,
    /// A follower whose connection to the leader breaks starts an election at once instead of
    /// waiting out the election timeout (1 s): a leader that died is replaced in about a round
    /// trip. Pre-vote and check-quorum keep it harmless when only this follower lost the
    /// connection (the others, still hearing the leader, refuse the pre-vote).
    pub elect_on_leader_loss: bool,
    /// How soon a shard holding writes looks again whether this member leads every shard (see
    /// [`colocate`]). Writes wait like this only for the few heartbeats after a leader change
    /// while the shards' leaderships gather on one member; 1 ms keeps that wait from adding a
    /// whole tick (100 ms) to it.
    pub colocation_poll: Duration,
    /// How long a leader with followers holds its next round for the writers its last round
    /// answered (see [`gather`]); zero: never. Writers come back within a client's turnaround,
    /// a few hundred µs, but on the benchmark machine under load often past 500 µs: at 500 µs
    /// rounds at 16 in flight carried 11–15 writes, at 1 ms 15.6–15.9 (1.27–1.37× the puts/s,
    /// benches/README.md). A writer that does not come back costs a round at most that much,
    /// and independent writers at 2,000 puts/s 0.2–0.35 ms at the median.
    pub round_gather: Duration,
    /// The same after a round that answered writes forwarded by other members. Their writers come
    /// back only once their member heard the commit index, applied the round and answered, and
    /// the next write was forwarded again: 1.5–2 ms on the benchmark machine. With 500 µs, rounds
    /// at 16 in flight through a follower carried 8 writes; with 2 ms they carry 16 (1.15–1.23×
    /// the puts/s, benches/README.md). A writer that does not come back costs a round at most
    /// that much, and independent writers at 2,000 puts/s 0.45–0.65 ms at the median.
    pub round_gather_forwarded: Duration,
    /// The most writes a round waits for (see [`gather`]). 32: a round of more writes spreads
    /// its fixed cost (about 1 ms of CPU over three members on the benchmark machine) to under
    /// 30 µs a write, and through one load client that many writers took longer than the
    /// window to come back, so waiting for them only delayed the round (100 in flight: 0.81×
    /// and 0.91× the puts/s).
    pub round_gather_most: usize,
}

impl Default for ShardConfig {
    fn default() -> Self {
        Self {
            tick_interval: Duration::from_millis(100),
            raft: RaftConfig { commit_with_next_append: true, ..RaftConfig::default() },
            mailbox_capacity: 10_000,
            max_msgs_per_round: 4_096,
            raft_log_retain: 5_000,
            raft_log_tail: 4_096,
            raft_log_tail_bytes: 16 << 20,
            lease_revokes_per_tick: 100,
            min_lease_ttl: 2,
            quota_backend_bytes: 2 << 30,
            catch_up_interval: Duration::from_millis(5),
            watch: WatchConfig::default(),
            value_cache_bytes: crate::mvcc::DEFAULT_VALUE_CACHE_BYTES,
            placement: ShardPlacement::Unbound,
            stall_threshold: Duration::from_secs(1),
            max_round_entry_bytes: 4 << 20,
            raft_log_hold_max: 1_000_000,
            elect_on_leader_loss: true,
            colocation_poll: Duration::from_millis(1),
            round_gather: Duration::from_millis(1),
            round_gather_forwarded: Duration::from_millis(2),
            round_gather_most: 32,
        }
    }
}

/// Who a shard's raft group is, at [`Shard::open`].
#[derive(Debug)]
pub struct ShardGroup {
    /// The group's voters and learners when the group is new (a stored one wins).
    pub conf: ConfState,
    /// How its messages reach the other members.
    pub transport: PeerTransport,
    /// Shard 0 of a member: where applied membership changes go.
    pub cluster: Option<ClusterView>,
    /// Snapshots for followers and from the leader; None for a member alone.
    pub snapshots: Option<SnapshotConfig>,
    /// For a member of several shards: this shard's number and what the member's shards share
    /// about their leadership (see [`colocate`]). None for a member of one shard.
    pub colocation: Option<(u32, Arc<Colocation>)>,
    /// For a member of a cluster of several members and several shards: the revision group its
    /// rounds take revisions from, so the shards' leaders may live on different members (see
    /// `cluster::revision_group`). None otherwise.
    pub revisions: Option<Arc<crate::cluster::allocation::RevisionGroup>>,
    /// The member's leader placement as it stands (`cluster::placement`), shared by its shards;
    /// None for a member of one shard or alone (then `revisions` alone says whether it spreads).
    pub placement: Option<Arc<crate::cluster::placement::Placement>>,
    /// Where the answers of writes other members sent on to this shard's leader go; None for
    /// a member alone.
    pub peer_answers: Option<Arc<dyn PeerAnswers>>,
}

impl ShardGroup {
    /// The group of a member alone (raft ID 1), for shard `shard`.
    pub fn alone(shard: u32) -> Self {
        Self {
            conf: ConfState { voters: vec![1], ..Default::default() },
            transport: PeerTransport::alone(shard),
            cluster: None,
            snapshots: None,
            colocation: None,
            revisions: None,
            placement: None,
            peer_answers: None,
        }
    }
}

/// The network plane's way into a shard.
#[derive(Clone, Debug)]
pub struct ShardHandle {
    tx: Sender<ShardMsg>,
    leader: Arc<AtomicU64>,
    term: Arc<AtomicU64>,
    applied: Arc<AtomicU64>,
    is_leader: Arc<AtomicBool>,
    pending: Arc<AtomicI64>,
    own_rev: Arc<AtomicI64>,
    gauges: Arc<crate::metrics::ShardGauges>,
}

impl ShardHandle {
    /// Queues `msg` for the shard.
    ///
    /// # Errors
    /// `TooManyRequests` when the mailbox is full, `Stopped` when the shard has stopped.
    pub fn send(&self, msg: ShardMsg) -> Result<()> {
        self.tx.try_send(msg).map_err(|e| match e {
            TrySendError::Full(_) => EngineError::TooManyRequests,
            TrySendError::Disconnected(_) => EngineError::Stopped,
        })
    }

    /// Sends the message built by `make` and waits up to `timeout` for its reply.
    ///
    /// # Errors
    /// The shard's answer, `Timeout`, `Stopped` or `TooManyRequests`.
    pub async fn call<T>(&self, timeout: Duration, make: impl FnOnce(Reply<T>) -> ShardMsg) -> Result<T> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.send(make(tx))?;
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err(EngineError::Stopped),
            Err(_) => Err(EngineError::Timeout),
        }
    }

    /// Returns the shard's raft leader as last seen (0: none).
    pub fn leader(&self) -> u64 {
        self.leader.load(Ordering::Relaxed)
    }

    /// Returns the shard's raft term as last seen.
    pub fn term(&self) -> u64 {
        self.term.load(Ordering::Relaxed)
    }

    /// Returns the shard's applied raft index as last published (before the writes up to it
    /// were answered).
    pub fn applied(&self) -> u64 {
        self.applied.load(Ordering::SeqCst)
    }

    /// Returns the newest revision this shard has applied here (its own, not the member's
    /// counter): every revision of this shard up to it is in its state.
    pub fn own_rev(&self) -> i64 {
        self.own_rev.load(Ordering::SeqCst)
    }

    /// Returns the shard's metrics.
    pub fn gauges(&self) -> &crate::metrics::ShardGauges {
        &self.gauges
    }

    /// Returns how many messages wait in the shard's mailbox.
    pub fn mailbox_depth(&self) -> usize {
        self.tx.len()
    }

    /// Returns true when this member led the shard at the end of its last round.
    pub fn is_leader(&self) -> bool {
        self.is_leader.load(Ordering::Relaxed)
    }

    /// Returns the revision up to which this shard has published every event it will ever have,
    /// given `last`, the member's revision counter read *before* this call: `last` when the
    /// shard has nothing pending, else just below its pending mark. The shard sets the mark
    /// (the counter's next revision) before a round takes its first revision and clears it once
    /// the round's events are published, so a revision at or below the answer that belongs to
    /// this shard is already in its watch streams' channels. See `engine/SHARDING.md`.
    pub fn published_through(&self, last: i64) -> i64 {
        match self.pending.load(Ordering::SeqCst) {
            NOTHING_PENDING => last,
            mark => last.min(mark - 1),
        }
    }
}

type ShardRaft<B> = RaftNode<BackendLogStore<B>, ShardStateMachine<B>, PeerTransport>;

/// A shard and everything it owns. Lives on its own thread; see [`Shard::run`].
pub struct Shard<B: KvBackend + Clone> {
    node: ShardRaft<B>,
    hub: WatchHub,
    rx: Receiver<ShardMsg>,
    cfg: ShardConfig,
    ids: HeaderInfo,
    clock: Arc<dyn Clock>,
    /// Writes waiting to be evaluated: taken this round, or held while the previous round is
    /// uncommitted. Internal ones (lease expiry, alarms) have no reply.
    writes: VecDeque<(Command, Option<WriteReply>)>,
    /// Reads waiting for a read index or for the state to hold only committed writes.
    reads: ReadQueue,
    /// Replies waiting for the applied index to reach theirs.
    waiters: Vec<(u64, Reply<()>)>,
    /// Membership changes proposed here: (index, term, reply), answered once applied.
    conf_waiters: Vec<(u64, u64, Reply<()>)>,
    /// The index of this member's first entry as leader: it evaluates nothing before that is
    /// applied (entries of earlier terms it holds must be in the state first).
    term_start: u64,
    /// True while this member is its group's only voter (a one-member cluster).
    single: bool,
    /// Evaluated writes waiting for the raft index that makes them (and everything evaluated
    /// before them) durable, in evaluation order.
    /// Each with the raft index and term of the entry it waits for: an answer is sent only if
    /// the entry applied at that index is the one proposed (a leader that steps down keeps its
    /// answers waiting, since the next leader may still commit the entry, as etcd does).
    answers: VecDeque<(u64, u64, WriteReply, Result<WriteResponse>)>,
    /// Answers for other members (to, number, result), sent together by
    /// [`Shard::send_peer_answers`] once a pass has made them.
    peer_out: Vec<(u64, u64, Result<WriteResponse>)>,
    /// Where answers for other members go; None for a member alone.
    peer_answers: Option<Arc<dyn PeerAnswers>>,
    /// The shard's metrics (see `crate::metrics`).
    gauges: Arc<crate::metrics::ShardGauges>,
    leader: Arc<AtomicU64>,
    term: Arc<AtomicU64>,
    applied: Arc<AtomicU64>,
    is_leader: Arc<AtomicBool>,
    /// See [`ShardHandle::published_through`].
    pending: Arc<AtomicI64>,
    stopping: bool,
    last_quota_check: Option<Instant>,
    /// See [`ShardGroup::colocation`].
    colo: Option<(u32, Arc<Colocation>)>,
    /// When this shard last handed its leadership to shard 0's leader.
    last_transfer: Option<Instant>,
    /// The newest revision whose events this shard has published: every revision of its own
    /// up to here is applied (a shard applies its revisions in order).
    own_rev: i64,
    /// `own_rev` for the handle, stored before the round's writes are answered.
    published_rev: Arc<AtomicI64>,
    /// The group's voters or learners may have changed since they were last recorded in the
    /// colocation (set at open, by an applied conf change or snapshot).
    conf_changed: bool,
    /// This shard's dealings with the revision group (see [`ShardGroup::revisions`]), from
    /// open or from when the member switched to spread leaders ([`switch`]).
    spread: Option<Spread>,
    /// The revision group a growing cluster's shard takes once the member switches.
    group: Option<Arc<crate::cluster::allocation::RevisionGroup>>,
    /// See [`ShardGroup::placement`].
    placement: Option<Arc<crate::cluster::placement::Placement>>,
    /// Shard 0 of the member switching to spread leaders: its switch entry (index, term).
    switch_entry: Option<(u64, u64)>,
    /// What the shard's watchers were last told before it switched to spread leaders: a
    /// spread shard never tells them less.
    switch_floor: i64,
    /// The shard's own mailbox, for the grants of a [`Spread`] made after open.
    mailbox: flume::WeakSender<ShardMsg>,
    /// When a raft message of this shard last came from each peer. Raft's own `recent_active`
    /// is cleared on the leader every election timeout (check-quorum) and set again only by the
    /// peer's next answer, so a healthy peer reads as inactive for a moment each timeout; what
    /// asks whether a peer is up (MemberAdd's health check, the balance) reads both.
    heard: Vec<(u64, Instant)>,
    /// How long the next round waits for the writers the last one answered.
    gather: gather::Gather,
    /// A checkpoint asked for while a round was in flight, taken once it is applied.
    deferred_checkpoint: Option<(std::path::PathBuf, Option<Arc<cut::Cut>>, Reply<i64>)>,
}

impl<B: KvBackend + Clone> std::fmt::Debug for Shard<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shard").field("ids", &self.ids).field("answers", &self.answers.len()).finish()
    }
}

impl<B: KvBackend + Clone> Shard<B> {
    /// Opens the shard's state on `backend`, replays its raft log, and returns it with its handle.
    /// Its writes take revisions from `revs`, which the replay raises past every revision the
    /// shard's log recorded, so open every shard of a member before any of them runs. `ids` gives
    /// the cluster and member IDs for response headers (the term is filled in live); `group`
    /// says who the shard's raft group is (see [`ShardGroup`]); `cfg.raft.id` is this member's
    /// raft ID. A lone voter leads at once, a group of several elects its leader.
    ///
    /// # Errors
    /// A storage or raft error.
    pub fn open(
        backend: B,
        cfg: ShardConfig,
        revs: Arc<RevisionCounter>,
        ids: HeaderInfo,
        clock: Arc<dyn Clock>,
        group: ShardGroup,
    ) -> Result<(Self, ShardHandle)> {
        let ShardGroup { conf, transport, cluster, snapshots, colocation, revisions, placement, peer_answers } = group;
        // A growing cluster's shard keeps the group for the switch; it spreads from open only
        // where the placement says so (or, with no placement, wherever a group is given).
        let spreads = placement.as_ref().is_none_or(|p| p.spread());
        let group = revisions.clone();
        let revisions = revisions.filter(|_| spreads);
        // An install of a snapshot that a crash cut short is finished before anything reads.
        {
            let log = BackendLogStore::open(backend.clone(), cfg.raft_log_tail)?;
            crate::raft_snapshot::resume(&backend, &log)?;
        }
        let sm = ShardStateMachine::open(
            backend.clone(),
            cfg.min_lease_ttl,
            cfg.value_cache_bytes,
            revs,
            ids.member_id,
            Arc::clone(&clock),
        )?;
        let mut log = BackendLogStore::open(backend, cfg.raft_log_tail)?.with_tail_bytes(cfg.raft_log_tail_bytes);
        if let Some(snap) = &snapshots {
            log = log.with_snapshots(snap.clone());
        }
        let own_rev = sm.store().opened_at();
        let hub = WatchHub::new(cfg.watch.clone(), own_rev);
        let mut sm = sm;
        sm.set_next_append(log.next_append());
        if let Some(view) = cluster {
            sm.set_auth(Arc::clone(&view.auth));
            sm.set_cluster_view(view);
        }
        if let Some(snap) = snapshots {
            sm.set_snapshots(snap);
        }
        if colocation.is_some() {
            sm.set_counter_shared();
        }
        if revisions.is_some() {
            sm.set_spread();
        }
        let mut node = RaftNode::with_conf_state(&cfg.raft, &conf, log, sm, transport)?;
        let single = node.is_single_voter();
        if single {
            // A single voter need not wait an election timeout to lead.
            node.campaign()?;
        }
        let (tx, rx) = flume::bounded(cfg.mailbox_capacity);
        let leader = Arc::new(AtomicU64::new(0));
        let term = Arc::new(AtomicU64::new(0));
        let applied = Arc::new(AtomicU64::new(0));
        let is_leader = Arc::new(AtomicBool::new(false));
        let published_rev = Arc::new(AtomicI64::new(own_rev));
        let pending = match &colocation {
            Some((s, colo)) => colo.mark(*s),
            None => Arc::new(AtomicI64::new(NOTHING_PENDING)),
        };
        let quiet = cfg.tick_interval * cfg.raft.election_tick as u32;
        let gather = gather::Gather::new(cfg.round_gather, cfg.round_gather_forwarded, cfg.round_gather_most, quiet);
        let handle = ShardHandle {
            tx,
            leader: Arc::clone(&leader),
            term: Arc::clone(&term),
            applied: Arc::clone(&applied),
            is_leader: Arc::clone(&is_leader),
            pending: Arc::clone(&pending),
            own_rev: Arc::clone(&published_rev),
            gauges: Arc::default(),
        };
        let gauges = Arc::clone(&handle.gauges);
        let spread = revisions.map(|group| Spread::new(group, handle.tx.downgrade()));
        let mailbox = handle.tx.downgrade();
        let mut shard = Self {
            gauges,
            node,
            hub,
            rx,
            cfg,
            ids,
            clock,
            writes: VecDeque::new(),
            reads: ReadQueue::new(ids.member_id),
            waiters: Vec::new(),
            conf_waiters: Vec::new(),
            term_start: 0,
            single,
            answers: VecDeque::new(),
            peer_out: Vec::new(),
            peer_answers,
            leader,
            term,
            applied,
            is_leader,
            pending,
            stopping: false,
            last_quota_check: None,
            colo: colocation,
            last_transfer: None,
            own_rev,
            published_rev,
            spread,
            group,
            placement,
            switch_entry: None,
            switch_floor: i64::MIN,
            mailbox,
            heard: Vec::new(),
            gather,
            deferred_checkpoint: None,
            conf_changed: true,
        };
        // Replay now: a single voter commits its whole log once it leads; a member of a larger
        // group applies what it knows committed and learns the rest from the leader.
        shard.run_ready()?;
        Ok((shard, handle))
    }

    fn hdr(&self) -> HeaderInfo {
        HeaderInfo { raft_term: self.node.term(), ..self.ids }
    }

    /// Runs the shard loop on the calling thread (see [`executor::spawn`]) until a `Shutdown`
    /// message arrives or every handle is dropped, reporting each round on `beat`.
    ///
    /// # Errors
    /// A storage or raft error; the shard's state can no longer be trusted and the member must
    /// stop (etcd panics in the same situations).
    pub fn run(mut self, beat: &Heartbeat) -> Result<()> {
        let result = self.run_loop(beat);
        beat.idle();
        for (_, reply) in self.writes.drain(..) {
            if let Some(reply) = reply {
                reply_write(reply, Err(EngineError::Stopped), &mut self.peer_out);
            }
        }
        self.reads.fail_all(|| EngineError::Stopped);
        for (_, _, reply, _) in self.answers.drain(..) {
            reply_write(reply, Err(EngineError::Stopped), &mut self.peer_out);
        }
        self.send_peer_answers();
        result
    }

    fn run_loop(&mut self, beat: &Heartbeat) -> Result<()> {
        let mut next_tick = self.clock.now() + self.cfg.tick_interval;
        while !self.stopping {
            let now = self.clock.now();
            let mut wait = next_tick.saturating_duration_since(now);
            if self.hub.has_lagging() {
                wait = wait.min(self.cfg.catch_up_interval);
            }
            // The next round may wait for the writers the last one answered (`gather`); the loop
            // wakes at the end of that wait to start it, or to tell the followers the commit
            // index when no write came.
            let hold = self.gather.holding(self.writes.len(), now).map(|until| until.saturating_duration_since(now));
            if !self.writes.is_empty() && (self.can_evaluate() || !self.node.is_leader()) {
                wait = hold.unwrap_or(Duration::ZERO);
            } else if let Some(hold) = hold {
                wait = wait.min(hold);
            } else if !self.writes.is_empty() && !self.leads_every_shard() {
                wait = wait.min(self.cfg.colocation_poll);
            } else if let Some(until) = self.spread_wait(now) {
                wait = wait.min(until);
            }
            let first = match self.rx.try_recv() {
                Ok(msg) => Some(msg),
                Err(TryRecvError::Disconnected) => break,
                Err(TryRecvError::Empty) => {
                    beat.idle();
                    match self.rx.recv_timeout(wait) {
                        Ok(msg) => Some(msg),
                        Err(RecvTimeoutError::Timeout) => None,
                        Err(RecvTimeoutError::Disconnected) => break,
                    }
                }
            };
            beat.busy();
            self.follow_placement();
            let mut taken = 0;
            if let Some(msg) = first {
                self.handle(msg)?;
                taken = 1;
                for _ in 1..self.cfg.max_msgs_per_round {
                    match self.rx.try_recv() {
                        Ok(msg) => self.handle(msg)?,
                        Err(_) => break,
                    }
                    taken += 1;
                }
            }
            self.gauges.round_messages.store(taken, Ordering::Relaxed);
            if !self.single {
                self.reads.request_index(&mut self.node, self.clock.now());
            }
            self.propose_ceiling()?;
            self.propose_switch()?;
            self.evaluate_round()?;
            // Refusals for other members' writes, made by the round's evaluation.
            self.send_peer_answers();
            let now = self.clock.now();
            if now >= next_tick {
                next_tick = now + self.cfg.tick_interval;
                self.on_tick(now)?;
            }
            self.run_ready()?;
            let now = self.clock.now();
            let holding = self.gather.holding(self.writes.len(), now).is_some();
            let round_next = self.gather.quiet_commit(self.writes.len(), now)
                || (!holding && !self.writes.is_empty() && self.can_evaluate());
            if !self.single && !round_next && self.node.commit_untold() {
                // No round is about to carry the commit index to the followers: they would learn
                // it only from the next heartbeat, and their reads and forwarded writes wait
                // for it.
                self.node.tell_commit();
                self.run_ready()?;
            }
            if self.deferred_checkpoint.is_some() && !self.round_in_flight() {
                if let Some((dir, cut, reply)) = self.deferred_checkpoint.take() {
                    self.checkpoint(&dir, cut.as_deref(), reply);
                }
            }
            let hdr = self.hdr();
            let current = self.watch_rev();
            self.hub.catch_up_to(self.node.state_machine().store(), current, &hdr)?;
        }
        Ok(())
    }

    fn on_tick(&mut self, now: Instant) -> Result<()> {
        self.node.tick();
        if self.spread.is_some() {
            self.spread_tick(now);
        } else {
            self.follow_anchor(now);
        }
        self.follow_shard0_conf();
        self.gauges.watchers.store(self.hub.watcher_count() as u64, Ordering::Relaxed);
        self.gauges.slow_watch_streams.store(self.hub.lagging_streams() as u64, Ordering::Relaxed);
        if self.ready_to_evaluate() {
            let expired = self.node.state_machine_mut().lessor_mut().take_expired(now, self.cfg.lease_revokes_per_tick);
            for id in expired {
                self.writes.push_back((Command::LeaseRevoke(LeaseRevokeRequest { id }), None));
            }
            self.check_quota(now);
        }
        if !self.single {
            // A read index lost with a leader change is asked again after an election timeout.
            let retry_after = self.cfg.tick_interval * self.cfg.raft.election_tick as u32;
            self.reads.retry_stale(now, retry_after);
            self.waiters.retain(|(_, reply)| !reply.is_closed());
        }
        let hdr = self.hdr();
        let rev = self.watch_rev();
        self.hub.tick_progress(now, rev, &hdr);
        Ok(())
    }

    /// Raises NOSPACE when the backend outgrows its quota (checked at most once a second).
    fn check_quota(&mut self, now: Instant) {
        if self.last_quota_check.is_some_and(|t| now.saturating_duration_since(t) < Duration::from_secs(1)) {
            return;
        }
        self.last_quota_check = Some(now);
        let sm = self.node.state_machine();
        let nospace = AlarmType::Nospace as i32;
        if !sm.alarms().contains(&nospace) && sm.store().backend().approximate_size() > self.cfg.quota_backend_bytes {
            tracing::warn!(quota = self.cfg.quota_backend_bytes, "backend quota exceeded; raising NOSPACE");
            let alarm =
                AlarmRequest { action: AlarmAction::Activate as i32, member_id: self.ids.member_id, alarm: nospace };
            self.writes.push_back((Command::Alarm(alarm), None));
        }
    }

    fn handle(&mut self, msg: ShardMsg) -> Result<()> {
        let hdr = self.hdr();
        match msg {
            ShardMsg::Range(req, reply) => {
                if self.single {
                    self.serve_read(PendingRead::Range(req, reply), &hdr);
                } else {
                    let serializable = req.serializable;
                    self.reads.add(PendingRead::Range(req, reply), serializable);
                }
            }
            ShardMsg::ReadTxn(req, reply) => {
                if self.single {
                    self.serve_read(PendingRead::Txn(req, reply), &hdr);
                } else {
                    self.reads.add(PendingRead::Txn(req, reply), false);
                }
            }
            ShardMsg::Write(cmd, reply) => {
                round_trace::mark(Mark::WriteReceived, self.writes.len());
                self.writes.push_back((cmd, Some(WriteReply::Local(reply))));
            }
            ShardMsg::ForwardedWrite(cmd, reply) => {
                self.gather.forwarded(self.clock.now());
                self.writes.push_back((cmd, Some(reply)));
            }
            ShardMsg::Raft(msgs) => {
                round_trace::mark(Mark::RaftReceived, msgs.len());
                let now = self.clock.now();
                for m in &msgs {
                    match self.heard.iter_mut().find(|(p, _)| *p == m.from) {
                        Some((_, at)) => *at = now,
                        None => self.heard.push((m.from, now)),
                    }
                }
                for m in msgs {
                    if let Err(e) = self.node.step(m) {
                        tracing::debug!(error = %e, "raft message not taken");
                    }
                }
            }
            ShardMsg::Unreachable(peer) => {
                self.node.report_unreachable(peer);
                if let Some(sp) = self.spread.as_mut() {
                    sp.note_unreachable(peer, self.clock.now());
                }
                if self.cfg.elect_on_leader_loss && !self.node.is_leader() && peer == self.node.leader_id() {
                    // The connection to the leader broke (a killed process closes its sockets at
                    // once): start the election now rather than after a whole election timeout.
                    // One to three ticks left, at random: followers that lose the leader together
                    // campaign at different times instead of splitting the vote.
                    let left = 1 + rand::random::<u64>() as usize % 3;
                    tracing::info!(leader = format_args!("{peer:x}"), left, "lost the connection to the leader");
                    self.node.shorten_election_timeout(left);
                }
            }
            ShardMsg::SnapshotStatus(peer, done) => self.node.report_snapshot(peer, done),
            ShardMsg::WaitApplied(index, reply) => {
                if ballast_raft::StateMachine::applied_index(self.node.state_machine()) >= index {
                    let _ = reply.send(Ok(()));
                } else {
                    self.waiters.push((index, reply));
                }
            }
            ShardMsg::ConfChange(cc, reply) => match self.propose_conf_change(cc) {
                Ok((index, term)) => {
                    self.conf_waiters.push((index, term, reply));
                }
                Err(ballast_raft::RaftError::ProposalDropped) => {
                    let _ = reply.send(Err(EngineError::ConfChangePending));
                }
                Err(ballast_raft::RaftError::NotLeader { .. }) => {
                    let _ = reply.send(Err(EngineError::NotLeader));
                }
                Err(e) => {
                    let _ = reply.send(Err(e.into()));
                }
            },
            ShardMsg::Progress(reply) => {
                let ids = self.node.voters().into_iter().chain(self.node.learners());
                let now = self.clock.now();
                let progress: Vec<(u64, u64, bool)> =
                    ids.filter_map(|id| self.peer_progress(id, now).map(|(m, active)| (id, m, active))).collect();
                let r = if self.node.is_leader() {
                    Ok(GroupProgress { members: progress, last_index: self.node.last_index() })
                } else {
                    Err(EngineError::NotLeader)
                };
                let _ = reply.send(r);
            }
            ShardMsg::TransferLeader(to, reply) => {
                let r = if self.node.is_leader() {
                    self.node.transfer_leader(to);
                    Ok(())
                } else {
                    Err(EngineError::NotLeader)
                };
                let _ = reply.send(r);
            }
            ShardMsg::LeaseKeepAlive(id, reply) => {
                let r = if self.node.is_leader() {
                    Ok(self.node.state_machine_mut().lessor_mut().keep_alive(id, self.clock.now()).unwrap_or(0))
                } else {
                    Err(EngineError::NotLeader)
                };
                let _ = reply.send(r);
            }
            ShardMsg::LeaseTimeToLive(req, reply) if !self.single && !self.node.is_leader() => {
                // Only the leader keeps lease deadlines; the network plane asks it instead.
                let _ = reply.send(Err(if self.node.leader_id() == 0 {
                    EngineError::NoLeader
                } else {
                    EngineError::NotLeader
                }));
                let _ = req;
            }
            ShardMsg::LeaseTimeToLive(req, reply) => {
                let now = self.clock.now();
                let rev = self.node.state_machine().store().current_rev();
                let resp = match self.node.state_machine_mut().lessor_mut().time_to_live(req.id, now) {
                    Some(t) => LeaseTimeToLiveResponse {
                        header: Some(hdr.at(rev)),
                        id: req.id,
                        ttl: t.remaining,
                        granted_ttl: t.granted,
                        keys: if req.keys { t.keys } else { vec![] },
                    },
                    None => {
                        LeaseTimeToLiveResponse { header: Some(hdr.at(rev)), id: req.id, ttl: -1, ..Default::default() }
                    }
                };
                let _ = reply.send(Ok(resp));
            }
            ShardMsg::LeaseLeases(reply) => {
                let rev = self.node.state_machine().store().current_rev();
                let leases =
                    self.node.state_machine_mut().lessor_mut().ids().into_iter().map(|id| LeaseStatus { id }).collect();
                let _ = reply.send(Ok(LeaseLeasesResponse { header: Some(hdr.at(rev)), leases }));
            }
            ShardMsg::WatchOpen(stream, tx) => self.hub.open_stream(stream, tx),
            ShardMsg::WatchCreate(stream, req) => {
                self.hub.create(stream, &req, self.node.state_machine().store(), &hdr)
            }
            ShardMsg::WatchRefuse(stream, reason) => {
                self.hub.refuse(stream, reason, self.node.state_machine().store().current_rev(), &hdr)
            }
            ShardMsg::WatchCancel(stream, id) => {
                self.hub.cancel(stream, id, self.node.state_machine().store().current_rev(), &hdr)
            }
            ShardMsg::WatchProgress(stream) => {
                self.hub.request_progress(stream, self.node.state_machine().store().current_rev(), &hdr)
            }
            ShardMsg::WatchClose(stream) => self.hub.close_stream(stream),
            ShardMsg::Status(reply) => {
                let sm = self.node.state_machine();
                let status = ShardStatus {
                    db_size: sm.store().backend().approximate_size() as i64,
                    leader: self.node.leader_id(),
                    raft_index: self.node.last_index(),
                    raft_term: self.node.term(),
                    raft_applied_index: ballast_raft::StateMachine::applied_index(sm),
                    revision: sm.store().current_rev(),
                    alarms: sm.alarms().iter().copied().collect(),
                };
                let _ = reply.send(Ok(status));
            }
            ShardMsg::Hash(reply) => {
                let _ = reply.send(self.hash_all());
            }
            ShardMsg::HashKv(rev, reply) => {
                let r = self.hash_kv(rev).map(|(hash, at)| HashKvResponse {
                    header: Some(hdr.at(self.node.state_machine().store().current_rev())),
                    hash,
                    compact_revision: self.node.state_machine().store().compact_rev(),
                    hash_revision: at,
                });
                let _ = reply.send(r);
            }
            ShardMsg::Defragment(reply) => {
                let r = self.node.state_machine().store().backend().compact_all().map_err(EngineError::from);
                let _ = reply.send(r);
            }
            ShardMsg::Checkpoint(dir, cut, reply) => {
                if self.round_in_flight() {
                    // The round's writes are in the state but not on disk yet: copy once they
                    // are, evaluating nothing new meanwhile.
                    self.deferred_checkpoint = Some((dir, cut, reply));
                } else {
                    self.checkpoint(&dir, cut.as_deref(), reply);
                }
            }
            ShardMsg::Granted(round, granted) => self.on_granted(round, granted),
            ShardMsg::Wake => {}
            ShardMsg::Shutdown => self.stopping = true,
        }
        Ok(())
    }

    /// Proposes a conf change and counts its entry as evaluated here: no round is evaluated
    /// until it is applied. Applying a conf change writes the round's state with the applied
    /// index, so a round evaluated behind an uncommitted one would reach the data directory
    /// before its own entry commits (a restart would keep a write that may never commit, or
    /// apply its entry a second time). Answers the entry's index and term.
    fn propose_conf_change(
        &mut self,
        cc: ballast_raft::ConfChange,
    ) -> std::result::Result<(u64, u64), ballast_raft::RaftError> {
        self.node.propose_conf_change(cc)?;
        let (index, term) = (self.node.last_index(), self.node.term());
        self.node.state_machine_mut().proposed(index, term);
        Ok((index, term))
    }

    /// True while this member evaluated writes that are not applied (a leader with followers
    /// has its round's entry uncommitted).
    fn round_in_flight(&self) -> bool {
        let sm = self.node.state_machine();
        sm.evaluated_index() > ballast_raft::StateMachine::applied_index(sm)
    }

    /// Copies the shard's state into `dir` and answers the revision it holds every write up to:
    /// the member's counter, read when every shard of `cut` stands still (nothing in flight in
    /// any of them), or now when there is no cut.
    fn checkpoint(&self, dir: &std::path::Path, cut: Option<&cut::Cut>, reply: Reply<i64>) {
        let store = self.node.state_machine().store();
        let revision = match cut {
            None => store.current_rev(),
            Some(cut) => match cut.arrive(|| store.current_rev()) {
                Some(revision) => revision,
                None => {
                    let _ = reply.send(Err(EngineError::SnapshotCut));
                    return;
                }
            },
        };
        let r = store.backend().checkpoint(dir).map(|()| revision).map_err(EngineError::from);
        let _ = reply.send(r);
    }

    /// A peer's matched index and whether it is active: raft heard from it since the last
    /// check-quorum, or this shard received a message from it within an election timeout.
    fn peer_progress(&self, id: u64, now: Instant) -> Option<(u64, bool)> {
        let timeout = self.cfg.tick_interval * self.cfg.raft.election_tick as u32;
        let heard = self.heard.iter().any(|(p, at)| *p == id && now.saturating_duration_since(*at) < timeout);
        self.node.progress_of(id).map(|(matched, active)| (matched, active || heard))
    }

    /// Serves one read from the current state.
    fn serve_read(&mut self, read: PendingRead, hdr: &HeaderInfo) {
        match read {
            PendingRead::Range(req, reply) => {
                let r = kv::range(self.node.state_machine().store(), &req).map(|mut r| {
                    r.header = hdr.complete(r.header);
                    r
                });
                let _ = reply.send(r);
            }
            PendingRead::Txn(req, reply) => {
                let (store, leases) = self.node.state_machine_mut().store_and_leases();
                let r = kv::apply_txn(store, leases, &req).map(|mut r| {
                    r.header = hdr.complete(r.header);
                    r
                });
                let _ = reply.send(r);
            }
        }
    }

    /// Serves the reads whose read index is applied, when the state holds nothing uncommitted.
    fn serve_reads(&mut self) {
        let sm = self.node.state_machine();
        let applied = ballast_raft::StateMachine::applied_index(sm);
        if sm.evaluated_index() > applied {
            return;
        }
        let hdr = self.hdr();
        for read in self.reads.take_ready(applied) {
            self.serve_read(read, &hdr);
        }
    }

    /// True when this member may evaluate writes now: it leads, every entry of earlier terms is
    /// applied, and nothing it evaluated is still uncommitted (so a round commits whole, and
    /// reads get a moment with only committed state each round).
    fn can_evaluate(&self) -> bool {
        self.ready_to_evaluate() && self.spread.as_ref().is_none_or(Spread::holds_grant)
    }

    /// [`Shard::can_evaluate`] but for the revision group's grant, which a shard whose leaders
    /// are spread asks for once this holds.
    fn ready_to_evaluate(&self) -> bool {
        self.leads_with_nothing_in_flight() && self.leads_every_shard()
    }

    /// True while this member leads the shard, every entry of earlier terms is applied, nothing
    /// it evaluated is uncommitted, and it is not handing the leadership over.
    fn leads_with_nothing_in_flight(&self) -> bool {
        let sm = self.node.state_machine();
        let applied = ballast_raft::StateMachine::applied_index(sm);
        // Not while the leadership is being handed over: raft would drop the round's entry, and
        // its writes are better answered by the next leader than refused.
        self.node.is_leader()
            && !self.node.transferring()
            && applied >= self.term_start
            && sm.evaluated_index() <= applied
    }

    /// True unless this is one of several shards, led together, and this member does not lead
    /// them all (see [`colocate`]) or may not take from its counter (a switch to spread leaders
    /// is under way or done, [`switch`]); always true where this shard's leaders are spread.
    fn leads_every_shard(&self) -> bool {
        self.spread.is_some()
            || (self.colo.as_ref().is_none_or(|(_, c)| c.all_ready())
                && self.placement.as_ref().is_none_or(|p| p.counter_open()))
    }

    /// Records this shard's configuration for the member and, on the leader of a shard other
    /// than 0 that also leads shard 0, proposes the next change toward shard 0's (see
    /// [`colocate`]).
    fn follow_shard0_conf(&mut self) {
        let Some((s, colo)) = &self.colo else { return };
        let (s, have) = (*s, colo.conf(*s));
        let me = self.cfg.raft.id;
        // With spread leaders the shard's own leader follows; led together, the member that
        // leads shard 0 does.
        if s == 0 || !self.node.is_leader() || (self.spread.is_none() && colo.anchor() != me) {
            return;
        }
        let want = colo.conf(0);
        if want.0.is_empty() {
            return;
        }
        let Some((change_type, node_id)) = colocate::next_conf_change(&have, &want, me) else { return };
        let cc = ballast_raft::ConfChange { change_type: change_type as i32, node_id, ..Default::default() };
        match self.propose_conf_change(cc) {
            Ok(_) => tracing::info!(
                shard = s,
                ?change_type,
                node = format_args!("{node_id:x}"),
                "following shard 0's members"
            ),
            // One change at a time: a pending one is finished first.
            Err(e) => tracing::debug!(error = %e, "conf change not proposed yet"),
        }
    }

    /// Hands this shard's leadership to shard 0's leader when that is another member (at most
    /// once an election timeout: a transfer raft gave up on is tried again after it).
    fn follow_anchor(&mut self, now: Instant) {
        let Some((s, colo)) = &self.colo else { return };
        if *s == 0 || self.single || !self.node.is_leader() {
            return;
        }
        let anchor = colo.anchor();
        if anchor == 0 || anchor == self.cfg.raft.id || !self.node.voters().contains(&anchor) {
            return;
        }
        let timeout = self.cfg.tick_interval * self.cfg.raft.election_tick as u32;
        if self.last_transfer.is_some_and(|t| now.saturating_duration_since(t) < timeout) {
            return;
        }
        self.last_transfer = Some(now);
        tracing::info!(shard = s, to = format_args!("{anchor:x}"), "handing leadership to shard 0's leader");
        self.node.transfer_leader(anchor);
    }

    /// Evaluates the waiting writes and proposes them as one entry; their answers wait in
    /// `answers` until the entry (or, for a round that changed nothing, the last entry proposed
    /// before it) is applied. A member that does not lead refuses them, so the network plane
    /// sends them to the leader.
    ///
    /// # Errors
    /// A storage or raft error after the state changed: the shard must stop.
    fn evaluate_round(&mut self) -> Result<()> {
        if self.writes.is_empty() {
            return Ok(());
        }
        if !self.node.is_leader() {
            let no_leader = self.node.leader_id() == 0;
            for (_, reply) in self.writes.drain(..) {
                if let Some(reply) = reply {
                    let e = if no_leader { EngineError::NoLeader } else { EngineError::NotLeader };
                    reply_write(reply, Err(e), &mut self.peer_out);
                }
            }
            return Ok(());
        }
        if !self.ready_to_evaluate() || self.gather.holding(self.writes.len(), self.clock.now()).is_some() {
            return Ok(());
        }
        self.gather.clear();
        round_trace::mark(Mark::RoundStart, self.writes.len());
        let granted = match self.spread.is_some() {
            true => match self.take_grant() {
                Some(g) => Some(g),
                None => return Ok(()),
            },
            false => None,
        };
        let limit = granted.as_ref().map_or(usize::MAX, |g| g.grant.count.max(0) as usize);
        if let Some(g) = &granted {
            self.node.state_machine_mut().store_and_leases().0.set_grant(g.grant.start, g.grant.count);
            // The round's first revision, for `published_through` (see below).
            self.pending.store(g.grant.start, Ordering::SeqCst);
        }
        let nospace = self.node.state_machine().alarms().contains(&(AlarmType::Nospace as i32));
        let mut batch: Vec<RaftCommand> = Vec::new();
        let mut bytes = 0;
        let mut answers = Vec::new();
        let mut taken = 0;
        while bytes < self.cfg.max_round_entry_bytes && taken < limit {
            let Some((cmd, reply)) = self.writes.pop_front() else { break };
            taken += 1;
            if nospace && matches!(cmd, Command::Put(_) | Command::Txn(_) | Command::LeaseGrant(_)) {
                if let Some(reply) = reply {
                    reply_write(reply, Err(EngineError::NoSpace), &mut self.peer_out);
                }
                continue;
            }
            if self.pending.load(Ordering::SeqCst) == NOTHING_PENDING {
                // Before any revision is taken: a reader that sees the counter past a revision
                // of this round sees the mark too.
                let next = self.node.state_machine().store().revisions().last() + 1;
                self.pending.store(next, Ordering::SeqCst);
            }
            let evaluated = self.node.state_machine_mut().evaluate(cmd)?;
            if let Some(entry) = evaluated.entry {
                bytes += entry.encoded_len();
                batch.push(entry);
            }
            if let Some(reply) = reply {
                answers.push((reply, evaluated.result));
            }
        }
        let used = match granted {
            Some(_) => self.node.state_machine_mut().store_and_leases().0.end_grant(),
            None => 0,
        };
        if !batch.is_empty() {
            let data = match batch.len() {
                1 => batch.swap_remove(0).encode_to_vec(),
                _ => RaftCommand { batch, ..Default::default() }.encode_to_vec(),
            };
            if let Err(e) = self.node.propose(data) {
                // Raft refused the entry (a leadership transfer is under way): the state holds
                // writes with no log record, so it goes back to what is applied.
                tracing::info!(error = %e, "round not proposed; its writes are refused");
                self.node.state_machine_mut().discard_unapplied()?;
                self.pending.store(NOTHING_PENDING, Ordering::SeqCst);
                if let Some(g) = &granted {
                    // The revisions taken are returned as used though they never commit: the
                    // member's counter has seen them, and this member's shards refuse a grant
                    // at or below what it has seen, so handing them out again would stall them.
                    self.return_grant(g, used, 0);
                }
                for (reply, _) in answers {
                    reply_write(reply, Err(EngineError::LeaderChanged), &mut self.peer_out);
                }
                return Ok(());
            }
            let (index, term) = (self.node.last_index(), self.node.term());
            self.node.state_machine_mut().proposed(index, term);
            if let Some(g) = &granted {
                self.return_grant(g, used, index);
            }
        } else if let Some(g) = &granted {
            self.return_grant(g, 0, 0);
        }
        // Every answer of the round waits for the round's entry: an answer that changed nothing
        // may still depend on a write evaluated before it in the round.
        let index = self.node.state_machine().evaluated_index();
        let term = self.node.log_term(index).unwrap_or(0);
        for (reply, result) in answers {
            self.answers.push_back((index, term, reply, result));
        }
        Ok(())
    }

    fn run_ready(&mut self) -> Result<()> {
        while self.node.has_ready() {
            let before = self.own_rev;
            round_trace::mark(Mark::ReadyStart, 0);
            let Some(outcome) = self.node.handle_ready()? else { break };
            round_trace::mark(Mark::ReadyEnd, usize::from(outcome.applied.is_some()));
            if outcome.lost_leadership {
                self.stepped_down();
            }
            if outcome.became_leader {
                let now = self.clock.now();
                self.node.state_machine_mut().lessor_mut().promote(now);
                self.term_start = self.node.last_index();
                tracing::info!(term = self.node.term(), "became leader");
            }
            self.reads.confirmed(outcome.read_states);
            let applied = outcome.applied.transpose()?;
            if outcome.snapshot_applied {
                // Watchers catch up from history over the revisions the snapshot brought.
                let first_event = applied.as_ref().and_then(|a| a.events.first()).and_then(|e| e.kv.as_ref());
                let installed = self.node.state_machine().store().opened_at();
                let now = first_event.map_or(installed, |kv| kv.mod_revision - 1);
                self.own_rev = installed;
                self.hub.state_replaced(before, now);
            }
            if outcome.snapshot_applied || applied.as_ref().is_some_and(|a| a.conf_changed) {
                self.conf_changed = true;
            }
            if let Some(applied) = applied {
                self.finish_round(&applied);
            }
        }
        let applied = ballast_raft::StateMachine::applied_index(self.node.state_machine());
        // Published before the answers, so a forwarded write's applied index covers it.
        self.published_rev.store(self.own_rev, Ordering::SeqCst);
        self.applied.store(applied, Ordering::SeqCst);
        if let Some((s, colo)) = self.colo.as_ref().filter(|_| self.conf_changed) {
            // Before a membership change is answered: the change's waiter then sees it here.
            colo.set_conf(*s, (self.node.voters(), self.node.learners()));
            self.conf_changed = false;
        }
        self.answer_applied();
        if !self.conf_waiters.is_empty() {
            let (done, waiting): (Vec<_>, Vec<_>) = self.conf_waiters.drain(..).partition(|(i, _, _)| *i <= applied);
            self.conf_waiters = waiting;
            for (index, term, reply) in done {
                let same = self.node.log_term(index).is_none_or(|t| t == term);
                let _ = reply.send(if same { Ok(()) } else { Err(EngineError::LeaderChanged) });
            }
        }
        if self.node.state_machine().removed() {
            self.stopping = true;
        }
        if !self.waiters.is_empty() {
            let (done, waiting): (Vec<_>, Vec<_>) = self.waiters.drain(..).partition(|(i, _)| *i <= applied);
            self.waiters = waiting;
            for (_, reply) in done {
                let _ = reply.send(Ok(()));
            }
        }
        let sm = self.node.state_machine();
        if sm.evaluated_index() <= ballast_raft::StateMachine::applied_index(sm) {
            // Every evaluated write is applied and its events published.
            self.pending.store(NOTHING_PENDING, Ordering::SeqCst);
        }
        let leader = self.node.leader_id();
        if self.leader.swap(leader, Ordering::Relaxed) != leader && leader != 0 {
            self.gauges.leader_changes.fetch_add(1, Ordering::Relaxed);
        }
        self.gauges.committed.store(self.node.commit_index(), Ordering::Relaxed);
        self.term.store(self.node.term(), Ordering::Relaxed);
        self.is_leader.store(self.node.is_leader(), Ordering::Relaxed);
        self.single = self.node.is_single_voter();
        // Before this shard is noted ready: a member that applied the switch never lets its
        // other shards take from the counter.
        self.switch_after_ready(applied);
        if let Some((s, colo)) = &self.colo {
            let ready = self.node.is_leader() && applied >= self.term_start;
            colo.note(*s, self.node.leader_id(), ready);
        }
        if self.spread.is_some() {
            self.spread_after_ready(applied);
        }
        self.compact_log()?;
        self.serve_reads();
        Ok(())
    }

    /// This member stopped leading: the state machine has already dropped what it evaluated but
    /// did not apply (`ShardStateMachine::step_down`). The writes waiting for it keep waiting:
    /// the next leader may commit their entry (they are answered then) or replace it (they get
    /// etcd's "leader changed"); the client's deadline ends the wait otherwise.
    fn stepped_down(&mut self) {
        tracing::info!(term = self.node.term(), leader = self.node.leader_id(), "lost leadership");
        self.pending.store(NOTHING_PENDING, Ordering::SeqCst);
        self.gather.clear();
        self.switch_stepped_down();
    }

    fn finish_round(&mut self, out: &ApplyOutput) {
        let hdr = self.hdr();
        if let Some(kv) = out.events.last().and_then(|e| e.kv.as_ref()) {
            self.own_rev = self.own_rev.max(kv.mod_revision);
        }
        let rev = self.watch_rev();
        self.hub.publish(&out.events, rev, &hdr);
    }

    /// The revision up to which this shard holds every event it will ever have, which its
    /// watchers may be told they have seen everything up to. A member alone: the counter (its
    /// shards evaluate and apply in one round, so no revision below it is still to come here).
    /// A leader with a round in flight: just below the round's first revision. A follower of a
    /// shard among several: its own last revision (another shard may have applied later ones
    /// while this one has not yet applied its own below them). Never below what it published.
    fn watch_rev(&self) -> i64 {
        if self.spread.is_some() {
            // Leader or not, this shard's next revision comes from a grant above every revision
            // granted so far, and its own are applied in order: nothing at or below its last
            // applied one is still to come. The member's counter says nothing of this shard.
            // Nor below what it said before it switched: every later revision is above it.
            return self.own_rev.max(self.switch_floor);
        }
        let last = self.node.state_machine().store().current_rev();
        let counted = match &self.colo {
            // Below every shard's round in flight (see `Colocation::published_through`).
            Some((_, colo)) => colo.published_through(last),
            None => match self.pending.load(Ordering::SeqCst) {
                NOTHING_PENDING => last,
                mark => last.min(mark - 1),
            },
        };
        if self.colo.is_some() && !self.single && !self.node.is_leader() {
            return self.own_rev;
        }
        counted.max(self.own_rev)
    }

    /// Sends the answers whose writes are durable.
    fn answer_applied(&mut self) {
        let applied = ballast_raft::StateMachine::applied_index(self.node.state_machine());
        let hdr = self.hdr();
        // A round's answers share one entry: its term is looked up once, not per answer.
        let mut looked_up: Option<(u64, Option<u64>)> = None;
        let mut answered = gather::Answered::default();
        while self.answers.front().is_some_and(|(index, _, _, _)| *index <= applied) {
            let Some((index, term, reply, result)) = self.answers.pop_front() else { break };
            answered.writes += 1;
            answered.forwarded |= matches!(reply, WriteReply::Peer { .. });
            let logged = match looked_up {
                Some((i, t)) if i == index => t,
                _ => {
                    let t = self.node.log_term(index);
                    looked_up = Some((index, t));
                    t
                }
            };
            if logged.is_some_and(|t| t != term) {
                // Another leader's entry took the index: the write was not applied.
                reply_write(reply, Err(EngineError::LeaderChanged), &mut self.peer_out);
                continue;
            }
            reply_write(reply, result.map(|r| complete(r, &hdr)), &mut self.peer_out);
        }
        self.send_peer_answers();
        if answered.writes > 0 {
            round_trace::mark(Mark::Answered, answered.writes);
        }
        if answered.writes > 0 && !self.single && self.node.is_leader() {
            self.gather.answered(answered, self.writes.len(), self.clock.now());
        }
    }

    /// Sends the answers for other members made since the last call, one message per member.
    fn send_peer_answers(&mut self) {
        if self.peer_out.is_empty() {
            return;
        }
        let Some(sink) = self.peer_answers.as_ref() else {
            self.peer_out.clear();
            return;
        };
        let applied = ballast_raft::StateMachine::applied_index(self.node.state_machine());
        let mut out = std::mem::take(&mut self.peer_out);
        // Usually one member's; several members' answers go out in one pass per member.
        while let Some(&(to, _, _)) = out.first() {
            let (mine, rest): (Vec<_>, Vec<_>) = out.into_iter().partition(|(t, _, _)| *t == to);
            sink.send(to, mine.into_iter().map(|(_, id, r)| (id, r)).collect(), applied);
            out = rest;
        }
    }

    fn compact_log(&mut self) -> Result<()> {
        let applied = ballast_raft::StateMachine::applied_index(self.node.state_machine());
        let first = raft::Storage::first_index(self.node.store()).unwrap_or(1);
        let retain = self.cfg.raft_log_retain;
        if applied > first + 2 * retain {
            let mut to = applied - retain;
            // A leader keeps what a lagging follower still needs, up to a bound (raft
            // snapshots are not built yet).
            if let Some(lowest) = self.node.lowest_follower_match() {
                to = to.min(lowest.max(applied.saturating_sub(self.cfg.raft_log_hold_max)));
            }
            if to > first {
                ballast_raft::LogStore::compact(self.node.store(), to)?;
            }
        }
        Ok(())
    }

    fn hash_all(&self) -> Result<u32> {
        let backend = self.node.state_machine().store().backend();
        let mut h = crc32fast::Hasher::new();
        for cf in [Cf::Kv, Cf::Lease] {
            backend.scan(cf, &[], None, ScanOrder::Forward, &mut |k, v| {
                h.update(k);
                h.update(v);
                true
            })?;
        }
        Ok(h.finalize())
    }

    fn hash_kv(&self, rev: i64) -> Result<(u32, i64)> {
        let store = self.node.state_machine().store();
        let at = store.check_read_rev(rev)?;
        let mut h = crc32fast::Hasher::new();
        let end = crate::mvcc::revision::main_bound(at + 1);
        store.backend().scan(Cf::Kv, &[], Some(&end), ScanOrder::Forward, &mut |k, v| {
            h.update(k);
            h.update(v);
            true
        })?;
        Ok((h.finalize(), at))
    }
}

/// Hands a write's answer to its task, or to `peer_out` when another member waits for it.
fn reply_write(
    reply: WriteReply,
    result: Result<WriteResponse>,
    peer_out: &mut Vec<(u64, u64, Result<WriteResponse>)>,
) {
    match reply {
        WriteReply::Local(tx) => {
            let _ = tx.send(result);
        }
        WriteReply::Peer { to, id } => peer_out.push((to, id, result)),
    }
}

fn complete(r: WriteResponse, hdr: &HeaderInfo) -> WriteResponse {
    match r {
        WriteResponse::Put(mut r) => {
            r.header = hdr.complete(r.header);
            WriteResponse::Put(r)
        }
        WriteResponse::DeleteRange(mut r) => {
            r.header = hdr.complete(r.header);
            WriteResponse::DeleteRange(r)
        }
        WriteResponse::Txn(mut r) => {
            r.header = hdr.complete(r.header);
            WriteResponse::Txn(r)
        }
        WriteResponse::Compaction(mut r) => {
            r.header = hdr.complete(r.header);
            WriteResponse::Compaction(r)
        }
        WriteResponse::LeaseGrant(mut r) => {
            r.header = hdr.complete(r.header);
            WriteResponse::LeaseGrant(r)
        }
        WriteResponse::LeaseRevoke(mut r) => {
            r.header = hdr.complete(r.header);
            WriteResponse::LeaseRevoke(r)
        }
        WriteResponse::Alarm(mut r) => {
            r.header = hdr.complete(r.header);
            WriteResponse::Alarm(r)
        }
        WriteResponse::Auth(r) => WriteResponse::Auth(r),
    }
}
