//! `Etcd3Storage`: the [`Storage`] seam over the etcd v3 API (`etcd-client`).
//!
//! Ranges (LIST pages) go through `ballast-proto`'s client on the same gRPC channel instead:
//! its `bytes` fields are `Bytes`, so the keys and values of a page are slices of the one
//! response buffer tonic received, where etcd-client's types copy each into its own `Vec`
//! (a LIST page is megabytes, ten thousand allocations).
//!
//! Every write that must not lose a concurrent change is a Txn comparing the key's
//! `mod_revision` (or `create_revision == 0` for creates), as kube-apiserver's etcd3 store does.
//! Nothing here caches: the frontend is stateless, and any replica may serve any request.

// #[PerformanceCriticalPath]

mod endpoints;

use std::collections::VecDeque;

use ballast_proto::etcdserverpb::{kv_client::KvClient as RangeClient, RangeRequest};
use bytes::Bytes;
use etcd_client::{
    Client, Compare, CompareOp, EventType, KvClient, Txn, TxnOp, TxnOpResponse, WatchClient, WatchOptions,
};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

pub use super::prefix_end;
use super::{BoxFuture, KeyValue, ListPage, Storage, StorageError, StorageEvent, WatchEvents, WatchItem, WatchStream};

fn key_value(kv: ballast_proto::mvccpb::KeyValue) -> KeyValue {
    KeyValue { key: kv.key, value: kv.value, mod_revision: kv.mod_revision, create_revision: kv.create_revision }
}

/// The largest gRPC message the client accepts: gRPC's own 2 GiB ceiling, as kube-apiserver
/// sets (`MaxCallRecvMsgSize: math.MaxInt32`). tonic's 4 MiB default fails an unpaginated
/// LIST of a few thousand objects; etcd limits what is *written* (`--max-request-bytes`), not
/// what a Range may answer, so the reader must not impose a smaller bound than the protocol.
pub const MAX_RESPONSE_BYTES: usize = i32::MAX as usize;

/// The largest HTTP/2 DATA frame the storage server may send (h2's default is 16 KiB). A LIST
/// page of a thousand pods is about 1.3 MB: in 1 MiB frames it comes as two frames instead of
/// eighty, and each frame costs the sender a write and both sides framing and flow-control
/// work. A frame is read whole before it is handled, so this also bounds the connection's read
/// buffer. (grpc-go, so stock etcd, writes 16 KiB frames whatever the client allows.)
pub const MAX_FRAME_BYTES: u32 = 1 << 20;

/// The storage client. Cheap to clone: clones share one gRPC channel.
#[derive(Clone)]
pub struct Etcd3Storage {
    /// KV calls, configured once with [`MAX_RESPONSE_BYTES`] (a fresh `kv_client()` would
    /// come back with tonic's default limit).
    kv: KvClient,
    /// Watch calls, with the same limit: one response may carry many events.
    watch: WatchClient,
    /// Ranges, on the same channel and with the same limit, decoded into shared slices (see
    /// the module doc). It bypasses etcd-client's interceptor, which adds nothing while the
    /// frontend connects without auth or `require_leader`.
    range: RangeClient<Channel>,
    /// The members the channel sends to.
    endpoints: endpoints::Endpoints,
}

impl std::fmt::Debug for Etcd3Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Etcd3Storage").finish_non_exhaustive()
    }
}

fn header_revision(header: Option<&etcd_client::ResponseHeader>) -> Result<i64, StorageError> {
    header.map(|h| h.revision()).ok_or(StorageError::Protocol("response without header"))
}

/// Tries of a request whose connection fails under it (a member went away): a read at any
/// failure of the connection or the member (reads change nothing, so another member can
/// answer, as kube-apiserver's etcd client retries them), a write only when it could not
/// connect and so never left ([`endpoints::unsent`]). Three tries at 100 ms apart ride out one
/// member's death: the first failure to connect takes the member out of the rotation
/// ([`endpoints`]) before the next try.
const ATTEMPTS: u32 = 3;
const RETRY_PAUSE: std::time::Duration = std::time::Duration::from_millis(100);

