//! kube's checks of the `apiVersion`, `kind` and `metadata` of an embedded resource (and of
//! the object's root): first that they decode (`apiVersion` and `kind` strings, `metadata` an
//! ObjectMeta, reported as Go's JSON decoder words it, the first problem only), then that they
//! are valid (`apiVersion` and `kind` present and well formed, metadata as kube's generic
//! ObjectMeta validation: names as path segments, namespace, generation, labels,
//! annotations, owner references, finalizers). A definition's schema defaults are checked
//! with them, so no default can make a custom resource's metadata invalid.

use serde_json::{Map, Value};

use ballast_apiserver::error::FieldError;
use ballast_apiserver::registry::validation;

use crate::schema::join;

/// The problems with the embedded resources of `value` at `path` under `schema`, the value
/// itself counted as one when `resource_root`: the first decoding problem alone when there is
/// one, else every validation problem.
pub(crate) fn errors(schema: &Value, value: &Value, path: &str, resource_root: bool) -> Vec<FieldError> {
    if let Some(err) = decode(schema, value, path, resource_root) {
        return vec![err];
    }
    let mut errs = Vec::new();
    validate(schema, value, path, resource_root, &mut errs);
    errs
}

fn embedded(schema: &Value) -> bool {
    schema["x-kubernetes-embedded-resource"] == true
}

/// The node of `key` in an object's schema: its property, else `additionalProperties`.
fn property<'a>(schema: &'a Value, key: &str) -> Option<&'a Value> {
    schema["properties"].get(key).or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()))
}

