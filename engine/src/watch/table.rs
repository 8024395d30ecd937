//! [`WatcherTable`]: one stream's watchers by watch ID, sized for idle watchers by the hundred
//! thousand. IDs the server assigns count up from 0, so they index a vector of slots (one
//! `Option<Watcher>`, the same 40 bytes as a `Watcher`, thanks to the boxed keys' niche) instead
//! of a hash map's buckets (which held a key, a value and a control byte each at no more than
//! 7/8 load, so about twice the entries). IDs a client chose out of that order go to a map.

use std::collections::HashMap;
use std::ops::Index;

use super::watcher::Watcher;

/// A stream's watchers.
#[derive(Debug, Default)]
pub(super) struct WatcherTable {
    /// Slot `i` holds watch ID `i`.
    dense: Vec<Option<Watcher>>,
    /// Client-chosen IDs that are not the next slot.
    sparse: HashMap<i64, Watcher>,
    len: usize,
}

impl WatcherTable {
    fn slot(&self, id: i64) -> Option<usize> {
        usize::try_from(id).ok().filter(|i| *i < self.dense.len())
    }

    pub(super) fn contains_key(&self, id: &i64) -> bool {
        self.get(id).is_some()
    }

    pub(super) fn get(&self, id: &i64) -> Option<&Watcher> {
        match self.slot(*id) {
            Some(i) => self.dense[i].as_ref(),
            None => self.sparse.get(id),
        }
    }

    pub(super) fn get_mut(&mut self, id: &i64) -> Option<&mut Watcher> {
        match self.slot(*id) {
            Some(i) => self.dense[i].as_mut(),
            None => self.sparse.get_mut(id),
        }
    }

    /// Adds a watcher under `id`, which must be free.
    pub(super) fn insert(&mut self, id: i64, w: Watcher) {
        debug_assert!(!self.contains_key(&id), "watch ID {id} taken");
        match self.slot(id) {
            Some(i) => self.dense[i] = Some(w),
            None if usize::try_from(id).is_ok_and(|i| i == self.dense.len()) => self.dense.push(Some(w)),
            None => {
                self.sparse.insert(id, w);
            }
        }
        self.len += 1;
    }

    pub(super) fn remove(&mut self, id: &i64) -> Option<Watcher> {
        let w = match self.slot(*id) {
            Some(i) => self.dense[i].take(),
            None => self.sparse.remove(id),
        };
        if w.is_some() {
            self.len -= 1;
            // Cancelled slots at the end are given back, so a stream that cancels what it
            // created does not keep the high-water mark.
            while matches!(self.dense.last(), Some(None)) {
                self.dense.pop();
            }
        }
        w
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The watch IDs: the dense ones in order, then the client-chosen ones.
    pub(super) fn ids(&self) -> impl Iterator<Item = i64> + '_ {
        self.iter().map(|(id, _)| id)
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &Watcher> + '_ {
        self.iter().map(|(_, w)| w)
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (i64, &Watcher)> + '_ {
        let dense = self.dense.iter().zip(0..).filter_map(|(w, id)| Some((id, w.as_ref()?)));
        dense.chain(self.sparse.iter().map(|(id, w)| (*id, w)))
    }

    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (i64, &mut Watcher)> + '_ {
        let dense = self.dense.iter_mut().zip(0..).filter_map(|(w, id)| Some((id, w.as_mut()?)));
        dense.chain(self.sparse.iter_mut().map(|(id, w)| (*id, w)))
    }
}

impl Index<&i64> for WatcherTable {
    type Output = Watcher;

    fn index(&self, id: &i64) -> &Watcher {
        self.get(id).expect("watch ID present")
    }
}

#[cfg(test)]
mod tests {
    use ballast_proto::etcdserverpb::WatchCreateRequest;
    use bytes::Bytes;

    use super::*;

    fn watcher(start_rev: i64) -> Watcher {
        Watcher::new(
            &WatchCreateRequest { key: Bytes::from_static(b"k"), start_revision: start_rev, ..Default::default() },
            1,
        )
    }

    #[test]
    fn dense_and_client_chosen_ids_behave_like_a_map() {
        let mut t = WatcherTable::default();
        for id in [0, 1, 2, 7, -3] {
            t.insert(id, watcher(id));
        }
        assert_eq!(t.len(), 5);
        assert_eq!(t.dense.len(), 3, "7 and -3 are not the next slot");
        assert!(t.contains_key(&7) && t.contains_key(&-3) && !t.contains_key(&3));
        assert_eq!(t[&2].start_rev, 2);
        let mut ids: Vec<i64> = t.ids().collect();
        ids.sort_unstable();
        assert_eq!(ids, [-3, 0, 1, 2, 7]);
        assert_eq!(t.remove(&1).map(|w| w.start_rev), Some(1));
        assert!(t.remove(&1).is_none() && !t.contains_key(&1));
        t.insert(1, watcher(11));
        assert_eq!(t.get(&1).map(|w| w.start_rev), Some(11), "a freed slot is reused");
        for (_, w) in t.iter_mut() {
            w.next_rev = 99;
        }
        assert!(t.values().all(|w| w.next_rev == 99));
        assert_eq!(t.values().count(), t.len());
    }

    #[test]
    fn cancelled_tail_slots_are_given_back() {
        let mut t = WatcherTable::default();
        for id in 0..4 {
            t.insert(id, watcher(id));
        }
        t.remove(&1);
        assert_eq!(t.dense.len(), 4, "a hole inside stays");
        t.remove(&3);
        t.remove(&2);
        assert_eq!(t.dense.len(), 1, "trailing free slots go, down to the last watcher");
        t.remove(&0);
        assert!(t.is_empty() && t.dense.is_empty());
    }

    #[test]
    fn a_slot_costs_what_a_watcher_does() {
        assert_eq!(std::mem::size_of::<Option<Watcher>>(), std::mem::size_of::<Watcher>());
    }
}
