//! [`LearnerLayer`]: what a learner refuses. A learner receives the log but does not vote, so
//! it may be behind; as etcd's interceptors do, it answers only Status and serializable Ranges
//! (the KV service checks `serializable`), and every other call gets etcd's Unavailable "rpc
//! not supported for learner", which clients take as a cue to try another member.

use std::convert::Infallible;
use std::task::{Context, Poll};

use tonic::body::Body;
use tower::{Layer, Service, ServiceExt};

use super::unary::BoxFuture;
use super::Api;
use crate::error::EngineError;

/// Wraps the client port's services; the outermost layer, so no call slips past it.
#[derive(Clone, Debug)]
pub struct LearnerLayer {
    api: Api,
}

impl LearnerLayer {
    /// Refuses calls while the member `api` serves is a learner.
    pub fn new(api: Api) -> Self {
        Self { api }
    }
}

impl<S> Layer<S> for LearnerLayer {
    type Service = Learner<S>;

    fn layer(&self, inner: S) -> Learner<S> {
        Learner { inner, api: self.api.clone() }
    }
}

/// The service [`LearnerLayer`] builds.
#[derive(Clone, Debug)]
pub struct Learner<S> {
    inner: S,
    api: Api,
}

/// Calls a learner takes (a Range only when serializable, which the KV service checks).
fn answered_by_learner(path: &str) -> bool {
    matches!(path, "/etcdserverpb.Maintenance/Status" | "/etcdserverpb.KV/Range")
}

impl<S> Service<http::Request<Body>> for Learner<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // The inner service is made ready when a request is handed to it.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> BoxFuture {
        if self.api.is_learner() && !answered_by_learner(req.uri().path()) {
            let status = tonic::Status::from(EngineError::NotSupportedForLearner);
            return Box::pin(std::future::ready(Ok(status.into_http())));
        }
        Box::pin(self.inner.clone().oneshot(req))
    }
}
