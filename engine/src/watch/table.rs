//! [`WatcherTable`]: one stream's watchers by watch ID, sized for idle watchers by the hundred
//! thousand.
//!
//! * **Slots.** IDs the server assigns count up from 0, so they index a vector of slots (one
//!   `Option<Watcher>`, the same 24 bytes as a `Watcher`, thanks to the range-end enum's niche)
//!   instead of a hash map's buckets (which held a key, a value and a control byte each at no
//!   more than 7/8 load, so about twice the entries). IDs a client chose out of that order go to
//!   a map.
//! * **Keys.** Every watcher's keys sit in one byte vector per stream, the key arena; a watcher
//!   holds their offset and lengths. A separate allocation per watcher cost its header and
//!   rounding (a 28-byte key pair took a 48-byte glibc chunk) and scattered small long-lived
//!   chunks among the create burst's short-lived ones, which kept the freed pages around them
//!   resident. A canceled watcher's bytes stay in the arena as dead bytes until they outnumber
//!   the live ones; then the arena is rewritten, so the work is amortized O(1) per byte freed and
//!   the arena never holds more than about twice its live bytes.
//!
//! ```text
//! insert 0 "a/" (prefix), 1 "b".."d", 2 "k"    arena "a/bdk", dead 0
//! remove 1                                     arena "a/bdk", dead 2 (below live 3: kept)
//! remove 0                                     dead 4 > live 1: rewritten to "k", 2 moves to 0
//! ```

use std::collections::HashMap;
use std::ops::Index;

use ballast_proto::etcdserverpb::WatchCreateRequest;

use super::watcher::{ArenaFull, Watcher};

/// A stream's watchers.
#[derive(Debug)]
pub(super) struct WatcherTable {
    /// Slot `i` holds watch ID `i`.
    dense: Vec<Option<Watcher>>,
    /// Client-chosen IDs that are not the next slot.
    sparse: HashMap<i64, Watcher>,
    len: usize,
    /// Every watcher's keys (see the module doc); offsets are 32-bit.
    keys: Vec<u8>,
    /// Bytes of `keys` that belong to no watcher any more.
    dead: usize,
    /// Most bytes `keys` may hold: the 4 GiB 32-bit offsets reach (smaller only in tests).
    key_limit: usize,
}

impl Default for WatcherTable {
    fn default() -> Self {
        Self::with_key_limit(u32::MAX as usize)
    }
}

impl WatcherTable {
    fn with_key_limit(key_limit: usize) -> Self {
        Self { dense: Vec::new(), sparse: HashMap::new(), len: 0, keys: Vec::new(), dead: 0, key_limit }
    }

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

    /// Returns the key arena the watchers' ranges are read from (see [`Watcher::wants`]).
    pub(super) fn keys(&self) -> &[u8] {
        &self.keys
    }

    /// Adds a watcher for `req` under `id`, which must be free, created at store revision
    /// `current_rev`.
    ///
    /// # Errors
    /// Returns [`ArenaFull`] when the stream's watchers' keys would pass 4 GiB, even after
    /// dropping dead bytes; nothing is added then.
    pub(super) fn insert(&mut self, id: i64, req: &WatchCreateRequest, current_rev: i64) -> Result<(), ArenaFull> {
        debug_assert!(!self.contains_key(&id), "watch ID {id} taken");
        let w = match Watcher::new(req, current_rev, &mut self.keys, self.key_limit) {
            Err(ArenaFull) if self.dead > 0 => {
                self.compact_keys();
                Watcher::new(req, current_rev, &mut self.keys, self.key_limit)?
            }
            w => w?,
        };
        match self.slot(id) {
            Some(i) => self.dense[i] = Some(w),
            None if usize::try_from(id).is_ok_and(|i| i == self.dense.len()) => self.dense.push(Some(w)),
            None => {
                self.sparse.insert(id, w);
            }
        }
        self.len += 1;
        Ok(())
    }

    pub(super) fn remove(&mut self, id: &i64) -> Option<Watcher> {
        let w = match self.slot(*id) {
            Some(i) => self.dense[i].take(),
            None => self.sparse.remove(id),
        };
        let w = w?;
        self.len -= 1;
        // Cancelled slots at the end are given back, so a stream that cancels what it
        // created does not keep the high-water mark.
        while matches!(self.dense.last(), Some(None)) {
            self.dense.pop();
        }
        self.dead += w.stored(&self.keys).len();
        if self.len == 0 {
            self.keys = Vec::new();
            self.dead = 0;
        } else if self.dead > self.keys.len() - self.dead {
            self.compact_keys();
        }
        Some(w)
    }

