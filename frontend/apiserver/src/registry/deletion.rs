//! Deletion with kube's object lifecycle: preconditions, finalizers (an object with
//! finalizers gets `deletionTimestamp` and stays until they are gone), graceful deletion
//! (pods a kubelet runs wait out their grace period), `propagationPolicy` (Orphan and
//! Foreground add the `orphan` / `foregroundDeletion` finalizers), deletecollection and the
//! namespace lifecycle.
//!
//! There is no garbage collector or namespace controller in this frontend, so their part is
//! done inline: the garbage-collection finalizers are recorded (a MODIFIED event with the
//! finalizer, as kube writes it) and then removed at once, with no dependents orphaned or
//! deleted; a deleted namespace is marked `Terminating`, emptied, and removed once nothing in
//! it remains (objects held by finalizers keep it `Terminating` until they go).

use serde_json::{json, Value};

use super::object::{self, meta_str};
use super::store::{conflict, not_found, ListOptions, MAX_UPDATE_ATTEMPTS};
use super::strategy::{map_field_mut, Object};
use super::{ResourceKind, ServedKinds, Store};
use crate::error::{ApiError, OPTIMISTIC_LOCK_MESSAGE};
use crate::storage::{prefix_end, StorageError};

/// `DeleteOptions`.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// `dryRun: ["All"]`.
    pub dry_run: bool,
    /// `gracePeriodSeconds`.
    pub grace_period_seconds: Option<i64>,
    /// `propagationPolicy`: `Orphan`, `Background` or `Foreground`.
    pub propagation_policy: Option<String>,
    /// The deprecated `orphanDependents`.
    pub orphan_dependents: Option<bool>,
}

/// The finalizers the garbage collector owns.
const GC_FINALIZERS: [&str; 2] = ["orphan", "foregroundDeletion"];

/// Returns the garbage-collection finalizer a delete asks for.
fn gc_finalizer(opts: &DeleteOptions) -> Option<&'static str> {
    match opts.propagation_policy.as_deref() {
        Some("Orphan") => Some("orphan"),
        Some("Foreground") => Some("foregroundDeletion"),
        Some(_) => None,
        None => opts.orphan_dependents.and_then(|o| o.then_some("orphan")),
    }
}

/// Validates the policy values as kube does.
///
/// # Errors
///
/// Returns `Invalid` for unknown policies or a policy combined with `orphanDependents`.
pub fn validate_delete_options(opts: &DeleteOptions) -> Result<(), ApiError> {
    let invalid = |cause| ApiError::Invalid {
        group: "meta.k8s.io".into(),
        kind: "DeleteOptions".into(),
        name: String::new(),
        causes: vec![cause],
    };
    if let Some(p) = opts.propagation_policy.as_deref() {
        if !["Orphan", "Background", "Foreground"].contains(&p) {
            return Err(invalid(crate::error::FieldError::not_supported(
                "propagationPolicy",
                p,
                &["Foreground", "Background", "Orphan", "nil"],
            )));
        }
        if opts.orphan_dependents.is_some() {
            return Err(invalid(crate::error::FieldError::invalid(
                "propagationPolicy",
                p,
                "orphanDependents and deletionPropagation cannot be both set",
            )));
        }
    }
    if opts.grace_period_seconds.is_some_and(|g| g < 0) {
        return Err(invalid(crate::error::FieldError::invalid(
            "gracePeriodSeconds",
            opts.grace_period_seconds.unwrap_or_default(),
            "must be greater than or equal to 0",
        )));
    }
    Ok(())
}

fn check_preconditions(
    kind: &ResourceKind,
    name: &str,
    old: &Object,
    mod_revision: i64,
    opts: &DeleteOptions,
) -> Result<(), ApiError> {
    if let Some(uid) = &opts.uid {
        let actual = meta_str(old, "uid");
        if uid != actual {
            return Err(conflict(
                kind,
                name,
                format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"),
            ));
        }
    }
    if let Some(rv) = &opts.resource_version {
        if *rv != mod_revision.to_string() {
            return Err(conflict(
                kind,
                name,
                format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: \
                     {mod_revision}"
                ),
            ));
        }
    }
    Ok(())
}

