//! Strategic merge patch (`application/strategic-merge-patch+json`), kube's own format: a merge
//! patch whose lists follow the object type's tags (`protobuf::PatchMeta`) instead of always
//! being replaced.
//!
//! * Objects merge key by key; `null` deletes a key.
//! * A list whose field is tagged `merge` with a merge key (containers by `name`, ports by
//!   `containerPort`, ...) merges element by element, matched on that key; a `merge` list of
//!   primitives (finalizers) is merged as a set. Every other list is replaced, as are fields the
//!   schema does not know (which is what kube does for them too).
//! * Directives: `$patch: replace|delete|merge` on an object or as a list element,
//!   `$retainKeys` (drop every key of the original not listed), `$deleteFromPrimitiveList/<f>`,
//!   `$setElementOrder/<f>` (the order the client wants the merged list in). kubectl apply sends
//!   all of these.
//!
//! `$setElementOrder` differs from kube in one detail: elements only the server has (not named
//! by the order list) keep their relative order but go after the ordered ones, where kube
//! interleaves them by their old positions.

use serde_json::{Map, Value};

use super::error::PatchError;
use crate::protobuf::{Field, FieldType, Message, PatchMeta};

const PATCH: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";

/// Parses `patch` and applies it to `doc` following `schema`'s tags.
///
/// # Errors
///
/// `Malformed` for a body that is not a JSON object or a directive of the wrong shape,
/// `Failed` for a merge-list element without its merge key.
pub fn apply(doc: &Value, patch: &[u8], schema: Option<&'static Message>) -> Result<Value, PatchError> {
    let patch: Value = super::nesting::parse(patch).map_err(PatchError::Malformed)?;
    let Value::Object(patch) = patch else {
        return Err(PatchError::Malformed("json: cannot unmarshal into a map: the patch is not an object".into()));
    };
    let mut out = match doc {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    merge_map(&mut out, &patch, schema)?;
    Ok(Value::Object(out))
}

/// The field `name` of `schema`, looking into embedded (inline) structs as JSON does.
fn field<'a>(schema: Option<&'a Message>, name: &str) -> Option<&'a Field> {
    let fields = schema?.fields;
    fields.iter().find(|f| f.json == name).or_else(|| {
        fields.iter().filter(|f| f.json.is_empty()).find_map(|f| match f.ty {
            FieldType::Message(m) => field(Some(m), name),
            _ => None,
        })
    })
}

fn child_schema(field: Option<&Field>) -> Option<&'static Message> {
    match field?.ty {
        FieldType::Message(m) => Some(m),
        _ => None,
    }
}

fn directive(map: &Map<String, Value>) -> Result<Option<&str>, PatchError> {
    match map.get(PATCH) {
        None => Ok(None),
        Some(Value::String(s)) if matches!(s.as_str(), "replace" | "delete" | "merge") => Ok(Some(s)),
        Some(other) => Err(PatchError::Malformed(format!("unknown patch type: {other} in map"))),
    }
}

