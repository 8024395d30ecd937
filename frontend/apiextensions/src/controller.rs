//! The definition controller every frontend runs (kube's naming, establishing and
//! non-structural-schema controllers in one loop): it follows the CustomResourceDefinitions in
//! storage with one watch, keeps the [`Registry`] of served resources current, and writes each
//! definition's status: `acceptedNames`, the `NamesAccepted` and `Established` conditions and
//! `storedVersions`.
//!
//! Several frontends run it at once: a status is written only when what it says differs from
//! what is stored (timestamps aside), conditionally on the read revision, so replicas converge
//! instead of fighting; a replica that loses a race sees the winner's write on its watch.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{json, Value};

use ballast_apiserver::error::ApiError;
use ballast_apiserver::registry::deletion::DeleteOptions;
use ballast_apiserver::registry::store::ListOptions;
use ballast_apiserver::registry::{ResourceKind, Store};
use ballast_apiserver::storage::prefix_end;

use crate::definition::{Definition, Names};
use crate::registry::Registry;
use crate::validation::CLEANUP_FINALIZER;

/// How long the controller waits before listing again after storage failed it: long enough not
/// to hammer a storage that is down, short enough that serving resumes about when it returns.
pub const RETRY_INTERVAL: Duration = Duration::from_millis(500);

/// The definitions kind (the built-in API's row, where they are stored).
pub fn definitions_kind(store: &Store) -> Option<&'static ResourceKind> {
    store.kinds().find("apiextensions.k8s.io", "v1", "customresourcedefinitions")
}

/// The stores the controller writes through: the built-in one (definitions) and the one
/// serving custom resources (their cleanup).
#[derive(Debug, Clone)]
pub struct Stores {
    /// The built-in API's store, where definitions live.
    pub definitions: Store,
    /// The store of [`crate::registry::CrdKinds`].
    pub resources: Store,
    /// Definitions whose cleanup is running, by uid (one task each).
    cleaning: Arc<Mutex<HashSet<String>>>,
}

impl Stores {
    /// The two stores.
    pub fn new(definitions: Store, resources: Store) -> Stores {
        Stores { definitions, resources, cleaning: Arc::default() }
    }
}

/// Runs the controller until the process ends.
pub async fn run(stores: Stores, registry: Arc<Registry>) {
    let Some(kind) = definitions_kind(&stores.definitions) else {
        tracing::warn!("no customresourcedefinitions kind: custom resources are not served");
        return;
    };
    loop {
        if let Err(e) = follow(&stores, kind, &registry).await {
            tracing::info!(error = %e, "following CustomResourceDefinitions; listing again");
        }
        tokio::time::sleep(RETRY_INTERVAL).await;
    }
}

/// Lists the definitions, then applies every change the watch reports; returns when the watch
/// ends or fails.
async fn follow(stores: &Stores, kind: &'static ResourceKind, registry: &Arc<Registry>) -> Result<(), ApiError> {
    let store = &stores.definitions;
    let list = store.list(kind, "", &ListOptions::default()).await?;
    let revision: i64 = list["metadata"]["resourceVersion"].as_str().and_then(|r| r.parse().ok()).unwrap_or(0);
    let mut definitions: BTreeMap<String, Definition> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(Definition::from_json)
        .map(|d| (d.name.clone(), d))
        .collect();
    reconcile_all(stores, kind, &mut definitions, registry).await;
    let prefix = kind.collection_prefix(store.prefix(), "");
    let end = prefix_end(prefix.as_bytes());
    let mut events = store.storage().watch(prefix.as_bytes(), &end, revision).await?;
    while let Some(event) = events.next().await? {
        let name = String::from_utf8_lossy(&event.key[prefix.len().min(event.key.len())..]).into_owned();
        match &event.value {
            Some(bytes) => {
                let obj = ballast_apiserver::registry::object::from_storage(bytes, event.revision)?;
                definitions.insert(name, Definition::from_json(&Value::Object(obj)));
            }
            None => {
                definitions.remove(&name);
            }
        }
        // A change to one definition may free or take names of others in its group.
        reconcile_all(stores, kind, &mut definitions, registry).await;
    }
    Ok(())
}

