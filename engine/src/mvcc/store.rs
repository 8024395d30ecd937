//! [`MvccStore`]: etcd's multi-version key-value model on a [`KvBackend`].
//!
//! * The store starts at revision 1. A write transaction that changes anything creates exactly one
//!   new main revision, however many keys it touches; one that changes nothing creates none.
//! * Each change is a history record `revision -> KeyValue` in `Cf::Kv` (see [`super::revision`])
//!   plus an entry in the in-memory [`TreeIndex`].
//! * Writes of one apply round are staged: records go to a pending [`WriteBatch`] and to an
//!   overlay map so later reads in the same round see them; [`MvccStore::flush`] writes the batch
//!   once per round (the shard adds its applied index to the same batch, so history and the
//!   applied index are always consistent after a crash).
//! * Compaction drops history records no read at or after the compacted revision can need, and
//!   records the compacted revision in the same batch.
//!
//! Must not know about raft, leases or the wire format beyond `mvccpb`.

// #[PerformanceCriticalPath]
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use ballast_proto::mvccpb::{event::EventType, Event, KeyValue};
use bytes::Bytes;
use prost::Message;

use super::index::TreeIndex;
use super::key_range::KeyRange;
use super::rebuild::{IndexRebuild, LiveLeases, Rebuilt};
use super::rev_counter::RevisionCounter;
use super::revision::{self, Revision};
use super::value_cache::ValueCache;
use crate::error::{EngineError, Result};
use crate::storage::{Cf, KvBackend, ScanOrder, StorageError, WriteBatch, WriteOpts};

/// Default budget of the newest-value cache: see [`MvccStore::open_with`].
pub const DEFAULT_VALUE_CACHE_BYTES: usize = 256 << 20;

/// Meta key holding the compacted revision (i64, big-endian).
pub const META_COMPACT_REV: &[u8] = b"compact_rev";

/// An open write transaction: its main revision (0 until its first change takes one) and the next
/// change's sub revision.
#[derive(Debug)]
pub struct WriteTxn {
    main: i64,
    sub: i64,
}

impl WriteTxn {
    /// Returns true when the transaction has changed something.
    pub fn changed(&self) -> bool {
        self.sub > 0
    }
}

/// The MVCC key-value store of one shard.
#[derive(Debug)]
pub struct MvccStore<B: KvBackend> {
    backend: B,
    index: TreeIndex,
    /// Where changes take their revisions.
    source: RevisionSource,
    /// The newest revision in this store's own history when it was opened.
    opened_at: i64,
    compact_rev: i64,
    /// Encoded records written this round and not yet flushed, by revision.
    overlay: HashMap<Revision, Bytes>,
    /// The newest record of live keys, so newest-revision reads and prev values skip RocksDB.
    cache: ValueCache,
    batch: WriteBatch,
    events: Vec<Event>,
}

/// Where a store's changes take their revisions: a field of its own, so a write can take one
/// while it holds its key's slot in the index (see [`MvccStore::put_with`]).
#[derive(Debug)]
struct RevisionSource {
    /// The member's revision sequence, shared with its other shards.
    revs: Arc<RevisionCounter>,
    /// The revision the next change must take: set while replaying a raft entry that recorded it.
    expected: Option<i64>,
    /// The revision taken since [`MvccStore::revision_taken`] was last asked.
    taken: Option<i64>,
    /// While a round of a cluster with spread shard leaders evaluates: the first revision of
    /// its grant, the next one to take, and the end of the grant (see [`MvccStore::set_grant`]).
    grant: Option<(i64, i64, i64)>,
}

impl RevisionSource {
    fn take(&mut self) -> i64 {
        let rev = match self.expected.take() {
            Some(rev) => {
                self.revs.observe(rev);
                rev
            }
            None => match self.grant.as_mut() {
                Some((_, next, end)) => {
                    let rev = *next;
                    debug_assert!(rev < *end, "invariant: a round takes at most one revision per write");
                    *next += 1;
                    self.revs.observe(rev);
                    rev
                }
                None => self.revs.allocate(),
            },
        };
        self.taken = Some(rev);
        rev
    }

    /// Returns the revision of `txn`'s next change, taking the transaction's main revision with
    /// its first.
    fn next_change(&mut self, txn: &mut WriteTxn) -> Revision {
        if txn.main == 0 {
            txn.main = self.take();
        }
        Revision::new(txn.main, txn.sub)
    }
}

