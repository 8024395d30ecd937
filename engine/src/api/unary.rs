//! [`KvUnaryLayer`]: the KV service's unary calls (Range, Put, DeleteRange, Txn) taken off the
//! request before tonic's router, and answered by the same [`KvService`] handlers.
//!
//! Why: on a Put, tonic's path around the handler (the axum router with its path parameters,
//! per-layer body boxing, the streaming decoder and encoder built per call, header maps for
//! status and trailers) cost about as much as the shard's whole apply (a quarter of the network
//! plane's samples in `perf record` of `put_c100_v256`). Here the request's one message is
//! decoded from its body, the handler runs, and the answer leaves as one DATA frame and the
//! `grpc-status: 0` trailers.
//!
//! What stays tonic's: connection handling, HTTP/2 settings and `grpc-timeout` (this layer sits
//! inside them), every other service, and every request this path does not recognise as the
//! plain case: a compressed message (`grpc-encoding`), a message over the size limit, a body
//! that is not exactly one message. Those go on to tonic's router with the bytes already read,
//! so its checks and error texts answer them as before. Handler errors become responses through
//! `tonic::Status::into_http`, as tonic's unary path does.
//!
//! Must not: interpret a request differently from tonic's KV server, or hold the request's
//! frame past the handler.

// #[PerformanceCriticalPath]
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use ballast_proto::etcdserverpb::kv_server::Kv;
use bytes::{Buf, Bytes, BytesMut};
use futures::StreamExt;
use http_body::Frame;
use http_body_util::BodyExt;
use prost::Message;
use tonic::body::Body;
use tonic::Status;
use tower::{Layer, Service, ServiceExt};

use super::grpc_message::{self, PREFIX};
use super::kv::KvService;

/// Wraps tonic's router so the KV service's unary calls take the short path.
#[derive(Clone, Debug)]
pub struct KvUnaryLayer {
    kv: KvService,
    max_request: usize,
}

impl KvUnaryLayer {
    /// Answers unary KV calls with `kv`; `max_request` is the KV server's decoding limit, above
    /// which a request is left to tonic (which refuses it).
    pub fn new(kv: KvService, max_request: usize) -> Self {
        Self { kv, max_request }
    }
}

impl<S> Layer<S> for KvUnaryLayer {
    type Service = KvUnary<S>;

    fn layer(&self, inner: S) -> KvUnary<S> {
        KvUnary { inner, kv: self.kv.clone(), max_request: self.max_request }
    }
}

/// The service [`KvUnaryLayer`] builds.
#[derive(Clone, Debug)]
pub struct KvUnary<S> {
    inner: S,
    kv: KvService,
    max_request: usize,
}

/// The KV methods served here.
#[derive(Clone, Copy, Debug)]
enum Method {
    Range,
    Put,
    DeleteRange,
    Txn,
}

impl Method {
    fn of(path: &str) -> Option<Self> {
        match path.strip_prefix("/etcdserverpb.KV/")? {
            "Range" => Some(Self::Range),
            "Put" => Some(Self::Put),
            "DeleteRange" => Some(Self::DeleteRange),
            "Txn" => Some(Self::Txn),
            _ => None,
        }
    }
}

/// The future of a layer on the client port's router.
pub(super) type BoxFuture = Pin<Box<dyn Future<Output = Result<http::Response<Body>, Infallible>> + Send>>;

impl<S> Service<http::Request<Body>> for KvUnary<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // The inner service is made ready when a request is handed to it.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> BoxFuture {
        let inner = self.inner.clone();
        let Some(method) = Method::of(req.uri().path()).filter(|_| !req.headers().contains_key("grpc-encoding")) else {
            return Box::pin(inner.oneshot(req));
        };
        let kv = self.kv.clone();
        let max_request = self.max_request;
        Box::pin(async move {
            let (parts, body) = req.into_parts();
            let message = match read_one(body, max_request).await {
                Ok(Read::One(message)) => message,
                Ok(Read::Other(body)) => {
                    // Not the plain case: tonic reads it again and answers as it always does.
                    return inner.oneshot(http::Request::from_parts(parts, body)).await;
                }
                Err(status) => return Ok(status.into_http()),
            };
            // The handlers read credentials from the metadata (the auth token) and the
            // extensions (the client certificate), as they would from tonic's request.
            let ctx = (tonic::metadata::MetadataMap::from_headers(parts.headers), parts.extensions);
            Ok(match method {
                Method::Range => serve(message, ctx, |r| kv.range(r)).await,
                Method::Put => serve(message, ctx, |r| kv.put(r)).await,
                Method::DeleteRange => serve(message, ctx, |r| kv.delete_range(r)).await,
                Method::Txn => serve(message, ctx, |r| kv.txn(r)).await,
            })
        })
    }
}

