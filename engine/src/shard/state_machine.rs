//! [`ShardStateMachine`]: what a write does to a shard, evaluated on the leader and replayed from
//! the raft log.
//!
//! The leader **evaluates** each write against its state as it proposes it
//! ([`ShardStateMachine::evaluate`]): the write changes the in-memory state and this round's
//! pending batch at once, takes a revision from the member's counter only if it changes a key, and
//! its raft entry records that revision. Nothing evaluated is visible before the round's log
//! sync: the shard loop answers a round's reads before it evaluates the round's writes, writes no
//! state before the log sync, and answers writes only after it. When the entries commit, the ones
//! this member evaluated are only counted; entries it did not evaluate (replay after a restart)
//! are applied here, taking the revisions their entries recorded, so an acknowledged write keeps
//! its revision across `kill -9` whatever other shards allocated meanwhile. A write that changes
//! nothing (a failed compare, a delete of no keys, an error) needs no entry.
//!
//! A round's state goes to RocksDB in one write with the applied index, so after a crash the state
//! and the applied index agree and replay resumes exactly after the last applied entry.
//!
//! With followers, the leader evaluates a round's writes only when nothing it evaluated earlier
//! is still uncommitted, and proposes them as **one** entry (`RaftCommand::batch`), so a round
//! commits whole or not at all and the pending batch never mixes committed and uncommitted
//! writes. Followers apply the entry's requests at its recorded revisions; since the leader
//! evaluated them against exactly the state the entry's log position has, every member reaches
//! the same state. A leader that steps down with a round uncommitted throws its in-memory state
//! away and reopens it from RocksDB ([`ShardStateMachine::step_down`]): the entry may be
//! replaced by the next leader's.

// #[PerformanceCriticalPath]
use std::collections::BTreeSet;
use std::sync::Arc;

use ballast_proto::ballastpb::{raft_command::Command, RaftCommand, SnapshotDescriptor, SnapshotInstall};
use ballast_proto::etcdserverpb::{
    alarm_request::AlarmAction, AlarmMember, AlarmRequest, AlarmResponse, CompactionResponse, LeaseGrantResponse,
    LeaseRevokeResponse, ResponseHeader,
};
use ballast_proto::mvccpb::Event;
use ballast_raft::{Entry, EntryType, RaftError, StateMachine};
use prost::Message;

use super::msg::WriteResponse;
use crate::apply::kv;
use crate::clock::Clock;
use crate::cluster::placement::META_LEADER_PLACEMENT;
use crate::cluster::{ClusterView, MemberChange};
use crate::error::{EngineError, Result};
use crate::lease::Lessor;
use crate::mvcc::{IndexRebuild, KeyRange, MvccStore, Rebuilt, RevisionCounter};
use crate::raft_log::NextAppend;
use crate::raft_snapshot::{Fetched, SnapshotConfig};
use crate::storage::{Cf, KvBackend, StorageError, WriteOpts};

pub use crate::raft_log::META_APPLIED_INDEX;
const META_ALARM_PREFIX: &[u8] = b"alarm/";
/// Shard 0's highest committed revision ceiling (see `cluster::revision_group`).
const META_REVISION_CEILING: &[u8] = b"revision_ceiling";

/// What one applied round produced.
#[derive(Debug, Default)]
pub struct ApplyOutput {
    /// The round's events, in revision order.
    pub events: Vec<Event>,
    /// The round applied a membership (conf) change.
    pub conf_changed: bool,
}

/// A write evaluated on the leader.
#[derive(Debug)]
pub struct Evaluated {
    /// The answer, to be sent once every entry proposed so far is applied.
    pub result: Result<WriteResponse>,
    /// The raft entry to propose; None when the write changed nothing.
    pub entry: Option<RaftCommand>,
}

