//! The delegation chain (kube's `DelegationTarget`): a server answers the paths it serves and
//! hands every other request to the server behind it; the last one is [`NotFound`]. The
//! handler chain's filters run once, in front of the first server.
//!
//! ```text
//! filters -> aggregator -> built-in API -> apiextensions -> NotFound (404 page not found)
//! ```
//!
//! A path below a group some server serves gets that server's 404 `Status`
//! (`/api/v1/widgets`); a path no server claims (`/apis/example.com/v1/widgets` with no such
//! group, `/nope`) reaches [`NotFound`], which answers as kube-apiserver's end of the chain
//! does: a plain-text `404 page not found`, which kubectl reports as
//! `Error from server (NotFound): the server could not find the requested resource`.
//!
//! Each server is a [`Handler`] built around the [`Handler`] behind it: a [`Server`] says which
//! requests it answers, and [`in_front_of`] hands it those and the server behind the rest, so
//! `in_front_of(Router::new(state), apiextensions)` reads as the chain does.

use std::convert::Infallible;
use std::future::{ready, Ready};
use std::sync::Arc;
use std::task::{Context, Poll};

use serde_json::Value;
use tower::util::BoxCloneSyncService;

use crate::body::{Request, Response};
use crate::filters::{call_next, Filter, Filtered, Inner, ResponseFuture};
use crate::registry::admission::Admission;
use crate::registry::served_kinds::Document;
use crate::registry::Store;

/// What a server behind the built-in API is built from (kube's generic server configuration,
/// handed down the chain): the storage it shares and the settings every server follows.
#[derive(Debug, Clone)]
pub struct DelegateContext {
    /// The front server's store: its storage, key prefix and LIST page size (a server behind
    /// serves its own kinds on it with [`Store::with_kinds`]).
    pub store: Store,
    /// The metric registry.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// The watch cache settings.
    pub watch_cache: crate::watch_cache::WatchCacheConfig,
    /// The version `/version` reports.
    pub version: crate::served::Version,
    /// `host:port` advertised in discovery.
    pub advertise_address: String,
}

/// A server behind the built-in API, built: its handler, what it adds to the front server's
/// discovery and OpenAPI index, and the validation it adds to the front server's writes.
#[derive(Debug)]
pub struct Delegate {
    /// The server (in front of the rest of the chain).
    pub handler: Handler,
    /// Its APIs, for the front server's documents.
    pub apis: Option<Arc<dyn DelegatedApis>>,
    /// Admission plugins for the front server's kinds.
    pub admission: Vec<Arc<dyn Admission>>,
}

impl Delegate {
    /// A server that adds nothing to the front server's documents or writes.
    pub fn plain(handler: Handler) -> Delegate {
        Delegate { handler, apis: None, admission: Vec::new() }
    }
}

/// One server of the chain with its type erased: what servers hand requests to.
pub type Handler = BoxCloneSyncService<Request, Response, Infallible>;

/// What a server behind the built-in API serves, for the documents the built-in API answers
/// for every server of the chain (kube's discovery and OpenAPI aggregation): the group list
/// at `/apis` in both forms and the `/openapi/v3` index. The server behind answers
/// `/apis/<group>[/<version>]` and `/openapi/v3/apis/<group>/<version>` of its own groups,
/// which the server in front hands on to it. What it reports may change at any time (a
/// CustomResourceDefinition created), so it is asked on every request.
pub trait DelegatedApis: Send + Sync + std::fmt::Debug {
    /// Whether `group` is served behind.
    fn serves_group(&self, group: &str) -> bool;

    /// The legacy `APIGroup` entries of `/apis` (`APIGroupList`).
    fn legacy_groups(&self) -> Vec<Value>;

    /// The `APIGroupDiscovery` items of `/apis` (`APIGroupDiscoveryList`).
    fn aggregated_groups(&self) -> Vec<Value>;

    /// The `/openapi/v3` index entries: (key such as `apis/example.com/v1`, document hash).
    fn openapi_v3_paths(&self) -> Vec<(String, String)>;

    /// The kinds served behind that live in namespaces on the front server's storage, which
    /// deleting a namespace must empty too (kube's namespace controller deletes every
    /// namespaced resource discovery lists). `None` when the server behind keeps nothing there.
    fn namespaced_kinds(&self) -> Option<Arc<dyn crate::registry::ServedKinds>> {
        None
    }

    /// The `/openapi/v2` document: `base` (the front server's) with the paths and definitions
    /// served behind added, as JSON and in its protobuf form (kube publishes one v2 document
    /// for every server). `None` when nothing is added. May be costly (the document is large):
    /// called off the async workers, and expected to keep its answer until what it serves
    /// changes.
    fn openapi_v2(&self, _base: &Document) -> Option<(Document, bytes::Bytes)> {
        None
    }
}

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

/// The end of the chain: every request is answered 404 with the text `404 page not found`, as
/// kube-apiserver answers a path no server of its chain serves (its final handler is Go's
/// plain not-found handler, not a `Status`).
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
        ready(Ok(crate::body::text(http::StatusCode::NOT_FOUND, "404 page not found\n".into())))
    }
}

#[cfg(test)]
mod tests {
    use tower::ServiceExt;

    use super::*;

    #[tokio::test]
    async fn the_end_of_the_chain_answers_404() {
        use http_body_util::BodyExt;
        let req = http::Request::builder().uri("/apis/example.com/v1/widgets").body(crate::body::request_body(""));
        let resp = NotFound::handler().oneshot(req.expect("request")).await.expect("infallible");
        assert_eq!(resp.status(), http::StatusCode::NOT_FOUND);
        assert_eq!(resp.headers()[http::header::CONTENT_TYPE], "text/plain; charset=utf-8");
        let body = resp.into_body().collect().await.expect("body").to_bytes();
        assert_eq!(body, "404 page not found\n");
    }
}
