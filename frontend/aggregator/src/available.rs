//! The availability controller (kube's local and remote availability controllers in one
//! loop): it sets every APIService's `Available` condition. A Local one is always available;
//! a remote one is when its Service passes kube's checks ([`crate::resolve::check`]) and a
//! discovery GET of its group version (as `system:kube-aggregator` in `system:masters`)
//! answers 2xx in time. The answer is kept as the group version's discovery document.
//!
//! Checks run on every change of the APIServices, Services or EndpointSlices, and every
//! `availability_interval` otherwise; all APIServices are checked at once, so one hanging
//! server delays no other. A status is written only when it changes (transition time kept
//! otherwise), so replicas converge rather than fight.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use serde_json::{json, Value};

use ballast_apiserver::authn::user::{UserInfo, MASTERS_GROUP};
use ballast_apiserver::registry::served_kinds::Document;
use ballast_apiserver::registry::{ResourceKind, Store};

use crate::apiservice::ApiService;
use crate::backend::send;
use crate::proxy::set_identity;
use crate::resolve::check;
use crate::state::{Shared, TargetError};

/// The user the discovery checks run as (kube's).
pub const CHECK_USER: &str = "system:kube-aggregator";

/// A condition's (status, reason, message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// True, False or Unknown.
    pub status: &'static str,
    /// The reason.
    pub reason: String,
    /// The message.
    pub message: String,
}

impl Outcome {
    fn new(status: &'static str, reason: &str, message: impl Into<String>) -> Outcome {
        Outcome { status, reason: reason.into(), message: message.into() }
    }
}

