//! The CEL type a schema node gives `self` in its rules (kube's `DeclType`): which fields an
//! object declares, what a list or map holds, and the sizes cost estimates start from.
//!
//! Sizes follow kube: a string's `maxLength` (times four, for multi-byte characters), a list's
//! `maxItems`, a map's `maxProperties`; where the schema sets none, how many of the smallest
//! possible element fit in one request of [`MAX_REQUEST_SIZE_BYTES`]. Field names are CEL's
//! escaped forms (`foo-bar` is `foo__dash__bar`, `namespace` is `__namespace__`); a name with
//! characters CEL cannot spell is not a field at all.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::cel_cost::MAX_REQUEST_SIZE_BYTES;

/// The type of a value as rules see it, with its sizes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Decl {
    /// What it is.
    pub(crate) kind: DeclKind,
    /// The most elements it can have: characters of a string, items of a list, entries of a
    /// map; 0 for numbers, booleans and objects (as kube).
    pub(crate) max_elements: u64,
    /// The fewest bytes its JSON can take (how many fit in a request follows from it).
    pub(crate) min_size: u64,
}

/// The kinds of [`Decl`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum DeclKind {
    /// An int-or-string: anything, as far as the type checker knows.
    Dyn,
    /// A boolean.
    Bool,
    /// An integer.
    Int,
    /// A number.
    Double,
    /// A string.
    String,
    /// A string of format `byte`.
    Bytes,
    /// A string of format `duration`.
    Duration,
    /// A string of format `date` or `date-time`.
    Timestamp,
    /// A list of the element type.
    List(Box<Decl>),
    /// A map from strings to the value type (`additionalProperties`).
    Map(Box<Decl>),
    /// An object with these fields, by escaped name.
    Object(BTreeMap<String, Decl>),
}

const MIN_STRING_SIZE: u64 = 2;
const MIN_BOOL_SIZE: u64 = 4;
const MIN_NUMBER_SIZE: u64 = 1;
const MIN_DURATION_SIZE: u64 = 3;
const MAX_DURATION_SIZE: u64 = 32;
const DATE_SIZE: u64 = 12;
const MIN_DATE_TIME_SIZE: u64 = 21;
const MAX_DATE_TIME_SIZE: u64 = 32;

/// The key of every map: a string of no estimated size (kube's plain string type).
pub(crate) static MAP_KEY: Decl = Decl { kind: DeclKind::String, max_elements: 0, min_size: MIN_STRING_SIZE };

fn simple(kind: DeclKind, min_size: u64, max_elements: u64) -> Decl {
    Decl { kind, max_elements, min_size }
}

fn non_negative(v: &Value) -> Option<u64> {
    v.as_i64().map(|n| n.max(0) as u64).or_else(|| v.as_u64())
}

/// The longest string a request can hold.
const UNBOUNDED_STRING: u64 = MAX_REQUEST_SIZE_BYTES - 2;

/// CEL's reserved words: a property so named is `__<word>__` in rules (and, as kube's type
/// provider recognises since 1.31, may be selected by the word itself).
const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// Whether `name` is one of CEL's reserved words.
pub(crate) fn keyword(name: &str) -> bool {
    RESERVED.contains(&name)
}

/// CEL's name for a property (kube's escaping), `None` when CEL cannot spell it.
pub(crate) fn escape(name: &str) -> Option<String> {
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '_' if chars.peek() == Some(&'_') => {
                chars.next();
                out.push_str("__underscores__");
            }
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
    }
    Some(out)
}

/// Whether a schema already declares what kube adds to a resource's root.
fn declares_type_and_object_meta(schema: &Value) -> bool {
    let p = &schema["properties"];
    p["kind"]["type"] == "string"
        && p["apiVersion"]["type"] == "string"
        && p["metadata"]["type"] == "object"
        && p["metadata"]["properties"]["name"]["type"] == "string"
        && p["metadata"]["properties"]["generateName"]["type"] == "string"
}

