//! [`IntervalTree`]: key ranges `[start, end)` (or `[start, ∞)`), each with a value, answering
//! "which ranges contain key k" in O(log n + matches).
//!
//! A treap (a binary search tree ordered by `(start, end)`, heap-ordered by random priorities,
//! so its expected depth is O(log n) whatever the insertion order) whose nodes also record the
//! largest end in their subtree. A stab for `k` skips every subtree whose largest end is `<= k`
//! (nothing there contains `k`) and every right subtree of a node starting after `k`. This is
//! etcd's interval tree idea on a simpler balancing scheme; the watch index keeps only general
//! ranges here (single keys and prefixes have cheaper exact lookups), which are rare, so nodes
//! own copies of their keys.
//!
//! ```text
//! insert [b, d), [a, c), [c, ∞)      stab "c": [c, ∞) and [b, d)      stab "a": [a, c)
//! one possible shape (priorities     stab "d": [c, ∞)                 stab "0": nothing
//! decide which):
//!         [b,d) max ∞
//!        /     \
//!  [a,c) max c  [c,∞) max ∞
//! ```

use std::cmp::Ordering;

/// Index of a node in the arena; `NIL` is none.
type Link = u32;
const NIL: Link = u32::MAX;

/// A range's end: `None` is unbounded, greater than every key.
type End = Option<Box<[u8]>>;

/// Returns true when `key` lies before `end`.
fn before(key: &[u8], end: Option<&[u8]>) -> bool {
    end.is_none_or(|e| key < e)
}

/// Orders ends, unbounded last.
fn cmp_end(a: Option<&[u8]>, b: Option<&[u8]>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Greater,
        (Some(_), None) => Ordering::Less,
        (Some(a), Some(b)) => a.cmp(b),
    }
}

#[derive(Debug)]
struct Node<T> {
    start: Box<[u8]>,
    end: End,
    value: T,
    left: Link,
    right: Link,
    priority: u32,
    /// The node of this subtree with the largest end.
    max_end: Link,
}

/// Ranges with values; see the module doc.
#[derive(Debug)]
pub(super) struct IntervalTree<T> {
    nodes: Vec<Option<Node<T>>>,
    free: Vec<Link>,
    root: Link,
    /// State of the generator of node priorities (xorshift).
    rng: u64,
    len: usize,
}

impl<T> Default for IntervalTree<T> {
    fn default() -> Self {
        Self { nodes: Vec::new(), free: Vec::new(), root: NIL, rng: 0x9E37_79B9_7F4A_7C15, len: 0 }
    }
}

impl<T> IntervalTree<T> {
    fn node(&self, at: Link) -> &Node<T> {
        self.nodes[at as usize].as_ref().expect("invariant: links point at live nodes")
    }

    fn node_mut(&mut self, at: Link) -> &mut Node<T> {
        self.nodes[at as usize].as_mut().expect("invariant: links point at live nodes")
    }

    fn end(&self, at: Link) -> Option<&[u8]> {
        self.node(at).end.as_deref()
    }

    /// Orders node `at` against the range `(start, end)`.
    fn cmp_node(&self, at: Link, start: &[u8], end: Option<&[u8]>) -> Ordering {
        let n = self.node(at);
        n.start.as_ref().cmp(start).then_with(|| cmp_end(n.end.as_deref(), end))
    }

    /// Returns the number of ranges.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Returns the value of range `[start, end)`, if present.
    pub(super) fn get_mut(&mut self, start: &[u8], end: Option<&[u8]>) -> Option<&mut T> {
        let mut at = self.root;
        while at != NIL {
            at = match self.cmp_node(at, start, end) {
                Ordering::Equal => return Some(&mut self.node_mut(at).value),
                Ordering::Greater => self.node(at).left,
                Ordering::Less => self.node(at).right,
            };
        }
        None
    }

    /// Adds range `[start, end)`, which must not be present, with `value`.
    pub(super) fn insert(&mut self, start: &[u8], end: Option<&[u8]>, value: T) {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let node = Node {
            start: start.into(),
            end: end.map(Into::into),
            value,
            left: NIL,
            right: NIL,
            priority: (self.rng >> 32) as u32,
            max_end: NIL,
        };
        let at = match self.free.pop() {
            Some(at) => {
                self.nodes[at as usize] = Some(node);
                at
            }
            None => {
                self.nodes.push(Some(node));
                Link::try_from(self.nodes.len() - 1).expect("invariant: fewer than 4 billion ranges")
            }
        };
        self.node_mut(at).max_end = at;
        let (lo, hi) = self.split(self.root, start, end, false);
        let lo = self.merge(lo, at);
        self.root = self.merge(lo, hi);
        self.len += 1;
    }

    /// Removes range `[start, end)` and returns its value.
    pub(super) fn remove(&mut self, start: &[u8], end: Option<&[u8]>) -> Option<T> {
        let (lo, rest) = self.split(self.root, start, end, false);
        let (found, hi) = self.split(rest, start, end, true);
        self.root = self.merge(lo, hi);
        if found == NIL {
            return None;
        }
        debug_assert!(self.node(found).left == NIL && self.node(found).right == NIL, "ranges are unique");
        let node = self.nodes[found as usize].take().expect("invariant: links point at live nodes");
        self.free.push(found);
        self.len -= 1;
        if self.len == 0 {
            *self = Self { rng: self.rng, ..Self::default() };
        }
        Some(node.value)
    }

