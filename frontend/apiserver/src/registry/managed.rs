//! managedFields on every write: the glue between the generic store and
//! `ballast_apimachinery::managed_fields` (the rules live there). Resolves a kind's
//! `TypeSchema` once, names the manager of a request, and sets `metadata.managedFields` on
//! the object about to be stored.

use serde_json::Value;

use std::sync::{Arc, LazyLock};

use super::object;
use super::strategy::{map_field_mut, Object};
use super::{ResourceKind, ServedKinds, Subresources};
use crate::error::{ApiError, FieldError};
use ballast_apimachinery::fieldpath::PathElement;
use ballast_apimachinery::managed_fields::scale::{self as scale_owners, ReplicasPaths, SCALE_API_VERSION};
use ballast_apimachinery::managed_fields::{FieldManager, KindVersions, Managers};
use ballast_apimachinery::typed::TypeSchema;

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
/// setting `new`'s managedFields. `live` and `new` are in the form the write is prepared in
/// (the stored form, or the served one for kinds prepared as served); the field manager sees
/// them in `kind`'s version, the one its entry records.
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
    let versions = ServedVersions::of(kinds, kind);
    let fm = FieldManager {
        schema: &schema,
        api_version: &gv,
        subresource,
        versions: versions.as_ref().map(|v| v as &dyn KindVersions),
        reset: reset_fields(kind, subresource),
    };
    let convert = versions.is_some() && !object::prepared_as_served(kind);
    let served = |obj: &Object| {
        let mut out = obj.clone();
        if convert && object::to_served_version(kind, &mut out).is_err() {
            // Not reached for the built-in conversions, which cannot fail.
            out = obj.clone();
        }
        Value::Object(out)
    };
    let live_value = live.map(served);
    let new_value = served(new);
    let now = crate::clock::now_rfc3339();
    let outcome = fm.update(live_value.as_ref(), &new_value, requested, manager, &now);
    set(new, outcome);
}

/// `status` and `spec`, as field paths.
static STATUS: LazyLock<[PathElement; 1]> = LazyLock::new(|| [PathElement::Field("status".into())]);
static SPEC: LazyLock<[PathElement; 1]> = LazyLock::new(|| [PathElement::Field("spec".into())]);
static RESET_STATUS: LazyLock<[&'static [PathElement]; 1]> = LazyLock::new(|| [&STATUS[..]]);
static RESET_SPEC: LazyLock<[&'static [PathElement]; 1]> = LazyLock::new(|| [&SPEC[..]]);

/// The fields `kind`'s strategy resets on a write through `subresource` (kube's
/// `GetResetFields` of the kind's strategy and status strategy): a kind with `/status` takes
/// its status only through it, and `/status` takes nothing of the spec, so neither write's
/// manager owns the other's fields, even those a create's object carries (a Pod's
/// `status.phase: Pending`, set on create) or an update sent unchanged.
fn reset_fields(kind: &ResourceKind, subresource: &str) -> &'static [&'static [PathElement]] {
    match subresource {
        "" if kind.has_status() => &RESET_STATUS[..],
        "status" => &RESET_SPEC[..],
        _ => &[],
    }
}

/// The versions a server serves one kind's storage in, for managers recorded through them:
/// objects convert from one to another straight (a conversion webhook) or through the stored
/// version, with each row's [`VersionConverter`](super::VersionConverter). Rows are looked up
/// only when an entry's version is not the request's. Made for one write: it keeps the first
/// conversion that failed, for the field manager ([`KindVersions::take_failure`]).
#[derive(Debug)]
pub struct ServedVersions<'a> {
    kinds: &'a dyn ServedKinds,
    kind: &'a ResourceKind,
    failure: std::cell::RefCell<Option<String>>,
}

impl<'a> ServedVersions<'a> {
    /// The versions of `kind`'s storage; `None` when the server compares every manager in the
    /// request's version (see [`ServedKinds::converts_managed_fields`]).
    pub fn of(kinds: &'a dyn ServedKinds, kind: &'a ResourceKind) -> Option<Self> {
        kinds.converts_managed_fields(kind).then(|| ServedVersions { kinds, kind, failure: Default::default() })
    }

    /// The row serving `kind`'s storage at `api_version`.
    fn row(&self, api_version: &str) -> Option<&'a ResourceKind> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        if self.kind.group == group && self.kind.version == version {
            return Some(self.kind);
        }
        self.kinds.kinds().iter().copied().find(|k| {
            k.group == group
                && k.version == version
                && k.kind == self.kind.kind
                && k.storage_resource == self.kind.storage_resource
        })
    }
}

