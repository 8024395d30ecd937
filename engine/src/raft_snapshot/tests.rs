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
    let mut writer = TableWriter::start::<B>(&tables).expect("writer");
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
