//! Ownership through the `/scale` subresource (kube's scale handler): a `Scale` has managers of
//! its own, derived from its parent's, so that the field manager can run on the `Scale` as on
//! any object, and the result is carried back to the parent.
//!
//! * [`to_subresource`]: the parent's managers that own its replicas field, each as a manager
//!   of the Scale's `.spec.replicas` at `autoscaling/v1` (the others do not show).
//! * [`to_parent`]: the parent's managers after a write to the Scale: a parent manager that
//!   owned the replicas field and is no longer a manager of the Scale loses it; a manager of
//!   the Scale's `.spec.replicas` owns the parent's replicas field, at the parent's version.
//!
//! Kube's rules kept here: an entry whose apiVersion has no known replicas path is dropped by
//! a write to the Scale; entries that come from the Scale carry the time of the parent entry of
//! the same identity, which for a manager new to the parent is none (kube stores scale entries
//! without `time`). Update identities include the apiVersion, so a parent's update entry is
//! never the Scale's entry of the same manager: its replicas field is taken away and given
//! back in an entry of its own, at the parent's version and without time, when the Scale's
//! entry still owns `.spec.replicas`; if the parent entry kept other fields, the manager is
//! then listed twice (the next write keeps the later of the two, as kube's decoding does).
//!
//! Worked example (a Deployment `apps/v1`, replicas at `.spec.replicas`):
//!
//! ```text
//! parent:  kubectl-create Update apps/v1  {.metadata.labels, .spec.replicas, .spec.template}
//! Scale:   kubectl-create Update autoscaling/v1 {.spec.replicas}
//! `kubectl scale --replicas=3` (manager kubectl) changes the Scale's replicas:
//! Scale:   kubectl Update autoscaling/v1 subresource scale {.spec.replicas}
//! parent:  kubectl-create Update apps/v1 {.metadata.labels, .spec.template}
//!          kubectl Update apps/v1 subresource scale {.spec.replicas}   (no time)
//! ```

use std::collections::HashMap;

use super::entries::{Entry, ManagerId, Managers};
use crate::fieldpath::{Path, PathElement, Set};

/// The Scale's group version.
pub const SCALE_API_VERSION: &str = "autoscaling/v1";

/// Where each version of a parent kind keeps its desired replicas: `None` for a version
/// without a `/scale` subresource (a custom resource version). A version missing from the
/// map is unknown.
pub type ReplicasPaths = HashMap<String, Option<Path>>;

/// The Scale's replicas path, `.spec.replicas`.
pub fn scale_replicas_path() -> Path {
    vec![PathElement::Field("spec".into()), PathElement::Field("replicas".into())]
}

/// Parses a dot-separated path (`spec.replicas`) into a field path.
pub fn dotted_path(path: &str) -> Path {
    path.split('.').filter(|p| !p.is_empty()).map(|p| PathElement::Field(p.into())).collect()
}

fn single(path: &[PathElement]) -> Set {
    let mut s = Set::new();
    s.insert(path);
    s
}

/// Returns `id` at another apiVersion (update identities carry it; apply ones do not).
fn at_version(id: &ManagerId, api_version: &str) -> ManagerId {
    ManagerId::new(&id.manager, id.operation, api_version, &id.subresource)
}

/// The Scale's managers: every parent manager owning its version's replicas path, as owner of
/// the Scale's `.spec.replicas`.
pub fn to_subresource(parent: &Managers, paths: &ReplicasPaths) -> Managers {
    let mut out = Managers::default();
    let replicas = single(&scale_replicas_path());
    for e in parent.entries.values() {
        let Some(Some(path)) = paths.get(&e.api_version) else { continue };
        if !e.set.has(path) {
            continue;
        }
        let id = at_version(&e.id, SCALE_API_VERSION);
        let entry = Entry { id, api_version: SCALE_API_VERSION.into(), time: e.time.clone(), set: replicas.clone() };
        out.entries.insert(entry.id.identifier(), entry);
    }
    out
}

