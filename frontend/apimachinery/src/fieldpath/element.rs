//! Path elements: one step from a value into one of its children, and their order.
//!
//! A step is a struct or map field (`.spec`), the key fields of an element of a list-map
//! (`[name="nginx"]`), the value of an element of a set (`[="a"]`), or a list index (`[0]`, only
//! for lists that are neither). The order is kube's: fields before keys before values before
//! indexes, and within each kind by name, by key fields, by value (numbers before strings before
//! booleans before lists before maps before null), by index.

use std::cmp::Ordering;
use std::fmt;

use serde_json::Value;

/// One step of a [`super::Path`].
#[derive(Debug, Clone, PartialEq)]
pub enum PathElement {
    /// A field of a struct or a key of a map.
    Field(String),
    /// The key fields of a list-map element, sorted by field name.
    Key(Vec<(String, Value)>),
    /// An element of a set, by its value.
    Value(Value),
    /// A position in a list that has no keys.
    Index(i64),
}

// Serde's JSON values hold no NaN, so equality is total.
impl Eq for PathElement {}

impl std::hash::Hash for PathElement {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        match self {
            PathElement::Field(name) => {
                0u8.hash(state);
                name.hash(state);
            }
            PathElement::Key(fields) => {
                1u8.hash(state);
                for (name, value) in fields {
                    name.hash(state);
                    hash_value(value, state);
                }
            }
            PathElement::Value(v) => {
                2u8.hash(state);
                hash_value(v, state);
            }
            PathElement::Index(i) => {
                3u8.hash(state);
                i.hash(state);
            }
        }
    }
}

/// Hashes a JSON value consistently with its equality.
fn hash_value<H: std::hash::Hasher>(v: &Value, state: &mut H) {
    use std::hash::Hash;
    match v {
        Value::Null => 0u8.hash(state),
        Value::Bool(b) => b.hash(state),
        // By kind and value, as serde's numbers compare, without formatting one.
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => (1u8, u).hash(state),
            (None, Some(i)) => (2u8, i).hash(state),
            // 0.0 and -0.0 are equal.
            (None, None) => (3u8, n.as_f64().map(|f| if f == 0.0 { 0 } else { f.to_bits() })).hash(state),
        },
        Value::String(s) => s.hash(state),
        Value::Array(items) => items.iter().for_each(|i| hash_value(i, state)),
        Value::Object(m) => m.iter().for_each(|(k, i)| {
            k.hash(state);
            hash_value(i, state);
        }),
    }
}

