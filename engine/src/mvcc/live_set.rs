//! [`LiveSet`]: the keys alive at the newest revision, in order, countable by range in
//! O(chunks + log n).
//!
//! Every etcd Range answers `count`, the number of keys in the whole range, even when it returns
//! only a page of them. Walking the [`super::index::TreeIndex`] for that costs one visit per key
//! (100k visits for a 500-key page of a 100k-key prefix, which is how kube-apiserver lists). Most
//! reads are at the newest revision, so this set keeps the live keys in sorted chunks and a count
//! is two binary searches plus a sum over the chunks between them. Reads of an older revision
//! still walk the index.
//!
//! Chunks hold at most [`CHUNK`] keys: inserts and removals move at most that many pointers, and a
//! count over n keys sums about n / [`CHUNK`] lengths.

use bytes::Bytes;

use super::key_range::{KeyRange, RangeEnd};

/// Most keys a chunk holds before it splits in two.
const CHUNK: usize = 512;

/// The live keys, in key order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LiveSet {
    /// Sorted, non-empty chunks; every key of a chunk sorts before every key of the next.
    chunks: Vec<Vec<Bytes>>,
    len: usize,
}

impl LiveSet {
    /// Adds `key`; a key already present is left as it is.
    pub fn insert(&mut self, key: &Bytes) {
        if self.chunks.is_empty() {
            self.chunks.push(vec![key.clone()]);
            self.len = 1;
            return;
        }
        let c = self.chunk_for(key).min(self.chunks.len() - 1);
        let chunk = &mut self.chunks[c];
        let Err(at) = chunk.binary_search(key) else { return };
        chunk.insert(at, key.clone());
        self.len += 1;
        if chunk.len() > CHUNK {
            let tail = chunk.split_off(chunk.len() / 2);
            self.chunks.insert(c + 1, tail);
        }
    }

    /// Removes `key` if present.
    pub fn remove(&mut self, key: &[u8]) {
        let c = self.chunk_for(key);
        let Some(chunk) = self.chunks.get_mut(c) else { return };
        let Ok(at) = chunk.binary_search_by(|k| k.as_ref().cmp(key)) else { return };
        chunk.remove(at);
        self.len -= 1;
        if chunk.is_empty() {
            self.chunks.remove(c);
        }
    }

    /// Returns the number of live keys.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Returns true when no key is live.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Returns how many live keys `range` holds.
    pub fn count(&self, range: &KeyRange) -> usize {
        match &range.end {
            RangeEnd::Single => usize::from(self.contains(&range.start)),
            RangeEnd::Unbounded => self.len - self.below(&range.start),
            RangeEnd::Before(end) if end.as_ref() <= range.start.as_ref() => 0,
            RangeEnd::Before(end) => self.below(end) - self.below(&range.start),
        }
    }

    fn contains(&self, key: &[u8]) -> bool {
        self.chunks.get(self.chunk_for(key)).is_some_and(|c| c.binary_search_by(|k| k.as_ref().cmp(key)).is_ok())
    }

    /// The number of live keys sorting before `key`.
    fn below(&self, key: &[u8]) -> usize {
        let c = self.chunk_for(key);
        let before: usize = self.chunks[..c].iter().map(Vec::len).sum();
        let within = self.chunks.get(c).map_or(0, |chunk| chunk.partition_point(|k| k.as_ref() < key));
        before + within
    }

    /// The first chunk whose last key is `>= key` (`chunks.len()` when there is none).
    fn chunk_for(&self, key: &[u8]) -> usize {
        self.chunks.partition_point(|c| c.last().is_some_and(|last| last.as_ref() < key))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    fn key(n: u16) -> Bytes {
        Bytes::from(format!("k{n:05}"))
    }

    fn model_count(model: &BTreeSet<Bytes>, range: &KeyRange) -> usize {
        model.iter().filter(|k| range.contains(k)).count()
    }

    proptest! {
        // Enough operations over a small key space to split chunks, empty them and refill them.
        #[test]
        fn counts_match_a_sorted_set(ops in proptest::collection::vec((any::<bool>(), 0u16..3000), 1..4000),
                                     queries in proptest::collection::vec((0u16..3100, 0u16..3100, 0u8..3), 20)) {
            let mut set = LiveSet::default();
            let mut model = BTreeSet::new();
            for (add, n) in ops {
                if add {
                    set.insert(&key(n));
                    model.insert(key(n));
                } else {
                    set.remove(&key(n));
                    model.remove(&key(n));
                }
            }
            prop_assert_eq!(set.len(), model.len());
            for (a, b, kind) in queries {
                let end = match kind {
                    0 => Bytes::new(),
                    1 => Bytes::from_static(b"\0"),
                    _ => key(b),
                };
                let range = KeyRange::new(key(a), end);
                prop_assert_eq!(set.count(&range), model_count(&model, &range), "range {:?}", range);
            }
        }
    }

    #[test]
    fn empty_set_counts_nothing() {
        let set = LiveSet::default();
        assert_eq!(set.count(&KeyRange::new(Bytes::from_static(b"\0"), Bytes::from_static(b"\0"))), 0);
        assert_eq!(set.count(&KeyRange::single(key(1))), 0);
    }
}
