//! A fan-out watcher that reads a Watch stream only as far as the measurement needs: whether a
//! response is `created` or `canceled`, and each event's send stamp (the first 20 bytes of its
//! value). At a million events a second on the same two cores as the server, decoding every
//! response into `WatchResponse` (events, key-values, their byte buffers) was the client's largest
//! cost and took CPU the server needed. Both servers are read by this same code, so the
//! comparison is unchanged; the requests are the generated `WatchRequest`.

use ballast_proto::etcdserverpb::WatchRequest;
use bytes::Buf;
use futures::Stream;
use prost::encoding::decode_varint;
use prost::Message;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::transport::Channel;
use tonic::{Status, Streaming};

/// What a fan-out watcher takes from one response.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    pub(crate) created: bool,
    pub(crate) canceled: bool,
    /// The send stamp of each event, in nanoseconds, where its value carries one.
    pub(crate) stamps: Vec<u64>,
}

/// Opens a Watch stream on `channel` sending `requests`.
pub(crate) async fn watch(
    channel: Channel,
    requests: impl Stream<Item = WatchRequest> + Send + 'static,
) -> Result<Streaming<Seen>, Status> {
    let mut grpc = tonic::client::Grpc::new(channel).max_decoding_message_size(64 << 20);
    grpc.ready().await.map_err(|e| Status::unavailable(e.to_string()))?;
    let path = tonic::codegen::http::uri::PathAndQuery::from_static("/etcdserverpb.Watch/Watch");
    Ok(grpc.streaming(tonic::Request::new(requests), path, LightCodec).await?.into_inner())
}

#[derive(Clone, Copy, Debug, Default)]
struct LightCodec;

impl Codec for LightCodec {
    type Encode = WatchRequest;
    type Decode = Seen;
    type Encoder = LightCodec;
    type Decoder = LightCodec;

    fn encoder(&mut self) -> Self::Encoder {
        LightCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        LightCodec
    }
}

impl Encoder for LightCodec {
    type Item = WatchRequest;
    type Error = Status;

    fn encode(&mut self, item: WatchRequest, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        item.encode(dst).map_err(|e| Status::internal(e.to_string()))
    }
}

impl Decoder for LightCodec {
    type Item = Seen;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Seen>, Status> {
        // A message is one contiguous chunk of the receive buffer.
        let len = src.remaining();
        let seen = parse(&src.chunk()[..len]).ok_or_else(|| Status::internal("malformed WatchResponse"))?;
        src.advance(len);
        Ok(Some(seen))
    }
}

/// Reads the fields of `WatchResponse` the measurement needs: `created` (3), `canceled` (4) and
/// `events` (11).
fn parse(mut buf: &[u8]) -> Option<Seen> {
    let mut seen = Seen::default();
    while !buf.is_empty() {
        let (field, wire) = key(&mut buf)?;
        match (field, wire) {
            (3, 0) => seen.created = decode_varint(&mut buf).ok()? != 0,
            (4, 0) => seen.canceled = decode_varint(&mut buf).ok()? != 0,
            (11, 2) => {
                if let Some(stamp) = stamp(delimited(&mut buf)?) {
                    seen.stamps.push(stamp);
                }
            }
            _ => skip(&mut buf, wire)?,
        }
    }
    Some(seen)
}

/// The stamp in an `Event`'s `kv` (2) `value` (5), if it has one.
fn stamp(event: &[u8]) -> Option<u64> {
    let kv = field(event, 2)?;
    let value = field(kv, 5)?;
    std::str::from_utf8(&value[..20.min(value.len())]).ok()?.parse().ok()
}

/// The bytes of length-delimited field `want` of a message.
fn field(mut buf: &[u8], want: u64) -> Option<&[u8]> {
    while !buf.is_empty() {
        let (f, wire) = key(&mut buf)?;
        if f == want && wire == 2 {
            return delimited(&mut buf);
        }
        skip(&mut buf, wire)?;
    }
    None
}

fn key(buf: &mut &[u8]) -> Option<(u64, u64)> {
    let k = decode_varint(buf).ok()?;
    Some((k >> 3, k & 7))
}

fn delimited<'a>(buf: &mut &'a [u8]) -> Option<&'a [u8]> {
    let len = usize::try_from(decode_varint(buf).ok()?).ok()?;
    let (out, rest) = (buf.get(..len)?, buf.get(len..)?);
    *buf = rest;
    Some(out)
}

fn skip(buf: &mut &[u8], wire: u64) -> Option<()> {
    let n = match wire {
        0 => return decode_varint(buf).ok().map(drop),
        1 => 8,
        2 => return delimited(buf).map(drop),
        5 => 4,
        _ => return None,
    };
    *buf = buf.get(n..)?;
    Some(())
}

#[cfg(test)]
mod tests {
    use ballast_proto::etcdserverpb::{ResponseHeader, WatchResponse};
    use ballast_proto::mvccpb::{Event, KeyValue};

    use super::*;

    #[test]
    fn reads_what_the_generated_message_holds() {
        let value = |s: &str| bytes::Bytes::from(format!("{s:0>20}vvvv"));
        let kv = |v: &str| KeyValue { key: "fan/1".into(), value: value(v), mod_revision: 9, ..Default::default() };
        let resp = WatchResponse {
            header: Some(ResponseHeader { cluster_id: 1, member_id: 2, revision: 9, raft_term: 3 }),
            watch_id: 7,
            created: true,
            canceled: true,
            compact_revision: 3,
            cancel_reason: "x".into(),
            events: vec![
                Event { r#type: 0, kv: Some(kv("123")), prev_kv: Some(kv("1")) },
                Event { r#type: 1, kv: Some(KeyValue { key: "k".into(), ..Default::default() }), prev_kv: None },
                Event { r#type: 0, kv: Some(kv("456")), prev_kv: None },
            ],
            ..Default::default()
        };
        let seen = parse(&resp.encode_to_vec()).expect("parses");
        assert!(seen.created && seen.canceled);
        assert_eq!(seen.stamps, vec![123, 456]);
        let plain = parse(&WatchResponse::default().encode_to_vec()).expect("parses");
        assert!(!plain.created && !plain.canceled && plain.stamps.is_empty());
        assert!(parse(&[0x5a, 0x05, 0x01]).is_none(), "a truncated event is refused");
    }
}