/// The replicated state of one shard: MVCC store, leases, alarms, applied index.
#[derive(Debug)]
pub struct ShardStateMachine<B: KvBackend> {
    store: MvccStore<B>,
    lessor: Lessor,
    alarms: BTreeSet<i32>,
    applied_index: u64,
    /// The last raft index this member evaluated before proposing; entries up to it are already
    /// in the state when they commit.
    evaluated_index: u64,
    /// The term of the entry at `evaluated_index` when this member proposed it: an entry of
    /// another term at that index replaced it.
    evaluated_term: u64,
    member_id: u64,
    clock: Arc<dyn Clock>,
    min_lease_ttl: i64,
    value_cache_bytes: usize,
    /// Shard 0 of a cluster: where membership changes are applied.
    cluster: Option<ClusterView>,
    /// How a snapshot from the leader is fetched; None: the shard never receives one.
    snapshots: Option<SnapshotConfig>,
    /// This member was removed from the cluster by an applied change; the shard stops.
    removed: bool,
    /// The member's revision counter is shared with shards led in the same rounds (see
    /// `shard::colocate`): a discard leaves it where it is instead of setting it back.
    counter_shared: bool,
    /// The auth store as applied (and, on the leader, evaluated) so far; kept by every shard,
    /// changed on shard 0 only.
    auth: crate::auth::AuthState,
    /// Shard 0: where applied rounds publish the auth store and token changes go.
    auth_shared: Option<Arc<crate::auth::AuthShared>>,
    /// The auth store changed since it was last published.
    auth_dirty: bool,
    /// Shard 0: the highest revision ceiling applied (0: none).
    ceiling: i64,
    /// The shards' leaders may live on different members (see `cluster::revision_group`).
    spread: bool,
    /// Shard 0: the leader placement its applied entries (or its data directory) record,
    /// `cluster::PLACEMENT_*` (0: none recorded).
    placement: u32,
    /// Where a round applied just before the log's append leaves its write (None: the round
    /// writes its own, as alone or in tests).
    next_append: Option<NextAppend>,
    /// The round being applied goes out with the next append.
    joins_append: bool,
}

impl<B: KvBackend + Clone> ShardStateMachine<B> {
    /// Opens the state on `backend`.
    ///
    /// # Errors
    /// A storage error, or `Corrupt` for undecodable records.
    pub fn open(
        backend: B,
        min_lease_ttl: i64,
        value_cache_bytes: usize,
        revs: Arc<RevisionCounter>,
        member_id: u64,
        clock: Arc<dyn Clock>,
    ) -> Result<Self> {
        Self::open_rebuilt(backend, min_lease_ttl, value_cache_bytes, revs, member_id, clock, None)
    }

    /// As [`ShardStateMachine::open`], with the store's state built beforehand from exactly the
    /// history `backend` holds when `rebuilt` is given (a snapshot's, as it arrived).
    fn open_rebuilt(
        backend: B,
        min_lease_ttl: i64,
        value_cache_bytes: usize,
        revs: Arc<RevisionCounter>,
        member_id: u64,
        clock: Arc<dyn Clock>,
        rebuilt: Option<Rebuilt>,
    ) -> Result<Self> {
        let applied_index = match backend.get(Cf::Meta, META_APPLIED_INDEX)? {
            Some(v) => u64::from_be_bytes(
                v.as_slice().try_into().map_err(|_| StorageError::Corrupt { cf: "meta", what: "applied index" })?,
            ),
            None => 0,
        };
        let mut alarms = BTreeSet::new();
        backend.scan(
            Cf::Meta,
            META_ALARM_PREFIX,
            Some(b"alarm0"),
            crate::storage::ScanOrder::Forward,
            &mut |k, _| {
                if let Some(t) = k.get(META_ALARM_PREFIX.len()..).and_then(|s| <[u8; 4]>::try_from(s).ok()) {
                    alarms.insert(i32::from_be_bytes(t));
                }
                true
            },
        )?;
        let auth = crate::auth::AuthState::load(&backend)?;
        let ceiling = match backend.get(Cf::Meta, META_REVISION_CEILING)? {
            Some(v) => i64::from_be_bytes(
                v.as_slice().try_into().map_err(|_| StorageError::Corrupt { cf: "meta", what: "revision ceiling" })?,
            ),
            None => 0,
        };
        let placement = match backend.get(Cf::Meta, META_LEADER_PLACEMENT)? {
            Some(v) => u32::from_be_bytes(
                v.as_slice().try_into().map_err(|_| StorageError::Corrupt { cf: "meta", what: "leader placement" })?,
            ),
            None => 0,
        };
        let (store, live) = match rebuilt {
            Some(r) => MvccStore::open_rebuilt(backend, r, revs)?,
            None => MvccStore::open_with(backend, value_cache_bytes, revs)?,
        };
        let lessor = Lessor::restore(store.backend(), live, min_lease_ttl, clock.now())?;
        Ok(Self {
            store,
            lessor,
            alarms,
            applied_index,
            evaluated_index: applied_index,
            evaluated_term: 0,
            member_id,
            clock,
            min_lease_ttl,
            value_cache_bytes,
            cluster: None,
            snapshots: None,
            removed: false,
            counter_shared: false,
            auth,
            auth_shared: None,
            auth_dirty: false,
            ceiling,
            spread: false,
            placement,
            next_append: None,
            joins_append: false,
        })
    }

