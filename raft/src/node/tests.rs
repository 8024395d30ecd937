//! Node tests: single voter, restart replay, and a three-member group over [`LocalNetwork`].
//! No sleeps: ticks and message delivery are driven by hand.

use std::collections::HashMap;

use super::*;
use crate::mem_log_store::MemLogStore;
use crate::transport::{LocalNetwork, LocalTransport, NoopTransport};

/// Records what it applies; one `rounds` element per `apply` call.
#[derive(Debug, Default)]
struct Recorder {
    applied: u64,
    data: Vec<Vec<u8>>,
    rounds: Vec<usize>,
    /// Rounds applied through `apply_before_append`.
    before_append: usize,
}

impl StateMachine for Recorder {
    type Output = usize;

    fn apply(&mut self, entries: &[Entry]) -> usize {
        for e in entries {
            assert!(e.index > self.applied, "entries are applied once, in order");
            self.applied = e.index;
            if !e.data.is_empty() {
                self.data.push(e.data.clone());
            }
        }
        self.rounds.push(entries.len());
        entries.len()
    }

    fn apply_before_append(&mut self, entries: &[Entry]) -> usize {
        self.before_append += 1;
        self.apply(entries)
    }

    fn applied_index(&self) -> u64 {
        self.applied
    }

    fn restore(&mut self, snapshot: &raft::eraftpb::Snapshot) -> Result<(), RaftError> {
        self.applied = snapshot.get_metadata().index;
        Ok(())
    }
}

fn drive<L: LogStore, S: StateMachine, T: Transport>(node: &mut RaftNode<L, S, T>) {
    while node.has_ready() {
        node.handle_ready().expect("ready");
    }
}

#[test]
fn single_voter_leads_and_applies_a_round_in_one_call() {
    let store = MemLogStore::new();
    let mut node =
        RaftNode::new(&RaftConfig::default(), &[1], store, Recorder::default(), NoopTransport).expect("node");
    node.campaign().expect("campaign");
    drive(&mut node);
    assert!(node.is_leader());
    for i in 0..5u8 {
        node.propose(vec![i]).expect("propose");
    }
    let outcome = node.handle_ready().expect("ready").expect("work");
    assert_eq!(outcome.applied, Some(5), "all five proposals commit and apply in one round");
    drive(&mut node);
    assert_eq!(node.state_machine().data, (0..5u8).map(|i| vec![i]).collect::<Vec<_>>());
    assert_eq!(node.commit_index(), node.last_index());
}

#[test]
fn restart_reapplies_exactly_the_unapplied_suffix() {
    let store = MemLogStore::new();
    let mut node =
        RaftNode::new(&RaftConfig::default(), &[1], store.clone(), Recorder::default(), NoopTransport).expect("node");
    node.campaign().expect("campaign");
    drive(&mut node);
    for i in 0..4u8 {
        node.propose(vec![i]).expect("propose");
        drive(&mut node);
    }
    let last = node.last_index();
    drop(node);
    // The machine had applied up to last-2: exactly the final two entries come back.
    let sm = Recorder { applied: last - 2, ..Default::default() };
    let mut node = RaftNode::new(&RaftConfig::default(), &[1], store, sm, NoopTransport).expect("node");
    node.campaign().expect("campaign");
    drive(&mut node);
    assert_eq!(node.state_machine().data, vec![vec![2u8], vec![3u8]]);
}

type TestNode = RaftNode<MemLogStore, Recorder, LocalTransport>;

struct Cluster {
    net: LocalNetwork,
    nodes: HashMap<u64, TestNode>,
    ids: Vec<u64>,
}

impl Cluster {
    fn new(n: u64) -> Self {
        Self::with_config(n, &RaftConfig::default())
    }

    /// A group of `n` members with `base`'s parameters (each with its own ID).
    fn with_config(n: u64, base: &RaftConfig) -> Self {
        let net = LocalNetwork::new();
        let ids: Vec<u64> = (1..=n).collect();
        let nodes = ids
            .iter()
            .map(|&id| {
                let cfg = RaftConfig { id, ..base.clone() };
                (id, RaftNode::new(&cfg, &ids, MemLogStore::new(), Recorder::default(), net.transport()).expect("node"))
            })
            .collect();
        Self { net, nodes, ids }
    }

    /// Runs Ready rounds and delivers messages until the network is quiet.
    fn settle(&mut self) {
        for _ in 0..1000 {
            for node in self.nodes.values_mut() {
                drive(node);
            }
            let msgs = self.net.drain();
            if msgs.is_empty() && self.nodes.values().all(|n| !n.has_ready()) {
                return;
            }
            for m in msgs {
                if let Some(node) = self.nodes.get_mut(&m.to) {
                    node.step(m).expect("step");
                }
            }
        }
        panic!("cluster did not settle");
    }

    fn tick_all(&mut self, except: Option<u64>) {
        for (id, node) in &mut self.nodes {
            if Some(*id) != except {
                node.tick();
            }
        }
    }

    fn leaders(&self) -> Vec<u64> {
        self.nodes.values().filter(|n| n.is_leader()).map(|n| n.id()).collect()
    }
}

