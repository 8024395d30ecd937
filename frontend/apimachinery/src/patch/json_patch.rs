//! JSON Patch (RFC 6902, `application/json-patch+json`): a list of operations applied in order
//! to one document; any failing operation fails the whole patch and nothing is applied.

use serde_json::Value;

use super::error::PatchError;

/// kube-apiserver's bound on operations in one JSON patch (`maxJSONPatchOperations`); more is
/// 413, since each operation may copy the document.
pub const MAX_OPERATIONS: usize = 10_000;

/// kube-apiserver's bound on the bytes all `copy` operations of one JSON patch may add
/// (`JSONPatchMaxCopyBytes`, 3 MiB, the request body limit): without it each copy of an object
/// into itself doubles the document, and a 2 KB patch asks for gigabytes.
pub const MAX_COPY_BYTES: usize = 3 * 1024 * 1024;

/// Parses `patch` and applies it to `doc`.
///
/// # Errors
///
/// `Malformed` for a body that is not a list of operations, `TooManyOperations`, `Failed` for an
/// operation that does not apply (missing path, failed `test`).
pub fn apply(doc: &Value, patch: &[u8]) -> Result<Value, PatchError> {
    let ops: Value = super::nesting::parse(patch).map_err(PatchError::Malformed)?;
    let Value::Array(ops) = ops else {
        return Err(PatchError::Malformed(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch".into(),
        ));
    };
    if ops.len() > MAX_OPERATIONS {
        return Err(PatchError::TooManyOperations(ops.len()));
    }
    let mut doc = doc.clone();
    let mut copied = 0;
    for op in &ops {
        apply_op(&mut doc, op, &mut copied)?;
    }
    Ok(doc)
}

/// Counts the bytes of a value's compact JSON without building it.
struct ByteCount(usize);

impl std::io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Adds the encoded size of `v` to `copied` (what the patch's copies have added so far) and
/// refuses the copy once that passes [`MAX_COPY_BYTES`], before anything is cloned.
fn account_copy(v: &Value, copied: &mut usize) -> Result<(), PatchError> {
    let mut count = ByteCount(0);
    // Writing to a counter cannot fail; a value serde_json cannot encode counts as nothing.
    let _ = serde_json::to_writer(&mut count, v);
    *copied = copied.saturating_add(count.0);
    if *copied > MAX_COPY_BYTES {
        return Err(PatchError::Failed(format!(
            "Unable to complete the copy, the accumulated size increase of copy is {copied}, exceeding the limit {MAX_COPY_BYTES}"
        )));
    }
    Ok(())
}

fn apply_op(doc: &mut Value, op: &Value, copied: &mut usize) -> Result<(), PatchError> {
    let Value::Object(fields) = op else {
        return Err(PatchError::Malformed("a JSON patch operation must be an object".into()));
    };
    let name = fields.get("op").and_then(Value::as_str).unwrap_or("");
    let path = fields
        .get("path")
        .and_then(Value::as_str)
        .ok_or_else(|| PatchError::Failed(format!("operation {name:?} is missing path")))?;
    let value =
        || fields.get("value").cloned().ok_or_else(|| PatchError::Failed(format!("{name} operation has no value")));
    let from = || {
        fields
            .get("from")
            .and_then(Value::as_str)
            .ok_or_else(|| PatchError::Failed(format!("{name} operation does not have a from field")))
    };
    match name {
        "add" => add(doc, path, value()?),
        "remove" => remove(doc, path).map(drop),
        "replace" => {
            let v = value()?;
            let slot = lookup_mut(doc, path).ok_or_else(|| {
                PatchError::Failed(format!("replace operation does not apply: doc is missing key: {path}"))
            })?;
            *slot = v;
            Ok(())
        }
        "move" => {
            let from = from()?;
            if path.starts_with(from) && path[from.len()..].starts_with('/') {
                return Err(PatchError::Failed(format!("move operation cannot move {from} into its own child {path}")));
            }
            let v = remove(doc, from)?;
            add(doc, path, v)
        }
        "copy" => {
            let from = from()?;
            let v = lookup(doc, from).ok_or_else(|| {
                PatchError::Failed(format!("copy operation does not apply: doc is missing from path: {from}"))
            })?;
            account_copy(v, copied)?;
            let v = v.clone();
            add(doc, path, v)
        }
        "test" => {
            let expected = fields.get("value").cloned().unwrap_or(Value::Null);
            match lookup(doc, path) {
                Some(actual) if *actual == expected => Ok(()),
                None if expected.is_null() => Ok(()),
                _ => Err(PatchError::Failed(format!("testing value {path} failed: test failed"))),
            }
        }
        other => Err(PatchError::Failed(format!("unexpected kind: {other}"))),
    }
}

/// Splits a JSON pointer into unescaped tokens (`~1` is `/`, `~0` is `~`).
fn tokens(path: &str) -> Result<Vec<String>, PatchError> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Err(PatchError::Failed(format!("invalid JSON pointer: {path:?} does not start with /")));
    };
    Ok(rest.split('/').map(|t| t.replace("~1", "/").replace("~0", "~")).collect())
}

