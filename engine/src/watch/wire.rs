//! Watch responses as they leave the engine: every event is encoded once, when its round is
//! published, and the encoded bytes are shared by every response that carries it.
//!
//! A Kubernetes control plane watches each resource from many clients at once, so a single event
//! goes to thousands of watchers. Building an `mvccpb.Event` per watcher and letting the gRPC
//! layer encode each copy made the encoding the largest cost of a fan-out. Here a response holds
//! [`WireEvent`]s, reference-counted slices of one encoding; writing a response copies them into
//! the stream's buffer (see `api::watch_codec`) and nothing is encoded twice.
//!
//! An event's encoding without its previous value is a prefix of the encoding with it: the
//! previous value is field 3 of `mvccpb.Event`, written last. So one buffer serves watchers with
//! and without `prev_kv` ([`EncodedEvent::shaped`]).

use ballast_proto::etcdserverpb::{ResponseHeader, WatchResponse};
use ballast_proto::mvccpb::{event::EventType, Event};
use bytes::{BufMut, Bytes, BytesMut};
use prost::encoding::{self, WireType};
use prost::Message;
use smallvec::SmallVec;

/// Tag of `WatchResponse.events`.
const EVENTS_FIELD: u32 = 11;
/// Tags of `Event.type`, `Event.kv` and `Event.prev_kv`.
const TYPE_FIELD: u32 = 1;
const KV_FIELD: u32 = 2;
const PREV_KV_FIELD: u32 = 3;

/// A response's events. Most responses carry one event (one write, one watcher), which then
/// lives in the response itself: no allocation per watcher per write.
pub type Events = SmallVec<[WireEvent; 1]>;

/// One event as a watcher receives it: the encoded `mvccpb.Event` message, shared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireEvent {
    rev: i64,
    bytes: Bytes,
}

impl WireEvent {
    /// Returns the event's revision (its `kv.mod_revision`).
    pub fn rev(&self) -> i64 {
        self.rev
    }

    /// Returns the encoded `mvccpb.Event`.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Returns what this event adds to an encoded `WatchResponse`.
    fn field_len(&self) -> usize {
        encoding::key_len(EVENTS_FIELD) + encoding::encoded_len_varint(self.bytes.len() as u64) + self.bytes.len()
    }

    /// Encodes `e` as a watcher with `prev_kv` receives it. Used where an event goes to one
    /// watcher only (history read for a lagging watcher).
    #[cfg(test)]
    pub fn encode(e: &Event) -> Self {
        EncodedEvent::new(e).shaped(true)
    }
}

/// An event encoded once for every watcher, with what the hub needs to match it to watchers.
#[derive(Clone, Debug)]
pub struct EncodedEvent {
    key: Bytes,
    rev: i64,
    put: bool,
    /// The event with its previous value, if it has one.
    full: Bytes,
    /// Length of the encoding without the previous value: a prefix of `full`.
    bare_len: usize,
}

impl EncodedEvent {
    /// Encodes `e`.
    pub fn new(e: &Event) -> Self {
        // `Event`'s fields in tag order, as prost writes them: type (omitted for PUT, the
        // default), kv, then prev_kv.
        let type_len = if e.r#type != 0 { encoding::int32::encoded_len(TYPE_FIELD, &e.r#type) } else { 0 };
        let kv_len = e.kv.as_ref().map_or(0, |kv| encoding::message::encoded_len(KV_FIELD, kv));
        let bare_len = type_len + kv_len;
        let prev_len = e.prev_kv.as_ref().map_or(0, |p| encoding::message::encoded_len(PREV_KV_FIELD, p));
        let mut buf = BytesMut::with_capacity(bare_len + prev_len);
        if e.r#type != 0 {
            encoding::int32::encode(TYPE_FIELD, &e.r#type, &mut buf);
        }
        if let Some(kv) = &e.kv {
            encoding::message::encode(KV_FIELD, kv, &mut buf);
        }
        if let Some(prev) = &e.prev_kv {
            encoding::message::encode(PREV_KV_FIELD, prev, &mut buf);
        }
        let kv = e.kv.as_ref();
        Self {
            key: kv.map(|kv| kv.key.clone()).unwrap_or_default(),
            rev: kv.map_or(0, |kv| kv.mod_revision),
            put: e.r#type == EventType::Put as i32,
            full: buf.freeze(),
            bare_len,
        }
    }

