//! [`Watcher`]: one watch's state, packed small, because a control plane's engine carries
//! hundreds of thousands of them (kube-apiserver opens one per resource per client watch).
//!
//! The watched range's bytes live in the stream's key arena (see `table`): the watcher holds
//! where they start and how long they are. The range end is stored only when it says something
//! the start key does not: a prefix watch (`range_end` = the prefix with its last byte below
//! 0xff incremented, what etcd clients send for `WithPrefix`) stores the prefix alone. The
//! options, whether the start revision is still ahead and whether the watcher is in the hub's
//! index of synced watchers are bits of one byte. With the next
//! revision that makes 24 bytes plus the keys.
//!
//! ```text
//! create key "a/", range_end "a0"  ->  Prefix, arena "a/"    (2 bytes)
//! create key "b",  range_end "d"   ->  Before, arena "bd"    (start_len 1, end_len 1)
//! create key "k",  range_end ""    ->  Single, arena "k"
//! create key "",   range_end "\0"  ->  Unbounded, arena "\0" (every key)
//! ```

use ballast_proto::etcdserverpb::{watch_create_request::FilterType, WatchCreateRequest};

use super::index::WatchRange;
use super::wire::{EncodedEvent, WireEvent};
use crate::mvcc::key_range::prefix_end;

const PREV_KV: u8 = 1;
const NO_PUT: u8 = 1 << 1;
const NO_DELETE: u8 = 1 << 2;
const PROGRESS_NOTIFY: u8 = 1 << 3;
const FRAGMENT: u8 = 1 << 4;
/// Something was sent since the last periodic progress notification.
const SENT_RECENTLY: u8 = 1 << 5;
/// The requested start revision is above the current one: the watcher is not synced, for
/// progress, until the store reaches it. Cleared when `next_rev` first moves, which happens only
/// once the store's revision is at or past the start (see [`Watcher::advance`]).
const START_AHEAD: u8 = 1 << 6;
/// The watcher is in the hub's index of synced watchers: it has been sent everything up to the
/// hub's revision, and `next_rev` is only a lower bound (it is not moved every round).
const INDEXED: u8 = 1 << 7;

/// How the range ends (etcd's `range_end` conventions, as in `mvcc::KeyRange`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// Only the start key.
    Single,
    /// Every key from the start key on (`range_end == "\0"`).
    Unbounded,
    /// Every key that begins with the start key (`range_end` is the prefix's end).
    Prefix,
    /// Every key before the stored end (exclusive).
    Before,
}

/// The arena would pass its size limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ArenaFull;

/// One watch of a stream.
#[derive(Debug)]
pub(super) struct Watcher {
    /// Where the start key begins in the stream's key arena; the range end follows it.
    key_at: u32,
    start_len: u32,
    /// Length of the stored range end: non-zero only for `End::Before`.
    end_len: u32,
    end: End,
    flags: u8,
    /// The first revision not yet sent.
    next_rev: i64,
}

impl Watcher {
    /// Returns a watcher for `req` created at store revision `current_rev`, with its keys
    /// appended to `arena`.
    ///
    /// # Errors
    /// Returns [`ArenaFull`] (and leaves `arena` as it was) when the keys would take the arena
    /// past `limit` bytes or past the 4 GiB that 32-bit offsets address.
    pub(super) fn new(
        req: &WatchCreateRequest,
        current_rev: i64,
        arena: &mut Vec<u8>,
        limit: usize,
    ) -> Result<Self, ArenaFull> {
        // An empty key watches everything from "\0"; "\0" as range end means "every key >= key".
        let start: &[u8] = if req.key.is_empty() { b"\0" } else { &req.key };
        let end = match req.range_end.as_ref() {
            [] => End::Single,
            [0] => End::Unbounded,
            e if *e == *prefix_end(start) => End::Prefix,
            _ => End::Before,
        };
        let stored_end: &[u8] = if end == End::Before { &req.range_end } else { &[] };
        let at = arena.len();
        let len = start.len() + stored_end.len();
        let (Ok(key_at), Ok(start_len), Ok(end_len)) =
            (u32::try_from(at), u32::try_from(start.len()), u32::try_from(stored_end.len()))
        else {
            return Err(ArenaFull);
        };
        if at + len > limit.min(u32::MAX as usize) {
            return Err(ArenaFull);
        }
        arena.extend_from_slice(start);
        arena.extend_from_slice(stored_end);
        let has = |f: FilterType| req.filters.contains(&(f as i32));
        let flags = (u8::from(req.prev_kv) * PREV_KV)
            | (u8::from(has(FilterType::Noput)) * NO_PUT)
            | (u8::from(has(FilterType::Nodelete)) * NO_DELETE)
            | (u8::from(req.progress_notify) * PROGRESS_NOTIFY)
            | (u8::from(req.fragment) * FRAGMENT)
            | (u8::from(req.start_revision > current_rev) * START_AHEAD);
        let next_rev = if req.start_revision == 0 { current_rev + 1 } else { req.start_revision };
        Ok(Self { key_at, start_len, end_len, end, flags, next_rev })
    }