/// Go's JSON word for a value's kind.
fn json_word(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn cannot_unmarshal(v: &Value, field: &str, go_type: &str) -> String {
    format!("json: cannot unmarshal {} into Go struct field ObjectMeta.{field} of type {go_type}", json_word(v))
}

/// The first reason `metadata` does not decode into an ObjectMeta, in Go's words (null
/// fields decode to nothing, and unknown fields are dropped).
fn metadata_decode_error(metadata: &Value) -> Option<String> {
    let Some(meta) = metadata.as_object() else {
        return (!metadata.is_null())
            .then(|| format!("json: cannot unmarshal {} into Go value of type v1.ObjectMeta", json_word(metadata)));
    };
    for (field, v) in meta.iter().filter(|(_, v)| !v.is_null()) {
        let problem = match field.as_str() {
            "name" | "generateName" | "namespace" | "selfLink" | "uid" | "resourceVersion" => {
                (!v.is_string()).then(|| cannot_unmarshal(v, field, "string"))
            }
            "generation" | "deletionGracePeriodSeconds" => match v {
                Value::Number(n) if n.is_i64() => None,
                Value::Number(n) => Some(format!(
                    "json: cannot unmarshal number {n} into Go struct field ObjectMeta.{field} of type int64"
                )),
                _ => Some(cannot_unmarshal(v, field, "int64")),
            },
            "labels" | "annotations" => match v.as_object() {
                Some(m) => {
                    m.values().find(|x| !x.is_string() && !x.is_null()).map(|x| cannot_unmarshal(x, field, "string"))
                }
                None => Some(cannot_unmarshal(v, field, "map[string]string")),
            },
            "finalizers" => match v.as_array() {
                Some(a) => {
                    a.iter().find(|x| !x.is_string() && !x.is_null()).map(|x| cannot_unmarshal(x, field, "string"))
                }
                None => Some(cannot_unmarshal(v, field, "[]string")),
            },
            "ownerReferences" => (!v.is_array()).then(|| cannot_unmarshal(v, field, "[]v1.OwnerReference")),
            "managedFields" => (!v.is_array()).then(|| cannot_unmarshal(v, field, "[]v1.ManagedFieldsEntry")),
            _ => None,
        };
        if problem.is_some() {
            return problem;
        }
    }
    None
}

/// kube's `objectmeta.Coerce` without dropping: the first field of an embedded resource that
/// does not decode.
fn decode(schema: &Value, value: &Value, path: &str, resource_root: bool) -> Option<FieldError> {
    match value {
        Value::Object(map) => {
            if resource_root || embedded(schema) {
                for (k, v) in map {
                    match k.as_str() {
                        "apiVersion" | "kind" if !v.is_string() => {
                            return Some(FieldError::invalid(join(path, k), v.clone(), "must be a string"));
                        }
                        "metadata" => {
                            if let Some(e) = metadata_decode_error(v) {
                                return Some(FieldError::invalid(join(path, k), v.clone(), e));
                            }
                        }
                        _ => {}
                    }
                }
            }
            map.iter().find_map(|(k, v)| property(schema, k).and_then(|s| decode(s, v, &join(path, k), false)))
        }
        Value::Array(items) => {
            let item_schema = schema.get("items").filter(|i| i.is_object())?;
            items.iter().enumerate().find_map(|(i, v)| decode(item_schema, v, &format!("{path}[{i}]"), false))
        }
        _ => None,
    }
}

/// kube's `objectmeta.Validate`: the embedded resources' type and object metadata.
fn validate(schema: &Value, value: &Value, path: &str, resource_root: bool, errs: &mut Vec<FieldError>) {
    match value {
        Value::Object(map) => {
            if resource_root || embedded(schema) {
                type_and_object_meta(map, path, errs);
            }
            for (k, v) in map {
                if let Some(s) = property(schema, k) {
                    validate(s, v, &join(path, k), false, errs);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|i| i.is_object()) {
                for (i, v) in items.iter().enumerate() {
                    validate(item_schema, v, &format!("{path}[{i}]"), false, errs);
                }
            }
        }
        _ => {}
    }
}

/// One embedded resource's `apiVersion` and `kind` (required, well formed) and `metadata`.
fn type_and_object_meta(map: &Map<String, Value>, path: &str, errs: &mut Vec<FieldError>) {
    for field in ["apiVersion", "kind"] {
        if !map.contains_key(field) {
            errs.push(FieldError::required(join(path, field), ""));
        }
    }
    if let Some(v) = map.get("apiVersion").and_then(Value::as_str) {
        let at = join(path, "apiVersion");
        if v.is_empty() {
            errs.push(FieldError::required(at, ""));
        } else if v.matches('/').count() > 1 {
            errs.push(FieldError::invalid(at, v, format!("unexpected GroupVersion string: {v}")));
        }
    }
    if let Some(v) = map.get("kind").and_then(Value::as_str) {
        let at = join(path, "kind");
        if v.is_empty() {
            errs.push(FieldError::required(at, ""));
        } else {
            let problems = validation::dns1035_label(&v.to_lowercase());
            if !problems.is_empty() {
                let detail = format!("may have mixed case, but should otherwise match: {}", problems.join(","));
                errs.push(FieldError::invalid(at, v, detail));
            }
        }
    }
    if let Some(meta) = map.get("metadata").and_then(Value::as_object) {
        object_meta(meta, &join(path, "metadata"), errs);
    }
}

/// kube's generic ObjectMeta validation (`ValidateObjectMeta` with path-segment names; a
/// namespace checked only when set; a missing name stands for a valid one).
fn object_meta(meta: &Map<String, Value>, path: &str, errs: &mut Vec<FieldError>) {
    let text = |f: &str| meta.get(f).and_then(Value::as_str).unwrap_or("");
    let generate_name = text("generateName");
    if !generate_name.is_empty() {
        // A prefix may end in anything a name may: only the characters are checked.
        for p in validation::path_segment_name(generate_name).into_iter().filter(|p| p.starts_with("may not contain")) {
            errs.push(FieldError::invalid(join(path, "generateName"), generate_name, p));
        }
    }
    let name = text("name");
    if !name.is_empty() {
        for p in validation::path_segment_name(name) {
            errs.push(FieldError::invalid(join(path, "name"), name, p));
        }
    }
    let namespace = text("namespace");
    if !namespace.is_empty() {
        for p in validation::dns1123_label(namespace) {
            errs.push(FieldError::invalid(join(path, "namespace"), namespace, p));
        }
    }
    if let Some(g) = meta.get("generation").and_then(Value::as_i64).filter(|g| *g < 0) {
        errs.push(FieldError::invalid(join(path, "generation"), g, "must be greater than or equal to 0"));
    }
    if let Some(labels) = meta.get("labels").and_then(Value::as_object) {
        errs.extend(validation::labels(labels, &join(path, "labels")));
    }
    if let Some(annotations) = meta.get("annotations").and_then(Value::as_object) {
        errs.extend(validation::annotations(annotations, &join(path, "annotations")));
    }
    if let Some(refs) = meta.get("ownerReferences") {
        // Reported at `metadata.ownerReferences...`; moved under this resource's path.
        errs.extend(validation::owner_references(refs).into_iter().map(|mut e| {
            e.field = e.field.replacen("metadata", path, 1);
            e
        }));
    }
    if let Some(list) = meta.get("finalizers").and_then(Value::as_array) {
        let at = join(path, "finalizers");
        let names: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
        for f in &names {
            for p in validation::qualified_name(f) {
                errs.push(FieldError::invalid(at.clone(), *f, p));
            }
        }
        if names.contains(&"orphan") && names.contains(&"foregroundDeletion") {
            errs.push(FieldError::invalid(
                at,
                list.clone(),
                "finalizer orphan and foregroundDeletion cannot be both set",
            ));
        }
    }
}

/// Go's aggregate of several errors: the one message alone, or every distinct one in
/// brackets, comma separated.
pub(crate) fn aggregate(errs: &[FieldError]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for e in errs {
        let msg = e.to_string();
        if !seen.contains(&msg) {
            seen.push(msg);
        }
    }
    match seen.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}
