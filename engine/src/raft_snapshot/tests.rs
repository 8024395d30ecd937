use super::*;
use crate::storage::mem::MemBackend;
use crate::storage::rocks::{RocksBackend, RocksOptions};

fn put(b: &impl KvBackend, cf: Cf, k: &[u8], v: &[u8]) {
    let mut wb = WriteBatch::new();
    wb.put(cf, k.to_vec(), v.to_vec());
    b.write(wb, WriteOpts { sync: true }).expect("write");
}

/// Checkpoints `src` and cuts it as a leader does, writing what it sends into `dir/tables`
/// as a follower does; answers that directory and the names of the files written.
fn cut_of<B: KvBackend>(src: &B, dir: &Path) -> (PathBuf, Vec<String>) {
    let cp = dir.join("checkpoint");
    src.checkpoint(&cp).expect("checkpoint");
    let tables = dir.join("tables");
    std::fs::create_dir_all(&tables).expect("mkdir");
    let mut writer = TableWriter::start::<B>(&tables, None).expect("writer");
    cut::<B>(&cp, &mut |name, pairs| {
        assert!(pairs.len() < STATE_ENTRY_BYTES + (128 << 10), "{name}: {} bytes", pairs.len());
        writer.push(&name, pairs)
    })
    .expect("cut");
    writer.finish().expect("written");
    let mut names: Vec<String> = std::fs::read_dir(&tables)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    (tables, names)
}

fn all(b: &impl KvBackend, cf: Cf) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    b.scan(cf, &[], None, ScanOrder::Forward, &mut |k, v| {
        out.push((k.to_vec(), v.to_vec()));
        true
    })
    .expect("scan");
    out
}

#[test]
fn install_replaces_the_replicated_state_and_keeps_the_members_own_keys() {
    let dir = tempfile::tempdir().expect("tempdir");
    let live = MemBackend::new();
    put(&live, Cf::Kv, b"old", b"1");
    put(&live, Cf::Lease, b"old-lease", b"1");
    put(&live, Cf::Meta, b"member_id", b"me");
    put(&live, Cf::Meta, b"applied_index", b"old");
    put(&live, Cf::Meta, b"gone", b"old");
    put(&live, Cf::Raft, b"e1", b"entry");
    let src = MemBackend::new();
    put(&src, Cf::Kv, b"new", b"2");
    put(&src, Cf::Meta, b"member_id", b"leader");
    put(&src, Cf::Meta, b"applied_index", b"new");
    put(&src, Cf::Raft, b"e9", b"the leader's entry");
    let (tables, names) = cut_of(&src, dir.path());
    assert_eq!(names, ["kv-0000.pairs", "meta-0000.pairs"], "the raft log and empty families are not sent");
    let staging = staging_dir(&tables);
    install(&live, &tables, &staging).expect("install");
    install(&live, &tables, &staging).expect("installing twice gives the same state");
    assert_eq!(all(&live, Cf::Kv), [(b"new".to_vec(), b"2".to_vec())]);
    assert_eq!(all(&live, Cf::Lease), []);
    assert_eq!(live.get(Cf::Meta, b"member_id").expect("get"), Some(b"me".to_vec()), "the member's own ID stays");
    assert_eq!(live.get(Cf::Meta, b"applied_index").expect("get"), Some(b"new".to_vec()));
    assert_eq!(live.get(Cf::Meta, b"gone").expect("get"), None);
    assert_eq!(all(&live, Cf::Raft), [(b"e1".to_vec(), b"entry".to_vec())], "the raft log is not touched");
}

#[test]
fn a_file_of_no_replicated_family_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("raft-0000.pairs"), b"").expect("write");
    let live = MemBackend::new();
    put(&live, Cf::Kv, b"k", b"v");
    let err = install(&live, dir.path(), &dir.path().join("staging")).expect_err("a raft file");
    assert!(err.to_string().contains("no replicated column family"), "{err}");
    assert_eq!(live.get(Cf::Kv, b"k").expect("get"), Some(b"v".to_vec()), "nothing was dropped");
}