    /// Lets rounds applied just before the log's next append hand it their write (see
    /// [`NextAppend`]); `next_append` is the log store's.
    pub fn set_next_append(&mut self, next_append: NextAppend) {
        self.next_append = Some(next_append);
    }

    /// Makes this state machine keep the cluster's auth store (shard 0): auth changes apply
    /// here, and each round that changed it publishes it to `shared`.
    pub fn set_auth(&mut self, shared: Arc<crate::auth::AuthShared>) {
        shared.publish(&self.auth);
        self.auth_shared = Some(shared);
    }

    /// Lets this state machine fetch and install snapshots its leader sends.
    pub fn set_snapshots(&mut self, cfg: SnapshotConfig) {
        self.snapshots = Some(cfg);
    }

    /// Replaces the state with the leader's a raft snapshot names (see `raft_snapshot`): its
    /// table files fetched into the snapshot directory (the store's state built as they
    /// arrive), marked, installed, reopened with that state.
    fn install_snapshot(&mut self, snapshot: &ballast_raft::Snapshot) -> Result<()> {
        let Some(cfg) = self.snapshots.clone() else { return Err(EngineError::NotCapable) };
        let desc = SnapshotDescriptor::decode(snapshot.data.as_slice())
            .map_err(|_| StorageError::Corrupt { cf: "raft", what: "snapshot descriptor" })?;
        let meta = snapshot.get_metadata();
        tracing::info!(
            index = meta.index,
            from = format_args!("{:x}", desc.from),
            "installing a snapshot from the leader"
        );
        let target = crate::raft_snapshot::incoming_dir(&cfg.dir, cfg.shard);
        let _ = std::fs::remove_dir_all(&target);
        let clock = crate::clock::SystemClock;
        let started = clock.now();
        let mut fetched = Err(EngineError::NotCapable);
        for attempt in 0..5u32 {
            // The store's state is built from the pairs as they arrive: no pass over the
            // installed tables afterwards.
            fetched = (cfg.fetch)(&desc, &target, Some(IndexRebuild::new(self.value_cache_bytes)));
            match &fetched {
                Ok(_) => break,
                Err(e) => {
                    tracing::warn!(error = %e, attempt, "fetching the leader's snapshot failed; trying again");
                    std::thread::sleep(std::time::Duration::from_millis(200 << attempt));
                }
            }
        }
        let Fetched { tables, rebuilt } = fetched?;
        let fetched_at = clock.now();
        let cs = meta.conf_state.clone().unwrap_or_default();
        let marker = SnapshotInstall {
            index: meta.index,
            term: meta.term,
            voters: cs.voters,
            learners: cs.learners,
            dir: tables.display().to_string(),
        };
        crate::raft_snapshot::mark(self.store.backend(), &marker)?;
        crate::raft_snapshot::install(self.store.backend(), &tables, &crate::raft_snapshot::staging_dir(&tables))?;
        let ingested_at = clock.now();
        self.reopen(rebuilt)?;
        if let Some(view) = &self.cluster {
            if let Some(m) = crate::cluster::Membership::load(self.store.backend())? {
                view.replace(m);
            }
        }
        tracing::info!(
            index = self.applied_index,
            fetch_ms = fetched_at.saturating_duration_since(started).as_millis() as u64,
            install_ms = clock.now().saturating_duration_since(fetched_at).as_millis() as u64,
            reopen_ms = clock.now().saturating_duration_since(ingested_at).as_millis() as u64,
            "snapshot installed"
        );
        Ok(())
    }