/// Runs the controller until the process ends.
pub async fn run(shared: Arc<Shared>, store: Store, kind: &'static ResourceKind) {
    // The routes, not the raw objects: they are derived from them, and a round must see the
    // APIService whose change woke it.
    let mut routes_changed = shared.routes.clone();
    let mut services = shared.services.clone();
    let mut slices = shared.endpoint_slices.clone();
    loop {
        let routes = routes_changed.borrow_and_update().clone().unwrap_or_default();
        let ready = shared.apiservices.borrow().is_some() && services.borrow().is_some();
        if ready {
            let checks = routes.by_group_version.values().map(|api| {
                let shared = shared.clone();
                let store = store.clone();
                async move {
                    let outcome = check_one(&shared, api).await;
                    write_condition(&store, kind, api, &outcome).await;
                }
            });
            futures::future::join_all(checks).await;
            shared.retain_documents(&routes);
        }
        let slices_changed = async {
            match &mut slices {
                Some(s) => s.changed().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            changed = routes_changed.changed() => if changed.is_err() { return },
            changed = services.changed() => if changed.is_err() { return },
            _ = slices_changed => {}
            () = tokio::time::sleep(shared.config.availability_interval) => {}
        }
    }
}

/// Checks one APIService; records its discovery document.
pub async fn check_one(shared: &Shared, api: &ApiService) -> Outcome {
    let Some(service) = &api.service else {
        return Outcome::new("True", "Local", "Local APIServices are always available");
    };
    let Some(services) = shared.services.borrow().clone() else {
        return Outcome::new("Unknown", "ServiceAccessError", "services are not listed yet");
    };
    let slices = shared.endpoint_slices.as_ref().and_then(|s| s.borrow().clone());
    if let Err(e) = check(service, &services, slices.as_ref()) {
        shared.record_document(&api.name, None);
        return Outcome::new("False", e.reason, e.message);
    }
    match discover(shared, api).await {
        Ok(resources) => {
            shared.record_document(&api.name, Some(resources));
            if !api.group.is_empty() {
                fetch_openapi(shared, api).await;
                fetch_openapi_v2(shared, api).await;
            }
            Outcome::new("True", "Passed", "all checks passed")
        }
        Err(message) => {
            shared.record_document(&api.name, None);
            Outcome::new("False", "FailedDiscoveryCheck", message)
        }
    }
}

/// GETs the group version's discovery document from its server.
async fn discover(shared: &Shared, api: &ApiService) -> Result<Value, String> {
    let path = if api.group.is_empty() {
        format!("/api/{}", api.version)
    } else {
        format!("/apis/{}/{}", api.group, api.version)
    };
    let fetch = fetch(shared, api, &path, shared.config.max_discovery_bytes);
    let (url, body) = match tokio::time::timeout(shared.config.discovery_timeout, fetch).await {
        Ok(result) => result?,
        Err(_) => {
            let url = shared.target(api).map(|t| format!("{}{path}", t.url())).unwrap_or(path);
            return Err(format!("timed out waiting for {url}"));
        }
    };
    let doc: Value = serde_json::from_slice(&body)
        .map_err(|e| format!("failing or missing response from {url}: the body is not JSON: {e}"))?;
    if doc["resources"].as_array().is_none() {
        return Err(format!("failing or missing response from {url}: the body is not an APIResourceList"));
    }
    Ok(doc)
}

/// Fetches the group version's OpenAPI v3 document, for `/openapi/v3` (kubectl explain). A
/// server that has none, or sends a bad one, keeps its previous one and stays available.
async fn fetch_openapi(shared: &Shared, api: &ApiService) {
    let path = format!("/openapi/v3/apis/{}/{}", api.group, api.version);
    let fetch = fetch(shared, api, &path, shared.config.max_openapi_bytes);
    match tokio::time::timeout(shared.config.discovery_timeout, fetch).await {
        Ok(Ok((_, body))) if serde_json::from_slice::<Value>(&body).is_ok_and(|d| d["openapi"].is_string()) => {
            let changed = shared.openapi(&api.name).is_none_or(|d| d.json != body);
            if changed {
                shared.record_openapi(&api.name, Document::new(body.to_vec()));
            }
        }
        Ok(Ok(_)) => tracing::debug!(apiservice = %api.name, "extension server's OpenAPI v3 document is not one"),
        Ok(Err(e)) => tracing::debug!(apiservice = %api.name, error = %e, "fetching an OpenAPI v3 document"),
        Err(_) => tracing::debug!(apiservice = %api.name, "fetching an OpenAPI v3 document timed out"),
    }
}

/// Fetches the server's OpenAPI v2 document, for `/openapi/v2` (kubectl's client-side
/// validation and `explain --output plaintext-openapiv2`). As with v3, a server that has
/// none, or sends a bad one, keeps its previous one and stays available.
async fn fetch_openapi_v2(shared: &Shared, api: &ApiService) {
    let fetch = fetch(shared, api, "/openapi/v2", shared.config.max_openapi_bytes);
    match tokio::time::timeout(shared.config.discovery_timeout, fetch).await {
        Ok(Ok((_, body))) if serde_json::from_slice::<Value>(&body).is_ok_and(|d| d["swagger"] == "2.0") => {
            if shared.openapi_v2(&api.name).is_none_or(|d| d.json != body) {
                shared.record_openapi_v2(&api.name, Document::new(body.to_vec()));
            }
        }
        Ok(Ok(_)) => tracing::debug!(apiservice = %api.name, "extension server's OpenAPI v2 document is not one"),
        Ok(Err(e)) => tracing::debug!(apiservice = %api.name, error = %e, "fetching an OpenAPI v2 document"),
        Err(_) => tracing::debug!(apiservice = %api.name, "fetching an OpenAPI v2 document timed out"),
    }
}

/// GETs `path` from `api`'s server as `system:kube-aggregator`; returns the URL and a 2xx
/// answer's body of at most `limit` bytes.
async fn fetch(shared: &Shared, api: &ApiService, path: &str, limit: usize) -> Result<(String, Bytes), String> {
    let target = match shared.target(api) {
        Ok(t) => t,
        Err(TargetError::Unresolved(u)) => return Err(u.message),
        Err(TargetError::Backend(e)) => return Err(e.to_string()),
        Err(TargetError::NotReady) => return Err("services are not listed yet".into()),
    };
    let url = format!("{}{path}", target.url());
    let mut req = http::Request::new(ballast_apiserver::body::request_body(Bytes::new()));
    *req.uri_mut() = path.parse().map_err(|e| format!("invalid path {path:?}: {e}"))?;
    req.headers_mut().insert(http::header::ACCEPT, http::HeaderValue::from_static("application/json"));
    if let Ok(host) = http::HeaderValue::from_str(target.url().trim_start_matches("https://")) {
        req.headers_mut().insert(http::header::HOST, host);
    }
    set_identity(req.headers_mut(), &UserInfo::new(CHECK_USER, "", vec![MASTERS_GROUP.into()]));
    let resp = send(&shared.pool, &target, req, &shared.config)
        .await
        .map_err(|e| format!("failing or missing response from {url}: {e}"))?;
    let code = resp.status();
    if !code.is_success() {
        return Err(format!("failing or missing response from {url}: bad status from {url}: {}", code.as_u16()));
    }
    let body = Limited::new(resp.into_body(), limit)
        .collect()
        .await
        .map_err(|e| format!("failing or missing response from {url}: reading the body: {e}"))?
        .to_bytes();
    Ok((url, body))
}

/// Writes `outcome` as `api`'s `Available` condition unless it already says so.
async fn write_condition(store: &Store, kind: &'static ResourceKind, api: &ApiService, outcome: &Outcome) {
    let stored = api.available_condition();
    let same = stored.is_some_and(|c| {
        c["status"] == outcome.status
            && c["reason"] == outcome.reason.as_str()
            && c["message"] == outcome.message.as_str()
    });
    if same {
        return;
    }
    if stored.is_none_or(|c| c["status"] != outcome.status) {
        tracing::info!(apiservice = %api.name, status = outcome.status, reason = %outcome.reason,
            message = %outcome.message, "APIService availability changed");
    }
    // The transition time moves only when the status does (kube's SetAPIServiceCondition).
    let since = stored
        .filter(|c| c["status"] == outcome.status)
        .and_then(|c| c["lastTransitionTime"].as_str())
        .map_or_else(ballast_apiserver::clock::now_rfc3339, str::to_string);
    let condition = json!({
        "type": "Available",
        "status": outcome.status,
        "lastTransitionTime": since,
        "reason": outcome.reason,
        "message": outcome.message,
    });
    let Some(mut obj) = api.object.as_object().cloned() else { return };
    let mut conditions: Vec<Value> = api.object["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["type"] != "Available")
        .cloned()
        .collect();
    conditions.push(condition);
    obj.insert("status".into(), json!({"conditions": conditions}));
    if let Err(e) = store.update_status(kind, "", &api.name, obj, false).await {
        // Another frontend wrote first, or the APIService went away: the watch brings it.
        tracing::debug!(error = %e, apiservice = %api.name, "writing an APIService's status");
    }
}