/// How a failed request may be tried again.
trait Failure {
    /// The connection or the member failed, not the request: a read may be sent again.
    fn transient(&self) -> bool;
    /// The request never left (no connection could be made): a write may be sent again too.
    fn unsent(&self) -> bool;
}

impl Failure for tonic::Status {
    fn transient(&self) -> bool {
        matches!(self.code(), tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Cancelled)
            // A page read at the revision of the list's first page, which another member
            // answered: this one has not applied it yet, and will.
            || (self.code() == tonic::Code::OutOfRange && self.message().ends_with(FUTURE_REV))
    }

    fn unsent(&self) -> bool {
        endpoints::unsent(self)
    }
}

impl Failure for etcd_client::Error {
    fn transient(&self) -> bool {
        match self {
            etcd_client::Error::GRpcStatus(status) => status.transient(),
            etcd_client::Error::TransportError(_) | etcd_client::Error::IoError(_) => true,
            _ => false,
        }
    }

    fn unsent(&self) -> bool {
        matches!(self, etcd_client::Error::GRpcStatus(status) if status.unsent())
    }
}

/// Whether a request changes nothing (a read) or may (a write), for [`Etcd3Storage::send`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
}

/// The end of etcd's ErrFutureRev text, which shares OutOfRange with ErrCompacted.
const FUTURE_REV: &str = "required revision is a future revision";

/// Maps etcd's "required revision has been compacted" (gRPC OutOfRange) to `Compacted`, and
/// its "future revision" (the same code) too, as `MemStorage` answers a read past its newest
/// revision (after the tries a read at a future revision gets, see [`Failure`]).
fn compacted_or(err: etcd_client::Error, requested: i64) -> StorageError {
    if let etcd_client::Error::GRpcStatus(status) = &err {
        if status.code() == tonic::Code::OutOfRange {
            return StorageError::Compacted { requested, compacted: 0 };
        }
    }
    StorageError::from(err)
}

/// Client TLS to etcd, as kube-apiserver's `--etcd-cafile`, `--etcd-certfile` and
/// `--etcd-keyfile` give it (PEM contents): used on `https://` endpoints.
#[derive(Clone, Debug, Default)]
pub struct EtcdTls {
    /// The CA bundle the servers' certificates are checked against.
    pub ca_pem: Option<Vec<u8>>,
    /// The client certificate (with `key_pem`), for servers with `--client-cert-auth`.
    pub cert_pem: Option<Vec<u8>>,
    /// The client certificate's private key.
    pub key_pem: Option<Vec<u8>>,
}

impl EtcdTls {
    fn client_config(&self) -> ClientTlsConfig {
        let mut cfg = ClientTlsConfig::new();
        if let Some(ca) = &self.ca_pem {
            cfg = cfg.ca_certificate(Certificate::from_pem(ca));
        }
        if let (Some(cert), Some(key)) = (&self.cert_pem, &self.key_pem) {
            cfg = cfg.identity(Identity::from_pem(cert, key));
        }
        cfg
    }
}

/// Returns the gRPC endpoint for `url`: `http://` unless it names a scheme, as etcd-client's
/// `connect` reads it, with TLS for `https://`, and [`MAX_FRAME_BYTES`].
fn endpoint(url: &str, tls: &EtcdTls) -> Result<Endpoint, etcd_client::Error> {
    let endpoint = match url.contains("://") {
        true => Endpoint::from_shared(url.to_string()),
        false => Endpoint::from_shared(format!("http://{url}")),
    };
    let mut endpoint = endpoint?.max_frame_size(MAX_FRAME_BYTES);
    if url.starts_with("https://") {
        endpoint = endpoint.tls_config(tls.client_config())?;
    }
    Ok(endpoint)
}