/// Merges `patch` into `original`. Returns whether the patch asked for the whole map's deletion.
fn merge_map(
    original: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    schema: Option<&'static Message>,
) -> Result<bool, PatchError> {
    match directive(patch)? {
        Some("delete") => {
            original.clear();
            return Ok(true);
        }
        Some("replace") => {
            original.clear();
            let rest: Map<String, Value> =
                patch.iter().filter(|(k, _)| *k != PATCH).map(|(k, v)| (k.clone(), v.clone())).collect();
            merge_map(original, &rest, schema)?;
            return Ok(false);
        }
        _ => {}
    }
    if let Some(keys) = patch.get(RETAIN_KEYS) {
        let Value::Array(keys) = keys else {
            return Err(PatchError::Malformed("invalid patch: $retainKeys must be a list of strings".into()));
        };
        let keys: Vec<&str> = keys.iter().filter_map(Value::as_str).collect();
        for k in patch.keys().filter(|k| !k.starts_with('$')) {
            if !keys.contains(&k.as_str()) {
                return Err(PatchError::Failed(format!(
                    "The list of retained keys does not contain the key {k:?}, which is in the patch"
                )));
            }
        }
        original.retain(|k, _| keys.contains(&k.as_str()));
    }
    for (k, remove) in patch {
        let Some(name) = k.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) else { continue };
        let Value::Array(remove) = remove else {
            return Err(PatchError::Malformed(format!("invalid patch: {k} must be a list")));
        };
        if let Some(Value::Array(list)) = original.get_mut(name) {
            list.retain(|v| !remove.contains(v));
        }
    }
    for (k, pv) in patch {
        if k.starts_with('$') {
            continue;
        }
        if pv.is_null() {
            original.remove(k);
            continue;
        }
        let f = field(schema, k);
        let child = child_schema(f);
        match (original.get_mut(k), pv) {
            (Some(Value::Object(o)), Value::Object(p)) => {
                if merge_map(o, p, child)? {
                    original.remove(k);
                }
            }
            (Some(Value::Array(o)), Value::Array(p)) => {
                merge_list(o, p, f.map(|f| f.patch).unwrap_or_default(), child)?
            }
            _ => match from_patch(pv, f, child)? {
                Some(v) => {
                    original.insert(k.clone(), v);
                }
                None => {
                    original.remove(k);
                }
            },
        }
    }
    for (k, order) in patch {
        let Some(name) = k.strip_prefix(SET_ELEMENT_ORDER) else { continue };
        let Value::Array(order) = order else {
            return Err(PatchError::Malformed(format!("invalid patch: {k} must be a list")));
        };
        let meta = field(schema, name).map(|f| f.patch).unwrap_or_default();
        if let Some(Value::Array(list)) = original.get_mut(name) {
            reorder(list, order, meta.merge_key);
        }
    }
    Ok(false)
}

/// The value a patch sets where the original has none (or one of another type): the patch's
/// own value with its directives carried out against nothing. `None` when it deletes itself.
fn from_patch(pv: &Value, f: Option<&Field>, child: Option<&'static Message>) -> Result<Option<Value>, PatchError> {
    match pv {
        Value::Object(p) => {
            let mut out = Map::new();
            let deleted = merge_map(&mut out, p, child)?;
            Ok((!deleted).then_some(Value::Object(out)))
        }
        Value::Array(p) => {
            let mut out = Vec::new();
            merge_list(&mut out, p, f.map(|f| f.patch).unwrap_or_default(), child)?;
            Ok(Some(Value::Array(out)))
        }
        other => Ok(Some(other.clone())),
    }
}

fn element_directive(v: &Value) -> Option<&str> {
    v.as_object().and_then(|m| m.get(PATCH)).and_then(Value::as_str)
}

fn merge_list(
    original: &mut Vec<Value>,
    patch: &[Value],
    meta: PatchMeta,
    elem: Option<&'static Message>,
) -> Result<(), PatchError> {
    let replace_all = !meta.merges() || patch.iter().any(|e| element_directive(e) == Some("replace"));
    if replace_all {
        original.clear();
        for e in patch.iter().filter(|e| element_directive(e) != Some("replace")) {
            if let Some(v) = from_patch(e, None, elem)? {
                original.push(v);
            }
        }
        return Ok(());
    }
    let key = meta.merge_key;
    for pe in patch {
        let Value::Object(p) = pe else {
            // A primitive list merges as a set.
            if !original.contains(pe) {
                original.push(pe.clone());
            }
            continue;
        };
        if key.is_empty() {
            if !original.contains(pe) {
                original.push(pe.clone());
            }
            continue;
        }
        let Some(id) = p.get(key) else {
            return Err(PatchError::Failed(format!(
                "map: {} does not contain declared merge key: {key}",
                Value::Object(p.clone())
            )));
        };
        let at = original.iter().position(|o| o.get(key) == Some(id));
        match (directive(p)?, at) {
            (Some("delete"), Some(i)) => {
                original.remove(i);
            }
            (Some("delete"), None) => {}
            (_, Some(i)) => {
                if let Value::Object(o) = &mut original[i] {
                    if merge_map(o, p, elem)? {
                        original.remove(i);
                    }
                } else if let Some(v) = from_patch(pe, None, elem)? {
                    original[i] = v;
                }
            }
            (_, None) => {
                if let Some(v) = from_patch(pe, None, elem)? {
                    original.push(v);
                }
            }
        }
    }
    Ok(())
}

