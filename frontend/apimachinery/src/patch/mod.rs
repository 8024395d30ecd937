//! PATCH bodies: the three formats kube-apiserver applies to an object's current JSON.
//!
//! * [`json_patch`]: RFC 6902 operations (`application/json-patch+json`).
//! * [`merge_patch`]: RFC 7386 (`application/merge-patch+json`).
//! * [`strategic`]: kube's strategic merge patch (`application/strategic-merge-patch+json`),
//!   driven by the kind's schema tags; what `kubectl apply`, `label`, `annotate` and
//!   `set image` send for built-in kinds.
//!
//! Server-side apply (`application/apply-patch+yaml`, [`PatchType::Apply`]) is not a patch of
//! a document: the server merges it with field ownership (`crate::managed_fields`), so
//! [`apply`] refuses it.
//!
//! Applying a patch is pure (value in, value out); the server's registry reads the object,
//! applies the patch and writes the result through the same path as an update.

pub mod error;
pub mod json_patch;
pub mod merge_patch;
mod nesting;
pub mod strategic;

pub use error::PatchError;
pub use nesting::{depth, MAX_RESULT_DEPTH};

use serde_json::Value;

use crate::protobuf::Message;

/// The patch formats served, as kube lists them in a 415 answer.
pub const SUPPORTED: &str = "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml";

/// A patch format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// RFC 6902.
    Json,
    /// RFC 7386.
    Merge,
    /// kube's strategic merge patch.
    Strategic,
    /// Server-side apply: a YAML (or JSON) object, the applier's configuration.
    Apply,
}

impl PatchType {
    /// Picks the format from a `Content-Type` header; `None` for anything else (server-side
    /// apply included), which the server answers with 415 listing [`SUPPORTED`].
    pub fn from_content_type(content_type: &str) -> Option<PatchType> {
        match content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase().as_str() {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/apply-patch+yaml" => Some(PatchType::Apply),
            _ => None,
        }
    }
}

/// Applies `patch` of type `ty` to `doc`; strategic merges follow `schema`.
///
/// # Errors
///
/// As [`PatchError`]; `TooDeep` when the result nests deeper than [`MAX_RESULT_DEPTH`].
pub fn apply(ty: PatchType, doc: &Value, patch: &[u8], schema: Option<&'static Message>) -> Result<Value, PatchError> {
    let out = match ty {
        PatchType::Json => json_patch::apply(doc, patch),
        PatchType::Merge => merge_patch::apply(doc, patch),
        PatchType::Strategic => strategic::apply(doc, patch, schema),
        PatchType::Apply => Err(PatchError::Malformed("an apply patch is merged by the field manager".into())),
    }?;
    match depth(&out) {
        d if d > MAX_RESULT_DEPTH => Err(PatchError::TooDeep(d)),
        _ => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `levels` nested objects `{"a":{"a":...}}` around `inner`.
    fn nested(levels: usize, inner: Value) -> Value {
        (0..levels).fold(inner, |v, _| serde_json::json!({ "a": v }))
    }

    #[test]
    fn a_patch_cannot_build_an_object_deeper_than_the_store_reads() {
        // A 100-deep value added at the bottom of a 100-deep object: each alone is fine.
        let doc = nested(100, Value::Null);
        let path = "/a".repeat(100);
        let body = serde_json::json!([{"op": "add", "path": path, "value": nested(100, Value::Null)}]).to_string();
        assert_eq!(apply(PatchType::Json, &doc, body.as_bytes(), None), Err(PatchError::TooDeep(200)));
        let shallow = serde_json::json!([{"op": "add", "path": path, "value": nested(10, Value::Null)}]).to_string();
        let out = apply(PatchType::Json, &doc, shallow.as_bytes(), None).expect("110 levels apply");
        assert_eq!(depth(&out), 110);
        assert_eq!(depth(&serde_json::json!({"a": [1, {}], "b": 2})), 3);
    }

    #[test]
    fn a_patch_nested_past_the_parsers_limit_is_refused_by_name() {
        let deep = format!("{}{}", "{\"a\":".repeat(5000), "}".repeat(5000));
        for ty in [PatchType::Json, PatchType::Merge, PatchType::Strategic] {
            let err = apply(ty, &serde_json::json!({}), deep.as_bytes(), None).expect_err("too deep");
            let PatchError::Malformed(text) = err else { panic!("{ty:?}: {err:?}") };
            assert!(text.starts_with("error decoding patch: exceeded max depth of 127 at line 1 column "), "{text}");
        }
    }

    #[test]
    fn content_types_pick_the_format() {
        assert_eq!(PatchType::from_content_type("application/merge-patch+json; charset=utf-8"), Some(PatchType::Merge));
        assert_eq!(PatchType::from_content_type("application/json-patch+json"), Some(PatchType::Json));
        assert_eq!(PatchType::from_content_type("application/strategic-merge-patch+json"), Some(PatchType::Strategic));
        assert_eq!(PatchType::from_content_type("application/apply-patch+yaml"), Some(PatchType::Apply));
        for other in ["application/apply-patch+cbor", "application/json", ""] {
            assert_eq!(PatchType::from_content_type(other), None, "{other}");
        }
    }
}
