//! One suite, every backend: the same assertions run on [`MemBackend`] and [`RocksBackend`] so
//! the fake cannot drift from the real thing.

use super::*;

fn put(b: &impl KvBackend, cf: Cf, k: &[u8], v: &[u8]) {
    let mut wb = WriteBatch::new();
    wb.put(cf, k, v);
    b.write(wb, WriteOpts::default()).expect("write");
}

fn keys(b: &impl KvBackend, cf: Cf, start: &[u8], end: Option<&[u8]>, order: ScanOrder) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    b.scan(cf, start, end, order, &mut |k, _| {
        out.push(k.to_vec());
        true
    })
    .expect("scan");
    out
}

fn run_all(b: &impl KvBackend) {
    // Column families are separate key spaces.
    put(b, Cf::Kv, b"a", b"1");
    put(b, Cf::Meta, b"a", b"2");
    assert_eq!(b.get(Cf::Kv, b"a").expect("get"), Some(b"1".to_vec()));
    assert_eq!(b.get(Cf::Meta, b"a").expect("get"), Some(b"2".to_vec()));
    assert_eq!(b.get(Cf::Lease, b"a").expect("get"), None);

    // A batch is applied in order and atomically visible.
    let mut wb = WriteBatch::new();
    for k in [b"b", b"c", b"d", b"e"] {
        wb.put(Cf::Kv, k.to_vec(), k.to_vec());
    }
    wb.delete(Cf::Kv, b"c".to_vec());
    wb.delete_range(Cf::Kv, b"d".to_vec(), b"e".to_vec());
    assert_eq!(wb.len(), 6);
    b.write(wb, WriteOpts { sync: true }).expect("batch");
    assert_eq!(keys(b, Cf::Kv, b"", None, ScanOrder::Forward), vec![b"a".to_vec(), b"b".to_vec(), b"e".to_vec()]);

    // Bounds are [start, end); reverse scans see the same keys backwards; visit can stop early.
    assert_eq!(keys(b, Cf::Kv, b"b", Some(b"e"), ScanOrder::Forward), vec![b"b".to_vec()]);
    assert_eq!(
        keys(b, Cf::Kv, b"a", Some(b"z"), ScanOrder::Reverse),
        vec![b"e".to_vec(), b"b".to_vec(), b"a".to_vec()]
    );
    // A whole-family pass sees what a forward scan sees, values too, and can stop early.
    let (mut once, mut scanned) = (Vec::new(), Vec::new());
    b.scan_once(Cf::Kv, &mut |k, v| {
        once.push((k.to_vec(), v.to_vec()));
        true
    })
    .expect("scan_once");
    b.scan(Cf::Kv, b"", None, ScanOrder::Forward, &mut |k, v| {
        scanned.push((k.to_vec(), v.to_vec()));
        true
    })
    .expect("scan");
    assert_eq!(once, scanned);
    let mut seen = 0;
    b.scan_once(Cf::Kv, &mut |_, _| {
        seen += 1;
        false
    })
    .expect("scan_once");
    assert_eq!(seen, 1);
    let mut first = None;
    b.scan(Cf::Kv, b"", None, ScanOrder::Reverse, &mut |k, _| {
        first = Some(k.to_vec());
        false
    })
    .expect("scan");
    assert_eq!(first, Some(b"e".to_vec()));
    assert!(keys(b, Cf::Kv, b"x", Some(b"b"), ScanOrder::Forward).is_empty());

    // multi_get answers in the order asked, with misses as None.
    let got = b.multi_get(Cf::Kv, &[b"e".to_vec(), b"zz".to_vec(), b"a".to_vec()]).expect("multi_get");
    assert_eq!(got, vec![Some(b"e".to_vec()), None, Some(b"1".to_vec())]);
    assert!(b.approximate_size() > 0 || b.get(Cf::Kv, b"a").expect("get").is_some());
    b.compact_all().expect("compact");
    assert_eq!(b.get(Cf::Kv, b"b").expect("get"), Some(b"b".to_vec()));
}

/// A checkpoint opens as a backend of the same kind holding what was written before it, and
/// nothing written after.
fn checkpoint_round_trip<B: KvBackend>(b: &B, dir: &std::path::Path) {
    put(b, Cf::Kv, b"k", b"1");
    put(b, Cf::Meta, b"m", b"2");
    b.checkpoint(&dir.join("cp")).expect("checkpoint");
    put(b, Cf::Kv, b"later", b"3");
    let cp = B::open_checkpoint(&dir.join("cp")).expect("open checkpoint");
    assert_eq!(cp.get(Cf::Kv, b"k").expect("get"), Some(b"1".to_vec()));
    assert_eq!(cp.get(Cf::Meta, b"m").expect("get"), Some(b"2".to_vec()));
    assert_eq!(cp.get(Cf::Kv, b"later").expect("get"), None);
}

