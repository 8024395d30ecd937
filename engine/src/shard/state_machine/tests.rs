//! Evaluation on the leader and replay of recorded revisions.

use std::sync::Arc;

use ballast_proto::ballastpb::{raft_command::Command, RaftCommand};
use ballast_proto::etcdserverpb::{
    compare::{CompareResult, CompareTarget, TargetUnion},
    request_op::Request,
    Compare, DeleteRangeRequest, LeaseGrantRequest, PutRequest, RangeRequest, RequestOp, TxnRequest,
};
use ballast_raft::{Entry, EntryType, StateMachine};
use prost::Message;

use super::{Evaluated, ShardStateMachine, WriteResponse};
use crate::apply::kv;
use crate::clock::ManualClock;
use crate::mvcc::RevisionCounter;
use crate::storage::mem::MemBackend;

fn open(revs: &Arc<RevisionCounter>) -> ShardStateMachine<MemBackend> {
    ShardStateMachine::open(MemBackend::new(), 2, 1 << 20, Arc::clone(revs), 1, Arc::new(ManualClock::new()))
        .expect("open state machine")
}

fn put(key: &str) -> Command {
    Command::Put(PutRequest { key: key.as_bytes().to_vec().into(), value: b"v".to_vec().into(), ..Default::default() })
}

fn evaluate(sm: &mut ShardStateMachine<MemBackend>, cmd: Command) -> Evaluated {
    sm.evaluate(cmd).expect("no storage error")
}

fn entry(index: u64, cmd: &RaftCommand) -> Entry {
    Entry { index, term: 1, entry_type: EntryType::EntryNormal as i32, data: cmd.encode_to_vec(), ..Default::default() }
}

fn get(sm: &ShardStateMachine<MemBackend>, key: &str) -> (i64, i64) {
    let r = kv::range(sm.store(), &RangeRequest { key: key.as_bytes().to_vec().into(), ..Default::default() })
        .expect("range");
    r.kvs.first().map_or((0, 0), |kv| (kv.mod_revision, kv.version))
}

#[test]
fn only_writes_that_change_a_key_take_a_revision() {
    let revs = Arc::new(RevisionCounter::new(1));
    let mut sm = open(&revs);
    let ev = evaluate(&mut sm, put("a"));
    assert_eq!(ev.entry.as_ref().map(|e| e.revision), Some(2));
    assert!(matches!(ev.result, Ok(WriteResponse::Put(ref r)) if r.header.as_ref().map(|h| h.revision) == Some(2)));

    let nothing = Command::DeleteRange(DeleteRangeRequest { key: b"zz".to_vec().into(), ..Default::default() });
    let ev = evaluate(&mut sm, nothing);
    assert!(ev.entry.is_none(), "a delete of no key needs no entry");
    assert!(ev.result.is_ok());

    let failing = Command::Txn(TxnRequest {
        compare: vec![Compare {
            result: CompareResult::Equal as i32,
            target: CompareTarget::Version as i32,
            key: b"a".to_vec().into(),
            target_union: Some(TargetUnion::Version(7)),
            ..Default::default()
        }],
        success: vec![RequestOp { request: Some(Request::RequestPut(PutRequest::default())) }],
        ..Default::default()
    });
    let ev = evaluate(&mut sm, failing);
    assert!(ev.entry.is_none(), "a txn whose taken branch writes nothing needs no entry");

    let grant = Command::LeaseGrant(LeaseGrantRequest { id: 5, ttl: 10 });
    let ev = evaluate(&mut sm, grant);
    assert_eq!(ev.entry.as_ref().map(|e| e.revision), Some(0), "a lease grant is logged without a revision");

    let unknown_lease = Command::Put(PutRequest { key: b"b".to_vec().into(), lease: 99, ..Default::default() });
    let ev = evaluate(&mut sm, unknown_lease);
    assert!(ev.entry.is_none() && ev.result.is_err());
    assert_eq!(revs.last(), 2, "no revision was taken after the put");
}

#[test]
fn replay_gives_each_write_its_recorded_revision() {
    // The leader evaluated two puts at revisions 2 and 4 (another shard took 3).
    let leader_revs = Arc::new(RevisionCounter::new(1));
    let mut leader = open(&leader_revs);
    let first = evaluate(&mut leader, put("a")).entry.expect("entry");
    leader_revs.allocate();
    let second = evaluate(&mut leader, put("b")).entry.expect("entry");
    assert_eq!((first.revision, second.revision), (2, 4));

    // After a crash that lost the state but not the log, the counter has moved on (the other
    // shard wrote up to 9): replay must not renumber the acknowledged writes.
    let revs = Arc::new(RevisionCounter::new(9));
    let mut replayed = open(&revs);
    replayed.apply(&[entry(1, &first), entry(2, &second)]).expect("apply");
    assert_eq!((get(&replayed, "a").0, get(&replayed, "b").0), (2, 4));
    assert_eq!(revs.last(), 9);
    assert_eq!(replayed.applied_index(), 2);
}

#[test]
fn entries_evaluated_here_are_not_applied_twice() {
    let revs = Arc::new(RevisionCounter::new(1));
    let mut sm = open(&revs);
    let e = evaluate(&mut sm, put("a")).entry.expect("entry");
    sm.proposed(1, 1);
    sm.apply(&[entry(1, &e)]).expect("apply");
    assert_eq!(get(&sm, "a"), (2, 1), "applying the evaluated entry again would make version 2 at revision 3");
    assert_eq!(revs.last(), 2);
}
