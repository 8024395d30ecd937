//! A CustomResourceDefinition version's OpenAPI v3 schema applied to custom resources, as kube
//! applies a structural schema: pruning of unknown fields, defaulting, and validation of the
//! OpenAPI subset kube supports, with kube's messages.
//!
//! The schema stays the JSON the definition holds (`x-kubernetes-*` extensions included), so
//! what serves one purpose here serves the others (merge semantics of apply read the same
//! value through [`crate::registry::Registry::openapi_schema`]).
//!
//! Depth: schemas and objects are walked recursively; both are bounded (objects by the request
//! body limit, schemas by [`MAX_SCHEMA_DEPTH`], checked when a definition is admitted).

use std::collections::HashMap;

use serde_json::{Map, Value};

use ballast_apiserver::error::{FieldError, FieldErrorKind};

/// The deepest schema a definition may have: deeper ones are refused at admission, so the
/// recursive walks here never exhaust the stack. Kubernetes objects nest a dozen levels (a pod
/// template inside a custom resource about twenty); the JSON parser's own limit (128 levels,
/// two per schema level) would stop a body at about 60.
pub const MAX_SCHEMA_DEPTH: usize = 48;

/// Joins a field path and a key (`spec` + `replicas` = `spec.replicas`).
pub(crate) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The `x-kubernetes-list-map-keys` of a list schema.
pub(crate) fn list_map_keys(schema: &Value) -> Vec<&str> {
    schema["x-kubernetes-list-map-keys"].as_array().into_iter().flatten().filter_map(Value::as_str).collect()
}

/// The regular expressions of a schema's `pattern`s, compiled once per served version rather
/// than on every write (compiling one costs far more than matching it).
#[derive(Debug, Default)]
pub struct Patterns(HashMap<String, Option<regex::Regex>>);

impl Patterns {
    /// Compiles every `pattern` in `schema` (a pattern that does not compile is kept as such
    /// and matches nothing, as before: admission refuses it).
    pub fn of(schema: &Value) -> Patterns {
        fn walk(v: &Value, out: &mut HashMap<String, Option<regex::Regex>>) {
            match v {
                Value::Object(m) => {
                    if let Some(Value::String(p)) = m.get("pattern") {
                        out.entry(p.clone()).or_insert_with(|| regex::Regex::new(p).ok());
                    }
                    m.values().for_each(|c| walk(c, out));
                }
                Value::Array(a) => a.iter().for_each(|c| walk(c, out)),
                _ => {}
            }
        }
        let mut out = HashMap::new();
        walk(schema, &mut out);
        Patterns(out)
    }

    /// Whether `s` matches `pattern`; `None` when the pattern does not compile. A pattern not
    /// seen when the schema was compiled is compiled now.
    fn is_match(&self, pattern: &str, s: &str) -> Option<bool> {
        match self.0.get(pattern) {
            Some(re) => re.as_ref().map(|re| re.is_match(s)),
            None => regex::Regex::new(pattern).ok().map(|re| re.is_match(s)),
        }
    }
}

fn preserves_unknown(schema: &Value) -> bool {
    schema["x-kubernetes-preserve-unknown-fields"] == true
}

/// Removes from `obj` the fields `schema` does not know, below the root's `apiVersion`, `kind`
/// and `metadata`; returns their paths (`spec.bogus`, `spec.items[0].x`).
pub fn prune_root(schema: &Value, obj: &mut Map<String, Value>) -> Vec<String> {
    let mut pruned = Vec::new();
    let props = schema["properties"].as_object();
    let preserve = preserves_unknown(schema);
    let keys: Vec<String> = obj.keys().cloned().collect();
    for key in keys {
        if matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        match props.and_then(|p| p.get(&key)) {
            Some(sub) => {
                if let Some(v) = obj.get_mut(&key) {
                    prune(sub, v, &key, &mut pruned);
                }
            }
            None if preserve => {}
            None => {
                obj.remove(&key);
                pruned.push(key);
            }
        }
    }
    pruned
}

