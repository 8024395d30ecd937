//! Discovery: `/api`, `/apis` and `/api/v1`, generated from the registry table.
//!
//! `/api` and `/apis` come in two forms chosen by `Accept`, as in kube-apiserver: the aggregated
//! `APIGroupDiscoveryList` (`application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`,
//! which kubectl 1.32 asks for first and recognises only by the response `Content-Type`) and the
//! legacy `APIVersions` / `APIGroupList`. The legacy per-version `APIResourceList` at `/api/v1`
//! is always served: kubectl's `auth can-i`, kube-rs and the Python client use it.

use http::{HeaderMap, HeaderValue, StatusCode};
use serde_json::{json, Value};

use super::negotiation::{accept, accepts_json, SUPPORTED};
use super::AppState;
use crate::body::{self, Response};
use crate::error::ApiError;
use crate::registry::{kinds, ResourceKind};

/// The aggregated discovery media type (v2).
pub const AGGREGATED_V2: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

fn wants_aggregated(headers: &HeaderMap) -> Result<bool, ApiError> {
    let ranges = accept(headers);
    for r in &ranges {
        let aggregated = r.media == "application/json"
            && r.param("g") == Some("apidiscovery.k8s.io")
            && r.param("v") == Some("v2")
            && r.param("as") == Some("APIGroupDiscoveryList");
        if aggregated {
            return Ok(true);
        }
        if matches!(r.media.as_str(), "application/json" | "application/*" | "*/*") && r.param("as").is_none() {
            return Ok(false);
        }
    }
    if accepts_json(&ranges) {
        return Ok(false);
    }
    Err(ApiError::NotAcceptable(SUPPORTED.into()))
}

fn core_kinds() -> impl Iterator<Item = &'static ResourceKind> {
    kinds::ALL.iter().copied().filter(|k| k.group.is_empty())
}

fn aggregated_resource(k: &ResourceKind) -> Value {
    let mut r = json!({
        "resource": k.resource,
        "responseKind": {"group": k.group, "version": k.version, "kind": k.kind},
        "scope": if k.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": k.singular,
        "verbs": k.verbs.names(),
    });
    if !k.short_names.is_empty() {
        r["shortNames"] = json!(k.short_names);
    }
    if !k.categories.is_empty() {
        r["categories"] = json!(k.categories);
    }
    r
}

fn aggregated(items: &[Value]) -> Response {
    let list = json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    });
    let mut resp = body::json_with_type(StatusCode::OK, &list, AGGREGATED_V2);
    resp.headers_mut().insert(http::header::VARY, HeaderValue::from_static("Accept"));
    resp
}

/// Returns the legacy `APIResourceList` of core/v1.
pub fn core_v1_resources() -> Value {
    let resources: Vec<Value> = core_kinds()
        .map(|k| {
            let mut r = json!({
                "name": k.resource,
                "singularName": k.singular,
                "namespaced": k.namespaced,
                "kind": k.kind,
                "verbs": k.verbs.names(),
            });
            if !k.short_names.is_empty() {
                r["shortNames"] = json!(k.short_names);
            }
            if !k.categories.is_empty() {
                r["categories"] = json!(k.categories);
            }
            r
        })
        .collect();
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "v1", "resources": resources})
}

/// Serves the discovery paths.
///
/// # Errors
///
/// Returns `NoRoute` for unknown groups or versions and `NotAcceptable` when no offered
/// representation fits `Accept`.
pub fn handle(state: &AppState, path: &str, headers: &HeaderMap) -> Result<Response, ApiError> {
    match path {
        "/api" => {
            if wants_aggregated(headers)? {
                let resources: Vec<Value> = core_kinds().map(aggregated_resource).collect();
                return Ok(aggregated(&[json!({
                    "metadata": {"creationTimestamp": null},
                    "versions": [{"version": "v1", "resources": resources, "freshness": "Current"}],
                })]));
            }
            Ok(body::json(
                StatusCode::OK,
                &json!({
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": state.advertise_address}],
                }),
            ))
        }
        "/apis" => {
            // No named groups are served yet; both forms list none.
            if wants_aggregated(headers)? {
                return Ok(aggregated(&[]));
            }
            Ok(body::json(StatusCode::OK, &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": []})))
        }
        "/api/v1" => {
            if !accepts_json(&accept(headers)) {
                return Err(ApiError::NotAcceptable(SUPPORTED.into()));
            }
            Ok(body::json(StatusCode::OK, &core_v1_resources()))
        }
        _ => Err(ApiError::NoRoute),
    }
}
