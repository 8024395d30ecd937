//! The client port's connection server: hyper serving the gRPC services and the HTTP endpoints
//! of every accepted connection, with [`GrpcDeadline`] applying a gRPC call's `grpc-timeout`.
//!
//! Why not tonic's server: it reads `grpc-timeout` from every request before any layer of ours
//! sees it, and races the call against that deadline. The HTTP gateway takes the same header
//! with grpc-gateway's meaning (zero is no deadline, and a passed deadline answers in JSON), so
//! under tonic a gateway call with `Grpc-Timeout: 0n` got tonic's empty gRPC answer whenever
//! the next timer tick came before the call's answer. Here the HTTP layer routes first, and
//! the deadline applies to gRPC requests only.
//!
//! What stays as tonic's server did it: the HTTP/2 settings it was given, HTTP/1.1 accepted for
//! the plain endpoints, the connection's [`Connected::connect_info`] in every request's
//! extensions (TLS peer certificates for `--client-cert-auth`), and graceful shutdown (accepting
//! stops, each connection is told to finish, and the server returns once all have closed).

use std::convert::Infallible;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::StreamExt;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tonic::body::Body;
use tonic::transport::server::Connected;
use tower::{Service, ServiceExt};

use super::unary::BoxFuture;
use super::GrpcLimits;

/// Serves `svc` on every connection of `incoming`, with HTTP/2 connection window `window` and
/// `limits`, until `stop` fires, then waits for the connections to finish.
pub async fn serve<IO, I, S>(
    svc: S,
    incoming: I,
    window: u32,
    limits: GrpcLimits,
    stop: impl std::future::Future<Output = ()>,
) where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Connected + Unpin + Send + 'static,
    IO::ConnectInfo: Clone + Send + Sync + 'static,
    I: futures::Stream<Item = std::io::Result<IO>>,
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http2()
        .timer(TokioTimer::new())
        .initial_connection_window_size(window)
        .max_concurrent_streams(limits.max_concurrent_streams)
        .keep_alive_interval(limits.keepalive_interval)
        .keep_alive_timeout(limits.keepalive_timeout)
        .max_pending_accept_reset_streams(limits.max_pending_accept_reset_streams);
    // hyper applies its HTTP/1 header read timeout only with a timer.
    builder.http1().timer(TokioTimer::new());
    let (closing_tx, closing_rx) = tokio::sync::watch::channel(());
    {
        let mut incoming = std::pin::pin!(incoming);
        let mut stop = std::pin::pin!(stop);
        loop {
            let io = tokio::select! {
                () = &mut stop => break,
                io = incoming.next() => match io {
                    Some(Ok(io)) => io,
                    Some(Err(_)) => continue,
                    None => break,
                },
            };
            let info = io.connect_info();
            let svc = svc.clone();
            let service = hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                let mut req = req.map(Body::new);
                req.extensions_mut().insert(info.clone());
                svc.clone().oneshot(req)
            });
            let builder = builder.clone();
            let mut closing = closing_rx.clone();
            tokio::spawn(async move {
                let conn = builder.serve_connection(TokioIo::new(io), service);
                let mut conn = std::pin::pin!(conn);
                tokio::select! {
                    _ = &mut conn => return,
                    _ = closing.changed() => conn.as_mut().graceful_shutdown(),
                }
                let _ = conn.await;
                drop(closing);
            });
        }
    }
    drop(closing_rx);
    let _ = closing_tx.send(());
    closing_tx.closed().await;
}

/// Ends a gRPC call whose `grpc-timeout` passes before it answers, with the status tonic's
/// server gave (Cancelled, "Timeout expired"); other requests pass untouched. The inner
/// service's future is already boxed, so a call without a deadline costs no allocation here.
#[derive(Clone, Debug)]
pub struct GrpcDeadline<S> {
    inner: S,
}

impl<S> GrpcDeadline<S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> Self {
        GrpcDeadline { inner }
    }
}

impl<S> Service<http::Request<Body>> for GrpcDeadline<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible, Future = BoxFuture>,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> BoxFuture {
        let deadline = if super::http_response::is_grpc(&req) { grpc_timeout(req.headers()) } else { None };
        let call = self.inner.call(req);
        match deadline {
            None => call,
            Some(d) => Box::pin(async move {
                match tokio::time::timeout(d, call).await {
                    Ok(answer) => answer,
                    Err(_) => Ok(tonic::Status::cancelled("Timeout expired").into_http()),
                }
            }),
        }
    }
}

/// The gRPC spec's `grpc-timeout`: at most 8 digits and a unit of `H M S m u n`; anything else
/// is no deadline (as tonic and grpc-go take a header they cannot read).
fn grpc_timeout(headers: &http::HeaderMap) -> Option<Duration> {
    let value = headers.get("grpc-timeout")?.to_str().ok()?;
    let split = value.len().checked_sub(1).filter(|&n| (1..=8).contains(&n))?;
    let (count, unit) = value.split_at(split);
    if !count.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let count: u64 = count.parse().ok()?;
    Some(Duration::from_nanos(count.saturating_mul(timeout_unit_nanos(unit)?)))
}

/// Nanoseconds in a `grpc-timeout` unit (`H M S m u n`), shared with the gateway's reading.
pub(super) fn timeout_unit_nanos(unit: &str) -> Option<u64> {
    Some(match unit {
        "H" => 3_600_000_000_000,
        "M" => 60_000_000_000,
        "S" => 1_000_000_000,
        "m" => 1_000_000,
        "u" => 1_000,
        "n" => 1,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(content_type: &'static str, timeout: &'static str) -> http::Request<Body> {
        let mut req = http::Request::new(Body::empty());
        req.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static(content_type));
        req.headers_mut().insert("grpc-timeout", http::HeaderValue::from_static(timeout));
        req
    }

    async fn slow_answer(_req: http::Request<Body>) -> Result<http::Response<Body>, Infallible> {
        tokio::time::sleep(Duration::from_millis(200)).await;
        Ok(http::Response::new(Body::empty()))
    }

    #[tokio::test]
    async fn a_passed_deadline_ends_grpc_calls_only() {
        let slow = || GrpcDeadline::new(tower::service_fn(|req| -> BoxFuture { Box::pin(slow_answer(req)) }));
        let answer = slow().oneshot(request("application/grpc", "0n")).await.unwrap();
        let status = tonic::Status::from_header_map(answer.headers()).expect("a status");
        assert_eq!((status.code(), status.message()), (tonic::Code::Cancelled, "Timeout expired"));
        // The gateway's requests read the header themselves, with grpc-gateway's meaning.
        let answer = slow().oneshot(request("application/json", "0n")).await.unwrap();
        assert!(tonic::Status::from_header_map(answer.headers()).is_none());
        let answer = slow().oneshot(request("application/grpc", "5S")).await.unwrap();
        assert!(tonic::Status::from_header_map(answer.headers()).is_none());
    }

    #[test]
    fn timeouts_read_as_the_grpc_spec_writes_them() {
        let read = |v: &'static str| {
            let mut h = http::HeaderMap::new();
            h.insert("grpc-timeout", http::HeaderValue::from_static(v));
            grpc_timeout(&h)
        };
        assert_eq!(read("3H"), Some(Duration::from_secs(3 * 3600)));
        assert_eq!(read("250m"), Some(Duration::from_millis(250)));
        assert_eq!(read("0n"), Some(Duration::ZERO));
        for bad in ["", "S", "5", "5s", "-5S", "+5S", "1.5S", "123456789S"] {
            assert_eq!(read(bad), None, "{bad}");
        }
    }
}