    /// Returns the bytes this watcher keeps in `arena` (start key, then stored range end).
    pub(super) fn stored<'a>(&self, arena: &'a [u8]) -> &'a [u8] {
        let at = self.key_at as usize;
        let len = self.start_len as usize + self.end_len as usize;
        arena.get(at..at + len).expect("invariant: a watcher's keys lie inside its table's arena")
    }

    /// Records that this watcher's keys moved to offset `at` of the arena.
    pub(super) fn moved_to(&mut self, at: u32) {
        self.key_at = at;
    }

    /// Returns the watched range, its keys read from `arena`.
    pub(super) fn range<'a>(&self, arena: &'a [u8]) -> WatchRange<'a> {
        let (start, end) = self.stored(arena).split_at(self.start_len as usize);
        match self.end {
            End::Single => WatchRange::Key(start),
            End::Unbounded => WatchRange::From(start),
            End::Prefix => WatchRange::Prefix(start),
            End::Before => WatchRange::Between(start, end),
        }
    }

    fn contains(&self, arena: &[u8], key: &[u8]) -> bool {
        let (start, end) = self.stored(arena).split_at(self.start_len as usize);
        match self.end {
            End::Single => key == start,
            End::Unbounded => key >= start,
            End::Prefix => key.starts_with(start),
            End::Before => key >= start && key < end,
        }
    }

    /// Returns true when `e` is in the range (keys read from the stream's `arena`) and not
    /// filtered out.
    pub(super) fn wants(&self, arena: &[u8], e: &EncodedEvent) -> bool {
        let filtered = if e.is_put() { self.flags & NO_PUT != 0 } else { self.flags & NO_DELETE != 0 };
        !filtered && self.contains(arena, e.key())
    }

    /// Returns `e` as this watcher receives it: without the previous value unless asked for.
    pub(super) fn shape(&self, e: &EncodedEvent) -> WireEvent {
        e.shaped(self.flags & PREV_KV != 0)
    }

    /// Returns the first revision not yet sent; while indexed, a lower bound of it (see
    /// [`Watcher::indexed`]).
    pub(super) fn next_rev(&self) -> i64 {
        self.next_rev
    }

    /// Moves the first unsent revision to `rev` when that is forward. The caller only moves it
    /// past revisions the store has reached, so a forward move also means the start revision is
    /// no longer ahead.
    pub(super) fn advance(&mut self, rev: i64) {
        if rev > self.next_rev {
            self.next_rev = rev;
            self.flags &= !START_AHEAD;
        }
    }

    /// Returns true while the watcher is in the hub's index of synced watchers: everything up to
    /// the hub's revision has been sent, whatever `next_rev` says.
    pub(super) fn indexed(&self) -> bool {
        self.flags & INDEXED != 0
    }

    /// Records that the watcher joined the index.
    pub(super) fn join_index(&mut self) {
        self.flags |= INDEXED;
    }

    /// Records that the watcher left the index having been sent every revision before `rev`, so
    /// its position is exact again.
    pub(super) fn leave_index(&mut self, rev: i64) {
        self.flags &= !INDEXED;
        self.advance(rev);
    }

    /// Returns true when everything up to `current_rev` has been sent and the requested start
    /// revision is reached, so a progress notification at `current_rev` tells the truth.
    pub(super) fn synced(&self, current_rev: i64) -> bool {
        let sent_all = self.indexed() || self.next_rev > current_rev;
        // An indexed watcher's `next_rev` stays at a start ahead of the store until an event
        // moves it, so the start is reached once the store is at it.
        let start_reached = self.flags & START_AHEAD == 0 || current_rev >= self.next_rev;
        sent_all && start_reached
    }

    /// Returns true when responses may be split in fragments.
    pub(super) fn fragment(&self) -> bool {
        self.flags & FRAGMENT != 0
    }

    /// Returns true when the client asked for periodic progress notifications.
    pub(super) fn progress_notify(&self) -> bool {
        self.flags & PROGRESS_NOTIFY != 0
    }

    /// Records that events were sent.
    pub(super) fn mark_sent(&mut self) {
        self.flags |= SENT_RECENTLY;
    }

    /// Returns whether events were sent since the last call, and clears the mark.
    pub(super) fn take_sent(&mut self) -> bool {
        let sent = self.flags & SENT_RECENTLY != 0;
        self.flags &= !SENT_RECENTLY;
        sent
    }
}

