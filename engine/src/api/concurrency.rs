//! What the Lock and Election services share, as etcd's server builds them on its client
//! library's concurrency package: a *session* (a lease the caller names, or one granted here),
//! keys `<prefix><lease in hex>` made with a create-revision guard, and waiting until every key
//! under the prefix created before one's own is deleted (the queue order is create revision).
//!
//! Every step is an ordinary KV, Lease or Watch request through this member's own services, so
//! routing, checks and errors are theirs; waits use a watcher opened on the key's shard.

use ballast_proto::etcdserverpb::{
    compare::{CompareResult, CompareTarget, TargetUnion},
    kv_server::Kv,
    lease_server::Lease,
    range_request::{SortOrder, SortTarget},
    request_op::Request as Op,
    response_op::Response,
    Compare, LeaseGrantRequest, PutRequest, RangeRequest, RangeResponse, RequestOp, ResponseHeader, ResponseOp,
    TxnRequest, TxnResponse, WatchCreateRequest, WatchResponse,
};
use ballast_proto::mvccpb::event::EventType;
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use prost::Message;
use tonic::Status;

use super::watch_stream::send_reliably;
use super::{kv::KvService, lease::LeaseService, Api};
use crate::shard::{ShardHandle, ShardMsg};
use crate::watch::{self, WatchReceiver};

/// TTL of the lease a session grants when the caller names none: etcd's default session TTL.
/// The lease is not kept alive (etcd's server orphans its sessions), so such keys go after a
/// minute unless deleted first.
const SESSION_TTL: i64 = 60;

/// Returns the end of the range of keys starting with `prefix` (etcd's prefix range end).
pub(crate) fn prefix_end(prefix: &[u8]) -> Bytes {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end.into();
        }
    }
    Bytes::from_static(&[0])
}

/// Returns `s` as etcd's Lock and Election services answer it: they return their client
/// library's errors as they are, and the library turns every error etcd knows by its text
/// (`etcdserver: ...`) into a plain error, which gRPC sends with code Unknown and the same text.
pub(crate) fn as_client_error(s: Status) -> Status {
    if s.code() != tonic::Code::Unknown && s.message().starts_with("etcdserver: ") {
        return Status::unknown(s.message());
    }
    s
}

/// The member's KV and Lease services, called in-process.
#[derive(Debug, Clone)]
pub(crate) struct Client {
    pub(crate) api: Api,
    kv: KvService,
}

impl Client {
    pub(crate) fn new(api: Api) -> Self {
        Self { kv: KvService::new(api.clone()), api }
    }

    pub(crate) async fn txn(&self, t: TxnRequest) -> Result<TxnResponse, Status> {
        Ok(self.kv.txn(super::auth::internal(t)).await?.into_inner())
    }

    pub(crate) async fn range(&self, r: RangeRequest) -> Result<RangeResponse, Status> {
        Ok(self.kv.range(super::auth::internal(r)).await?.into_inner())
    }

    /// The session's lease: `lease` itself, or a new one of [`SESSION_TTL`] when it is 0.
    pub(crate) async fn session(&self, lease: i64) -> Result<i64, Status> {
        if lease != 0 {
            return Ok(lease);
        }
        let leases = LeaseService::new(self.api.clone());
        let r = leases.lease_grant(super::auth::internal(LeaseGrantRequest { ttl: SESSION_TTL, id: 0 })).await?;
        Ok(r.into_inner().id)
    }

    /// The oldest key under `prefix` (lowest create revision), with the read's header.
    pub(crate) async fn first_created(&self, prefix: &[u8]) -> Result<RangeResponse, Status> {
        self.range(by_create(prefix, SortOrder::Ascend, 0)).await
    }

    /// Creates `key` with `value` on `lease` unless it exists; in the same transaction reads
    /// `key` (when it existed) and, with `owner_prefix`, the oldest key under it.
    pub(crate) async fn create_guarded(
        &self,
        key: &[u8],
        value: &[u8],
        lease: i64,
        owner_prefix: Option<&[u8]>,
    ) -> Result<TxnResponse, Status> {
        let key = Bytes::copy_from_slice(key);
        let put = RequestOp {
            request: Some(Op::RequestPut(PutRequest {
                key: key.clone(),
                value: Bytes::copy_from_slice(value),
                lease,
                ..Default::default()
            })),
        };
        let get =
            RequestOp { request: Some(Op::RequestRange(RangeRequest { key: key.clone(), ..Default::default() })) };
        let owner =
            owner_prefix.map(|p| RequestOp { request: Some(Op::RequestRange(by_create(p, SortOrder::Ascend, 0))) });
        let mut success = vec![put];
        let mut failure = vec![get];
        success.extend(owner.clone());
        failure.extend(owner);
        self.txn(TxnRequest { compare: vec![create_revision_is(&key, 0)], success, failure }).await
    }

