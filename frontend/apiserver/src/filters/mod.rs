//! The filters of the handler chain, one file each, all of one shape: a config struct `XLayer`
//! that is a `tower::Layer` and implements [`Filter`], and `X<S> = Filtered<XLayer, S>`, a
//! `tower::Service<Request, Response = Response, Error = Infallible>`. Refusals are responses
//! (a Status from `error.rs`), never service errors, so no per-layer error types exist to nest
//! inside each other (tower#131).
//!
//! The order is decided in exactly one place, `chain::build_handler_chain`.
//!
//! * [`audit_init`]: the request's audit ID (`Audit-ID` header both ways) and receive time.
//! * [`panic_recovery`]: a panic below becomes a 500 Status; the server keeps running.
//! * [`request_info`]: parses the URL into a `RequestInfo` for everything after it.
//! * [`metrics`]: the request counters, latency histogram and long-running gauge.
//! * [`timeout`]: non-long-running requests end with 504 after `--request-timeout`.
//! * [`authentication`]: client certificate, bearer token or anonymous → `UserInfo`, or 401.
//! * [`audit`]: audit events by policy, with the stages of the request.
//! * [`impersonation`]: `Impersonate-*` headers, each authorized, replace the user.
//! * [`flow_control`]: max-in-flight limits for read-only and mutating requests (429).
//! * [`authorization`]: RBAC → 403.
//! * [`body_limit`]: caps request bodies (413).

pub mod audit;
pub mod audit_init;
pub mod authentication;
pub mod authorization;
pub mod body_limit;
pub mod flow_control;
pub mod impersonation;
pub mod metrics;
pub mod panic_recovery;
pub mod request_info;
pub mod timeout;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tower::{Service, ServiceExt};

use crate::body::{Request, Response};

/// The boxed future every filter service returns.
pub type ResponseFuture = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

/// What a filter needs of the service it wraps.
pub trait Inner:
    Service<Request, Response = Response, Error = Infallible, Future: Send> + Clone + Send + 'static
{
}

impl<S> Inner for S where
    S: Service<Request, Response = Response, Error = Infallible, Future: Send> + Clone + Send + 'static
{
}

/// The body of one filter: handle `req`, calling `next` (or not).
pub trait Filter: Clone + Send + Sync + 'static {
    /// Runs the filter around `next`.
    fn filter<S: Inner>(self, req: Request, next: S) -> impl Future<Output = Response> + Send;
}

/// A filter wrapped around the rest of the chain.
#[derive(Debug, Clone)]
pub struct Filtered<F, S> {
    filter: F,
    inner: S,
}

impl<F, S> Filtered<F, S> {
    /// Wraps `inner` with `filter`.
    pub fn new(filter: F, inner: S) -> Self {
        Filtered { filter, inner }
    }
}

impl<F: Filter, S: Inner> Service<Request> for Filtered<F, S> {
    type Response = Response;
    type Error = Infallible;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // Readiness of the inner service is awaited per request in `oneshot`.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let (filter, inner) = (self.filter.clone(), self.inner.clone());
        Box::pin(async move { Ok(filter.filter(req, inner).await) })
    }
}

/// Calls the rest of the chain.
pub async fn call_next<S: Inner>(next: S, req: Request) -> Response {
    match next.oneshot(req).await {
        Ok(resp) => resp,
        Err(never) => match never {},
    }
}

/// A response body that keeps `guard` alive until the body is finished with (sent to the end or
/// dropped with the connection), so the guard's `Drop` marks the end of a streaming response.
struct GuardedBody<G> {
    inner: crate::body::ResponseBody,
    _guard: G,
}

impl<G: Unpin> http_body::Body for GuardedBody<G> {
    type Data = bytes::Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<bytes::Bytes>, Infallible>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Returns `resp` with `guard` attached to its body (dropped when the body is).
pub fn guard_body<G: Unpin + Send + 'static>(resp: Response, guard: G) -> Response {
    use http_body_util::BodyExt;
    resp.map(|inner| GuardedBody { inner, _guard: guard }.boxed_unsync())
}

/// Implements `tower::Layer` for a filter config struct.
macro_rules! filter_layer {
    ($layer:ident) => {
        impl<S> tower::Layer<S> for $layer {
            type Service = crate::filters::Filtered<$layer, S>;

            fn layer(&self, inner: S) -> Self::Service {
                crate::filters::Filtered::new(self.clone(), inner)
            }
        }
    };
}
pub(crate) use filter_layer;
