//! [`Admission`]: validation that a server other than the one owning a kind adds to its writes
//! (kube's validating admission plugins). The built-in API stores CustomResourceDefinitions;
//! the apiextensions server, which knows what a valid one is, admits them through this seam,
//! so the built-in API never depends on it.
//!
//! Admission runs after the kind's own strategy on create and update; its findings join the
//! strategy's in one 422, as kube reports every cause at once.

use super::strategy::Object;
use super::ResourceKind;
use crate::error::{ApiError, FieldError};

/// Validation of another server's kind.
pub trait Admission: Send + Sync + std::fmt::Debug {
    /// Whether objects of `kind` are looked at.
    fn handles(&self, kind: &ResourceKind) -> bool;

    /// Validates a new object (after defaulting); empty admits it.
    fn validate_create(&self, obj: &Object) -> Vec<FieldError>;

    /// Validates an update of `old` to `new`; empty admits it.
    fn validate_update(&self, new: &Object, old: &Object) -> Vec<FieldError>;

    /// The finalizers the first DELETE of `obj` adds, so the object stays (marked for
    /// deletion) until the plugin's owner has cleaned up after it (kube's definitions get
    /// `customresourcecleanup.apiextensions.k8s.io`).
    fn finalizers_on_delete(&self, _obj: &Object) -> Vec<String> {
        Vec::new()
    }
}

/// Folds admission findings into the strategy's outcome: one `Invalid` with every cause.
pub(crate) fn join(
    kind: &ResourceKind,
    name: &str,
    prepared: Result<(), ApiError>,
    findings: Vec<FieldError>,
) -> Result<(), ApiError> {
    match prepared {
        Ok(()) if findings.is_empty() => Ok(()),
        Ok(()) => Err(ApiError::Invalid {
            group: kind.group.into(),
            kind: kind.kind.into(),
            name: name.into(),
            causes: findings,
        }),
        Err(ApiError::Invalid { group, kind, name, mut causes }) => {
            causes.extend(findings);
            Err(ApiError::Invalid { group, kind, name, causes })
        }
        Err(e) => Err(e),
    }
}