/// Table files written from the source's family's pairs and ingested write every such key into
/// a range the store dropped first (as a snapshot install does), and leave other families
/// alone; the files stay, and ingesting them again gives the same state. Keys out of order are
/// refused.
fn tables<B: KvBackend>(live: &B, src: &B, dir: &std::path::Path) {
    put(live, Cf::Kv, b"gone", b"old");
    put(live, Cf::Kv, b"k000", b"old");
    put(live, Cf::Raft, b"entry", b"kept");
    put(live, Cf::Kv, b"\xff\xff", b"beyond the range");
    live.drop_range(Cf::Kv, &[], &[0xff; 2]).expect("drop range");
    assert_eq!(keys(live, Cf::Kv, b"", None, ScanOrder::Forward), vec![b"\xff\xff".to_vec()]);
    live.drop_range(Cf::Kv, &[0xff; 2], &[0xff; 3]).expect("drop range");
    for i in 0..2000u32 {
        put(src, Cf::Kv, format!("k{i:03}").as_bytes(), &i.to_be_bytes());
    }
    put(src, Cf::Kv, b"skipped", b"not kept");
    put(src, Cf::Lease, b"lease", b"not asked for");
    let out = dir.join("tables");
    std::fs::create_dir_all(&out).expect("mkdir");
    let mut chunks = chunks_of(src, Cf::Kv);
    assert!(chunks.len() > 1, "several chunks");
    let skipped = chunks.pop().expect("the last chunk holds `skipped`");
    let mut kept = Vec::new();
    decode_pairs(&skipped, &mut |k, v| {
        if k != b"skipped" {
            encode_pair(&mut kept, k, v);
        }
        Ok(())
    })
    .expect("decode");
    chunks.push(kept);
    let files = B::write_tables(Cf::Kv, &out, &mut chunks.into_iter()).expect("write");
    assert!(!files.is_empty() && files.iter().all(|f| f.exists()));
    let name = files[0].file_name().expect("name").to_string_lossy().into_owned();
    assert!(name.starts_with("kv-0000."), "{name}");
    let staging = dir.join("staging");
    live.ingest_tables(Cf::Kv, &files, &staging).expect("ingest");
    assert!(files.iter().all(|f| f.exists()), "the files stay");
    let loaded = keys(live, Cf::Kv, b"", None, ScanOrder::Forward);
    assert_eq!(loaded.len(), 2000, "every kept source key and nothing the range deletion removed");
    assert_eq!(live.get(Cf::Kv, b"k000").expect("get"), Some(0u32.to_be_bytes().to_vec()), "the source's value wins");
    assert_eq!(live.get(Cf::Kv, b"k1999").expect("get"), Some(1999u32.to_be_bytes().to_vec()));
    assert_eq!(live.get(Cf::Kv, b"gone").expect("get"), None);
    assert_eq!(live.get(Cf::Raft, b"entry").expect("get"), Some(b"kept".to_vec()));
    assert_eq!(live.get(Cf::Lease, b"lease").expect("get"), None, "only the family asked for");
    live.drop_range(Cf::Kv, &[], &[0xff; 2]).expect("drop range");
    live.ingest_tables(Cf::Kv, &files, &staging).expect("ingest again");
    assert_eq!(keys(live, Cf::Kv, b"", None, ScanOrder::Forward), loaded);
    let none = B::write_tables(Cf::Lease, &out, &mut std::iter::empty()).expect("an empty family");
    assert!(none.is_empty(), "no file for an empty family: {none:?}");
    let mut backwards = Vec::new();
    encode_pair(&mut backwards, b"b", b"1");
    encode_pair(&mut backwards, b"a", b"2");
    let refused = B::write_tables(Cf::Meta, &out, &mut std::iter::once(backwards));
    assert!(refused.is_err(), "keys out of order");
    let mut cut_short = Vec::new();
    encode_pair(&mut cut_short, b"a", b"value");
    cut_short.pop();
    assert!(B::write_tables(Cf::Raft, &out, &mut std::iter::once(cut_short)).is_err(), "a pair cut short");
}

#[test]
fn mem_backend_conforms() {
    run_all(&MemBackend::new());
    let dir = tempfile::tempdir().expect("tempdir");
    checkpoint_round_trip(&MemBackend::new(), dir.path());
    tables(&MemBackend::new(), &MemBackend::new(), dir.path());
}

#[test]
fn rocks_backend_ingests_tables_and_keeps_them_across_a_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = rocks::RocksOptions::default();
    {
        let live = RocksBackend::open(&dir.path().join("live"), &opts).expect("open");
        let src = RocksBackend::open(&dir.path().join("src"), &opts).expect("open");
        tables(&live, &src, dir.path());
    }
    let live = RocksBackend::open(&dir.path().join("live"), &opts).expect("reopen");
    assert_eq!(keys(&live, Cf::Kv, b"", None, ScanOrder::Forward).len(), 2000);
    assert_eq!(live.get(Cf::Kv, b"gone").expect("get"), None);
}

#[test]
fn rocks_backend_checkpoints_round_trip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = RocksBackend::open(&dir.path().join("db"), &rocks::RocksOptions::default()).expect("open");
    checkpoint_round_trip(&b, dir.path());
}

#[test]
fn rocks_backend_conforms() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = RocksBackend::open(dir.path(), &rocks::RocksOptions::default()).expect("open");
    run_all(&b);
}

#[test]
fn rocks_backend_survives_reopen_and_checkpoints() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let b = RocksBackend::open(dir.path(), &rocks::RocksOptions::default()).expect("open");
        put(&b, Cf::Lease, b"k", b"v");
        b.checkpoint(&dir.path().join("cp")).expect("checkpoint");
    }
    let b = RocksBackend::open(dir.path(), &rocks::RocksOptions::default()).expect("reopen");
    assert_eq!(b.get(Cf::Lease, b"k").expect("get"), Some(b"v".to_vec()));
    let cp = RocksBackend::open(&dir.path().join("cp"), &rocks::RocksOptions::default()).expect("open checkpoint");
    assert_eq!(cp.get(Cf::Lease, b"k").expect("get"), Some(b"v".to_vec()));
}