#[test]
fn an_install_cut_short_is_finished_at_the_next_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = MemBackend::new();
    put(&src, Cf::Kv, b"k", b"v");
    let (tables, _) = cut_of(&src, dir.path());
    let live = MemBackend::new();
    let log = crate::raft_log::BackendLogStore::open(live.clone(), 16).expect("log");
    mark(
        &live,
        &SnapshotInstall {
            index: 42,
            term: 3,
            voters: vec![1, 2, 3],
            learners: vec![],
            dir: tables.display().to_string(),
        },
    )
    .expect("mark");
    resume(&live, &log).expect("resume");
    assert_eq!(live.get(Cf::Kv, b"k").expect("get"), Some(b"v".to_vec()));
    assert_eq!(marker(&live).expect("marker"), None);
    assert_eq!(raft::Storage::first_index(&log).expect("first"), 43, "the log starts after the snapshot");
    assert!(!tables.exists(), "the received files are removed");
}

/// On RocksDB: a leader's state of several table files per family, an install stopped after
/// `kv` was taken in and the store closed (a crash), then the start's resume: the member
/// holds exactly the leader's replicated state and its own keys.
#[test]
fn rocksdb_an_install_stopped_half_way_is_finished_exactly_after_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = RocksOptions::default();
    let src = RocksBackend::open(&dir.path().join("leader"), &opts).expect("open");
    // Values past one table file's size, so `kv` is cut into several; not compressible, as
    // the file size counts compressed bytes.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut wb = WriteBatch::new();
    for i in 0..(crate::storage::TABLE_FILE_BYTES / (64 << 10) + 200) {
        let value: Vec<u8> = (0..(64 << 10) / 8)
            .flat_map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x.to_le_bytes()
            })
            .collect();
        wb.put(Cf::Kv, format!("k{i:08}").into_bytes(), value);
        if wb.size_bytes() > 8 << 20 {
            src.write(std::mem::take(&mut wb), WriteOpts::default()).expect("write");
        }
    }
    wb.put(Cf::Lease, b"lease-1".to_vec(), b"ttl".to_vec());
    wb.put(Cf::Meta, b"applied_index".to_vec(), 77u64.to_be_bytes().to_vec());
    wb.put(Cf::Meta, b"member_id".to_vec(), b"leader".to_vec());
    wb.put(Cf::Raft, b"e1".to_vec(), b"leader log".to_vec());
    src.write(wb, WriteOpts::default()).expect("write");
    let (tables, names) = cut_of(&src, dir.path());
    assert!(names.iter().filter(|n| n.starts_with("kv-")).count() > 1, "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("raft-")), "{names:?}");

    let live_dir = dir.path().join("member");
    let live = RocksBackend::open(&live_dir, &opts).expect("open");
    put(&live, Cf::Kv, b"k00000001", b"old");
    put(&live, Cf::Kv, b"zz-old-only", b"old");
    put(&live, Cf::Meta, b"member_id", b"me");
    put(&live, Cf::Meta, b"old-meta", b"old");
    let m = SnapshotInstall {
        index: 77,
        term: 2,
        voters: vec![1, 2, 3, 4],
        learners: vec![],
        dir: tables.display().to_string(),
    };
    mark(&live, &m).expect("mark");
    live.drop_range(Cf::Kv, &[], &[0xff; 64]).expect("drop");
    let kv: Vec<PathBuf> = names.iter().filter(|n| n.starts_with("kv-")).map(|n| tables.join(n)).collect();
    live.ingest_tables(Cf::Kv, &kv, &staging_dir(&tables)).expect("ingest kv");
    drop(live);

    let live = RocksBackend::open(&live_dir, &opts).expect("reopen");
    let log = crate::raft_log::BackendLogStore::open(live.clone(), 16).expect("log");
    resume(&live, &log).expect("resume");
    assert_eq!(all(&live, Cf::Kv), all(&src, Cf::Kv));
    assert_eq!(all(&live, Cf::Lease), [(b"lease-1".to_vec(), b"ttl".to_vec())]);
    assert_eq!(live.get(Cf::Meta, b"applied_index").expect("get"), Some(77u64.to_be_bytes().to_vec()));
    assert_eq!(live.get(Cf::Meta, b"member_id").expect("get"), Some(b"me".to_vec()));
    assert_eq!(live.get(Cf::Meta, b"old-meta").expect("get"), None);
    assert_eq!(live.get(Cf::Raft, b"e1").expect("get"), None, "the leader's log never arrives");
    assert_eq!(marker(&live).expect("marker"), None);
    assert_eq!(raft::Storage::first_index(&log).expect("first"), 78);
    assert!(!tables.exists(), "the received files are removed");
}

