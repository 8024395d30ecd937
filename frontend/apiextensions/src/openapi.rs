//! The OpenAPI v3 documents of the served custom resources, one per group version
//! (`/openapi/v3/apis/<group>/<version>`), as kube's apiextensions server builds them from each
//! version's schema: enough for `kubectl explain <kind>.spec` and for clients that read schemas.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use ballast_apiserver::registry::served_kinds::Document;
use ballast_apiserver::registry::ResourceKind;

use crate::registry::Snapshot;

/// The schema name kube gives a kind: the group reversed, the version, the kind
/// (`com.example.v1.Widget`).
pub fn definition_name(group: &str, version: &str, kind: &str) -> String {
    let reversed: Vec<&str> = group.split('.').rev().collect();
    format!("{}.{version}.{kind}", reversed.join("."))
}

fn with_type_fields(schema: &Value, group: &str, version: &str, kind: &str) -> Value {
    let mut s = schema.clone();
    if !s.is_object() {
        s = json!({"type": "object"});
    }
    let props = s["properties"].as_object().cloned().unwrap_or_default();
    let mut props = props;
    props.insert("apiVersion".into(), json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"}));
    props.insert("kind".into(), json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"}));
    props.insert("metadata".into(), json!({"type": "object", "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"}));
    s["properties"] = Value::Object(props);
    s["x-kubernetes-group-version-kind"] = json!([{"group": group, "kind": kind, "version": version}]);
    s
}

fn operation(action: &str, k: &ResourceKind, schema_ref: &str, params: &[&str]) -> Value {
    let parameters: Vec<Value> = params
        .iter()
        .map(|p| json!({"name": p, "in": "query", "schema": {"type": "string", "uniqueItems": true}}))
        .collect();
    json!({
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": k.group, "version": k.version, "kind": k.kind},
        "parameters": parameters,
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": schema_ref}}}}},
    })
}

/// The REST paths of one kind, each operation with the `x-kubernetes-action` and
/// `x-kubernetes-group-version-kind` extensions clients look kinds up by.
fn paths(k: &ResourceKind, schema_ref: &str, out: &mut serde_json::Map<String, Value>) {
    let base = if k.namespaced {
        format!("/apis/{}/{}/namespaces/{{namespace}}/{}", k.group, k.version, k.resource)
    } else {
        format!("/apis/{}/{}/{}", k.group, k.version, k.resource)
    };
    let write = ["dryRun", "fieldManager", "fieldValidation"];
    out.insert(
        base.clone(),
        json!({
            "get": operation("list", k, schema_ref, &["labelSelector", "fieldSelector", "limit", "continue"]),
            "post": operation("post", k, schema_ref, &write),
            "delete": operation("deletecollection", k, schema_ref, &["labelSelector", "fieldSelector"]),
        }),
    );
    out.insert(
        format!("{base}/{{name}}"),
        json!({
            "get": operation("get", k, schema_ref, &[]),
            "put": operation("put", k, schema_ref, &write),
            "patch": operation("patch", k, schema_ref, &write),
            "delete": operation("delete", k, schema_ref, &["dryRun"]),
        }),
    );
    for (sub, on) in [("status", k.has_status()), ("scale", k.has_scale())] {
        if on {
            out.insert(
                format!("{base}/{{name}}/{sub}"),
                json!({
                    "get": operation("get", k, schema_ref, &[]),
                    "put": operation("put", k, schema_ref, &write),
                    "patch": operation("patch", k, schema_ref, &write),
                }),
            );
        }
    }
}

/// Builds every group version's document.
pub fn documents(snap: &Snapshot) -> BTreeMap<String, Document> {
    let mut by_gv: BTreeMap<String, serde_json::Map<String, Value>> = BTreeMap::new();
    let mut paths_by_gv: BTreeMap<String, serde_json::Map<String, Value>> = BTreeMap::new();
    for s in &snap.served {
        let k = s.kind;
        let name = definition_name(k.group, k.version, k.kind);
        paths(
            k,
            &format!("#/components/schemas/{name}"),
            paths_by_gv.entry(format!("apis/{}/{}", k.group, k.version)).or_default(),
        );
        let schema = s
            .schema
            .as_deref()
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
        by_gv
            .entry(format!("apis/{}/{}", k.group, k.version))
            .or_default()
            .insert(definition_name(k.group, k.version, k.kind), with_type_fields(&schema, k.group, k.version, k.kind));
    }
    by_gv
        .into_iter()
        .map(|(key, schemas)| {
            let paths = paths_by_gv.remove(&key).unwrap_or_default();
            let doc = json!({
                "openapi": "3.0.0",
                "info": {"title": "Kubernetes CRD Swagger", "version": "v0.1.0"},
                "paths": paths,
                "components": {"schemas": schemas},
            });
            (key, Document::new(serde_json::to_vec(&doc).unwrap_or_default()))
        })
        .collect()
}