    /// Calls `f` with the value of every range that contains `key`.
    pub(super) fn stab(&self, key: &[u8], f: &mut impl FnMut(&T)) {
        self.stab_from(self.root, key, f);
    }

    fn stab_from(&self, at: Link, key: &[u8], f: &mut impl FnMut(&T)) {
        if at == NIL || !before(key, self.end(self.node(at).max_end)) {
            return;
        }
        let n = self.node(at);
        self.stab_from(n.left, key, f);
        if *n.start > *key {
            return; // this node and everything to its right start after the key
        }
        if before(key, n.end.as_deref()) {
            f(&n.value);
        }
        self.stab_from(n.right, key, f);
    }

    /// Recomputes `at`'s largest end from its children.
    fn update(&mut self, at: Link) {
        let n = self.node(at);
        let mut best = at;
        for child in [n.left, n.right] {
            if child != NIL {
                let candidate = self.node(child).max_end;
                if cmp_end(self.end(candidate), self.end(best)) == Ordering::Greater {
                    best = candidate;
                }
            }
        }
        self.node_mut(at).max_end = best;
    }

    /// Splits subtree `at` into the ranges ordered before `(start, end)` (also those equal to it
    /// when `inclusive`) and the rest.
    fn split(&mut self, at: Link, start: &[u8], end: Option<&[u8]>, inclusive: bool) -> (Link, Link) {
        if at == NIL {
            return (NIL, NIL);
        }
        let goes_left = match self.cmp_node(at, start, end) {
            Ordering::Less => true,
            Ordering::Equal => inclusive,
            Ordering::Greater => false,
        };
        if goes_left {
            let (lo, hi) = self.split(self.node(at).right, start, end, inclusive);
            self.node_mut(at).right = lo;
            self.update(at);
            (at, hi)
        } else {
            let (lo, hi) = self.split(self.node(at).left, start, end, inclusive);
            self.node_mut(at).left = hi;
            self.update(at);
            (lo, at)
        }
    }

    /// Joins two subtrees, every range of `a` ordered before every range of `b`.
    fn merge(&mut self, a: Link, b: Link) -> Link {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        if self.node(a).priority >= self.node(b).priority {
            let right = self.merge(self.node(a).right, b);
            self.node_mut(a).right = right;
            self.update(a);
            a
        } else {
            let left = self.merge(a, self.node(b).left);
            self.node_mut(b).left = left;
            self.update(b);
            b
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn stabbed(t: &IntervalTree<u32>, key: &[u8]) -> Vec<u32> {
        let mut out = Vec::new();
        t.stab(key, &mut |v| out.push(*v));
        out.sort_unstable();
        out
    }

    /// The module doc's example.
    #[test]
    fn stabs_the_ranges_holding_a_key() {
        let mut t = IntervalTree::default();
        t.insert(b"b", Some(b"d"), 1);
        t.insert(b"a", Some(b"c"), 2);
        t.insert(b"c", None, 3);
        assert_eq!(stabbed(&t, b"c"), [1, 3]);
        assert_eq!(stabbed(&t, b"a"), [2]);
        assert_eq!(stabbed(&t, b"d"), [3]);
        assert_eq!(stabbed(&t, b"0"), [0u32; 0]);
        assert_eq!(t.get_mut(b"a", Some(b"c")).map(|v| *v), Some(2));
        assert!(t.get_mut(b"a", None).is_none());
        assert_eq!(t.remove(b"b", Some(b"d")), Some(1));
        assert_eq!(t.remove(b"b", Some(b"d")), None);
        assert_eq!(stabbed(&t, b"c"), [3]);
        assert_eq!((t.remove(b"a", Some(b"c")), t.remove(b"c", None), t.len()), (Some(2), Some(3), 0));
        assert!(t.nodes.is_empty(), "an empty tree keeps no nodes");
    }

    fn key() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(0u8..4, 0..4)
    }

    proptest! {
        /// Against a list of ranges: every stab finds exactly the ranges that contain the key,
        /// through inserts and removes in any order.
        #[test]
        fn matches_a_list_of_ranges(
            ops in proptest::collection::vec((any::<bool>(), key(), proptest::option::of(key())), 1..80),
            probes in proptest::collection::vec(key(), 1..20),
        ) {
            let mut t = IntervalTree::default();
            let mut model: Vec<(Vec<u8>, Option<Vec<u8>>, u32)> = Vec::new();
            for (n, (add, start, end)) in ops.into_iter().enumerate() {
                let at = model.iter().position(|(s, e, _)| *s == start && *e == end);
                match (add, at) {
                    (true, None) => {
                        t.insert(&start, end.as_deref(), n as u32);
                        model.push((start, end, n as u32));
                    }
                    (false, Some(i)) => {
                        let (s, e, v) = model.swap_remove(i);
                        prop_assert_eq!(t.remove(&s, e.as_deref()), Some(v));
                    }
                    (_, at) => prop_assert_eq!(t.get_mut(&start, end.as_deref()).is_some(), at.is_some()),
                }
                prop_assert_eq!(t.len(), model.len());
                for k in &probes {
                    let mut want: Vec<u32> = model
                        .iter()
                        .filter(|(s, e, _)| k >= s && before(k, e.as_deref()))
                        .map(|(_, _, v)| *v)
                        .collect();
                    want.sort_unstable();
                    prop_assert_eq!(stabbed(&t, k), want);
                }
            }
        }
    }
}
