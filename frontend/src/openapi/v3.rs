//! OpenAPI 3.0 documents, one per group version, as kube-apiserver serves them at
//! `/openapi/v3/<api|apis/group>/<version>`: `info`, `paths` (every operation of the group
//! version, path-level `name`/`namespace`/`pretty` parameters), and `components.schemas` with
//! the transitive closure of what the operations refer to.

use serde_json::{json, Map, Value};

use super::operations::{self, Body, Operation, PathItem, QueryParam, Streaming, PRETTY};
use super::schemas::{self, Definitions, Flavor};
use crate::kinds::KUBERNETES_VERSION;

const OBJECT_MEDIA: &[&str] = &["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"];
const STREAM_MEDIA: &[&str] = &[
    "application/json",
    "application/json;stream=watch",
    "application/vnd.kubernetes.protobuf",
    "application/vnd.kubernetes.protobuf;stream=watch",
    "application/yaml",
];
/// The patch media types, in upstream's order.
pub(super) const PATCH_MEDIA: &[&str] = &[
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
];

fn reference(name: &str) -> Value {
    json!({"$ref": Flavor::V3.reference(name)})
}

fn query(p: &QueryParam) -> Value {
    json!({"name": p.name, "in": "query", "description": p.description,
        "schema": {"type": p.ty, "uniqueItems": true}})
}

fn operation(o: &Operation) -> Value {
    let mut out = Map::new();
    out.insert("tags".into(), json!([o.tag]));
    out.insert("description".into(), o.description.clone().into());
    out.insert("operationId".into(), o.id.clone().into());
    if !o.params.is_empty() {
        out.insert("parameters".into(), o.params.iter().map(query).collect());
    }
    match &o.body {
        Some(Body::Object(name)) => {
            out.insert(
                "requestBody".into(),
                json!({"content": {"*/*": {"schema": reference(name)}}, "required": true}),
            );
        }
        Some(Body::Patch) => {
            let content: Map<String, Value> =
                PATCH_MEDIA.iter().map(|m| (m.to_string(), json!({"schema": reference(schemas::PATCH)}))).collect();
            out.insert("requestBody".into(), json!({"content": content, "required": true}));
        }
        Some(Body::DeleteOptions) => {
            out.insert(
                "requestBody".into(),
                json!({"content": {"*/*": {"schema": reference(schemas::DELETE_OPTIONS)}}}),
            );
        }
        None => {}
    }
    let media = if o.streaming == Streaming::No { OBJECT_MEDIA } else { STREAM_MEDIA };
    let mut responses = Map::new();
    for (code, name) in &o.responses {
        let content: Map<String, Value> =
            media.iter().map(|m| (m.to_string(), json!({"schema": reference(name)}))).collect();
        let description = Operation::response_description(*code);
        responses.insert(code.to_string(), json!({"description": description, "content": content}));
    }
    responses.insert("401".into(), json!({"description": "Unauthorized"}));
    out.insert("responses".into(), Value::Object(responses));
    o.insert_extensions(&mut out);
    Value::Object(out)
}

fn path_item(p: &PathItem) -> Value {
    let mut out = Map::new();
    for o in &p.operations {
        out.insert(o.method.into(), operation(o));
    }
    let mut params: Vec<Value> = p
        .path_params
        .iter()
        .map(|(name, description)| {
            json!({"name": name, "in": "path", "description": description, "required": true,
                "schema": {"type": "string", "uniqueItems": true}})
        })
        .collect();
    params.push(query(&PRETTY));
    out.insert("parameters".into(), Value::Array(params));
    Value::Object(out)
}

/// Returns the names of the definitions paths refer to.
pub(super) fn referenced(paths: &[PathItem]) -> Vec<String> {
    let mut names = vec![schemas::STATUS.to_string()];
    for o in paths.iter().flat_map(|p| &p.operations) {
        names.extend(o.responses.iter().map(|(_, n)| n.clone()));
        match &o.body {
            Some(Body::Object(n)) => names.push(n.clone()),
            Some(Body::Patch) => names.push(schemas::PATCH.into()),
            Some(Body::DeleteOptions) => names.push(schemas::DELETE_OPTIONS.into()),
            None => {}
        }
    }
    names
}

/// Builds the document of one group version.
pub fn document(group: &'static str, version: &'static str, defs: &Definitions) -> Value {
    let paths = operations::paths(group, version, defs);
    let roots = referenced(&paths);
    let closure = defs.closure(roots.iter().map(String::as_str));
    let components: Map<String, Value> =
        closure.iter().map(|name| (name.clone(), schemas::render(name, &defs.schemas[name], Flavor::V3))).collect();
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": KUBERNETES_VERSION.git_version()},
        "paths": paths.iter().map(|p| (p.path.clone(), path_item(p))).collect::<Map<String, Value>>(),
        "components": {
            "schemas": components,
            "securitySchemes": {"BearerToken": {"type": "apiKey", "description": "Bearer Token authentication",
                "name": "authorization", "in": "header"}},
        },
        "security": [{"BearerToken": []}],
    })
}
