//! Discovery across the chain (kube-aggregator's discovery merge): `/apis` as the delegate
//! answers it (the built-in and custom resource groups) plus the groups and versions of
//! remote APIServices, in both forms, every group ordered by `groupPriorityMinimum` (highest
//! first, then by name) and every group's versions by `versionPriority` (highest first, then
//! Kubernetes version order), the first being the preferred one. Remote versions' resources
//! come from the documents the availability checks fetched; a version whose last check failed
//! is marked `Stale`, as kube marks it.

use http::StatusCode;
use serde_json::{json, Value};

use ballast_apiserver::body::{self, Request, Response};
use ballast_apiserver::delegation::Handler;

use crate::apiservice::compare_versions;
use crate::merge::{delegate_document, merged, unchanged};
use crate::state::{Routes, Shared};

/// Answers `/apis`: the delegate's document with the remote groups merged in and reordered.
pub async fn apis(shared: &Shared, delegate: Handler, req: Request) -> Response {
    let (parts, mut doc, bytes) = match delegate_document(delegate, req).await {
        Ok(d) => d,
        Err(resp) => return resp,
    };
    let routes = shared.routes();
    if routes.by_group_version.is_empty() {
        return unchanged(parts, bytes);
    }
    match doc["kind"].as_str() {
        Some("APIGroupList") => merge_legacy(&mut doc, &routes),
        Some("APIGroupDiscoveryList") => merge_aggregated(&mut doc, &routes, shared),
        _ => return unchanged(parts, bytes),
    }
    merged(parts, &doc)
}

/// The legacy `APIGroup` of a group with APIServices (`/apis/<group>`): the versions they name,
/// highest priority (the preferred one) first, as kube-aggregator answers it for local and
/// remote APIServices alike.
pub fn group_document(routes: &Routes, group: &str) -> Response {
    let mut versions: Vec<Value> = routes
        .by_group_version
        .values()
        .filter(|a| a.group == group)
        .map(|a| json!({"groupVersion": format!("{group}/{}", a.version), "version": a.version}))
        .collect();
    sort_versions(&mut versions, routes, group, |v| v["version"].as_str().unwrap_or(""));
    let preferred = versions.first().cloned().unwrap_or(Value::Null);
    body::json(
        StatusCode::OK,
        &json!({"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": versions,
                "preferredVersion": preferred}),
    )
}

/// A group's priority: the highest `groupPriorityMinimum` of its APIServices (0 without).
fn group_priority(routes: &Routes, group: &str) -> i64 {
    routes.by_group_version.values().filter(|a| a.group == group).map(|a| a.group_priority_minimum).max().unwrap_or(0)
}

fn sort_groups(groups: &mut [Value], routes: &Routes, name_of: fn(&Value) -> &str) {
    groups.sort_by(|a, b| {
        let (ga, gb) = (name_of(a), name_of(b));
        group_priority(routes, gb).cmp(&group_priority(routes, ga)).then_with(|| ga.cmp(gb))
    });
}

fn sort_versions(versions: &mut [Value], routes: &Routes, group: &str, version_of: fn(&Value) -> &str) {
    let priority = |v: &str| routes.get(group, v).map_or(0, |a| a.version_priority);
    versions.sort_by(|a, b| {
        let (va, vb) = (version_of(a), version_of(b));
        priority(vb).cmp(&priority(va)).then_with(|| compare_versions(va, vb))
    });
}

fn legacy_name(g: &Value) -> &str {
    g["name"].as_str().unwrap_or("")
}

fn aggregated_name(g: &Value) -> &str {
    g["metadata"]["name"].as_str().unwrap_or("")
}

fn merge_legacy(doc: &mut Value, routes: &Routes) {
    let Some(groups) = doc["groups"].as_array_mut() else { return };
    for api in routes.remote().filter(|a| !a.group.is_empty()) {
        let index = match groups.iter().position(|g| legacy_name(g) == api.group) {
            Some(i) => i,
            None => {
                groups.push(json!({"name": api.group, "versions": [], "preferredVersion": {}}));
                groups.len() - 1
            }
        };
        let group = &mut groups[index];
        let versions = group["versions"].as_array_mut();
        if let Some(versions) = versions {
            if !versions.iter().any(|v| v["version"] == api.version.as_str()) {
                versions
                    .push(json!({"groupVersion": format!("{}/{}", api.group, api.version), "version": api.version}));
            }
        }
    }
    for group in groups.iter_mut() {
        let name = legacy_name(group).to_string();
        if let Some(versions) = group["versions"].as_array_mut() {
            sort_versions(versions, routes, &name, |v| v["version"].as_str().unwrap_or(""));
            let first = versions.first().cloned();
            if let Some(first) = first {
                group["preferredVersion"] = first;
            }
        }
    }
    sort_groups(groups, routes, legacy_name);
}

fn merge_aggregated(doc: &mut Value, routes: &Routes, shared: &Shared) {
    let Some(items) = doc["items"].as_array_mut() else { return };
    for api in routes.remote().filter(|a| !a.group.is_empty()) {
        let index = match items.iter().position(|g| aggregated_name(g) == api.group) {
            Some(i) => i,
            None => {
                items.push(json!({"metadata": {"name": api.group, "creationTimestamp": null}, "versions": []}));
                items.len() - 1
            }
        };
        let document = shared.document(&api.name);
        let resources = document
            .as_ref()
            .and_then(|d| d.resources.as_ref())
            .map(|r| aggregated_resources(r, &api.group, &api.version))
            .unwrap_or_default();
        let fresh = document.is_some_and(|d| d.fresh);
        let entry = json!({"version": api.version, "resources": resources,
                           "freshness": if fresh { "Current" } else { "Stale" }});
        if let Some(versions) = items[index]["versions"].as_array_mut() {
            versions.retain(|v| v["version"] != api.version.as_str());
            versions.push(entry);
        }
    }
    for item in items.iter_mut() {
        let name = aggregated_name(item).to_string();
        if let Some(versions) = item["versions"].as_array_mut() {
            sort_versions(versions, routes, &name, |v| v["version"].as_str().unwrap_or(""));
        }
    }
    sort_groups(items, routes, aggregated_name);
}