fn served(kind: &ResourceKind, mut obj: Object) -> Result<Object, ApiError> {
    object::to_served_version(kind, &mut obj)?;
    Ok(obj)
}

fn deleted_answer(kind: &ResourceKind, old: Object) -> Value {
    if kind.return_deleted_object {
        return Value::Object(old);
    }
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": meta_str(&old, "name"), "kind": kind.resource, "uid": meta_str(&old, "uid")},
    })
}

/// The kinds of `kinds` whose objects live in namespaces, one per storage (kinds served under
/// two versions share one): what a namespace's deletion empties.
pub fn namespaced_storages(kinds: &dyn ServedKinds) -> impl Iterator<Item = &'static ResourceKind> + '_ {
    kinds.kinds().iter().copied().filter(|k| k.namespaced && k.converter.is_none() && k.verbs.allows("delete"))
}

impl Store {
    /// What deleting a namespace empties: this store's namespaced kinds and those another
    /// server keeps on the same storage ([`Store::with_namespaced_elsewhere`]), one row per
    /// storage. The other server's rows are told apart by their storage (a custom resource
    /// served in several versions has a row per version, all of them converting).
    fn namespace_contents(&self) -> Vec<&'static ResourceKind> {
        let mut contents: Vec<&'static ResourceKind> = namespaced_storages(&**self.kinds()).collect();
        let elsewhere = self.namespaced_elsewhere().map(|k| k.kinds().to_vec()).unwrap_or_default();
        for kind in elsewhere.into_iter().filter(|k| k.namespaced && k.verbs.allows("delete")) {
            if !contents.iter().any(|c| c.storage_resource == kind.storage_resource) {
                contents.push(kind);
            }
        }
        contents
    }
}

impl Store {
    /// Deletes an object. Answers with the deleted object for kinds that return it, else a
    /// `Success` Status; an object that stays (finalizers, grace period) is answered as it is
    /// now. Namespaces go through [`Store::delete_namespace`].
    ///
    /// # Errors
    ///
    /// Returns `NotFound`, `Invalid` options, or `Conflict` when a precondition fails.
    pub async fn delete(
        &self,
        kind: &ResourceKind,
        namespace: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        validate_delete_options(opts)?;
        if kind.is(self.kinds().namespaces()) {
            return self.delete_namespace(name, opts).await;
        }
        self.delete_object(kind, namespace, name, opts).await
    }

