//! `/metrics`: the engine's series in Prometheus' text format, with etcd's names and labels for
//! what operators alert on, plus Ballast's per-shard series; and [`GrpcMetricsLayer`], which
//! counts answered calls for `grpc_server_handled_total`.
//!
//! A scrape reads atomics, the membership and RocksDB size properties only: it never sends to a
//! shard, so a full mailbox cannot hold it up.

use std::convert::Infallible;
use std::fmt::Write as _;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use http_body::Frame;
use tonic::body::Body;
use tower::{Layer, Service};

use super::unary::BoxFuture;
use super::{ApiContext, ETCD_COMPAT_VERSION};
use crate::metrics::{grpc_method_index, DISK_BUCKETS, GLOBAL, GRPC_CODES, GRPC_METHODS, PEER_BYTES};
use crate::storage::KvBackend;

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn histogram(out: &mut String, name: &str, help: &str, h: &crate::metrics::Histogram) {
    header(out, name, "histogram", help);
    let (buckets, count, sum) = h.snapshot();
    for (bound, n) in DISK_BUCKETS.iter().zip(buckets) {
        let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {n}");
    }
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}\n{name}_sum {sum}\n{name}_count {count}");
}

/// Renders every series.
pub fn render(api: &ApiContext) -> String {
    let mut out = String::with_capacity(8192);
    let first = api.first();
    let gauges: Vec<_> = api.shards.iter().map(|s| s.gauges()).collect();
    header(&mut out, "etcd_server_has_leader", "gauge", "Whether or not a leader exists. 1 is existence, 0 is not.");
    let has_leader = api.shards.iter().all(|s| s.leader() != 0);
    let _ = writeln!(out, "etcd_server_has_leader {}", u8::from(has_leader));
    header(&mut out, "etcd_server_is_leader", "gauge", "Whether or not this member is a leader. 1 if is, 0 otherwise.");
    let _ = writeln!(out, "etcd_server_is_leader {}", u8::from(first.is_leader()));
    header(&mut out, "etcd_server_leader_changes_seen_total", "counter", "The number of leader changes seen.");
    let changes: u64 = gauges.iter().map(|g| g.leader_changes.load(Ordering::Relaxed)).sum();
    let _ = writeln!(out, "etcd_server_leader_changes_seen_total {changes}");
    header(
        &mut out,
        "etcd_server_proposals_committed_total",
        "gauge",
        "The total number of consensus proposals committed.",
    );
    let committed: u64 = gauges.iter().map(|g| g.committed.load(Ordering::Relaxed)).sum();
    let _ = writeln!(out, "etcd_server_proposals_committed_total {committed}");
    header(
        &mut out,
        "etcd_server_proposals_applied_total",
        "gauge",
        "The total number of consensus proposals applied.",
    );
    let applied: u64 = api.shards.iter().map(|s| s.applied()).sum();
    let _ = writeln!(out, "etcd_server_proposals_applied_total {applied}");
    header(&mut out, "etcd_server_proposals_pending", "gauge", "The current number of pending proposals to commit.");
    let _ = writeln!(out, "etcd_server_proposals_pending {}", GLOBAL.proposals_pending.load(Ordering::Relaxed).max(0));
    header(&mut out, "etcd_server_proposals_failed_total", "counter", "The total number of failed proposals seen.");
    let _ = writeln!(out, "etcd_server_proposals_failed_total {}", GLOBAL.proposals_failed.load(Ordering::Relaxed));
    header(
        &mut out,
        "etcd_server_version",
        "gauge",
        "Which version is running. 1 for 'server_version' label with current version.",
    );
    let _ = writeln!(out, "etcd_server_version{{server_version=\"{ETCD_COMPAT_VERSION}\"}} 1");
    histogram(
        &mut out,
        "etcd_disk_wal_fsync_duration_seconds",
        "The latency distributions of fsync called by WAL.",
        &GLOBAL.wal_fsync,
    );
    histogram(
        &mut out,
        "etcd_disk_backend_commit_duration_seconds",
        "The latency distributions of commit called by backend.",
        &GLOBAL.backend_commit,
    );
    header(
        &mut out,
        "etcd_mvcc_db_total_size_in_bytes",
        "gauge",
        "Total size of the underlying database physically allocated in bytes.",
    );
    let size: u64 = api.backends.iter().map(KvBackend::approximate_size).sum();
    let _ = writeln!(out, "etcd_mvcc_db_total_size_in_bytes {size}");
    let peers = PEER_BYTES.snapshot();
    let member = |raft_id: u64| format!("{:x}", api.member_of_raft_id(raft_id));
    let directions = [
        ("etcd_network_peer_sent_bytes_total", "To", "The total number of bytes sent to peers."),
        ("etcd_network_peer_received_bytes_total", "From", "The total number of bytes received from peers."),
    ];
    for (i, (name, label, help)) in directions.iter().enumerate() {
        header(&mut out, name, "counter", help);
        for (p, sent, received) in &peers {
            let n = if i == 0 { sent } else { received };
            let _ = writeln!(out, "{name}{{{label}=\"{}\"}} {n}", member(*p));
        }
    }
    header(
        &mut out,
        "grpc_server_handled_total",
        "counter",
        "Total number of RPCs completed on the server, regardless of success or failure.",
    );
    for (m, (service, method, kind)) in GRPC_METHODS.iter().enumerate() {
        for (c, code) in GRPC_CODES.iter().enumerate() {
            let n = GLOBAL.handled_count(m, c);
            if n > 0 {
                let _ = writeln!(
                    out,
                    "grpc_server_handled_total{{grpc_code=\"{code}\",grpc_method=\"{method}\",grpc_service=\"{service}\",grpc_type=\"{kind}\"}} {n}"
                );
            }
        }
    }
    header(
        &mut out,
        "ballast_resolved_revision_lag",
        "gauge",
        "Revisions this member's counter is ahead of the revision reads and watches over several shards may go to (0 where its shards order every write).",
    );
    let _ = writeln!(
        out,
        "ballast_resolved_revision_lag {}",
        api.revs.last() - api.cross_shard_last().min(api.revs.last())
    );
    let per_shard: [(&str, &str, &str); 7] = [
        ("ballast_shard_round_messages", "gauge", "Messages the shard's last round took from its mailbox."),
        ("ballast_shard_mailbox_depth", "gauge", "Messages waiting in the shard's mailbox."),
        ("ballast_shard_watchers", "gauge", "Watchers registered on the shard."),
        (
            "ballast_shard_slow_watch_streams",
            "gauge",
            "Watch streams with watchers behind the shard's newest revision.",
        ),
        ("ballast_shard_applied_index", "gauge", "The shard's applied raft index."),
        ("ballast_shard_has_leader", "gauge", "Whether the shard has a leader."),
        ("ballast_shard_is_leader", "gauge", "Whether this member leads the shard."),
    ];
    for (i, (name, kind, help)) in per_shard.iter().enumerate() {
        header(&mut out, name, kind, help);
        for (s, sh) in api.shards.iter().enumerate() {
            let g = sh.gauges();
            let v = match i {
                0 => g.round_messages.load(Ordering::Relaxed),
                1 => sh.mailbox_depth() as u64,
                2 => g.watchers.load(Ordering::Relaxed),
                3 => g.slow_watch_streams.load(Ordering::Relaxed),
                4 => sh.applied(),
                5 => u64::from(sh.leader() != 0),
                _ => u64::from(sh.is_leader()),
            };
            let _ = writeln!(out, "{name}{{shard=\"{s}\"}} {v}");
        }
    }
    out
}

