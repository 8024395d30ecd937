//! The gRPC server side of `etcdserverpb.Watch`, written here rather than generated.
//!
//! The generated server would take `WatchResponse` messages and encode every one, events
//! included. Ballast's responses carry events already encoded once for all watchers
//! ([`crate::watch::wire`]), so this server writes a response's fields and copies its events'
//! bytes as they are. The hub hands a stream its responses in batches (one per round); the
//! response body ([`WatchBody`]) writes every batch ready into one DATA frame of consecutive
//! gRPC messages. Going through tonic's encoder instead moves every response through three
//! stream adapters and grows the encoder's buffer by copying. Requests are decoded by tonic, as
//! the generated server decodes them, with the same size limit and the same refusal of
//! compressed requests. The wire format is etcd's: clients cannot tell the difference.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use ballast_proto::etcdserverpb::WatchRequest;
use bytes::Bytes;
use futures::StreamExt;
use http::HeaderMap;
use http_body::Frame;
use prost::Message;
use tonic::codec::{DecodeBuf, Decoder};
use tonic::codegen::{http, Body, BoxFuture, Service, StdError};
use tonic::server::NamedService;
use tonic::{Request, Status, Streaming};

use super::grpc_message::{self, PREFIX};
use super::watch::WatchService;
use super::watch_stream::ResponseStream;
use crate::watch::wire::WireResponse;

/// The one method of the service.
const WATCH_PATH: &str = "/etcdserverpb.Watch/Watch";

/// Most bytes written into one DATA frame's buffer (a larger single response gets a buffer of its
/// own). 32 KiB is tonic's `yield_threshold`, two HTTP/2 frames of the default size.
const FRAME_BYTES: usize = 32 << 10;

/// Frames of at least this many bytes leave in their pooled buffer ([`FRAME_POOL`]); smaller
/// ones are copied out into a buffer of exactly their size. A pooled buffer is pinned while the
/// connection holds its frame, so a small frame waiting on a client that does not read would pin
/// 32 KiB for a few hundred bytes; from 8 KiB on it pins at most four times its size.
const POOLED_MIN: usize = 8 << 10;

/// Pooled buffers kept for reuse, for all streams together: 128 × 32 KiB = 4 MiB. A 100,000-
/// watcher fan-out over 100 streams has about 2,000 frames of a round in flight at once; the
/// pool covers the frames the connections have written before the next ones are encoded.
const POOL_BUFFERS: usize = 128;

/// Serves `etcdserverpb.Watch` on a tonic router.
#[derive(Clone, Debug)]
pub struct WatchServer {
    service: WatchService,
    max_decoding_message_size: usize,
}

impl WatchServer {
    /// Returns the server over `service`, refusing requests larger than `max_decoding_message_size`
    /// bytes (with gRPC's ResourceExhausted, as the generated servers do).
    pub fn new(service: WatchService, max_decoding_message_size: usize) -> Self {
        Self { service, max_decoding_message_size }
    }
}

impl NamedService for WatchServer {
    const NAME: &'static str = "etcdserverpb.Watch";
}

impl<B> Service<http::Request<B>> for WatchServer
where
    B: Body + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if req.uri().path() != WATCH_PATH {
            return Box::pin(async { Ok(Status::unimplemented("").into_http()) });
        }
        let service = self.service.clone();
        let limit = self.max_decoding_message_size;
        Box::pin(async move {
            if let Some(refused) = unsupported_encoding(req.headers()) {
                return Ok(refused.into_http());
            }
            let (parts, body) = req.into_parts();
            let inbound = Streaming::new_request(RequestDecoder, body, None, Some(limit));
            let request = Request::from_http(http::Request::from_parts(parts, inbound));
            let (metadata, batches, _) = match service.watch(request).await {
                Ok(response) => response.into_parts(),
                Err(status) => return Ok(status.into_http()),
            };
            let mut response = http::Response::new(tonic::body::Body::new(WatchBody::new(batches)));
            *response.headers_mut() = metadata.into_headers();
            response.headers_mut().insert(http::header::CONTENT_TYPE, grpc_message::CONTENT_TYPE);
            Ok(response)
        })
    }
}