/// The type of `self` in rules on `schema` (`resource_root` at the root of a resource or of
/// an embedded one, where `apiVersion`, `kind` and `metadata.name`/`generateName` are what
/// rules may read of the type and object metadata); `None` for a node CEL cannot type (no
/// `type`), which no rule can then reach.
pub(crate) fn of_schema(schema: &Value, resource_root: bool) -> Option<Decl> {
    let max_length = non_negative(&schema["maxLength"]);
    if schema["x-kubernetes-int-or-string"] == true {
        return Some(simple(DeclKind::Dyn, 1, max_length.map_or(UNBOUNDED_STRING, |n| n.saturating_mul(4))));
    }
    let embedded = |s: &Value| s["x-kubernetes-embedded-resource"] == true;
    match schema["type"].as_str()? {
        "array" => {
            let items = schema.get("items").filter(|i| i.is_object())?;
            let item = of_schema(items, embedded(items))?;
            let max = non_negative(&schema["maxItems"]).unwrap_or((MAX_REQUEST_SIZE_BYTES - 2) / (item.min_size + 1));
            Some(simple(DeclKind::List(Box::new(item)), 2, max))
        }
        "object" => {
            if let Some(values) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                let value = of_schema(values, embedded(values))?;
                let max = non_negative(&schema["maxProperties"])
                    .unwrap_or((MAX_REQUEST_SIZE_BYTES - 2) / (value.min_size + 6));
                return Some(simple(DeclKind::Map(Box::new(value)), 2, max));
            }
            let mut properties: BTreeMap<&str, &Value> =
                schema["properties"].as_object().into_iter().flatten().map(|(k, v)| (k.as_str(), v)).collect();
            let string = serde_json::json!({"type": "string"});
            // A name is a DNS subdomain (253 characters), a generated one at least one shorter.
            let capped = |field: &str, cap: u64| {
                let declared = non_negative(&schema["properties"]["metadata"]["properties"][field]["maxLength"]);
                serde_json::json!({"type": "string", "maxLength": declared.map_or(cap, |d| d.min(cap))})
            };
            let meta = serde_json::json!({"type": "object",
                "properties": {"name": capped("name", 253), "generateName": capped("generateName", 252)}});
            if resource_root && !declares_type_and_object_meta(schema) {
                properties.insert("kind", &string);
                properties.insert("apiVersion", &string);
                properties.insert("metadata", &meta);
            }
            let required: Vec<&str> =
                schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
            let mut fields = BTreeMap::new();
            let mut min_size = 2;
            for (name, prop) in properties {
                let Some(field) = of_schema(prop, embedded(prop)) else { continue };
                if required.contains(&name) && prop.get("default").is_none() {
                    min_size += name.len() as u64 + field.min_size + 4;
                }
                if let Some(escaped) = escape(name) {
                    fields.insert(escaped, field);
                }
            }
            Some(simple(DeclKind::Object(fields), min_size, 0))
        }
        "string" => Some(match schema["format"].as_str().unwrap_or("") {
            "byte" => simple(DeclKind::Bytes, MIN_STRING_SIZE, max_length.unwrap_or(UNBOUNDED_STRING)),
            "duration" => simple(DeclKind::Duration, MIN_DURATION_SIZE, MAX_DURATION_SIZE),
            "date" => simple(DeclKind::Timestamp, DATE_SIZE, DATE_SIZE),
            "date-time" => simple(DeclKind::Timestamp, MIN_DATE_TIME_SIZE, MAX_DATE_TIME_SIZE),
            _ => {
                let longest_enum = || {
                    let e = schema["enum"].as_array().filter(|e| !e.is_empty())?;
                    Some(e.iter().filter_map(Value::as_str).map(|s| s.len() as u64).max().unwrap_or(0))
                };
                let max = max_length.map(|n| n.saturating_mul(4)).or_else(longest_enum).unwrap_or(UNBOUNDED_STRING);
                simple(DeclKind::String, MIN_STRING_SIZE, max)
            }
        }),
        "boolean" => Some(simple(DeclKind::Bool, MIN_BOOL_SIZE, 0)),
        "number" => Some(simple(DeclKind::Double, MIN_NUMBER_SIZE, 0)),
        "integer" => Some(simple(DeclKind::Int, MIN_NUMBER_SIZE, 0)),
        _ => None,
    }
}

impl Decl {
    /// Whether a field at or below this type is spelled differently in CEL than in JSON (an
    /// escaped name always has a `__` in it, a plain one never).
    pub(crate) fn renames(&self) -> bool {
        match &self.kind {
            DeclKind::List(e) | DeclKind::Map(e) => e.renames(),
            DeclKind::Object(f) => f.iter().any(|(k, d)| k.contains("__") || d.renames()),
            _ => false,
        }
    }

    /// Whether a value of this type holds strings rules read as other types: durations,
    /// timestamps (formats `date` and `date-time`) and bytes (format `byte`).
    pub(crate) fn formatted(&self) -> bool {
        match &self.kind {
            DeclKind::Duration | DeclKind::Timestamp | DeclKind::Bytes => true,
            DeclKind::List(e) | DeclKind::Map(e) => e.formatted(),
            DeclKind::Object(f) => f.values().any(Decl::formatted),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_are_escaped_as_kube_escapes_them() {
        assert_eq!(escape("foo-bar").as_deref(), Some("foo__dash__bar"));
        assert_eq!(escape("namespace").as_deref(), Some("__namespace__"));
        assert_eq!(escape("a__b.c/d").as_deref(), Some("a__underscores__b__dot__c__slash__d"));
        assert_eq!(escape("1a"), None);
        assert_eq!(escape("a b"), None);
    }

    #[test]
    fn unbounded_sizes_come_from_the_request_limit() {
        let d = of_schema(&json!({"type": "array", "items": {"type": "number"}}), false).expect("typed");
        assert_eq!(d.max_elements, 1_572_863);
        let d = of_schema(&json!({"type": "array", "items": {"type": "string"}}), false).expect("typed");
        assert_eq!(d.max_elements, 1_048_575);
        let d = of_schema(&json!({"type": "string", "maxLength": 10}), false).expect("typed");
        assert_eq!(d.max_elements, 40);
    }

    #[test]
    fn values_are_read_under_cel_names() {
        let schema = json!({"type": "object", "properties": {"namespace": {"type": "string"},
            "items": {"type": "array", "items": {"type": "object", "properties": {"max-size": {"type": "integer"}}}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}}}});
        let d = of_schema(&schema, false).expect("typed");
        assert!(d.renames());
        let DeclKind::Object(fields) = &d.kind else { panic!("object") };
        let DeclKind::List(item) = &fields["items"].kind else { panic!("list") };
        assert!(matches!(&item.kind, DeclKind::Object(f) if f.contains_key("max__dash__size")));
        assert!(fields.contains_key("__namespace__"));
        assert!(!of_schema(&json!({"type": "object", "properties": {"a": {"type": "string"}}}), false)
            .expect("typed")
            .renames());
    }
}