    /// Waits until no key under `prefix` with a create revision up to `max_create` is left:
    /// each time, the newest such key is waited on until deleted.
    pub(crate) async fn wait_deletes(&self, prefix: &[u8], max_create: i64) -> Result<ResponseHeader, Status> {
        loop {
            let r = self.range(by_create(prefix, SortOrder::Descend, max_create)).await?;
            let Some(kv) = r.kvs.first() else { return Ok(r.header.unwrap_or_default()) };
            let rev = r.header.as_ref().map_or(0, |h| h.revision);
            let mut w = self.watch(&kv.key, Bytes::new(), rev).await?;
            loop {
                let resp = w.next().await.ok_or_else(|| Status::unavailable("etcdserver: watch ended"))?;
                if resp.events.iter().any(|e| e.r#type == EventType::Delete as i32) {
                    break;
                }
            }
        }
    }

    /// Opens a watcher on `[key, range_end)` from `start_revision`.
    pub(crate) async fn watch(&self, key: &[u8], range_end: Bytes, start_revision: i64) -> Result<Watcher, Status> {
        let s = self.api.map.shard_of(key);
        let shard = self.api.shard(s).clone();
        let id = self.api.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (tx, rx, credits) = watch::stream_channel(self.api.watch_stream_buffer);
        let stopped = || Status::from(crate::EngineError::Stopped);
        if !send_reliably(&shard, || ShardMsg::WatchOpen(id, tx.clone())).await {
            return Err(stopped());
        }
        let w = Watcher { rx, shard: shard.clone(), id };
        let create =
            WatchCreateRequest { key: Bytes::copy_from_slice(key), range_end, start_revision, ..Default::default() };
        if !credits.spend().await || !send_reliably(&shard, || ShardMsg::WatchCreate(id, create.clone())).await {
            return Err(stopped());
        }
        Ok(w)
    }
}

/// A read of the one key under `prefix` first in create-revision `order`, among those created
/// at or before `max_create` (0: all).
fn by_create(prefix: &[u8], order: SortOrder, max_create: i64) -> RangeRequest {
    RangeRequest {
        key: Bytes::copy_from_slice(prefix),
        range_end: prefix_end(prefix),
        limit: 1,
        sort_order: order as i32,
        sort_target: SortTarget::Create as i32,
        max_create_revision: max_create,
        ..Default::default()
    }
}

/// `create_revision(key) = rev`.
pub(crate) fn create_revision_is(key: &Bytes, rev: i64) -> Compare {
    Compare {
        result: CompareResult::Equal as i32,
        target: CompareTarget::Create as i32,
        key: key.clone(),
        target_union: Some(TargetUnion::CreateRevision(rev)),
        ..Default::default()
    }
}

/// An in-process watcher; closed on its shard when dropped.
#[derive(Debug)]
pub(crate) struct Watcher {
    rx: WatchReceiver,
    shard: ShardHandle,
    id: u64,
}

impl Watcher {
    /// The next response with events (or a cancel), None when the stream ended.
    pub(crate) async fn next(&mut self) -> Option<WatchResponse> {
        loop {
            let batch = self.rx.next().await?;
            for r in batch {
                let mut buf = BytesMut::with_capacity(r.encoded_len());
                r.encode(&mut buf);
                let Ok(resp) = WatchResponse::decode(buf.freeze()) else { return None };
                if resp.canceled {
                    return None;
                }
                if !resp.events.is_empty() {
                    return Some(resp);
                }
            }
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let (shard, id) = (self.shard.clone(), self.id);
        if shard.send(ShardMsg::WatchClose(id)).is_err() {
            tokio::spawn(async move { send_reliably(&shard, || ShardMsg::WatchClose(id)).await });
        }
    }
}

/// The range answer of a transaction's operation, if it is one.
pub(crate) fn range_of(op: &ResponseOp) -> Option<&RangeResponse> {
    match &op.response {
        Some(Response::ResponseRange(r)) => Some(r),
        _ => None,
    }
}
