//! A leader's conf change in flight and its rounds: the state written when the conf change is
//! applied holds only committed writes.

use std::sync::Arc;
use std::time::Duration;

use ballast_proto::ballastpb::raft_command::Command;
use ballast_proto::etcdserverpb::{PutRequest, RangeRequest};
use ballast_raft::{ConfChange, ConfChangeType, Message, MessageType};

use super::msg::{GroupProgress, ShardMsg};
use super::{Shard, ShardConfig, ShardGroup, ShardHandle};
use crate::apply::kv;
use crate::clock::{Clock, ManualClock};
use crate::error::Result;
use crate::header::HeaderInfo;
use crate::mvcc::RevisionCounter;
use crate::shard::state_machine::ShardStateMachine;
use crate::storage::mem::MemBackend;

/// How long a test waits for an answer the shard owes it (its thread may be slow to run on a
/// loaded machine; a correct shard answers at once).
const ANSWER_WITHIN: Duration = Duration::from_secs(20);

/// Waits for the answer on `rx` from a non-runtime thread.
fn answer<T: Send + 'static>(rx: tokio::sync::oneshot::Receiver<Result<T>>, what: &str) -> T {
    let (tx, done) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(rx.blocking_recv());
    });
    match done.recv_timeout(ANSWER_WITHIN) {
        Ok(Ok(Ok(v))) => v,
        Ok(Ok(Err(e))) => panic!("{what}: {e}"),
        Ok(Err(_)) => panic!("{what}: the shard dropped the request"),
        Err(_) => panic!("{what}: no answer within {ANSWER_WITHIN:?}"),
    }
}

fn conf_change(
    handle: &ShardHandle,
    change_type: ConfChangeType,
    node_id: u64,
) -> tokio::sync::oneshot::Receiver<Result<()>> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let cc = ConfChange { change_type: change_type as i32, node_id, ..Default::default() };
    handle.send(ShardMsg::ConfChange(cc, tx)).expect("the mailbox takes the conf change");
    rx
}

fn last_index(handle: &ShardHandle) -> u64 {
    let (tx, rx) = tokio::sync::oneshot::channel();
    handle.send(ShardMsg::Progress(tx)).expect("the mailbox takes the request");
    let GroupProgress { last_index, .. } = answer(rx, "progress");
    last_index
}

/// The mod revision of `key` in the state the backend holds (what a restart would open).
fn stored(backend: &MemBackend, key: &str) -> Option<i64> {
    let revs = Arc::new(RevisionCounter::default());
    let sm = ShardStateMachine::open(backend.clone(), 2, 1 << 20, revs, 1, Arc::new(ManualClock::new()))
        .expect("open the stored state");
    let r = kv::range(sm.store(), &RangeRequest { key: key.as_bytes().to_vec().into(), ..Default::default() })
        .expect("range");
    r.kvs.first().map(|kv| kv.mod_revision)
}

/// A leader with a follower that does not answer proposes a conf change, then gets a write:
/// the write is evaluated only once the conf change is applied. Evaluated while the conf change
/// was uncommitted, its round would sit in the state written when the conf change is applied,
/// with an applied index below the round's entry: a restart would then hold a write that may
/// never commit, or apply its entry a second time when it does (the same key at the same
/// revision twice, which stops the shard).
#[test]
fn a_round_is_not_evaluated_while_a_conf_change_is_uncommitted() {
    let backend = MemBackend::new();
    let clock = Arc::new(ManualClock::new());
    let cfg = ShardConfig::default();
    let ids = HeaderInfo { cluster_id: 1, member_id: 1, raft_term: 0 };
    let (shard, handle) = Shard::open(
        backend.clone(),
        cfg,
        Arc::new(RevisionCounter::default()),
        ids,
        Arc::clone(&clock) as Arc<dyn Clock>,
        ShardGroup::alone(0),
    )
    .expect("open a shard");
    let beat = super::stall::Heartbeat::new(clock.now());
    // The manual clock never ticks: the leader keeps its leadership without hearing from 2.
    let thread = std::thread::spawn(move || shard.run(&beat));

    // Alone, the member commits the addition of voter 2 at once; from then on nothing commits
    // until 2 answers, and it answers only as the test says.
    answer(conf_change(&handle, ConfChangeType::AddNode, 2), "add voter 2");
    let learner = conf_change(&handle, ConfChangeType::AddLearnerNode, 3);
    let cc_index = last_index(&handle);
    let (tx, put) = tokio::sync::oneshot::channel();
    let req = PutRequest { key: b"k".to_vec().into(), value: b"v".to_vec().into(), ..Default::default() };
    handle.send(ShardMsg::Write(Command::Put(req), tx)).expect("the mailbox takes the write");
    // Once the write was taken from the mailbox (the Progress after it is answered), voter 2
    // acknowledges the log up to the conf change only.
    last_index(&handle);
    let term = handle.term.load(std::sync::atomic::Ordering::SeqCst);
    let ack = Message {
        msg_type: MessageType::MsgAppendResponse as i32,
        from: 2,
        to: 1,
        term,
        index: cc_index,
        ..Default::default()
    };
    handle.send(ShardMsg::Raft(vec![ack.clone()])).expect("the mailbox takes the ack");
    answer(learner, "add learner 3");
    assert_eq!(stored(&backend, "k"), None, "the state written with the conf change holds an uncommitted write");

    // Proposed now that the conf change is applied; acknowledged up to its entry, it commits
    // and is answered.
    let mut write_index = last_index(&handle);
    for _ in 0..1_000 {
        if write_index > cc_index {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
        write_index = last_index(&handle);
    }
    assert!(write_index > cc_index, "the write was never proposed");
    let ack = Message { index: write_index, ..ack };
    handle.send(ShardMsg::Raft(vec![ack])).expect("the mailbox takes the ack");
    answer(put, "the put");
    assert!(stored(&backend, "k").is_some(), "the committed write is stored");
    handle.send(ShardMsg::Shutdown).expect("shutdown");
    thread.join().expect("the shard thread").expect("the shard stops cleanly");
}