impl Etcd3Storage {
    /// Connects to the etcd v3 endpoints (`http://host:port`, or `https://` with `tls`; comma
    /// lists already split). As with etcd-client's own `connect`, connections are made on
    /// first use.
    ///
    /// # Errors
    ///
    /// Returns `Etcd` for an empty list, an endpoint that is not a URI, or TLS material tonic
    /// cannot use.
    pub async fn connect(endpoints: &[String], tls: &EtcdTls) -> Result<Self, StorageError> {
        if endpoints.is_empty() {
            return Err(etcd_client::Error::InvalidArgs("empty endpoints".into()).into());
        }
        let endpoints = endpoints.iter().map(|url| endpoint(url, tls)).collect::<Result<Vec<_>, _>>()?;
        let (channel, endpoints) = endpoints::Endpoints::start(endpoints);
        let client = Client::from_channel(etcd_client::Channel::Tonic(channel.clone()), None).await?;
        Ok(Etcd3Storage {
            kv: client.kv_client().max_decoding_message_size(MAX_RESPONSE_BYTES),
            watch: client.watch_client().max_decoding_message_size(MAX_RESPONSE_BYTES),
            range: RangeClient::new(channel).max_decoding_message_size(MAX_RESPONSE_BYTES),
            endpoints,
        })
    }

