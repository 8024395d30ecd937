//! A shard whose leaders are spread over the members: its rounds take revisions from the
//! cluster's revision allocator (`cluster::revision_group`, reached through
//! `cluster::allocation::RevisionGroup`), it reports where its rounds end, shard 0 runs the
//! allocator while it leads, and leaders hand shards to less loaded members ([`super::balance`]).
//!
//! A round asks for as many revisions as it has writes once its shard could evaluate them
//! (leader, earlier terms applied, nothing in flight), waits for the grant without blocking
//! (the grant arrives as [`ShardMsg::Granted`]), evaluates at most that many writes with the
//! grant's revisions, proposes them, and returns the grant with the count used and the entry's
//! index. A grant that arrives for another round, term or an older allocator is returned unused.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ballast_raft::StateMachine as _;
use prost::Message as _;

use super::{balance, Shard, ShardMsg};
use crate::cluster::allocation::Granted;
use crate::cluster::revision_group::{Release, Report, RoundId};
use crate::error::Result;
use crate::storage::KvBackend;
use state::GrantState;
pub(super) use state::Spread;

mod state;

impl<B: KvBackend + Clone> Shard<B> {
    pub(super) fn shard_number(&self) -> u32 {
        self.colo.as_ref().map_or(0, |(s, _)| *s)
    }

    /// How long the loop may sleep before it must ask for a grant again; None when it need not
    /// wake for that.
    pub(super) fn spread_wait(&self, now: Instant) -> Option<Duration> {
        let sp = self.spread.as_ref()?;
        if self.writes.is_empty() || !matches!(sp.state, GrantState::Idle) || !self.ready_to_evaluate() {
            return None;
        }
        Some(sp.retry_at.map_or(Duration::ZERO, |t| t.saturating_duration_since(now)))
    }

    /// Takes the grant for this round if one is held; otherwise asks for one (once the retry
    /// delay passed) and returns None.
    pub(super) fn take_grant(&mut self) -> Option<Granted> {
        let now = self.clock.now();
        let held = self.writes.len() as i64;
        let (shard, term) = (self.shard_number(), self.node.term());
        let leader = self.node.is_leader();
        let sp = self.spread.as_mut()?;
        let want = held + sp.group.config().ask_ahead;
        match std::mem::replace(&mut sp.state, GrantState::Idle) {
            // Taken in the round it arrived unless the shard could not evaluate then; one for
            // an earlier term is returned unused (its revisions may be below ones this shard
            // applied since).
            GrantState::Held(g) if leader && g.grant.id.term == term => return Some(g),
            GrantState::Held(g) => {
                sp.done_through = sp.done_through.max(g.grant.id.round);
                sp.group.release(Release { epoch: g.grant.epoch, id: g.grant.id, used: 0, index: 0 });
            }
            GrantState::Asked(round, at) => {
                sp.state = GrantState::Asked(round, at);
                return None;
            }
            GrantState::Idle => {}
        }
        if sp.retry_at.is_some_and(|t| now < t) {
            return None;
        }
        sp.round += 1;
        let round = sp.round;
        sp.state = GrantState::Asked(round, now);
        let mailbox = sp.mailbox.clone();
        let id = RoundId { shard, term, round };
        let deliver = Box::new(move |g: Option<Granted>| {
            mailbox.upgrade().is_some_and(|tx| tx.try_send(ShardMsg::Granted(round, g)).is_ok())
        });
        Arc::clone(&sp.group).request(id, want, false, deliver);
        None
    }

