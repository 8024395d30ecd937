//! OpenAPI v3 across the chain (kube-aggregator's OpenAPI v3 aggregation): `/openapi/v3` as
//! the delegate answers it, with an entry for every remote group version whose server gave a
//! document (fetched by the availability checks), and those documents served here with the
//! delegate's hash and cache rules, so `kubectl explain` covers the extension servers' kinds.
//! OpenAPI v2 (one merged document) is [`crate::openapi_v2`].

use serde_json::json;

use ballast_apiserver::body::{Request, Response};
use ballast_apiserver::delegation::Handler;
use ballast_apiserver::error::ApiError;
use ballast_apiserver::routes::openapi::group_version;

use crate::apiservice::ApiService;
use crate::merge::{delegate_document, merged, unchanged};
use crate::state::Shared;

/// The index key of a group version's document.
pub fn key_of(api: &ApiService) -> String {
    format!("apis/{}/{}", api.group, api.version)
}

/// Answers `/openapi/v3`: the delegate's index with the remote documents added.
pub async fn index(shared: &Shared, delegate: Handler, req: Request) -> Response {
    let (parts, mut doc, bytes) = match delegate_document(delegate, req).await {
        Ok(d) => d,
        Err(resp) => return resp,
    };
    let routes = shared.routes();
    let mut added = false;
    if let Some(paths) = doc["paths"].as_object_mut() {
        for api in routes.remote().filter(|a| !a.group.is_empty()) {
            if let Some(d) = shared.openapi(&api.name) {
                let key = key_of(api);
                let url = format!("/openapi/v3/{key}?hash={}", d.hash);
                paths.insert(key, json!({ "serverRelativeURL": url }));
                added = true;
            }
        }
    }
    if added {
        merged(parts, &doc)
    } else {
        unchanged(parts, bytes)
    }
}

/// Answers `/openapi/v3/apis/<group>/<version>` of a remote APIService.
pub fn document(shared: &Shared, api: &ApiService, req: &Request) -> Response {
    let Some(doc) = shared.openapi(&api.name) else {
        return ApiError::NoRoute.into_response();
    };
    group_version(&key_of(api), &doc, req.uri().query(), req.headers()).unwrap_or_else(ApiError::into_response)
}
