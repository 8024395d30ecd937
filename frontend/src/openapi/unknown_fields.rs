//! Unknown-field detection below the top level, driven by the kinds' OpenAPI schemas: what
//! kube-apiserver's strict JSON decoding reports (`unknown field "spec.template.spec.foo"`) when
//! a body names a field its Go type lacks. Unknown fields are removed as they are found, since
//! kube's decoder drops them under `fieldValidation=Ignore|Warn` too.
//!
//! Only closed objects are checked: a schema with `properties` and no `additionalProperties`.
//! Maps (`additionalProperties`) are walked into, free-form objects (`RawExtension`, `FieldsV1`,
//! no `properties`) and `x-kubernetes-preserve-unknown-fields` are left alone, so a schema gap
//! can only make the check laxer than upstream, never reject a valid body.

use serde_json::{Map, Value};

use super::schemas::{definitions, field_node, sorted_fields, Definitions, Fields};

/// How deep the walk goes; bodies nest far less than this, and it bounds the work a hostile body
/// can cause.
const MAX_DEPTH: usize = 64;

/// Removes the unknown fields below the top level of an object of `group/version/kind` and
/// returns their paths (`spec.foo`, `spec.containers[0].bar`), sorted by path. Top-level fields
/// are the caller's to check (the registry knows them without a schema). Kinds without a schema
/// are not checked.
pub fn prune(group: &str, version: &str, kind: &str, obj: &mut Map<String, Value>) -> Vec<String> {
    let defs = definitions();
    let Some(name) = defs.kind_schema(group, version, kind) else { return Vec::new() };
    // Most bodies hold no unknown field: the compiled schemas say so without spelling out a
    // path, and only a body that has one is walked again to find and remove it.
    if !index().has_unknown(name, obj) {
        return Vec::new();
    }
    prune_walk(defs, name, obj)
}

/// [`prune`] by walking the schemas as they are.
fn prune_walk(defs: &Definitions, name: &str, obj: &mut Map<String, Value>) -> Vec<String> {
    let Some(properties) = defs.schemas.get(name).and_then(|s| s.get("properties")).and_then(Value::as_object) else {
        return Vec::new();
    };
    let mut unknown = Vec::new();
    let mut path = String::new();
    for (key, value) in obj.iter_mut() {
        if let Some(schema) = properties.get(key) {
            path.clear();
            path.push_str(key);
            walk(defs, schema, value, &mut path, &mut unknown, 0);
        }
    }
    unknown.sort();
    unknown
}

/// Resolves references and single-element `allOf` wrappers to the schema that says what a
/// value may hold.
fn resolve<'a>(defs: &'a Definitions, schema: &'a Value) -> &'a Value {
    let mut current = defs.resolve(schema);
    if let Some([inner]) = current.get("allOf").and_then(Value::as_array).map(Vec::as_slice) {
        current = defs.resolve(inner);
    }
    current
}

/// Walks `value` at `path`, which it extends for the children and leaves as it was (one
/// buffer for the whole walk: paths are spelled out only for unknown fields).
fn walk(
    defs: &Definitions,
    schema: &Value,
    value: &mut Value,
    path: &mut String,
    unknown: &mut Vec<String>,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        return;
    }
    let schema = resolve(defs, schema);
    if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
        return;
    }
    match value {
        Value::Object(fields) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            match (properties, additional) {
                (Some(properties), None) => {
                    fields.retain(|key, _| {
                        let known = properties.contains_key(key);
                        if !known {
                            unknown.push(format!("{path}.{key}"));
                        }
                        known
                    });
                    for (key, child) in fields.iter_mut() {
                        at_field(path, key, |path| walk(defs, &properties[key], child, path, unknown, depth + 1));
                    }
                }
                (_, Some(additional)) => {
                    for (key, child) in fields.iter_mut() {
                        at_field(path, key, |path| walk(defs, additional, child, path, unknown, depth + 1));
                    }
                }
                (None, None) => {}
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    let len = path.len();
                    {
                        use std::fmt::Write;
                        let _ = write!(path, "[{i}]");
                    }
                    walk(defs, item_schema, item, path, unknown, depth + 1);
                    path.truncate(len);
                }
            }
        }
        _ => {}
    }
}

/// Runs `f` with `.key` appended to `path`, then takes it off again.
fn at_field(path: &mut String, key: &str, f: impl FnOnce(&mut String)) {
    let len = path.len();
    path.push('.');
    path.push_str(key);
    f(path);
    path.truncate(len);
}

/// The schemas as [`walk`] reads them, compiled once: each schema a node with its fields in a
/// sorted list, references and `allOf` wrappers already followed, so that checking a body
/// costs a few comparisons per field instead of lookups by definition name.
struct Index {
    nodes: Vec<Node>,
    /// Definition name to its top-level fields, as [`prune`] reads them (sorted).
    roots: std::collections::HashMap<&'static str, Fields>,
}

/// One resolved schema: what [`walk`] does with an object, an array or anything else in it.
#[derive(Default)]
struct Node {
    /// `x-kubernetes-preserve-unknown-fields`: nothing below is checked.
    open: bool,
    /// A closed object's fields (`properties` without `additionalProperties`), sorted.
    fields: Option<Fields>,
    /// A map's values.
    values: Option<usize>,
    /// An array's items.
    items: Option<usize>,
}

fn index() -> &'static Index {
    static INDEX: std::sync::LazyLock<Index> = std::sync::LazyLock::new(|| Index::build(definitions()));
    &INDEX
}

