//! [`SyncedIndex`]: the shard's synced watchers, found by the keys they watch, so that a round's
//! delivery costs the events times the watchers they match instead of a visit to every watcher.
//!
//! A watcher is here while it has been sent everything up to the hub's revision; the index then
//! stands for its position, so it needs no update per round (its `next_rev` is only a lower
//! bound while indexed). A watcher whose stream is full leaves the index with its exact position
//! and rejoins once caught up (see the hub's `publish` and `catch_up`).
//!
//! Three structures, by the shape of the watched range (etcd's `watcherGroup` keeps single keys in
//! a map and every range in an interval tree; prefixes, which are what Kubernetes watches, get a
//! map of their own here because they are as common as single keys and far cheaper to look up
//! than to stab):
//!
//! * **Single keys and prefixes** share one map from a seeded 64-bit hash of (shape, bytes) to the
//!   watchers of that range. The map holds no copy of the keys: they stay in the streams' key
//!   arenas, and every candidate is checked with `Watcher::wants` before anything is sent, which
//!   also settles the rare hash collision. A prefix watcher of `k` is found by looking up `k`'s
//!   own prefixes, only at the lengths some indexed prefix has (Kubernetes uses a handful).
//! * **Other ranges** (`[start, end)`, `[start, ∞)`) go to an [`IntervalTree`].
//!
//! ```text
//! watch 0 "a" (key), 1 "p/" (prefix), 2 "p/" (prefix), 3 "b".."d", 4 "c".."\0" (from c)
//! map:   h(key, "a") -> {0}   h(prefix, "p/") -> {1, 2}     prefix lengths: {2: 2 watchers}
//! tree:  [b, d) -> {3}   [c, ∞) -> {4}
//! event "p/x": h(key, "p/x") no; h(prefix, "p/") -> 1, 2; tree stab "p/x" -> 4
//! ```

use std::collections::hash_map::{Entry, RandomState};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};

use super::interval::IntervalTree;

/// Identifies a client watch stream within the engine.
pub type StreamId = u64;

/// One watcher of one stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct WatcherRef {
    pub(super) stream: StreamId,
    pub(super) id: i64,
}

