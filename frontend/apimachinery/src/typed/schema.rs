//! [`TypeSchema`]: what server-side apply needs to know of a kind's types, per node: a scalar,
//! a struct (fields known by name; atomic or granular), a map (granular or atomic), a list
//! (atomic, a set of scalars, or a list-map keyed by some of its elements' fields), or
//! *deduced* (no schema: maps are granular, lists atomic).
//!
//! Built two ways, to the same rules kube uses (an explicit `listType` wins; otherwise a list
//! with the `merge` patch strategy is keyed by its patch merge key, or a set without one; every
//! other list is atomic):
//!
//! * [`TypeSchema::from_message`]: from a built-in kind's generated tables (the upstream
//!   markers `listType`, `listMapKey`, `mapType`, `structType` and the patch tags);
//! * [`TypeSchema::from_openapi_v3`]: from an OpenAPI v3 schema object (a custom resource
//!   version's schema, with `x-kubernetes-list-type`, `x-kubernetes-list-map-keys`,
//!   `x-kubernetes-map-type`, `x-kubernetes-patch-strategy`/`-merge-key`,
//!   `x-kubernetes-preserve-unknown-fields` and `$ref`s into `components.schemas`).

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::protobuf::{Field, FieldType, Message};

/// An index into a [`TypeSchema`]'s nodes.
pub type TypeId = usize;

/// How a list's elements are told apart.
#[derive(Debug, Clone, PartialEq)]
pub enum ListKind {
    /// The list is one value, owned and replaced whole.
    Atomic,
    /// Elements are scalars told apart by value.
    Set,
    /// Elements are objects told apart by these fields (in declaration order), with defaults
    /// for key fields an element may omit.
    Map {
        /// The key fields.
        keys: Vec<String>,
        /// Defaults of key fields.
        defaults: Vec<(String, Value)>,
    },
}

/// One type.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// A string, number or boolean (also int-or-string, quantities, times).
    Scalar,
    /// An object with named fields; fields not named are deduced.
    Struct {
        /// Field name to type.
        fields: HashMap<String, TypeId>,
        /// `structType: atomic`.
        atomic: bool,
    },
    /// An object whose every value has one type.
    Map {
        /// The value type.
        values: TypeId,
        /// `mapType: atomic`.
        atomic: bool,
    },
    /// A list.
    List {
        /// The element type.
        items: TypeId,
        /// How elements merge.
        kind: ListKind,
    },
    /// No schema: deduced from the value.
    Deduced,
}

/// The types of one kind, with the object's type at [`TypeSchema::root`].
#[derive(Debug, Clone, PartialEq)]
pub struct TypeSchema {
    nodes: Vec<Node>,
    root: TypeId,
    /// What the zero value of each struct holds (built-in kinds only, from their Go types).
    zero: HashMap<TypeId, ZeroFields>,
}

/// The fields a struct's Go zero value holds in JSON.
#[derive(Debug, Clone, PartialEq, Default)]
struct ZeroFields {
    /// Value structs: written as objects, with their own zero values.
    values: Vec<(String, TypeId)>,
    /// Slices, maps and pointers without `omitempty`: written as `null`.
    nulls: Vec<String>,
    /// Numbers, booleans and strings without `omitempty`: written as `0`, `false`, `""`.
    printed: Vec<String>,
}

/// The deduced type's id in every schema.
pub const DEDUCED: TypeId = 0;
const SCALAR: TypeId = 1;

impl TypeSchema {
    /// A schema that knows nothing: every object deduced (what kube uses for kinds without
    /// a schema).
    pub fn deduced() -> TypeSchema {
        TypeSchema { nodes: vec![Node::Deduced, Node::Scalar], root: DEDUCED, zero: HashMap::new() }
    }

    /// The object's type.
    pub fn root(&self) -> TypeId {
        self.root
    }

    /// The node of `id`.
    pub fn node(&self, id: TypeId) -> &Node {
        &self.nodes[id]
    }

    /// The type of field `name` of an object of type `id` (deduced when unknown).
    pub fn field(&self, id: TypeId, name: &str) -> TypeId {
        match &self.nodes[id] {
            Node::Struct { fields, .. } => fields.get(name).copied().unwrap_or(DEDUCED),
            Node::Map { values, .. } => *values,
            _ => DEDUCED,
        }
    }

