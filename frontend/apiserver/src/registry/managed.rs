//! managedFields on every write: the glue between the generic store and
//! `ballast_apimachinery::managed_fields` (the rules live there). Resolves a kind's
//! `TypeSchema` once, names the manager of a request, and sets `metadata.managedFields` on
//! the object about to be stored.

use serde_json::Value;

use super::strategy::{map_field_mut, Object};
use super::{ResourceKind, ServedKinds};
use crate::error::{ApiError, FieldError};
use ballast_apimachinery::managed_fields::FieldManager;

/// kube's limit on a manager name (`FieldManagerMaxLength`).
pub const FIELD_MANAGER_MAX_LENGTH: usize = 128;

/// The manager of writes the server makes itself (kube-apiserver's own loopback client).
pub const SERVER_MANAGER: &str = "kube-apiserver";

/// `group/version` as managedFields record it (`v1`, `apps/v1`).
pub fn group_version(kind: &ResourceKind) -> String {
    if kind.group.is_empty() {
        kind.version.to_string()
    } else {
        format!("{}/{}", kind.group, kind.version)
    }
}

/// The manager of a request: `fieldManager` if given, else the User-Agent up to its first
/// `/` (printable characters only, at most 128 bytes), as kube derives it.
pub fn manager_or_user_agent(field_manager: &str, user_agent: &str) -> String {
    if !field_manager.is_empty() {
        return field_manager.to_string();
    }
    let mut out = String::new();
    for c in user_agent.split('/').next().unwrap_or("").chars() {
        if c.is_control() {
            continue;
        }
        if out.len() + c.len_utf8() > FIELD_MANAGER_MAX_LENGTH {
            break;
        }
        out.push(c);
    }
    out
}

/// Checks a `fieldManager` parameter as kube does (length, printable characters); `kind` is
/// the options kind named in the error (`CreateOptions`, `UpdateOptions`, `PatchOptions`).
///
/// # Errors
///
/// `Invalid` on `<kind>.meta.k8s.io`.
pub fn validate_field_manager(kind: &str, field_manager: &str, more: Vec<FieldError>) -> Result<(), ApiError> {
    let mut causes = more;
    if field_manager.len() > FIELD_MANAGER_MAX_LENGTH {
        causes.push(FieldError::invalid(
            "fieldManager",
            field_manager,
            format!("may not be more than {FIELD_MANAGER_MAX_LENGTH} bytes"),
        ));
    }
    for (i, c) in field_manager.char_indices() {
        if c.is_control() {
            causes.push(FieldError::invalid(
                "fieldManager",
                field_manager,
                format!("invalid character U+{:04X} (at position {i})", c as u32),
            ));
        }
    }
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::Invalid { group: "meta.k8s.io".into(), kind: kind.into(), name: String::new(), causes })
}

/// Takes the managedFields a request body carries (before the store's preparation drops them).
pub fn take_requested(obj: &mut Object) -> Option<Value> {
    match obj.get_mut("metadata") {
        Some(Value::Object(meta)) => meta.remove("managedFields"),
        _ => None,
    }
}

/// Records a create (`live` = `None`) or an update of `new` by `manager` through `subresource`,
/// setting `new`'s managedFields.
pub fn track(
    kinds: &dyn ServedKinds,
    kind: &ResourceKind,
    live: Option<&Object>,
    new: &mut Object,
    requested: Option<&Value>,
    manager: &str,
    subresource: &str,
) {
    let schema = kinds.apply_schema(kind);
    let gv = group_version(kind);
    let fm = FieldManager { schema: &schema, api_version: &gv, subresource };
    let live_value = live.map(|l| Value::Object(l.clone()));
    let new_value = Value::Object(new.clone());
    let now = crate::clock::now_rfc3339();
    let outcome = fm.update(live_value.as_ref(), &new_value, requested, manager, &now);
    set(new, outcome);
}

/// Sets (or removes) `metadata.managedFields`.
pub fn set(obj: &mut Object, managed: Option<Value>) {
    let meta = map_field_mut(obj, "metadata");
    match managed {
        Some(v) => meta.insert("managedFields".into(), v),
        None => meta.remove("managedFields"),
    };
}