/// Reads the record at `rev`: from the cache, the round's overlay, or the backend.
fn read_record<B: KvBackend>(
    cache: &ValueCache,
    overlay: &HashMap<Revision, Bytes>,
    backend: &B,
    rev: Revision,
) -> Result<Option<KeyValue>> {
    if let Some(kv) = cache.get(&rev) {
        return Ok(Some(kv.clone()));
    }
    if let Some(bytes) = overlay.get(&rev) {
        return decode_kv(bytes.clone()).map(Some);
    }
    match backend.get(Cf::Kv, &revision::encode_key(rev, false))? {
        Some(v) => decode_kv(Bytes::from(v)).map(Some),
        None => Ok(None),
    }
}

fn decode_kv(bytes: Bytes) -> Result<KeyValue> {
    KeyValue::decode(bytes)
        .map_err(|_| StorageError::Corrupt { cf: Cf::Kv.name(), what: "undecodable KeyValue" }.into())
}

impl<B: KvBackend> MvccStore<B> {
    /// Opens the store on `backend` with the default value-cache budget.
    ///
    /// # Errors
    /// Returns a storage error, or `Corrupt` when history records do not decode.
    pub fn open(backend: B) -> Result<(Self, LiveLeases)> {
        Self::open_with(backend, DEFAULT_VALUE_CACHE_BYTES, Arc::new(RevisionCounter::default()))
    }

    /// Opens the store on `backend`, rebuilding the index from history; the newest values of live
    /// keys are kept in memory up to `value_cache_bytes`. Writes take their revisions from `revs`,
    /// which is raised past every revision found here.
    ///
    /// # Errors
    /// Returns a storage error, or `Corrupt` when history records do not decode.
    pub fn open_with(backend: B, value_cache_bytes: usize, revs: Arc<RevisionCounter>) -> Result<(Self, LiveLeases)> {
        let mut rebuild = IndexRebuild::new(value_cache_bytes);
        // One pass over the whole history, read once: the backend neither caches nor keeps it.
        backend.scan_once(Cf::Kv, &mut |k, v| rebuild.feed(k, v))?;
        Self::open_rebuilt(backend, rebuild.finish()?, revs)
    }

    /// Opens the store on `backend` with the state [`IndexRebuild`] built from exactly the
    /// history `backend` holds (a raft snapshot's records, fed as they arrived and then taken
    /// in whole): no pass over the history.
    ///
    /// # Errors
    /// Returns a storage error.
    pub fn open_rebuilt(backend: B, rebuilt: Rebuilt, revs: Arc<RevisionCounter>) -> Result<(Self, LiveLeases)> {
        let compact_rev = match backend.get(Cf::Meta, META_COMPACT_REV)? {
            Some(v) => i64::from_be_bytes(
                v.as_slice().try_into().map_err(|_| StorageError::Corrupt { cf: "meta", what: "compact_rev" })?,
            ),
            None => 0,
        };
        let Rebuilt { index, cache, leases, last_main } = rebuilt;
        revs.observe(last_main.max(compact_rev));
        let store = Self {
            opened_at: last_main.max(compact_rev),
            backend,
            index,
            source: RevisionSource { revs, expected: None, taken: None, grant: None },
            compact_rev,
            overlay: HashMap::new(),
            cache,
            batch: WriteBatch::new(),
            events: Vec::new(),
        };
        Ok((store, leases))
    }

    /// Returns the backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// Returns the current store revision: the member's last revision, which no later read of
    /// this store's keys can see change below.
    pub fn current_rev(&self) -> i64 {
        self.source.revs.last()
    }

    /// Returns the newest revision of this store's own history (or its compaction) when it was
    /// opened; other shards of the member may have taken later ones.
    pub fn opened_at(&self) -> i64 {
        self.opened_at
    }

    /// Returns the revision counter this store writes with.
    pub fn revisions(&self) -> &Arc<RevisionCounter> {
        &self.source.revs
    }

    /// Makes the next change take `rev` rather than a new revision: replaying a raft entry gives
    /// its write the revision it was acknowledged with.
    pub fn expect_revision(&mut self, rev: i64) {
        self.source.expected = Some(rev);
    }

    /// Returns the revision taken by changes since the last call, if any, and forgets it; clears
    /// an expected revision no change took.
    pub fn revision_taken(&mut self) -> Option<i64> {
        self.source.expected = None;
        self.source.taken.take()
    }