    /// Whether `name` is a declared field of struct type `id` (undeclared fields and map
    /// entries are members of a field set on their own).
    pub fn is_named_field(&self, id: TypeId, name: &str) -> bool {
        matches!(&self.nodes[id], Node::Struct { fields, .. } if fields.contains_key(name))
    }

    fn push(&mut self, node: Node) -> TypeId {
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    /// Builds the schema of a built-in kind from its generated tables.
    pub fn from_message(message: &'static Message) -> TypeSchema {
        let mut s = TypeSchema::deduced();
        let mut memo = HashMap::new();
        s.root = s.message(message, &mut memo);
        s
    }

    fn message(&mut self, message: &'static Message, memo: &mut HashMap<usize, TypeId>) -> TypeId {
        let addr = message as *const Message as usize;
        if let Some(id) = memo.get(&addr) {
            return *id;
        }
        // Reserve the id first: types may be recursive (JSONSchemaProps).
        // `+structType=atomic` types are owned and replaced whole.
        let atomic = crate::schema::ATOMIC_STRUCTS.iter().any(|m| std::ptr::eq(*m, message));
        let id = self.push(Node::Struct { fields: HashMap::new(), atomic });
        memo.insert(addr, id);
        let mut fields = HashMap::new();
        self.collect_fields(message, memo, &mut fields);
        let printed: Vec<String> = crate::schema::printed_zeros(message).map(String::from).collect();
        let (values, nulls) = crate::schema::zero_fields(message).unwrap_or_default();
        if !values.is_empty() || !nulls.is_empty() || !printed.is_empty() {
            let values = values.iter().filter_map(|v| Some((v.to_string(), *fields.get(*v)?))).collect();
            let nulls = nulls.iter().map(|n| n.to_string()).collect();
            self.zero.insert(id, ZeroFields { values, nulls, printed });
        }
        if let Node::Struct { fields: f, .. } = &mut self.nodes[id] {
            *f = fields;
        }
        id
    }

    /// The zero value of the kind's Go type as kube's unstructured converter writes it, as far
    /// as `obj` goes: its value structs `obj` holds (as objects, their own zero values within)
    /// the fields Go writes as `null` that `obj` sets, and the zeros Go prints (`0`, `false`,
    /// `""` of a field without `omitempty`) that `obj` holds too. Empty for a kind without Go types
    /// (a custom resource: kube's zero value is an empty object).
    pub fn zero_value(&self, obj: &Value) -> Map<String, Value> {
        self.zero_of(self.root, obj)
    }

    fn zero_of(&self, id: TypeId, obj: &Value) -> Map<String, Value> {
        let mut out = Map::new();
        let Some(zero) = self.zero.get(&id) else { return out };
        for (field, child) in &zero.values {
            if let Some(v) = obj.get(field).filter(|v| v.is_object()) {
                out.insert(field.clone(), Value::Object(self.zero_of(*child, v)));
            }
        }
        // A `null` `obj` holds there is the zero value's own too.
        for field in &zero.nulls {
            if obj.get(field).is_some() {
                out.insert(field.clone(), Value::Null);
            }
        }
        // A zero `obj` holds where Go prints one is the zero value's own: not a change.
        for field in &zero.printed {
            if let Some(v) = obj.get(field).filter(|v| is_go_zero(v)) {
                out.insert(field.clone(), v.clone());
            }
        }
        out
    }

    fn collect_fields(
        &mut self,
        message: &'static Message,
        memo: &mut HashMap<usize, TypeId>,
        out: &mut HashMap<String, TypeId>,
    ) {
        for f in message.fields {
            if f.json.is_empty() {
                // An embedded struct: its fields are the parent's.
                if let FieldType::Message(inner) = f.ty {
                    self.collect_fields(inner, memo, out);
                }
                continue;
            }
            let id = self.field_type(f, memo);
            out.insert(f.json.to_string(), id);
        }
    }

    fn value_type(&mut self, ty: &FieldType, memo: &mut HashMap<usize, TypeId>) -> TypeId {
        match ty {
            FieldType::Message(m) => self.message(m, memo),
            FieldType::Map(values) => {
                let values = self.value_type(values, memo);
                self.push(Node::Map { values, atomic: false })
            }
            FieldType::StringList => self.push(Node::List { items: SCALAR, kind: ListKind::Atomic }),
            FieldType::RawJson
            | FieldType::SchemaOrArray(_)
            | FieldType::SchemaOrBool(_)
            | FieldType::SchemaOrStringArray(_) => DEDUCED,
            _ => SCALAR,
        }
    }

    fn field_type(&mut self, f: &Field, memo: &mut HashMap<usize, TypeId>) -> TypeId {
        let inner = self.value_type(&f.ty, memo);
        if f.merge.map_type == "atomic" {
            if let Node::Map { values, .. } = self.nodes[inner].clone() {
                return self.push(Node::Map { values, atomic: true });
            }
        }
        if !f.repeated {
            return inner;
        }
        let kind = list_kind(
            f.merge.list_type,
            f.merge.list_keys.iter().map(|k| k.to_string()).collect(),
            f.merge
                .key_defaults
                .iter()
                .filter_map(|(k, v)| Some((k.to_string(), serde_json::from_str(v).ok()?)))
                .collect(),
            f.patch.strategy,
            f.patch.merge_key,
        );
        self.push(Node::List { items: inner, kind })
    }

    /// Builds a schema from an OpenAPI v3 schema object. `components` resolves `$ref`s of the
    /// form `#/components/schemas/<name>` (or `#/definitions/<name>`); pass an empty map for
    /// self-contained schemas (custom resources).
    pub fn from_openapi_v3(schema: &Value, components: &Map<String, Value>) -> TypeSchema {
        let mut s = TypeSchema::deduced();
        let mut memo = HashMap::new();
        s.root = s.openapi(schema, components, &mut memo, 0);
        s
    }

    fn openapi(
        &mut self,
        schema: &Value,
        components: &Map<String, Value>,
        memo: &mut HashMap<String, TypeId>,
        depth: usize,
    ) -> TypeId {
        // Schemas nest as deep as the objects they describe; a bound keeps a hostile schema
        // from exhausting the stack (deeper parts are deduced).
        const MAX_DEPTH: usize = 64;
        let Value::Object(o) = schema else { return DEDUCED };
        if depth > MAX_DEPTH {
            return DEDUCED;
        }
        if let Some(Value::String(r)) = o.get("$ref") {
            let name = r.rsplit('/').next().unwrap_or_default().to_string();
            if let Some(id) = memo.get(&name) {
                return *id;
            }
            let Some(target) = components.get(&name) else { return DEDUCED };
            let id = self.push(Node::Deduced);
            memo.insert(name, id);
            let resolved = self.openapi(target, components, memo, depth + 1);
            self.nodes[id] = self.nodes[resolved].clone();
            return id;
        }
        // `allOf: [{$ref}]` is how a v3 document attaches a description to a reference.
        if let Some(Value::Array(all)) = o.get("allOf") {
            if let [only] = all.as_slice() {
                return self.openapi(only, components, memo, depth + 1);
            }
        }
        if o.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
            return SCALAR;
        }
        let ty = o.get("type").and_then(Value::as_str).unwrap_or("");
        let preserve = o.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
        let str_ext = |k: &str| o.get(k).and_then(Value::as_str).unwrap_or("");
        match ty {
            "array" => {
                let items = o.get("items").map_or(DEDUCED, |i| self.openapi(i, components, memo, depth + 1));
                let keys: Vec<String> = o
                    .get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|k| k.iter().filter_map(Value::as_str).map(String::from).collect())
                    .unwrap_or_default();
                let item_props = o.get("items").and_then(|i| i.get("properties"));
                let defaults = keys
                    .iter()
                    .filter_map(|k| Some((k.clone(), item_props?.get(k)?.get("default")?.clone())))
                    .collect();
                let kind = list_kind(
                    str_ext("x-kubernetes-list-type"),
                    keys,
                    defaults,
                    str_ext("x-kubernetes-patch-strategy"),
                    str_ext("x-kubernetes-patch-merge-key"),
                );
                self.push(Node::List { items, kind })
            }
            "object" | "" if o.contains_key("properties") => {
                let id = self.push(Node::Struct { fields: HashMap::new(), atomic: false });
                let mut fields = HashMap::new();
                if let Some(Value::Object(props)) = o.get("properties") {
                    for (name, prop) in props {
                        fields.insert(name.clone(), self.openapi(prop, components, memo, depth + 1));
                    }
                }
                let atomic = str_ext("x-kubernetes-map-type") == "atomic";
                self.nodes[id] = Node::Struct { fields, atomic };
                id
            }
            "object" | "" if o.get("additionalProperties").is_some_and(Value::is_object) => {
                let values = self.openapi(&o["additionalProperties"], components, memo, depth + 1);
                let atomic = str_ext("x-kubernetes-map-type") == "atomic";
                self.push(Node::Map { values, atomic })
            }
            "object" if !preserve => {
                let atomic = str_ext("x-kubernetes-map-type") == "atomic";
                self.push(Node::Map { values: DEDUCED, atomic })
            }
            "object" | "" => DEDUCED,
            _ => SCALAR,
        }
    }
}

