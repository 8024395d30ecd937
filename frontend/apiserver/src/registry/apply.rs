//! Server-side apply (`PATCH` with `application/apply-patch+yaml`), kube's `applyPatcher`:
//! the body is the applier's configuration, merged into the live object by the field manager
//! (`ballast_apimachinery::managed_fields`), which also answers conflicts. An apply to a
//! missing object creates it (on the object, not on `/status` or `/scale`).
//!
//! On `/status` only the configuration's `status` counts; on the object, a kind with a
//! `/status` subresource ignores the configuration's `status` (kube's reset fields), so
//! neither is owned through the other. On `/scale` the configuration is a `Scale`, applied to
//! the object's Scale with the managers the Scale has through the object (kube's scale
//! handler): conflicts name the Scale's `.spec.replicas`, and the merged replicas and their
//! owners go back onto the object.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::managed::{self, group_version};
use super::object::{self, meta_str};
use super::patch::{check_identity, PatchRequest, PatchTarget};
use super::scale::scale_of;
use super::strategy::Object;
use super::{ResourceKind, Store};
use crate::error::{ApiError, FieldError};
use ballast_apimachinery::managed_fields::scale::SCALE_API_VERSION;
use ballast_apimachinery::managed_fields::{ApplyError, FieldManager, KindVersions};

/// How many times an apply that raced with a create or delete starts over.
const MAX_APPLY_ATTEMPTS: usize = 3;

/// kube's `GroupVersionKind.String()`: `apps/v1, Kind=Deployment`, `/v1, Kind=ConfigMap`.
fn gvk_string(api_version: &str, kind: &str) -> String {
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    format!("{group}/{version}, Kind={kind}")
}

/// Parses an apply body: a YAML (or JSON) object.
///
/// # Errors
///
/// `BadRequest` with kube's "error decoding YAML" for anything else.
pub fn parse_config(body: &[u8]) -> Result<Object, ApiError> {
    // Most clients send JSON, which is YAML too and reads the same, several times faster with
    // the JSON parser; anything it does not take goes to the YAML parser, whose errors are
    // the ones answered.
    let json = match body.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => serde_json::from_slice::<Value>(body).ok(),
        _ => None,
    };
    let value: Value = match json {
        Some(v) => v,
        None => {
            serde_yaml_ng::from_slice(body).map_err(|e| ApiError::BadRequest(format!("error decoding YAML: {e}")))?
        }
    };
    match value {
        Value::Object(m) => Ok(m),
        Value::Null => Ok(Map::new()),
        other => {
            let what = match other {
                Value::Array(_) => "array",
                Value::String(_) => "string",
                Value::Number(_) => "number",
                _ => "bool",
            };
            Err(ApiError::BadRequest(format!(
                "error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {what} into Go value of type map[string]interface {{}}"
            )))
        }
    }
}

/// Returns a Scale's replicas, or kube's `Invalid` answer when they are not a count.
fn check_scale_replicas(name: &str, r: &Value) -> Result<i64, ApiError> {
    r.as_i64().filter(|r| *r >= 0).ok_or_else(|| ApiError::Invalid {
        group: "autoscaling".into(),
        kind: "Scale".into(),
        name: name.into(),
        causes: vec![FieldError::invalid("spec.replicas", r.clone(), "must be greater than or equal to 0")],
    })
}

fn apply_error(err: ApplyError) -> ApiError {
    match err {
        ApplyError::Conflicts(conflicts) => ApiError::ApplyConflict {
            message: ballast_apimachinery::managed_fields::conflict_message(&conflicts),
            causes: conflicts
                .iter()
                .map(|c| {
                    (
                        format!("conflict with {}", c.manager.describe()),
                        ballast_apimachinery::fieldpath::path_string(&c.path),
                    )
                })
                .collect(),
        },
        ApplyError::BadRequest(m) => ApiError::BadRequest(m),
        // kube answers a failed conversion with its error as it is (500, no reason).
        e @ ApplyError::Conversion { .. } => ApiError::Failed(e.to_string()),
        other => ApiError::Internal(other.to_string()),
    }
}