    /// Takes the allocator's answer to round `round`.
    pub(super) fn on_granted(&mut self, round: u64, granted: Option<Granted>) {
        let now = self.clock.now();
        let (term, leader) = (self.node.term(), self.node.is_leader());
        let last = self.node.state_machine().store().revisions().last();
        let Some(sp) = self.spread.as_mut() else { return };
        let asked = matches!(sp.state, GrantState::Asked(r, _) if r == round);
        match granted {
            Some(g)
                if asked
                    && leader
                    && g.grant.id.term == term
                    && g.grant.epoch >= sp.min_epoch
                    && g.grant.start > last =>
            {
                sp.state = GrantState::Held(g);
                sp.retry_at = None;
            }
            Some(g) => {
                // Revisions at or below the highest this member has seen are returned as used
                // (they never commit through this grant): returned unused, the allocator would
                // grant them again, to this member's shards too, and every shard here would
                // refuse them for good.
                let seen = if asked && g.grant.start <= last {
                    tracing::warn!(start = g.grant.start, last, "a grant at or below revisions seen here; skipped");
                    (last - g.grant.start + 1).min(g.grant.count)
                } else {
                    0
                };
                if asked {
                    sp.state = GrantState::Idle;
                    sp.done_through = sp.done_through.max(round);
                }
                sp.group.release(Release { epoch: g.grant.epoch, id: g.grant.id, used: seen, index: 0 });
            }
            None if asked => {
                sp.state = GrantState::Idle;
                sp.done_through = sp.done_through.max(round);
                sp.retry_at = Some(now + sp.group.config().retry_after);
            }
            None => {}
        }
    }

    /// Returns the round's grant: `used` revisions, proposed at `index`.
    pub(super) fn return_grant(&mut self, g: &Granted, used: i64, index: u64) {
        let Some(sp) = self.spread.as_mut() else { return };
        sp.done_through = sp.done_through.max(g.grant.id.round);
        sp.group.release(Release { epoch: g.grant.epoch, id: g.grant.id, used, index });
    }

    /// After each Ready: shard 0 keeps the allocator's life with its leadership and passes on
    /// committed ceilings; every leader reports to a new allocator or in a new term.
    pub(super) fn spread_after_ready(&mut self, applied: u64) {
        let s = self.shard_number();
        let (leader, term, is_leader) = (self.node.leader_id(), self.node.term(), self.node.is_leader());
        let ready = is_leader && applied >= self.term_start;
        let ceiling = self.node.state_machine().ceiling();
        let last = self.node.state_machine().store().revisions().last();
        let in_flight_term = self.spread.as_ref().and_then(|sp| sp.ceiling).and_then(|(i, ..)| self.node.log_term(i));
        let transferring = self.node.transferring();
        let Some(sp) = self.spread.as_mut() else { return };
        if !ready || transferring {
            // A grant held by a shard that can no longer evaluate (or will not until its
            // leadership transfer ends) goes back at once rather than holding every other round
            // until the allocator gives up on it.
            if let GrantState::Held(g) = std::mem::replace(&mut sp.state, GrantState::Idle) {
                sp.done_through = sp.done_through.max(g.grant.id.round);
                sp.group.release(Release { epoch: g.grant.epoch, id: g.grant.id, used: 0, index: 0 });
            }
        }
        if s == 0 {
            sp.group.note_anchor(leader, term);
            match sp.group.epoch() {
                Some(e) if ready && e == term => {}
                _ if ready => sp.group.open_epoch(term, ceiling, last),
                Some(_) => {
                    sp.group.close_epoch();
                    sp.ceiling = None;
                }
                None => {}
            }
            if let Some((index, t, c, epoch)) = sp.ceiling {
                if applied >= index {
                    if in_flight_term == Some(t) || in_flight_term.is_none() {
                        sp.group.ceiling_committed(epoch, c);
                    }
                    sp.ceiling = None;
                }
            }
        }
        if ready && !matches!(sp.state, GrantState::Held(_)) {
            if let Some(epoch) = sp.group.seen_epoch() {
                if sp.reported != Some((epoch, term)) {
                    self.send_report(epoch);
                }
            }
        }
    }

    fn send_report(&mut self, epoch: u64) {
        let s = self.shard_number();
        let term = self.node.term();
        let index = self.node.state_machine().evaluated_index().max(self.term_start);
        let Some(sp) = self.spread.as_mut() else { return };
        let done_through = match sp.state {
            GrantState::Asked(r, _) => r.saturating_sub(1).max(sp.done_through),
            _ => sp.done_through,
        };
        sp.min_epoch = sp.min_epoch.max(epoch);
        sp.reported = Some((epoch, term));
        sp.group.report(Report { epoch, shard: s, term, done_through, index });
    }

