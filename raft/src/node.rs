//! [`RaftNode`]: a raft-rs `RawNode` with its log store, state machine and transport, and the
//! one function that runs a Ready round ([`RaftNode::handle_ready`]).

use prost_011::Message as _;
use raft::eraftpb::{ConfChange, ConfChangeV2, ConfState, Entry, EntryType, Message};
use raft::{Config, RawNode, StateRole};

use crate::config::RaftConfig;
use crate::error::RaftError;
use crate::log_store::LogStore;
use crate::state_machine::StateMachine;
use crate::transport::Transport;

/// What one Ready round did.
#[derive(Debug)]
pub struct ReadyOutcome<O> {
    /// The state machine's output, when entries were committed this round.
    pub applied: Option<O>,
    /// Completed read-index requests: (context, index to wait for).
    pub read_states: Vec<(Vec<u8>, u64)>,
    /// This member became leader in this round.
    pub became_leader: bool,
    /// This member stopped being leader in this round.
    pub lost_leadership: bool,
    /// A snapshot replaced the state in this round, before the applied entries.
    pub snapshot_applied: bool,
}

/// A raft group member. The only generic type of the replication layer; the engine pins it with
/// a type alias.
pub struct RaftNode<L: LogStore, S: StateMachine, T: Transport> {
    raw: RawNode<L>,
    store: L,
    sm: S,
    transport: T,
    role: StateRole,
    /// The highest commit index the followers were sent with an append (see
    /// [`RaftConfig::commit_with_next_append`]).
    commit_told: u64,
    /// See [`RaftConfig::commit_with_next_append`].
    commit_with_next_append: bool,
}

impl<L: LogStore, S: StateMachine, T: Transport> std::fmt::Debug for RaftNode<L, S, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaftNode")
            .field("id", &self.raw.raft.id)
            .field("term", &self.raw.raft.term)
            .field("role", &self.role)
            .field("leader", &self.raw.raft.leader_id)
            .field("committed", &self.raw.raft.raft_log.committed)
            .finish()
    }
}

fn discard_logger() -> slog::Logger {
    slog::Logger::root(slog::Discard, slog::o!())
}

impl<L: LogStore, S: StateMachine, T: Transport> RaftNode<L, S, T> {
    /// Builds a node over `store`. When the store has no conf state yet (a brand-new group),
    /// `peers` become its voters; otherwise the stored conf state wins. Entries after the state
    /// machine's applied index are re-applied by the following Ready rounds.
    ///
    /// # Errors
    /// An invalid configuration or a store error.
    pub fn new(cfg: &RaftConfig, peers: &[u64], store: L, sm: S, transport: T) -> Result<Self, RaftError> {
        let conf = raft::eraftpb::ConfState { voters: peers.to_vec(), ..Default::default() };
        Self::with_conf_state(cfg, &conf, store, sm, transport)
    }

    /// As [`RaftNode::new`], with the voters and learners of a brand-new group given as a conf
    /// state (a member joining a running group starts from the group's current one).
    ///
    /// # Errors
    /// An invalid configuration or a store error.
    pub fn with_conf_state(
        cfg: &RaftConfig,
        conf: &ConfState,
        store: L,
        sm: S,
        transport: T,
    ) -> Result<Self, RaftError> {
        let state = store.initial_state()?;
        if state.conf_state.voters.is_empty() && state.conf_state.learners.is_empty() {
            store.set_conf_state(conf)?;
        }
        let raft_cfg = Config {
            id: cfg.id,
            election_tick: cfg.election_tick,
            heartbeat_tick: cfg.heartbeat_tick,
            applied: sm.applied_index(),
            max_size_per_msg: cfg.max_size_per_msg,
            max_inflight_msgs: cfg.max_inflight_msgs,
            pre_vote: cfg.pre_vote,
            check_quorum: cfg.check_quorum,
            skip_bcast_commit: cfg.commit_with_next_append,
            ..Default::default()
        };
        raft_cfg.validate()?;
        let raw = RawNode::new(&raft_cfg, store.clone(), &discard_logger())?;
        Ok(Self {
            raw,
            store,
            sm,
            transport,
            role: StateRole::Follower,
            commit_told: 0,
            commit_with_next_append: cfg.commit_with_next_append,
        })
    }

