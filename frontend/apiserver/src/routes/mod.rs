//! Routes: the server of a set of kinds in the delegation chain. Dispatches a request (already
//! authenticated and authorized) by path:
//!
//! * [`health`]: `/version`, `/healthz`, `/livez`, `/readyz` (and `/<check>/<name>`);
//! * [`discovery`]: `/api`, `/apis` (legacy or aggregated, by `Accept`), `/api/v1`;
//! * [`resource`]: REST on the served kinds, with [`list`] and [`watch`] for streamed answers;
//! * [`openapi`]: `/openapi/v2`, `/openapi/v3` and the per-group-version v3 documents;
//! * `/metrics` in the Prometheus text format ([`metrics`]);
//! * [`negotiation`]: `Accept` parsing shared by all of them; [`state`]: what they share;
//! * anything else (paths outside those, resources of kinds not served here): the next server
//!   of the delegation chain ([`crate::delegation`]).

pub mod discovery;
pub mod health;
pub mod list;
pub mod metrics;
pub mod negotiation;
pub mod openapi;
pub mod openapi_v2_proto;
pub mod resource;
pub mod state;
pub mod watch;

pub use state::AppState;

use std::sync::Arc;

use crate::body::{Request, Response};
use crate::delegation::Server;
use crate::error::ApiError;
use crate::filters::ResponseFuture;
use crate::request_info::RequestInfo;

/// The route dispatcher: a [`Server`] of the delegation chain.
#[derive(Debug, Clone)]
pub struct Router {
    state: Arc<AppState>,
}

impl Router {
    /// Builds the router, and starts building the OpenAPI documents on a blocking thread so
    /// neither the first `/openapi` request nor the first strict decode pays for it.
    pub fn new(state: Arc<AppState>) -> Self {
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let kinds = state.store.kinds().clone();
            runtime.spawn_blocking(move || {
                kinds.openapi();
            });
        }
        Router { state }
    }
}

impl Server for Router {
    /// Resources of the served kinds, the non-resource paths (version, health, discovery,
    /// OpenAPI, metrics), and every path below a group it serves, as kube-apiserver's
    /// go-restful container claims each path under a group's discovery root: a resource of an
    /// unknown kind or version in one of its groups (`/api/v1/widgets`,
    /// `/apis/apps/v9/deployments`) is this server's 404 `Status`, and so is a custom resource
    /// whose definition names a built-in group (`/apis/networking.k8s.io/v1/edgegateways`,
    /// `/apis/apps/v1alpha9/...`: kube shadows it). A group it does not serve
    /// (`/apis/example.com`, `/apis/example.com/v1/widgets`) is for the servers behind, and
    /// when none serves it, for the end of the chain; so is the OpenAPI v3 document of a
    /// version only a server behind has.
    fn serves(&self, req: &Request) -> bool {
        let Some(info) = req.extensions().get::<RequestInfo>() else { return true };
        let kinds = self.state.store.kinds();
        if info.is_resource_request {
            return kinds.find(&info.api_group, &info.api_version, &info.resource).is_some()
                || self.owns_group(&info.api_group);
        }
        let path = req.uri().path();
        let mut parts = path.split('/').skip(1);
        let top = parts.next().unwrap_or("");
        match (top, parts.next(), parts.next(), parts.next(), parts.next()) {
            // `/apis/<group>[/...]`: discovery of a group this server serves.
            ("apis", Some(group), _, _, _) if !group.is_empty() => self.owns_group(group),
            // The OpenAPI v3 document of a version served behind (and not here) is that server's.
            ("openapi", Some("v3"), Some("apis"), Some(group), version) if !group.is_empty() => {
                self.has_version(group, version.unwrap_or("")) || !self.delegated_serves(group)
            }
            _ => matches!(top, "version" | "healthz" | "livez" | "readyz" | "api" | "apis" | "metrics" | "openapi"),
        }
    }

    fn serve(&self, req: Request) -> ResponseFuture {
        let state = self.state.clone();
        Box::pin(async move { Ok(route(state, req).await.unwrap_or_else(ApiError::into_response)) })
    }
}

impl Router {
    /// Whether `group` is a group of this server's kinds.
    fn has_kinds_of(&self, group: &str) -> bool {
        self.state.store.kinds().groups().iter().any(|g| g.name == group)
    }

    /// Whether `version` of `group` is one this server's kinds are served in.
    fn has_version(&self, group: &str, version: &str) -> bool {
        self.state.store.kinds().groups().iter().any(|g| g.name == group && g.versions.contains(&version))
    }

    /// Whether `group` is one of this server's: a group of its kinds or of the resources it
    /// answers without storage.
    fn owns_group(&self, group: &str) -> bool {
        self.has_kinds_of(group) || self.state.store.kinds().virtual_resources().iter().any(|v| v.group == group)
    }

    /// Whether a server behind this one serves `group`.
    fn delegated_serves(&self, group: &str) -> bool {
        self.state.delegated.as_ref().is_some_and(|d| d.serves_group(group))
    }
}

async fn route(state: Arc<AppState>, req: Request) -> Result<Response, ApiError> {
    let info = req.extensions().get::<RequestInfo>().cloned().unwrap_or_default();
    if info.is_resource_request {
        return resource::handle(&state, info, req).await;
    }
    let path = req.uri().path().trim_end_matches('/');
    let is_read = req.method() == http::Method::GET || req.method() == http::Method::HEAD;
    let top = path.split('/').nth(1).unwrap_or("");
    match top {
        "version" | "healthz" | "livez" | "readyz" | "api" | "apis" | "metrics" | "openapi" if !is_read => {
            Err(ApiError::MethodNotSupported { group: String::new(), resource: String::new(), verb: info.verb })
        }
        "version" if path == "/version" => Ok(health::version(state.version)),
        "metrics" if path == "/metrics" => Ok(metrics::handle(&state)),
        "healthz" | "livez" | "readyz" => health::check(&state, path, req.uri().query()).await,
        "api" | "apis" => discovery::handle(&state, path, req.headers()),
        "openapi" => {
            let delegated = state.delegated.clone();
            openapi::handle(state.store.kinds(), delegated, path, req.uri().query(), req.headers()).await
        }
        _ => Err(ApiError::NoRoute),
    }
}
