//! Binding (`POST .../bindings` and `POST .../<resource>/<name>/binding`): what a scheduler
//! sends to place an object on a node (kube's `BindingREST`, for pods). The generic part is
//! here: the `Binding` body's checks, the compare-and-swap, the `Success` answer; how an object
//! is bound is its kind's [`Binder`].

use serde_json::{json, Value};

use super::kind::ResourceKind;
use super::object::meta_str;
use super::store::conflict;
use super::strategy::{get_path, Binder, Object};
use super::Store;
use crate::error::{ApiError, FieldError};

impl Store {
    /// Binds the object named by `binding` (or by `name_in_url` for the subresource form) to the
    /// binding's target node. `kind` is the URL's: a kind that serves `/binding`, or one whose
    /// create binds (`bindings`), which binds the object of its group version that serves
    /// `/binding`. Answers with a `Success` Status.
    ///
    /// # Errors
    ///
    /// Returns `BadRequest` when the names disagree, `Invalid` without a target node,
    /// `Conflict` when the object is already bound or being deleted, `NotFound`.
    pub async fn bind(
        &self,
        kind: &'static ResourceKind,
        namespace: &str,
        name_in_url: Option<&str>,
        binding: &Object,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let name = meta_str(binding, "name").to_string();
        if let Some(url) = name_in_url {
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
        let (target, binder) = self.binder_for(kind).ok_or(ApiError::NoRoute)?;
        self.guaranteed_update(target, namespace, &name, None, dry_run, |old| {
            binder.bind(old, &node).map_err(|message| conflict(target, &name, message))
        })
        .await?;
        Ok(json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}))
    }

    /// The kind a binding sent to `kind` binds, and its binder.
    fn binder_for(&self, kind: &'static ResourceKind) -> Option<(&'static ResourceKind, &'static dyn Binder)> {
        let target = match kind.binder {
            Some(_) => kind,
            None if kind.create_binds => self.kinds().of(kind.group, kind.version).find(|k| k.binder.is_some())?,
            None => return None,
        };
        Some((target, target.binder?))
    }
}
