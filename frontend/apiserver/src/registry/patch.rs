//! PATCH on an object, its `/status` or its `/scale` (kube's `patchResource`): read the object,
//! apply the patch to its served JSON, then write the result through the same checks as an
//! update (defaulting, validation, generation, finalizers, admission), retrying when the object
//! changes underneath, as kube does.
//!
//! A `metadata.resourceVersion` the patch sets is a precondition: if the patched object's
//! resourceVersion is not the current one the answer is 409 Conflict.

use serde_json::Value;

use super::managed;
use super::object::{self, meta_str, FieldValidation};
use super::scale::{rescaled, scale_of};
use super::strategy::{get_path, Object};
use super::{ResourceKind, Store};
use crate::error::{ApiError, FieldError, OPTIMISTIC_LOCK_MESSAGE};
use crate::patch::{self, PatchType};

/// The patch types kube lists when it refuses a strategic merge patch of a kind that has no
/// patch strategy (custom resources).
pub const NON_STRATEGIC_PATCH_TYPES: &str =
    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml";

/// What a PATCH addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchTarget {
    /// The object itself (status changes are dropped for kinds with `/status`).
    Object,
    /// `/status`: only `status` changes.
    Status,
    /// `/scale`: the patch applies to the `Scale` view; only `spec.replicas` changes.
    Scale,
}

/// A PATCH request.
#[derive(Debug, Clone, Copy)]
pub struct PatchRequest<'a> {
    /// What is patched.
    pub target: PatchTarget,
    /// The patch format.
    pub patch_type: PatchType,
    /// The patch body.
    pub body: &'a [u8],
    /// `fieldValidation` for unknown fields in the patched object.
    pub validation: FieldValidation,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// Who patches (`fieldManager`, else from the User-Agent).
    pub manager: &'a str,
    /// `force=true` (apply patches only).
    pub force: bool,
}

fn conflict(kind: &ResourceKind, name: &str) -> ApiError {
    ApiError::Conflict {
        group: kind.group.into(),
        resource: kind.resource.into(),
        name: name.into(),
        reason: OPTIMISTIC_LOCK_MESSAGE.into(),
    }
}

/// Checks the patched object still names the object patched and that a resourceVersion it
/// carries is the current one.
pub(crate) fn check_identity(kind: &ResourceKind, patched: &Object, old: &Object, name: &str) -> Result<(), ApiError> {
    let patched_name = meta_str(patched, "name");
    if patched_name != name {
        return Err(ApiError::BadRequest(format!(
            "the name of the object ({patched_name}) does not match the name on the URL ({name})"
        )));
    }
    let rv = meta_str(patched, "resourceVersion");
    if !rv.is_empty() && rv != meta_str(old, "resourceVersion") {
        return Err(conflict(kind, name));
    }
    Ok(())
}

impl Store {
    /// Applies a patch; returns the written object (or `Scale`) and the warnings to send.
    ///
    /// # Errors
    ///
    /// `NotFound` (PATCH never creates), `BadRequest` for malformed patches or strict
    /// unknown fields, `Invalid` for patches that do not apply or results that do not
    /// validate, `Conflict` for a stale resourceVersion.
    pub async fn patch(
        &self,
        kind: &ResourceKind,
        namespace: &str,
        name: &str,
        req: PatchRequest<'_>,
    ) -> Result<(Value, Vec<String>), ApiError> {
        if req.patch_type == PatchType::Strategic && !kind.strategic_merge && req.target != PatchTarget::Scale {
            return Err(ApiError::UnsupportedMediaType(NON_STRATEGIC_PATCH_TYPES.into()));
        }
        let mut warnings = Vec::new();
        let mut out = self
            .guaranteed_update(kind, namespace, name, None, req.dry_run, |old| {
                let mut current = old.clone();
                object::to_served_version(kind, &mut current)?;
                match req.target {
                    PatchTarget::Scale => {
                        let mut scale = scale_of(kind, old);
                        managed::scale_managers(&**self.kinds(), kind, old, &mut scale);
                        let patched = patch::apply(req.patch_type, &scale, req.body, None)?;
                        let Value::Object(patched) = patched else {
                            return Err(ApiError::BadRequest("the patched Scale is not an object".into()));
                        };
                        check_identity(kind, &patched, old, name)?;
                        let replicas = match get_path(&patched, &["spec", "replicas"]) {
                            None | Some(Value::Null) => 0,
                            Some(v) => v.as_i64().filter(|r| *r >= 0).ok_or_else(|| ApiError::Invalid {
                                group: "autoscaling".into(),
                                kind: "Scale".into(),
                                name: name.into(),
                                causes: vec![FieldError::invalid(
                                    "spec.replicas",
                                    v.clone(),
                                    "must be greater than or equal to 0",
                                )],
                            })?,
                        };
                        let mut new = rescaled(kind, old, replicas, namespace)?;
                        let patched = Value::Object(patched);
                        managed::track_scale(&**self.kinds(), kind, old, &mut new, &scale, &patched, req.manager);
                        Ok(new)
                    }
                    PatchTarget::Object | PatchTarget::Status => {
                        let current = Value::Object(current);
                        let patched = patch::apply(req.patch_type, &current, req.body, kind.object_schema())?;
                        let (mut patched, w) = object::decode_value(&**self.kinds(), kind, patched, req.validation)?;
                        warnings = w;
                        check_identity(kind, &patched, old, name)?;
                        let requested = managed::take_requested(&mut patched);
                        object::to_prepared_form(kind, &mut patched)?;
                        // The stored object in the form the write is prepared in.
                        let live = match &current {
                            Value::Object(served) if object::prepared_as_served(kind) => served,
                            _ => old,
                        };
                        if req.target == PatchTarget::Status {
                            let mut new = object::prepare_status_update(kind, &patched, live, namespace)?;
                            managed::track(&**self.kinds(), kind, Some(live), &mut new, None, req.manager, "status");
                            object::prepared_to_stored(kind, &mut new)?;
                            return Ok(new);
                        }
                        let prepared = object::prepare_update(kind, &mut patched, live, namespace);
                        self.admit(kind, prepared, &patched, Some(live))?;
                        managed::track(
                            &**self.kinds(),
                            kind,
                            Some(live),
                            &mut patched,
                            requested.as_ref(),
                            req.manager,
                            "",
                        );
                        object::prepared_to_stored(kind, &mut patched)?;
                        Ok(patched)
                    }
                }
            })
            .await?;
        if req.target == PatchTarget::Scale {
            return Ok((scale_of(kind, &out), warnings));
        }
        object::to_served_version(kind, &mut out)?;
        Ok((Value::Object(out), warnings))
    }
}