/// Puts `list` in the order `order` names (elements, or `{key: value}` stubs of them); the
/// elements it does not name follow in their present order.
fn reorder(list: &mut Vec<Value>, order: &[Value], key: &str) {
    let position = |v: &Value| {
        order.iter().position(|o| match (o, key.is_empty()) {
            (Value::Object(stub), false) => stub.get(key).is_some() && stub.get(key) == v.get(key),
            _ => o == v,
        })
    };
    let mut named: Vec<(usize, Value)> = Vec::new();
    let mut rest = Vec::new();
    for v in list.drain(..) {
        match position(&v) {
            Some(i) => named.push((i, v)),
            None => rest.push(v),
        }
    }
    named.sort_by_key(|(i, _)| *i);
    list.extend(named.into_iter().map(|(_, v)| v));
    list.extend(rest);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::protobuf::{field as f, repeated, FieldType as T};

    const fn tagged(mut field: Field, strategy: &'static str, merge_key: &'static str) -> Field {
        field.patch = PatchMeta { strategy, merge_key };
        field
    }

    static PORT: Message = Message { fields: &[f(3, "containerPort", T::Int), f(4, "protocol", T::String)] };
    static CONTAINER: Message = Message {
        fields: &[
            f(1, "name", T::String),
            f(2, "image", T::String),
            tagged(repeated(6, "ports", T::Message(&PORT)), "merge", "containerPort"),
            repeated(3, "args", T::String),
        ],
    };
    static STRATEGY: Message = Message { fields: &[f(1, "type", T::String), f(2, "rollingUpdate", T::String)] };
    static SPEC: Message = Message {
        fields: &[
            tagged(repeated(2, "containers", T::Message(&CONTAINER)), "merge", "name"),
            tagged(repeated(1, "volumes", T::Message(&CONTAINER)), "merge,retainKeys", "name"),
            tagged(f(4, "strategy", T::Message(&STRATEGY)), "retainKeys", ""),
        ],
    };
    static META: Message = Message { fields: &[tagged(repeated(14, "finalizers", T::String), "merge", "")] };
    static OBJ: Message = Message { fields: &[f(1, "metadata", T::Message(&META)), f(2, "spec", T::Message(&SPEC))] };

    fn run(doc: &Value, patch: &Value) -> Result<Value, PatchError> {
        apply(doc, patch.to_string().as_bytes(), Some(&OBJ))
    }

    fn pod() -> Value {
        json!({
            "metadata": {"name": "p", "labels": {"a": "1", "b": "2"}, "finalizers": ["x", "y"]},
            "spec": {"containers": [
                {"name": "web", "image": "nginx:1", "ports": [{"containerPort": 80}], "args": ["-a"]},
                {"name": "side", "image": "busybox"},
            ]},
        })
    }

    #[test]
    fn lists_merge_by_their_merge_key_and_maps_key_by_key() {
        let out = run(
            &pod(),
            &json!({
                "metadata": {"labels": {"a": null, "c": "3"}, "finalizers": ["z", "x"]},
                "spec": {"containers": [
                    {"name": "web", "image": "nginx:2", "ports": [{"containerPort": 443}], "args": ["-b"]},
                    {"name": "new", "image": "redis"},
                ]},
            }),
        )
        .expect("applies");
        assert_eq!(out["metadata"]["labels"], json!({"b": "2", "c": "3"}));
        assert_eq!(out["metadata"]["finalizers"], json!(["x", "y", "z"]));
        assert_eq!(
            out["spec"]["containers"],
            json!([
                // Merge-keyed lists merge recursively; untagged lists (args) are replaced.
                {"name": "web", "image": "nginx:2", "ports": [{"containerPort": 80}, {"containerPort": 443}], "args": ["-b"]},
                {"name": "side", "image": "busybox"},
                {"name": "new", "image": "redis"},
            ])
        );
    }

    #[test]
    fn without_a_schema_every_list_is_replaced() {
        let out = apply(&pod(), br#"{"spec":{"containers":[{"name":"only"}]}}"#, None).expect("applies");
        assert_eq!(out["spec"]["containers"], json!([{"name": "only"}]));
    }

    #[test]
    fn patch_directives_delete_replace_and_merge() {
        let out =
            run(&pod(), &json!({"spec": {"containers": [{"name": "side", "$patch": "delete"}]}})).expect("applies");
        assert_eq!(out["spec"]["containers"].as_array().map(Vec::len), Some(1));
        assert_eq!(out["spec"]["containers"][0]["name"], "web");

        let out =
            run(&pod(), &json!({"spec": {"containers": [{"name": "solo", "image": "x"}, {"$patch": "replace"}]}}))
                .expect("applies");
        assert_eq!(out["spec"]["containers"], json!([{"name": "solo", "image": "x"}]));

        let out = run(&pod(), &json!({"metadata": {"labels": {"$patch": "replace", "only": "one"}}})).expect("applies");
        assert_eq!(out["metadata"]["labels"], json!({"only": "one"}));

        let out = run(&pod(), &json!({"metadata": {"labels": {"$patch": "delete"}}})).expect("applies");
        assert!(out["metadata"].get("labels").is_none(), "{out}");

        let err = run(&pod(), &json!({"metadata": {"labels": {"$patch": "explode"}}}));
        assert!(matches!(err, Err(PatchError::Malformed(_))), "{err:?}");
    }

    #[test]
    fn delete_from_primitive_list_and_set_element_order() {
        let out = run(
            &pod(),
            &json!({
                "metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]},
                "spec": {
                    "$setElementOrder/containers": [{"name": "side"}, {"name": "web"}],
                    "containers": [{"name": "web", "image": "nginx:3"}],
                },
            }),
        )
        .expect("applies");
        assert_eq!(out["metadata"]["finalizers"], json!(["y"]));
        let names: Vec<&str> =
            out["spec"]["containers"].as_array().into_iter().flatten().filter_map(|c| c["name"].as_str()).collect();
        assert_eq!(names, ["side", "web"]);
        assert_eq!(out["spec"]["containers"][1]["image"], "nginx:3");
    }

    #[test]
    fn retain_keys_drops_what_the_client_no_longer_sets() {
        let doc = json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": "25%"}}});
        let out =
            run(&doc, &json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}})).expect("applies");
        assert_eq!(out["spec"]["strategy"], json!({"type": "Recreate"}));
        let err = run(&doc, &json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": "1"}}}));
        assert!(matches!(err, Err(PatchError::Failed(_))), "{err:?}");
    }

    #[test]
    fn merge_elements_need_their_key_and_bodies_must_be_objects() {
        let err = run(&pod(), &json!({"spec": {"containers": [{"image": "no-name"}]}}));
        assert!(matches!(err, Err(PatchError::Failed(m)) if m.contains("does not contain declared merge key: name")));
        assert!(matches!(apply(&pod(), b"[1]", Some(&OBJ)), Err(PatchError::Malformed(_))));
        assert!(matches!(apply(&pod(), b"{", Some(&OBJ)), Err(PatchError::Malformed(_))));
    }

    #[test]
    fn fields_the_original_lacks_are_built_from_the_patch_without_directives() {
        let out = run(
            &json!({"metadata": {"name": "p"}}),
            &json!({"spec": {"containers": [{"name": "a", "$patch": "merge"}]}}),
        )
        .expect("applies");
        assert_eq!(out["spec"]["containers"], json!([{"name": "a"}]));
    }
}
