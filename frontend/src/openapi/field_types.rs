//! JSON value types checked against the kinds' OpenAPI schemas: what kube-apiserver's decoder
//! refuses when a body puts an object where its Go type has a string (`metadata.annotations`
//! values), a string where it has a bool (`immutable`), and so on. kube answers 400 with the
//! Go decoder's text, `json: cannot unmarshal object into Go struct field
//! ObjectMeta.metadata.annotations of type string`, which [`first_mismatch`] reproduces: the
//! innermost struct, the path of struct fields from the top (map keys and list indexes are not
//! part of it), and the Go type.
//!
//! `null` is never a mismatch (Go leaves the zero value), and types Go decodes from several
//! JSON forms (`Quantity` from a string or a number, `IntOrString`, raw and free-form fields)
//! are not checked, so a schema gap can only make the check laxer than upstream.

use serde_json::{Map, Value};

use super::schemas::{definitions, field_node, sorted_fields, Definitions, Fields};

/// How deep the walk goes (as `unknown_fields`): real bodies nest far less, and it bounds the
/// work a hostile body can cause.
const MAX_DEPTH: usize = 64;

/// Definitions whose Go types decode more than one JSON form (a CRD schema's `enum`,
/// `default` and `example` are any JSON; `items`, `additionalProperties` and a dependency take
/// a schema or an array, a bool or a list of strings).
const LENIENT: [&str; 7] = [
    "io.k8s.apimachinery.pkg.api.resource.Quantity",
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
    "io.k8s.apimachinery.pkg.runtime.RawExtension",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrArray",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrBool",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrStringArray",
];

/// Returns the Go decoder's complaint about the first value of `obj` (an object of
/// `group/version/kind`) whose JSON type is not its schema's, or None. Kinds without a schema
/// are not checked.
pub fn first_mismatch(group: &str, version: &str, kind: &str, obj: &Map<String, Value>) -> Option<String> {
    let defs = definitions();
    let name = defs.kind_schema(group, version, kind)?;
    let schema = defs.schemas.get(name)?;
    // Most bodies fit: the compiled schemas say so, and only a body that does not is walked
    // again to spell out the complaint.
    if !index().mismatch_in(name, obj) {
        return None;
    }
    let at = Place { structure: go_name(name), field: None };
    check_object(defs, schema, obj, &at, 0)
}

/// [`first_mismatch`] by walking the schemas as they are.
#[cfg(test)]
fn walk_mismatch(group: &str, version: &str, kind: &str, obj: &Map<String, Value>) -> Option<String> {
    let defs = definitions();
    let name = defs.kind_schema(group, version, kind)?;
    let at = Place { structure: go_name(name), field: None };
    check_object(defs, defs.schemas.get(name)?, obj, &at, 0)
}

/// Where a value sits, in the terms of Go's error: the innermost struct and the field path.
/// The path is the chain of fields up to here, spelled out only for a mismatch (the walk
/// visits every field of every body; few are wrong).
#[derive(Clone, Copy)]
struct Place<'a> {
    structure: &'a str,
    /// The place of the parent and this field's name; `None` at the top.
    field: Option<(&'a Place<'a>, &'a str)>,
}

impl<'a> Place<'a> {
    fn field<'b>(&'b self, name: &'b str) -> Place<'b> {
        Place { structure: self.structure, field: Some((self, name)) }
    }

    /// The dotted field path from the top.
    fn path(&self) -> String {
        let mut names = Vec::new();
        let mut at = self;
        while let Some((parent, name)) = at.field {
            names.push(name);
            at = parent;
        }
        names.reverse();
        names.join(".")
    }
}

/// `io.k8s.api.core.v1.ConfigMap` → `ConfigMap`.
fn go_name(definition: &str) -> &str {
    definition.rsplit('.').next().unwrap_or(definition)
}

/// `io.k8s.api.core.v1.Container` → `v1.Container` (Go's package-qualified type name).
fn go_qualified(definition: &str) -> String {
    let mut parts = definition.rsplit('.');
    match (parts.next(), parts.next()) {
        (Some(t), Some(p)) => format!("{p}.{t}"),
        _ => definition.to_string(),
    }
}

fn ref_name(schema: &Value) -> Option<&str> {
    schema.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/definitions/"))
}