    /// Runs `attempt` up to [`ATTEMPTS`] times while it fails in a way another try may not (see
    /// [`Failure`]); a failure to connect is reported to [`endpoints`] first.
    async fn send<T, E: Failure, Fut>(&self, kind: Kind, mut attempt: impl FnMut() -> Fut) -> Result<T, E>
    where
        Fut: std::future::Future<Output = Result<T, E>>,
    {
        for _ in 1..ATTEMPTS {
            let e = match attempt().await {
                Err(e) => e,
                ok => return ok,
            };
            if e.unsent() {
                self.endpoints.suspect();
            } else if kind == Kind::Write || !e.transient() {
                return Err(e);
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
        attempt().await
    }

    /// Reads one key at the newest revision; returns it (if present) and the store's revision.
    ///
    /// # Errors
    ///
    /// Returns `Etcd` when the request fails.
    pub async fn get(&self, key: &[u8]) -> Result<(Option<KeyValue>, i64), StorageError> {
        let request = RangeRequest { key: Bytes::copy_from_slice(key), ..RangeRequest::default() };
        let resp = self
            .send(Kind::Read, || {
                let (mut range, request) = (self.range.clone(), request.clone());
                async move { range.range(request).await.map(tonic::Response::into_inner) }
            })
            .await
            .map_err(|s| StorageError::from(etcd_client::Error::GRpcStatus(s)))?;
        let header = resp.header.ok_or(StorageError::Protocol("response without header"))?;
        Ok((resp.kvs.into_iter().next().map(key_value), header.revision))
    }

    /// Reads up to `limit` keys (0 = all) in `[start, end)` at `revision` (0 = newest).
    ///
    /// # Errors
    ///
    /// Returns `Compacted` when `revision` is older than the store's history, `Etcd` otherwise.
    pub async fn list(&self, start: &[u8], end: &[u8], limit: i64, revision: i64) -> Result<ListPage, StorageError> {
        let request = RangeRequest {
            key: Bytes::copy_from_slice(start),
            range_end: Bytes::copy_from_slice(end),
            limit,
            revision,
            ..RangeRequest::default()
        };
        let attempt = || {
            let (mut range, request) = (self.range.clone(), request.clone());
            async move { range.range(request).await.map(tonic::Response::into_inner) }
        };
        let resp = match self.send(Kind::Read, attempt).await {
            Ok(resp) => resp,
            Err(status) => return Err(compacted_or(etcd_client::Error::GRpcStatus(status), revision)),
        };
        let header = resp.header.ok_or(StorageError::Protocol("response without header"))?;
        Ok(ListPage {
            kvs: resp.kvs.into_iter().map(key_value).collect(),
            revision: header.revision,
            more: resp.more,
            count: resp.count,
        })
    }

    /// Writes `value` at `key` only if the key does not exist; returns the new revision.
    ///
    /// # Errors
    ///
    /// Returns `KeyExists` when the key is present.
    pub async fn create(&self, key: &[u8], value: Vec<u8>) -> Result<i64, StorageError> {
        let txn = Txn::new()
            .when([Compare::create_revision(key, CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, value, None)]);
        let resp = self.txn(txn).await?;
        if !resp.succeeded() {
            return Err(StorageError::KeyExists);
        }
        header_revision(resp.header())
    }

    /// Replaces the value at `key` only if its mod_revision is still `expected`; returns the new
    /// revision.
    ///
    /// # Errors
    ///
    /// Returns `KeyNotFound` when the key is gone and `Conflict` when it changed since.
    pub async fn update(&self, key: &[u8], value: Vec<u8>, expected: i64) -> Result<i64, StorageError> {
        let txn = Txn::new()
            .when([Compare::mod_revision(key, CompareOp::Equal, expected)])
            .and_then([TxnOp::put(key, value, None)])
            .or_else([TxnOp::get(key, None)]);
        let resp = self.txn(txn).await?;
        if resp.succeeded() {
            return header_revision(resp.header());
        }
        Err(Self::failed_precondition(&resp))
    }

    /// Deletes `key` only if its mod_revision is still `expected`; returns the deletion's
    /// revision.
    ///
    /// # Errors
    ///
    /// Returns `KeyNotFound` when the key is gone and `Conflict` when it changed since.
    pub async fn delete(&self, key: &[u8], expected: i64) -> Result<i64, StorageError> {
        let txn = Txn::new()
            .when([Compare::mod_revision(key, CompareOp::Equal, expected)])
            .and_then([TxnOp::delete(key, None)])
            .or_else([TxnOp::get(key, None)]);
        let resp = self.txn(txn).await?;
        if resp.succeeded() {
            return header_revision(resp.header());
        }
        Err(Self::failed_precondition(&resp))
    }

    /// Sends a write, again only when it never left ([`Failure::unsent`]).
    async fn txn(&self, txn: Txn) -> Result<etcd_client::TxnResponse, etcd_client::Error> {
        self.send(Kind::Write, || {
            let (mut kv, txn) = (self.kv.clone(), txn.clone());
            async move { kv.txn(txn).await }
        })
        .await
    }

    fn failed_precondition(resp: &etcd_client::TxnResponse) -> StorageError {
        let current = resp.op_responses().into_iter().find_map(|op| match op {
            TxnOpResponse::Get(get) => Some(get.kvs().first().map(|kv| kv.mod_revision())),
            _ => None,
        });
        match current {
            Some(Some(current)) => StorageError::Conflict { current },
            Some(None) => StorageError::KeyNotFound,
            None => StorageError::Protocol("failed txn without its get"),
        }
    }

    /// Starts a watch on `[start, end)` for changes after `after_revision`, with previous values.
    ///
    /// # Errors
    ///
    /// Returns `Etcd` when the watch cannot be created; a compacted start revision shows up as
    /// `Compacted` from [`WatchEvents::next`].
    pub async fn watch(&self, start: &[u8], end: &[u8], after_revision: i64) -> Result<WatchEvents, StorageError> {
        let opts = WatchOptions::new().with_range(end).with_prev_key().with_start_revision(after_revision + 1);
        // Opening a watch reads nothing yet: retried like a read when a connection fails.
        let stream = self
            .send(Kind::Read, || {
                let (mut watch, opts) = (self.watch.clone(), opts.clone());
                async move { watch.watch(start, Some(opts)).await }
            })
            .await?;
        let stream = Etcd3WatchStream { stream, pending: VecDeque::new(), requested: after_revision };
        Ok(WatchEvents::new(Box::new(stream)))
    }
}

impl Storage for Etcd3Storage {
    fn get<'a>(&'a self, key: &'a [u8]) -> BoxFuture<'a, Result<(Option<KeyValue>, i64), StorageError>> {
        Box::pin(Etcd3Storage::get(self, key))
    }

    fn list<'a>(
        &'a self,
        start: &'a [u8],
        end: &'a [u8],
        limit: i64,
        revision: i64,
    ) -> BoxFuture<'a, Result<ListPage, StorageError>> {
        Box::pin(Etcd3Storage::list(self, start, end, limit, revision))
    }