    /// Returns the bytes the event holds (its encoding, previous value included, and its key).
    pub fn held_bytes(&self) -> usize {
        self.key.len() + self.full.len()
    }

    /// Returns the key the event changed.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// Returns the event's revision.
    pub fn rev(&self) -> i64 {
        self.rev
    }

    /// Returns true for a put, false for a delete.
    pub fn is_put(&self) -> bool {
        self.put
    }

    /// Returns the event as a watcher receives it: with its previous value when `prev_kv`.
    pub fn shaped(&self, prev_kv: bool) -> WireEvent {
        let bytes = if prev_kv { self.full.clone() } else { self.full.slice(..self.bare_len) };
        WireEvent { rev: self.rev, bytes }
    }
}

/// Room for an encoded header field: its key and length (one byte each) and four fields of a
/// key and a varint of at most 10 bytes each.
const HEADER_ROOM: usize = 2 + 4 * 11;

/// A response header as field 1 of `WatchResponse` (key, length, message), encoded once for a
/// round and copied into each of its responses: the varints of the cluster and member IDs cost
/// more to encode per watcher than copying the whole field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncodedHeader {
    len: u8,
    bytes: [u8; HEADER_ROOM],
}

impl EncodedHeader {
    /// Encodes `h`.
    pub fn new(h: &ResponseHeader) -> Self {
        let mut bytes = [0u8; HEADER_ROOM];
        let mut free = &mut bytes[..];
        encoding::message::encode(1, h, &mut free);
        let len = HEADER_ROOM - free.len();
        Self { len: len as u8, bytes }
    }

    fn as_slice(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// A `WatchResponse` whose events are already encoded. Field for field the generated message,
/// written by [`WireResponse::encode`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WireResponse {
    /// `header` (1).
    pub header: Option<ResponseHeader>,
    /// `header` as encoded, when the builder had it (see [`EncodedHeader`]); written instead of
    /// encoding `header`, so whoever changes `header` clears it.
    pub header_bytes: Option<EncodedHeader>,
    /// `watch_id` (2).
    pub watch_id: i64,
    /// `created` (3).
    pub created: bool,
    /// `canceled` (4).
    pub canceled: bool,
    /// `compact_revision` (5).
    pub compact_revision: i64,
    /// `cancel_reason` (6).
    pub cancel_reason: String,
    /// `fragment` (7).
    pub fragment: bool,
    /// `events` (11), each already encoded.
    pub events: Events,
}

impl WireResponse {
    /// Returns the size of the encoded message.
    pub fn encoded_len(&self) -> usize {
        self.fields_len() + self.events.iter().map(WireEvent::field_len).sum::<usize>()
    }

    /// Size of everything but the events.
    fn fields_len(&self) -> usize {
        let mut n = match (&self.header_bytes, &self.header) {
            (Some(b), _) => usize::from(b.len),
            (None, Some(h)) => encoding::message::encoded_len(1, h),
            (None, None) => 0,
        };
        if self.watch_id != 0 {
            n += encoding::int64::encoded_len(2, &self.watch_id);
        }
        n += usize::from(self.created) * 2 + usize::from(self.canceled) * 2;
        if self.compact_revision != 0 {
            n += encoding::int64::encoded_len(5, &self.compact_revision);
        }
        if !self.cancel_reason.is_empty() {
            n += encoding::string::encoded_len(6, &self.cancel_reason);
        }
        n + usize::from(self.fragment) * 2
    }