/// Whether a schema node's `default` (at `path`, the default's own field path) holds fields
/// the schema would prune, as kube reports it.
pub(crate) fn default_unknown_fields(schema: &Value, default: &Value, path: &str) -> Option<FieldError> {
    let mut copy = default.clone();
    let mut pruned = Vec::new();
    prune(schema, &mut copy, path, &mut pruned);
    (!pruned.is_empty()).then(|| FieldError::invalid(path, default.clone(), "must not have unknown fields"))
}

/// Every finding of validating a schema node's `default` (at `path`) against the node.
pub(crate) fn default_value_errors(schema: &Value, default: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    validate(schema, &Patterns::of(schema), default, path, &mut errs);
    errs
}

fn prune(schema: &Value, value: &mut Value, path: &str, pruned: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            let embedded = schema["x-kubernetes-embedded-resource"] == true;
            let props = schema["properties"].as_object();
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            let preserve = preserves_unknown(schema) || schema["additionalProperties"] == true;
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                if embedded && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let sub = props.and_then(|p| p.get(&key)).or(additional);
                match sub {
                    Some(sub) => {
                        if let Some(v) = map.get_mut(&key) {
                            prune(sub, v, &join(path, &key), pruned);
                        }
                    }
                    None if preserve => {}
                    None => {
                        map.remove(&key);
                        pruned.push(join(path, &key));
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|i| i.is_object()) {
                for (i, item) in items.iter_mut().enumerate() {
                    prune(item_schema, item, &format!("{path}[{i}]"), pruned);
                }
            }
        }
        _ => {}
    }
}

/// Sets the schema's defaults on absent fields of `value` (kube defaults on write and on read).
/// Returns whether it set any (a read that sets none serves the stored bytes as they are).
pub fn apply_defaults(schema: &Value, value: &mut Value) -> bool {
    let mut changed = false;
    match value {
        Value::Object(map) => {
            if let Some(props) = schema["properties"].as_object() {
                for (key, sub) in props {
                    match map.get_mut(key) {
                        Some(v) => changed |= apply_defaults(sub, v),
                        None => {
                            if let Some(d) = sub.get("default") {
                                let mut d = d.clone();
                                apply_defaults(sub, &mut d);
                                map.insert(key.clone(), d);
                                changed = true;
                            }
                        }
                    }
                }
            }
            if let Some(additional) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for v in map.values_mut() {
                    changed |= apply_defaults(additional, v);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|i| i.is_object()) {
                for item in items {
                    changed |= apply_defaults(item_schema, item);
                }
            }
        }
        _ => {}
    }
    changed
}

/// Validates a custom resource against its version's schema; every finding, in kube's form.
/// `metadata` is the generic server's business and is skipped at the root.
pub fn validate_root(schema: &Value, patterns: &Patterns, obj: &Map<String, Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    // An object's own `required` findings come before those of its fields, as go-openapi's
    // object validator reports them.
    required(schema, obj, "", &mut errs);
    if let Some(props) = schema["properties"].as_object() {
        for (key, sub) in props {
            if key == "metadata" {
                continue;
            }
            if let Some(v) = obj.get(key) {
                validate(sub, patterns, v, key, &mut errs);
            }
        }
    }
    errs
}

fn required(schema: &Value, map: &Map<String, Value>, path: &str, errs: &mut Vec<FieldError>) {
    for r in schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
        if !map.contains_key(r) {
            errs.push(FieldError::required(join(path, r), ""));
        }
    }
}

/// The JSON type names go-openapi reports.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_matches(want: &str, v: &Value) -> bool {
    match want {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        "number" => v.is_number(),
        _ => true,
    }
}