/// kube's rule for a list's kind: an explicit list type wins; otherwise the `merge` patch
/// strategy makes a list-map keyed by the merge key (a set without one); otherwise atomic.
fn list_kind(
    list_type: &str,
    keys: Vec<String>,
    defaults: Vec<(String, Value)>,
    strategy: &str,
    merge_key: &str,
) -> ListKind {
    match list_type {
        "atomic" => ListKind::Atomic,
        "set" => ListKind::Set,
        "map" => ListKind::Map { keys, defaults },
        _ if strategy.split(',').any(|s| s == "merge") => {
            if merge_key.is_empty() {
                ListKind::Set
            } else {
                ListKind::Map { keys: vec![merge_key.to_string()], defaults }
            }
        }
        _ => ListKind::Atomic,
    }
}

/// Whether `v` is the zero of a Go number, boolean or string.
fn is_go_zero(v: &Value) -> bool {
    match v {
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn list_at(s: &TypeSchema, path: &[&str]) -> ListKind {
        let mut id = s.root();
        for p in path {
            id = match s.node(id) {
                Node::List { items, .. } => s.field(*items, p),
                _ => s.field(id, p),
            };
        }
        match s.node(id) {
            Node::List { kind, .. } => kind.clone(),
            other => panic!("not a list at {path:?}: {other:?}"),
        }
    }

    #[test]
    fn built_in_lists_follow_upstream_markers() {
        let s = TypeSchema::from_message(crate::schema::lookup("apps", "v1", "Deployment").expect("schema"));
        let containers = ["spec", "template", "spec", "containers"];
        assert_eq!(list_at(&s, &containers), ListKind::Map { keys: vec!["name".into()], defaults: vec![] });
        assert_eq!(
            list_at(&s, &["spec", "template", "spec", "containers", "ports"]),
            ListKind::Map {
                keys: vec!["containerPort".into(), "protocol".into()],
                defaults: vec![("protocol".into(), json!("TCP"))]
            }
        );
        assert_eq!(list_at(&s, &["spec", "template", "spec", "containers", "args"]), ListKind::Atomic);
        assert_eq!(list_at(&s, &["metadata", "finalizers"]), ListKind::Set);
        assert_eq!(
            list_at(&s, &["metadata", "ownerReferences"]),
            ListKind::Map { keys: vec!["uid".into()], defaults: vec![] }
        );
        let selector = s.field(s.field(s.root(), "spec"), "selector");
        assert!(matches!(s.node(selector), Node::Struct { atomic: true, .. }));
    }

    #[test]
    fn openapi_schemas_follow_the_extensions() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "items": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["id"],
                          "items": {"type": "object", "properties": {"id": {"type": "string"}, "v": {"type": "integer"}}}},
                "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "args": {"type": "array", "items": {"type": "string"}},
                "sel": {"type": "object", "x-kubernetes-map-type": "atomic", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}});
        let s = TypeSchema::from_openapi_v3(&schema, &Map::new());
        assert_eq!(list_at(&s, &["spec", "items"]), ListKind::Map { keys: vec!["id".into()], defaults: vec![] });
        assert_eq!(list_at(&s, &["spec", "tags"]), ListKind::Set);
        assert_eq!(list_at(&s, &["spec", "args"]), ListKind::Atomic);
        let spec = s.field(s.root(), "spec");
        assert!(matches!(s.node(s.field(spec, "sel")), Node::Map { atomic: true, .. }));
        assert_eq!(s.node(s.field(spec, "free")), &Node::Deduced);
    }
}