/// Go's name for the type a schema decodes into.
fn go_type(defs: &Definitions, schema: &Value) -> String {
    if let Some(name) = ref_name(schema) {
        return go_qualified(name);
    }
    let schema = defs.resolve(schema);
    match schema.get("type").and_then(Value::as_str).unwrap_or("") {
        "string" => "string".into(),
        "boolean" => "bool".into(),
        "number" => "float64".into(),
        "integer" => match schema.get("format").and_then(Value::as_str) {
            Some("int32") => "int32".into(),
            _ => "int64".into(),
        },
        "array" => format!("[]{}", schema.get("items").map_or_else(|| "interface {}".into(), |i| go_type(defs, i))),
        "object" => match schema.get("additionalProperties").filter(|a| a.is_object()) {
            Some(values) => format!("map[string]{}", go_type(defs, values)),
            None => "map[string]interface {}".into(),
        },
        _ => "interface {}".into(),
    }
}

/// Go's word for a JSON value in its error (a fraction into an integer says `number 1.5`).
fn json_word(value: &Value) -> &'static str {
    match value {
        Value::String(_) => "string",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Null => "null",
    }
}

fn mismatch(defs: &Definitions, schema: &Value, at: &Place<'_>, word: &str) -> Option<String> {
    Some(format!(
        "json: cannot unmarshal {word} into Go struct field {}.{} of type {}",
        at.structure,
        at.path(),
        go_type(defs, schema)
    ))
}

fn check_object(
    defs: &Definitions,
    schema: &Value,
    obj: &Map<String, Value>,
    at: &Place<'_>,
    depth: usize,
) -> Option<String> {
    let properties = schema.get("properties").and_then(Value::as_object)?;
    obj.iter().find_map(|(key, child)| {
        let field = properties.get(key)?;
        check(defs, field, child, &at.field(key), depth + 1)
    })
}

fn check(defs: &Definitions, schema: &Value, value: &Value, at: &Place<'_>, depth: usize) -> Option<String> {
    if depth > MAX_DEPTH || value.is_null() {
        return None;
    }
    // allOf wrappers around a reference, as k8s-openapi writes fields with descriptions.
    let schema = match schema.get("allOf").and_then(Value::as_array).map(Vec::as_slice) {
        Some([inner]) => inner,
        _ => schema,
    };
    if ref_name(schema).is_some_and(|n| LENIENT.contains(&n)) {
        return None;
    }
    let structure = ref_name(schema).map(go_name);
    let resolved = defs.resolve(schema);
    if resolved.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
        || resolved.get("format").and_then(Value::as_str) == Some("int-or-string")
    {
        return None;
    }
    let ty = resolved.get("type").and_then(Value::as_str).unwrap_or("");
    let fits = match (ty, value) {
        ("string", Value::String(_)) | ("boolean", Value::Bool(_)) | ("number", Value::Number(_)) => true,
        ("integer", Value::Number(n)) => {
            if n.is_i64() || n.is_u64() {
                true
            } else {
                return mismatch(defs, schema, at, &format!("number {n}"));
            }
        }
        ("array", Value::Array(items)) => {
            let item = resolved.get("items")?;
            return items.iter().find_map(|v| check(defs, item, v, at, depth + 1));
        }
        ("object", Value::Object(fields)) | ("", Value::Object(fields)) => {
            if let Some(values) = resolved.get("additionalProperties").filter(|a| a.is_object()) {
                return fields.values().find_map(|v| check(defs, values, v, at, depth + 1));
            }
            let inner = Place { structure: structure.unwrap_or(at.structure), field: at.field };
            return check_object(defs, resolved, fields, &inner, depth);
        }
        ("", _) => true,
        _ => false,
    };
    if fits {
        None
    } else {
        mismatch(defs, schema, at, json_word(value))
    }
}

/// The schemas as [`check`] reads them, compiled once: each schema a node with its JSON type
/// and its fields in a sorted list, references, `allOf` wrappers and lenient types already
/// followed, so that checking a body costs a few comparisons per value instead of lookups by
/// definition name.
struct Index {
    nodes: Vec<Node>,
    /// Definition name to its fields, as [`first_mismatch`] reads them (sorted).
    roots: std::collections::HashMap<&'static str, Fields>,
}