    /// Makes the following changes take revisions from `[start, start + count)`, the grant of
    /// the revision allocator, instead of the member's counter (a round of a shard whose leader
    /// shares no counter with the other shards' leaders). The caller evaluates at most `count`
    /// writes: each takes at most one revision.
    pub fn set_grant(&mut self, start: i64, count: i64) {
        self.source.grant = Some((start, start, start + count));
    }

    /// Ends the grant set by [`MvccStore::set_grant`]; returns how many of its revisions were
    /// taken.
    pub fn end_grant(&mut self) -> i64 {
        self.source.grant.take().map_or(0, |(start, next, _)| next - start)
    }

    /// Returns the compacted revision (0 before any compaction).
    pub fn compact_rev(&self) -> i64 {
        self.compact_rev
    }

    /// Returns the key index.
    pub fn index(&self) -> &TreeIndex {
        &self.index
    }

    /// Reads the put record at `rev`.
    ///
    /// # Errors
    /// Returns a storage error.
    pub fn read_kv(&self, rev: Revision) -> Result<Option<KeyValue>> {
        read_record(&self.cache, &self.overlay, &self.backend, rev)
    }

    /// Returns `key` as of main revision `at`.
    ///
    /// # Errors
    /// Returns a storage error.
    pub fn get(&self, key: &[u8], at: i64) -> Result<Option<KeyValue>> {
        match self.index.get(key, at) {
            Some(found) => self.read_kv(found.modified),
            None => Ok(None),
        }
    }

    /// Returns up to `limit` (0 = all) keys of `range` as of `at` in key order, and how many keys
    /// the whole range holds at `at`.
    ///
    /// # Errors
    /// Returns a storage error.
    pub fn range(&self, range: &KeyRange, at: i64, limit: usize) -> Result<(Vec<KeyValue>, usize)> {
        let mut revs = Vec::new();
        if limit > 0 && self.index.counts_fast(at) {
            // A page at the newest revision: visit only the page, count from the live set.
            self.index.visit(range, at, |_, found| {
                revs.push(found.modified);
                revs.len() < limit
            });
            return Ok((self.read_many(&revs)?, self.index.count(range, at)));
        }
        let mut total = 0usize;
        self.index.visit(range, at, |_, found| {
            if limit == 0 || revs.len() < limit {
                revs.push(found.modified);
            }
            total += 1;
            true
        });
        Ok((self.read_many(&revs)?, total))
    }

    /// Reads the put records at `revs`, in order: cached ones from memory, the rest with one
    /// multi-get.
    fn read_many(&self, revs: &[Revision]) -> Result<Vec<KeyValue>> {
        if !self.overlay.is_empty() {
            return revs.iter().map(|r| self.read_kv(*r)?.ok_or(missing_record())).collect();
        }
        let mut out: Vec<Option<KeyValue>> = revs.iter().map(|r| self.cache.get(r).cloned()).collect();
        let misses: Vec<usize> = (0..revs.len()).filter(|&i| out[i].is_none()).collect();
        if !misses.is_empty() {
            let keys: Vec<Vec<u8>> = misses.iter().map(|&i| revision::encode_key(revs[i], false).to_vec()).collect();
            for (&i, v) in misses.iter().zip(self.backend.multi_get(Cf::Kv, &keys)?) {
                out[i] = Some(decode_kv(Bytes::from(v.ok_or(missing_record())?))?);
            }
        }
        out.into_iter().map(|kv| kv.ok_or(missing_record())).collect()
    }

    /// Opens a write transaction. It takes a revision with its first change, so one that changes
    /// nothing takes none.
    pub fn begin(&self) -> WriteTxn {
        WriteTxn { main: 0, sub: 0 }
    }

    /// Returns the revision reads inside `txn` see: its own revision once it wrote something.
    pub fn read_rev(&self, txn: &WriteTxn) -> i64 {
        if txn.changed() {
            txn.main
        } else {
            self.current_rev()
        }
    }

    /// Returns the revision of `txn`'s writes (the current revision while it has none).
    pub fn write_rev(&self, txn: &WriteTxn) -> i64 {
        self.read_rev(txn)
    }