fn index(token: &str, len: usize, allow_end: bool) -> Option<usize> {
    if token.len() > 1 && token.starts_with('0') {
        return None;
    }
    let i: usize = token.parse().ok()?;
    (i < len || (allow_end && i == len)).then_some(i)
}

fn lookup<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = doc;
    for t in tokens(path).ok()? {
        cur = match cur {
            Value::Object(m) => m.get(&t)?,
            Value::Array(a) => a.get(index(&t, a.len(), false)?)?,
            _ => return None,
        };
    }
    Some(cur)
}

fn lookup_mut<'a>(doc: &'a mut Value, path: &str) -> Option<&'a mut Value> {
    let mut cur = doc;
    for t in tokens(path).ok()? {
        cur = match cur {
            Value::Object(m) => m.get_mut(&t)?,
            Value::Array(a) => {
                let i = index(&t, a.len(), false)?;
                a.get_mut(i)?
            }
            _ => return None,
        };
    }
    Some(cur)
}

/// The parent container of `path` and the last token.
fn parent<'a>(doc: &'a mut Value, path: &str, op: &str) -> Result<(&'a mut Value, String), PatchError> {
    let mut toks = tokens(path)?;
    let last =
        toks.pop().ok_or_else(|| PatchError::Failed(format!("{op} operation does not apply to the whole document")))?;
    let parent_path: String = toks.iter().map(|t| format!("/{}", t.replace('~', "~0").replace('/', "~1"))).collect();
    let container = lookup_mut(doc, &parent_path)
        .ok_or_else(|| PatchError::Failed(format!("{op} operation does not apply: doc is missing path: \"{path}\"")))?;
    Ok((container, last))
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), PatchError> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (container, last) = parent(doc, path, "add")?;
    match container {
        Value::Object(m) => {
            m.insert(last, value);
            Ok(())
        }
        Value::Array(a) => {
            let i =
                if last == "-" { a.len() } else { index(&last, a.len(), true).ok_or_else(|| out_of_bounds(path))? };
            a.insert(i, value);
            Ok(())
        }
        _ => Err(PatchError::Failed(format!("add operation does not apply: doc is missing path: \"{path}\""))),
    }
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, PatchError> {
    let (container, last) = parent(doc, path, "remove")?;
    let missing = || PatchError::Failed(format!("remove operation does not apply: doc is missing path: \"{path}\""));
    match container {
        Value::Object(m) => m.remove(&last).ok_or_else(missing),
        Value::Array(a) => {
            let i = index(&last, a.len(), false).ok_or_else(|| out_of_bounds(path))?;
            Ok(a.remove(i))
        }
        _ => Err(missing()),
    }
}

