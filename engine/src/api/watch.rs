//! The `etcdserverpb.Watch` service: one bidirectional stream per client call, multiplexing
//! many watchers. Requests are forwarded to the shard in arrival order; everything the client
//! receives is produced by the shard's watch hub into one bounded channel (see `watch`), and a
//! stream's requests are read only while it has control credits left. The gRPC side of the
//! service is `watch_grpc`.

use std::sync::atomic::Ordering;

use ballast_proto::etcdserverpb::{watch_request::RequestUnion, WatchRequest};
use tonic::{Request, Response, Status, Streaming};

use super::auth::{watch_check, watch_refusal, Credentials};
use super::watch_stream::{send_reliably, ResponseStream};
use super::{Api, ApiContext};
use crate::error::EngineError;
use crate::shard::ShardMsg;
use crate::watch;

/// Serves Watch.
#[derive(Debug, Clone)]
pub struct WatchService {
    api: Api,
}

impl WatchService {
    /// Returns the service over `api`.
    pub fn new(api: Api) -> Self {
        Self { api }
    }
}

impl WatchService {
    /// Serves one client stream.
    pub(super) async fn watch(
        &self,
        req: Request<Streaming<WatchRequest>>,
    ) -> Result<Response<ResponseStream>, Status> {
        // kube-apiserver sets `hasleader`: such streams must fail while there is no leader.
        if req.metadata().get("hasleader").is_some_and(|v| v == "true") && self.api.first().leader() == 0 {
            return Err(EngineError::NoLeader.into());
        }
        let id = self.api.next_id.fetch_add(1, Ordering::Relaxed);
        // Each create is checked against the stream's credentials as they stand then (a
        // simple token may expire while the stream lives), as etcd's watch server does.
        let creds = Credentials::of(req.metadata(), req.extensions(), self.api.client_cert_auth);
        if self.api.shards.len() > 1 {
            let Some(merged) = super::watch_shards::open(self.api.clone(), id, req.into_inner(), creds).await else {
                return Err(EngineError::Stopped.into());
            };
            return Ok(Response::new(responses(merged)));
        }
        let (tx, rx, credits) = watch::stream_channel(self.api.watch_stream_buffer);
        let shard = self.api.first().clone();
        let api = self.api.clone();
        // Opening waits for room like the requests after it: a busy mailbox (say, many other
        // streams registering watchers at once) is back-pressure, not a reason to refuse a stream.
        if !send_reliably(&shard, || ShardMsg::WatchOpen(id, tx.clone())).await {
            return Err(EngineError::Stopped.into());
        }
        let mut inbound = req.into_inner();
        tokio::spawn(async move {
            loop {
                let msg = tokio::select! {
                    msg = inbound.message() => msg,
                    () = tx.closed() => break,
                };
                let Ok(Some(msg)) = msg else { break };
                let Some(request) = msg.request_union else { continue };
                // Each request is paid for with one of the stream's control credits; with none
                // left the stream is not read until the hub has written earlier answers (the
                // slow-consumer policy for control responses, see `watch`).
                let paid = tokio::select! {
                    paid = credits.spend() => paid,
                    () = tx.closed() => false,
                };
                let forwarded = paid
                    && match request {
                        RequestUnion::CreateRequest(c) => match api.watch_permitted(&creds, &c).await {
                            Ok(()) => send_reliably(&shard, || ShardMsg::WatchCreate(id, c.clone())).await,
                            Err(reason) => send_reliably(&shard, || ShardMsg::WatchRefuse(id, reason)).await,
                        },
                        RequestUnion::CancelRequest(c) => {
                            send_reliably(&shard, || ShardMsg::WatchCancel(id, c.watch_id)).await
                        }
                        RequestUnion::ProgressRequest(_) => send_reliably(&shard, || ShardMsg::WatchProgress(id)).await,
                    };
                if !forwarded {
                    break;
                }
            }
            // A client that only half-closes keeps receiving, as with etcd; the stream ends when
            // the client drops it.
            tx.closed().await;
            send_reliably(&shard, || ShardMsg::WatchClose(id)).await;
        });
        Ok(Response::new(responses(rx)))
    }
}

impl ApiContext {
    /// Checks a watch create from a stream with `creds`; answers the reason of a refusal.
    pub(super) async fn watch_permitted(
        &self,
        creds: &Credentials,
        c: &ballast_proto::etcdserverpb::WatchCreateRequest,
    ) -> Result<(), &'static str> {
        if !self.auth.enabled() {
            return Ok(());
        }
        let checked = match self.resolve(creds).await {
            Ok(who) => watch_check(&self.auth.state(), &who, &c.key, &c.range_end),
            Err(e) => Err(e),
        };
        checked.map_err(|e| watch_refusal(&e))
    }
}

/// Boxes a stream's batches for the response body, which writes each as one DATA frame.
fn responses(batches: impl futures::Stream<Item = watch::Outgoing> + Send + 'static) -> ResponseStream {
    Box::pin(batches)
}