#[cfg(test)]
mod tests {
    use ballast_proto::mvccpb::{event::EventType, Event, KeyValue};
    use bytes::Bytes;

    use super::*;

    fn event(key: &[u8], t: EventType) -> EncodedEvent {
        EncodedEvent::new(&Event {
            r#type: t as i32,
            kv: Some(KeyValue { key: Bytes::copy_from_slice(key), ..Default::default() }),
            prev_kv: None,
        })
    }

    fn put(key: &[u8]) -> EncodedEvent {
        event(key, EventType::Put)
    }

    fn watcher(arena: &mut Vec<u8>, key: &'static [u8], end: &'static [u8]) -> Watcher {
        let req = WatchCreateRequest {
            key: Bytes::from_static(key),
            range_end: Bytes::from_static(end),
            ..Default::default()
        };
        Watcher::new(&req, 0, arena, usize::MAX).expect("room")
    }

    #[test]
    fn ranges_follow_etcd_conventions() {
        let mut a = Vec::new();
        let single = watcher(&mut a, b"a", b"");
        let from = watcher(&mut a, b"b", b"\0");
        let all = watcher(&mut a, b"", b"\0");
        let half_open = watcher(&mut a, b"p/", b"p1");
        let prefix = watcher(&mut a, b"p/", b"p0");
        let a = &a[..];
        assert!(single.wants(a, &put(b"a")) && !single.wants(a, &put(b"a0")));
        assert!(from.wants(a, &put(b"b")) && from.wants(a, &put(b"zz")) && !from.wants(a, &put(b"a")));
        assert!(all.wants(a, &put(b"\0")) && all.wants(a, &put(b"a")));
        assert!(half_open.wants(a, &put(b"p/x")) && half_open.wants(a, &put(b"p0")));
        assert!(!half_open.wants(a, &put(b"p1")) && !half_open.wants(a, &put(b"p")));
        assert!(prefix.wants(a, &put(b"p/x")) && !prefix.wants(a, &put(b"p0")) && !prefix.wants(a, &put(b"p")));
        assert_eq!((prefix.end, prefix.stored(a)), (End::Prefix, &b"p/"[..]), "a prefix's end is not stored");
        assert_eq!((half_open.end, half_open.stored(a)), (End::Before, &b"p/p1"[..]));
        assert_eq!(single.range(a), WatchRange::Key(b"a"));
        assert_eq!((from.range(a), all.range(a)), (WatchRange::From(b"b"), WatchRange::From(b"\0")));
        assert_eq!(
            (prefix.range(a), half_open.range(a)),
            (WatchRange::Prefix(b"p/"), WatchRange::Between(b"p/", b"p1"))
        );
    }

    /// A prefix watch answers exactly as the half-open range it stands for, including prefixes
    /// ending in 0xff bytes (whose end drops them) and ends that only look like a prefix's end.
    #[test]
    fn prefix_ends_match_the_half_open_range() {
        let starts: [&[u8]; 5] = [b"a", b"a\xff", b"\x00", b"ab\xfe", b"a\xff\xff"];
        let ends: [&[u8]; 6] = [b"b", b"ab\xff", b"\x01", b"ab\xff\x00", b"ac", b"b\x00"];
        let probes: [&[u8]; 12] = [
            b"",
            b"a",
            b"a\x00",
            b"a\xfe",
            b"a\xff",
            b"a\xff\xff\x01",
            b"ab",
            b"ab\xfe",
            b"ab\xfe\x00",
            b"ab\xff",
            b"b",
            b"\x00z",
        ];
        for start in starts {
            for end in ends {
                let mut arena = Vec::new();
                let req = WatchCreateRequest {
                    key: Bytes::copy_from_slice(start),
                    range_end: Bytes::copy_from_slice(end),
                    ..Default::default()
                };
                let w = Watcher::new(&req, 0, &mut arena, usize::MAX).expect("room");
                for key in probes {
                    let want = key >= start && key < end;
                    assert_eq!(w.wants(&arena, &put(key)), want, "{start:?}..{end:?} on {key:?} ({:?})", w.end);
                }
            }
        }
        let end_of = |start: &[u8], end: &[u8]| {
            let req = WatchCreateRequest {
                key: Bytes::copy_from_slice(start),
                range_end: Bytes::copy_from_slice(end),
                ..Default::default()
            };
            Watcher::new(&req, 0, &mut Vec::new(), usize::MAX).expect("room").end
        };
        assert!(end_of(b"a\xff", b"b") == End::Prefix && end_of(b"ab\xfe", b"ab\xff") == End::Prefix);
        assert!(end_of(b"\xff\xff", b"\0") == End::Unbounded && end_of(b"a", b"b\x00") == End::Before);
    }