/// What a request body turned out to be.
enum Read {
    /// Exactly one uncompressed message within the limit.
    One(Bytes),
    /// Anything else, as a body for tonic: what was read, then the rest unread.
    Other(Body),
}

/// Reads a unary request's body, which is nearly always one DATA frame holding one message. It
/// stops reading as soon as the body cannot be the plain case, so a client announcing a huge
/// message is answered by tonic's limit before the server has buffered it.
async fn read_one(mut body: Body, max_request: usize) -> Result<Read, Status> {
    let mut read = BytesMut::new();
    let mut single: Option<Bytes> = None;
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame?.into_data() else { continue }; // trailers carry nothing for KV
        if read.is_empty() && single.is_none() {
            single = Some(data);
        } else {
            if let Some(first) = single.take() {
                read.extend_from_slice(&first);
            }
            read.extend_from_slice(&data);
        }
        let seen = single.as_ref().map_or(&read[..], |b| &b[..]);
        let plain = declared(seen).map(|len| len.is_some_and(|len| len <= max_request && seen.len() <= PREFIX + len));
        if plain == Some(false) {
            let seen = single.take().unwrap_or_else(|| read.split().freeze());
            return Ok(Read::Other(replay(seen, body)));
        }
    }
    let seen = single.unwrap_or_else(|| read.freeze());
    Ok(match one_message(&seen, max_request) {
        Some(message) => Read::One(message),
        None => Read::Other(Body::new(http_body_util::Full::new(seen))),
    })
}

/// Returns None while fewer than the prefix's bytes are in; else the declared length of an
/// uncompressed message, or `Some(None)` for a compressed one.
fn declared(seen: &[u8]) -> Option<Option<usize>> {
    let mut prefix = seen.get(..PREFIX)?;
    let compressed = prefix.get_u8();
    let len = prefix.get_u32() as usize;
    Some((compressed == 0).then_some(len))
}

/// A body of `seen` followed by what `rest` still holds.
fn replay(seen: Bytes, rest: Body) -> Body {
    let head = futures::stream::once(std::future::ready(Ok::<_, Status>(Frame::data(seen))));
    Body::new(http_body_util::StreamBody::new(head.chain(http_body_util::BodyStream::new(rest))))
}

/// Returns the message of a body holding exactly one uncompressed message of at most
/// `max_request` bytes, else None.
fn one_message(bytes: &Bytes, max_request: usize) -> Option<Bytes> {
    let len = declared(bytes)??;
    (len <= max_request && bytes.len() == PREFIX + len).then(|| bytes.slice(PREFIX..))
}

/// Decodes `message` as tonic's codec does (a message that does not parse is INTERNAL), runs
/// `handler` on it (with the request's metadata and extensions) and encodes its answer.
async fn serve<M, R, F, Fut>(
    message: Bytes,
    (metadata, extensions): (tonic::metadata::MetadataMap, http::Extensions),
    handler: F,
) -> http::Response<Body>
where
    M: Message + Default,
    R: Message,
    F: FnOnce(tonic::Request<M>) -> Fut,
    Fut: Future<Output = Result<tonic::Response<R>, Status>>,
{
    match M::decode(message) {
        Ok(m) => answer(handler(tonic::Request::from_parts(metadata, extensions, m)).await),
        Err(e) => Status::internal(e.to_string()).into_http(),
    }
}

/// Encodes a handler's answer: one DATA frame and OK trailers, or the error as tonic sends it.
fn answer<M: Message>(result: Result<tonic::Response<M>, Status>) -> http::Response<Body> {
    let message = match result {
        Ok(response) => response.into_inner(),
        Err(status) => return status.into_http(),
    };
    let len = message.encoded_len();
    let mut buf = BytesMut::with_capacity(PREFIX + len);
    grpc_message::put_prefix(&mut buf, len);
    message.encode_raw(&mut buf);
    let mut response = http::Response::new(Body::new(OneMessage { data: Some(buf.freeze()), trailers: true }));
    *response.version_mut() = http::Version::HTTP_2;
    response.headers_mut().insert(http::header::CONTENT_TYPE, grpc_message::CONTENT_TYPE);
    response
}

/// A response body of one DATA frame followed by `grpc-status: 0`.
#[derive(Debug)]
struct OneMessage {
    data: Option<Bytes>,
    trailers: bool,
}

impl http_body::Body for OneMessage {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        if let Some(data) = self.data.take() {
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        if std::mem::take(&mut self.trailers) {
            return Poll::Ready(Some(Ok(Frame::trailers(grpc_message::ok_trailers()))));
        }
        Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none() && !self.trailers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(compressed: u8, msg: &[u8]) -> Bytes {
        let mut b = vec![compressed];
        b.extend_from_slice(&(msg.len() as u32).to_be_bytes());
        b.extend_from_slice(msg);
        Bytes::from(b)
    }