    /// Marks the revision counter as shared with other shards of the member: discarding this
    /// shard's unapplied writes must not set it back below revisions the others took.
    pub fn set_counter_shared(&mut self) {
        self.counter_shared = true;
    }

    /// Marks the shard as one of several whose leaders may live on different members: a
    /// compaction raises the member's counter to its revision, which the network plane sent only
    /// once every shard committed it.
    pub fn set_spread(&mut self) {
        self.spread = true;
    }

    /// Makes this state machine apply membership changes to `view` (shard 0 of a member).
    pub fn set_cluster_view(&mut self, view: ClusterView) {
        self.cluster = Some(view);
    }

    /// Returns true once an applied change removed this member from the cluster.
    pub fn removed(&self) -> bool {
        self.removed
    }

    /// Throws away what this member evaluated but did not apply (a leader stepping down with a
    /// round uncommitted) by reopening the state from the backend, which holds exactly the
    /// applied entries: the next leader may replace the round's entry. The member's revision
    /// counter goes back to the store's last revision.
    ///
    /// # Errors
    /// A storage error.
    pub fn step_down(&mut self) -> Result<()> {
        if self.evaluated_index <= self.applied_index {
            return Ok(());
        }
        tracing::info!(
            applied = self.applied_index,
            evaluated = self.evaluated_index,
            "stepped down with an uncommitted round; reopening the applied state"
        );
        self.discard_unapplied()
    }

    /// Reopens the state from the backend, dropping every evaluated write that is not applied
    /// (also those of a round raft refused to take).
    ///
    /// # Errors
    /// A storage error.
    pub fn discard_unapplied(&mut self) -> Result<()> {
        self.reopen(None)
    }

    /// Reopens the state from the backend (see [`ShardStateMachine::discard_unapplied`]), the
    /// store's with `rebuilt` when given.
    fn reopen(&mut self, rebuilt: Option<Rebuilt>) -> Result<()> {
        let revs = Arc::clone(self.store.revisions());
        if !self.counter_shared {
            // The next leader counts on from what is applied: no gap after a failover.
            revs.reset(1);
        }
        let fresh = Self::open_rebuilt(
            self.store.backend().clone(),
            self.min_lease_ttl,
            self.value_cache_bytes,
            revs,
            self.member_id,
            Arc::clone(&self.clock),
            rebuilt,
        )?;
        let (cluster, snapshots, shared, spread) =
            (self.cluster.take(), self.snapshots.take(), self.counter_shared, self.spread);
        let auth_shared = self.auth_shared.take();
        let next_append = self.next_append.take();
        *self = fresh;
        self.next_append = next_append;
        self.cluster = cluster;
        self.snapshots = snapshots;
        self.counter_shared = shared;
        if let Some(auth) = auth_shared {
            // What was evaluated but not applied is gone; so is any auth change in it.
            self.set_auth(auth);
        }
        self.spread = spread;
        Ok(())
    }

    /// Returns the MVCC store.
    pub fn store(&self) -> &MvccStore<B> {
        &self.store
    }

    /// Returns the MVCC store and the lease table, for reads that need both.
    pub fn store_and_leases(&mut self) -> (&mut MvccStore<B>, &mut Lessor) {
        (&mut self.store, &mut self.lessor)
    }

    /// Returns the lease table.
    pub fn lessor_mut(&mut self) -> &mut Lessor {
        &mut self.lessor
    }

    /// Returns the active alarms (etcd `AlarmType` numbers).
    pub fn alarms(&self) -> &BTreeSet<i32> {
        &self.alarms
    }

    /// Returns the last raft index this member evaluated (or applied): an answer evaluated now
    /// may be sent once this index is applied.
    pub fn evaluated_index(&self) -> u64 {
        self.evaluated_index
    }