impl Store {
    /// Runs a server-side apply; returns the object (or `Scale`), the warnings, and whether
    /// the apply created the object.
    ///
    /// # Errors
    ///
    /// `BadRequest` for a body that is not an object or names another kind, version or
    /// object; `Conflict` (409, one cause per field) when fields of other managers would
    /// change and `force` is not set; `Invalid` when the result does not validate;
    /// `NotFound` for `/status` or `/scale` of a missing object.
    pub async fn apply(
        &self,
        kind: &ResourceKind,
        namespace: &str,
        name: &str,
        req: PatchRequest<'_>,
    ) -> Result<(Value, Vec<String>, bool), ApiError> {
        let config = parse_config(req.body)?;
        let gv = group_version(kind);
        let (expect_version, expect_kind) = if req.target == PatchTarget::Scale {
            ("autoscaling/v1".to_string(), "Scale")
        } else {
            (gv.clone(), kind.kind)
        };
        let got_version = config.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let got_kind = config.get("kind").and_then(Value::as_str).unwrap_or("");
        if got_kind != expect_kind || got_version.split('/').count() > 2 {
            return Err(ApiError::BadRequest(format!("invalid object type: {}", gvk_string(got_version, got_kind))));
        }
        if got_version != expect_version {
            return Err(ApiError::BadRequest(format!(
                "Incorrect version specified in apply patch. Specified patch version: {got_version}, expected: {expect_version}"
            )));
        }
        let config = self.effective_config(kind, namespace, name, config, req.target)?;
        if req.target == PatchTarget::Scale {
            let out = self
                .guaranteed_update(kind, namespace, name, None, req.dry_run, |old| {
                    self.apply_to_scale(kind, namespace, name, old, &config, req)
                })
                .await?;
            return Ok((scale_of(kind, &out), Vec::new(), false));
        }
        for _ in 0..MAX_APPLY_ATTEMPTS {
            let mut warnings = Vec::new();
            let updated = self
                .guaranteed_update(kind, namespace, name, None, req.dry_run, |old| {
                    let (current, managed_fields) = live_parts(kind, old)?;
                    let live = (old, managed_fields.as_deref());
                    let (new, w) = self.apply_to(kind, namespace, name, Some(live), current, &config, req)?;
                    warnings = w;
                    Ok(new)
                })
                .await;
            match updated {
                Ok(mut out) => {
                    object::to_served_version(kind, &mut out)?;
                    return Ok((Value::Object(out), warnings, false));
                }
                Err(ApiError::NotFound { .. }) if req.target == PatchTarget::Object => {}
                Err(e) => return Err(e),
            }
            // Upsert: apply to the new object's identity and create it.
            let mut identity = Map::new();
            identity.insert("apiVersion".into(), gv.clone().into());
            identity.insert("kind".into(), kind.kind.into());
            let mut meta = Map::new();
            meta.insert("name".into(), name.into());
            if kind.namespaced {
                meta.insert("namespace".into(), namespace.into());
            }
            identity.insert("metadata".into(), Value::Object(meta));
            let (new, w) = self.apply_to(kind, namespace, name, None, identity, &config, req)?;
            match self.create_prepared(kind, namespace, new, req.dry_run).await {
                Ok(mut created) => {
                    object::to_served_version(kind, &mut created)?;
                    return Ok((Value::Object(created), w, true));
                }
                Err(ApiError::AlreadyExists { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(ApiError::Conflict {
            group: kind.group.into(),
            resource: kind.resource.into(),
            name: name.into(),
            reason: crate::error::OPTIMISTIC_LOCK_MESSAGE.into(),
        })
    }

    /// The part of the configuration the target may set (see the module doc).
    fn effective_config(
        &self,
        kind: &ResourceKind,
        namespace: &str,
        name: &str,
        mut config: Object,
        target: PatchTarget,
    ) -> Result<Value, ApiError> {
        let config_name = meta_str(&config, "name");
        if config_name.is_empty() {
            return Err(ApiError::BadRequest(format!(
                "the name of the object () does not match the name on the URL ({name})"
            )));
        }
        let config_ns = meta_str(&config, "namespace");
        if kind.namespaced && !config_ns.is_empty() && config_ns != namespace {
            return Err(ApiError::BadRequest(
                "the namespace of the provided object does not match the namespace sent on the request".into(),
            ));
        }
        match target {
            PatchTarget::Object => {
                if kind.has_status() {
                    config.remove("status");
                }
            }
            PatchTarget::Status => {
                config.retain(|k, _| matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status"))
            }
            PatchTarget::Scale => {
                if let Some(r) = config.get("spec").and_then(|s| s.get("replicas")) {
                    check_scale_replicas(name, r)?;
                }
                if let Some(Value::Object(m)) = config.get_mut("metadata") {
                    m.retain(|k, _| matches!(k.as_str(), "name" | "namespace" | "managedFields"));
                }
            }
        }
        Ok(Value::Object(config))
    }

    /// Applies a `Scale` configuration to the Scale of `old` through the Scale's own managers
    /// (see `managed::scale_managers`), and writes the merged replicas and the managers back
    /// onto the object.
    fn apply_to_scale(
        &self,
        kind: &ResourceKind,
        namespace: &str,
        name: &str,
        old: &Object,
        config: &Value,
        req: PatchRequest<'_>,
    ) -> Result<Object, ApiError> {
        let mut live = scale_of(kind, old);
        managed::scale_managers(&**self.kinds(), kind, old, &mut live);
        let fm = FieldManager {
            schema: &managed::SCALE_SCHEMA,
            api_version: SCALE_API_VERSION,
            subresource: "scale",
            versions: None,
            reset: &[],
        };
        let describe = format!("{namespace}/{name}; {}", gvk_string(SCALE_API_VERSION, "Scale"));
        let now = crate::clock::now_rfc3339();
        let (merged, scale_list) =
            fm.apply(&mut live, config, req.manager, req.force, &now, &describe).map_err(apply_error)?;
        // A Scale without replicas scales to zero, as kube's typed Scale reads it.
        let replicas = match merged.as_ref().unwrap_or(&live).get("spec").and_then(|s| s.get("replicas")) {
            None | Some(Value::Null) => 0,
            Some(r) => check_scale_replicas(name, r)?,
        };
        let mut new = super::scale::rescaled(kind, old, replicas, namespace)?;
        managed::set_from_scale(&**self.kinds(), kind, old, &mut new, scale_list.as_ref());
        Ok(new)
    }

    /// Applies `config` to `current` (the served form of `old` without its managedFields, or
    /// the identity of a new object) and prepares the result for storage like any write.
    /// `old` comes with the managedFields `current` was read with.
    #[allow(clippy::too_many_arguments)]
    fn apply_to(
        &self,
        kind: &ResourceKind,
        namespace: &str,
        name: &str,
        old: Option<(&Object, Option<&Value>)>,
        current: Object,
        config: &Value,
        req: PatchRequest<'_>,
    ) -> Result<(Object, Vec<String>), ApiError> {
        let schema = self.kinds().apply_schema(kind);
        let gv = group_version(kind);
        let subresource = match req.target {
            PatchTarget::Object => "",
            PatchTarget::Status => "status",
            PatchTarget::Scale => "scale",
        };
        let versions = managed::ServedVersions::of(&**self.kinds(), kind);
        let fm = FieldManager {
            schema: &schema,
            api_version: &gv,
            subresource,
            versions: versions.as_ref().map(|v| v as &dyn KindVersions),
            // The configuration's reset fields are dropped before the merge (above).
            reset: &[],
        };
        let describe = format!("{namespace}/{name}; {}", gvk_string(&gv, kind.kind));
        let now = crate::clock::now_rfc3339();
        let (old, live_managed) = match old {
            Some((old, managed)) => (Some(old), managed),
            None => (None, None),
        };
        let live = Value::Object(current);
        let (merged, managed_fields) = fm
            .apply_with_managed(&live, live_managed, config, req.manager, req.force, &now, &describe)
            .map_err(apply_error)?;
        // The stored object in the form the write is prepared in: for kinds prepared as
        // served, the served one the merge read (copied only when the merge changed nothing).
        let served = old.is_some() && object::prepared_as_served(kind);
        let (merged, served_old) = match merged {
            Some(merged) => (merged, served.then_some(live)),
            None if served => (live.clone(), Some(live)),
            None => (live, None),
        };
        let old = served_old.as_ref().and_then(Value::as_object).or(old);
        let (mut new, warnings) = object::decode_value(&**self.kinds(), kind, merged, req.validation)?;
        if let Some(old) = old {
            check_identity(kind, &new, old, name)?;
        }
        managed::take_requested(&mut new);
        object::to_prepared_form(kind, &mut new)?;
        match (old, req.target) {
            (None, _) => {
                let prepared = object::prepare_create(kind, &mut new, namespace);
                self.admit(kind, prepared, &new, None)?;
            }
            (Some(old), PatchTarget::Status) => new = object::prepare_status_update(kind, &new, old, namespace)?,
            (Some(old), _) => {
                let prepared = object::prepare_update(kind, &mut new, old, namespace);
                self.admit(kind, prepared, &new, Some(old))?;
            }
        }
        managed::set(&mut new, managed_fields);
        object::prepared_to_stored(kind, &mut new)?;
        Ok((new, warnings))
    }
}

/// The stored object as the field manager reads it: a copy in the served version without its
/// managedFields, and those managedFields. A kind stored as it is served is copied without
/// them (they are often the larger part of the object) and its managedFields are read where
/// they are.
fn live_parts<'o>(kind: &ResourceKind, old: &'o Object) -> Result<(Object, Option<Cow<'o, Value>>), ApiError> {
    if kind.converter.is_some() {
        let mut current = old.clone();
        object::to_served_version(kind, &mut current)?;
        let managed = match current.get_mut("metadata") {
            Some(Value::Object(meta)) => meta.remove("managedFields").map(Cow::Owned),
            _ => None,
        };
        return Ok((current, managed));
    }
    let mut managed = None;
    let current = old
        .iter()
        .map(|(k, v)| match v {
            Value::Object(meta) if k == "metadata" => {
                managed = meta.get("managedFields").map(Cow::Borrowed);
                let copy =
                    meta.iter().filter(|(mk, _)| *mk != "managedFields").map(|(mk, mv)| (mk.clone(), mv.clone()));
                (k.clone(), Value::Object(copy.collect()))
            }
            _ => (k.clone(), v.clone()),
        })
        .collect();
    Ok((current, managed))
}