    /// Lowers the header's revision to at most `bound`, dropping the encoded header when that
    /// changes it (the merge over shards answers at the revision every shard has published).
    pub fn cap_revision(&mut self, bound: i64) {
        if let Some(h) = self.header.as_mut().filter(|h| h.revision > bound) {
            h.revision = bound;
            self.header_bytes = None;
        }
    }

    /// Writes the message as protobuf, the fields in tag order as prost writes them.
    pub fn encode(&self, buf: &mut impl BufMut) {
        match (&self.header_bytes, &self.header) {
            (Some(b), _) => {
                debug_assert_eq!(self.header.as_ref().map(EncodedHeader::new), Some(*b), "a stale encoded header");
                buf.put_slice(b.as_slice());
            }
            (None, Some(h)) => encoding::message::encode(1, h, buf),
            (None, None) => {}
        }
        if self.watch_id != 0 {
            encoding::int64::encode(2, &self.watch_id, buf);
        }
        if self.created {
            encoding::bool::encode(3, &true, buf);
        }
        if self.canceled {
            encoding::bool::encode(4, &true, buf);
        }
        if self.compact_revision != 0 {
            encoding::int64::encode(5, &self.compact_revision, buf);
        }
        if !self.cancel_reason.is_empty() {
            encoding::string::encode(6, &self.cancel_reason, buf);
        }
        if self.fragment {
            encoding::bool::encode(7, &true, buf);
        }
        for e in &self.events {
            encoding::encode_key(EVENTS_FIELD, WireType::LengthDelimited, buf);
            encoding::encode_varint(e.bytes.len() as u64, buf);
            buf.put_slice(&e.bytes);
        }
    }

    /// Returns the message as the generated type, decoding the events: for tests and for the
    /// rare reader that needs the events' fields.
    ///
    /// # Panics
    /// Never for a response built by the hub: every event was encoded from an `Event`.
    pub fn decode(&self) -> WatchResponse {
        let mut buf = Vec::with_capacity(self.encoded_len());
        self.encode(&mut buf);
        WatchResponse::decode(buf.as_slice()).expect("invariant: encoded from valid messages")
    }