impl Index {
    fn build(defs: &'static Definitions) -> Index {
        let mut index = Index { nodes: Vec::new(), roots: Default::default() };
        let mut seen = std::collections::HashMap::new();
        for (name, schema) in &defs.schemas {
            let Some(properties) = schema.get("properties").and_then(Value::as_object) else { continue };
            let fields = properties.iter().map(|(k, v)| (k.as_str(), index.compile(defs, v, &mut seen))).collect();
            index.roots.insert(name.as_str(), sorted_fields(fields));
        }
        index
    }

    /// The node of `schema` as [`walk`] resolves it; one node per resolved schema (`seen`,
    /// by address), so recursive definitions compile to cycles.
    fn compile(
        &mut self,
        defs: &'static Definitions,
        schema: &'static Value,
        seen: &mut std::collections::HashMap<usize, usize>,
    ) -> usize {
        let resolved = resolve(defs, schema);
        let address = std::ptr::from_ref(resolved) as usize;
        if let Some(id) = seen.get(&address) {
            return *id;
        }
        let id = self.nodes.len();
        self.nodes.push(Node::default());
        seen.insert(address, id);
        let mut node = Node {
            open: resolved.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)),
            ..Node::default()
        };
        if !node.open {
            let properties = resolved.get("properties").and_then(Value::as_object);
            match (properties, resolved.get("additionalProperties").filter(|a| a.is_object())) {
                (Some(properties), None) => {
                    let fields = properties.iter().map(|(k, v)| (k.as_str(), self.compile(defs, v, seen)));
                    node.fields = Some(sorted_fields(fields.collect()));
                }
                (_, Some(additional)) => node.values = Some(self.compile(defs, additional, seen)),
                (None, None) => {}
            }
            node.items = resolved.get("items").map(|i| self.compile(defs, i, seen));
        }
        self.nodes[id] = node;
        id
    }

    /// Whether the object of definition `name` has a field [`prune`] would report.
    fn has_unknown(&self, name: &str, obj: &Map<String, Value>) -> bool {
        let Some(fields) = self.roots.get(name) else { return false };
        obj.iter().any(|(key, value)| field_node(fields, key).is_some_and(|id| self.unknown_below(id, value, 0)))
    }

    /// [`walk`] without removing or spelling out anything: whether it would find a field.
    fn unknown_below(&self, id: usize, value: &Value, depth: usize) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        let node = &self.nodes[id];
        if node.open {
            return false;
        }
        match value {
            Value::Object(map) => match (&node.fields, node.values) {
                (Some(fields), None) => map.iter().any(|(key, child)| match field_node(fields, key) {
                    Some(child_id) => self.unknown_below(child_id, child, depth + 1),
                    None => true,
                }),
                (_, Some(values)) => map.values().any(|child| self.unknown_below(values, child, depth + 1)),
                (None, None) => false,
            },
            Value::Array(items) => {
                node.items.is_some_and(|i| items.iter().any(|item| self.unknown_below(i, item, depth + 1)))
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!("test bodies are objects"),
        }
    }

    #[test]
    fn nested_unknown_fields_are_found_and_removed() {
        let mut obj = object(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "labels": {"any": "key"}, "ownerReferences": [{"name": "o", "bogus": 1}]},
            "spec": {"foo": 1, "replicas": 1, "template": {"spec": {"containers": [
                {"name": "c", "image": "i", "imagePullPolicy": "Always", "bar": true,
                 "resources": {"limits": {"cpu": "1"}}}
            ]}}},
        }));
        let unknown = prune("apps", "v1", "Deployment", &mut obj);
        assert_eq!(
            unknown,
            vec![
                "metadata.ownerReferences[0].bogus".to_string(),
                "spec.foo".to_string(),
                "spec.template.spec.containers[0].bar".to_string(),
            ]
        );
        assert!(obj["spec"].get("foo").is_none());
        assert_eq!(obj["spec"]["template"]["spec"]["containers"][0]["image"], "i");
        assert_eq!(obj["metadata"]["labels"]["any"], "key");
    }

    #[test]
    fn free_form_fields_and_maps_are_not_checked() {
        let mut obj = object(json!({
            "metadata": {"name": "x"},
            "data": {"anything": "goes"},
        }));
        assert!(prune("", "v1", "ConfigMap", &mut obj).is_empty());
        let mut crd = object(json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "names": {"kind": "Widget", "plural": "widgets"}, "scope": "Namespaced",
                "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                    "type": "object", "x-kubernetes-preserve-unknown-fields": true,
                    "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]},
        }));
        assert_eq!(prune("apiextensions.k8s.io", "v1", "CustomResourceDefinition", &mut crd), Vec::<String>::new());
    }

    #[test]
    fn compiled_schemas_agree_with_the_walk() {
        let defs = definitions();
        let mut found = 0;
        for (group, version, kind, base) in crate::openapi::test_bodies::bodies() {
            let name = defs.kind_schema(group, version, kind).expect("a schema");
            for body in std::iter::once(base.clone()).chain(crate::openapi::test_bodies::variants(&base)) {
                let walked = prune_walk(defs, name, &mut body.clone());
                assert_eq!(index().has_unknown(name, &body), !walked.is_empty(), "{kind}: {body:?}");
                found += usize::from(!walked.is_empty());
            }
        }
        // The variants do hold unknown fields, nested in structs, lists and maps.
        assert!(found > 50, "{found}");
    }
}
