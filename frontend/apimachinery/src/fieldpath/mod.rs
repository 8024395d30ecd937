//! Field paths and sets of them (kube's structured-merge-diff `fieldpath`), and their wire
//! form, `FieldsV1`.
//!
//! * [`element`]: [`PathElement`], one step (`.field`, `[key=...]`, `[=value]`, `[index]`),
//!   its order and its FieldsV1 key (`f:`, `k:`, `v:`, `i:`).
//! * [`set`]: [`Set`], a tree of paths with kube's union, difference and intersection.
//! * this module: [`Path`], its display (`.spec.containers[name="c"].image`, as conflict
//!   messages print it), and [`to_fields_v1`] / [`from_fields_v1`].
//!
//! FieldsV1 is a JSON object per set: each child is keyed by its element's FieldsV1 key, a
//! member with no children is `{}`, and an element that is both a member and has children
//! carries `".": {}` first. `.metadata.labels.app` and `.spec.containers[name="c"]` (a member,
//! with its `.image`):
//!
//! ```text
//! {"f:metadata":{"f:labels":{"f:app":{}}},
//!  "f:spec":{"f:containers":{"k:{\"name\":\"c\"}":{".":{},"f:image":{}}}}}
//! ```
//!
//! Nothing here knows of schemas; `crate::typed` builds sets from objects.

pub mod element;
pub mod set;

pub use element::PathElement;
pub use set::Set;

use serde_json::{Map, Value};

/// A path from an object's root.
pub type Path = Vec<PathElement>;

/// Formats a path as kube prints it in conflicts: `.data.a`, `.spec.ports[port=80,protocol="TCP"]`.
pub fn path_string(path: &[PathElement]) -> String {
    path.iter().map(ToString::to_string).collect()
}

/// Encodes a set as its FieldsV1 JSON text, byte for byte as kube writes it.
pub fn to_fields_v1(set: &Set) -> String {
    let mut out = String::with_capacity(256);
    out.push('{');
    write_contents(&mut out, set, false);
    out.push('}');
    out
}

/// Writes the contents of `set`'s object (without braces); `include_self` writes `".":{}`
/// first when the element holding this set is itself a member.
fn write_contents(out: &mut String, set: &Set, include_self: bool) {
    let mut first = true;
    let mut sep = |out: &mut String| {
        if !std::mem::take(&mut first) {
            out.push(',');
        }
    };
    if include_self && !set.is_empty() {
        sep(out);
        out.push_str("\".\":{}");
    }
    let mut members = set.members.iter().peekable();
    let mut children = set.children.iter().peekable();
    loop {
        // Members and children merged in element order; an element in both is written once.
        let next_member = members.peek().copied();
        let next_child = children.peek().map(|(pe, _)| *pe);
        let (pe, child, member) = match (next_member, next_child) {
            (None, None) => break,
            (Some(m), None) => {
                members.next();
                (m, None, true)
            }
            (None, Some(_)) => {
                let (pe, c) = children.next().expect("invariant: peeked");
                (pe, Some(c), false)
            }
            (Some(m), Some(c)) => match m.cmp(c) {
                std::cmp::Ordering::Less => {
                    members.next();
                    (m, None, true)
                }
                std::cmp::Ordering::Greater => {
                    let (pe, c) = children.next().expect("invariant: peeked");
                    (pe, Some(c), false)
                }
                std::cmp::Ordering::Equal => {
                    members.next();
                    let (pe, c) = children.next().expect("invariant: peeked");
                    (pe, Some(c), true)
                }
            },
        };
        sep(out);
        element::write_go_string(out, &pe.fields_v1_key());
        out.push_str(":{");
        if let Some(child) = child {
            write_contents(out, child, member);
        }
        out.push('}');
    }
}

/// Encodes a set as its FieldsV1 JSON value (the form stored inside an object).
pub fn to_fields_v1_value(set: &Set) -> Value {
    Value::Object(level_value(set, false))
}

fn level_value(set: &Set, include_self: bool) -> Map<String, Value> {
    let mut out = Map::new();
    if include_self && !set.is_empty() {
        out.insert(".".into(), Value::Object(Map::new()));
    }
    for m in &set.members {
        if !set.children.contains_key(m) {
            out.insert(m.fields_v1_key(), Value::Object(Map::new()));
        }
    }
    for (pe, child) in &set.children {
        out.insert(pe.fields_v1_key(), Value::Object(level_value(child, set.members.contains(pe))));
    }
    out
}

/// Decodes FieldsV1 JSON (as a parsed value) into a set.
///
/// # Errors
///
/// A message when the value is not an object of objects or a key does not parse (kube's
/// "error decoding set").
pub fn from_fields_v1(value: &Value) -> Result<Set, String> {
    let Value::Object(map) = value else {
        return Err("FieldsV1 is not an object".into());
    };
    let (set, _) = read_level(map)?;
    Ok(set.unwrap_or_default())
}

/// Reads one level: the set below it and whether the element holding it is a member (it
/// carries `"."`, or has nothing below it).
fn read_level(map: &Map<String, Value>) -> Result<(Option<Set>, bool), String> {
    let mut set: Option<Set> = None;
    let mut is_member = false;
    for (key, value) in map {
        if key == "." {
            is_member = true;
            continue;
        }
        let Some(pe) = PathElement::from_fields_v1_key(key)? else { continue };
        let Value::Object(inner) = value else {
            return Err(format!("parsing key as path element: {key} does not hold an object"));
        };
        let (grandchildren, child_is_member) = read_level(inner)?;
        let s = set.get_or_insert_with(Set::new);
        if child_is_member {
            s.members.insert(pe.clone());
        }
        if let Some(g) = grandchildren {
            if !g.is_empty() {
                s.children.insert(pe, g);
            }
        }
    }
    if set.is_none() {
        is_member = true;
    }
    Ok((set, is_member))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_v1_round_trips_with_self_markers() {
        let text = r#"{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"c\"}":{".":{},"f:image":{},"f:name":{}}},"f:finalizers":{"v:\"a\"":{}}}}"#;
        let set = from_fields_v1(&serde_json::from_str(text).expect("json")).expect("set");
        assert_eq!(to_fields_v1(&set), text);
        assert_eq!(to_fields_v1_value(&set), serde_json::from_str::<Value>(text).expect("json"));
        let labels = [PathElement::Field("metadata".into()), PathElement::Field("labels".into())];
        assert!(set.has(&labels));
        let image = [
            PathElement::Field("spec".into()),
            PathElement::Field("containers".into()),
            PathElement::Key(vec![("name".into(), json!("c"))]),
            PathElement::Field("image".into()),
        ];
        assert!(set.has(&image));
        assert_eq!(path_string(&image), r#".spec.containers[name="c"].image"#);
        assert_eq!(to_fields_v1(&Set::new()), "{}");
        assert!(from_fields_v1(&json!([])).is_err());
        assert!(from_fields_v1(&json!({"f:a": 1})).is_err());
    }
}