    /// Evaluates a write on the leader: applies it to the state and this round's pending batch
    /// and returns its answer and, when it changed something, the raft entry to propose. The
    /// caller proposes the entry and reports its index with [`ShardStateMachine::proposed`].
    ///
    /// # Errors
    /// A storage error: the state may be ahead of what can be written, and the shard must stop.
    /// The write's own failures are in [`Evaluated::result`].
    pub fn evaluate(&mut self, cmd: Command) -> Result<Evaluated> {
        // These change state outside the key space (leases, alarms, the compacted revision) and
        // need an entry even without a revision.
        let always_logged = matches!(
            cmd,
            Command::Compaction(_)
                | Command::LeaseGrant(_)
                | Command::LeaseRevoke(_)
                | Command::Alarm(_)
                | Command::Auth(_)
        );
        let result = self.apply_command(&cmd);
        if let Err(EngineError::Storage(e)) = result {
            return Err(EngineError::Storage(e));
        }
        let revision = self.store.revision_taken().unwrap_or(0);
        let entry = (result.is_ok() && (revision != 0 || always_logged)).then(|| RaftCommand {
            request_id: 0,
            command: Some(cmd),
            revision,
            batch: Vec::new(),
            revision_ceiling: 0,
            spread_leaders: false,
        });
        Ok(Evaluated { result, entry })
    }

    /// Returns the highest revision ceiling applied (shard 0; see `cluster::revision_group`).
    pub fn ceiling(&self) -> i64 {
        self.ceiling
    }

    /// Evaluates a raise of the revision ceiling to `ceiling` (shard 0's leader, for the
    /// revision allocator) and returns the entry to propose.
    pub fn evaluate_ceiling(&mut self, ceiling: i64) -> RaftCommand {
        self.apply_ceiling(ceiling);
        RaftCommand { revision_ceiling: ceiling, ..Default::default() }
    }

    /// Evaluates the switch of a cluster grown from one member to spread leaders (shard 0's
    /// leader, see `cluster::placement`) with the revision ceiling `ceiling`, and returns the
    /// entry to propose. The record reaches the data directory with the entry's round; what
    /// this state machine reports as applied ([`ShardStateMachine::spread_applied`]) changes
    /// only when the entry is replayed (the proposing shard follows its own entry's index).
    pub fn evaluate_placement_switch(&mut self, ceiling: i64) -> RaftCommand {
        self.apply_ceiling(ceiling);
        self.record_spread();
        RaftCommand { revision_ceiling: ceiling, spread_leaders: true, ..Default::default() }
    }

    /// True when an applied entry of shard 0 (or the data directory) records spread leaders.
    pub fn spread_applied(&self) -> bool {
        self.placement == crate::cluster::PLACEMENT_SPREAD
    }

    fn record_spread(&mut self) {
        let spread = crate::cluster::PLACEMENT_SPREAD;
        self.store.pending_batch().put(Cf::Meta, META_LEADER_PLACEMENT.to_vec(), spread.to_be_bytes().to_vec());
    }

    fn apply_ceiling(&mut self, ceiling: i64) {
        if ceiling > self.ceiling {
            self.ceiling = ceiling;
            self.store.pending_batch().put(Cf::Meta, META_REVISION_CEILING.to_vec(), ceiling.to_be_bytes().to_vec());
        }
    }

    /// Records that the entry of the writes evaluated last was proposed at `index` in `term`.
    pub fn proposed(&mut self, index: u64, term: u64) {
        self.evaluated_index = self.evaluated_index.max(index);
        self.evaluated_term = term;
    }

    fn apply_round(&mut self, entries: &[Entry]) -> Result<ApplyOutput> {
        let mut out = ApplyOutput::default();
        for e in entries {
            self.applied_index = self.applied_index.max(e.index);
            if e.entry_type == EntryType::EntryConfChange as i32 {
                // Conf changes are proposed without evaluation: applied here on every member.
                self.apply_member_change(e);
                out.conf_changed = true;
                self.evaluated_index = self.evaluated_index.max(e.index);
                continue;
            }
            if e.index <= self.evaluated_index {
                if e.term != self.evaluated_term && self.evaluated_term != 0 {
                    // The shard loop steps down (reopening the state) before it applies another
                    // leader's entries; reaching here means it did not, and the state is wrong.
                    return Err(EngineError::Raft(RaftError::Store(Box::new(StorageError::Corrupt {
                        cf: "raft",
                        what: "an entry this member evaluated was replaced without a step-down",
                    }))));
                }
                continue; // evaluated by this member when it proposed the entry
            }
            self.evaluated_index = e.index;
            if e.data.is_empty() || e.entry_type != EntryType::EntryNormal as i32 {
                continue; // leader no-ops and conf changes change no shard state
            }
            let cmd = match RaftCommand::decode(e.data.as_slice()) {
                Ok(cmd) => cmd,
                Err(_) => {
                    tracing::error!(index = e.index, "skipping undecodable raft entry");
                    continue;
                }
            };
            if cmd.batch.is_empty() {
                self.replay(e.index, cmd)?;
            } else {
                for one in cmd.batch {
                    self.replay(e.index, one)?;
                }
            }
        }
        self.store.pending_batch().put(
            Cf::Meta,
            META_APPLIED_INDEX.to_vec(),
            self.applied_index.to_be_bytes().to_vec(),
        );
        match self.next_append.as_ref().filter(|_| self.joins_append) {
            // In the log's synced write that follows at once, before the round is answered.
            Some(next) => {
                let (batch, events) = self.store.take_round();
                next.push(batch);
                out.events = events;
            }
            // Unsynced: the raft log entries behind this round were synced before they committed.
            None => out.events = self.store.flush(WriteOpts { sync: false })?,
        }
        if std::mem::take(&mut self.auth_dirty) {
            // Only now are the round's auth changes committed (a leader evaluates a round only
            // once the previous one committed), so only now may requests be checked against them.
            if let Some(shared) = &self.auth_shared {
                shared.publish(&self.auth);
            }
        }
        Ok(out)
    }