    #[test]
    fn filters_and_sent_mark() {
        let req = WatchCreateRequest {
            key: Bytes::from_static(b"k"),
            filters: vec![FilterType::Noput as i32],
            ..Default::default()
        };
        let mut arena = Vec::new();
        let mut w = Watcher::new(&req, 0, &mut arena, usize::MAX).expect("room");
        assert!(!w.wants(&arena, &put(b"k")));
        assert!(w.wants(&arena, &event(b"k", EventType::Delete)));
        assert!(!w.take_sent());
        w.mark_sent();
        assert!(w.take_sent() && !w.take_sent());
    }

    #[test]
    fn a_start_ahead_of_the_store_is_not_synced_until_reached() {
        let mut arena = Vec::new();
        let ahead = WatchCreateRequest { key: Bytes::from_static(b"k"), start_revision: 10, ..Default::default() };
        let mut w = Watcher::new(&ahead, 5, &mut arena, usize::MAX).expect("room");
        assert_eq!(w.next_rev(), 10);
        assert!(!w.synced(5) && !w.synced(9));
        w.advance(10);
        assert!(!w.synced(9), "not moved forward: still waiting for revision 10");
        w.advance(11);
        assert!(w.synced(10) && !w.synced(11));
        let now = WatchCreateRequest { key: Bytes::from_static(b"k"), ..Default::default() };
        let w = Watcher::new(&now, 5, &mut arena, usize::MAX).expect("room");
        assert!(w.next_rev() == 6 && w.synced(5));
        let past = WatchCreateRequest { key: Bytes::from_static(b"k"), start_revision: 3, ..Default::default() };
        let mut w = Watcher::new(&past, 5, &mut arena, usize::MAX).expect("room");
        assert!(!w.synced(5), "history still to send");
        w.advance(6);
        assert!(w.synced(5));
    }

    /// An indexed watcher is synced at any revision once its start is reached, without moving.
    #[test]
    fn an_indexed_watcher_is_synced_without_advancing() {
        let mut arena = Vec::new();
        let ahead = WatchCreateRequest { key: Bytes::from_static(b"k"), start_revision: 10, ..Default::default() };
        let mut w = Watcher::new(&ahead, 5, &mut arena, usize::MAX).expect("room");
        w.join_index();
        assert!(w.indexed() && !w.synced(9) && w.synced(10) && w.synced(50));
        w.leave_index(51);
        assert!(!w.indexed() && w.next_rev() == 51 && w.synced(50) && !w.synced(51));
        let now = WatchCreateRequest { key: Bytes::from_static(b"k"), ..Default::default() };
        let mut w = Watcher::new(&now, 5, &mut arena, usize::MAX).expect("room");
        w.join_index();
        assert!(w.synced(5) && w.synced(500) && w.next_rev() == 6);
        assert_eq!(w.range(&arena), WatchRange::Key(b"k"));
    }

    #[test]
    fn arena_limit_leaves_the_arena_unchanged() {
        let mut arena = Vec::new();
        let req = WatchCreateRequest {
            key: Bytes::from_static(b"abc"),
            range_end: Bytes::from_static(b"abd0"),
            ..Default::default()
        };
        assert!(Watcher::new(&req, 0, &mut arena, 7).is_ok());
        assert_eq!(Watcher::new(&req, 0, &mut arena, 13).map(|_| ()), Err(ArenaFull));
        assert_eq!(arena.len(), 7);
    }

    #[test]
    fn watcher_stays_small() {
        assert!(std::mem::size_of::<Watcher>() <= 24, "{}", std::mem::size_of::<Watcher>());
    }
}
