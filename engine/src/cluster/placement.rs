//! [`Placement`]: how the member's shards place their leaders right now, and the switch of a
//! cluster grown from one member from one member leading every shard to leaders spread over the
//! members, taken at one entry of shard 0's log (see `engine/SHARDING.md`, "Switching a grown
//! cluster to spread leaders").
//!
//! The switch runs in three steps on the member that evaluates every write (it leads every
//! shard, `shard::colocate`), driven by its shard 0:
//!
//! ```text
//!   1. begin: `switching` set; shard 0 counts as done, the other shards not yet
//!   2. every other shard, at the top of its next loop, sees `switching` and acknowledges:
//!      it finished any round it evaluated from the counter and will take no more
//!   3. shard 0 proposes one entry: the placement switch with a revision ceiling above the
//!      counter's last revision; every member that applies it spreads from then on
//! ```
//!
//! A shard evaluates from the member's counter only while [`Placement::counter_open`] holds,
//! read after its leadership checks, so once every shard acknowledged, the counter stands still
//! until the member spreads, and the ceiling is above every revision it ever took. The switch is
//! given up (step 1 undone) only while its entry is not proposed, or when shard 0 loses its
//! leadership: the member then no longer leads every shard, and it evaluates again only after
//! it leads shard 0 in a later term with every earlier entry applied, the switch's among them if
//! it committed.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use super::{PLACEMENT_GROWING, PLACEMENT_SPREAD};

/// Shard 0's record of how the cluster places its shards' leaders (u32 BE,
/// `cluster::PLACEMENT_*`), written when the member is bootstrapped or joins, and by the
/// switch's entry when it is applied.
pub const META_LEADER_PLACEMENT: &[u8] = b"leader_placement";

/// The member's leader placement as it stands, shared by its shards and the network plane.
#[derive(Debug)]
pub struct Placement {
    /// `cluster::PLACEMENT_*`: what shard 0 last applied (or the data directory recorded).
    mode: AtomicU32,
    /// Step 1 of the switch is under way on this member (see the module doc).
    switching: AtomicBool,
    /// Per shard: it saw `switching` at the top of a loop (step 2).
    acks: Vec<AtomicBool>,
    /// `ClusterConfig::spread_at_voters`.
    spread_at_voters: usize,
}

impl Placement {
    /// The placement of a member of `shards` shards, as its data directory records it; a
    /// growing cluster switches once it has `spread_at_voters` voters.
    pub fn new(mode: u32, shards: usize, spread_at_voters: usize) -> Self {
        Self {
            mode: AtomicU32::new(mode),
            switching: AtomicBool::new(false),
            acks: (0..shards).map(|_| AtomicBool::new(false)).collect(),
            spread_at_voters,
        }
    }

    /// The voters a growing cluster needs before it switches.
    pub fn spread_at_voters(&self) -> usize {
        self.spread_at_voters
    }

    /// `cluster::PLACEMENT_*` as it stands.
    pub fn mode(&self) -> u32 {
        self.mode.load(Ordering::SeqCst)
    }

    /// True once the shards' leaders spread and take revisions from the revision group.
    pub fn spread(&self) -> bool {
        self.mode() == PLACEMENT_SPREAD
    }

    /// True while one member leads every shard but the cluster switches to spread leaders once
    /// it has grown (see [`Placement::begin_switch`]).
    pub fn growing(&self) -> bool {
        self.mode() == PLACEMENT_GROWING
    }

    /// Records that shard 0 applied the switch (or a snapshot past it): from now on the shards
    /// take revisions from the revision group.
    pub fn set_spread(&self) {
        self.mode.store(PLACEMENT_SPREAD, Ordering::SeqCst);
        self.switching.store(false, Ordering::SeqCst);
    }

    /// True while a member leading every shard may take revisions from its own counter: not
    /// spread and no switch under way. Read after the shard's leadership checks.
    pub fn counter_open(&self) -> bool {
        !self.spread() && !self.switching.load(Ordering::SeqCst)
    }

    /// Step 1: stops every shard but shard 0 (the caller's) from evaluating from the counter.
    pub fn begin_switch(&self) {
        for (s, a) in self.acks.iter().enumerate() {
            a.store(s == 0, Ordering::SeqCst);
        }
        self.switching.store(true, Ordering::SeqCst);
    }

    /// True while a switch is under way here.
    pub fn switching(&self) -> bool {
        self.switching.load(Ordering::SeqCst)
    }

    /// Undoes step 1 (see the module doc for when that is safe).
    pub fn abandon_switch(&self) {
        self.switching.store(false, Ordering::SeqCst);
    }

    /// Step 2, called by shard `s` at the top of its loop, after whatever it evaluated before.
    pub fn acknowledge(&self, s: u32) {
        if self.switching.load(Ordering::SeqCst) {
            if let Some(a) = self.acks.get(s as usize) {
                a.store(true, Ordering::SeqCst);
            }
        }
    }

    /// True once every shard acknowledged the switch: the counter stands still.
    pub fn all_acknowledged(&self) -> bool {
        self.switching.load(Ordering::SeqCst) && self.acks.iter().all(|a| a.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::PLACEMENT_TOGETHER;

    #[test]
    fn the_counter_closes_until_every_shard_acknowledged_the_switch() {
        let p = Placement::new(PLACEMENT_GROWING, 3, 3);
        assert!(p.counter_open() && p.growing() && !p.spread());
        p.acknowledge(1);
        p.begin_switch();
        assert!(!p.counter_open(), "no shard evaluates from the counter once the switch began");
        assert!(!p.all_acknowledged(), "an acknowledgement from before the switch does not count");
        p.acknowledge(1);
        assert!(!p.all_acknowledged());
        p.acknowledge(2);
        assert!(p.all_acknowledged());
        p.abandon_switch();
        assert!(p.counter_open() && !p.all_acknowledged());
        p.begin_switch();
        assert!(!p.all_acknowledged(), "a new switch waits for new acknowledgements");
        p.set_spread();
        assert!(p.spread() && !p.switching() && !p.counter_open());
    }

    #[test]
    fn together_stays_together() {
        let p = Placement::new(PLACEMENT_TOGETHER, 2, 3);
        assert!(p.counter_open() && !p.growing() && !p.spread());
    }
}
