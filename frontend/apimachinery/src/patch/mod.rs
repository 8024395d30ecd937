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
pub mod strategic;

pub use error::PatchError;

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
/// As [`PatchError`].
pub fn apply(ty: PatchType, doc: &Value, patch: &[u8], schema: Option<&'static Message>) -> Result<Value, PatchError> {
    match ty {
        PatchType::Json => json_patch::apply(doc, patch),
        PatchType::Merge => merge_patch::apply(doc, patch),
        PatchType::Strategic => strategic::apply(doc, patch, schema),
        PatchType::Apply => Err(PatchError::Malformed("an apply patch is merged by the field manager".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