/// Counts every answered gRPC call by method and code (`grpc_server_handled_total`): the code
/// of a trailers-only answer from its headers, else from the trailers at the end of its body.
#[derive(Clone, Copy, Debug, Default)]
pub struct GrpcMetricsLayer;

impl<S> Layer<S> for GrpcMetricsLayer {
    type Service = GrpcMetrics<S>;

    fn layer(&self, inner: S) -> GrpcMetrics<S> {
        GrpcMetrics { inner }
    }
}

/// The service [`GrpcMetricsLayer`] builds.
#[derive(Clone, Debug)]
pub struct GrpcMetrics<S> {
    inner: S,
}

fn code_of(headers: &http::HeaderMap) -> Option<usize> {
    let v = headers.get("grpc-status")?.to_str().ok()?.parse::<usize>().ok()?;
    Some(v.min(GRPC_CODES.len() - 1))
}

impl<S> Service<http::Request<Body>> for GrpcMetrics<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible> + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> BoxFuture {
        let method = grpc_method_index(req.uri().path());
        let fut = self.inner.call(req);
        Box::pin(async move {
            let resp = fut.await?;
            let Some(method) = method else { return Ok(resp) };
            if let Some(code) = code_of(resp.headers()) {
                GLOBAL.handled(method, code);
                return Ok(resp);
            }
            Ok(resp.map(|body| Body::new(Counted { inner: body, method, counted: false })))
        })
    }
}

/// A response body that counts its call when its trailers pass (or when it ends without any:
/// the client went away, counted as Canceled as grpc-go counts it).
struct Counted {
    inner: Body,
    method: usize,
    counted: bool,
}

const CANCELED: usize = 1;

impl Drop for Counted {
    fn drop(&mut self) {
        if !self.counted {
            GLOBAL.handled(self.method, CANCELED);
        }
    }
}

impl http_body::Body for Counted {
    type Data = bytes::Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            if let Some(code) = frame.trailers_ref().and_then(code_of) {
                if !self.counted {
                    self.counted = true;
                    GLOBAL.handled(self.method, code);
                }
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