/// kube's rendering of a number in messages: integers without a fraction.
fn number_text(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

fn invalid(path: &str, value: &Value, detail: String) -> FieldError {
    FieldError::invalid(path, value.clone(), detail)
}

/// go-openapi's type error: kube shows the value's type name as the value.
fn type_invalid(path: &str, want: &str, got: &str) -> FieldError {
    FieldError {
        field: path.to_string(),
        kind: FieldErrorKind::TypeInvalid {
            value: got.into(),
            detail: format!("{path} in body must be of type {want}: \"{got}\""),
        },
    }
}

fn validate(schema: &Value, patterns: &Patterns, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    if v.is_null() {
        if schema["nullable"] != true && schema.get("type").is_some() {
            errs.push(type_invalid(path, schema["type"].as_str().unwrap_or("object"), "null"));
        }
        return;
    }
    let wanted = if schema["x-kubernetes-int-or-string"] == true {
        (!(v.is_string() || type_matches("integer", v))).then_some("integer,string")
    } else {
        schema["type"].as_str().filter(|want| !type_matches(want, v))
    };
    if let Some(want) = wanted {
        errs.push(type_invalid(path, want, type_name(v)));
        return;
    }
    if let Some(allowed) = schema["enum"].as_array() {
        if !allowed.contains(v) {
            let supported: Vec<String> = allowed
                .iter()
                .map(|a| match a {
                    Value::String(s) => format!("{s:?}"),
                    other => format!("{:?}", other.to_string()),
                })
                .collect();
            errs.push(FieldError {
                field: path.to_string(),
                kind: FieldErrorKind::NotSupported { value: v.clone(), supported },
            });
        }
    }
    match v {
        Value::Number(n) => number(schema, v, n.as_f64().unwrap_or(0.0), path, errs),
        Value::String(s) => string(schema, patterns, v, s, path, errs),
        Value::Array(items) => array(schema, patterns, v, items, path, errs),
        Value::Object(map) => object(schema, patterns, map, path, errs),
        Value::Bool(_) | Value::Null => {}
    }
    combinators(schema, patterns, v, path, errs);
}

fn number(schema: &Value, v: &Value, n: f64, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(max) = schema["maximum"].as_f64() {
        if schema["exclusiveMaximum"] == true && n >= max {
            errs.push(invalid(path, v, format!("{path} in body should be less than {}", number_text(max))));
        } else if n > max {
            errs.push(invalid(path, v, format!("{path} in body should be less than or equal to {}", number_text(max))));
        }
    }
    if let Some(min) = schema["minimum"].as_f64() {
        if schema["exclusiveMinimum"] == true && n <= min {
            errs.push(invalid(path, v, format!("{path} in body should be greater than {}", number_text(min))));
        } else if n < min {
            errs.push(invalid(
                path,
                v,
                format!("{path} in body should be greater than or equal to {}", number_text(min)),
            ));
        }
    }
    if let Some(m) = schema["multipleOf"].as_f64().filter(|m| *m > 0.0) {
        let q = n / m;
        if (q - q.round()).abs() > 1e-9 {
            errs.push(invalid(path, v, format!("{path} in body should be a multiple of {}", number_text(m))));
        }
    }
}

fn string(schema: &Value, patterns: &Patterns, v: &Value, s: &str, path: &str, errs: &mut Vec<FieldError>) {
    let chars = s.chars().count() as i64;
    if let Some(max) = schema["maxLength"].as_i64() {
        if chars > max {
            errs.push(FieldError { field: path.to_string(), kind: FieldErrorKind::TooLongString { max } });
        }
    }
    if let Some(min) = schema["minLength"].as_i64() {
        if chars < min {
            errs.push(invalid(path, v, format!("{path} in body should be at least {min} chars long")));
        }
    }
    if let Some(pattern) = schema["pattern"].as_str() {
        if patterns.is_match(pattern, s) == Some(false) {
            errs.push(invalid(path, v, format!("{path} in body should match '{pattern}'")));
        }
    }
    if let Some(format) = schema["format"].as_str() {
        if !crate::formats::conforms(format, s) {
            errs.push(invalid(
                path,
                v,
                format!("{path} in body must be of type {format}: {}", crate::cel_ip::go_quote(s)),
            ));
        }
    }
}

fn array(schema: &Value, patterns: &Patterns, v: &Value, items: &[Value], path: &str, errs: &mut Vec<FieldError>) {
    let n = items.len() as i64;
    if let Some(max) = schema["maxItems"].as_i64() {
        if n > max {
            errs.push(FieldError { field: path.to_string(), kind: FieldErrorKind::TooMany { actual: n, max } });
        }
    }
    if let Some(min) = schema["minItems"].as_i64() {
        if n < min {
            errs.push(invalid(path, v, format!("{path} in body should have at least {min} items")));
        }
    }
    let list_type = schema["x-kubernetes-list-type"].as_str();
    if schema["uniqueItems"] == true || list_type == Some("set") {
        // The JSON text of each item seen, in a set: linear in the list, where comparing each
        // item with every earlier one is quadratic. Objects' keys are sorted, so equal values
        // have equal texts.
        let mut seen = std::collections::HashSet::new();
        for (i, item) in items.iter().enumerate() {
            if !seen.insert(item.to_string()) {
                if list_type == Some("set") {
                    errs.push(FieldError::duplicate(format!("{path}[{i}]"), item.clone()));
                } else {
                    errs.push(invalid(path, v, format!("{path} in body shouldn't contain duplicates")));
                    break;
                }
            }
        }
    }
    if list_type == Some("map") {
        let keys = list_map_keys(schema);
        // Each item's key once, and a set of the keys seen: a long list costs linear time, not
        // a comparison (and a copy of the keys) for every pair of items. Key values are
        // scalars, whose JSON text is equal exactly when they are.
        let mut seen = std::collections::HashSet::new();
        for (i, item) in items.iter().enumerate() {
            let key: Vec<Value> = keys.iter().map(|k| item[*k].clone()).collect();
            if !seen.insert(Value::Array(key.clone()).to_string()) {
                let shown: Map<String, Value> =
                    keys.iter().zip(key).filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.to_string(), v)).collect();
                errs.push(FieldError::duplicate(format!("{path}[{i}]"), Value::Object(shown)));
            }
        }
    }
    if let Some(item_schema) = schema.get("items").filter(|i| i.is_object()) {
        for (i, item) in items.iter().enumerate() {
            validate(item_schema, patterns, item, &format!("{path}[{i}]"), errs);
        }
    }
}

