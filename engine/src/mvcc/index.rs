//! [`TreeIndex`]: every key's [`KeyIndex`], ordered by key, in memory.
//!
//! Range reads walk this map to find which revision of each key answers the read, then fetch the
//! values from the backend by revision. Like etcd's `treeIndex`, it is rebuilt from the history
//! column family at start-up. Counts at the newest revision come from the [`LiveSet`] beside it.

use std::collections::{BTreeMap, HashSet};

use bytes::Bytes;

use super::key_index::{Found, KeyIndex};
use super::key_range::KeyRange;
use super::live_set::LiveSet;
use super::revision::Revision;

/// The in-memory key index.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TreeIndex {
    keys: BTreeMap<Bytes, KeyIndex>,
    /// The keys alive at `newest`.
    live: LiveSet,
    /// The highest main revision of any change recorded: reads at or above it see every key's
    /// newest state, so `live` answers their counts.
    newest: i64,
}

impl TreeIndex {
    /// Returns the state of `key` at main revision `at`.
    pub fn get(&self, key: &[u8], at: i64) -> Option<Found> {
        self.keys.get(key)?.get(at)
    }

    /// Records a put of `key` at `rev`. A key the index does not hold yet is copied in, so the
    /// index never points into a caller's buffer (see `MvccStore::put_with`).
    pub fn put(&mut self, key: &[u8], rev: Revision) {
        self.newest = self.newest.max(rev.main);
        // An update of a known key, most puts, costs one search and no copy of the key.
        if let Some(ki) = self.keys.get_mut(key) {
            if !ki.is_live() {
                self.live.insert(&Bytes::copy_from_slice(key));
            }
            ki.put(rev);
            return;
        }
        let key = Bytes::copy_from_slice(key);
        self.live.insert(&key);
        let mut ki = KeyIndex::default();
        ki.put(rev);
        self.keys.insert(key, ki);
    }

    /// Restores a stored put (start-up rebuild).
    pub fn restore_put(&mut self, key: Bytes, created: Revision, modified: Revision, version: i64) {
        self.newest = self.newest.max(modified.main);
        if !self.keys.get(&key).is_some_and(KeyIndex::is_live) {
            self.live.insert(&key);
        }
        self.keys.entry(key).or_default().restore_put(created, modified, version);
    }

    /// Records a deletion of `key` at `rev`; false when the key was not alive.
    pub fn tombstone(&mut self, key: &[u8], rev: Revision) -> bool {
        let removed = self.keys.get_mut(key).is_some_and(|ki| ki.tombstone(rev));
        if removed {
            self.newest = self.newest.max(rev.main);
            self.live.remove(key);
        }
        removed
    }

    /// Calls `visit(key, found)` for each key of `range` alive at `at`, in key order, until it
    /// returns false.
    pub fn visit(&self, range: &KeyRange, at: i64, mut visit: impl FnMut(&Bytes, Found) -> bool) {
        let Some(bounds) = range.bounds() else { return };
        for (key, ki) in self.keys.range::<[u8], _>(bounds) {
            if let Some(found) = ki.get(at) {
                if !visit(key, found) {
                    return;
                }
            }
        }
    }

    /// Returns true when [`TreeIndex::count`] at `at` needs no walk: `at` sees every key's
    /// newest state.
    pub fn counts_fast(&self, at: i64) -> bool {
        at >= self.newest
    }

    /// Returns how many keys of `range` are alive at `at`.
    pub fn count(&self, range: &KeyRange, at: i64) -> usize {
        if self.counts_fast(at) {
            return self.live.count(range);
        }
        let mut n = 0;
        self.visit(range, at, |_, _| {
            n += 1;
            true
        });
        n
    }

    /// Compacts every key at `at`; returns the revisions `<= at` that must stay in history.
    pub fn compact(&mut self, at: i64) -> HashSet<Revision> {
        let mut keep = HashSet::new();
        self.keys.retain(|_, ki| {
            ki.compact(at, &mut keep);
            !ki.is_empty()
        });
        keep
    }

    /// Returns the number of keys with any history left.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Returns true when no key has history.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}
