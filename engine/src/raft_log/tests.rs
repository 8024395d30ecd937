//! What the log store writes per round, and what it gives back on open.

use super::*;
use crate::storage::MemBackend;

fn entry(index: u64, term: u64) -> Entry {
    Entry { index, term, data: vec![index as u8], ..Default::default() }
}

fn saved_hard_state(backend: &MemBackend) -> HardState {
    let v = backend.get(Cf::Raft, HARD_STATE).expect("get").expect("a saved hard state");
    HardState::decode(v.as_slice()).expect("decode")
}

#[test]
fn a_moved_commit_index_alone_is_not_written_and_open_raises_it_to_the_applied_index() {
    let backend = MemBackend::new();
    let log = BackendLogStore::open(backend.clone(), 16).expect("open");
    let hs = |commit| HardState { term: 2, vote: 1, commit };
    log.append(&[entry(1, 2), entry(2, 2), entry(3, 2)], Some(&hs(0)), true).expect("append");
    assert_eq!(saved_hard_state(&backend), hs(0));

    // The leader's Ready after a quorum's answers, and its light ready: memory only.
    log.append(&[], Some(&hs(2)), false).expect("commit only");
    log.set_commit(3).expect("set commit");
    assert_eq!(saved_hard_state(&backend), hs(0));
    assert_eq!(log.initial_state().expect("state").hard_state.commit, 3);

    // A new term or vote is written at once, commit index included.
    let voted = HardState { term: 3, vote: 2, commit: 3 };
    log.append(&[], Some(&voted), true).expect("vote");
    assert_eq!(saved_hard_state(&backend), voted);
    // And a moved commit index rides with the next entries.
    let next = HardState { commit: 4, ..voted.clone() };
    log.append(&[entry(4, 3)], Some(&next), true).expect("append");
    assert_eq!(saved_hard_state(&backend), next);

    // Applied past the saved commit index (the state machine saved round 5 with its data): on
    // open, the commit index is at least the applied index, or raft-rs would refuse to start.
    log.append(&[entry(5, 3)], None, true).expect("append");
    let mut wb = WriteBatch::new();
    wb.put(Cf::Meta, META_APPLIED_INDEX.to_vec(), 5u64.to_be_bytes().to_vec());
    backend.write(wb, WriteOpts::default()).expect("applied");
    let reopened = BackendLogStore::open(backend.clone(), 16).expect("reopen");
    let state = reopened.initial_state().expect("state");
    assert_eq!((state.hard_state.term, state.hard_state.vote, state.hard_state.commit), (3, 2, 5));
    assert_eq!(raft::Storage::last_index(&reopened).expect("last"), 5);
}

#[test]
fn open_keeps_a_saved_commit_index_above_the_applied_one() {
    let backend = MemBackend::new();
    let log = BackendLogStore::open(backend.clone(), 16).expect("open");
    log.append(&[entry(1, 1), entry(2, 1)], Some(&HardState { term: 1, vote: 1, commit: 2 }), true).expect("append");
    let mut wb = WriteBatch::new();
    wb.put(Cf::Meta, META_APPLIED_INDEX.to_vec(), 1u64.to_be_bytes().to_vec());
    backend.write(wb, WriteOpts::default()).expect("applied");
    let reopened = BackendLogStore::open(backend, 16).expect("reopen");
    assert_eq!(reopened.initial_state().expect("state").hard_state.commit, 2);
}

#[test]
fn the_state_machines_write_goes_out_with_the_next_append() {
    let backend = MemBackend::new();
    let log = BackendLogStore::open(backend.clone(), 16).expect("open");
    let next = log.next_append();
    let mut wb = WriteBatch::new();
    wb.put(Cf::Meta, META_APPLIED_INDEX.to_vec(), 1u64.to_be_bytes().to_vec());
    next.push(wb);
    let mut more = WriteBatch::new();
    more.put(Cf::Kv, b"k".to_vec(), b"v".to_vec());
    next.push(more);
    assert_eq!(backend.get(Cf::Meta, META_APPLIED_INDEX).expect("get"), None, "nothing written yet");

    log.append(&[entry(1, 1), entry(2, 1)], Some(&HardState { term: 1, vote: 1, commit: 1 }), true).expect("append");
    assert_eq!(backend.get(Cf::Meta, META_APPLIED_INDEX).expect("get"), Some(1u64.to_be_bytes().to_vec()));
    assert_eq!(backend.get(Cf::Kv, b"k").expect("get"), Some(b"v".to_vec()));
    assert!(backend.get(Cf::Raft, &entry_key(2)).expect("get").is_some());
    assert!(next.take().is_none(), "taken by the append");
}

#[test]
fn the_entries_kept_in_memory_are_bounded_by_bytes_and_the_rest_read_from_the_backend() {
    let backend = MemBackend::new();
    let big = |index: u64| Entry { index, term: 1, data: vec![index as u8; 10_000], ..Default::default() };
    let log = BackendLogStore::open(backend.clone(), 16).expect("open").with_tail_bytes(25_000);
    log.append(&(1..=10).map(big).collect::<Vec<_>>(), None, true).expect("append");
    // Ten entries of 10 KB: the count (16) would keep them all, the bytes keep the newest two.
    let kept = |log: &BackendLogStore<MemBackend>| {
        let inner = log.inner.read();
        (inner.tail.iter().map(|e| e.index).collect::<Vec<_>>(), inner.tail_bytes)
    };
    let (indexes, bytes) = kept(&log);
    assert_eq!(indexes, [9, 10]);
    assert_eq!(bytes, big(9).encoded_len() + big(10).encoded_len());
    // Every entry still reads back, the older ones from the backend.
    let all = raft::Storage::entries(&log, 1, 11, None, GetEntriesContext::empty(false)).expect("entries");
    assert_eq!(all, (1..=10).map(big).collect::<Vec<_>>());
    // One entry larger than the bound is kept alone: the Ready loop reads back what it appended.
    let huge = Entry { index: 11, term: 1, data: vec![0; 40_000], ..Default::default() };
    log.append(std::slice::from_ref(&huge), None, true).expect("append");
    assert_eq!(kept(&log), (vec![11], huge.encoded_len()));
    // A conflicting append replaces the tail's end and keeps the count of bytes right.
    let small = |index: u64| Entry { index, term: 2, data: vec![1; 100], ..Default::default() };
    log.append(&[small(11), small(12)], None, true).expect("append");
    assert_eq!(kept(&log), (vec![11, 12], small(11).encoded_len() + small(12).encoded_len()));
    // On open the loaded entries are trimmed to the bound too: the newest two of 10 KB and
    // the two small ones.
    let reopened = BackendLogStore::open(backend, 16).expect("reopen").with_tail_bytes(25_000);
    assert_eq!(kept(&reopened).0, [9, 10, 11, 12]);
}

#[test]
fn terms_read_alike_from_the_tail_and_the_backend() {
    let backend = MemBackend::new();
    let log = BackendLogStore::open(backend, 3).expect("open");
    // Terms 1, 1, 2, 2, 3, 3: the tail keeps the newest three, the rest are read back.
    let entries: Vec<_> = (1..=6).map(|i| entry(i, i.div_ceil(2))).collect();
    log.append(&entries, None, true).expect("append");
    assert_eq!(log.inner.read().tail.iter().map(|e| e.index).collect::<Vec<_>>(), [4, 5, 6]);
    for e in &entries {
        assert_eq!(raft::Storage::term(&log, e.index).expect("term"), e.term, "term of entry {}", e.index);
    }
    assert!(matches!(raft::Storage::term(&log, 7), Err(raft::Error::Store(RaftStorageError::Unavailable))));
}
