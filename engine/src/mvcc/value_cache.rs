//! [`ValueCache`]: the newest record of live keys, decoded, by revision, within a byte budget.
//!
//! Most reads are at the newest revision, and every put reads the value it replaces (for
//! `prev_kv` and for watch events, which kube-apiserver always asks with `prev_kv`). Without this
//! cache each of those is a RocksDB lookup (a memtable skip-list search or a block read) plus a
//! decode; with it, a clone of two reference-counted buffers. A 500-key page of a 100k-key prefix
//! spent most of its time in those lookups.
//!
//! Only a key's newest revision is cached, and only while the key is live: a put replaces the
//! entry of the revision it supersedes, a delete drops it. Compaction never removes a live key's
//! newest revision, so it never has to touch the cache. Entries are admitted while the budget
//! has room and never evicted for others; once the live data outgrows the budget, the rest is
//! read from RocksDB as before.

use std::collections::HashMap;

use ballast_proto::mvccpb::KeyValue;

use super::revision::Revision;

/// Bookkeeping counted per entry on top of key and value: the map slot and the decoded struct.
const ENTRY_OVERHEAD: usize = 128;

/// Newest values by revision.
#[derive(Debug, PartialEq)]
pub struct ValueCache {
    map: HashMap<Revision, KeyValue>,
    bytes: usize,
    budget: usize,
}

fn cost(kv: &KeyValue) -> usize {
    kv.key.len() + kv.value.len() + ENTRY_OVERHEAD
}

impl ValueCache {
    /// An empty cache that holds at most `budget` bytes.
    pub fn new(budget: usize) -> Self {
        Self { map: HashMap::new(), bytes: 0, budget }
    }

    /// Returns the record at `rev` if cached.
    pub fn get(&self, rev: &Revision) -> Option<&KeyValue> {
        self.map.get(rev)
    }

    /// Caches `kv`, the newest record of its key at `rev`, when the budget has room.
    pub fn insert(&mut self, rev: Revision, kv: KeyValue) {
        let c = cost(&kv);
        if self.bytes + c <= self.budget {
            self.bytes += c;
            if let Some(old) = self.map.insert(rev, kv) {
                self.bytes -= cost(&old);
            }
        }
    }

    /// Returns true when a record of at most `bytes` key and value bytes would be admitted now:
    /// a start-up rebuild past the budget then reads only what the index needs of a record.
    pub fn has_room(&self, bytes: usize) -> bool {
        self.bytes + bytes + ENTRY_OVERHEAD <= self.budget
    }

    /// Drops the record at `rev`: a newer one superseded it or the key was deleted.
    pub fn remove(&mut self, rev: &Revision) {
        if let Some(old) = self.map.remove(rev) {
            self.bytes -= cost(&old);
        }
    }

    /// Returns the bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn kv(value: &'static [u8]) -> KeyValue {
        KeyValue { key: Bytes::from_static(b"k"), value: Bytes::from_static(value), ..Default::default() }
    }

    #[test]
    fn admits_within_budget_and_releases_on_remove() {
        let mut cache = ValueCache::new(2 * (ENTRY_OVERHEAD + 2));
        cache.insert(Revision::new(1, 0), kv(b"a"));
        cache.insert(Revision::new(2, 0), kv(b"b"));
        cache.insert(Revision::new(3, 0), kv(b"c"));
        assert!(cache.get(&Revision::new(3, 0)).is_none(), "over budget: not admitted");
        assert!(!cache.has_room(2));
        assert_eq!(cache.bytes(), 2 * (ENTRY_OVERHEAD + 2));
        cache.remove(&Revision::new(1, 0));
        assert!(cache.has_room(2) && !cache.has_room(3));
        cache.insert(Revision::new(3, 0), kv(b"c"));
        assert_eq!(cache.get(&Revision::new(3, 0)).map(|kv| kv.value.clone()), Some(Bytes::from_static(b"c")));
        assert!(cache.get(&Revision::new(1, 0)).is_none());
    }
}