    async fn delete_object(
        &self,
        kind: &ResourceKind,
        namespace: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        let key = kind.key(self.prefix(), namespace, name);
        let gc = gc_finalizer(opts);
        for _ in 0..MAX_UPDATE_ATTEMPTS {
            let (old, kv) = self.read(kind, namespace, name).await?;
            check_preconditions(kind, name, &old, kv.mod_revision, opts)?;
            let deleting = !meta_str(&old, "deletionTimestamp").is_empty();
            let mut finalizers = object::finalizer_list(&old);
            if let Some(f) = gc.filter(|f| !deleting && !finalizers.iter().any(|x| x == f)) {
                finalizers.push(f.to_string());
            }
            if !deleting {
                for f in self.finalizers_on_delete(kind, &old) {
                    if !finalizers.contains(&f) {
                        finalizers.push(f);
                    }
                }
            }
            let grace = kind.strategy.graceful_delete(&old, opts.grace_period_seconds).unwrap_or(0);
            if finalizers.is_empty() && grace == 0 {
                if opts.dry_run {
                    return Ok(deleted_answer(kind, served(kind, old)?));
                }
                match self.storage().delete(key.as_bytes(), kv.mod_revision).await {
                    Ok(revision) => {
                        let mut old = served(kind, old)?;
                        map_field_mut(&mut old, "metadata")
                            .insert("resourceVersion".into(), revision.to_string().into());
                        if kind.namespaced {
                            self.finish_namespace_if_terminating(namespace).await?;
                        }
                        return Ok(deleted_answer(kind, old));
                    }
                    Err(StorageError::Conflict { .. }) if opts.resource_version.is_none() => continue,
                    Err(StorageError::Conflict { .. }) => return Err(conflict(kind, name, OPTIMISTIC_LOCK_MESSAGE)),
                    Err(StorageError::KeyNotFound) => return Err(not_found(kind, name)),
                    Err(e) => return Err(e.into()),
                }
            }
            // The object stays. A repeated delete only shortens a grace period.
            let old_grace = old["metadata"]["deletionGracePeriodSeconds"].as_i64();
            if deleting && old_grace.is_none_or(|g| grace >= g) {
                return Ok(Value::Object(served(kind, old)?));
            }
            let mut new = old.clone();
            let meta = map_field_mut(&mut new, "metadata");
            meta.insert(
                "deletionTimestamp".into(),
                crate::clock::format_rfc3339(crate::clock::unix_now() + grace).into(),
            );
            meta.insert("deletionGracePeriodSeconds".into(), grace.into());
            // Setting deletionTimestamp is a change of desired state: kube bumps the generation.
            if let Some(generation) = meta.get("generation").and_then(Value::as_i64).filter(|g| *g > 0) {
                meta.insert("generation".into(), (generation + 1).into());
            }
            if !finalizers.is_empty() {
                meta.insert("finalizers".into(), json!(finalizers));
            }
            if opts.dry_run {
                return Ok(Value::Object(served(kind, new)?));
            }
            match self.storage().update(key.as_bytes(), object::to_storage(&new), kv.mod_revision).await {
                Ok(revision) => {
                    map_field_mut(&mut new, "metadata").insert("resourceVersion".into(), revision.to_string().into());
                }
                Err(StorageError::Conflict { .. }) if opts.resource_version.is_none() => continue,
                Err(StorageError::Conflict { .. }) => return Err(conflict(kind, name, OPTIMISTIC_LOCK_MESSAGE)),
                Err(StorageError::KeyNotFound) => return Err(not_found(kind, name)),
                Err(e) => return Err(e.into()),
            }
            if gc.is_some() {
                self.collect_garbage(kind, namespace, name).await?;
            }
            return Ok(Value::Object(served(kind, new)?));
        }
        Err(conflict(kind, name, OPTIMISTIC_LOCK_MESSAGE))
    }

