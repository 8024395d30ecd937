//! The Swagger 2.0 document at `/openapi/v2`: every served group version in one document, with
//! `definitions` holding every schema the operations refer to. kubectl reads it (in its protobuf
//! form, see `ballast_apiserver::routes::openapi_v2_proto`) for client-side apply's patch
//! metadata and for client-side validation when the server does not validate fields itself.

use serde_json::{json, Map, Value};

use super::operations::{self, Body, Operation, PathItem, QueryParam, Streaming, PRETTY};
use super::schemas::{self, Definitions, Flavor};
use super::v3::PATCH_MEDIA;
use crate::kinds::KUBERNETES_VERSION;

fn query(p: &QueryParam) -> Value {
    json!({"name": p.name, "in": "query", "description": p.description, "type": p.ty, "uniqueItems": true})
}

fn operation(o: &Operation) -> Value {
    let mut out = Map::new();
    out.insert("description".into(), o.description.clone().into());
    let consumes: Vec<&str> = match o.body {
        Some(Body::Patch) => PATCH_MEDIA.to_vec(),
        _ => vec!["*/*"],
    };
    out.insert("consumes".into(), json!(consumes));
    let produces: &[&str] = match o.streaming {
        Streaming::No => &["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"],
        _ => &[
            "application/json",
            "application/yaml",
            "application/vnd.kubernetes.protobuf",
            "application/json;stream=watch",
            "application/vnd.kubernetes.protobuf;stream=watch",
        ],
    };
    out.insert("produces".into(), json!(produces));
    out.insert("schemes".into(), json!(["https"]));
    out.insert("tags".into(), json!([o.tag]));
    out.insert("operationId".into(), o.id.clone().into());
    let mut params: Vec<Value> = Vec::new();
    let body = match &o.body {
        Some(Body::Object(name)) => Some((name.as_str(), true)),
        Some(Body::Patch) => Some((schemas::PATCH, true)),
        Some(Body::DeleteOptions) => Some((schemas::DELETE_OPTIONS, false)),
        None => None,
    };
    if let Some((name, required)) = body {
        params.push(json!({"name": "body", "in": "body", "required": required,
            "schema": {"$ref": Flavor::V2.reference(name)}}));
    }
    params.extend(o.params.iter().map(query));
    if !params.is_empty() {
        out.insert("parameters".into(), Value::Array(params));
    }
    let mut responses = Map::new();
    for (code, name) in &o.responses {
        let description = Operation::response_description(*code);
        responses.insert(
            code.to_string(),
            json!({"description": description, "schema": {"$ref": Flavor::V2.reference(name)}}),
        );
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
                "type": "string", "uniqueItems": true})
        })
        .collect();
    params.push(query(&PRETTY));
    out.insert("parameters".into(), Value::Array(params));
    Value::Object(out)
}

/// Builds the document.
pub fn document(defs: &Definitions) -> Value {
    let mut paths = Map::new();
    let mut roots = Vec::new();
    for (g, v) in schemas::group_versions() {
        let items = operations::paths(g, v, defs);
        roots.extend(super::v3::referenced(&items));
        for p in &items {
            paths.insert(p.path.clone(), path_item(p));
        }
    }
    let closure = defs.closure(roots.iter().map(String::as_str));
    let definitions: Map<String, Value> =
        closure.iter().map(|name| (name.clone(), schemas::render(name, &defs.schemas[name], Flavor::V2))).collect();
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": KUBERNETES_VERSION.git_version()},
        "paths": paths,
        "definitions": definitions,
        "securityDefinitions": {"BearerToken": {"description": "Bearer Token authentication", "type": "apiKey",
            "name": "authorization", "in": "header"}},
        "security": [{"BearerToken": []}],
    })
}
