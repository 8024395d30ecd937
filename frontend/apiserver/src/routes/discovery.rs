//! Discovery: `/api`, `/apis`, `/api/v1`, `/apis/<group>` and `/apis/<group>/<version>`,
//! generated from the served kinds (groups in kube's order, preferred version first,
//! `/status` and `/scale` listed as subresources).
//!
//! `/api` and `/apis` come in two forms chosen by `Accept`, as in kube-apiserver: the aggregated
//! `APIGroupDiscoveryList` (`application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`,
//! which kubectl 1.32 asks for first and recognises only by the response `Content-Type`) and the
//! legacy `APIVersions` / `APIGroupList`. The legacy per-version `APIResourceList` at `/api/v1`
//! is always served: kubectl's `auth can-i`, kube-rs and the Python client use it.

use http::{HeaderMap, HeaderValue, StatusCode};
use serde_json::{json, Value};

use super::negotiation::{accept, accepts_json, SUPPORTED};
use super::state::AppState;
use crate::body::{self, Response};
use crate::error::ApiError;
use crate::registry::{ApiGroup, ResourceKind, ServedKinds};
use crate::served::{subresources, VirtualResource};

/// The aggregated discovery media type (v2).
pub const AGGREGATED_V2: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Returns whether `Accept` asks for aggregated discovery.
///
/// # Errors
///
/// Returns `NotAcceptable` when neither form fits.
pub fn wants_aggregated(headers: &HeaderMap) -> Result<bool, ApiError> {
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
    let subs: Vec<Value> = subresources(k)
        .into_iter()
        .map(|s| {
            json!({"subresource": s.name, "responseKind": {"group": s.group, "version": s.version, "kind": s.kind},
                "verbs": s.verbs})
        })
        .collect();
    if !subs.is_empty() {
        r["subresources"] = json!(subs);
    }
    r
}

/// Returns the aggregated-discovery `APIGroupDiscovery` of one group of `kinds`.
pub fn aggregated_group(kinds: &dyn ServedKinds, g: &ApiGroup) -> Value {
    let versions: Vec<Value> = g
        .versions
        .iter()
        .map(|v| {
            let resources: Vec<Value> = kinds.of(g.name, v).map(aggregated_resource).collect();
            json!({"version": v, "resources": resources, "freshness": "Current"})
        })
        .collect();
    let mut metadata = json!({"creationTimestamp": null});
    if !g.name.is_empty() {
        metadata["name"] = g.name.into();
    }
    json!({"metadata": metadata, "versions": versions})
}

/// Answers an `APIGroupDiscoveryList` of `items`.
pub fn aggregated(items: &[Value]) -> Response {
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

/// Returns the legacy `APIResourceList` of one group version.
pub fn resource_list(kinds: &dyn ServedKinds, group: &str, version: &str) -> Value {
    resource_list_of(group, version, resource_entries(kinds, group, version))
}

fn resource_list_of(group: &str, version: &str, resources: Vec<Value>) -> Value {
    let group_version = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    let mut list = json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version});
    list["resources"] = Value::Array(resources);
    list
}

/// Returns the legacy `APIResource` entries of one group version of `kinds`, each resource
/// followed by its subresources.
pub fn resource_entries(kinds: &dyn ServedKinds, group: &str, version: &str) -> Vec<Value> {
    let mut resources = Vec::new();
    for k in kinds.of(group, version) {
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
        resources.push(r);
        for s in subresources(k) {
            let mut sub = json!({
                "name": format!("{}/{}", k.resource, s.name),
                "singularName": "",
                "namespaced": k.namespaced,
                "kind": s.kind,
                "verbs": s.verbs,
            });
            if s.group != k.group || s.version != k.version {
                sub["group"] = s.group.into();
                sub["version"] = s.version.into();
            }
            resources.push(sub);
        }
    }
    resources
}

/// Returns the legacy `APIGroup` entry of one group.
pub fn legacy_group(g: &ApiGroup) -> Value {
    let gv = |v: &str| json!({"groupVersion": format!("{}/{v}", g.name), "version": v});
    json!({
        "name": g.name,
        "versions": g.versions.iter().map(|v| gv(v)).collect::<Vec<_>>(),
        "preferredVersion": gv(g.versions[0]),
    })
}

/// Returns the `APIGroup` document of `/apis/<group>`.
pub fn group_document(g: &ApiGroup) -> Value {
    let mut doc = legacy_group(g);
    doc["kind"] = "APIGroup".into();
    doc["apiVersion"] = "v1".into();
    doc
}