/// The range a watcher watches, with its keys borrowed from the stream's key arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum WatchRange<'a> {
    /// Exactly this key.
    Key(&'a [u8]),
    /// Every key that begins with these bytes (never empty).
    Prefix(&'a [u8]),
    /// Every key from the start on.
    From(&'a [u8]),
    /// Every key from the start up to the end, exclusive.
    Between(&'a [u8], &'a [u8]),
}

/// The watchers of one range. Most ranges have one watcher (each Kubernetes object's own key, each
/// idle watcher of the memory scenario), a few have very many (a resource's prefix), so one is
/// kept inline and many in an ordered set, which hands them out grouped by stream and removes one
/// in O(log n).
#[derive(Debug)]
enum Members {
    One(WatcherRef),
    // Boxed so that a range's entry is 24 bytes, not 32: one per idle watcher, the common case,
    // against one more allocation per crowded range.
    #[allow(clippy::box_collection)]
    Many(Box<BTreeSet<WatcherRef>>),
}

impl Members {
    fn add(&mut self, w: WatcherRef) {
        match self {
            Members::One(first) => *self = Members::Many(Box::new(BTreeSet::from([*first, w]))),
            Members::Many(set) => {
                set.insert(w);
            }
        }
    }

    /// Removes `w`; returns true when no member is left.
    fn remove(&mut self, w: WatcherRef) -> bool {
        match self {
            Members::One(only) => *only == w,
            Members::Many(set) => {
                set.remove(&w);
                // A set holds two members or more: down to one, it goes back inline.
                if let (1, Some(last)) = (set.len(), set.first().copied()) {
                    *self = Members::One(last);
                }
                false
            }
        }
    }

    fn for_each(&self, f: &mut impl FnMut(WatcherRef)) {
        match self {
            Members::One(w) => f(*w),
            Members::Many(set) => set.iter().for_each(|w| f(*w)),
        }
    }
}

/// Passes a hash computed by the index's own seeded hasher through unchanged: the map's keys are
/// already uniformly distributed.
#[derive(Debug, Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

const SHAPE_KEY: u8 = 0;
const SHAPE_PREFIX: u8 = 1;

/// Synced watchers by key; see the module doc.
#[derive(Debug, Default)]
pub(super) struct SyncedIndex {
    /// Seeds the hash of (shape, bytes), so clients cannot pick keys that collide.
    seed: RandomState,
    by_hash: HashMap<u64, Members, BuildHasherDefault<Prehashed>>,
    /// Indexed prefix watchers by prefix length.
    prefix_lens: BTreeMap<usize, usize>,
    ranges: IntervalTree<Members>,
    len: usize,
}

impl SyncedIndex {
    fn hash(&self, shape: u8, bytes: &[u8]) -> u64 {
        let mut h = self.seed.build_hasher();
        h.write_u8(shape);
        h.write(bytes);
        h.finish()
    }

    /// Returns the number of indexed watchers.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Adds watcher `w` of `range`, which must not be indexed yet.
    pub(super) fn insert(&mut self, w: WatcherRef, range: WatchRange<'_>) {
        self.len += 1;
        let (shape, bytes) = match range {
            WatchRange::Key(k) => (SHAPE_KEY, k),
            WatchRange::Prefix(p) => {
                *self.prefix_lens.entry(p.len()).or_default() += 1;
                (SHAPE_PREFIX, p)
            }
            WatchRange::From(start) => return self.insert_range(w, start, None),
            WatchRange::Between(start, end) => return self.insert_range(w, start, Some(end)),
        };
        match self.by_hash.entry(self.hash(shape, bytes)) {
            Entry::Occupied(mut e) => e.get_mut().add(w),
            Entry::Vacant(e) => {
                e.insert(Members::One(w));
            }
        }
    }

    fn insert_range(&mut self, w: WatcherRef, start: &[u8], end: Option<&[u8]>) {
        match self.ranges.get_mut(start, end) {
            Some(m) => m.add(w),
            None => self.ranges.insert(start, end, Members::One(w)),
        }
    }

    /// Removes watcher `w` of `range`; returns false when it was not indexed.
    pub(super) fn remove(&mut self, w: WatcherRef, range: WatchRange<'_>) -> bool {
        let (shape, bytes) = match range {
            WatchRange::Key(k) => (SHAPE_KEY, k),
            WatchRange::Prefix(p) => (SHAPE_PREFIX, p),
            WatchRange::From(start) => return self.remove_range(w, start, None),
            WatchRange::Between(start, end) => return self.remove_range(w, start, Some(end)),
        };
        let Entry::Occupied(mut e) = self.by_hash.entry(self.hash(shape, bytes)) else { return false };
        let was_member = match e.get() {
            Members::One(only) => *only == w,
            Members::Many(set) => set.contains(&w),
        };
        if !was_member {
            return false;
        }
        if e.get_mut().remove(w) {
            e.remove();
        }
        if let WatchRange::Prefix(p) = range {
            let n = self.prefix_lens.get_mut(&p.len()).expect("invariant: an indexed prefix's length is counted");
            *n -= 1;
            if *n == 0 {
                self.prefix_lens.remove(&p.len());
            }
        }
        self.len -= 1;
        self.shrink_when_empty();
        true
    }

    fn remove_range(&mut self, w: WatcherRef, start: &[u8], end: Option<&[u8]>) -> bool {
        let Some(m) = self.ranges.get_mut(start, end) else { return false };
        let was_member = match m {
            Members::One(only) => *only == w,
            Members::Many(set) => set.contains(&w),
        };
        if !was_member {
            return false;
        }
        if m.remove(w) {
            self.ranges.remove(start, end);
        }
        self.len -= 1;
        self.shrink_when_empty();
        true
    }

    /// Gives the map's buckets back once no watcher is left: a burst of watchers that all went
    /// away would otherwise keep its high-water mark.
    fn shrink_when_empty(&mut self) {
        if self.len == 0 && self.by_hash.capacity() > 0 {
            self.by_hash = HashMap::default();
        }
    }

    /// Calls `f` with every indexed watcher whose range may contain `key`: all of those that do,
    /// and on a hash collision others, which the caller tells apart with `Watcher::wants`. The
    /// watchers of one range come in (stream, watch ID) order.
    pub(super) fn candidates(&self, key: &[u8], mut f: impl FnMut(WatcherRef)) {
        if self.len == 0 {
            return;
        }
        if !self.by_hash.is_empty() {
            if let Some(m) = self.by_hash.get(&self.hash(SHAPE_KEY, key)) {
                m.for_each(&mut f);
            }
            for &len in self.prefix_lens.keys() {
                let Some(prefix) = key.get(..len) else { break };
                if let Some(m) = self.by_hash.get(&self.hash(SHAPE_PREFIX, prefix)) {
                    m.for_each(&mut f);
                }
            }
        }
        if self.ranges.len() > 0 {
            self.ranges.stab(key, &mut |m: &Members| m.for_each(&mut f));
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn w(id: i64) -> WatcherRef {
        WatcherRef { stream: 1, id }
    }

    fn found(ix: &SyncedIndex, key: &[u8]) -> Vec<i64> {
        let mut out = Vec::new();
        ix.candidates(key, |r| out.push(r.id));
        out.sort_unstable();
        out
    }

    /// The module doc's example.
    #[test]
    fn finds_keys_prefixes_and_ranges() {
        let mut ix = SyncedIndex::default();
        ix.insert(w(0), WatchRange::Key(b"a"));
        ix.insert(w(1), WatchRange::Prefix(b"p/"));
        ix.insert(w(2), WatchRange::Prefix(b"p/"));
        ix.insert(w(3), WatchRange::Between(b"b", b"d"));
        ix.insert(w(4), WatchRange::From(b"c"));
        assert_eq!(found(&ix, b"p/x"), [1, 2, 4]);
        assert_eq!(found(&ix, b"a"), [0]);
        assert_eq!(found(&ix, b"p"), [4]);
        assert_eq!(found(&ix, b"bz"), [3]);
        assert_eq!(ix.prefix_lens, BTreeMap::from([(2, 2)]));
        assert!(!ix.remove(w(9), WatchRange::Prefix(b"p/")), "not a member");
        assert!(ix.remove(w(1), WatchRange::Prefix(b"p/")));
        assert!(!ix.remove(w(1), WatchRange::Prefix(b"p/")), "removed once");
        assert_eq!(found(&ix, b"p/x"), [2, 4]);
        for (id, r) in [
            (0, WatchRange::Key(b"a")),
            (2, WatchRange::Prefix(b"p/")),
            (3, WatchRange::Between(b"b", b"d")),
            (4, WatchRange::From(b"c")),
        ] {
            assert!(ix.remove(w(id), r));
        }
        assert_eq!(ix.len(), 0);
        assert!(ix.prefix_lens.is_empty() && ix.by_hash.capacity() == 0, "nothing kept once empty");
    }

    #[test]
    fn many_watchers_of_one_range_come_grouped_by_stream() {
        let mut ix = SyncedIndex::default();
        for stream in [3, 1, 2] {
            for id in [2, 0, 1] {
                ix.insert(WatcherRef { stream, id }, WatchRange::Prefix(b"fan/"));
            }
        }
        let mut got = Vec::new();
        ix.candidates(b"fan/1", |r| got.push((r.stream, r.id)));
        let mut want = got.clone();
        want.sort_unstable();
        assert_eq!((got.len(), got), (9, want));
    }

    #[test]
    fn an_entry_stays_small() {
        assert_eq!(std::mem::size_of::<Members>(), 24);
    }

    fn range() -> impl Strategy<Value = (u8, Vec<u8>, Vec<u8>)> {
        (0u8..4, proptest::collection::vec(0u8..3, 1..4), proptest::collection::vec(0u8..3, 0..4))
    }

    fn as_range<'a>(shape: u8, a: &'a [u8], b: &'a [u8]) -> WatchRange<'a> {
        match shape {
            0 => WatchRange::Key(a),
            1 => WatchRange::Prefix(a),
            2 => WatchRange::From(a),
            _ => WatchRange::Between(a, b),
        }
    }

    fn contains(r: WatchRange<'_>, k: &[u8]) -> bool {
        match r {
            WatchRange::Key(x) => k == x,
            WatchRange::Prefix(p) => k.starts_with(p),
            WatchRange::From(s) => k >= s,
            WatchRange::Between(s, e) => k >= s && k < e,
        }
    }

    proptest! {
        /// Against a list of watchers: every key finds exactly the watchers whose range holds it
        /// (no collisions among so few short keys), through inserts and removes in any order.
        #[test]
        fn matches_a_list_of_watchers(
            ops in proptest::collection::vec((any::<bool>(), range()), 1..60),
            probes in proptest::collection::vec(proptest::collection::vec(0u8..3, 0..5), 1..16),
        ) {
            let mut ix = SyncedIndex::default();
            let mut model: Vec<(WatcherRef, u8, Vec<u8>, Vec<u8>)> = Vec::new();
            for (n, (add, (shape, a, b))) in ops.into_iter().enumerate() {
                if add || model.is_empty() {
                    let id = WatcherRef { stream: n as u64 % 3, id: n as i64 };
                    ix.insert(id, as_range(shape, &a, &b));
                    model.push((id, shape, a, b));
                } else {
                    let (id, shape, a, b) = model.swap_remove(n % model.len());
                    prop_assert!(ix.remove(id, as_range(shape, &a, &b)));
                }
                prop_assert_eq!(ix.len(), model.len());
                for k in &probes {
                    let mut got = Vec::new();
                    ix.candidates(k, |r| got.push(r));
                    got.sort_unstable();
                    let mut want: Vec<WatcherRef> =
                        model.iter().filter(|(_, s, a, b)| contains(as_range(*s, a, b), k)).map(|m| m.0).collect();
                    want.sort_unstable();
                    prop_assert_eq!(got, want);
                }
            }
        }
    }
}