/// Serves `definitions` with the statuses they should have, and writes those statuses.
///
/// `definitions` is what storage said at the watch's last event, plus this controller's own
/// status writes since: a write's result stands for the definition until the watch brings it
/// back (nothing else wrote the definition in between, or the conditional write would have
/// failed). Without that, an event of another definition arriving before the write's own
/// would serve this one by its stored state before the write (not yet `Established`), taking
/// its resources away for a moment from clients that already read `Established`.
async fn reconcile_all(
    stores: &Stores,
    kind: &'static ResourceKind,
    definitions: &mut BTreeMap<String, Definition>,
    registry: &Arc<Registry>,
) {
    let store = &stores.definitions;
    for def in definitions.values().filter(|d| d.terminating && has_cleanup_finalizer(d)) {
        start_cleanup(stores, kind, def, registry);
    }
    let mut writes = Vec::new();
    for def in definitions.values() {
        let Some(status) = desired_status(def, definitions) else { continue };
        let mut obj = match def.object.as_object() {
            Some(o) => o.clone(),
            None => continue,
        };
        obj.insert("status".into(), status);
        writes.push((def.name.clone(), obj));
    }
    // Served as the statuses will say before they say it (one rebuild per event): a client
    // that reads `Established` (`kubectl wait --for condition=established`) finds the
    // resources at once, as kube serves a definition once its names are accepted, before the
    // establishing controller writes `Established`.
    let mut next = definitions.clone();
    for (name, obj) in &writes {
        next.insert(name.clone(), Definition::from_json(&Value::Object(obj.clone())));
    }
    registry.replace(next);
    for (name, obj) in writes {
        match store.update_status(kind, "", &name, obj, false).await {
            Ok(written) => {
                definitions.insert(name, Definition::from_json(&Value::Object(written)));
            }
            // Another frontend wrote first, or the definition went away: the watch brings it
            // (and this replica's registry back to what is stored).
            Err(e) => tracing::debug!(error = %e, name = %name, "writing a definition's status"),
        }
    }
}

fn has_cleanup_finalizer(def: &Definition) -> bool {
    def.object["metadata"]["finalizers"].as_array().is_some_and(|f| f.iter().any(|f| f == CLEANUP_FINALIZER))
}

/// Starts deleting the custom resources of a terminating definition (kube's finalizer
/// controller), once per definition: every object goes (through the store, so their own
/// finalizers are honoured), then the definition's finalizer, which lets it go.
fn start_cleanup(stores: &Stores, kind: &'static ResourceKind, def: &Definition, registry: &Arc<Registry>) {
    if !stores.cleaning.lock().unwrap_or_else(PoisonError::into_inner).insert(def.uid.clone()) {
        return;
    }
    let (stores, def, registry) = (stores.clone(), def.clone(), registry.clone());
    tokio::spawn(async move {
        loop {
            match cleanup(&stores, kind, &def, &registry).await {
                Ok(true) => break,
                Ok(false) => {}
                Err(ApiError::NotFound { .. }) => break,
                Err(e) => tracing::info!(error = %e, name = %def.name, "deleting a definition's resources"),
            }
            tokio::time::sleep(RETRY_INTERVAL).await;
        }
        stores.cleaning.lock().unwrap_or_else(PoisonError::into_inner).remove(&def.uid);
    });
}

/// One round of cleanup; returns whether the definition was let go.
async fn cleanup(
    stores: &Stores,
    kind: &'static ResourceKind,
    def: &Definition,
    registry: &Registry,
) -> Result<bool, ApiError> {
    let snap = registry.snapshot();
    if let Some(served) = snap.served.iter().find(|s| s.definition == def.name) {
        let resources = &stores.resources;
        resources.delete_collection(served.kind, "", &ListOptions::default(), &DeleteOptions::default()).await?;
        let left = resources.list(served.kind, "", &ListOptions { limit: 1, ..ListOptions::default() }).await?;
        if left["items"].as_array().is_some_and(|i| !i.is_empty()) {
            // Objects with finalizers of their own: wait for them.
            return Ok(false);
        }
    }
    let current = stores.definitions.get(kind, "", &def.name).await?;
    if current["metadata"]["uid"] != def.uid.as_str() {
        return Ok(true);
    }
    let mut next = current.clone();
    let kept: Vec<Value> = current["metadata"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| *f != CLEANUP_FINALIZER)
        .cloned()
        .collect();
    if let Some(meta) = next.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("finalizers".into(), kept.into());
    }
    stores.definitions.update(kind, "", &def.name, next, false).await?;
    Ok(true)
}