    #[test]
    fn only_a_body_of_exactly_one_plain_message_within_the_limit_is_taken() {
        assert_eq!(one_message(&framed(0, b"abc"), 3).as_deref(), Some(&b"abc"[..]));
        assert_eq!(one_message(&framed(0, b""), 3).as_deref(), Some(&b""[..]), "an all-default request");
        assert_eq!(one_message(&framed(1, b"abc"), 3), None, "compressed");
        assert_eq!(one_message(&framed(0, b"abcd"), 3), None, "over the limit");
        assert_eq!(one_message(&Bytes::new(), 3), None, "no message");
        let two = [framed(0, b"a"), framed(0, b"b")].concat();
        assert_eq!(one_message(&Bytes::from(two), 3), None, "two messages");
        assert_eq!(one_message(&framed(0, b"abc").slice(..6), 3), None, "cut short");
    }

    fn body(frames: Vec<Bytes>, then_wait: bool) -> Body {
        let frames = futures::stream::iter(frames.into_iter().map(|b| Ok::<_, Status>(Frame::data(b))));
        let tail = futures::stream::pending().take(usize::from(then_wait));
        Body::new(http_body_util::StreamBody::new(frames.chain(tail)))
    }

    async fn bytes_of(body: Body) -> Bytes {
        body.collect().await.expect("readable").to_bytes()
    }

    #[tokio::test]
    async fn a_body_is_read_only_as_far_as_it_can_be_the_plain_case() {
        // One message over two frames: taken.
        let whole = framed(0, b"abcdef");
        let split = vec![whole.slice(..4), whole.slice(4..)];
        assert!(matches!(read_one(body(split, false), 10).await, Ok(Read::One(m)) if &m[..] == b"abcdef"));
        // A prefix announcing more than the limit: handed on at once, though the client has
        // not sent the rest (it never will here), and tonic gets every byte read so far.
        let huge = framed(0, &[7; 20]);
        let got =
            tokio::time::timeout(std::time::Duration::from_secs(5), read_one(body(vec![huge.slice(..8)], true), 10))
                .await
                .expect("not waiting for the rest of an oversized message");
        let Ok(Read::Other(replayed)) = got else { panic!("handed on") };
        let first = replayed.into_data_stream().next().await.expect("a frame").expect("data");
        assert_eq!(first, huge.slice(..8));
        // Compressed, or a second message after the first: handed on with everything.
        let compressed = framed(1, b"abc");
        let Ok(Read::Other(b)) = read_one(body(vec![compressed.clone()], false), 10).await else { panic!("handed on") };
        assert_eq!(bytes_of(b).await, compressed);
        let two = Bytes::from([framed(0, b"a"), framed(0, b"b")].concat());
        let Ok(Read::Other(b)) = read_one(body(vec![two.slice(..7), two.slice(7..)], false), 10).await else {
            panic!("handed on")
        };
        assert_eq!(bytes_of(b).await, two);
    }

    #[test]
    fn only_the_unary_kv_methods_are_taken() {
        assert!(matches!(Method::of("/etcdserverpb.KV/Put"), Some(Method::Put)));
        assert!(matches!(Method::of("/etcdserverpb.KV/Txn"), Some(Method::Txn)));
        assert!(matches!(Method::of("/etcdserverpb.KV/Range"), Some(Method::Range)));
        assert!(matches!(Method::of("/etcdserverpb.KV/DeleteRange"), Some(Method::DeleteRange)));
        assert!(Method::of("/etcdserverpb.KV/Compact").is_none());
        assert!(Method::of("/etcdserverpb.Watch/Watch").is_none());
        assert!(Method::of("/etcdserverpb.Lease/LeaseGrant").is_none());
    }

    #[tokio::test]
    async fn an_answer_is_one_message_then_ok_trailers() {
        let resp = answer(Ok(tonic::Response::new(ballast_proto::etcdserverpb::PutResponse::default())));
        assert_eq!(resp.headers()[http::header::CONTENT_TYPE], "application/grpc");
        let mut body = resp.into_body();
        let data = body.frame().await.expect("data").expect("ok").into_data().expect("a data frame");
        assert_eq!(&data[..], &[0, 0, 0, 0, 0]);
        let trailers = body.frame().await.expect("trailers").expect("ok").into_trailers().expect("trailers");
        assert_eq!(trailers["grpc-status"], "0");
        assert!(body.frame().await.is_none());
    }

    #[test]
    fn a_handler_error_is_answered_as_tonic_answers_it() {
        let resp = answer::<ballast_proto::etcdserverpb::PutResponse>(Err(Status::invalid_argument(
            "etcdserver: key is not provided",
        )));
        assert_eq!(resp.headers()["grpc-status"], "3");
        // Percent-encoded, as tonic sends every status message.
        assert_eq!(resp.headers()["grpc-message"], "etcdserver:%20key%20is%20not%20provided");
    }
}
