//! OpenAPI v2 across the chain (kube-aggregator's v2 spec aggregation): `/openapi/v2` is one
//! Swagger document, so the extension servers' documents (fetched by the availability checks)
//! are merged into the delegate's, as JSON and in the protobuf form kubectl asks for.
//!
//! The merge follows kube's rules: of a remote document only the paths under `/apis/` are
//! taken, a path already served here is left to its server here (the remote one is dropped),
//! only the definitions and parameters the taken paths use (directly or through each other)
//! come along, and one whose name is taken by a different schema here is renamed
//! `<name>_v2` (`_v3`, ...) with every reference to it. Remote documents are merged in
//! APIService priority order, so a higher priority server keeps a contested path.

use std::collections::{BTreeSet, HashMap};

use bytes::Bytes;
use http::{header, HeaderValue, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Map, Value};
use tower::ServiceExt;

use ballast_apiserver::body::{self, Request, Response};
use ballast_apiserver::delegation::Handler;
use ballast_apiserver::error::ApiError;
use ballast_apiserver::registry::served_kinds::Document;
use ballast_apiserver::routes::openapi::v2;
use ballast_apiserver::routes::openapi_v2_proto;

use crate::state::{MergedV2, Shared};

const DEFINITIONS: &str = "definitions";
const PARAMETERS: &str = "parameters";