    /// Puts `key` in `txn` with the value and lease `decide` picks from the key's current record
    /// (None when the key is not alive); returns that record. When `decide` fails nothing
    /// changes and no revision is taken: Put's `ignore_value` / `ignore_lease` on a missing key.
    ///
    /// The key is looked up once (one search of the index) for the decision, the new record's
    /// create revision and version, and the index's update.
    ///
    /// # Errors
    /// What `decide` returns, or a storage error.
    pub fn put_with(
        &mut self,
        txn: &mut WriteTxn,
        key: Bytes,
        decide: impl FnOnce(Option<&KeyValue>) -> Result<(Bytes, i64)>,
    ) -> Result<Option<KeyValue>> {
        // Before the change takes its revision: no record of this key is at that revision yet,
        // so the read at `read_rev` finds what a read at the new revision would.
        let at = self.read_rev(txn);
        // The slot borrows the index alone: the fields below are the store's others.
        let slot = self.index.slot(&key);
        let found = slot.get(at);
        let prev = match found {
            Some(f) => read_record(&self.cache, &self.overlay, &self.backend, f.modified)?,
            None => None,
        };
        let (value, lease) = decide(prev.as_ref())?;
        let rev = self.source.next_change(txn);
        let (create_revision, version) = match found {
            Some(f) => (f.created.main, f.version + 1),
            None => (txn.main, 1),
        };
        let kv = KeyValue { key, create_revision, mod_revision: txn.main, version, value, lease };
        let encoded = Bytes::from(kv.encode_to_vec());
        self.batch.put(Cf::Kv, revision::encode_key(rev, false).to_vec(), encoded.to_vec());
        if let Some(f) = found {
            self.cache.remove(&f.modified);
        }
        // `key` and `value` are slices of the request's gRPC frame, which holds other requests
        // too: nothing kept past the request may point into it, or every frame stays allocated
        // as long as one of its keys is indexed or one of its events is in the ring (and the
        // network plane allocates new ones). The cache and the event share one exactly sized
        // record buffer.
        let record = decode_kv(encoded.clone())?;
        self.cache.insert(rev, record.clone());
        self.overlay.insert(rev, encoded);
        // The slot holds a copy of the key, not the request's bytes (see above).
        slot.put(rev);
        self.events.push(Event { r#type: EventType::Put as i32, kv: Some(record), prev_kv: prev.clone() });
        txn.sub += 1;
        Ok(prev)
    }

    /// Deletes every live key of `range` in `txn`; returns the deleted values in key order.
    ///
    /// # Errors
    /// Returns a storage error.
    pub fn delete_range(&mut self, txn: &mut WriteTxn, range: &KeyRange) -> Result<Vec<KeyValue>> {
        let (prevs, _) = self.range(range, self.read_rev(txn), 0)?;
        for prev in &prevs {
            let rev = self.source.next_change(txn);
            let tomb = KeyValue { key: prev.key.clone(), ..Default::default() };
            self.batch.put(Cf::Kv, revision::encode_key(rev, true).to_vec(), tomb.encode_to_vec());
            if let Some(f) = self.index.get(&prev.key, txn.main) {
                self.cache.remove(&f.modified);
            }
            self.index.tombstone(&prev.key, rev);
            let kv = KeyValue { key: prev.key.clone(), mod_revision: txn.main, ..Default::default() };
            self.events.push(Event { r#type: EventType::Delete as i32, kv: Some(kv), prev_kv: Some(prev.clone()) });
            txn.sub += 1;
        }
        Ok(prevs)
    }

    /// Ends `txn`; returns the store revision after it.
    #[allow(clippy::needless_pass_by_value)] // by value so an ended txn cannot be used again
    pub fn end(&mut self, txn: WriteTxn) -> i64 {
        self.read_rev(&txn)
    }

    /// Checks that reads at `rev` (0 or less: current) are possible; returns the revision to read.
    ///
    /// # Errors
    /// `FutureRev` above the current revision, `Compacted` below the compacted one.
    pub fn check_read_rev(&self, rev: i64) -> Result<i64> {
        let current = self.current_rev();
        if rev > current {
            return Err(EngineError::FutureRev);
        }
        if rev <= 0 {
            return Ok(current);
        }
        if rev < self.compact_rev {
            return Err(EngineError::Compacted { compact_revision: self.compact_rev });
        }
        Ok(rev)
    }

    /// Compacts history at `rev`: afterwards reads below `rev` fail with `Compacted`.
    ///
    /// # Errors
    /// `Compacted` when `rev` is not above the previous compaction, `FutureRev` above the current
    /// revision, or a storage error.
    pub fn compact(&mut self, rev: i64) -> Result<()> {
        if rev <= self.compact_rev {
            return Err(EngineError::Compacted { compact_revision: self.compact_rev });
        }
        if rev > self.current_rev() {
            return Err(EngineError::FutureRev);
        }
        let keep = self.index.compact(rev);
        let mut doomed = Vec::new();
        self.backend.scan(Cf::Kv, &[], Some(&revision::main_bound(rev + 1)), ScanOrder::Forward, &mut |k, _| {
            if let Some((r, _)) = revision::decode_key(k) {
                if !keep.contains(&r) {
                    doomed.push(k.to_vec());
                }
            }
            true
        })?;
        // Records of this round are only in the overlay and pending batch: a later delete in the
        // same batch removes them.
        let unflushed: Vec<Revision> =
            self.overlay.keys().copied().filter(|r| r.main <= rev && !keep.contains(r)).collect();
        for r in unflushed {
            self.overlay.remove(&r);
            doomed.push(revision::encode_key(r, false).to_vec());
        }
        self.pending_tombstones_upto(rev, &keep, &mut doomed);
        for k in doomed {
            self.batch.delete(Cf::Kv, k);
        }
        self.compact_rev = rev;
        self.batch.put(Cf::Meta, META_COMPACT_REV.to_vec(), rev.to_be_bytes().to_vec());
        Ok(())
    }

    /// Adds this round's unflushed tombstone records at or below `rev` to `doomed`.
    fn pending_tombstones_upto(&self, rev: i64, keep: &HashSet<Revision>, doomed: &mut Vec<Vec<u8>>) {
        use crate::storage::WriteOp;
        for op in self.batch.ops() {
            if let WriteOp::Put(Cf::Kv, k, _) = op {
                if let Some((r, true)) = revision::decode_key(k) {
                    if r.main <= rev && !keep.contains(&r) {
                        doomed.push(k.clone());
                    }
                }
            }
        }
    }

    /// Returns the batch of this round, for other state (leases, applied index) that must commit
    /// atomically with the history records.
    pub fn pending_batch(&mut self) -> &mut WriteBatch {
        &mut self.batch
    }

    /// Writes this round's batch; returns the round's events in revision order.
    ///
    /// # Errors
    /// Returns a storage error; the round's changes are then not durable and the shard must stop.
    pub fn flush(&mut self, opts: WriteOpts) -> Result<Vec<Event>> {
        if !self.batch.is_empty() {
            self.backend.write(std::mem::take(&mut self.batch), opts)?;
        }
        self.overlay.clear();
        Ok(std::mem::take(&mut self.events))
    }

    /// As [`MvccStore::flush`], but hands the round's batch back for the caller to write in a
    /// write of its own that follows at once (the shard's log append): until then the round's
    /// records are in neither the overlay nor the backend, so nothing may read in between.
    pub fn take_round(&mut self) -> (WriteBatch, Vec<Event>) {
        self.overlay.clear();
        (std::mem::take(&mut self.batch), std::mem::take(&mut self.events))
    }

    /// Calls `visit(event)` for history events with main revision in `[from, to]`, in order, with
    /// the previous value attached when it is still in history, until `visit` returns false.
    /// Reads only flushed history.
    ///
    /// # Errors
    /// Returns a storage error.
    pub fn history(&self, from: i64, to: i64, visit: &mut dyn FnMut(Event) -> bool) -> Result<()> {
        let mut err = None;
        let compact_rev = self.compact_rev;
        self.backend.scan(
            Cf::Kv,
            &revision::main_bound(from),
            Some(&revision::main_bound(to.saturating_add(1))),
            ScanOrder::Forward,
            &mut |k, v| {
                let (Some((rev, tomb)), Ok(mut kv)) = (revision::decode_key(k), KeyValue::decode(v)) else {
                    err = Some(EngineError::from(StorageError::Corrupt { cf: "kv", what: "history record" }));
                    return false;
                };
                let prev = if rev.main > compact_rev {
                    match self.get(&kv.key, rev.main - 1) {
                        Ok(p) => p,
                        Err(e) => {
                            err = Some(e);
                            return false;
                        }
                    }
                } else {
                    None
                };
                let ty = if tomb {
                    kv.mod_revision = rev.main;
                    EventType::Delete
                } else {
                    EventType::Put
                };
                visit(Event { r#type: ty as i32, kv: Some(kv), prev_kv: prev })
            },
        )?;
        err.map_or(Ok(()), Err)
    }
}

fn missing_record() -> EngineError {
    StorageError::Corrupt { cf: "kv", what: "index names a revision missing from history" }.into()
}