    fn create<'a>(&'a self, key: &'a [u8], value: Vec<u8>) -> BoxFuture<'a, Result<i64, StorageError>> {
        Box::pin(Etcd3Storage::create(self, key, value))
    }

    fn update<'a>(&'a self, key: &'a [u8], value: Vec<u8>, expected: i64) -> BoxFuture<'a, Result<i64, StorageError>> {
        Box::pin(Etcd3Storage::update(self, key, value, expected))
    }

    fn delete<'a>(&'a self, key: &'a [u8], expected: i64) -> BoxFuture<'a, Result<i64, StorageError>> {
        Box::pin(Etcd3Storage::delete(self, key, expected))
    }

    fn watch<'a>(
        &'a self,
        start: &'a [u8],
        end: &'a [u8],
        after_revision: i64,
    ) -> BoxFuture<'a, Result<WatchEvents, StorageError>> {
        Box::pin(Etcd3Storage::watch(self, start, end, after_revision))
    }
}

/// The events of one etcd watch stream, one at a time, in revision order.
#[derive(Debug)]
pub struct Etcd3WatchStream {
    stream: etcd_client::WatchStream,
    pending: VecDeque<StorageEvent>,
    requested: i64,
}

impl WatchStream for Etcd3WatchStream {
    fn next_item(&mut self) -> BoxFuture<'_, Result<Option<WatchItem>, StorageError>> {
        Box::pin(Etcd3WatchStream::next_item(self))
    }

    fn request_progress(&mut self) -> BoxFuture<'_, Result<(), StorageError>> {
        Box::pin(Etcd3WatchStream::request_progress(self))
    }
}

impl Etcd3WatchStream {
    /// Returns the next change or progress notification, or `None` when the store closed the
    /// watch. Cancel-safe: an item is taken off the stream only when it is returned.
    ///
    /// # Errors
    ///
    /// Returns `Compacted` when the watch started below the compaction point and `Etcd` when
    /// the stream fails.
    pub async fn next_item(&mut self) -> Result<Option<WatchItem>, StorageError> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Ok(Some(WatchItem::Event(event)));
            }
            let Some(resp) = self.stream.message().await? else { return Ok(None) };
            if resp.compact_revision() > 0 {
                return Err(StorageError::Compacted { requested: self.requested, compacted: resp.compact_revision() });
            }
            if resp.canceled() {
                return Ok(None);
            }
            // etcd's progress notification: no events, not a created/canceled answer. Every
            // change up to its header revision has been sent on this stream before it.
            if resp.events().is_empty() && !resp.created() {
                if let Some(rev) = resp.header().map(|h| h.revision()).filter(|r| *r > 0) {
                    return Ok(Some(WatchItem::Progress(rev)));
                }
                continue;
            }
            for event in resp.events() {
                let Some(kv) = event.kv() else { continue };
                self.pending.push_back(StorageEvent {
                    key: kv.key().to_vec(),
                    value: (event.event_type() == EventType::Put).then(|| kv.value().to_vec()),
                    prev_value: event.prev_kv().map(|p| p.value().to_vec()),
                    revision: kv.mod_revision(),
                });
            }
        }
    }

    /// Asks the store for a progress notification (etcd `RequestProgress`); it arrives through
    /// [`Etcd3WatchStream::next_item`] once every change up to the store's revision was sent.
    ///
    /// # Errors
    ///
    /// Returns `Etcd` when the request cannot be sent.
    pub async fn request_progress(&mut self) -> Result<(), StorageError> {
        self.stream.request_progress().await?;
        Ok(())
    }
}
