//! A growing cluster's switch from one member leading every shard to leaders spread over the
//! members (`cluster::placement`): shard 0 of the member that leads every shard begins it once
//! the cluster has enough voters and every shard has them all, proposes the switch entry once
//! every other shard stopped taking from the counter, and records the placement when the entry
//! (its own or, on every other member, the one it replays) is applied; every shard of a member
//! then takes its dealings with the revision group at the top of its next loop.

use prost::Message as _;

use super::{spread, Shard};
use crate::error::Result;
use crate::storage::KvBackend;

impl<B: KvBackend + Clone> Shard<B> {
    /// At the top of each loop: acknowledges a switch under way (whatever this shard evaluated
    /// from the counter is behind it) and, once the member spreads, starts taking revisions
    /// from the revision group.
    pub(super) fn follow_placement(&mut self) {
        let Some(p) = &self.placement else { return };
        p.acknowledge(self.shard_number());
        if self.spread.is_some() || !p.spread() {
            return;
        }
        let Some(group) = self.group.clone() else { return };
        // Every revision this shard takes from now on is above what its watchers were told.
        self.switch_floor = self.watch_rev();
        self.node.state_machine_mut().set_spread();
        self.spread = Some(spread::Spread::new(group, self.mailbox.clone()));
        tracing::info!(shard = self.shard_number(), "the shards' leaders spread from now on");
    }

    /// Shard 0 of a growing cluster's member that leads every shard: begins the switch when
    /// the cluster has enough voters and every shard has them, and proposes the switch entry
    /// once every other shard acknowledged it.
    ///
    /// # Errors
    /// A raft error after the state changed: the shard must stop.
    pub(super) fn propose_switch(&mut self) -> Result<()> {
        let Some(p) = self.placement.clone() else { return Ok(()) };
        if self.shard_number() != 0 || !p.growing() || self.group.is_none() || self.switch_entry.is_some() {
            return Ok(());
        }
        let leads_all = self.colo.as_ref().is_some_and(|(_, c)| c.all_ready());
        if !p.switching() {
            let voters = self.node.voters();
            let converged = self.colo.as_ref().is_some_and(|(_, c)| c.converged());
            if leads_all
                && converged
                && !self.single
                && voters.len() >= p.spread_at_voters()
                && self.leads_with_nothing_in_flight()
            {
                tracing::info!(voters = voters.len(), "switching the shards' leaders to spread over the members");
                p.begin_switch();
            }
            return Ok(());
        }
        if !leads_all || !self.node.is_leader() {
            // Nothing proposed yet: the counter may open again.
            tracing::info!("switch to spread leaders given up: this member no longer leads every shard");
            p.abandon_switch();
            return Ok(());
        }
        if !p.all_acknowledged() || !self.leads_with_nothing_in_flight() {
            return Ok(());
        }
        // Every shard acknowledged: the counter stands still, and every revision it gave is
        // below this ceiling, where the first allocator starts.
        let ceiling = self.node.state_machine().store().revisions().last() + 1;
        let entry = self.node.state_machine_mut().evaluate_placement_switch(ceiling);
        if let Err(e) = self.node.propose(entry.encode_to_vec()) {
            tracing::info!(error = %e, "switch to spread leaders not proposed");
            self.node.state_machine_mut().discard_unapplied()?;
            p.abandon_switch();
            return Ok(());
        }
        let (index, term) = (self.node.last_index(), self.node.term());
        self.node.state_machine_mut().proposed(index, term);
        self.switch_entry = Some((index, term));
        tracing::info!(index, ceiling, "switch to spread leaders proposed");
        Ok(())
    }

    /// After each Ready, on shard 0: records the spread placement for the member once the
    /// switch entry is applied (this member's own, or one it replayed or got in a snapshot).
    pub(super) fn switch_after_ready(&mut self, applied: u64) {
        let Some(p) = &self.placement else { return };
        if self.shard_number() != 0 || p.spread() {
            return;
        }
        if let Some((index, term)) = self.switch_entry {
            if applied >= index {
                self.switch_entry = None;
                if self.node.log_term(index).is_none_or(|t| t == term) {
                    p.set_spread();
                }
            }
        }
        if self.node.state_machine().spread_applied() {
            p.set_spread();
        }
    }

    /// Shard 0 lost its leadership: a switch it began is given up (its entry, if proposed, may
    /// still commit; this member then replays it like any other).
    pub(super) fn switch_stepped_down(&mut self) {
        let Some(p) = &self.placement else { return };
        if self.shard_number() == 0 && (self.switch_entry.take().is_some() || p.switching()) {
            p.abandon_switch();
        }
    }
}