fn out_of_bounds(path: &str) -> PatchError {
    PatchError::Failed(format!("Unable to access invalid index: {path}"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run(doc: &Value, patch: &Value) -> Result<Value, PatchError> {
        apply(doc, patch.to_string().as_bytes())
    }

    #[test]
    fn operations_apply_in_order() {
        let doc = json!({"a": {"b": 1}, "l": [1, 2, 3], "x~y": 1, "p/q": 2});
        let out = run(
            &doc,
            &json!([
                {"op": "add", "path": "/a/c", "value": 2},
                {"op": "remove", "path": "/a/b"},
                {"op": "replace", "path": "/l/0", "value": 9},
                {"op": "add", "path": "/l/-", "value": 4},
                {"op": "add", "path": "/l/1", "value": 8},
                {"op": "move", "from": "/x~0y", "path": "/moved"},
                {"op": "copy", "from": "/p~1q", "path": "/copied"},
                {"op": "test", "path": "/copied", "value": 2},
            ]),
        )
        .expect("applies");
        assert_eq!(out, json!({"a": {"c": 2}, "l": [9, 8, 2, 3, 4], "moved": 1, "p/q": 2, "copied": 2}));
    }

    #[test]
    fn a_failing_operation_fails_the_patch() {
        let doc = json!({"a": 1});
        assert_eq!(
            run(&doc, &json!([{"op": "test", "path": "/a", "value": 2}])),
            Err(PatchError::Failed("testing value /a failed: test failed".into()))
        );
        assert!(matches!(run(&doc, &json!([{"op": "remove", "path": "/b"}])), Err(PatchError::Failed(_))));
        assert!(matches!(
            run(&doc, &json!([{"op": "replace", "path": "/b/c", "value": 1}])),
            Err(PatchError::Failed(_))
        ));
        assert!(matches!(
            run(&json!({"l": [1]}), &json!([{"op": "add", "path": "/l/5", "value": 1}])),
            Err(PatchError::Failed(_))
        ));
        assert!(matches!(
            run(&json!({"l": [1]}), &json!([{"op": "add", "path": "/l/01", "value": 1}])),
            Err(PatchError::Failed(_))
        ));
        assert!(matches!(run(&doc, &json!([{"op": "jump", "path": "/a"}])), Err(PatchError::Failed(_))));
        assert!(matches!(
            run(&json!({"a": {"b": 1}}), &json!([{"op": "move", "from": "/a", "path": "/a/c"}])),
            Err(PatchError::Failed(_))
        ));
    }

    #[test]
    fn copies_stop_at_the_accumulated_copy_limit() {
        // An object copied into itself doubles at every step: 32 steps would be 4 GiB.
        let mut ops = vec![json!({"op": "add", "path": "/a", "value": {"x": "y".repeat(1000)}})];
        for n in 0..32 {
            ops.push(json!({"op": "copy", "from": "/a", "path": format!("/a/b{n}")}));
        }
        let Err(PatchError::Failed(m)) = run(&json!({}), &Value::Array(ops)) else {
            panic!("the patch was not refused")
        };
        assert!(m.starts_with("Unable to complete the copy, the accumulated size increase of copy is "), "{m}");
        assert!(m.ends_with(&format!("exceeding the limit {MAX_COPY_BYTES}")), "{m}");
        // Copies within the limit apply.
        let ops = json!([{"op": "add", "path": "/a", "value": [1]}, {"op": "copy", "from": "/a", "path": "/b"}]);
        assert_eq!(run(&json!({}), &ops).expect("applies"), json!({"a": [1], "b": [1]}));
    }

    #[test]
    fn malformed_patches_are_told_apart_from_failing_ones() {
        assert!(matches!(apply(&json!({}), b"{not json"), Err(PatchError::Malformed(_))));
        assert!(matches!(apply(&json!({}), br#"{"op":"add"}"#), Err(PatchError::Malformed(_))));
        let many: Vec<Value> = (0..=MAX_OPERATIONS).map(|_| json!({"op": "test", "path": ""})).collect();
        assert_eq!(run(&json!({}), &Value::Array(many)), Err(PatchError::TooManyOperations(MAX_OPERATIONS + 1)));
    }
}
