//! [`KvBackend`] on RocksDB: the only file in the workspace that calls the `rocksdb` crate.
//!
//! One RocksDB instance holds every column family of [`Cf`], so one write-ahead log orders all of
//! them: a synced write makes every earlier unsynced write durable too, which the shard relies on
//! (state batches are written unsynced, the raft log batch of the next round syncs them).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rocksdb::{
    checkpoint::Checkpoint, ColumnFamilyDescriptor, Direction, IngestExternalFileOptions, IteratorMode, Options,
    ReadOptions, SstFileWriter, DB,
};

use crate::clock::Clock;

use super::{Cf, KvBackend, ScanOrder, StorageError, WriteBatch, WriteOp, WriteOpts, TABLE_FILE_BYTES};

/// Tuning for [`RocksBackend::open`].
#[derive(Clone, Debug)]
pub struct RocksOptions {
    /// Memtable size per column family. 64 MiB (RocksDB's default) keeps small clusters' whole
    /// working set in memory without flushing on every burst.
    pub write_buffer_size: usize,
    /// Shared LRU block cache for reads. 256 MiB: several times etcd's default bbolt page
    /// cache pressure point, still small next to a control-plane machine's memory.
    pub block_cache_bytes: usize,
}

impl Default for RocksOptions {
    fn default() -> Self {
        Self { write_buffer_size: 64 << 20, block_cache_bytes: 256 << 20 }
    }
}

/// A RocksDB database opened with every [`Cf`].
#[derive(Clone)]
pub struct RocksBackend {
    db: Arc<DB>,
}

impl std::fmt::Debug for RocksBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RocksBackend").field("path", &self.db.path()).finish()
    }
}

impl RocksBackend {
    /// Opens (creating if needed) the database in `dir`.
    ///
    /// # Errors
    /// Returns RocksDB's error, for example when another process holds the directory's lock.
    pub fn open(dir: &Path, options: &RocksOptions) -> Result<Self, StorageError> {
        let (db_opts, cfs) = Self::options(options)?;
        let db = DB::open_cf_descriptors(&db_opts, dir, cfs)?;
        Ok(Self { db: Arc::new(db) })
    }

    /// Opens the database in `dir` to read it only: no background flushes or compactions, and
    /// nothing written into the directory.
    ///
    /// # Errors
    /// Returns RocksDB's error.
    pub fn open_read_only(dir: &Path) -> Result<Self, StorageError> {
        let (db_opts, cfs) = Self::options(&RocksOptions::default())?;
        let db = DB::open_cf_descriptors_read_only(&db_opts, dir, cfs, false)?;
        Ok(Self { db: Arc::new(db) })
    }

    /// The database's options and its column families'.
    fn options(options: &RocksOptions) -> Result<(Options, Vec<ColumnFamilyDescriptor>), StorageError> {
        let cache = rocksdb::Cache::new_lru_cache(options.block_cache_bytes)?;
        let mut block = table_format();
        block.set_block_cache(&cache);
        let mut db_opts = Options::default();
        db_opts.create_if_missing(true);
        db_opts.create_missing_column_families(true);
        db_opts.set_max_background_jobs(2);
        // No WAL recycling (`recycle_log_file_num`), though a recycled log's fdatasync need not
        // commit a new file size: RocksDB before 9 turns it off, silently, under the
        // point-in-time recovery this database relies on, and the one mode it allows beside,
        // skipping any corrupt record, can replay a log with a hole in it; on the benchmarks'
        // disk the size commit was not what made a sync slow (benches/README.md, "The
        // write-ahead log's growth").
        let cfs = Cf::ALL
            .iter()
            .map(|cf| {
                let mut o = Options::default();
                o.set_write_buffer_size(options.write_buffer_size);
                o.set_block_based_table_factory(&block);
                ColumnFamilyDescriptor::new(cf.name(), o)
            })
            .collect();
        Ok((db_opts, cfs))
    }

    fn cf(&self, cf: Cf) -> &rocksdb::ColumnFamily {
        self.db.cf_handle(cf.name()).expect("invariant: every Cf is created when the database is opened")
    }
}

/// The table format of every column family, and of the files a snapshot is cut into: bloom filters
/// of 10 bits a key, so a point read skips the files that lack its key.
fn table_format() -> rocksdb::BlockBasedOptions {
    let mut block = rocksdb::BlockBasedOptions::default();
    block.set_bloom_filter(10.0, false);
    block
}

/// Read-ahead while reading a whole family once (sending a raft snapshot's state, rebuilding the
/// index): the scan is sequential and long.
const EXPORT_READAHEAD_BYTES: usize = 4 << 20;

