//! The OpenAPI v3 documents of the served custom resources, one per group version
//! (`/openapi/v3/apis/<group>/<version>`), as kube's apiextensions server builds them from each
//! version's schema: enough for `kubectl explain <kind>.spec` and for clients that read schemas;
//! and their additions to the v2 document (`/openapi/v2`, one for every server), with each
//! schema in the form kube publishes in v2 ([`to_v2`]).

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

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

/// The reference to ObjectMeta in the built-in v2 document.
const OBJECT_META_V2: &str = "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META_V2: &str = "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";

/// A schema in the form kube publishes in OpenAPI v2, which cannot say everything v3 says:
/// `allOf`, `anyOf`, `oneOf` and `not` dropped; a `nullable` node loses its type (and its
/// items and properties, which kubectl cannot read without one); under
/// `x-kubernetes-preserve-unknown-fields` items and properties are dropped, and an array left
/// without items loses its type; a nullable field is no longer `required` (nor is any field of
/// a map whose values are nullable).
pub fn to_v2(schema: &Value) -> Value {
    let Some(map) = schema.as_object() else { return schema.clone() };
    let mut out = map.clone();
    for junctor in ["allOf", "anyOf", "oneOf", "not"] {
        out.remove(junctor);
    }
    if out.get("nullable") == Some(&Value::Bool(true)) {
        for key in ["type", "nullable", "items", "properties"] {
            out.remove(key);
        }
    }
    if out.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
        out.remove("items");
        out.remove("properties");
    }
    if !out.contains_key("items") && out.get("type").and_then(Value::as_str) == Some("array") {
        out.remove("type");
    }
    let nullable = |s: &Value| s["nullable"] == true;
    let nullable_props: Vec<String> = out
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.iter().filter(|(_, s)| nullable(s)).map(|(k, _)| k.clone()).collect())
        .unwrap_or_default();
    let nullable_values = out.get("additionalProperties").is_some_and(nullable);
    if let Some(Value::Array(required)) = out.get_mut("required") {
        required.retain(|r| !nullable_values && !r.as_str().is_some_and(|r| nullable_props.iter().any(|p| p == r)));
        if required.is_empty() {
            out.remove("required");
        }
    }
    if let Some(Value::Object(props)) = out.get_mut("properties") {
        for sub in props.values_mut() {
            *sub = to_v2(sub);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(sub) = out.get_mut(key).filter(|s| s.is_object()) {
            *sub = to_v2(sub);
        }
    }
    Value::Object(out)
}

fn v2_operation(
    action: &str,
    id: String,
    k: &ResourceKind,
    response: &str,
    params: Vec<Value>,
    consumes: Option<Vec<&str>>,
) -> Value {
    let mut op = json!({
        "operationId": Value::String(id),
        "schemes": ["https"],
        "produces": ["application/json", "application/yaml"],
        "tags": [format!("{}_{}", k.group.replace('.', "_"), k.version)],
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": k.group, "version": k.version, "kind": k.kind},
        "parameters": Value::Array(params),
        "responses": {"200": {"description": "OK", "schema": {"$ref": response}},
                      "401": {"description": "Unauthorized"}},
    });
    if let Some(c) = consumes {
        op["consumes"] = json!(c);
    }
    op
}

fn query(name: &str, type_: &str) -> Value {
    json!({"name": name, "in": "query", "type": type_, "uniqueItems": true})
}

fn body_param(schema_ref: &str) -> Value {
    json!({"name": "body", "in": "body", "required": true, "schema": {"$ref": schema_ref}})
}

