//! [`KeyRange`]: etcd's `(key, range_end)` conventions, decoded once.
//!
//! * `range_end` empty: the single key `key`;
//! * `range_end == "\0"`: every key `>= key` (with `key == "\0"`: every key);
//! * otherwise the half-open interval `[key, range_end)`, empty when `range_end <= key`.

use std::ops::Bound;

use bytes::Bytes;

/// The upper end of a [`KeyRange`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RangeEnd {
    /// Only the start key itself.
    Single,
    /// Every key from the start key on.
    Unbounded,
    /// Every key before this one (exclusive).
    Before(Bytes),
}

/// Lower and upper bounds for `BTreeMap::range`.
pub type Bounds<'a> = (Bound<&'a [u8]>, Bound<&'a [u8]>);

/// A set of keys named the etcd way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRange {
    /// The first key (inclusive).
    pub start: Bytes,
    /// Where the range stops.
    pub end: RangeEnd,
}

impl KeyRange {
    /// Decodes etcd's `(key, range_end)` pair.
    pub fn new(key: Bytes, range_end: Bytes) -> Self {
        let end = match range_end.as_ref() {
            [] => RangeEnd::Single,
            [0] => RangeEnd::Unbounded,
            _ => RangeEnd::Before(range_end),
        };
        Self { start: key, end }
    }

    /// Returns the range holding only `key`.
    pub fn single(key: Bytes) -> Self {
        Self { start: key, end: RangeEnd::Single }
    }

    /// Returns true when `key` is in the range.
    pub fn contains(&self, key: &[u8]) -> bool {
        match &self.end {
            RangeEnd::Single => key == self.start.as_ref(),
            RangeEnd::Unbounded => key >= self.start.as_ref(),
            RangeEnd::Before(end) => key >= self.start.as_ref() && key < end.as_ref(),
        }
    }

    /// Returns true when the range and `other` share a key (txn duplicate-key checks).
    pub fn overlaps(&self, other: &KeyRange) -> bool {
        let (a_lo, a_hi) = self.interval();
        let (b_lo, b_hi) = other.interval();
        let below = |lo: &[u8], hi: &Option<Vec<u8>>| hi.as_ref().is_none_or(|h| lo < h.as_slice());
        below(b_lo, &a_hi) && below(a_lo, &b_hi) && !self.is_empty() && !other.is_empty()
    }

    /// Returns true when no key can be in the range.
    pub fn is_empty(&self) -> bool {
        matches!(&self.end, RangeEnd::Before(end) if end.as_ref() <= self.start.as_ref())
    }

    /// The range as `[lo, hi)` with `hi = None` for unbounded.
    fn interval(&self) -> (&[u8], Option<Vec<u8>>) {
        match &self.end {
            RangeEnd::Single => {
                let mut hi = self.start.to_vec();
                hi.push(0);
                (self.start.as_ref(), Some(hi))
            }
            RangeEnd::Unbounded => (self.start.as_ref(), None),
            RangeEnd::Before(end) => (self.start.as_ref(), Some(end.to_vec())),
        }
    }

    /// The range as `BTreeMap::range` bounds, or None when it is empty.
    pub fn bounds(&self) -> Option<Bounds<'_>> {
        if self.is_empty() {
            return None;
        }
        let lo = Bound::Included(self.start.as_ref());
        Some(match &self.end {
            RangeEnd::Single => (lo, Bound::Included(self.start.as_ref())),
            RangeEnd::Unbounded => (lo, Bound::Unbounded),
            RangeEnd::Before(end) => (lo, Bound::Excluded(end.as_ref())),
        })
    }
}

/// Returns etcd's prefix end of `prefix`: the smallest key greater than every key starting with
/// it ("aa" -> "ab", "a\xff" -> "b"); `"\0"` (every key) when no such key exists.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kr(k: &str, e: &[u8]) -> KeyRange {
        KeyRange::new(Bytes::copy_from_slice(k.as_bytes()), Bytes::copy_from_slice(e))
    }

    #[test]
    fn conventions() {
        assert!(kr("a", b"").contains(b"a") && !kr("a", b"").contains(b"ab"));
        assert!(kr("b", b"\0").contains(b"zzz") && !kr("b", b"\0").contains(b"a"));
        assert!(kr("a", b"c").contains(b"b") && !kr("a", b"c").contains(b"c"));
        assert!(kr("c", b"a").is_empty());
        assert_eq!(prefix_end(b"aa"), b"ab");
        assert_eq!(prefix_end(b"a\xff"), b"b");
        assert_eq!(prefix_end(b"\xff\xff"), b"\0");
    }

    #[test]
    fn overlap() {
        assert!(kr("a", b"").overlaps(&kr("a", b"")));
        assert!(!kr("a", b"").overlaps(&kr("b", b"")));
        assert!(kr("a", b"c").overlaps(&kr("b", b"")));
        assert!(!kr("a", b"c").overlaps(&kr("c", b"")));
        assert!(kr("a", b"\0").overlaps(&kr("z", b"")));
        assert!(!kr("a", b"").overlaps(&kr("a\0", b"")));
    }
}