fn named_groups(kinds: &dyn ServedKinds) -> impl Iterator<Item = &'static ApiGroup> {
    kinds.groups().iter().filter(|g| !g.name.is_empty())
}

/// Returns the API groups of `virtual_resources` (each served at version v1 only).
pub fn virtual_groups(virtual_resources: &'static [VirtualResource]) -> Vec<&'static str> {
    let mut groups: Vec<&'static str> = virtual_resources.iter().map(|v| v.group).collect();
    groups.dedup();
    groups
}

fn in_group<'a>(
    virtual_resources: &'static [VirtualResource],
    group: &'a str,
) -> impl Iterator<Item = &'static VirtualResource> + 'a {
    virtual_resources.iter().filter(move |v| v.group == group)
}

/// Returns the legacy `APIGroup` entries of `virtual_resources` (for `/apis` as
/// `APIGroupList` and `/apis/<group>`).
pub fn virtual_legacy_groups(virtual_resources: &'static [VirtualResource]) -> Vec<Value> {
    virtual_groups(virtual_resources)
        .into_iter()
        .map(|g| {
            let v1 = json!({"groupVersion": format!("{g}/v1"), "version": "v1"});
            json!({"name": g, "versions": [v1.clone()], "preferredVersion": v1})
        })
        .collect()
}

/// Returns the legacy `APIResourceList` of `/apis/<group>/<version>`, if a group of
/// `virtual_resources`.
pub fn virtual_resource_list(
    virtual_resources: &'static [VirtualResource],
    group: &str,
    version: &str,
) -> Option<Value> {
    let resources: Vec<Value> = in_group(virtual_resources, group)
        .filter(|v| v.version == version)
        .map(|v| {
            json!({"name": v.resource, "singularName": v.singular, "namespaced": v.namespaced,
                   "kind": v.kind, "verbs": v.verbs})
        })
        .collect();
    (!resources.is_empty()).then(|| {
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": format!("{group}/{version}"),
               "resources": resources})
    })
}

/// Returns the aggregated-discovery `APIGroupDiscovery` items of `virtual_resources` (for
/// `/apis` as `APIGroupDiscoveryList`).
pub fn virtual_aggregated_groups(virtual_resources: &'static [VirtualResource]) -> Vec<Value> {
    virtual_groups(virtual_resources)
        .into_iter()
        .map(|g| {
            let resources: Vec<Value> = in_group(virtual_resources, g)
                .map(|v| {
                    json!({"resource": v.resource, "singularResource": v.singular,
                           "responseKind": {"group": v.group, "version": v.version, "kind": v.kind},
                           "scope": if v.namespaced { "Namespaced" } else { "Cluster" }, "verbs": v.verbs})
                })
                .collect();
            json!({"metadata": {"name": g, "creationTimestamp": null},
                   "versions": [{"version": "v1", "resources": resources, "freshness": "Current"}]})
        })
        .collect()
}

/// Splices the groups of resources answered without storage into a group list where
/// kube-apiserver lists its review groups: right after `events.k8s.io`.
fn with_review_groups(mut registry: Vec<Value>, reviews: Vec<Value>, name_of: fn(&Value) -> &str) -> Vec<Value> {
    let at = registry.iter().position(|g| name_of(g) == "events.k8s.io").map_or(registry.len(), |i| i + 1);
    registry.splice(at..at, reviews);
    registry
}

/// Appends the groups of the servers behind to `groups`; a group already listed (a built-in
/// group a CustomResourceDefinition names) is listed once, with the versions it lacked added
/// with their resources. A version it has keeps its own resources only: kube's discovery takes
/// each group version from one source, the built-in API before the definitions, and the
/// built-in API answers every path of its groups, so a definition's resources in a built-in
/// version are neither listed nor served (those of a version the built-in API lacks are listed,
/// and 404 all the same).
fn merged(mut groups: Vec<Value>, behind: impl Iterator<Item = Value>, name_of: fn(&Value) -> &str) -> Vec<Value> {
    for group in behind {
        let Some(at) = groups.iter().position(|g| name_of(g) == name_of(&group)) else {
            groups.push(group);
            continue;
        };
        let Some(versions) = groups[at]["versions"].as_array_mut() else { continue };
        for version in group["versions"].as_array().into_iter().flatten() {
            if !versions.iter().any(|v| v["version"] == version["version"]) {
                versions.push(version.clone());
            }
        }
    }
    groups
}