/// Refuses a compressed request stream as tonic does when no compression is enabled (etcd
/// clients do not compress): Unimplemented, naming the encoding, with the accepted one.
fn unsupported_encoding(headers: &HeaderMap) -> Option<Status> {
    let encoding = headers.get("grpc-encoding")?;
    if encoding == "identity" {
        return None;
    }
    let name = String::from_utf8_lossy(encoding.as_bytes());
    let mut status = Status::unimplemented(format!("Content is compressed with `{name}` which isn't supported"));
    status.metadata_mut().insert("grpc-accept-encoding", tonic::metadata::MetadataValue::from_static("identity"));
    Some(status)
}

/// The response body. Each DATA frame holds, as consecutive gRPC messages, the responses of every
/// batch ready when it is polled, up to [`FRAME_BYTES`]; the end of the stream is the
/// `grpc-status: 0` trailers. Taking every ready batch matters as much as the size: a stream whose
/// watchers are being created gets a batch per create, and a frame per batch would queue
/// thousands of tiny frames in the connection, whose buffers keep that size after they are sent.
struct WatchBody {
    batches: ResponseStream,
    /// What is left of the batch being written.
    rest: std::vec::IntoIter<WireResponse>,
    /// The batches have ended: the trailers are next.
    finished: bool,
    ended: bool,
}

impl WatchBody {
    fn new(batches: ResponseStream) -> Self {
        Self { batches, rest: Vec::new().into_iter(), finished: false, ended: false }
    }

    /// Writes responses into `buf` until it is full or no batch is ready. `buf` comes from the
    /// pool when the first response is written, so a poll that finds nothing takes no buffer.
    fn fill(&mut self, cx: &mut Context<'_>, buf: &mut Vec<u8>) {
        loop {
            while let Some(r) = self.rest.as_slice().first() {
                let len = r.encoded_len();
                if !buf.is_empty() && buf.len() + PREFIX + len > FRAME_BYTES {
                    return;
                }
                if buf.capacity() == 0 {
                    *buf = Pooled::take();
                }
                // Responses are not limited: etcd sends watch responses of any size (a revision
                // is never split unless the watcher asked for fragments), up to gRPC's ceiling.
                grpc_message::put_prefix(buf, len);
                r.encode(buf);
                self.rest.next();
            }
            // A spent iterator still holds its batch's allocation: let it go before waiting.
            self.rest = Vec::new().into_iter();
            if self.finished {
                return;
            }
            match self.batches.poll_next_unpin(cx) {
                Poll::Ready(Some(batch)) => self.rest = batch.into_iter(),
                Poll::Ready(None) => self.finished = true,
                Poll::Pending => return,
            }
        }
    }
}

impl http_body::Body for WatchBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        let mut buf = Vec::new();
        self.fill(cx, &mut buf);
        if !buf.is_empty() {
            return Poll::Ready(Some(Ok(Frame::data(Pooled::freeze(buf)))));
        }
        if !self.finished {
            return Poll::Pending; // `fill` polled the batches, which will wake the task
        }
        self.ended = true;
        Poll::Ready(Some(Ok(Frame::trailers(grpc_message::ok_trailers()))))
    }

    fn is_end_stream(&self) -> bool {
        self.ended
    }
}

/// Frame buffers of [`FRAME_BYTES`], reused. Written into once and freed after the connection
/// has sent them, fresh buffers of this size in bulk cost more than the encoding: the allocator
/// returns the freed memory to the kernel and the next round faults every page back in.
static FRAME_POOL: parking_lot::Mutex<Vec<Vec<u8>>> = parking_lot::const_mutex(Vec::new());

/// A frame's buffer that goes back to [`FRAME_POOL`] when the connection drops the frame.
struct Pooled(Vec<u8>);