    /// Proposes `data` as a normal entry.
    ///
    /// # Errors
    /// `NotLeader` on a follower, `ProposalDropped` when raft-rs refuses it.
    pub fn propose(&mut self, data: Vec<u8>) -> Result<(), RaftError> {
        if self.raw.raft.state != StateRole::Leader {
            return Err(RaftError::NotLeader { leader_id: self.raw.raft.leader_id });
        }
        self.raw.propose(vec![], data).map_err(|e| match e {
            raft::Error::ProposalDropped => RaftError::ProposalDropped,
            e => RaftError::Raft(e),
        })?;
        // raft sent the entry to every follower it may send to, with the commit index.
        self.commit_told = self.raw.raft.raft_log.committed;
        Ok(())
    }

    /// True on a leader whose commit index moved past what its followers were last sent with
    /// an append (only with [`RaftConfig::commit_with_next_append`]; raft broadcasts it
    /// otherwise).
    pub fn commit_untold(&self) -> bool {
        self.commit_with_next_append
            && self.raw.raft.state == StateRole::Leader
            && self.raw.raft.raft_log.committed > self.commit_told
    }

    /// On a leader, sends every follower an append carrying the commit index (entries too for
    /// one that lacks some), for when [`RaftNode::commit_untold`] and no proposal follows soon:
    /// followers apply (and answer their waiting reads and forwarded writes) only once they
    /// hear it. The messages leave with the next [`RaftNode::handle_ready`].
    pub fn tell_commit(&mut self) {
        if self.raw.raft.state == StateRole::Leader {
            self.raw.raft.bcast_append();
            self.commit_told = self.raw.raft.raft_log.committed;
        }
    }

    /// Proposes a membership change. raft takes one at a time: while one is not yet applied,
    /// another is refused here (raft-rs would turn it into an empty entry silently).
    ///
    /// # Errors
    /// As [`RaftNode::propose`]; `ProposalDropped` while another change is pending.
    pub fn propose_conf_change(&mut self, cc: ConfChange) -> Result<(), RaftError> {
        if self.raw.raft.state != StateRole::Leader {
            return Err(RaftError::NotLeader { leader_id: self.raw.raft.leader_id });
        }
        if self.raw.raft.has_pending_conf() {
            return Err(RaftError::ProposalDropped);
        }
        self.raw.propose_conf_change(vec![], cc).map_err(|e| match e {
            raft::Error::ProposalDropped => RaftError::ProposalDropped,
            e => RaftError::Raft(e),
        })
    }

    /// Asks for a read index; the answer comes back in a later [`ReadyOutcome::read_states`].
    pub fn read_index(&mut self, ctx: Vec<u8>) {
        self.raw.read_index(ctx);
    }

    /// Starts an election now (a single voter calls this at start to lead at once).
    ///
    /// # Errors
    /// raft-rs's error.
    pub fn campaign(&mut self) -> Result<(), RaftError> {
        Ok(self.raw.campaign()?)
    }

    /// Advances raft's logical clock by one tick; true when a Ready may be pending.
    pub fn tick(&mut self) -> bool {
        self.raw.tick()
    }

    /// Feeds a message from another member.
    ///
    /// # Errors
    /// raft-rs's error (for example a message for another group).
    pub fn step(&mut self, msg: Message) -> Result<(), RaftError> {
        Ok(self.raw.step(msg)?)
    }

    /// Returns true when [`RaftNode::handle_ready`] has work.
    pub fn has_ready(&self) -> bool {
        self.raw.has_ready()
    }

