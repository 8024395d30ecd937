//! [`AggregatorServer`]: the aggregator's place in the delegation chain. It answers `/apis`
//! (merged discovery), `/apis/<group>` of groups it has APIServices of, and every request for a
//! group version a remote APIService serves (proxied), and the OpenAPI documents (merged);
//! everything else goes to the delegate.

use std::sync::Arc;

use ballast_apiserver::body::Request;
use ballast_apiserver::delegation::{Handler, Server};
use ballast_apiserver::filters::ResponseFuture;

use crate::apiservice::ApiService;
use crate::state::{Routes, Shared};
use crate::{discovery, openapi, openapi_v2, proxy};

/// What the aggregator does with a request.
#[derive(Debug)]
enum Route {
    /// `/apis`: the delegate's answer, merged.
    Apis,
    /// `/apis/<group>` of a group with APIServices (the versions they name, by priority).
    Group(String),
    /// A request for a remote APIService's group version.
    Proxy(ApiService),
    /// `/openapi/v2`: the delegate's document, merged.
    OpenApiV2,
    /// `/openapi/v3`: the delegate's index, merged.
    OpenApiIndex,
    /// `/openapi/v3/apis/<group>/<version>` of a remote APIService.
    OpenApiDocument(ApiService),
    /// Everything else.
    Delegate,
}

fn route(method: &http::Method, path: &str, routes: &Routes) -> Route {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match segments.as_slice() {
        ["apis"] if method == http::Method::GET => Route::Apis,
        // kube-aggregator answers the group document of every group it has APIServices of,
        // local or remote, from those APIServices.
        ["apis", group] if routes.by_group_version.values().any(|a| a.group == *group) => {
            Route::Group((*group).to_string())
        }
        ["openapi", "v2"] if method == http::Method::GET => Route::OpenApiV2,
        ["openapi", "v3"] if method == http::Method::GET => Route::OpenApiIndex,
        ["openapi", "v3", "apis", group, version] => match routes.get(group, version) {
            Some(api) if !api.is_local() => Route::OpenApiDocument(api.clone()),
            _ => Route::Delegate,
        },
        ["apis", group, version, ..] => match routes.get(group, version) {
            Some(api) if !api.is_local() => Route::Proxy(api.clone()),
            _ => Route::Delegate,
        },
        _ => Route::Delegate,
    }
}

/// The aggregator as a server of the chain.
#[derive(Debug, Clone)]
pub struct AggregatorServer {
    shared: Arc<Shared>,
    delegate: Handler,
}

impl AggregatorServer {
    /// The server in front of `delegate`.
    pub fn new(shared: Arc<Shared>, delegate: Handler) -> AggregatorServer {
        AggregatorServer { shared, delegate }
    }
}

impl Server for AggregatorServer {
    fn serves(&self, req: &Request) -> bool {
        !matches!(route(req.method(), req.uri().path(), &self.shared.routes()), Route::Delegate)
    }

    fn serve(&self, req: Request) -> ResponseFuture {
        let (shared, delegate) = (self.shared.clone(), self.delegate.clone());
        Box::pin(async move {
            let routes = shared.routes();
            Ok(match route(req.method(), req.uri().path(), &routes) {
                Route::Apis => discovery::apis(&shared, delegate, req).await,
                Route::Group(group) => discovery::group_document(&routes, &group),
                Route::Proxy(api) => proxy::proxy(&shared, &api, req).await,
                Route::OpenApiV2 => openapi_v2::document(&shared, delegate, req).await,
                Route::OpenApiIndex => openapi::index(&shared, delegate, req).await,
                Route::OpenApiDocument(api) => openapi::document(&shared, &api, &req),
                Route::Delegate => {
                    use tower::ServiceExt;
                    let Ok(resp) = delegate.oneshot(req).await;
                    resp
                }
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::informer::Objects;
    use serde_json::json;
    use std::collections::BTreeMap;

    #[test]
    fn routes_by_group_version() {
        let objects: Objects = Arc::new(BTreeMap::from([
            (
                "v1.apps".to_string(),
                json!({"metadata": {"name": "v1.apps"}, "spec": {"group": "apps", "version": "v1"}}),
            ),
            (
                "v1.x.io".to_string(),
                json!({"metadata": {"name": "v1.x.io"}, "spec": {"group": "x.io", "version": "v1",
                       "service": {"namespace": "ns", "name": "s"}}}),
            ),
        ]));
        let routes = Routes::from_objects(&objects);
        let get = http::Method::GET;
        assert!(matches!(route(&get, "/apis/x.io/v1/namespaces/a/flunders", &routes), Route::Proxy(_)));
        assert!(matches!(route(&get, "/apis/x.io/v1", &routes), Route::Proxy(_)));
        assert!(matches!(route(&get, "/apis/x.io", &routes), Route::Group(_)));
        assert!(matches!(route(&get, "/apis/x.io/v2/things", &routes), Route::Delegate));
        assert!(matches!(route(&get, "/apis/apps/v1/deployments", &routes), Route::Delegate));
        assert!(matches!(route(&get, "/apis/apps", &routes), Route::Group(_)));
        assert!(matches!(route(&get, "/apis/batch", &routes), Route::Delegate));
        assert!(matches!(route(&get, "/apis/", &routes), Route::Apis));
        assert!(matches!(route(&http::Method::POST, "/apis", &routes), Route::Delegate));
        assert!(matches!(route(&get, "/api/v1/pods", &routes), Route::Delegate));
        assert!(matches!(route(&get, "/openapi/v3", &routes), Route::OpenApiIndex));
        assert!(matches!(route(&get, "/openapi/v3/apis/x.io/v1", &routes), Route::OpenApiDocument(_)));
        assert!(matches!(route(&get, "/openapi/v3/apis/apps/v1", &routes), Route::Delegate));
    }
}