/// The parent's managers after a write to the Scale whose managers are now `scale`;
/// `api_version` is the parent version the write went through.
pub fn to_parent(parent: &Managers, scale: &Managers, api_version: &str, paths: &ReplicasPaths) -> Managers {
    let mut out = Managers::default();
    let mut from_scale = scale.entries.clone();
    for (key, e) in &parent.entries {
        let Some(path) = paths.get(&e.api_version) else { continue };
        let Some(path) = path.as_ref().filter(|p| e.set.has(p)) else {
            out.entries.insert(key.clone(), e.clone());
            continue;
        };
        if from_scale.remove(key).is_some() {
            out.entries.insert(key.clone(), e.clone());
            continue;
        }
        let rest = e.set.difference(&single(path));
        if !rest.is_empty() {
            out.entries.insert(key.clone(), Entry { set: rest, ..e.clone() });
        }
    }
    let Some(Some(path)) = paths.get(api_version) else { return out };
    let replicas = scale_replicas_path();
    for (key, e) in from_scale {
        if !e.set.has(&replicas) {
            continue;
        }
        // Kept under the Scale's identity (whose update apiVersion is the Scale's), written at
        // the parent's version: an update entry of the same manager that kept its other
        // fields is then listed twice, as kube lists it.
        let time = parent.entries.get(&key).and_then(|p| p.time.clone());
        out.entries.insert(key, Entry { id: e.id, api_version: api_version.into(), time, set: single(path) });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn managers(list: &serde_json::Value) -> Managers {
        Managers::decode(list).expect("managers decode")
    }

    fn deployment_paths() -> ReplicasPaths {
        [("apps/v1".to_string(), Some(dotted_path("spec.replicas")))].into()
    }

    const T: &str = "2026-11-26T10:00:00Z";

    #[test]
    fn the_scale_sees_the_owners_of_the_replicas() {
        let parent = managers(&json!([
            {"manager": "kubectl-create", "operation": "Update", "apiVersion": "apps/v1", "time": T,
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}, "f:paused": {}}}},
            {"manager": "ctl", "operation": "Apply", "apiVersion": "apps/v1", "time": T,
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:paused": {}}}},
            {"manager": "old", "operation": "Update", "apiVersion": "apps/v1beta9", "time": T,
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}}
        ]));
        let scale = to_subresource(&parent, &deployment_paths());
        assert_eq!(
            scale.encode(),
            Some(json!([{"manager": "kubectl-create", "operation": "Update", "apiVersion": "autoscaling/v1",
                "time": T, "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}}]))
        );
    }

    #[test]
    fn a_scaler_takes_the_replicas_from_the_parent() {
        let parent = managers(&json!([
            {"manager": "kubectl-create", "operation": "Update", "apiVersion": "apps/v1", "time": T,
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}, "f:paused": {}}}},
            {"manager": "old", "operation": "Update", "apiVersion": "apps/v1beta9", "time": T,
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:paused": {}}}}
        ]));
        // The Scale after `kubectl scale`: kubectl-create released, kubectl owns.
        let scale = managers(&json!([
            {"manager": "kubectl", "operation": "Update", "apiVersion": "autoscaling/v1", "time": T,
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}, "subresource": "scale"}
        ]));
        let out = to_parent(&parent, &scale, "apps/v1", &deployment_paths());
        assert_eq!(
            out.encode(),
            Some(json!([
                {"manager": "kubectl", "operation": "Update", "apiVersion": "apps/v1",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}, "subresource": "scale"},
                {"manager": "kubectl-create", "operation": "Update", "apiVersion": "apps/v1", "time": T,
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:paused": {}}}}
            ])),
            "the entry of an unknown version is dropped; the scaler's entry has no time"
        );
    }

    #[test]
    fn co_owners_keep_the_replicas_and_appliers_keep_their_entry() {
        let parent = managers(&json!([
            {"manager": "a", "operation": "Apply", "apiVersion": "apps/v1", "time": T,
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}, "subresource": "scale"},
            {"manager": "u", "operation": "Update", "apiVersion": "apps/v1", "time": T,
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}, "f:paused": {}}}}
        ]));
        let scale = to_subresource(&parent, &deployment_paths());
        let out = to_parent(&parent, &scale, "apps/v1", &deployment_paths());
        // The applier's entry is the same identity on both sides: kept as it was. The
        // updater's entry is another identity on the Scale (its apiVersion): the parent entry
        // loses the replicas, which come back in an entry of their own, without time, listed
        // after it with the same manager, operation and apiVersion, as kube lists them.
        assert_eq!(
            out.encode(),
            Some(json!([
                {"manager": "a", "operation": "Apply", "apiVersion": "apps/v1", "time": T,
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}, "subresource": "scale"},
                {"manager": "u", "operation": "Update", "apiVersion": "apps/v1",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}},
                {"manager": "u", "operation": "Update", "apiVersion": "apps/v1", "time": T,
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:paused": {}}}}
            ]))
        );
        // Read back, the later of the two entries of one identity is the one kept.
        let again = managers(&out.encode().expect("managers"));
        assert_eq!(again.entries.len(), 2);
        assert_eq!(fields_of_u(&again), json!({"f:spec": {"f:paused": {}}}));
    }

    fn fields_of_u(m: &Managers) -> serde_json::Value {
        let u = ManagerId::new("u", super::super::Operation::Update, "apps/v1", "");
        crate::fieldpath::to_fields_v1_value(&m.get(&u).expect("u's entry").set)
    }

    #[test]
    fn entries_of_versions_kube_knows_but_does_not_serve_are_kept() {
        let mut paths = deployment_paths();
        paths.insert("apps/v1beta1".into(), Some(scale_replicas_path()));
        let parent = managers(&json!([
            {"manager": "old", "operation": "Update", "apiVersion": "apps/v1beta1", "time": T,
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}, "f:paused": {}}}},
            {"manager": "gone", "operation": "Update", "apiVersion": "extensions/v1beta1", "time": T,
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:paused": {}}}}
        ]));
        let scale = to_subresource(&parent, &paths);
        assert_eq!(scale.entries.len(), 1, "its owner of the replicas owns the Scale's");
        let scaler = managers(&json!([
            {"manager": "hpa", "operation": "Update", "apiVersion": "autoscaling/v1", "time": T,
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}, "subresource": "scale"}
        ]));
        let out = to_parent(&parent, &scaler, "apps/v1", &paths).encode().expect("managers");
        let list = out.as_array().expect("a list");
        assert_eq!(list.len(), 2, "the unknown version's entry goes: {out}");
        assert_eq!(list[0]["manager"], "hpa");
        assert_eq!(list[1]["apiVersion"], "apps/v1beta1");
        assert_eq!(list[1]["fieldsV1"], json!({"f:spec": {"f:paused": {}}}), "it lost the replicas");
    }

    #[test]
    fn custom_paths_map_both_ways() {
        let paths: ReplicasPaths =
            [("example.com/v1".to_string(), Some(dotted_path("spec.size"))), ("example.com/v2".to_string(), None)]
                .into();
        let parent = managers(&json!([
            {"manager": "m", "operation": "Apply", "apiVersion": "example.com/v1", "time": T,
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:size": {}, "f:color": {}}}},
            {"manager": "n", "operation": "Apply", "apiVersion": "example.com/v2", "time": T,
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:size": {}}}}
        ]));
        let scale = to_subresource(&parent, &paths);
        assert_eq!(scale.entries.len(), 1);
        let scaler = managers(&json!([
            {"manager": "hpa", "operation": "Apply", "apiVersion": "autoscaling/v1",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}, "subresource": "scale"}
        ]));
        let out = to_parent(&parent, &scaler, "example.com/v1", &paths);
        let list = out.encode().expect("managers");
        assert_eq!(list[0]["manager"], "hpa");
        assert_eq!(list[0]["apiVersion"], "example.com/v1");
        assert_eq!(list[0]["fieldsV1"], json!({"f:spec": {"f:size": {}}}));
        assert_eq!(list[1]["fieldsV1"], json!({"f:spec": {"f:color": {}}}), "m lost the size");
        assert_eq!(list[2]["fieldsV1"], json!({"f:spec": {"f:size": {}}}), "a version without scale keeps it");
    }
}