fn condition(type_: &str, status: bool, reason: &str, message: &str, now: &str) -> Value {
    json!({"type": type_, "status": if status { "True" } else { "False" }, "lastTransitionTime": now,
           "reason": reason, "message": message})
}

/// The names of `def` that conflict with another definition of its group, as kube's naming
/// controller reports them: (reason, message). Only definitions count, as in kube: one taking
/// a built-in resource's names (or any name in a built-in group) is accepted and established,
/// and shadowed by the built-in API, which answers every path of its groups.
fn conflict(def: &Definition, definitions: &BTreeMap<String, Definition>) -> Option<(&'static str, String)> {
    let others: Vec<Names> = definitions
        .values()
        .filter(|o| o.name != def.name && o.group == def.group)
        .filter_map(|o| o.accepted.clone())
        .collect();
    let used =
        |n: &str| others.iter().any(|o| o.plural == n || o.singular == n || o.short_names.iter().any(|s| s == n));
    let kinds = |n: &str| others.iter().any(|o| o.kind == n || o.list_kind == n);
    let requested = &def.names;
    if used(&requested.plural) {
        return Some(("PluralConflict", format!("{:?} is already in use", requested.plural)));
    }
    if used(&requested.singular) {
        return Some(("SingularConflict", format!("{:?} is already in use", requested.singular)));
    }
    if let Some(s) = requested.short_names.iter().find(|s| used(s)) {
        return Some(("ShortNamesConflict", format!("{s:?} is already in use")));
    }
    if kinds(&requested.kind) {
        return Some(("KindConflict", format!("{:?} is already in use", requested.kind)));
    }
    if kinds(&requested.list_kind) {
        return Some(("ListKindConflict", format!("{:?} is already in use", requested.list_kind)));
    }
    None
}

/// Returns the status `def` should have, or `None` when the stored one already says it.
fn desired_status(def: &Definition, definitions: &BTreeMap<String, Definition>) -> Option<Value> {
    let now = ballast_apiserver::clock::now_rfc3339();
    let stored = &def.object["status"];
    let conflict = conflict(def, definitions);
    let accepted = match (&conflict, &def.accepted) {
        (None, _) => Some(def.names.clone()),
        (Some(_), previous) => previous.clone(),
    };
    let names_accepted = match &conflict {
        None => condition("NamesAccepted", true, "NoConflicts", "no conflicts found", &now),
        Some((reason, message)) => condition("NamesAccepted", false, reason, message, &now),
    };
    let was_established = def.condition_true("Established");
    let established = if conflict.is_none() || was_established {
        condition("Established", true, "InitialNamesAccepted", "the initial names have been accepted", &now)
    } else {
        condition("Established", false, "NotAccepted", "not all names are accepted", &now)
    };
    let mut conditions: Vec<Value> = stored["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| !matches!(c["type"].as_str(), Some("NamesAccepted" | "Established" | "Terminating")))
        .cloned()
        .collect();
    let mut wanted_conditions = vec![names_accepted, established];
    if def.terminating {
        wanted_conditions.push(condition(
            "Terminating",
            true,
            "InstanceDeletionInProgress",
            "CustomResource deletion is in progress",
            &now,
        ));
    }
    for wanted in wanted_conditions {
        // Keep the stored transition time when the condition did not change.
        let keep = def.condition(wanted["type"].as_str().unwrap_or("")).filter(|c| {
            c["status"] == wanted["status"] && c["reason"] == wanted["reason"] && c["message"] == wanted["message"]
        });
        conditions.push(keep.cloned().unwrap_or(wanted));
    }
    conditions.sort_by_key(|c| match c["type"].as_str() {
        Some("NamesAccepted") => 0,
        Some("Established") => 1,
        _ => 2,
    });
    let mut stored_versions: Vec<String> =
        stored["storedVersions"].as_array().into_iter().flatten().filter_map(Value::as_str).map(String::from).collect();
    if let Some(v) = def.storage_version() {
        if !stored_versions.iter().any(|s| s == v) {
            stored_versions.push(v.to_string());
        }
    }
    let mut status = stored.as_object().cloned().unwrap_or_default();
    status.insert("conditions".into(), conditions.into());
    status.insert("acceptedNames".into(), accepted.map_or_else(|| json!({"plural": "", "kind": ""}), |n| n.to_json()));
    status.insert("storedVersions".into(), stored_versions.into());
    let status = Value::Object(status);
    (status != *stored).then_some(status)
}