    /// Applies a membership change (a conf change whose context is the member's record) to the
    /// member's view and this round's batch. raft applies the change to its own configuration
    /// right after the round.
    fn apply_member_change(&mut self, e: &Entry) {
        use prost_011::Message as _;
        let Some(view) = &self.cluster else { return };
        let Ok(cc) = ballast_raft::ConfChange::decode(e.data.as_slice()) else {
            tracing::error!(index = e.index, "undecodable conf change entry");
            return;
        };
        let change = if cc.change_type == ballast_raft::ConfChangeType::RemoveNode as i32 {
            let id = crate::cluster::member_of_context(&cc.context)
                .map(|m| m.id)
                .ok()
                .or_else(|| view.membership.read().by_raft_id(cc.node_id).map(|m| m.id));
            match id {
                Some(id) => MemberChange::Remove(id),
                None => return,
            }
        } else {
            match crate::cluster::member_of_context(&cc.context) {
                Ok(m) => MemberChange::Upsert(m),
                Err(_) => {
                    tracing::error!(index = e.index, "conf change without a member record");
                    return;
                }
            }
        };
        tracing::info!(index = e.index, ?change, "membership change applied");
        if view.apply(&change) {
            tracing::warn!("this member was removed from the cluster; it stops");
            self.removed = true;
        }
        let membership = view.membership.read().clone();
        membership.save_in(self.store.pending_batch());
    }

    /// Applies one recorded request of an entry this member did not evaluate, at the revision
    /// the entry records.
    fn replay(&mut self, index: u64, cmd: RaftCommand) -> Result<()> {
        if cmd.revision_ceiling != 0 {
            self.apply_ceiling(cmd.revision_ceiling);
        }
        if cmd.spread_leaders {
            self.record_spread();
            self.placement = crate::cluster::PLACEMENT_SPREAD;
        }
        let Some(c) = cmd.command else { return Ok(()) };
        if cmd.revision != 0 {
            self.store.expect_revision(cmd.revision);
        }
        // Storage failures are fatal for the whole round: the in-memory state may be ahead
        // of what can be written. Other failures were the answer when the entry was
        // evaluated; replay reaches the same one.
        if let Err(EngineError::Storage(e)) = self.apply_command(&c) {
            return Err(EngineError::Storage(e));
        }
        let taken = self.store.revision_taken();
        if cmd.revision != 0 && taken != Some(cmd.revision) {
            tracing::error!(index, recorded = cmd.revision, ?taken, "replayed entry changed another revision");
        }
        Ok(())
    }