/// The v2 paths and definitions of every served version, as kube adds them to `/openapi/v2`
/// (operation ids in kube's spelling, e.g. `listExampleComV1NamespacedWidget`).
pub fn v2_additions(snap: &Snapshot) -> (Map<String, Value>, Map<String, Value>) {
    let mut paths = Map::new();
    let mut definitions = Map::new();
    for s in &snap.served {
        let k = s.kind;
        let name = definition_name(k.group, k.version, k.kind);
        let list_name = format!("{name}List");
        let schema = s
            .schema
            .as_deref()
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
        let mut def = to_v2(&with_type_fields(&schema, k.group, k.version, k.kind));
        def["properties"]["metadata"] = json!({"$ref": OBJECT_META_V2,
            "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"});
        definitions.insert(name.clone(), def);
        definitions.insert(
            list_name.clone(),
            json!({
                "description": format!("{}List is a list of {}", k.kind, k.kind),
                "type": "object",
                "required": ["items"],
                "properties": {
                    "apiVersion": {"type": "string"},
                    "items": {"type": "array", "items": {"$ref": format!("#/definitions/{name}")}},
                    "kind": {"type": "string"},
                    "metadata": {"$ref": LIST_META_V2},
                },
                "x-kubernetes-group-version-kind": [{"group": k.group, "kind": format!("{}List", k.kind), "version": k.version}],
            }),
        );
        let item_ref = format!("#/definitions/{name}");
        let list_ref = format!("#/definitions/{list_name}");
        let gv: String = k
            .group
            .split(['.', '-'])
            .chain(std::iter::once(k.version))
            .map(|p| {
                let mut c = p.chars();
                c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
            })
            .collect();
        let (base, scope) = if k.namespaced {
            (format!("/apis/{}/{}/namespaces/{{namespace}}/{}", k.group, k.version, k.resource), "Namespaced")
        } else {
            (format!("/apis/{}/{}/{}", k.group, k.version, k.resource), "")
        };
        let path_params = |named: bool| {
            let mut p = Vec::new();
            if named {
                p.push(json!({"name": "name", "in": "path", "required": true, "type": "string", "uniqueItems": true,
                              "description": format!("name of the {}", k.kind)}));
            }
            if k.namespaced {
                p.push(json!({"name": "namespace", "in": "path", "required": true, "type": "string",
                              "uniqueItems": true, "description": "object name and auth scope, such as for teams and projects"}));
            }
            p
        };
        let write =
            || vec![query("dryRun", "string"), query("fieldManager", "string"), query("fieldValidation", "string")];
        let list_q = || {
            ["labelSelector", "fieldSelector", "continue", "resourceVersion"]
                .iter()
                .map(|q| query(q, "string"))
                .chain([query("limit", "integer"), query("watch", "boolean")])
                .collect::<Vec<_>>()
        };
        let patch_types =
            vec!["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"];
        let id = |verb: &str, suffix: &str| format!("{verb}{gv}{scope}{}{suffix}", k.kind);
        let mut collection = json!({
            "get": v2_operation("list", id("list", ""), k, &list_ref, list_q(), None),
            "post": v2_operation("post", id("create", ""), k, &item_ref,
                [vec![body_param(&item_ref)], write()].concat(), None),
            "delete": v2_operation("deletecollection", id("deleteCollection", ""), k,
                "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Status", list_q(), None),
        });
        collection["parameters"] = json!(path_params(false));
        paths.insert(base.clone(), collection);
        let mut item = json!({
            "get": v2_operation("get", id("read", ""), k, &item_ref, Vec::new(), None),
            "put": v2_operation("put", id("replace", ""), k, &item_ref,
                [vec![body_param(&item_ref)], write()].concat(), None),
            "patch": v2_operation("patch", id("patch", ""), k, &item_ref,
                [vec![body_param("#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Patch")], write(),
                 vec![query("force", "boolean")]].concat(), Some(patch_types.clone())),
            "delete": v2_operation("delete", id("delete", ""), k,
                "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Status",
                vec![query("dryRun", "string"), query("gracePeriodSeconds", "integer"),
                     query("propagationPolicy", "string")], None),
        });
        item["parameters"] = json!(path_params(true));
        paths.insert(format!("{base}/{{name}}"), item);
        for (sub, on, schema_ref) in [
            ("status", k.has_status(), item_ref.as_str()),
            ("scale", k.has_scale(), "#/definitions/io.k8s.api.autoscaling.v1.Scale"),
        ] {
            if !on {
                continue;
            }
            let suffix = if sub == "status" { "Status" } else { "Scale" };
            let mut p = json!({
                "get": v2_operation("get", id("read", suffix), k, schema_ref, Vec::new(), None),
                "put": v2_operation("put", id("replace", suffix), k, schema_ref,
                    [vec![body_param(schema_ref)], write()].concat(), None),
                "patch": v2_operation("patch", id("patch", suffix), k, schema_ref,
                    [vec![body_param("#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Patch")], write()].concat(),
                    Some(patch_types.clone())),
            });
            p["parameters"] = json!(path_params(true));
            paths.insert(format!("{base}/{{name}}/{sub}"), p);
        }
    }
    (paths, definitions)
}

/// `base` (the built-in API's v2 document) with the served custom resources added, as JSON
/// and in gnostic's protobuf form. As kube-aggregator merges the servers' documents, a path
/// the built-in API has (a definition taking a built-in resource's names) stays the built-in
/// one, and then only the definitions the added paths use are added.
pub fn v2_document(base: &Value, snap: &Snapshot) -> (Document, bytes::Bytes) {
    let (paths, mut definitions) = v2_additions(snap);
    let mut doc = base.clone();
    let taken = |p: &String| doc["paths"].get(p.as_str()).is_some();
    let (paths, conflicting): (Map<String, Value>, Map<String, Value>) =
        paths.into_iter().partition(|(p, _)| !taken(p));
    if !conflicting.is_empty() {
        let used = serde_json::to_string(&paths).unwrap_or_default();
        definitions.retain(|name, _| used.contains(&format!("\"#/definitions/{name}\"")));
    }
    for (key, more) in [("paths", paths), ("definitions", definitions)] {
        if let Some(map) = doc.get_mut(key).and_then(Value::as_object_mut) {
            map.extend(more);
        }
    }
    let protobuf = bytes::Bytes::from(ballast_apiserver::routes::openapi_v2_proto::encode(&doc));
    (Document::new(serde_json::to_vec(&doc).unwrap_or_default()), protobuf)
}