fn object(schema: &Value, patterns: &Patterns, map: &Map<String, Value>, path: &str, errs: &mut Vec<FieldError>) {
    let n = map.len() as i64;
    if let Some(max) = schema["maxProperties"].as_i64() {
        if n > max {
            errs.push(FieldError { field: path.to_string(), kind: FieldErrorKind::TooMany { actual: n, max } });
        }
    }
    if let Some(min) = schema["minProperties"].as_i64() {
        if n < min {
            errs.push(invalid(
                path,
                &Value::Object(map.clone()),
                format!("{path} in body should have at least {min} properties"),
            ));
        }
    }
    required(schema, map, path, errs);
    let props = schema["properties"].as_object();
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    let embedded = schema["x-kubernetes-embedded-resource"] == true;
    for (key, value) in map {
        if embedded && key == "metadata" {
            continue;
        }
        if let Some(sub) = props.and_then(|p| p.get(key)).or(additional) {
            validate(sub, patterns, value, &join(path, key), errs);
        }
    }
    if embedded {
        for field in ["apiVersion", "kind"] {
            if map.get(field).and_then(Value::as_str).is_none_or(str::is_empty) {
                errs.push(FieldError::required(join(path, field), "must not be empty"));
            }
        }
    }
}

fn passes(schema: &Value, patterns: &Patterns, v: &Value, path: &str) -> bool {
    let mut errs = Vec::new();
    validate(schema, patterns, v, path, &mut errs);
    errs.is_empty()
}