    /// Splits the response into fragments of about `max_bytes` each (never splitting an event),
    /// every one but the last with `fragment` set, as etcd does for watchers created with
    /// `fragment`.
    pub fn fragments(self, max_bytes: usize) -> Vec<WireResponse> {
        let WireResponse { header, header_bytes, watch_id, events, .. } = self;
        let start = || WireResponse { header, header_bytes, watch_id, fragment: true, ..Default::default() };
        let mut parts = Vec::new();
        let mut cur = start();
        let mut len = cur.fields_len();
        for e in events {
            if !cur.events.is_empty() && len + e.field_len() > max_bytes {
                parts.push(std::mem::replace(&mut cur, start()));
                len = cur.fields_len();
            }
            len += e.field_len();
            cur.events.push(e);
        }
        cur.fragment = false;
        parts.push(cur);
        parts
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ballast_proto::mvccpb::KeyValue;

    /// A record of `key` at `rev` (created at 2, version 3), for tests that build events.
    pub(crate) fn kv(key: &str, value: &str, rev: i64) -> KeyValue {
        KeyValue {
            key: Bytes::copy_from_slice(key.as_bytes()),
            value: Bytes::copy_from_slice(value.as_bytes()),
            create_revision: 2,
            mod_revision: rev,
            version: 3,
            lease: 0,
        }
    }

    #[test]
    fn shaped_events_are_what_prost_writes() {
        let put =
            Event { r#type: EventType::Put as i32, kv: Some(kv("a", "new", 9)), prev_kv: Some(kv("a", "old", 7)) };
        let del = Event { r#type: EventType::Delete as i32, kv: Some(kv("b", "", 10)), prev_kv: None };
        for e in [put, del] {
            let enc = EncodedEvent::new(&e);
            let kv = e.kv.as_ref().expect("built with a kv");
            assert_eq!((enc.key(), enc.rev()), (kv.key.as_ref(), kv.mod_revision));
            assert_eq!(enc.is_put(), e.r#type == EventType::Put as i32);
            assert_eq!(enc.shaped(true).bytes().as_ref(), e.encode_to_vec().as_slice());
            let bare = Event { prev_kv: None, ..e.clone() };
            assert_eq!(enc.shaped(false).bytes().as_ref(), bare.encode_to_vec().as_slice());
        }
    }

    #[test]
    fn responses_encode_as_the_generated_message() {
        let plain_header = ResponseHeader { cluster_id: 1, member_id: 2, revision: 10, raft_term: 3 };
        let header = Some(plain_header);
        let e1 = Event { r#type: 0, kv: Some(kv("a", "v", 9)), prev_kv: Some(kv("a", "u", 8)) };
        let e2 = Event { r#type: 1, kv: Some(kv("b", "", 10)), prev_kv: None };
        let wire = WireResponse {
            header,
            header_bytes: None,
            watch_id: 7,
            created: true,
            canceled: true,
            compact_revision: 4,
            cancel_reason: "why".into(),
            fragment: true,
            events: [WireEvent::encode(&e1), WireEvent::encode(&e2)].into_iter().collect(),
        };
        let generated = WatchResponse {
            header,
            watch_id: 7,
            created: true,
            canceled: true,
            compact_revision: 4,
            cancel_reason: "why".into(),
            fragment: true,
            events: vec![e1, e2],
        };
        let mut buf = Vec::new();
        wire.encode(&mut buf);
        assert_eq!(buf, generated.encode_to_vec());
        // The same with the header encoded beforehand, including the widest varints.
        let wide =
            ResponseHeader { cluster_id: u64::MAX, member_id: u64::MAX, revision: i64::MIN, raft_term: u64::MAX };
        for h in [plain_header, wide] {
            let pre = WireResponse { header: Some(h), header_bytes: Some(EncodedHeader::new(&h)), ..wire.clone() };
            let plain = WireResponse { header: Some(h), ..wire.clone() };
            let mut a = Vec::new();
            pre.encode(&mut a);
            let mut b = Vec::new();
            plain.encode(&mut b);
            assert_eq!(a, b);
            assert_eq!(pre.encoded_len(), a.len());
        }
        assert_eq!(wire.encoded_len(), buf.len());
        assert_eq!(wire.decode(), generated);
        let empty = WireResponse::default();
        assert_eq!(empty.encoded_len(), 0);
        assert_eq!(empty.decode(), WatchResponse::default());
    }

    #[test]
    fn fragments_stay_under_the_limit_and_keep_every_event() {
        let events: Vec<WireEvent> = (1..=40)
            .map(|rev| {
                WireEvent::encode(&Event { r#type: 0, kv: Some(kv("key", &"x".repeat(100), rev)), prev_kv: None })
            })
            .collect();
        let one = events[0].field_len();
        let resp = WireResponse {
            header: Some(ResponseHeader::default()),
            watch_id: 3,
            events: events.iter().cloned().collect(),
            ..Default::default()
        };
        let parts = resp.fragments(one * 10 + 10);
        assert_eq!(parts.len(), 4);
        for (i, p) in parts.iter().enumerate() {
            assert!(p.encoded_len() <= one * 10 + 10, "part {i}: {}", p.encoded_len());
            assert_eq!(p.fragment, i + 1 < parts.len());
            assert_eq!(p.watch_id, 3);
        }
        let again: Vec<WireEvent> = parts.into_iter().flat_map(|p| p.events).collect();
        assert_eq!(again, events);
        // An event larger than the limit still goes, alone.
        let big = WireResponse { events: events[..2].iter().cloned().collect(), ..Default::default() }.fragments(1);
        assert_eq!(big.iter().map(|p| p.events.len()).collect::<Vec<_>>(), vec![1, 1]);
    }
}
