//! [`TreeIndex`]: every key's [`KeyIndex`], ordered by key, in memory.
//!
//! Range reads walk this map to find which revision of each key answers the read, then fetch the
//! values from the backend by revision. Like etcd's `treeIndex`, it is rebuilt from the history
//! column family at start-up. Counts at the newest revision come from the [`LiveSet`] beside it.

use std::collections::{btree_map, BTreeMap, HashSet};

use bytes::Bytes;

use super::key_index::{Found, KeyIndex};
use super::key_range::KeyRange;
use super::live_set::LiveSet;
use super::revision::Revision;

/// One key's place in the index, found once for a put ([`TreeIndex::slot`]).
#[derive(Debug)]
pub struct PutSlot<'a> {
    entry: btree_map::Entry<'a, Bytes, KeyIndex>,
    live: &'a mut LiveSet,
    newest: &'a mut i64,
}

impl PutSlot<'_> {
    /// Returns the key's state at main revision `at`.
    pub fn get(&self, at: i64) -> Option<Found> {
        match &self.entry {
            btree_map::Entry::Occupied(e) => e.get().get(at),
            btree_map::Entry::Vacant(_) => None,
        }
    }

    /// Records a put of the key at `rev`.
    pub fn put(self, rev: Revision) {
        *self.newest = (*self.newest).max(rev.main);
        match self.entry {
            btree_map::Entry::Occupied(mut e) => {
                if !e.get().is_live() {
                    self.live.insert(e.key());
                }
                e.get_mut().put(rev);
            }
            btree_map::Entry::Vacant(e) => {
                self.live.insert(e.key());
                e.insert(KeyIndex::default()).put(rev);
            }
        }
    }
}

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

    /// Finds `key` once for a put: the slot answers the key's state and then takes the put, so a
    /// put searches the map once instead of once to read and once to write. `key` is copied
    /// first (a short allocation, cheaper than a second search of a large map): the map may keep
    /// it, and must not keep a slice of a caller's buffer (see `MvccStore::put_with`).
    pub fn slot(&mut self, key: &[u8]) -> PutSlot<'_> {
        PutSlot { entry: self.keys.entry(Bytes::copy_from_slice(key)), live: &mut self.live, newest: &mut self.newest }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> KeyRange {
        KeyRange::new(Bytes::from_static(b"\0"), Bytes::from_static(b"\0"))
    }

    #[test]
    fn a_slot_dropped_without_a_put_changes_nothing() {
        // A put whose decision fails (`ignore_value` on a missing key) drops its slot.
        let mut index = TreeIndex::default();
        index.slot(b"a").put(Revision::new(2, 0));
        let slot = index.slot(b"b");
        assert_eq!(slot.get(2), None);
        drop(slot);
        assert_eq!(index.len(), 1);
        assert_eq!(index.get(b"b", 2), None);
        assert_eq!(index.count(&all(), 2), 1);
    }

    #[test]
    fn a_slot_reads_the_newest_state_and_takes_the_put() {
        let mut index = TreeIndex::default();
        index.slot(b"k").put(Revision::new(2, 0));
        let slot = index.slot(b"k");
        let found = slot.get(2).expect("live");
        assert_eq!((found.modified, found.created, found.version), (Revision::new(2, 0), Revision::new(2, 0), 1));
        slot.put(Revision::new(3, 0));
        let found = index.get(b"k", 3).expect("live");
        assert_eq!((found.modified, found.created, found.version), (Revision::new(3, 0), Revision::new(2, 0), 2));
        assert_eq!(index.get(b"k", 2).map(|f| f.modified), Some(Revision::new(2, 0)), "history kept");
        assert_eq!(index.count(&all(), 3), 1);
    }

    #[test]
    fn a_put_through_a_slot_brings_a_deleted_key_back_to_life() {
        let mut index = TreeIndex::default();
        index.slot(b"k").put(Revision::new(2, 0));
        assert!(index.tombstone(b"k", Revision::new(3, 0)));
        assert_eq!(index.count(&all(), 3), 0);
        let slot = index.slot(b"k");
        assert_eq!(slot.get(3), None, "deleted");
        slot.put(Revision::new(4, 0));
        let found = index.get(b"k", 4).expect("live again");
        assert_eq!((found.created, found.version), (Revision::new(4, 0), 1), "a new generation");
        assert_eq!(index.count(&all(), 4), 1);
    }
}