    /// On each tick: gives up a request whose answer never came, reports again (a report lost
    /// on the way holds the allocator's resolved revision back), and hands a shard to a less
    /// loaded member when this one leads too many.
    pub(super) fn spread_tick(&mut self, now: Instant) {
        let applied = self.node.state_machine().applied_index();
        let ready = self.node.is_leader() && applied >= self.term_start;
        if let Some(sp) = self.spread.as_mut() {
            if let GrantState::Asked(round, at) = sp.state {
                if now.saturating_duration_since(at) > sp.group.config().give_up_after() {
                    sp.state = GrantState::Idle;
                    sp.done_through = sp.done_through.max(round);
                }
            }
        }
        let held = self.spread.as_ref().is_some_and(Spread::holds_grant);
        if ready && !held {
            if let Some(epoch) = self.spread.as_ref().and_then(|sp| sp.group.seen_epoch()) {
                self.send_report(epoch);
            }
        }
        self.balance(now);
    }

    /// Hands this shard's leadership to the member that leads the fewest shards when this one
    /// leads at least two more (see [`balance`]), at most once an election timeout, and only
    /// while every shard has a leader.
    fn balance(&mut self, now: Instant) {
        let Some((s, colo)) = &self.colo else { return };
        if self.single || !self.node.is_leader() {
            return;
        }
        let timeout = self.cfg.tick_interval * self.cfg.raft.election_tick as u32;
        if self.last_transfer.is_some_and(|t| now.saturating_duration_since(t) < timeout) {
            return;
        }
        let leaders = colo.leaders();
        if leaders.contains(&0) {
            return;
        }
        let me = self.cfg.raft.id;
        // A peer is a candidate while raft hears from it and the transport has not lost it for
        // two election timeouts (the transport retries a lost peer at least once a second, the
        // reconnect backoff's cap).
        let sp = self.spread.as_ref();
        let lost = |id: u64| sp.is_some_and(|sp| sp.recently_unreachable(id, now, timeout * 2));
        let mut candidates: Vec<u64> = self
            .node
            .voters()
            .into_iter()
            .filter(|id| *id == me || (self.peer_progress(*id, now).is_some_and(|(_, active)| active) && !lost(*id)))
            .collect();
        candidates.sort_unstable();
        if let Some((shard, to)) = balance::hand_over(&leaders, &candidates, me) {
            if shard == *s {
                self.last_transfer = Some(now);
                tracing::info!(shard, to = format_args!("{to:x}"), "handing leadership to a less loaded member");
                self.node.transfer_leader(to);
            }
        }
    }

    /// Shard 0's leader running the allocator: proposes a higher revision ceiling when the
    /// allocator wants one and nothing else is in flight (its own entry, no writes).
    ///
    /// # Errors
    /// A raft error after the state changed: the shard must stop.
    pub(super) fn propose_ceiling(&mut self) -> Result<()> {
        if self.shard_number() != 0 || !self.ready_to_evaluate() {
            return Ok(());
        }
        let term = self.node.term();
        let Some(sp) = self.spread.as_ref() else { return Ok(()) };
        if sp.ceiling.is_some() || sp.holds_grant() || sp.group.epoch() != Some(term) {
            return Ok(());
        }
        let Some(ceiling) = sp.group.ceiling_wanted() else { return Ok(()) };
        let entry = self.node.state_machine_mut().evaluate_ceiling(ceiling);
        if let Err(e) = self.node.propose(entry.encode_to_vec()) {
            tracing::info!(error = %e, "revision ceiling not proposed");
            self.node.state_machine_mut().discard_unapplied()?;
            return Ok(());
        }
        let index = self.node.last_index();
        self.node.state_machine_mut().proposed(index, term);
        if let Some(sp) = self.spread.as_mut() {
            sp.ceiling = Some((index, term, ceiling, term));
        }
        Ok(())
    }
}