impl Pooled {
    /// Returns an empty buffer of [`FRAME_BYTES`], from the pool when it has one.
    fn take() -> Vec<u8> {
        let v = FRAME_POOL.lock().pop();
        v.unwrap_or_else(|| Vec::with_capacity(FRAME_BYTES))
    }

    /// Returns `v` to the pool if it is one of its buffers and the pool has room.
    fn give_back(mut v: Vec<u8>) {
        if v.capacity() != FRAME_BYTES {
            return; // grown past a frame by one large response: not the pool's size any more
        }
        v.clear();
        let mut free = FRAME_POOL.lock();
        if free.len() < POOL_BUFFERS {
            free.push(v);
        }
    }

    /// Turns a written buffer into a frame: shared as it is when large (it comes back to the pool
    /// once sent), copied out when small (see [`POOLED_MIN`]) or grown past a frame.
    fn freeze(v: Vec<u8>) -> Bytes {
        if v.capacity() != FRAME_BYTES {
            Bytes::from(v)
        } else if v.len() >= POOLED_MIN {
            Bytes::from_owner(Pooled(v))
        } else {
            let frame = Bytes::copy_from_slice(&v);
            Pooled::give_back(v);
            frame
        }
    }
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        Pooled::give_back(std::mem::take(&mut self.0));
    }
}

/// Decodes `WatchRequest`s.
#[derive(Clone, Copy, Debug, Default)]
struct RequestDecoder;

