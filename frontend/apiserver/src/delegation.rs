//! The delegation chain (kube's `DelegationTarget`): a server answers the paths it serves and
//! hands every other request to the server behind it; the last one is [`NotFound`]. The
//! handler chain's filters run once, in front of the first server.
//!
//! ```text
//! filters -> aggregator -> built-in API -> apiextensions -> NotFound (404 Status)
//! ```
//!
//! Each server is a [`Handler`] built around the [`Handler`] behind it: a [`Server`] says which
//! requests it answers, and [`in_front_of`] hands it those and the server behind the rest, so
//! `in_front_of(Router::new(state), apiextensions)` reads as the chain does.

use std::convert::Infallible;
use std::future::{ready, Ready};
use std::task::{Context, Poll};

use tower::util::BoxCloneSyncService;
use tower::ServiceExt;

use crate::body::{Request, Response};
use crate::error::ApiError;
use crate::filters::ResponseFuture;

/// One server of the chain with its type erased: what servers hand requests to.
pub type Handler = BoxCloneSyncService<Request, Response, Infallible>;

/// A server of the chain: which requests it answers, and how.
pub trait Server: Clone + Send + Sync + 'static {
    /// Whether this server answers `req`; the others go to the server behind it.
    fn serves(&self, req: &Request) -> bool;

    /// Answers a request it serves.
    fn serve(&self, req: Request) -> ResponseFuture;
}

/// `server` in front of `delegate`, as one [`Handler`].
pub fn in_front_of<S: Server + std::fmt::Debug>(server: S, delegate: Handler) -> Handler {
    BoxCloneSyncService::new(InFront { server, delegate })
}

#[derive(Debug, Clone)]
struct InFront<S> {
    server: S,
    delegate: Handler,
}

impl<S: Server> tower::Service<Request> for InFront<S> {
    type Response = Response;
    type Error = Infallible;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> Self::Future {
        if self.server.serves(&req) {
            self.server.serve(req)
        } else {
            Box::pin(self.delegate.clone().oneshot(req))
        }
    }
}

/// The end of the chain: every request is answered 404 with a `NotFound` Status, as
/// kube-apiserver answers a path no server serves.
#[derive(Debug, Clone, Copy, Default)]
pub struct NotFound;

impl NotFound {
    /// Returns the end of the chain as a [`Handler`].
    pub fn handler() -> Handler {
        BoxCloneSyncService::new(NotFound)
    }
}

impl tower::Service<Request> for NotFound {
    type Response = Response;
    type Error = Infallible;
    type Future = Ready<Result<Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _req: Request) -> Self::Future {
        ready(Ok(ApiError::NoRoute.into_response()))
    }
}

#[cfg(test)]
mod tests {
    use tower::ServiceExt;

    use super::*;

    #[tokio::test]
    async fn the_end_of_the_chain_answers_404() {
        let req = http::Request::builder().uri("/apis/example.com/v1/widgets").body(crate::body::request_body(""));
        let resp = NotFound::handler().oneshot(req.expect("request")).await.expect("infallible");
        assert_eq!(resp.status(), http::StatusCode::NOT_FOUND);
    }
}
