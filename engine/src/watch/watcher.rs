//! [`Watcher`]: one watch's state, packed small, because a control plane's engine carries
//! hundreds of thousands of them (kube-apiserver opens one per resource per client watch).
//!
//! The watched range is one exact-size allocation holding the start key followed by the range
//! end; it is copied out of the request, so a watcher never pins the gRPC frame it arrived in.
//! The options are bits of one byte. With the revisions that makes 40 bytes plus the keys.

use ballast_proto::etcdserverpb::{watch_create_request::FilterType, WatchCreateRequest};
use ballast_proto::mvccpb::{event::EventType, Event};

const PREV_KV: u8 = 1;
const NO_PUT: u8 = 1 << 1;
const NO_DELETE: u8 = 1 << 2;
const PROGRESS_NOTIFY: u8 = 1 << 3;
const FRAGMENT: u8 = 1 << 4;
/// Something was sent since the last periodic progress notification.
const SENT_RECENTLY: u8 = 1 << 5;

/// How the range ends (etcd's `range_end` conventions, as in `mvcc::KeyRange`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// Only the start key.
    Single,
    /// Every key from the start key on (`range_end == "\0"`).
    Unbounded,
    /// Every key before the stored end (exclusive).
    Before,
}

/// One watch of a stream.
#[derive(Debug)]
pub(super) struct Watcher {
    /// Start key, then the range end when `end == Before`.
    keys: Box<[u8]>,
    start_len: u32,
    end: End,
    flags: u8,
    /// The start revision as requested (0 = "from now"); progress waits until it is reached.
    pub(super) start_rev: i64,
    /// The first revision not yet sent.
    pub(super) next_rev: i64,
}

impl Watcher {
    /// A watcher for `req` whose first unsent revision is `next_rev`.
    pub(super) fn new(req: &WatchCreateRequest, next_rev: i64) -> Self {
        // An empty key watches everything from "\0"; "\0" as range end means "every key >= key".
        let start: &[u8] = if req.key.is_empty() { b"\0" } else { &req.key };
        let end = match req.range_end.as_ref() {
            [] => End::Single,
            [0] => End::Unbounded,
            _ => End::Before,
        };
        let mut keys = Vec::with_capacity(start.len() + req.range_end.len());
        keys.extend_from_slice(start);
        if end == End::Before {
            keys.extend_from_slice(&req.range_end);
        }
        let has = |f: FilterType| req.filters.contains(&(f as i32));
        let flags = (u8::from(req.prev_kv) * PREV_KV)
            | (u8::from(has(FilterType::Noput)) * NO_PUT)
            | (u8::from(has(FilterType::Nodelete)) * NO_DELETE)
            | (u8::from(req.progress_notify) * PROGRESS_NOTIFY)
            | (u8::from(req.fragment) * FRAGMENT);
        Self {
            keys: keys.into_boxed_slice(),
            // Keys are bounded by the request size limit, far below 4 GiB.
            start_len: u32::try_from(start.len()).unwrap_or(u32::MAX),
            end,
            flags,
            start_rev: req.start_revision,
            next_rev,
        }
    }

    fn contains(&self, key: &[u8]) -> bool {
        let (start, end) = self.keys.split_at((self.start_len as usize).min(self.keys.len()));
        match self.end {
            End::Single => key == start,
            End::Unbounded => key >= start,
            End::Before => key >= start && key < end,
        }
    }

    /// Returns true when `e` is in the range and not filtered out.
    pub(super) fn wants(&self, e: &Event) -> bool {
        let Some(kv) = &e.kv else { return false };
        let put = e.r#type == EventType::Put as i32;
        let filtered = if put { self.flags & NO_PUT != 0 } else { self.flags & NO_DELETE != 0 };
        !filtered && self.contains(&kv.key)
    }

    /// Returns `e` as this watcher receives it: without the previous value unless asked for.
    pub(super) fn shape(&self, e: &Event) -> Event {
        if self.flags & PREV_KV != 0 || e.prev_kv.is_none() {
            e.clone()
        } else {
            Event { r#type: e.r#type, kv: e.kv.clone(), prev_kv: None }
        }
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
    use ballast_proto::mvccpb::KeyValue;
    use bytes::Bytes;

    use super::*;

    fn put(key: &'static [u8]) -> Event {
        Event {
            r#type: EventType::Put as i32,
            kv: Some(KeyValue { key: Bytes::from_static(key), ..Default::default() }),
            prev_kv: None,
        }
    }

    fn watcher(key: &'static [u8], end: &'static [u8]) -> Watcher {
        let req = WatchCreateRequest {
            key: Bytes::from_static(key),
            range_end: Bytes::from_static(end),
            ..Default::default()
        };
        Watcher::new(&req, 1)
    }

    #[test]
    fn ranges_follow_etcd_conventions() {
        let single = watcher(b"a", b"");
        assert!(single.wants(&put(b"a")) && !single.wants(&put(b"a0")));
        let from = watcher(b"b", b"\0");
        assert!(from.wants(&put(b"b")) && from.wants(&put(b"zz")) && !from.wants(&put(b"a")));
        let all = watcher(b"", b"\0");
        assert!(all.wants(&put(b"\0")) && all.wants(&put(b"a")));
        let half_open = watcher(b"p/", b"p0");
        assert!(half_open.wants(&put(b"p/x")) && !half_open.wants(&put(b"p0")) && !half_open.wants(&put(b"p")));
    }

    #[test]
    fn filters_and_sent_mark() {
        let req = WatchCreateRequest {
            key: Bytes::from_static(b"k"),
            filters: vec![FilterType::Noput as i32],
            ..Default::default()
        };
        let mut w = Watcher::new(&req, 1);
        assert!(!w.wants(&put(b"k")));
        let del = Event { r#type: EventType::Delete as i32, ..put(b"k") };
        assert!(w.wants(&del));
        assert!(!w.take_sent());
        w.mark_sent();
        assert!(w.take_sent() && !w.take_sent());
    }

    #[test]
    fn watcher_stays_small() {
        assert!(std::mem::size_of::<Watcher>() <= 40, "{}", std::mem::size_of::<Watcher>());
    }
}