/// What [`check`] accepts for one schema.
#[derive(Default)]
enum Node {
    /// Anything (lenient types, preserved unknown fields, int-or-string).
    #[default]
    Any,
    /// A JSON string, bool or number.
    String,
    Bool,
    Number,
    /// A number without a fraction.
    Integer,
    /// An array, its items checked against the node if any.
    Array(Option<usize>),
    /// An object (`typed`: of type `object`, so other values do not fit; untyped, they do):
    /// a map's values, or a struct's fields.
    Object {
        typed: bool,
        values: Option<usize>,
        fields: Option<Fields>,
    },
    /// A type no JSON value but null fits.
    Nothing,
}

/// The id of the shared [`Node::Any`].
const ANY: usize = 0;

fn index() -> &'static Index {
    static INDEX: std::sync::LazyLock<Index> = std::sync::LazyLock::new(|| Index::build(definitions()));
    &INDEX
}

impl Index {
    fn build(defs: &'static Definitions) -> Index {
        let mut index = Index { nodes: vec![Node::Any], roots: Default::default() };
        let mut seen = std::collections::HashMap::new();
        for (name, schema) in &defs.schemas {
            let Some(fields) = index.fields(defs, schema, &mut seen) else { continue };
            index.roots.insert(name.as_str(), fields);
        }
        index
    }

    fn fields(
        &mut self,
        defs: &'static Definitions,
        resolved: &'static Value,
        seen: &mut std::collections::HashMap<usize, usize>,
    ) -> Option<Fields> {
        let properties = resolved.get("properties").and_then(Value::as_object)?;
        Some(sorted_fields(properties.iter().map(|(k, v)| (k.as_str(), self.compile(defs, v, seen))).collect()))
    }

    /// The node of `schema` as [`check`] reads it; one node per resolved schema (`seen`, by
    /// address), so recursive definitions compile to cycles.
    fn compile(
        &mut self,
        defs: &'static Definitions,
        schema: &'static Value,
        seen: &mut std::collections::HashMap<usize, usize>,
    ) -> usize {
        let schema = match schema.get("allOf").and_then(Value::as_array).map(Vec::as_slice) {
            Some([inner]) => inner,
            _ => schema,
        };
        if ref_name(schema).is_some_and(|n| LENIENT.contains(&n)) {
            return ANY;
        }
        let resolved = defs.resolve(schema);
        let address = std::ptr::from_ref(resolved) as usize;
        if let Some(id) = seen.get(&address) {
            return *id;
        }
        let id = self.nodes.len();
        self.nodes.push(Node::Any);
        seen.insert(address, id);
        let node = if resolved.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
            || resolved.get("format").and_then(Value::as_str) == Some("int-or-string")
        {
            Node::Any
        } else {
            match resolved.get("type").and_then(Value::as_str).unwrap_or("") {
                "string" => Node::String,
                "boolean" => Node::Bool,
                "number" => Node::Number,
                "integer" => Node::Integer,
                "array" => Node::Array(resolved.get("items").map(|i| self.compile(defs, i, seen))),
                ty @ ("object" | "") => Node::Object {
                    typed: ty == "object",
                    values: resolved
                        .get("additionalProperties")
                        .filter(|a| a.is_object())
                        .map(|a| self.compile(defs, a, seen)),
                    fields: self.fields(defs, resolved, seen),
                },
                _ => Node::Nothing,
            }
        };
        self.nodes[id] = node;
        id
    }

    /// Whether [`check_object`] finds a mismatch in the object of definition `name`.
    fn mismatch_in(&self, name: &str, obj: &Map<String, Value>) -> bool {
        self.roots.get(name).is_some_and(|fields| self.mismatch_in_fields(fields, obj, 0))
    }

    fn mismatch_in_fields(&self, fields: &Fields, obj: &Map<String, Value>, depth: usize) -> bool {
        obj.iter().any(|(key, child)| field_node(fields, key).is_some_and(|id| self.mismatch(id, child, depth + 1)))
    }