    fn apply_command(&mut self, cmd: &Command) -> Result<WriteResponse> {
        let header = |revision| Some(ResponseHeader { revision, ..Default::default() });
        match cmd {
            Command::Put(r) => kv::apply_put(&mut self.store, &mut self.lessor, r).map(WriteResponse::Put),
            Command::DeleteRange(r) => {
                kv::apply_delete(&mut self.store, &mut self.lessor, r).map(WriteResponse::DeleteRange)
            }
            Command::Txn(r) => kv::apply_txn(&mut self.store, &mut self.lessor, r).map(WriteResponse::Txn),
            Command::Compaction(r) => {
                if self.spread {
                    // Another shard's revision at `r.revision` may not be applied here yet; the
                    // network plane sent the compaction only once it was committed.
                    self.store.revisions().observe(r.revision);
                }
                self.store.compact(r.revision)?;
                Ok(WriteResponse::Compaction(CompactionResponse { header: header(self.store.current_rev()) }))
            }
            Command::LeaseGrant(r) => {
                let now = self.clock.now();
                let ttl = self.lessor.grant(r.id, r.ttl, now, self.store.pending_batch())?;
                Ok(WriteResponse::LeaseGrant(LeaseGrantResponse {
                    header: header(self.store.current_rev()),
                    id: r.id,
                    ttl,
                    error: String::new(),
                }))
            }
            Command::LeaseRevoke(r) => {
                let keys = self.lessor.keys(r.id).ok_or(EngineError::LeaseNotFound)?;
                // All of a lease's keys go in one revision, as etcd does.
                let mut txn = self.store.begin();
                for k in keys {
                    self.store.delete_range(&mut txn, &KeyRange::single(k))?;
                }
                self.store.end(txn);
                self.lessor.remove(r.id, self.store.pending_batch());
                Ok(WriteResponse::LeaseRevoke(LeaseRevokeResponse { header: header(self.store.current_rev()) }))
            }
            Command::Alarm(r) => Ok(WriteResponse::Alarm(self.apply_alarm(r))),
            Command::Auth(c) => {
                let Some(shared) = &self.auth_shared else { return Err(EngineError::NotCapable) };
                let effect = self.auth.apply(c, self.store.pending_batch())?;
                shared.apply_effect(effect);
                self.auth_dirty = true;
                Ok(WriteResponse::Auth(ballast_proto::ballastpb::AuthApplied { auth_revision: self.auth.revision }))
            }
        }
    }

    fn apply_alarm(&mut self, r: &AlarmRequest) -> AlarmResponse {
        let mut key = META_ALARM_PREFIX.to_vec();
        key.extend_from_slice(&r.alarm.to_be_bytes());
        let changed = match AlarmAction::try_from(r.action) {
            Ok(AlarmAction::Activate) if r.alarm != 0 && self.alarms.insert(r.alarm) => {
                self.store.pending_batch().put(Cf::Meta, key, Vec::new());
                vec![r.alarm]
            }
            Ok(AlarmAction::Deactivate) if self.alarms.remove(&r.alarm) => {
                self.store.pending_batch().delete(Cf::Meta, key);
                vec![r.alarm]
            }
            _ => vec![],
        };
        let alarms = changed.into_iter().map(|alarm| AlarmMember { member_id: self.member_id, alarm }).collect();
        AlarmResponse {
            header: Some(ResponseHeader { revision: self.store.current_rev(), ..Default::default() }),
            alarms,
        }
    }
}

impl<B: KvBackend + Clone> StateMachine for ShardStateMachine<B> {
    type Output = Result<ApplyOutput>;

    fn apply(&mut self, entries: &[Entry]) -> Self::Output {
        self.apply_round(entries)
    }

    fn apply_before_append(&mut self, entries: &[Entry]) -> Self::Output {
        self.joins_append = true;
        crate::round_trace::mark(crate::round_trace::Mark::ApplyStart, entries.len());
        let out = self.apply_round(entries);
        crate::round_trace::mark(crate::round_trace::Mark::ApplyEnd, entries.len());
        self.joins_append = false;
        out
    }

    fn on_step_down(&mut self) -> Result<(), RaftError> {
        self.step_down().map_err(|e| RaftError::Store(Box::new(e)))
    }

    fn applied_index(&self) -> u64 {
        self.applied_index
    }

    fn restore(&mut self, snapshot: &ballast_raft::Snapshot) -> Result<(), RaftError> {
        self.install_snapshot(snapshot).map_err(|e| RaftError::Store(Box::new(e)))
    }

    fn restored(&mut self) -> Result<(), RaftError> {
        crate::raft_snapshot::clear(self.store.backend()).map_err(|e| RaftError::Store(Box::new(e)))
    }
}

#[cfg(test)]
mod tests;