/// An `APIResourceList`'s resources as `APIResourceDiscovery` entries (subresources, named
/// `<resource>/<sub>` in the list, under their resource).
pub fn aggregated_resources(list: &Value, group: &str, version: &str) -> Vec<Value> {
    let resources = list["resources"].as_array().map(Vec::as_slice).unwrap_or_default();
    let kind_of = |r: &Value| {
        json!({
            "group": r["group"].as_str().filter(|g| !g.is_empty()).unwrap_or(group),
            "version": r["version"].as_str().filter(|v| !v.is_empty()).unwrap_or(version),
            "kind": r["kind"],
        })
    };
    let mut out: Vec<Value> = Vec::new();
    for r in resources.iter().filter(|r| r["name"].as_str().is_some_and(|n| !n.contains('/'))) {
        let mut entry = json!({
            "resource": r["name"],
            "responseKind": kind_of(r),
            "scope": if r["namespaced"].as_bool().unwrap_or(false) { "Namespaced" } else { "Cluster" },
            "singularResource": r["singularName"].as_str().unwrap_or(""),
            "verbs": r["verbs"].as_array().cloned().unwrap_or_default(),
        });
        for field in ["shortNames", "categories"] {
            if r[field].as_array().is_some_and(|a| !a.is_empty()) {
                entry[field] = r[field].clone();
            }
        }
        out.push(entry);
    }
    for r in resources {
        let Some((parent, sub)) = r["name"].as_str().and_then(|n| n.split_once('/')) else { continue };
        if let Some(entry) = out.iter_mut().find(|e| e["resource"] == parent) {
            let subs = entry.as_object_mut().map(|o| o.entry("subresources").or_insert_with(|| json!([])));
            if let Some(Value::Array(subs)) = subs {
                subs.push(json!({"subresource": sub, "responseKind": kind_of(r),
                                 "verbs": r["verbs"].as_array().cloned().unwrap_or_default()}));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::informer::Objects;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    fn apiservice(group: &str, version: &str, gp: i64, vp: i64, remote: bool) -> Value {
        let mut a = json!({"metadata": {"name": format!("{version}.{group}")},
            "spec": {"group": group, "version": version, "groupPriorityMinimum": gp, "versionPriority": vp}});
        if remote {
            a["spec"]["service"] = json!({"namespace": "ns", "name": "svc"});
        }
        a
    }

    fn routes(items: &[Value]) -> Routes {
        let objects: Objects = Arc::new(
            items
                .iter()
                .map(|o| (o["metadata"]["name"].as_str().unwrap_or("").to_string(), o.clone()))
                .collect::<BTreeMap<_, _>>(),
        );
        Routes::from_objects(&objects)
    }

    #[test]
    fn legacy_groups_ordered_by_priority_with_remote_ones_added() {
        let r = routes(&[
            apiservice("apps", "v1", 17800, 15, false),
            apiservice("zeta.io", "v1", 1000, 100, false),
            apiservice("metrics.k8s.io", "v1beta1", 100, 100, true),
            apiservice("metrics.k8s.io", "v1", 100, 50, true),
            apiservice("high.io", "v1", 19000, 1, true),
        ]);
        let mut doc = json!({"kind": "APIGroupList", "groups": [
            {"name": "zeta.io", "versions": [{"groupVersion": "zeta.io/v1", "version": "v1"}]},
            {"name": "apps", "versions": [{"groupVersion": "apps/v1", "version": "v1"}]},
        ]});
        merge_legacy(&mut doc, &r);
        let names: Vec<&str> = doc["groups"].as_array().into_iter().flatten().map(legacy_name).collect();
        assert_eq!(names, ["high.io", "apps", "zeta.io", "metrics.k8s.io"]);
        let metrics = &doc["groups"][3];
        assert_eq!(metrics["preferredVersion"]["version"], "v1beta1", "version priority beats version order");
        assert_eq!(metrics["versions"][1]["groupVersion"], "metrics.k8s.io/v1");
    }

    #[test]
    fn resource_list_to_aggregated_entries() {
        let list = json!({"kind": "APIResourceList", "groupVersion": "x.io/v1", "resources": [
            {"name": "flunders", "singularName": "flunder", "namespaced": true, "kind": "Flunder", "verbs": ["get", "list"], "shortNames": ["fl"]},
            {"name": "flunders/status", "namespaced": true, "kind": "Flunder", "verbs": ["get"]},
        ]});
        let out = aggregated_resources(&list, "x.io", "v1");
        assert_eq!(out.len(), 1);
        assert_eq!(out[0]["responseKind"], json!({"group": "x.io", "version": "v1", "kind": "Flunder"}));
        assert_eq!(out[0]["scope"], "Namespaced");
        assert_eq!(out[0]["shortNames"], json!(["fl"]));
        assert_eq!(out[0]["subresources"][0]["subresource"], "status");
    }
}
