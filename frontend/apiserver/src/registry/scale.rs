//! The `/scale` subresource: an `autoscaling/v1` `Scale` view of a workload's
//! `spec.replicas`, `status.replicas` and selector (or of the paths a kind's
//! [`ScalePaths`] name). Writes change only the desired replicas (which bumps the generation
//! like any spec change) and honour the Scale's `resourceVersion`.

use serde_json::{json, Value};

use super::managed;
use super::object::{self, meta_str};
use super::strategy::{get_path, path_mut, Object};
use super::validation::selector_string;
use super::{ResourceKind, ScalePaths, Store};
use crate::error::{ApiError, FieldError};

/// The value at a dot-separated path.
fn at<'a>(obj: &'a Object, path: &str) -> Option<&'a Value> {
    let parts: Vec<&str> = path.split('.').filter(|p| !p.is_empty()).collect();
    get_path(obj, &parts)
}

/// Returns (desired replicas path, observed replicas path, selector path) of `kind`.
fn paths(kind: &ResourceKind) -> (&str, &str, Option<&str>) {
    match kind.scale_paths {
        Some(ScalePaths { spec_replicas, status_replicas, label_selector }) => {
            (spec_replicas, status_replicas, label_selector.as_deref())
        }
        None => ("spec.replicas", "status.replicas", Some("spec.selector")),
    }
}

/// Sets the desired replicas of `obj` (a stored object of `kind`) to `replicas`.
pub fn set_replicas(kind: &ResourceKind, obj: &mut Object, replicas: i64) {
    let (spec, _, _) = paths(kind);
    let parts: Vec<&str> = spec.split('.').filter(|p| !p.is_empty()).collect();
    if let Some((last, parents)) = parts.split_last() {
        path_mut(obj, parents).insert((*last).to_string(), replicas.into());
    }
}

/// Returns the stored object `old` with its desired replicas set to `replicas`, prepared as an
/// update in the form `kind`'s writes are prepared in (the served version's, for custom
/// resources) and back in the stored form.
///
/// # Errors
///
/// As [`object::prepare_update`], and the converter's.
pub(crate) fn rescaled(kind: &ResourceKind, old: &Object, replicas: i64, namespace: &str) -> Result<Object, ApiError> {
    let live = object::stored_in_prepared_form(kind, old)?;
    let mut new = live.clone().into_owned();
    set_replicas(kind, &mut new, replicas);
    object::prepare_update(kind, &mut new, &live, namespace)?;
    object::prepared_to_stored(kind, &mut new)?;
    Ok(new)
}

/// Returns the `Scale` of a (stored) object of `kind`.
pub fn scale_of(kind: &ResourceKind, obj: &Object) -> Value {
    let meta = &obj["metadata"];
    let (spec_path, status_path, selector_path) = paths(kind);
    let selector = match selector_path.and_then(|p| at(obj, p)) {
        Some(Value::String(s)) => s.clone(),
        Some(v) => selector_string(v),
        None => String::new(),
    };
    let mut status = json!({"replicas": at(obj, status_path).and_then(Value::as_i64).unwrap_or(0)});
    if !selector.is_empty() {
        status["selector"] = selector.into();
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"],
            "creationTimestamp": meta["creationTimestamp"],
        },
        "spec": {"replicas": at(obj, spec_path).and_then(Value::as_i64).unwrap_or(0)},
        "status": status,
    })
}

fn invalid_scale(name: &str, causes: Vec<FieldError>) -> ApiError {
    ApiError::Invalid { group: "autoscaling".into(), kind: "Scale".into(), name: name.into(), causes }
}

impl Store {
    /// Reads the `Scale` of a workload.
    ///
    /// # Errors
    ///
    /// Returns `NotFound` when absent.
    pub async fn get_scale(&self, kind: &ResourceKind, namespace: &str, name: &str) -> Result<Value, ApiError> {
        let (obj, _) = self.read(kind, namespace, name).await?;
        Ok(scale_of(kind, &obj))
    }

    /// Writes a `Scale` (PUT on `/scale`): sets the workload's `spec.replicas`.
    ///
    /// # Errors
    ///
    /// Returns `BadRequest` for a body that is not a Scale or names another object,
    /// `Invalid` for negative replicas, `Conflict` on a stale `resourceVersion`, `NotFound`.
    pub async fn update_scale(
        &self,
        kind: &ResourceKind,
        namespace: &str,
        name: &str,
        body: &Object,
        dry_run: bool,
        manager: &str,
    ) -> Result<Value, ApiError> {
        match body.get("kind").and_then(Value::as_str) {
            None | Some("Scale") => {}
            Some(other) => return Err(ApiError::BadRequest(format!("expected a Scale, got {other}"))),
        }
        let body_name = meta_str(body, "name");
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::BadRequest(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let replicas = match get_path(body, &["spec", "replicas"]) {
            None | Some(Value::Null) => 0,
            Some(v) => v.as_i64().ok_or_else(|| {
                invalid_scale(name, vec![FieldError::invalid("spec.replicas", v.clone(), "must be an integer")])
            })?,
        };
        if replicas < 0 {
            return Err(invalid_scale(
                name,
                vec![FieldError::invalid("spec.replicas", replicas, "must be greater than or equal to 0")],
            ));
        }
        let precondition = match meta_str(body, "resourceVersion") {
            "" => None,
            rv => Some(super::store::parse_resource_version(rv)?),
        };
        let out = self
            .guaranteed_update(kind, namespace, name, precondition, dry_run, |old| {
                let mut new = rescaled(kind, old, replicas, namespace)?;
                let mut old_scale = scale_of(kind, old);
                managed::scale_managers(&**self.kinds(), kind, old, &mut old_scale);
                let written = Value::Object(body.clone());
                managed::track_scale(&**self.kinds(), kind, old, &mut new, &old_scale, &written, manager);
                Ok(new)
            })
            .await?;
        Ok(scale_of(kind, &out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_view_of_a_deployment() {
        let d = json!({"metadata": {"name": "web", "namespace": "ns", "uid": "u", "resourceVersion": "7"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}}, "status": {"replicas": 1}});
        let kind = ResourceKind::row("apps", "v1", "deployments", "Deployment", "deployment", true);
        let s = scale_of(&kind, d.as_object().expect("object"));
        assert_eq!(s["spec"]["replicas"], 2);
        assert_eq!(s["status"], json!({"replicas": 1, "selector": "app=web"}));
        assert_eq!(s["metadata"]["resourceVersion"], "7");
    }
}