impl Decoder for RequestDecoder {
    type Item = WatchRequest;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<WatchRequest>, Status> {
        WatchRequest::decode(src).map(Some).map_err(|e| Status::internal(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use ballast_proto::etcdserverpb::{ResponseHeader, WatchResponse};
    use ballast_proto::mvccpb::{Event, KeyValue};
    use http_body_util::BodyExt;

    use super::*;
    use crate::watch::wire::tests::kv;
    use crate::watch::wire::WireEvent;
    use crate::watch::Outgoing;
    use http::HeaderValue;

    fn event(key: &str, rev: i64) -> Event {
        Event { r#type: 0, kv: Some(kv(key, "new", rev)), prev_kv: Some(kv(key, "old", rev - 1)) }
    }

    fn response(watch_id: i64, events: &[Event]) -> (WireResponse, WatchResponse) {
        let header = Some(ResponseHeader { cluster_id: 1, member_id: 2, revision: 9, raft_term: 3 });
        let wire = WireResponse {
            header,
            watch_id,
            events: events.iter().map(WireEvent::encode).collect(),
            ..Default::default()
        };
        (wire, WatchResponse { header, watch_id, events: events.to_vec(), ..Default::default() })
    }

    /// Splits a DATA frame into its gRPC messages.
    fn messages(mut data: &[u8]) -> Vec<WatchResponse> {
        let mut out = Vec::new();
        while !data.is_empty() {
            assert_eq!(data[0], 0, "not compressed");
            let len = u32::from_be_bytes(data[1..5].try_into().expect("prefix")) as usize;
            out.push(WatchResponse::decode(&data[5..5 + len]).expect("a WatchResponse"));
            data = &data[5 + len..];
        }
        out
    }

    /// Reads every frame of `body`: the messages of its DATA frames, the size of each frame,
    /// and the trailers' grpc-status.
    async fn read_all(mut body: WatchBody) -> (Vec<WatchResponse>, Vec<usize>, Vec<u8>) {
        let (mut got, mut sizes, mut status) = (Vec::new(), Vec::new(), Vec::new());
        while let Some(frame) = body.frame().await {
            let frame = frame.expect("ok");
            match frame.into_data() {
                Ok(data) => {
                    sizes.push(data.len());
                    got.extend(messages(&data));
                }
                Err(frame) => {
                    let trailers = frame.into_trailers().expect("trailers");
                    status = trailers.get("grpc-status").expect("grpc-status").as_bytes().to_vec();
                    assert!(body.is_end_stream());
                }
            }
        }
        (got, sizes, status)
    }

    #[tokio::test]
    async fn batches_become_frames_of_messages_and_the_end_ok_trailers() {
        let (a, a_msg) = response(1, &[event("a", 8), event("b", 9)]);
        let (b, b_msg) = response(2, &[event("a", 8)]);
        let (c, c_msg) = response(1, &[]);
        let batches: ResponseStream = Box::pin(futures::stream::iter(vec![vec![a, b], vec![c]]));
        let (got, sizes, status) = read_all(WatchBody::new(batches)).await;
        assert_eq!(got, vec![a_msg, b_msg, c_msg]);
        assert_eq!(sizes.len(), 1, "batches ready together share a frame");
        assert_eq!(status, b"0");
    }

    #[tokio::test]
    async fn a_batch_that_comes_later_gets_a_frame_of_its_own() {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Outgoing>();
        let batches: ResponseStream = Box::pin(tokio_stream::wrappers::UnboundedReceiverStream::new(rx));
        let mut body = WatchBody::new(batches);
        let (a, a_msg) = response(1, &[event("a", 8)]);
        tx.send(vec![a]).expect("open");
        let first = body.frame().await.expect("a frame").expect("ok").into_data().expect("data");
        assert_eq!(messages(&first), vec![a_msg]);
        // Nothing ready: the body waits rather than ending or sending an empty frame.
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert!(Pin::new(&mut body).poll_frame(&mut cx).is_pending());
        let (b, b_msg) = response(2, &[event("b", 9)]);
        tx.send(vec![b]).expect("open");
        drop(tx);
        let (got, sizes, status) = read_all(body).await;
        assert_eq!(got, vec![b_msg]);
        assert_eq!(sizes.len(), 1);
        assert_eq!(status, b"0");
    }

    #[tokio::test]
    async fn a_large_batch_is_split_into_frames_of_whole_messages() {
        let big = Event {
            kv: Some(KeyValue { value: vec![b'x'; FRAME_BYTES].into(), ..Default::default() }),
            ..event("big", 5)
        };
        // About 330 bytes each: 1,000 of them take several frames.
        let small =
            Event { kv: Some(KeyValue { value: vec![b'v'; 300].into(), ..Default::default() }), ..event("k", 7) };
        let (mut batch, mut want) = (Vec::new(), Vec::new());
        for id in 0..1_000 {
            let (wire, msg) = response(id, std::slice::from_ref(&small));
            batch.push(wire);
            want.push(msg);
            if id == 500 {
                // Larger than a frame on its own.
                let (wire, msg) = response(id, std::slice::from_ref(&big));
                batch.push(wire);
                want.push(msg);
            }
        }
        let batches: ResponseStream = Box::pin(futures::stream::iter(vec![batch]));
        let (got, sizes, status) = read_all(WatchBody::new(batches)).await;
        assert!(got == want, "every message once, in order: {} of {}", got.len(), want.len());
        // 300 KB of small responses in frames of at most FRAME_BYTES, and the big one alone.
        assert!(sizes.len() >= 6, "{sizes:?}");
        assert_eq!(sizes.iter().filter(|n| **n > FRAME_BYTES).count(), 1, "{sizes:?}");
        assert!(sizes.iter().filter(|n| **n > FRAME_BYTES).all(|n| *n < FRAME_BYTES + 100), "{sizes:?}");
        assert_eq!(status, b"0");
    }

    #[test]
    fn compressed_requests_are_refused_as_tonic_refuses_them() {
        let mut headers = HeaderMap::new();
        assert!(unsupported_encoding(&headers).is_none());
        headers.insert("grpc-encoding", HeaderValue::from_static("identity"));
        assert!(unsupported_encoding(&headers).is_none());
        headers.insert("grpc-encoding", HeaderValue::from_static("gzip"));
        let status = unsupported_encoding(&headers).expect("refused");
        assert_eq!(status.code(), tonic::Code::Unimplemented);
        assert_eq!(status.message(), "Content is compressed with `gzip` which isn't supported");
        assert_eq!(status.metadata().get("grpc-accept-encoding").map(|v| v.as_bytes()), Some(&b"identity"[..]));
    }
}