    /// Does the garbage collector's part for an object it holds: removes its finalizers
    /// (which deletes the object when no other finalizer remains).
    async fn collect_garbage(&self, kind: &ResourceKind, namespace: &str, name: &str) -> Result<(), ApiError> {
        let result = self
            .guaranteed_update(kind, namespace, name, None, false, |cur| {
                let mut next = cur.clone();
                let meta = map_field_mut(&mut next, "metadata");
                let kept: Vec<String> =
                    object::finalizer_list(cur).into_iter().filter(|f| !GC_FINALIZERS.contains(&f.as_str())).collect();
                if kept.is_empty() {
                    meta.remove("finalizers");
                } else {
                    meta.insert("finalizers".into(), json!(kept));
                }
                Ok(next)
            })
            .await;
        match result {
            Ok(_) | Err(ApiError::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Deletes every object of a collection that the selectors match; returns them as a list.
    ///
    /// # Errors
    ///
    /// As [`Store::list`] and [`Store::delete`].
    pub async fn delete_collection(
        &self,
        kind: &ResourceKind,
        namespace: &str,
        list_opts: &ListOptions,
        opts: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        validate_delete_options(opts)?;
        let list = self.list(kind, namespace, list_opts).await?;
        let mut deleted = Vec::new();
        for item in list["items"].as_array().into_iter().flatten() {
            let ns = item["metadata"]["namespace"].as_str().unwrap_or("");
            let name = item["metadata"]["name"].as_str().unwrap_or("");
            // Namespaces have no deletecollection, so no namespace lifecycle applies here.
            match self.delete_object(kind, ns, name, opts).await {
                Ok(_) => deleted.push(item.clone()),
                // Gone in the meantime: someone else deleted it, which is the goal.
                Err(ApiError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(json!({
            "kind": format!("{}List", kind.kind),
            "apiVersion": kind.api_version(),
            "metadata": {"resourceVersion": list["metadata"]["resourceVersion"]},
            "items": deleted,
        }))
    }

    /// Deletes a namespace: marks it `Terminating` (a MODIFIED event, as kube-apiserver does),
    /// deletes everything in it, then removes it if nothing remains, and answers with the
    /// terminating object.
    ///
    /// # Errors
    ///
    /// Returns `NotFound`, or `Conflict` when a precondition fails.
    pub async fn delete_namespace(&self, name: &str, opts: &DeleteOptions) -> Result<Value, ApiError> {
        let kind = self.kinds().namespaces();
        let key = kind.key(self.prefix(), "", name);
        let (mut ns, kv) = self.read(kind, "", name).await?;
        check_preconditions(kind, name, &ns, kv.mod_revision, opts)?;
        if opts.dry_run {
            return Ok(Value::Object(ns));
        }
        if meta_str(&ns, "deletionTimestamp").is_empty() {
            let meta = map_field_mut(&mut ns, "metadata");
            meta.insert("deletionTimestamp".into(), crate::clock::now_rfc3339().into());
            meta.insert("deletionGracePeriodSeconds".into(), 0.into());
            map_field_mut(&mut ns, "status").insert("phase".into(), "Terminating".into());
            let revision = match self.storage().update(key.as_bytes(), object::to_storage(&ns), kv.mod_revision).await {
                Ok(r) => r,
                Err(StorageError::Conflict { .. }) => return Err(conflict(kind, name, OPTIMISTIC_LOCK_MESSAGE)),
                Err(StorageError::KeyNotFound) => return Err(not_found(kind, name)),
                Err(e) => return Err(e.into()),
            };
            map_field_mut(&mut ns, "metadata").insert("resourceVersion".into(), revision.to_string().into());
        }
        for content in self.namespace_contents() {
            self.delete_collection(content, name, &ListOptions::default(), &DeleteOptions::default()).await?;
        }
        self.finish_namespace_if_terminating(name).await?;
        Ok(Value::Object(ns))
    }

    /// Removes namespace `name` if it is terminating and empty (the namespace controller's
    /// last step).
    pub(crate) async fn finish_namespace_if_terminating(&self, name: &str) -> Result<(), ApiError> {
        let kind = self.kinds().namespaces();
        let (ns, kv) = match self.read(kind, "", name).await {
            Ok(found) => found,
            Err(ApiError::NotFound { .. }) => return Ok(()),
            Err(e) => return Err(e),
        };
        if meta_str(&ns, "deletionTimestamp").is_empty() {
            return Ok(());
        }
        for content in self.namespace_contents() {
            let prefix = content.collection_prefix(self.prefix(), name);
            let page = self.storage().list(prefix.as_bytes(), &prefix_end(prefix.as_bytes()), 1, 0).await?;
            if !page.kvs.is_empty() {
                return Ok(());
            }
        }
        match self.storage().delete(kind.key(self.prefix(), "", name).as_bytes(), kv.mod_revision).await {
            // A concurrent change (another finisher) is fine: the namespace is going anyway.
            Ok(_) | Err(StorageError::KeyNotFound | StorageError::Conflict { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn propagation_policies() {
        let opts = |p: Option<&str>, o: Option<bool>| DeleteOptions {
            propagation_policy: p.map(String::from),
            orphan_dependents: o,
            ..DeleteOptions::default()
        };
        assert_eq!(gc_finalizer(&opts(Some("Orphan"), None)), Some("orphan"));
        assert_eq!(gc_finalizer(&opts(Some("Foreground"), None)), Some("foregroundDeletion"));
        assert_eq!(gc_finalizer(&opts(Some("Background"), None)), None);
        assert_eq!(gc_finalizer(&opts(None, Some(true))), Some("orphan"));
        assert!(validate_delete_options(&opts(Some("Sideways"), None)).is_err());
        assert!(validate_delete_options(&opts(Some("Orphan"), Some(true))).is_err());
    }
}