    /// Runs one Ready round (see the crate doc for the contract). Returns None when there was
    /// nothing to do.
    ///
    /// # Errors
    /// A store or state machine error; the member must stop.
    pub fn handle_ready(&mut self) -> Result<Option<ReadyOutcome<S::Output>>, RaftError> {
        if !self.raw.has_ready() {
            return Ok(None);
        }
        let mut ready = self.raw.ready();
        let was_leader = self.role == StateRole::Leader;
        if let Some(ss) = ready.ss() {
            self.role = ss.raft_state;
        }
        if was_leader && self.role != StateRole::Leader {
            // Before anything of the new leader's is applied (see `StateMachine::on_step_down`).
            self.sm.on_step_down()?;
        }
        // 1. A leader's appends may leave before its own disk write.
        if !ready.messages().is_empty() {
            self.transport.send(ready.take_messages());
        }
        // 2. Snapshots first: the state, then the log, then the state machine is told the log
        //    holds it (an install cut short in between is the machine's to finish).
        let snapshot_applied = !ready.snapshot().is_empty();
        if snapshot_applied {
            let snap = ready.snapshot().clone();
            self.sm.restore(&snap)?;
            self.store.apply_snapshot(&snap)?;
            self.sm.restored()?;
        }
        let mut committed = ready.take_committed_entries();
        let read_states = ready.take_read_states().into_iter().map(|rs| (rs.request_ctx, rs.index)).collect();
        // 3. A follower that persists the next round in this Ready applies the committed one
        //    first (its entries are durable already), so the machine's write can go out with
        //    the append (`StateMachine::apply_before_append`). Only when the append commits
        //    nothing more, so the round is still applied in one call: a follower's commit index
        //    moves only with the leader's messages, and entries at or below it that this append
        //    makes durable would come back in the light ready. (A leader's own append can
        //    commit, alone in its group; leaders take the plain path.)
        let committed_now = self.raw.raft.raft_log.committed;
        let before_append = self.role != StateRole::Leader
            && !committed.is_empty()
            && ready.entries().first().is_some_and(|e| e.index > committed_now);
        let mut applied = None;
        if before_append {
            applied = Some(self.sm.apply_before_append(&committed));
        }
        // 4. Persist before acknowledging anything.
        self.store.append(ready.entries(), ready.hs(), ready.must_sync())?;
        if !ready.persisted_messages().is_empty() {
            self.transport.send(ready.take_persisted_messages());
        }
        // 5. Advance; record the commit index and send what the light ready has.
        let mut light = self.raw.advance(ready);
        if let Some(commit) = light.commit_index() {
            self.store.set_commit(commit)?;
        }
        if !light.messages().is_empty() {
            self.transport.send(light.take_messages());
        }
        let more = light.take_committed_entries();
        if before_append && !more.is_empty() {
            // Ruled out above: every entry this append persisted is past the follower's commit
            // index, which its own append does not move.
            return Err(RaftError::Store("entries committed by an append whose round was already applied".into()));
        }
        committed.extend(more);
        // 6. Apply the round in one call, then conf changes, then advance_apply.
        if !before_append && !committed.is_empty() {
            applied = Some(self.sm.apply(&committed));
        }
        self.apply_conf_changes(&committed)?;
        self.raw.advance_apply();
        let is_leader = self.role == StateRole::Leader;
        Ok(Some(ReadyOutcome {
            applied,
            read_states,
            became_leader: is_leader && !was_leader,
            lost_leadership: was_leader && !is_leader,
            snapshot_applied,
        }))
    }

    fn apply_conf_changes(&mut self, entries: &[Entry]) -> Result<(), RaftError> {
        for e in entries {
            let cs = match e.entry_type {
                t if t == EntryType::EntryConfChange as i32 => {
                    let cc = ConfChange::decode(e.data.as_slice()).map_err(|err| RaftError::Store(Box::new(err)))?;
                    self.raw.apply_conf_change(&cc)?
                }
                t if t == EntryType::EntryConfChangeV2 as i32 => {
                    let cc = ConfChangeV2::decode(e.data.as_slice()).map_err(|err| RaftError::Store(Box::new(err)))?;
                    self.raw.apply_conf_change(&cc)?
                }
                _ => continue,
            };
            self.store.set_conf_state(&cs)?;
        }
        Ok(())
    }

    /// Brings the election clock to `left` ticks before it runs out, so this follower asks
    /// for votes (pre-vote first) that soon instead of after the rest of an election timeout.
    /// For a follower that has just lost its connection to the leader: if the other members
    /// still hear the leader, their lease check refuses the pre-vote and nothing changes.
    /// Followers that lose the leader together should pass different `left`s, so they do not
    /// split the vote.
    pub fn shorten_election_timeout(&mut self, left: usize) {
        let timeout = self.raw.raft.randomized_election_timeout();
        let elapsed = &mut self.raw.raft.election_elapsed;
        *elapsed = (*elapsed).max(timeout.saturating_sub(left.max(1)));
    }