    /// [`check`] without spelling out the complaint: whether it has one.
    fn mismatch(&self, id: usize, value: &Value, depth: usize) -> bool {
        if depth > MAX_DEPTH || value.is_null() {
            return false;
        }
        match (&self.nodes[id], value) {
            (Node::Any, _)
            | (Node::String, Value::String(_))
            | (Node::Bool, Value::Bool(_))
            | (Node::Number, Value::Number(_)) => false,
            (Node::Integer, Value::Number(n)) => !(n.is_i64() || n.is_u64()),
            (Node::Array(items), Value::Array(list)) => {
                items.is_some_and(|i| list.iter().any(|v| self.mismatch(i, v, depth + 1)))
            }
            (Node::Object { values: Some(values), .. }, Value::Object(map)) => {
                map.values().any(|v| self.mismatch(*values, v, depth + 1))
            }
            (Node::Object { fields, .. }, Value::Object(map)) => {
                fields.as_ref().is_some_and(|f| self.mismatch_in_fields(f, map, depth))
            }
            (Node::Object { typed: false, .. }, _) => false,
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(v: &Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn wrong_types_get_the_go_decoders_text() {
        let cases = [
            (
                json!({"metadata": {"name": "x", "annotations": {"a": {"b": 1}}}}),
                "json: cannot unmarshal object into Go struct field ObjectMeta.metadata.annotations of type string",
            ),
            (
                json!({"metadata": {"name": "x", "labels": {"a": ["b"]}}}),
                "json: cannot unmarshal array into Go struct field ObjectMeta.metadata.labels of type string",
            ),
            (json!({"immutable": "yes"}), "json: cannot unmarshal string into Go struct field ConfigMap.immutable of type bool"),
            (
                json!({"metadata": {"finalizers": [1]}}),
                "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.finalizers of type string",
            ),
            (
                json!({"metadata": {"ownerReferences": [{"uid": 7}]}}),
                "json: cannot unmarshal number into Go struct field OwnerReference.metadata.ownerReferences.uid of type string",
            ),
            (
                json!({"data": {"k": 1}}),
                "json: cannot unmarshal number into Go struct field ConfigMap.data of type string",
            ),
        ];
        for (body, want) in cases {
            assert_eq!(first_mismatch("", "v1", "ConfigMap", &object(&body)).as_deref(), Some(want), "{body}");
        }
        let pod = json!({"spec": {"containers": [{"name": "c", "image": 5}]}});
        assert_eq!(
            first_mismatch("", "v1", "Pod", &object(&pod)).as_deref(),
            Some("json: cannot unmarshal number into Go struct field Container.spec.containers.image of type string")
        );
        let replicas = json!({"spec": {"replicas": 1.5}});
        assert_eq!(
            first_mismatch("apps", "v1", "Deployment", &object(&replicas)).as_deref(),
            Some("json: cannot unmarshal number 1.5 into Go struct field DeploymentSpec.spec.replicas of type int32")
        );
    }

    #[test]
    fn right_types_nulls_and_lenient_types_pass() {
        let ok = json!({
            "metadata": {"name": "x", "labels": {"a": "b"}, "annotations": {"a": null}, "creationTimestamp": null},
            "immutable": true, "data": {"k": "v"},
        });
        assert_eq!(first_mismatch("", "v1", "ConfigMap", &object(&ok)), None);
        let pod = json!({"spec": {"containers": [{"name": "c", "image": "i",
            "resources": {"limits": {"cpu": 1, "memory": "1Gi"}},
            "ports": [{"containerPort": 80}],
            "livenessProbe": {"httpGet": {"port": "http"}}}]}});
        assert_eq!(first_mismatch("", "v1", "Pod", &object(&pod)), None);
    }

    #[test]
    fn compiled_schemas_agree_with_the_walk() {
        let mut found = 0;
        for (group, version, kind, base) in crate::openapi::test_bodies::bodies() {
            for body in std::iter::once(base.clone()).chain(crate::openapi::test_bodies::variants(&base)) {
                let walked = walk_mismatch(group, version, kind, &body);
                let name = definitions().kind_schema(group, version, kind).expect("a schema");
                assert_eq!(index().mismatch_in(name, &body), walked.is_some(), "{kind}: {body:?}");
                assert_eq!(first_mismatch(group, version, kind, &body), walked, "{kind}: {body:?}");
                found += usize::from(walked.is_some());
            }
        }
        // The variants do put wrong types in structs, lists and maps.
        assert!(found > 100, "{found}");
    }
}