/// Cache budget of the rebuild tests: room for some of the newest values, not all, so both
/// the cached and the stepped-over paths are taken.
const TEST_CACHE_BYTES: usize = 4 << 10;

/// Writes a history with everything the in-memory state tracks into an MVCC store on `src`:
/// keys put, overwritten, deleted and put again (new generations), leases attached and
/// dropped, a transaction of several changes, a compaction, values past the cache's budget.
fn write_history<B: KvBackend + Clone>(src: &B) {
    use crate::mvcc::{KeyRange, MvccStore};
    use bytes::Bytes;
    let (mut store, _) = MvccStore::open(src.clone()).expect("open");
    let put = |store: &mut MvccStore<B>, keys: &[&str], value: usize, lease: i64| {
        let mut txn = store.begin();
        for k in keys {
            store
                .put_with(&mut txn, Bytes::from(k.to_string()), |_| Ok((Bytes::from(vec![b'v'; value]), lease)))
                .expect("put");
        }
        store.end(txn);
        store.flush(WriteOpts::default()).expect("flush");
    };
    for i in 0..40 {
        put(&mut store, &[&format!("a/{i:03}")], 50 + i * 7, if i % 3 == 0 { 0x10 + i as i64 } else { 0 });
    }
    put(&mut store, &["a/001", "a/002", "b/1", "b/2"], 300, 0);
    put(&mut store, &["a/003"], 10, 0x77);
    let mut txn = store.begin();
    store
        .delete_range(&mut txn, &KeyRange::new(Bytes::from_static(b"a/010"), Bytes::from_static(b"a/020")))
        .expect("delete");
    store.end(txn);
    store.flush(WriteOpts::default()).expect("flush");
    put(&mut store, &["a/012", "a/030"], 20, 0x12);
    let at = store.current_rev();
    store.compact(at - 2).expect("compact");
    store.flush(WriteOpts::default()).expect("flush");
    put(&mut store, &["a/000", "c"], 2000, 0);
    let mut txn = store.begin();
    store.delete_range(&mut txn, &KeyRange::single(Bytes::from_static(b"b/1"))).expect("delete");
    store.end(txn);
    store.flush(WriteOpts::default()).expect("flush");
}