    /// Tells raft that `to` could not be reached, so the leader probes it instead of
    /// streaming appends into the void.
    pub fn report_unreachable(&mut self, to: u64) {
        self.raw.report_unreachable(to);
        // A snapshot sent to it is lost too: raft sends another once it answers again.
        self.raw.report_snapshot(to, raft::SnapshotStatus::Failure);
    }

    /// Tells raft that `to` fetched (or failed to fetch) the snapshot it was sent.
    pub fn report_snapshot(&mut self, to: u64, done: bool) {
        let status = if done { raft::SnapshotStatus::Finish } else { raft::SnapshotStatus::Failure };
        self.raw.report_snapshot(to, status);
    }

    /// Asks the leader to hand leadership to `to` (raft's leader transfer).
    pub fn transfer_leader(&mut self, to: u64) {
        self.raw.transfer_leader(to);
    }

    /// Returns the term of the log entry at `index` (unstable entries included), None when the
    /// log no longer or not yet holds it.
    pub fn log_term(&self, index: u64) -> Option<u64> {
        self.raw.raft.raft_log.term(index).ok()
    }

    /// Returns the IDs of the group's voters.
    pub fn voters(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.raw.raft.prs().conf().voters().ids().iter().collect();
        v.sort_unstable();
        v
    }

    /// On the leader, returns `id`'s match index and whether it was heard from recently (within
    /// an election timeout); None for an unknown member or on a follower.
    pub fn progress_of(&self, id: u64) -> Option<(u64, bool)> {
        if self.raw.raft.state != StateRole::Leader {
            return None;
        }
        self.raw.raft.prs().get(id).map(|pr| (pr.matched, pr.recent_active || id == self.raw.raft.id))
    }

    /// Returns the IDs of the group's learners.
    pub fn learners(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.raw.raft.prs().conf().learners().iter().copied().collect();
        v.sort_unstable();
        v
    }

    /// Returns true when this member is the group's only voter (it commits alone).
    pub fn is_single_voter(&self) -> bool {
        let voters = self.raw.raft.prs().conf().voters().ids();
        voters.len() == 1 && voters.contains(self.raw.raft.id)
    }

    /// On the leader, returns the lowest log index every other member is known to hold
    /// (its match index), or None on a follower or a single voter. The log is kept from there,
    /// so a member that was away catches up from the log.
    pub fn lowest_follower_match(&self) -> Option<u64> {
        if self.raw.raft.state != StateRole::Leader {
            return None;
        }
        let me = self.raw.raft.id;
        self.raw.raft.prs().iter().filter(|(id, _)| **id != me).map(|(_, pr)| pr.matched).min()
    }

    /// Returns the state machine.
    pub fn state_machine(&self) -> &S {
        &self.sm
    }

    /// Returns the state machine for changes that do not go through the log (reads, leases'
    /// leader-local deadlines).
    pub fn state_machine_mut(&mut self) -> &mut S {
        &mut self.sm
    }

    /// Returns the log store.
    pub fn store(&self) -> &L {
        &self.store
    }

    /// Returns true while this member, leading, hands its leadership over (raft drops proposals
    /// until the transfer ends or is given up after an election timeout).
    pub fn transferring(&self) -> bool {
        self.raw.raft.state == StateRole::Leader && self.raw.raft.lead_transferee.is_some()
    }

    /// Returns true when this member leads.
    pub fn is_leader(&self) -> bool {
        self.raw.raft.state == StateRole::Leader
    }

    /// Returns the leader's ID, 0 when none is known.
    pub fn leader_id(&self) -> u64 {
        self.raw.raft.leader_id
    }

    /// Returns the current term.
    pub fn term(&self) -> u64 {
        self.raw.raft.term
    }

    /// Returns the commit index.
    pub fn commit_index(&self) -> u64 {
        self.raw.raft.raft_log.committed
    }

    /// Returns the last log index.
    pub fn last_index(&self) -> u64 {
        self.raw.raft.raft_log.last_index()
    }

    /// Returns this member's raft ID.
    pub fn id(&self) -> u64 {
        self.raw.raft.id
    }

    /// Returns this member's role.
    pub fn status_role(&self) -> StateRole {
        self.raw.raft.state
    }
}

#[cfg(test)]
mod tests;