#[test]
fn three_members_elect_one_leader_and_replicate_in_order() {
    let mut c = Cluster::new(3);
    c.nodes.get_mut(&1).expect("node 1").campaign().expect("campaign");
    c.settle();
    assert_eq!(c.leaders(), vec![1]);
    let follower = c.nodes.get_mut(&2).expect("node 2");
    match follower.propose(b"x".to_vec()) {
        Err(RaftError::NotLeader { leader_id }) => assert_eq!(leader_id, 1),
        other => panic!("expected NotLeader, got {other:?}"),
    }
    for i in 0..10u8 {
        c.nodes.get_mut(&1).expect("leader").propose(vec![i]).expect("propose");
    }
    c.settle();
    // Followers learn the new commit index with the next heartbeat.
    c.tick_all(None);
    c.settle();
    let want: Vec<Vec<u8>> = (0..10u8).map(|i| vec![i]).collect();
    for id in &c.ids {
        assert_eq!(c.nodes[id].state_machine().data, want, "member {id}");
    }
    // A read index on the leader covers everything committed.
    let committed = c.nodes[&1].commit_index();
    c.nodes.get_mut(&1).expect("leader").read_index(b"r".to_vec());
    let mut got = None;
    for _ in 0..10 {
        let leader = c.nodes.get_mut(&1).expect("leader");
        if let Some(outcome) = leader.handle_ready().expect("ready") {
            if let Some(rs) = outcome.read_states.into_iter().next() {
                got = Some(rs);
                break;
            }
        }
        for m in c.net.drain() {
            if let Some(node) = c.nodes.get_mut(&m.to) {
                node.step(m).expect("step");
            }
        }
        for id in [2, 3] {
            drive(c.nodes.get_mut(&id).expect("node"));
        }
    }
    let (ctx, index) = got.expect("read state");
    assert_eq!(ctx, b"r".to_vec());
    assert!(index >= committed);
}

#[test]
fn isolated_leader_is_replaced_and_committed_entries_survive() {
    let mut c = Cluster::new(3);
    c.nodes.get_mut(&1).expect("node 1").campaign().expect("campaign");
    c.settle();
    c.nodes.get_mut(&1).expect("leader").propose(b"kept".to_vec()).expect("propose");
    c.settle();
    c.tick_all(None);
    c.settle();
    c.net.isolate(1, &c.ids.clone());
    // Enough ticks for an election among 2 and 3 (randomised timeout is below 2 x election_tick).
    for _ in 0..40 {
        c.tick_all(None);
        c.settle();
        if c.leaders().iter().any(|&l| l != 1) {
            break;
        }
    }
    let new_leader = c.leaders().into_iter().find(|&l| l != 1).expect("a new leader among 2 and 3");
    c.nodes.get_mut(&new_leader).expect("leader").propose(b"after".to_vec()).expect("propose");
    c.settle();
    c.tick_all(None);
    c.settle();
    for id in [2, 3] {
        assert_eq!(c.nodes[&id].state_machine().data, vec![b"kept".to_vec(), b"after".to_vec()], "member {id}");
    }
    c.net.heal();
    for _ in 0..40 {
        c.tick_all(None);
        c.settle();
    }
    assert_eq!(
        c.nodes[&1].state_machine().data,
        vec![b"kept".to_vec(), b"after".to_vec()],
        "the old leader catches up"
    );
    assert_eq!(c.leaders().len(), 1);
}

#[test]
fn commit_index_rides_on_the_next_append_and_is_told_on_demand() {
    // raft's own behaviour: the commit is broadcast at once, followers apply without a tick.
    let mut plain = Cluster::new(3);
    plain.nodes.get_mut(&1).expect("node 1").campaign().expect("campaign");
    plain.settle();
    plain.nodes.get_mut(&1).expect("leader").propose(b"a".to_vec()).expect("propose");
    plain.settle();
    assert!(!plain.nodes[&1].commit_untold());
    for id in [2, 3] {
        assert_eq!(plain.nodes[&id].state_machine().data, vec![b"a".to_vec()], "member {id}");
    }

    let mut c = Cluster::with_config(3, &RaftConfig { commit_with_next_append: true, ..RaftConfig::default() });
    c.nodes.get_mut(&1).expect("node 1").campaign().expect("campaign");
    c.settle();
    assert_eq!(c.leaders(), vec![1]);
    // The leader's first entry committed with nothing to carry the index.
    assert!(c.nodes[&1].commit_untold());
    c.nodes.get_mut(&1).expect("leader").tell_commit();
    c.settle();
    assert!(!c.nodes[&1].commit_untold());
    let applied_before: Vec<u64> = [2, 3].iter().map(|id| c.nodes[id].state_machine().applied).collect();

    c.nodes.get_mut(&1).expect("leader").propose(b"a".to_vec()).expect("propose");
    c.settle();
    assert_eq!(c.nodes[&1].state_machine().data, vec![b"a".to_vec()], "the leader applies once a quorum has it");
    assert!(c.nodes[&1].commit_untold());
    for (i, id) in [2u64, 3].iter().enumerate() {
        let f = c.nodes[id].state_machine();
        assert!(f.data.is_empty(), "member {id} has not heard the commit");
        assert_eq!(f.applied, applied_before[i], "member {id}");
    }

    c.nodes.get_mut(&1).expect("leader").propose(b"b".to_vec()).expect("propose");
    c.settle();
    for id in [2, 3] {
        let f = c.nodes[&id].state_machine();
        assert_eq!(f.data, vec![b"a".to_vec()], "the next append told member {id}");
        // Round a was applied in the Ready that persisted round b, ahead of b's append.
        assert_eq!(f.before_append, 1, "member {id}");
    }
    assert_eq!(c.nodes[&1].state_machine().before_append, 0, "the leader persists no entries while it applies");
    c.nodes.get_mut(&1).expect("leader").tell_commit();
    c.settle();
    assert!(!c.nodes[&1].commit_untold());
    for id in [2, 3] {
        assert_eq!(c.nodes[&id].state_machine().data, vec![b"a".to_vec(), b"b".to_vec()], "member {id}");
    }
    assert!(!c.nodes.get_mut(&2).expect("follower").commit_untold(), "never on a follower");
}