fn combinators(schema: &Value, patterns: &Patterns, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    for sub in schema["allOf"].as_array().into_iter().flatten() {
        validate(sub, patterns, v, path, errs);
    }
    if let Some(any) = schema["anyOf"].as_array() {
        if !any.iter().any(|s| passes(s, patterns, v, path)) {
            errs.push(invalid(path, v, format!("{path} in body must match at least one schema in anyOf")));
        }
    }
    if let Some(one) = schema["oneOf"].as_array() {
        let matching = one.iter().filter(|s| passes(s, patterns, v, path)).count();
        if matching != 1 {
            errs.push(invalid(path, v, format!("{path} in body must match exactly one schema in oneOf")));
        }
    }
    if let Some(not) = schema.get("not").filter(|n| n.is_object()) {
        if passes(not, patterns, v, path) {
            errs.push(invalid(path, v, format!("{path} in body must not be valid against the schema in not")));
        }
    }
}

/// Returns the depth of a schema (1 for a leaf).
pub fn depth(schema: &Value) -> usize {
    fn walk(v: &Value, budget: usize) -> usize {
        if budget == 0 {
            return usize::MAX / 2;
        }
        let children = match v {
            Value::Object(m) => m.values().map(|c| walk(c, budget - 1)).max().unwrap_or(0),
            Value::Array(a) => a.iter().map(|c| walk(c, budget - 1)).max().unwrap_or(0),
            _ => 0,
        };
        children.saturating_add(1)
    }
    // JSON nesting counts two levels per schema level (`properties` then the field).
    walk(schema, MAX_SCHEMA_DEPTH * 2 + 2) / 2
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "required": ["size"], "properties": {
            "replicas": {"type": "integer", "maximum": 10, "default": 1},
            "size": {"type": "string", "enum": ["S", "M"]},
            "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port"],
                      "items": {"type": "object", "properties": {"port": {"type": "integer"}}}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        }}}})
    }

    #[test]
    fn prunes_what_the_schema_does_not_know() {
        let mut obj = json!({"apiVersion": "x/v1", "kind": "W", "metadata": {}, "spec": {"bogus": 1,
            "ports": [{"port": 1, "x": 2}], "free": {"anything": {"deep": 1}}}, "other": 1});
        let pruned = prune_root(&schema(), obj.as_object_mut().expect("object"));
        assert_eq!(pruned, vec!["other", "spec.bogus", "spec.ports[0].x"]);
        assert_eq!(obj["spec"]["free"]["anything"]["deep"], 1);
    }

    #[test]
    fn validation_reports_kube_messages() {
        let obj = json!({"spec": {"replicas": 20, "size": "XL", "ports": [{"port": 1}, {"port": 1}]}});
        let errs: Vec<String> = validate_root(&schema(), &Patterns::of(&schema()), obj.as_object().expect("object"))
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs,
            vec![
                "spec.ports[1]: Duplicate value: {\"port\":1}",
                "spec.replicas: Invalid value: 20: spec.replicas in body should be less than or equal to 10",
                "spec.size: Unsupported value: \"XL\": supported values: \"S\", \"M\"",
            ]
        );
        let missing = json!({"spec": {"replicas": "x"}});
        let errs: Vec<String> =
            validate_root(&schema(), &Patterns::of(&schema()), missing.as_object().expect("object"))
                .iter()
                .map(ToString::to_string)
                .collect();
        assert_eq!(
            errs,
            vec![
                "spec.size: Required value",
                "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\"",
            ]
        );
    }

    #[test]
    fn defaults_fill_absent_fields() {
        let mut obj = json!({"spec": {"size": "S"}});
        apply_defaults(&schema(), &mut obj);
        assert_eq!(obj["spec"]["replicas"], 1);
    }
}