impl PartialOrd for PathElement {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for PathElement {
    fn cmp(&self, other: &Self) -> Ordering {
        use PathElement::*;
        fn rank(e: &PathElement) -> u8 {
            match e {
                Field(_) => 0,
                Key(_) => 1,
                Value(_) => 2,
                Index(_) => 3,
            }
        }
        match (self, other) {
            (Field(a), Field(b)) => a.cmp(b),
            (Key(a), Key(b)) => compare_fields(a, b),
            (Value(a), Value(b)) => compare_values(a, b),
            (Index(a), Index(b)) => a.cmp(b),
            _ => rank(self).cmp(&rank(other)),
        }
    }
}

/// Orders two key-field lists: field by field (name, then value), a shorter prefix first.
fn compare_fields(a: &[(String, Value)], b: &[(String, Value)]) -> Ordering {
    for ((an, av), (bn, bv)) in a.iter().zip(b) {
        let c = an.cmp(bn).then_with(|| compare_values(av, bv));
        if c != Ordering::Equal {
            return c;
        }
    }
    a.len().cmp(&b.len())
}

fn type_rank(v: &Value) -> u8 {
    match v {
        Value::Number(n) if n.is_f64() => 0,
        Value::Number(_) => 1,
        Value::String(_) => 2,
        Value::Bool(_) => 3,
        Value::Array(_) => 4,
        Value::Object(_) => 5,
        Value::Null => 6,
    }
}

/// Orders JSON values as kube's field sets do: numbers (compared numerically, floats and
/// integers together), strings, booleans (false first), lists (element-wise, shorter first),
/// maps (by sorted keys and values), null.
pub fn compare_values(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if let (Some(x), Some(y)) = (x.as_i64(), y.as_i64()) {
                return x.cmp(&y);
            }
            let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
            x.partial_cmp(&y).unwrap_or(Ordering::Equal)
        }
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (l, r) in x.iter().zip(y) {
                let c = compare_values(l, r);
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => {
            // Serde's maps iterate in key order, as kube's lexical zip does.
            for ((lk, lv), (rk, rv)) in x.iter().zip(y) {
                let c = lk.cmp(rk).then_with(|| compare_values(lv, rv));
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        _ => type_rank(a).cmp(&type_rank(b)),
    }
}

/// Writes a JSON value as Go's `encoding/json` does (which kube's FieldsV1 keys use): `<`, `>`,
/// `&`, U+2028 and U+2029 escaped in strings, maps with sorted keys.
pub fn write_go_json(out: &mut String, v: &Value) {
    match v {
        Value::String(s) => write_go_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_json(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_string(out, k);
                out.push(':');
                write_go_json(out, item);
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Writes a JSON string literal with Go's HTML-safe escaping.
pub fn write_go_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Writes a value as kube prints it in paths: strings quoted, the rest as JSON.
fn write_value_text(f: &mut fmt::Formatter<'_>, v: &Value) -> fmt::Result {
    let mut s = String::new();
    write_go_json(&mut s, v);
    f.write_str(&s)
}

impl PathElement {
    /// The FieldsV1 key of this element: `f:name`, `k:{"name":"c"}`, `v:"a"`, `i:0`.
    pub fn fields_v1_key(&self) -> String {
        let mut out = String::new();
        match self {
            PathElement::Field(name) => {
                out.push_str("f:");
                out.push_str(name);
            }
            PathElement::Key(fields) => {
                out.push_str("k:{");
                for (i, (name, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_go_string(&mut out, name);
                    out.push(':');
                    write_go_json(&mut out, value);
                }
                out.push('}');
            }
            PathElement::Value(v) => {
                out.push_str("v:");
                write_go_json(&mut out, v);
            }
            PathElement::Index(i) => {
                out.push_str("i:");
                out.push_str(&i.to_string());
            }
        }
        out
    }

    /// Parses a FieldsV1 key. `Ok(None)` for a key of an unknown kind (kube skips those).
    ///
    /// # Errors
    ///
    /// A message saying what is wrong with the key.
    pub fn from_fields_v1_key(key: &str) -> Result<Option<PathElement>, String> {
        let bytes = key.as_bytes();
        if bytes.len() < 2 {
            return Err("key must be 2 characters long:".into());
        }
        if bytes[1] != b':' {
            return Err(format!("missing colon: {key}"));
        }
        let rest = &key[2..];
        Ok(Some(match bytes[0] {
            b'f' => PathElement::Field(rest.to_string()),
            b'v' => PathElement::Value(serde_json::from_str(rest).map_err(|e| e.to_string())?),
            b'k' => {
                let Value::Object(map) = serde_json::from_str(rest).map_err(|e| e.to_string())? else {
                    return Err(format!("key is not an object: {key}"));
                };
                // Serde's map is sorted by name, which is the order kube keeps keys in.
                PathElement::Key(map.into_iter().collect())
            }
            b'i' => PathElement::Index(rest.parse().map_err(|e: std::num::ParseIntError| e.to_string())?),
            _ => return Ok(None),
        }))
    }
}

impl fmt::Display for PathElement {
    /// Formats as kube's paths do in conflict messages: `.name`, `[name="c",port=80]`,
    /// `[="a"]`, `[0]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(fields) => {
                f.write_str("[")?;
                for (i, (name, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{name}=")?;
                    write_value_text(f, value)?;
                }
                f.write_str("]")
            }
            PathElement::Value(v) => {
                f.write_str("[=")?;
                write_value_text(f, v)?;
                f.write_str("]")
            }
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_round_trip_in_upstream_spelling() {
        let cases = [
            (PathElement::Field("spec".into()), "f:spec"),
            (PathElement::Key(vec![("name".into(), json!("c"))]), r#"k:{"name":"c"}"#),
            (
                PathElement::Key(vec![("containerPort".into(), json!(80)), ("protocol".into(), json!("TCP"))]),
                r#"k:{"containerPort":80,"protocol":"TCP"}"#,
            ),
            (PathElement::Value(json!("a<b")), r#"v:"a\u003cb""#),
            (PathElement::Index(3), "i:3"),
        ];
        for (pe, key) in cases {
            assert_eq!(pe.fields_v1_key(), key);
            assert_eq!(PathElement::from_fields_v1_key(key), Ok(Some(pe)));
        }
        assert_eq!(PathElement::from_fields_v1_key("x:1"), Ok(None));
        assert!(PathElement::from_fields_v1_key("f").is_err());
        assert!(PathElement::from_fields_v1_key("fx").is_err());
    }

    #[test]
    fn order_is_fields_keys_values_indexes() {
        let mut v = [
            PathElement::Index(0),
            PathElement::Value(json!("a")),
            PathElement::Value(json!(1)),
            PathElement::Key(vec![("name".into(), json!("b"))]),
            PathElement::Key(vec![("name".into(), json!("a"))]),
            PathElement::Field("b".into()),
            PathElement::Field("a".into()),
        ];
        v.sort();
        let keys: Vec<String> = v.iter().map(PathElement::to_string).collect();
        assert_eq!(keys, [".a", ".b", r#"[name="a"]"#, r#"[name="b"]"#, "[=1]", r#"[="a"]"#, "[0]"]);
    }
}