impl KindVersions for ServedVersions<'_> {
    fn schema(&self, api_version: &str) -> Option<Arc<TypeSchema>> {
        self.row(api_version).map(|k| self.kinds.apply_schema(k))
    }

    fn convert(&self, obj: &Value, from: &str, to: &str) -> Option<Value> {
        let (from_row, to_row) = (self.row(from)?, self.row(to)?);
        let Value::Object(obj) = obj else { return None };
        let mut obj = obj.clone();
        let converted = match from_row.converter.and_then(|c| c.to_version(&mut obj, to)) {
            Some(direct) => direct,
            None => {
                object::to_stored_version(from_row, &mut obj).and_then(|()| object::to_served_version(to_row, &mut obj))
            }
        };
        if let Err(e) = converted {
            self.failure.borrow_mut().get_or_insert_with(|| e.to_string());
            return None;
        }
        obj.insert("apiVersion".into(), to.into());
        Some(Value::Object(obj))
    }

    fn take_failure(&self) -> Option<String> {
        self.failure.borrow_mut().take()
    }
}

/// Sets (or removes) `metadata.managedFields`.
pub fn set(obj: &mut Object, managed: Option<Value>) {
    let meta = map_field_mut(obj, "metadata");
    match managed {
        Some(v) => meta.insert("managedFields".into(), v),
        None => meta.remove("managedFields"),
    };
}

/// The `autoscaling/v1` `Scale`'s types, which the field manager of `/scale` writes runs on.
pub static SCALE_SCHEMA: LazyLock<TypeSchema> = LazyLock::new(|| {
    ballast_apimachinery::schema::lookup("autoscaling", "v1", "Scale")
        .map_or_else(TypeSchema::deduced, TypeSchema::from_message)
});

/// Where each version of `kind` keeps its desired replicas (`None` for a served version
/// without `/scale`): the served ones, and those kube no longer serves but still knows
/// ([`ResourceKind::scale_versions`]).
pub fn replicas_paths(kinds: &dyn ServedKinds, kind: &ResourceKind) -> ReplicasPaths {
    let mut paths = ReplicasPaths::new();
    for k in kinds.kinds().iter().filter(|k| k.group == kind.group && k.storage_resource == kind.storage_resource) {
        let path = k
            .subresources
            .has(Subresources::SCALE)
            .then(|| scale_owners::dotted_path(k.scale_paths.map_or("spec.replicas", |p| p.spec_replicas.as_str())));
        for gv in k.scale_versions {
            paths.entry((*gv).to_string()).or_insert_with(|| Some(scale_owners::scale_replicas_path()));
        }
        paths.insert(group_version(k), path);
    }
    paths
}

/// The managers of the stored object `parent`; `None` when they do not decode.
fn managers_of(parent: &Object) -> Option<Managers> {
    match parent.get("metadata").and_then(|m| m.get("managedFields")) {
        None => Some(Managers::default()),
        Some(v) => Managers::decode(v).ok(),
    }
}

/// Gives `scale` (the Scale view of the stored object `parent`) the managers it has through
/// its parent, as the field manager of a `/scale` write sees them.
pub fn scale_managers(kinds: &dyn ServedKinds, kind: &ResourceKind, parent: &Object, scale: &mut Value) {
    let Some(managers) = managers_of(parent) else { return };
    let own = scale_owners::to_subresource(&managers, &replicas_paths(kinds, kind));
    if let (Some(Value::Object(meta)), Some(list)) = (scale.get_mut("metadata"), own.encode()) {
        meta.insert("managedFields".into(), list);
    }
}

/// Records a write to the Scale of `old` by `manager`: `old_scale` is the Scale before (with
/// the managers from [`scale_managers`]), `new_scale` the written one; sets `new`'s
/// managedFields to the parent's managers after it.
pub fn track_scale(
    kinds: &dyn ServedKinds,
    kind: &ResourceKind,
    old: &Object,
    new: &mut Object,
    old_scale: &Value,
    new_scale: &Value,
    manager: &str,
) {
    let fm = FieldManager {
        schema: &SCALE_SCHEMA,
        api_version: SCALE_API_VERSION,
        subresource: "scale",
        versions: None,
        reset: &[],
    };
    let now = crate::clock::now_rfc3339();
    let scale_list = fm.update(Some(old_scale), new_scale, None, manager, &now);
    set_from_scale(kinds, kind, old, new, scale_list.as_ref());
}

/// Sets `new`'s managedFields from the Scale's managers after a write (`scale_list`, their
/// encoded list), carried back onto `old`'s.
pub fn set_from_scale(
    kinds: &dyn ServedKinds,
    kind: &ResourceKind,
    old: &Object,
    new: &mut Object,
    scale_list: Option<&Value>,
) {
    let (Some(parent), Ok(scale)) = (managers_of(old), scale_list.map_or(Ok(Managers::default()), Managers::decode))
    else {
        return;
    };
    let managers = scale_owners::to_parent(&parent, &scale, &group_version(kind), &replicas_paths(kinds, kind));
    set(new, managers.encode());
}