fn legacy_name(g: &Value) -> &str {
    g["name"].as_str().unwrap_or("")
}

fn aggregated_name(g: &Value) -> &str {
    g["metadata"]["name"].as_str().unwrap_or("")
}

/// Serves the discovery paths.
///
/// # Errors
///
/// Returns `NoRoute` for unknown groups or versions and `NotAcceptable` when no offered
/// representation fits `Accept`.
pub fn handle(state: &AppState, path: &str, headers: &HeaderMap) -> Result<Response, ApiError> {
    let kinds = &**state.store.kinds();
    match path {
        "/api" => {
            if wants_aggregated(headers)? {
                let core: Vec<Value> =
                    kinds.groups().iter().filter(|g| g.name.is_empty()).map(|g| aggregated_group(kinds, g)).collect();
                return Ok(aggregated(&core));
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
            if wants_aggregated(headers)? {
                let items: Vec<Value> = named_groups(kinds).map(|g| aggregated_group(kinds, g)).collect();
                let items =
                    with_review_groups(items, virtual_aggregated_groups(kinds.virtual_resources()), aggregated_name);
                // The groups of the servers behind come last, as kube's aggregator orders them.
                let behind = state.delegated.iter().flat_map(|d| d.aggregated_groups());
                return Ok(aggregated(&merged(items, behind, aggregated_name)));
            }
            let groups: Vec<Value> = named_groups(kinds).map(legacy_group).collect();
            let groups = with_review_groups(groups, virtual_legacy_groups(kinds.virtual_resources()), legacy_name);
            let groups = merged(groups, state.delegated.iter().flat_map(|d| d.legacy_groups()), legacy_name);
            Ok(body::json(StatusCode::OK, &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})))
        }
        "/api/v1" => {
            if !accepts_json(&accept(headers)) {
                return Err(ApiError::NotAcceptable(SUPPORTED.into()));
            }
            Ok(body::json(StatusCode::OK, &resource_list(kinds, "", "v1")))
        }
        _ => {
            let rest = path.strip_prefix("/apis/").ok_or(ApiError::NoRoute)?;
            let (group, version) = match rest.split_once('/') {
                Some((g, v)) => (g, Some(v)),
                None => (rest, None),
            };
            if !accepts_json(&accept(headers)) {
                return Err(ApiError::NotAcceptable(SUPPORTED.into()));
            }
            let Some(g) = named_groups(kinds).find(|g| g.name == group) else {
                return virtual_group(kinds.virtual_resources(), group, version);
            };
            built_in_group(state, kinds, g, version)
        }
    }
}

/// `/apis/<group>[/<version>]` of a built-in group. The group document lists the versions
/// only a CustomResourceDefinition adds, as kube's aggregator lists every Local APIService of
/// the group; a version's list is the built-in API's own, and a version it does not serve is
/// its 404 (kube's built-in API answers every path below its groups).
fn built_in_group(
    state: &AppState,
    kinds: &dyn ServedKinds,
    g: &ApiGroup,
    version: Option<&str>,
) -> Result<Response, ApiError> {
    let Some(v) = version else {
        let behind = state.delegated.iter().flat_map(|d| d.legacy_groups()).filter(|o| legacy_name(o) == g.name);
        let mut doc = merged(vec![group_document(g)], behind, legacy_name);
        return Ok(body::json(StatusCode::OK, &doc.swap_remove(0)));
    };
    if !g.versions.contains(&v) {
        return Err(ApiError::NoRoute);
    }
    Ok(body::json(StatusCode::OK, &resource_list(kinds, g.name, v)))
}

/// `/apis/<group>[/<version>]` for the groups of resources answered without storage.
fn virtual_group(
    virtual_resources: &'static [VirtualResource],
    group: &str,
    version: Option<&str>,
) -> Result<Response, ApiError> {
    match version {
        None => {
            let mut doc = virtual_legacy_groups(virtual_resources)
                .into_iter()
                .find(|g| legacy_name(g) == group)
                .ok_or(ApiError::NoRoute)?;
            doc["kind"] = "APIGroup".into();
            doc["apiVersion"] = "v1".into();
            Ok(body::json(StatusCode::OK, &doc))
        }
        Some(v) => {
            let list = virtual_resource_list(virtual_resources, group, v).ok_or(ApiError::NoRoute)?;
            Ok(body::json(StatusCode::OK, &list))
        }
    }
}