/// The state built from a snapshot's pairs as they arrive is the state opening the store on
/// the installed files builds (the store's index, counts, newest values, live keys' leases,
/// revisions), on a member that held other state before.
fn rebuilt_as_received_is_what_a_reopen_builds<B: KvBackend + Clone>(src: &B, live: &B, dir: &Path) {
    use crate::mvcc::{IndexRebuild, KeyRange, MvccStore, RevisionCounter};
    use bytes::Bytes;
    write_history(src);
    // The member's own earlier state, which the snapshot replaces.
    let (mut old, _) = MvccStore::open(live.clone()).expect("open");
    let mut txn = old.begin();
    for k in ["a/005", "zz"] {
        old.put_with(&mut txn, Bytes::from_static(k.as_bytes()), |_| Ok((Bytes::from_static(b"old"), 5))).expect("put");
    }
    old.end(txn);
    old.flush(WriteOpts::default()).expect("flush");
    drop(old);

    let cp = dir.join("checkpoint");
    src.checkpoint(&cp).expect("checkpoint");
    let tables = dir.join("tables");
    std::fs::create_dir_all(&tables).expect("mkdir");
    let mut writer = TableWriter::start::<B>(&tables, Some(IndexRebuild::new(TEST_CACHE_BYTES))).expect("writer");
    cut::<B>(&cp, &mut |name, pairs| writer.push(&name, pairs)).expect("cut");
    let built = writer.finish().expect("written").expect("a state was asked for");
    install(live, &tables, &staging_dir(&tables)).expect("install");

    let mut read_back = IndexRebuild::new(TEST_CACHE_BYTES);
    live.scan_once(Cf::Kv, &mut |k, v| read_back.feed(k, v)).expect("scan");
    assert_eq!(built, read_back.finish().expect("decodes"), "the same index, cache, leases and revision");
    assert!(!built.leases().is_empty() && built.keys() > 40, "the history has leases and keys: {built:?}");

    let (fast, fast_leases) =
        MvccStore::open_rebuilt(live.clone(), built, Arc::new(RevisionCounter::default())).expect("open rebuilt");
    let (slow, slow_leases) =
        MvccStore::open_with(live.clone(), TEST_CACHE_BYTES, Arc::new(RevisionCounter::default())).expect("reopen");
    assert_eq!(fast_leases, slow_leases);
    assert_eq!(fast.index(), slow.index());
    assert_eq!(
        (fast.current_rev(), fast.opened_at(), fast.compact_rev()),
        (slow.current_rev(), slow.opened_at(), slow.compact_rev())
    );
    assert!(fast.compact_rev() > 0, "the compaction travelled with the state");
    let all = KeyRange::new(Bytes::from_static(b"\0"), Bytes::from_static(b"\0"));
    for at in [fast.compact_rev(), fast.current_rev() - 1, fast.current_rev()] {
        assert_eq!(fast.range(&all, at, 0).expect("range"), slow.range(&all, at, 0).expect("range"), "at {at}");
    }
    let (kvs, count) = fast.range(&all, fast.current_rev(), 0).expect("range");
    assert!(count == kvs.len() && kvs.iter().all(|kv| kv.key.as_ref() != b"zz"), "the member's old keys are gone");
}

#[test]
fn a_state_built_as_the_snapshot_arrives_is_the_reopened_state() {
    let dir = tempfile::tempdir().expect("tempdir");
    rebuilt_as_received_is_what_a_reopen_builds(&MemBackend::new(), &MemBackend::new(), dir.path());
}

#[test]
fn rocksdb_a_state_built_as_the_snapshot_arrives_is_the_reopened_state() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = RocksOptions::default();
    let src = RocksBackend::open(&dir.path().join("leader"), &opts).expect("open");
    let live = RocksBackend::open(&dir.path().join("member"), &opts).expect("open");
    rebuilt_as_received_is_what_a_reopen_builds(&src, &live, dir.path());
}

#[test]
fn a_state_that_does_not_decode_is_refused_and_none_is_built() {
    use crate::mvcc::IndexRebuild;
    let dir = tempfile::tempdir().expect("tempdir");
    let src = MemBackend::new();
    // A key of no revision: a reopen would refuse it too.
    put(&src, Cf::Kv, b"not-a-revision", b"v");
    let cp = dir.path().join("checkpoint");
    src.checkpoint(&cp).expect("checkpoint");
    let tables = dir.path().join("tables");
    std::fs::create_dir_all(&tables).expect("mkdir");
    let mut writer = TableWriter::start::<MemBackend>(&tables, Some(IndexRebuild::new(1 << 20))).expect("writer");
    cut::<MemBackend>(&cp, &mut |name, pairs| writer.push(&name, pairs)).expect("cut");
    let err = writer.finish().expect_err("undecodable");
    assert!(err.to_string().contains("undecodable history record"), "{err}");
    assert!(crate::mvcc::MvccStore::open(src).is_err(), "as opening the store on it fails");
}
