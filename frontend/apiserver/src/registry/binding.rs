//! Pod binding (`POST .../bindings` and `POST .../pods/<name>/binding`): what a scheduler sends
//! to place a pod on a node. Sets `spec.nodeName` once and records the `PodScheduled`
//! condition, as kube's `BindingREST` does.

use serde_json::{json, Value};

use super::object::meta_str;
use super::store::conflict;
use super::strategy::{get_path, map_field_mut, Object};
use super::Store;
use crate::error::{ApiError, FieldError};

impl Store {
    /// Binds the pod named by `binding` (or by `pod_in_url` for the subresource form) to the
    /// binding's target node. Answers with a `Success` Status.
    ///
    /// # Errors
    ///
    /// Returns `BadRequest` when the names disagree, `Invalid` without a target node,
    /// `Conflict` when the pod is already bound or being deleted, `NotFound`.
    pub async fn bind_pod(
        &self,
        namespace: &str,
        pod_in_url: Option<&str>,
        binding: &Object,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let name = meta_str(binding, "name").to_string();
        if let Some(url) = pod_in_url {
            if url != name {
                return Err(ApiError::BadRequest("name in URL does not match name in Binding object".into()));
            }
        }
        let node = get_path(binding, &["target", "name"]).and_then(Value::as_str).unwrap_or("").to_string();
        if node.is_empty() {
            return Err(ApiError::Invalid {
                group: String::new(),
                kind: "Binding".into(),
                name: name.clone(),
                causes: vec![FieldError::required("target.name", "")],
            });
        }
        let pods = self.kinds().find("", "v1", "pods").ok_or(ApiError::NoRoute)?;
        self.guaranteed_update(pods, namespace, &name, None, dry_run, |old| {
            let current = get_path(old, &["spec", "nodeName"]).and_then(Value::as_str).unwrap_or("");
            if !current.is_empty() {
                return Err(conflict(pods, &name, format!("pod {name} is already assigned to node {current:?}")));
            }
            if !meta_str(old, "deletionTimestamp").is_empty() {
                return Err(conflict(
                    pods,
                    &name,
                    format!("pod {name} is being deleted, cannot be assigned to a host"),
                ));
            }
            let mut new = old.clone();
            map_field_mut(&mut new, "spec").insert("nodeName".into(), node.clone().into());
            let generation = get_path(old, &["metadata", "generation"]).and_then(Value::as_i64).unwrap_or(0);
            map_field_mut(&mut new, "metadata").insert("generation".into(), (generation + 1).into());
            let status = map_field_mut(&mut new, "status");
            let conditions = status.entry("conditions").or_insert_with(|| json!([]));
            if let Value::Array(list) = conditions {
                list.retain(|c| c["type"] != "PodScheduled");
                list.push(json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null,
                    "lastTransitionTime": crate::clock::now_rfc3339()}));
            }
            Ok(new)
        })
        .await?;
        Ok(json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}))
    }
}
