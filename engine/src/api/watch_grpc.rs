//! The gRPC server side of `etcdserverpb.Watch`, written here rather than generated.
//!
//! The generated server would take `WatchResponse` messages and encode every one, events
//! included. Ballast's responses carry events already encoded once for all watchers
//! ([`crate::watch::wire`]), so this server's codec writes a response's fields and copies its
//! events' bytes as they are. Requests are decoded as the generated server decodes them, with
//! the same size limit. The wire format is etcd's: clients cannot tell the difference.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use ballast_proto::etcdserverpb::WatchRequest;
use futures::Stream;
use prost::Message;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::{http, Body, BoxFuture, Service, StdError};
use tonic::server::{Grpc, NamedService, StreamingService};
use tonic::{Request, Response, Status, Streaming};

use super::watch::WatchService;
use crate::watch::wire::WireResponse;

/// The one method of the service.
const WATCH_PATH: &str = "/etcdserverpb.Watch/Watch";

/// A client's stream of responses.
pub(super) type ResponseStream = Pin<Box<dyn Stream<Item = Result<WireResponse, Status>> + Send + 'static>>;

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
        let method = WatchMethod(self.service.clone());
        let limit = self.max_decoding_message_size;
        Box::pin(async move {
            // Responses are not limited: etcd sends watch responses of any size (a revision is
            // never split), up to gRPC's own ceiling.
            let mut grpc = Grpc::new(WatchCodec).apply_max_message_size_config(Some(limit), Some(usize::MAX));
            Ok(grpc.streaming(method, req).await)
        })
    }
}

struct WatchMethod(WatchService);

impl StreamingService<WatchRequest> for WatchMethod {
    type Response = WireResponse;
    type ResponseStream = ResponseStream;
    type Future = BoxFuture<Response<ResponseStream>, Status>;

    fn call(&mut self, request: Request<Streaming<WatchRequest>>) -> Self::Future {
        let service = self.0.clone();
        Box::pin(async move { service.watch(request).await })
    }
}

/// Decodes `WatchRequest`s, encodes [`WireResponse`]s.
#[derive(Clone, Copy, Debug, Default)]
struct WatchCodec;

impl Codec for WatchCodec {
    type Encode = WireResponse;
    type Decode = WatchRequest;
    type Encoder = WatchCodec;
    type Decoder = WatchCodec;

    fn encoder(&mut self) -> Self::Encoder {
        WatchCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        WatchCodec
    }
}

impl Encoder for WatchCodec {
    type Item = WireResponse;
    type Error = Status;

    fn encode(&mut self, item: WireResponse, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        // The buffer grows as needed, so writing cannot fail.
        item.encode(dst);
        Ok(())
    }
}

impl Decoder for WatchCodec {
    type Item = WatchRequest;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<WatchRequest>, Status> {
        WatchRequest::decode(src).map(Some).map_err(|e| Status::internal(e.to_string()))
    }
}