/// Answers `/openapi/v2`: the delegate's document with the remote ones merged in, or the
/// delegate's answer as is when no extension server gave one.
pub async fn document(shared: &Shared, delegate: Handler, mut req: Request) -> Response {
    let routes = shared.routes();
    let mut remote: Vec<_> = routes.remote().filter_map(|a| Some((a, shared.openapi_v2(&a.name)?))).collect();
    if remote.is_empty() {
        let Ok(resp) = delegate.oneshot(req).await;
        return resp;
    }
    remote.sort_by(|(a, _), (b, _)| {
        (b.group_priority_minimum, b.version_priority).cmp(&(a.group_priority_minimum, a.version_priority))
    });
    let remote: Vec<Document> = remote.into_iter().map(|(_, d)| d).collect();
    // The delegate's JSON form, whatever the caller asked for, and never a 304 for the
    // caller's copy, which may be of the merged document.
    let headers = req.headers().clone();
    req.headers_mut().insert(header::ACCEPT, HeaderValue::from_static("application/json"));
    req.headers_mut().remove(header::IF_NONE_MATCH);
    let Ok(resp) = delegate.oneshot(req).await;
    if resp.status() != StatusCode::OK {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let Ok(base) = body.collect().await.map(|b| b.to_bytes());
    let base_hash = parts
        .headers
        .get(header::ETAG)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_default();
    let key: Vec<String> = std::iter::once(base_hash).chain(remote.iter().map(|d| d.hash.clone())).collect();
    let cached = shared.merged_v2().filter(|m| !key[0].is_empty() && m.key == key);
    let merged = match cached {
        Some(m) => m,
        None => {
            // Large documents: parsing, merging and encoding are kept off the async workers.
            let input = base.clone();
            let built = tokio::task::spawn_blocking(move || merge_all(&input, &remote)).await;
            let Ok(Some((json, protobuf))) = built else {
                // Not a JSON document after all: the delegate's answer as it is.
                return http::Response::from_parts(parts, body::full(base));
            };
            let merged = MergedV2 { key, json, protobuf };
            shared.record_merged_v2(merged.clone());
            merged
        }
    };
    v2(&merged.json, &merged.protobuf, &headers).unwrap_or_else(ApiError::into_response)
}

/// `base` with every document of `remote` merged in order, as JSON and protobuf; `None`
/// when `base` is not a JSON document.
fn merge_all(base: &[u8], remote: &[Document]) -> Option<(Document, Bytes)> {
    let mut doc: Value = serde_json::from_slice(base).ok()?;
    for r in remote {
        if let Ok(source) = serde_json::from_slice::<Value>(&r.json) {
            merge(&mut doc, &source);
        }
    }
    let protobuf = Bytes::from(openapi_v2_proto::encode(&doc));
    Some((Document::new(serde_json::to_vec(&doc).unwrap_or_default()), protobuf))
}

/// Merges the `/apis/` paths of Swagger document `source` into `dest` with the definitions and
/// parameters they use, renaming those whose names `dest` holds with other content.
pub fn merge(dest: &mut Value, source: &Value) {
    let Some(source_paths) = source["paths"].as_object() else { return };
    let Some(dest_map) = dest.as_object_mut() else { return };
    let taken: Map<String, Value> = source_paths
        .iter()
        .filter(|(p, _)| p.starts_with("/apis/") && dest_map.get("paths").is_none_or(|d| d.get(p.as_str()).is_none()))
        .map(|(p, v)| (p.clone(), v.clone()))
        .collect();
    if taken.is_empty() {
        return;
    }
    let used = used_names(&Value::Object(taken.clone()), source);
    // Which used names are added as they are, left out (the same schema is here) or renamed.
    let mut renames: HashMap<String, String> = HashMap::new();
    let mut added: Vec<(&str, String, Value)> = Vec::new();
    for (section, name) in &used {
        let Some(value) = source[*section].get(name) else { continue };
        match dest_map.get(*section).and_then(|s| s.get(name)) {
            Some(existing) if existing == value => {}
            Some(_) => {
                let fresh = (2..)
                    .map(|i| format!("{name}_v{i}"))
                    .find(|n| {
                        dest_map.get(*section).and_then(|s| s.get(n)).is_none() && source[*section].get(n).is_none()
                    })
                    .unwrap_or_default();
                renames.insert(reference(section, name), reference(section, &fresh));
                added.push((section, fresh, value.clone()));
            }
            None => added.push((section, name.clone(), value.clone())),
        }
    }
    for (section, name, mut value) in added {
        rename_refs(&mut value, &renames);
        let map = dest_map.entry(section).or_insert_with(|| Value::Object(Map::new()));
        if let Some(map) = map.as_object_mut() {
            map.insert(name, value);
        }
    }
    let paths = dest_map.entry("paths").or_insert_with(|| Value::Object(Map::new()));
    if let Some(paths) = paths.as_object_mut() {
        for (path, mut item) in taken {
            rename_refs(&mut item, &renames);
            paths.insert(path, item);
        }
    }
}

fn reference(section: &str, name: &str) -> String {
    format!("#/{section}/{name}")
}

/// The (section, name) of every definition and parameter of `doc` that `value` refers to,
/// directly or through the ones it refers to.
fn used_names(value: &Value, doc: &Value) -> BTreeSet<(&'static str, String)> {
    let mut used = BTreeSet::new();
    let mut pending = vec![value];
    while let Some(v) = pending.pop() {
        let mut refs = Vec::new();
        collect_refs(v, &mut refs);
        for r in refs {
            for section in [DEFINITIONS, PARAMETERS] {
                let Some(name) = r.strip_prefix(&format!("#/{section}/")).map(str::to_string) else { continue };
                if let Some(target) = doc[section].get(&name) {
                    if used.insert((section, name)) {
                        pending.push(target);
                    }
                }
            }
        }
    }
    used
}

fn collect_refs<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(r)) = map.get("$ref") {
                out.push(r);
            }
            map.values().for_each(|v| collect_refs(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

fn rename_refs(value: &mut Value, renames: &HashMap<String, String>) {
    if renames.is_empty() {
        return;
    }
    match value {
        Value::Object(map) => {
            if let Some(Value::String(r)) = map.get_mut("$ref") {
                if let Some(new) = renames.get(r.as_str()) {
                    r.clone_from(new);
                }
            }
            map.values_mut().for_each(|v| rename_refs(v, renames));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rename_refs(v, renames)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merges_apis_paths_with_what_they_use_renaming_conflicts() {
        let mut dest = json!({
            "swagger": "2.0",
            "paths": {"/apis/apps/v1/deployments": {"get": {}}},
            "definitions": {
                "meta.Status": {"type": "object", "description": "here"},
                "meta.Time": {"type": "string"},
            },
            "parameters": {"pretty": {"name": "pretty", "in": "query"}},
        });
        let source = json!({
            "swagger": "2.0",
            "paths": {
                "/apis/apps/v1/deployments": {"get": {"description": "not theirs"}},
                "/apis/x.io/v1/things": {
                    "parameters": [{"$ref": "#/parameters/pretty"}],
                    "get": {"responses": {"200": {"schema": {"$ref": "#/definitions/x.Thing"}}}},
                },
                "/healthz": {"get": {"responses": {"200": {"schema": {"$ref": "#/definitions/x.Health"}}}}},
            },
            "definitions": {
                "x.Thing": {"properties": {"status": {"$ref": "#/definitions/meta.Status"},
                                           "at": {"$ref": "#/definitions/meta.Time"}}},
                "meta.Status": {"type": "object", "description": "theirs"},
                "meta.Status_v2": {"type": "object"},
                "meta.Time": {"type": "string"},
                "x.Health": {"type": "object"},
                "x.Unused": {"type": "object"},
            },
            "parameters": {"pretty": {"name": "pretty", "in": "query"}},
        });
        merge(&mut dest, &source);
        let paths = dest["paths"].as_object().expect("paths");
        assert_eq!(paths.len(), 2, "only /apis/ paths not served here: {paths:?}");
        assert_eq!(dest["paths"]["/apis/apps/v1/deployments"], json!({"get": {}}));
        assert_eq!(
            dest["paths"]["/apis/x.io/v1/things"]["get"]["responses"]["200"]["schema"]["$ref"],
            "#/definitions/x.Thing"
        );
        let defs = dest["definitions"].as_object().expect("definitions");
        assert!(!defs.contains_key("x.Health") && !defs.contains_key("x.Unused"), "{defs:?}");
        assert_eq!(dest["definitions"]["meta.Status"]["description"], "here");
        assert_eq!(dest["definitions"]["meta.Status_v3"]["description"], "theirs", "_v2 is taken in the source");
        assert_eq!(dest["definitions"]["x.Thing"]["properties"]["status"]["$ref"], "#/definitions/meta.Status_v3");
        assert_eq!(dest["definitions"]["x.Thing"]["properties"]["at"]["$ref"], "#/definitions/meta.Time");
        assert!(!defs.contains_key("meta.Time_v2"), "an identical definition is shared");
        assert_eq!(dest["parameters"].as_object().map(Map::len), Some(1));

        // Merging the same document again changes nothing.
        let once = dest.clone();
        merge(&mut dest, &source);
        assert_eq!(dest, once);
    }
}