    /// Rewrites the arena with only the live watchers' keys, in a buffer of exactly their size.
    fn compact_keys(&mut self) {
        let mut keys = Vec::with_capacity(self.keys.len() - self.dead);
        let old = std::mem::take(&mut self.keys);
        let live = self.dense.iter_mut().flatten().chain(self.sparse.values_mut());
        for w in live {
            let at = u32::try_from(keys.len()).expect("invariant: live keys fit the arena they came from");
            keys.extend_from_slice(w.stored(&old));
            w.moved_to(at);
        }
        self.keys = keys;
        self.dead = 0;
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The watch IDs: the dense ones in order, then the client-chosen ones.
    #[cfg(test)]
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
    use crate::watch::wire::EncodedEvent;
    use ballast_proto::mvccpb::{event::EventType, Event, KeyValue};
    use bytes::Bytes;

    use super::*;

    fn req(key: &str, end: &str) -> WatchCreateRequest {
        WatchCreateRequest {
            key: Bytes::copy_from_slice(key.as_bytes()),
            range_end: Bytes::copy_from_slice(end.as_bytes()),
            ..Default::default()
        }
    }

    fn watch_from(start_rev: i64) -> WatchCreateRequest {
        WatchCreateRequest { key: Bytes::from_static(b"k"), start_revision: start_rev, ..Default::default() }
    }

    fn wants(t: &WatcherTable, id: i64, key: &str) -> bool {
        let e = EncodedEvent::new(&Event {
            r#type: EventType::Put as i32,
            kv: Some(KeyValue { key: Bytes::copy_from_slice(key.as_bytes()), ..Default::default() }),
            prev_kv: None,
        });
        t[&id].wants(t.keys(), &e)
    }

    #[test]
    fn dense_and_client_chosen_ids_behave_like_a_map() {
        let mut t = WatcherTable::default();
        for id in [1, 2, 3, 8, -2] {
            t.insert(id - 1, &watch_from(id), 0).expect("room");
        }
        assert_eq!(t.len(), 5);
        assert_eq!(t.dense.len(), 3, "7 and -3 are not the next slot");
        assert!(t.contains_key(&7) && t.contains_key(&-3) && !t.contains_key(&3));
        assert_eq!(t[&2].next_rev(), 3);
        let mut ids: Vec<i64> = t.ids().collect();
        ids.sort_unstable();
        assert_eq!(ids, [-3, 0, 1, 2, 7]);
        assert_eq!(t.remove(&1).map(|w| w.next_rev()), Some(2));
        assert!(t.remove(&1).is_none() && !t.contains_key(&1));
        t.insert(1, &watch_from(11), 0).expect("room");
        assert_eq!(t.get(&1).map(Watcher::next_rev), Some(11), "a freed slot is reused");
        for (_, w) in t.iter_mut() {
            w.advance(99);
        }
        assert!(t.values().all(|w| w.next_rev() == 99));
        assert_eq!(t.values().count(), t.len());
    }

    #[test]
    fn cancelled_tail_slots_are_given_back() {
        let mut t = WatcherTable::default();
        for id in 0..4 {
            t.insert(id, &watch_from(id + 1), 0).expect("room");
        }
        t.remove(&1);
        assert_eq!(t.dense.len(), 4, "a hole inside stays");
        t.remove(&3);
        t.remove(&2);
        assert_eq!(t.dense.len(), 1, "trailing free slots go, down to the last watcher");
        t.remove(&0);
        assert!(t.is_empty() && t.dense.is_empty());
        assert!(t.keys.is_empty() && t.keys.capacity() == 0, "no watcher, no arena");
    }

    /// The module doc's example: keys stay right across the rewrite of the arena, for dense and
    /// client-chosen IDs alike.
    #[test]
    fn dead_keys_are_dropped_once_they_outnumber_live_ones() {
        let mut t = WatcherTable::default();
        t.insert(0, &req("a/", "a0"), 0).expect("room");
        t.insert(1, &req("b", "d"), 0).expect("room");
        t.insert(2, &req("k", ""), 0).expect("room");
        t.insert(40, &req("x", "\0"), 0).expect("room");
        assert_eq!(t.keys(), b"a/bdkx");
        t.remove(&1);
        assert_eq!((t.keys().len(), t.dead), (6, 2), "2 dead of 6: kept");
        t.remove(&0);
        assert_eq!((t.keys(), t.dead), (&b"kx"[..], 0), "4 dead of 6: rewritten");
        assert_eq!(t.keys.capacity(), 2);
        assert!(wants(&t, 2, "k") && !wants(&t, 2, "kk"));
        assert!(wants(&t, 40, "y") && !wants(&t, 40, "w"));
        t.insert(0, &req("p/", "p0"), 0).expect("room");
        assert!(wants(&t, 0, "p/1") && wants(&t, 2, "k") && wants(&t, 40, "x"));
    }

    #[test]
    fn a_full_arena_refuses_after_dropping_dead_keys() {
        let mut t = WatcherTable::with_key_limit(4);
        t.insert(0, &req("ab", ""), 0).expect("room");
        t.insert(1, &req("cd", ""), 0).expect("room");
        assert_eq!(t.insert(2, &req("e", ""), 0), Err(ArenaFull));
        assert!(!t.contains_key(&2) && t.len() == 2);
        t.remove(&0);
        assert_eq!(t.dead, 2, "half dead: kept");
        t.insert(2, &req("e", ""), 0).expect("room after dropping the dead bytes");
        assert_eq!(t.keys(), b"cde");
        assert!(wants(&t, 1, "cd") && wants(&t, 2, "e"));
    }

    #[test]
    fn a_slot_costs_what_a_watcher_does() {
        assert_eq!(std::mem::size_of::<Option<Watcher>>(), std::mem::size_of::<Watcher>());
    }
}
