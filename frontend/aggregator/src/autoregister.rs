//! Autoregistration (kube-apiserver's autoregister and CRD registration controllers): a Local
//! APIService for every group version the servers behind the aggregator serve: the built-in
//! ones (asked of the delegate's `/apis` once at start, kept with the label value `onstart`)
//! and those of every served CustomResourceDefinition version (followed in storage, label
//! `true`). APIServices it made whose group version is no longer served are deleted; those
//! without its label (a user's) are never touched.

use std::collections::BTreeMap;

use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

use ballast_apiserver::body::request_body;
use ballast_apiserver::delegation::Handler;
use ballast_apiserver::registry::deletion::DeleteOptions;
use ballast_apiserver::registry::{ResourceKind, Store};

use crate::apiservice::{local, name_of, AUTOMANAGED_LABEL};
use crate::informer::Snapshots;
use crate::priorities::{self, CUSTOM_RESOURCES};

/// The label value of built-in group versions' APIServices.
pub const ON_START: &str = "onstart";
/// The label value of CustomResourceDefinitions' APIServices.
pub const FROM_DEFINITION: &str = "true";

/// Runs autoregistration until the process ends.
pub async fn run(
    store: Store,
    kind: &'static ResourceKind,
    delegate: Handler,
    mut apiservices: Snapshots,
    mut definitions: Snapshots,
) {
    let built_in = built_in_group_versions(&delegate).await;
    // Without the delegate's groups (its `/apis` failed) the built-in APIServices are kept:
    // removing them would take every built-in group out of discovery.
    let know_built_in = built_in.len() > 1;
    loop {
        let current = apiservices.borrow_and_update().clone();
        let crds = definitions.borrow_and_update().clone();
        if let (Some(current), Some(crds)) = (current, crds) {
            let mut wanted: BTreeMap<String, Value> = BTreeMap::new();
            for (group, version) in &built_in {
                if let Some(p) = priorities::built_in(group, version) {
                    wanted.insert(name_of(group, version), local(group, version, p, ON_START));
                }
            }
            for crd in crds.values() {
                let group = crd["spec"]["group"].as_str().unwrap_or("");
                for v in crd["spec"]["versions"].as_array().into_iter().flatten() {
                    let (Some(version), true) = (v["name"].as_str(), v["served"].as_bool().unwrap_or(false)) else {
                        continue;
                    };
                    let name = name_of(group, version);
                    // A built-in group version keeps its own APIService.
                    wanted.entry(name).or_insert_with(|| local(group, version, CUSTOM_RESOURCES, FROM_DEFINITION));
                }
            }
            for (name, obj) in &wanted {
                if current.contains_key(name) {
                    continue;
                }
                let Some(obj) = obj.as_object().cloned() else { continue };
                match store.create(kind, "", obj, false).await {
                    Ok(_) => tracing::debug!(apiservice = %name, "registered a Local APIService"),
                    Err(e) => tracing::debug!(apiservice = %name, error = %e, "registering a Local APIService"),
                }
            }
            for (name, obj) in current.iter() {
                let managed = obj["metadata"]["labels"][AUTOMANAGED_LABEL].as_str();
                let ours = match managed {
                    Some(ON_START) => know_built_in,
                    Some(FROM_DEFINITION) => true,
                    _ => false,
                };
                let local = obj["spec"]["service"].is_null();
                if ours && local && !wanted.contains_key(name) {
                    if let Err(e) = store.delete(kind, "", name, &DeleteOptions::default()).await {
                        tracing::debug!(apiservice = %name, error = %e, "removing a Local APIService");
                    }
                }
            }
        }
        tokio::select! {
            changed = apiservices.changed() => if changed.is_err() { return },
            changed = definitions.changed() => if changed.is_err() { return },
        }
    }
}

/// The (group, version) pairs the delegate serves at `/api` and `/apis`, asked once: the
/// built-in API's do not change while it runs.
async fn built_in_group_versions(delegate: &Handler) -> Vec<(String, String)> {
    let mut out = vec![(String::new(), "v1".to_string())];
    let mut req = http::Request::new(request_body(bytes::Bytes::new()));
    *req.uri_mut() = http::Uri::from_static("/apis");
    req.headers_mut().insert(http::header::ACCEPT, http::HeaderValue::from_static("application/json"));
    let Ok(resp) = delegate.clone().oneshot(req).await;
    let Ok(body) = resp.into_body().collect().await.map(|b| b.to_bytes());
    let list: Value = serde_json::from_slice(&body).unwrap_or_default();
    for g in list["groups"].as_array().into_iter().flatten() {
        let group = g["name"].as_str().unwrap_or("");
        for v in g["versions"].as_array().into_iter().flatten() {
            if let Some(version) = v["version"].as_str() {
                out.push((group.to_string(), version.to_string()));
            }
        }
    }
    out
}
