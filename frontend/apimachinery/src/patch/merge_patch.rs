//! JSON Merge Patch (RFC 7386, `application/merge-patch+json`): objects merge key by key, `null`
//! deletes, anything else (lists included) replaces.

use serde_json::Value;

use super::error::PatchError;

/// Parses `patch` and merges it into `doc`.
///
/// # Errors
///
/// `Malformed` when the body is not JSON.
pub fn apply(doc: &Value, patch: &[u8]) -> Result<Value, PatchError> {
    let patch: Value = super::nesting::parse(patch).map_err(PatchError::Malformed)?;
    let mut out = doc.clone();
    merge(&mut out, &patch);
    Ok(out)
}

/// Merges `patch` into `target` in place.
pub fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    let Value::Object(map) = target else { return };
    for (k, v) in patch {
        if v.is_null() {
            map.remove(k);
        } else {
            merge(map.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn rfc_7386_examples() {
        let doc = json!({"title": "Goodbye!", "author": {"givenName": "John", "familyName": "Doe"}, "tags": ["example", "sample"], "content": "x"});
        let patch = json!({"title": "Hello!", "phoneNumber": "+01-123-456-7890", "author": {"familyName": null}, "tags": ["example"]});
        let out = apply(&doc, patch.to_string().as_bytes()).expect("merges");
        assert_eq!(
            out,
            json!({"title": "Hello!", "author": {"givenName": "John"}, "tags": ["example"], "content": "x", "phoneNumber": "+01-123-456-7890"})
        );
        assert_eq!(apply(&json!({"a": "b"}), br#"{"a":{"b":"c"}}"#).expect("merges"), json!({"a": {"b": "c"}}));
        assert_eq!(apply(&json!({"a": [{"b": "c"}]}), br#"{"a":[1]}"#).expect("merges"), json!({"a": [1]}));
    }

    #[test]
    fn malformed_json_is_refused() {
        assert!(matches!(apply(&json!({}), b"{\"a\":"), Err(PatchError::Malformed(_))));
    }
}