impl KvBackend for RocksBackend {
    fn write(&self, batch: WriteBatch, opts: WriteOpts) -> Result<(), StorageError> {
        let mut wb = rocksdb::WriteBatch::default();
        for op in batch.ops {
            match op {
                WriteOp::Put(cf, k, v) => wb.put_cf(self.cf(cf), k, v),
                WriteOp::Delete(cf, k) => wb.delete_cf(self.cf(cf), k),
                WriteOp::DeleteRange(cf, s, e) => wb.delete_range_cf(self.cf(cf), s, e),
            }
        }
        let mut wo = rocksdb::WriteOptions::default();
        wo.set_sync(opts.sync);
        let start = crate::clock::SystemClock.now();
        self.db.write_opt(wb, &wo)?;
        let took = crate::clock::SystemClock.now().saturating_duration_since(start);
        let m = &crate::metrics::GLOBAL;
        m.backend_commit.observe(took);
        if opts.sync {
            m.wal_fsync.observe(took);
        }
        Ok(())
    }

    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(self.db.get_cf(self.cf(cf), key)?)
    }

    fn multi_get(&self, cf: Cf, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StorageError> {
        let handle = self.cf(cf);
        self.db
            .multi_get_cf(keys.iter().map(|k| (handle, k.as_slice())))
            .into_iter()
            .map(|r| r.map_err(StorageError::from))
            .collect()
    }

    fn scan(
        &self,
        cf: Cf,
        start: &[u8],
        end: Option<&[u8]>,
        order: ScanOrder,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StorageError> {
        let mut ro = ReadOptions::default();
        ro.set_iterate_lower_bound(start.to_vec());
        if let Some(end) = end {
            ro.set_iterate_upper_bound(end.to_vec());
        }
        let mode = match order {
            ScanOrder::Forward => IteratorMode::From(start, Direction::Forward),
            ScanOrder::Reverse => IteratorMode::End,
        };
        for item in self.db.iterator_cf_opt(self.cf(cf), ro, mode) {
            let (k, v) = item?;
            if !visit(&k, &v) {
                break;
            }
        }
        Ok(())
    }

    fn scan_once(&self, cf: Cf, visit: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<(), StorageError> {
        let mut ro = ReadOptions::default();
        ro.fill_cache(false);
        ro.set_readahead_size(EXPORT_READAHEAD_BYTES);
        let mut it = self.db.raw_iterator_cf_opt(self.cf(cf), ro);
        it.seek_to_first();
        while let (Some(k), Some(v)) = (it.key(), it.value()) {
            if !visit(k, v) {
                return Ok(());
            }
            it.next();
        }
        Ok(it.status()?)
    }

    fn compact_all(&self) -> Result<(), StorageError> {
        for cf in Cf::ALL {
            self.db.compact_range_cf(self.cf(cf), None::<&[u8]>, None::<&[u8]>);
        }
        Ok(())
    }

    fn approximate_size(&self) -> u64 {
        Cf::ALL
            .iter()
            .map(|&cf| {
                let handle = self.cf(cf);
                let sst =
                    self.db.property_int_value_cf(handle, "rocksdb.total-sst-files-size").ok().flatten().unwrap_or(0);
                let mem = self
                    .db
                    .property_int_value_cf(handle, "rocksdb.cur-size-all-mem-tables")
                    .ok()
                    .flatten()
                    .unwrap_or(0);
                sst + mem
            })
            .sum()
    }

    fn checkpoint(&self, dir: &Path) -> Result<(), StorageError> {
        Checkpoint::new(&self.db)?.create_checkpoint(dir)?;
        Ok(())
    }

    fn write_tables(
        cf: Cf,
        dir: &Path,
        chunks: &mut dyn Iterator<Item = Vec<u8>>,
    ) -> Result<Vec<PathBuf>, StorageError> {
        // Files of RocksDB's own table format with the live families' bloom filters, their keys
        // at sequence number 0 as ingestion requires. The writer syncs each file as it finishes
        // it, and refuses keys out of order.
        let mut table_opts = Options::default();
        table_opts.set_block_based_table_factory(&table_format());
        let mut written = Vec::new();
        let mut writer: Option<SstFileWriter<'_>> = None;
        for chunk in chunks {
            super::decode_pairs(&chunk, &mut |k, v| {
                if writer.as_ref().is_some_and(|w| w.file_size() >= TABLE_FILE_BYTES) {
                    let mut full = writer.take().expect("invariant: checked above");
                    full.finish()?;
                }
                let w = match &mut writer {
                    Some(w) => w,
                    None => {
                        let path = dir.join(format!("{}-{:04}.sst", cf.name(), written.len()));
                        let w = SstFileWriter::create(&table_opts);
                        w.open(&path)?;
                        written.push(path);
                        writer.insert(w)
                    }
                };
                w.put(k, v)?;
                Ok(())
            })?;
        }
        if let Some(mut w) = writer {
            w.finish()?;
        }
        Ok(written)
    }

    fn ingest_tables(&self, cf: Cf, files: &[PathBuf], staging: &Path) -> Result<(), StorageError> {
        if files.is_empty() {
            return Ok(());
        }
        match std::fs::remove_dir_all(staging) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
        std::fs::create_dir_all(staging)?;
        // RocksDB moves what it ingests (links it in, then removes the name it was given): it
        // is given second names, so the received files stay for an install done again.
        let mut linked = Vec::with_capacity(files.len());
        for f in files {
            let name = f.file_name().ok_or(StorageError::Corrupt { cf: "staging", what: "table file name" })?;
            let link = staging.join(name);
            std::fs::hard_link(f, &link)?;
            linked.push(link);
        }
        let mut ingest = IngestExternalFileOptions::default();
        ingest.set_move_files(true);
        self.db.ingest_external_file_cf_opts(self.cf(cf), &ingest, linked)?;
        let _ = std::fs::remove_dir_all(staging);
        Ok(())
    }

    fn open_checkpoint(dir: &Path) -> Result<Self, StorageError> {
        Self::open_read_only(dir)
    }

    fn drop_range(&self, cf: Cf, start: &[u8], end: &[u8]) -> Result<(), StorageError> {
        // Everything into files, then whole files dropped (no I/O). Files loaded into the range
        // next then land in the bottom level and are never rewritten; a range tombstone, even
        // compacted, stays in a file they would overlap, which puts them in level 0 and costs
        // a compaction of everything they hold. The tombstone is only for what is left (files
        // a compaction held on to).
        let handle = self.cf(cf);
        self.db.flush_cf(handle)?;
        self.db.delete_file_in_range_cf(handle, start, end)?;
        let mut left = false;
        self.scan(cf, start, Some(end), ScanOrder::Forward, &mut |_, _| {
            left = true;
            false
        })?;
        if left {
            let mut wb = rocksdb::WriteBatch::default();
            wb.delete_range_cf(handle, start, end);
            self.db.write(wb)?;
            self.db.compact_range_cf(handle, Some(start), Some(end));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Files per level of `cf`, from RocksDB's `levelstats` table.
    fn files_per_level(b: &RocksBackend, cf: Cf) -> Vec<u64> {
        let stats = b.db.property_value_cf(b.cf(cf), "rocksdb.levelstats").expect("property").expect("levelstats");
        stats.lines().skip(2).map(|l| l.split_whitespace().nth(1).expect("files").parse().expect("a count")).collect()
    }

    #[test]
    fn tables_ingested_into_a_dropped_range_land_in_the_bottom_level() {
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = RocksOptions::default();
        let live = RocksBackend::open(&dir.path().join("live"), &opts).expect("open");
        let src = RocksBackend::open(&dir.path().join("src"), &opts).expect("open");
        let mut wb = WriteBatch::new();
        for i in 0..5000u32 {
            wb.put(Cf::Kv, format!("k{i:06}").into_bytes(), vec![7u8; 100]);
        }
        src.write(wb, WriteOpts::default()).expect("write");
        let mut wb = WriteBatch::new();
        wb.put(Cf::Kv, b"k000001".to_vec(), b"old".to_vec());
        live.write(wb, WriteOpts::default()).expect("write");
        live.compact_all().expect("the old key in a file");
        let mut wb = WriteBatch::new();
        wb.put(Cf::Kv, b"k000002".to_vec(), b"old".to_vec());
        live.write(wb, WriteOpts::default()).expect("and one in the memtable");
        live.drop_range(Cf::Kv, &[], &[0xff; 8]).expect("drop");
        let cut = dir.path().join("cut");
        std::fs::create_dir_all(&cut).expect("mkdir");
        let files = RocksBackend::write_tables(Cf::Kv, &cut, &mut super::super::chunks_of(&src, Cf::Kv).into_iter())
            .expect("write");
        live.ingest_tables(Cf::Kv, &files, &dir.path().join("staging")).expect("ingest");
        assert!(files.iter().all(|f| f.exists()), "the received files stay for an install done again");
        let levels = files_per_level(&live, Cf::Kv);
        assert_eq!(levels.iter().sum::<u64>(), 1, "{levels:?}");
        assert_eq!(levels.last(), Some(&1), "nothing above it to compact with: {levels:?}");
        assert_eq!(live.get(Cf::Kv, b"k000002").expect("get"), Some(vec![7u8; 100]));
    }
}
