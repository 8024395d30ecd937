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

use crate::body::{Request, Response};
use crate::error::ApiError;
use crate::filters::{call_next, Filter, Filtered, Inner, ResponseFuture};

/// One server of the chain with its type erased: what servers hand requests to.
pub type Handler = BoxCloneSyncService<Request, Response, Infallible>;

/// A server of the chain: which requests it answers, and how.
pub trait Server: Clone + Send + Sync + 'static {
    /// Whether this server answers `req`; the others go to the server behind it.
    fn serves(&self, req: &Request) -> bool;

    /// Answers a request it serves.
    fn serve(&self, req: Request) -> ResponseFuture;
}

/// `server` in front of `delegate`, as one [`Handler`]: the server wraps the one behind it as
/// a filter wraps the rest of the chain.
pub fn in_front_of<S: Server>(server: S, delegate: Handler) -> Handler {
    BoxCloneSyncService::new(Filtered::new(InFront(server), delegate))
}

/// A [`Server`] as a [`Filter`] around the server behind it.
#[derive(Debug, Clone)]
struct InFront<S>(S);

impl<S: Server> Filter for InFront<S> {
    async fn filter<N: Inner>(self, req: Request, next: N) -> Response {
        if !self.0.serves(&req) {
            return call_next(next, req).await;
        }
        match self.0.serve(req).await {
            Ok(resp) => resp,
            Err(never) => match never {},
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
