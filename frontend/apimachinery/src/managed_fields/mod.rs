//! Field ownership (kube's managedFields): who set which fields of an object, kept up to date
//! on every write, and server-side apply on top of it.
//!
//! * [`entries`]: [`Managers`], the decoded `metadata.managedFields` list, and its encoding.
//! * [`scale`]: the managers of a `Scale`, derived from its parent's and carried back.
//! * [`versions`]: managers recorded through other versions of the kind, whose fields are
//!   compared and pruned in their own version.
//! * this module: [`FieldManager`], kube's field manager chain for one kind and subresource:
//!   [`FieldManager::update`] records what a create, update or patch changed as the writer's
//!   `Update` entry; [`FieldManager::apply`] merges an applied configuration, removes what
//!   the applier stopped sending (unless another manager owns it), and reports conflicts with
//!   other managers' fields unless forced.
//!
//! The rules, as kube's: an update entry is one per manager, apiVersion and subresource, and a
//! manager's consecutive updates merge into it; at most [`MAX_UPDATE_MANAGERS`] update entries
//! are kept, the oldest merged into `ancient-changes`; the identity fields (`apiVersion`,
//! `kind`, `metadata.name`, `uid`, `resourceVersion`, ...) are never owned; a request's
//! `managedFields: []` resets ownership and one that does not decode is ignored; an object
//! that carries no managedFields gets none from an update, and its first apply gives what it
//! holds to `before-first-apply`. A conflict leaves everything unwritten.
//!
//! Pure: objects in, objects and managers out; the time is passed in.

pub mod entries;
pub mod scale;
pub mod versions;

use serde_json::Value;

pub use entries::{Entry, ManagerId, Managers, Operation};
pub use versions::KindVersions;

use crate::fieldpath::{path_string, Path, PathElement, Set};
use crate::typed::{compare, merge, remove_items, to_set, with_named_fields, Comparison, TypeSchema, TypedError};
use versions::VersionViews;

/// kube's cap on update entries (`DefaultMaxUpdateManagers`).
pub const MAX_UPDATE_MANAGERS: usize = 10;
/// The entry older updates are merged into past the cap.
pub const ANCIENT_CHANGES: &str = "ancient-changes";
/// The entry an object's fields go to when it is first applied to without managedFields.
pub const BEFORE_FIRST_APPLY: &str = "before-first-apply";
/// kubectl's client-side apply annotation.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// One field two managers both set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The other manager.
    pub manager: ManagerId,
    /// The field.
    pub path: Path,
}

/// Why an apply failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApplyError {
    /// Fields owned by other managers would change (409).
    #[error("{}", conflict_message(.0))]
    Conflicts(Vec<Conflict>),
    /// The request is wrong (400), e.g. `metadata.managedFields must be nil`.
    #[error("{0}")]
    BadRequest(String),
    /// The configuration or the object does not fit the kind's schema (kube answers 500).
    #[error("{context}: {source}")]
    Typed {
        /// What was being done, e.g. `failed to create typed patch object (ns/name; apps/v1, Kind=Deployment)`.
        context: String,
        /// The schema error.
        source: TypedError,
    },
    /// The stored managedFields do not decode (kube answers 500).
    #[error("failed to decode managed fields: {0}")]
    Stored(String),
    /// The object could not be converted to a manager's version: a conversion webhook failed
    /// (kube answers 500 with this text).
    #[error("{context}: {message}")]
    Conversion {
        /// What was being converted, in kube's words (`failed to convert old object`).
        context: &'static str,
        /// The converter's error.
        message: String,
    },
}

/// kube's conflict message: one conflict on one line, several grouped by manager.
pub fn conflict_message(conflicts: &[Conflict]) -> String {
    if let [only] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            only.manager.describe(),
            path_string(&only.path)
        );
    }
    let mut by_manager: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for c in conflicts {
        by_manager.entry(c.manager.describe()).or_default().push(path_string(&c.path));
    }
    let mut lines = Vec::new();
    for (manager, paths) in by_manager {
        lines.push(format!("conflicts with {manager}:"));
        lines.extend(paths.into_iter().map(|p| format!("- {p}")));
    }
    format!("Apply failed with {} conflicts: {}", conflicts.len(), lines.join("\n"))
}

/// The paths no manager owns (kube's strip-meta set), built once.
fn strip_set() -> &'static Set {
    static STRIP: std::sync::LazyLock<Set> = std::sync::LazyLock::new(build_strip_set);
    &STRIP
}

/// Returns `set` without the paths no manager owns.
fn stripped(mut set: Set) -> Set {
    set.remove_in_place(strip_set());
    set
}

fn build_strip_set() -> Set {
    let mut s = Set::new();
    let f = |n: &str| PathElement::Field(n.into());
    s.insert(&[f("apiVersion")]);
    s.insert(&[f("kind")]);
    s.insert(&[f("metadata")]);
    for m in [
        "name",
        "namespace",
        "creationTimestamp",
        "selfLink",
        "uid",
        "clusterName",
        "generation",
        "managedFields",
        "resourceVersion",
    ] {
        s.insert(&[f("metadata"), f(m)]);
    }
    s
}

/// An object without `metadata.managedFields` (ownership is never compared).
fn without_managed_fields(obj: &Value) -> Value {
    let mut obj = obj.clone();
    take_managed_fields(&mut obj);
    obj
}

/// Takes `metadata.managedFields` out of `obj`.
fn take_managed_fields(obj: &mut Value) -> Option<Value> {
    match obj.get_mut("metadata") {
        Some(Value::Object(meta)) => meta.remove("managedFields"),
        _ => None,
    }
}

/// The field manager of one kind, version and subresource.
#[derive(Clone, Copy)]
pub struct FieldManager<'a> {
    /// The kind's types.
    pub schema: &'a TypeSchema,
    /// The served `group/version` (`v1`, `apps/v1`): update entries record it.
    pub api_version: &'a str,
    /// "" for the object, `status` or `scale`.
    pub subresource: &'a str,
    /// The kind's other versions: entries recorded through one of them are compared and
    /// pruned in it, and dropped when the kind is not served in it. `None` compares every
    /// entry in [`FieldManager::api_version`] (a kind whose versions all have the same fields).
    pub versions: Option<&'a dyn KindVersions>,
    /// The fields the kind's strategy resets on a write through this subresource (kube's
    /// `ResetFieldsFor`: `status` through the object of a kind with `/status`, `spec` through
    /// `/status`): an update's manager owns none of them, whatever the object carries.
    pub reset: &'a [&'a [PathElement]],
}

impl std::fmt::Debug for FieldManager<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FieldManager")
            .field("api_version", &self.api_version)
            .field("subresource", &self.subresource)
            .field("versions", &self.versions.is_some())
            .finish_non_exhaustive()
    }
}

/// What an update leaves: the managedFields to store (`None`: none).
pub type UpdateOutcome = Option<Value>;

impl FieldManager<'_> {
    /// Records a create or update by `manager` (kube's `FieldManager.Update`): `live` is the
    /// stored object (`None` for a create), `new` the object about to be stored (without
    /// managedFields), `requested` the managedFields the request carried (ignored for
    /// subresources). `now` is the write's `metav1.Time`.
    ///
    /// Returns the managedFields to store. Never fails: a schema error keeps the live
    /// managedFields, as kube does.
    pub fn update(
        &self,
        live: Option<&Value>,
        new: &Value,
        requested: Option<&Value>,
        manager: &str,
        now: &str,
    ) -> UpdateOutcome {
        let live_managed = live.and_then(|l| l.get("metadata")).and_then(|m| m.get("managedFields"));
        let live_decoded = || live_managed.map_or(Ok(Managers::default()), Managers::decode).unwrap_or_default();
        let mut managers = if !self.subresource.is_empty() {
            live_decoded()
        } else if entries::is_reset(requested) {
            Managers::default()
        } else {
            match requested.map(Managers::decode) {
                Some(Ok(m)) if !m.is_empty() => m,
                _ => live_decoded(),
            }
        };
        // An object kube already stores without managedFields stays so on update.
        if managers.is_empty() && live.is_some() {
            return None;
        }
        self.drop_unserved(&mut managers);
        let empty = self.empty_object(new);
        let before = live.map_or(empty, without_managed_fields);
        let id = ManagerId::new(manager, Operation::Update, self.api_version, self.subresource);
        let recorded = self.record_update(&before, &without_managed_fields(new), &mut managers, &id, now);
        // kube stores no managedFields when a manager's version could not be converted to.
        if self.versions.and_then(KindVersions::take_failure).is_some() {
            return None;
        }
        match recorded {
            Ok(()) => {
                cap_update_managers(&mut managers);
                managers.encode()
            }
            Err(_) => live_managed.cloned(),
        }
    }

    /// kube's zero value of the kind, what a create is compared against: the object's
    /// identity and the value structs of its Go type (`metadata`, `spec`, `status`, a
    /// Deployment's `template` and `strategy`, but not a ReplicationController's `template`,
    /// a pointer), always written even empty, so that a create owns their fields but not the
    /// structs themselves ([`TypeSchema::zero_value`]).
    fn empty_object(&self, new: &Value) -> Value {
        let mut m = self.schema.zero_value(new);
        for k in ["apiVersion", "kind"] {
            if let Some(v) = new.get(k) {
                m.insert(k.into(), v.clone());
            }
        }
        Value::Object(m)
    }

    fn record_update(
        &self,
        live: &Value,
        new: &Value,
        managers: &mut Managers,
        id: &ManagerId,
        now: &str,
    ) -> Result<(), TypedError> {
        let cmp = compare(self.schema, live, new)?;
        self.release_changed(managers, live, new, &cmp, None)?;
        let mut mine = stripped(cmp.modified.union(&cmp.added)).without_prefixes(self.reset);
        if mine.is_empty() {
            return Ok(());
        }
        let key = id.identifier();
        if let Some(previous) = managers.entries.get(&key) {
            mine.union_in_place(&previous.set.without_prefixes(self.reset));
        }
        managers.entries.insert(
            key,
            Entry { id: id.clone(), api_version: self.api_version.into(), time: Some(now.into()), set: mine },
        );
        Ok(())
    }

    /// Applies `config` for `manager` (kube's `FieldManager.Apply`) to `live` (the stored
    /// object, or the new object's identity for an apply that creates; its managedFields are
    /// taken out). Returns the merged object (without managedFields) and the managedFields to
    /// store; `None` as object when nothing but ownership changes (`live` is then the object).
    ///
    /// # Errors
    ///
    /// [`ApplyError::Conflicts`] unless `force`; [`ApplyError::BadRequest`] for a
    /// configuration carrying managedFields; [`ApplyError::Typed`] for one that does not fit
    /// the schema; [`ApplyError::Stored`] when the stored managedFields do not decode.
    pub fn apply(
        &self,
        live: &mut Value,
        config: &Value,
        manager: &str,
        force: bool,
        now: &str,
        describe: &str,
    ) -> Result<(Option<Value>, Option<Value>), ApplyError> {
        let live_managed = take_managed_fields(live);
        self.apply_with_managed(live, live_managed.as_ref(), config, manager, force, now, describe)
    }

    /// [`FieldManager::apply`] to `live` (without managedFields) whose managedFields are
    /// `live_managed`: a caller holding the stored object copies it without its managedFields,
    /// often the larger part, only to read them here.
    ///
    /// # Errors
    ///
    /// As [`FieldManager::apply`].
    #[allow(clippy::too_many_arguments)]
    pub fn apply_with_managed(
        &self,
        live: &Value,
        live_managed: Option<&Value>,
        config: &Value,
        manager: &str,
        force: bool,
        now: &str,
        describe: &str,
    ) -> Result<(Option<Value>, Option<Value>), ApplyError> {
        if config.get("metadata").and_then(|m| m.get("managedFields")).is_some_and(|v| !v.is_null()) {
            return Err(ApplyError::BadRequest("metadata.managedFields must be nil".into()));
        }
        let mut managers = match live_managed {
            Some(v) => Managers::decode(v).map_err(ApplyError::Stored)?,
            None => Managers::default(),
        };
        if managers.is_empty() {
            // The fields an object already holds belong to whoever set them before.
            let id = ManagerId::new(BEFORE_FIRST_APPLY, Operation::Update, self.api_version, self.subresource);
            let empty = self.empty_object(live);
            self.record_update(&empty, live, &mut managers, &id, now)
                .map_err(typed("failed to create manager for existing fields", describe))?;
        }
        self.drop_unserved(&mut managers);
        let id = ManagerId::new(manager, Operation::Apply, self.api_version, self.subresource);
        // kubectl may retry forced (below), so it keeps a copy of the managers.
        let retry = (manager == "kubectl").then(|| managers.clone());
        let attempt = self.apply_once(live, config, managers, &id, force, describe);
        let (object, mut managers) = match attempt {
            Err(ApplyError::Conflicts(conflicts)) if manager == "kubectl" => {
                // kubectl moving from client-side apply: fields its last-applied annotation
                // holds with their live values are its own.
                let allowed = self.allowed_from_last_applied(live).unwrap_or_default();
                let rest: Vec<Conflict> = conflicts.into_iter().filter(|c| !allowed.has(&c.path)).collect();
                if !rest.is_empty() {
                    return Err(ApplyError::Conflicts(rest));
                }
                self.apply_once(live, config, retry.unwrap_or_default(), &id, true, describe)?
            }
            other => other?,
        };
        let key = id.identifier();
        if let Some(entry) = managers.entries.get_mut(&key) {
            if object.is_some() {
                entry.time = Some(now.into());
            }
            entry.set = stripped(std::mem::take(&mut entry.set));
            if entry.set.is_empty() {
                managers.entries.remove(&key);
            }
        }
        let mut object = object;
        if manager == "kubectl" {
            let target = object.get_or_insert_with(|| live.clone());
            if has_last_applied(target) {
                set_last_applied(target, config);
            } else if object.as_ref() == Some(live) {
                object = None;
            }
        }
        Ok((object, managers.encode()))
    }

    /// kube's `Updater.Apply`: merge, take ownership of what the configuration sets, prune
    /// what the applier no longer sets, then check the result against the other managers.
    fn apply_once(
        &self,
        live: &Value,
        config: &Value,
        mut managers: Managers,
        id: &ManagerId,
        force: bool,
        describe: &str,
    ) -> Result<(Option<Value>, Managers), ApplyError> {
        let config_set = to_set(self.schema, config).map_err(typed("failed to create typed patch object", describe))?;
        let merged =
            merge(self.schema, live, config).map_err(typed("failed to merge the applied configuration", describe))?;
        let key = id.identifier();
        let last = managers.entries.insert(
            key.clone(),
            Entry { id: id.clone(), api_version: self.api_version.into(), time: None, set: config_set },
        );
        let (last_set, last_version) = match last {
            Some(e) => {
                if let Some(entry) = managers.entries.get_mut(&key) {
                    entry.time = e.time;
                }
                (e.set, e.api_version)
            }
            None => (Set::new(), String::new()),
        };
        let empty = Set::new();
        let current = managers.entries.get(&key).map_or(&empty, |e| &e.set);
        let merged = self.prune(merged, &managers, &last_set, &last_version, current);
        self.conversion_failed("failed to prune fields: failed to convert merged object to last applied version")?;
        let merged = merged.map_err(typed("failed to prune fields", describe))?;
        let cmp = compare(self.schema, live, &merged).map_err(typed("failed to compare objects", describe))?;
        let conflicts = self.release_changed(&mut managers, live, &merged, &cmp, Some((&key, force)));
        // The old object is converted before the new one, so its conversion fails first.
        self.conversion_failed("failed to convert old object")?;
        let conflicts = conflicts.map_err(typed("failed to compare objects", describe))?;
        if !conflicts.is_empty() {
            return Err(ApplyError::Conflicts(conflicts));
        }
        Ok(((!cmp.is_same()).then_some(merged), managers))
    }

    /// Fails with the conversion that failed (see [`KindVersions::take_failure`]), if one did.
    fn conversion_failed(&self, context: &'static str) -> Result<(), ApplyError> {
        match self.versions.and_then(KindVersions::take_failure) {
            Some(message) => Err(ApplyError::Conversion { context, message }),
            None => Ok(()),
        }
    }

    /// Removes from `merged` what the applier set last time (`last_set`, at `last_version`)
    /// and no longer does, unless another manager owns it (kube's `prune` with its two
    /// add-backs). The pruning is done in the version the applier last applied through; its
    /// result is carried back to this one.
    fn prune(
        &self,
        merged: Value,
        managers: &Managers,
        last_set: &Set,
        last_version: &str,
        current: &Set,
    ) -> Result<Value, TypedError> {
        if last_set.is_empty() {
            return Ok(merged);
        }
        let versions = match self.versions {
            Some(v) if last_version != self.api_version => v,
            _ => {
                // Nothing to prune when the applier still sets every path it set last time
                // (the usual re-apply): pruning would take out only what its new set adds
                // back, and what defaulting restores.
                if last_set.difference(current).is_empty() {
                    return Ok(merged);
                }
                return self.prune_in(self.schema, self.api_version, &merged, managers, last_set);
            }
        };
        // A version the object does not convert to prunes nothing, as kube's missing version.
        let Some(schema) = versions.schema(last_version) else { return Ok(merged) };
        let Some(merged_last) = versions.convert(&merged, self.api_version, last_version) else { return Ok(merged) };
        let pruned_last = self.prune_in(&schema, last_version, &merged_last, managers, last_set)?;
        let s = self.schema;
        let (Some(base), Some(back)) = (
            versions.convert(&merged_last, last_version, self.api_version),
            versions.convert(&pruned_last, last_version, self.api_version),
        ) else {
            return Ok(merged);
        };
        // What the pruning removed, measured against the round trip rather than `merged`
        // itself: a field the last version cannot express was never the applier's to prune.
        let gone = with_named_fields(s, &to_set(s, &base)?).difference(&with_named_fields(s, &to_set(s, &back)?));
        Ok(remove_items(s, &merged, &gone))
    }

    /// kube's prune in one version (`version`, with its types `s`): removes `last_set` from
    /// `merged`, then adds back what any manager owns (in its own version) and what the
    /// applier never owned.
    fn prune_in(
        &self,
        s: &TypeSchema,
        version: &str,
        merged: &Value,
        managers: &Managers,
        last_set: &Set,
    ) -> Result<Value, TypedError> {
        let pruned = remove_items(s, merged, &with_named_fields(s, last_set));
        // Add back what any manager owns: those of this version first, then version by version.
        let mut owned = Set::new();
        let mut owned_elsewhere: std::collections::BTreeMap<&str, Set> = Default::default();
        for e in managers.entries.values() {
            match self.versions {
                Some(_) if e.api_version != version => {
                    owned_elsewhere.entry(e.api_version.as_str()).or_default().union_in_place(&e.set)
                }
                _ => owned.union_in_place(&e.set),
            }
        }
        let merged_set = with_named_fields(s, &to_set(s, merged)?);
        let pruned_set = with_named_fields(s, &to_set(s, &pruned)?);
        let keep = pruned_set.union(&with_named_fields(s, &owned));
        let mut pruned = remove_items(s, merged, &merged_set.difference(&keep));
        if let Some(versions) = self.versions {
            for (other, owned) in owned_elsewhere {
                pruned = add_back_owned_in(versions, s, version, merged, pruned, other, &owned)?;
            }
        }
        // Add back what was removed although the applier never owned it (dangling parents).
        let pruned_set = with_named_fields(s, &to_set(s, &pruned)?);
        let last = with_named_fields(s, last_set);
        Ok(remove_items(s, merged, &merged_set.difference(&pruned_set).intersection(&last)))
    }

    /// Drops the entries of versions the kind is not served in (kube drops those it cannot
    /// convert to).
    fn drop_unserved(&self, managers: &mut Managers) {
        let Some(versions) = self.versions else { return };
        if managers.entries.values().all(|e| e.api_version == self.api_version) {
            return;
        }
        managers.entries.retain(|_, e| e.api_version == self.api_version || versions.schema(&e.api_version).is_some());
    }

    /// Takes changed fields away from every manager but `applier` (kube's `Updater.update`),
    /// each manager's compared in its own version: fields another manager owns that changed
    /// (from `old` to `new`, `cmp` in this version) are conflicts, returned (and nothing else
    /// done) when the applier does not force; otherwise they, and removed fields, leave their
    /// owners. An entry whose version the objects do not convert to is dropped.
    fn release_changed(
        &self,
        managers: &mut Managers,
        old: &Value,
        new: &Value,
        cmp: &Comparison,
        applier: Option<(&str, bool)>,
    ) -> Result<Vec<Conflict>, TypedError> {
        let changed = cmp.modified.union(&cmp.added);
        let me = applier.map(|(k, _)| k);
        let mut views = self.versions.map(|v| VersionViews::new(v, self.api_version, old, new));
        let mut conflicts = Vec::new();
        // (entry, what it keeps; `None` drops it)
        let mut releases: Vec<(String, Option<Set>)> = Vec::new();
        for (key, e) in &managers.entries {
            if Some(key.as_str()) == me {
                continue;
            }
            let view = match views.as_mut() {
                Some(views) if e.api_version != self.api_version => match views.get(&e.api_version)? {
                    Some(view) => Some(view),
                    None => {
                        releases.push((key.clone(), None));
                        continue;
                    }
                },
                _ => None,
            };
            let (changed, removed) = match view {
                Some(v) => (&v.changed, &v.comparison.removed),
                None => (&changed, &cmp.removed),
            };
            // Most managers own none of what changed: their sets stay as they are.
            let owns_changed = e.set.intersects(changed);
            if owns_changed {
                let mine = e.set.intersection(changed);
                mine.for_each_path(&mut |p| conflicts.push(Conflict { manager: e.id.clone(), path: p.to_vec() }));
            }
            // Each difference copies the set: only those that take something away are made.
            let kept = owns_changed.then(|| e.set.difference(changed));
            let current = kept.as_ref().unwrap_or(&e.set);
            let kept = if current.intersects(removed) { Some(current.difference(removed)) } else { kept };
            if let Some(kept) = kept {
                releases.push((key.clone(), Some(kept)));
            }
        }
        if applier.is_some_and(|(_, force)| !force) && !conflicts.is_empty() {
            return Ok(conflicts);
        }
        for (key, kept) in releases {
            match kept {
                Some(set) if !set.is_empty() => {
                    if let Some(e) = managers.entries.get_mut(&key) {
                        e.set = set;
                    }
                }
                _ => {
                    managers.entries.remove(&key);
                }
            }
        }
        Ok(Vec::new())
    }

    /// The fields kubectl's last-applied annotation sets to their live values.
    fn allowed_from_last_applied(&self, live: &Value) -> Option<Set> {
        let text = live.get("metadata")?.get("annotations")?.get(LAST_APPLIED)?.as_str()?;
        let last: Value = serde_json::from_str(text).ok()?;
        if last.get("apiVersion").and_then(Value::as_str) != Some(self.api_version) {
            return None;
        }
        let set = to_set(self.schema, &last).ok()?;
        let cmp: Comparison = compare(self.schema, &last, live).ok()?;
        Some(set.difference(&cmp.modified).difference(&cmp.added).difference(&cmp.removed))
    }
}

fn typed(context: &str, describe: &str) -> impl FnOnce(TypedError) -> ApplyError {
    let context = format!("{context} ({describe})");
    move |source| ApplyError::Typed { context, source }
}

/// kube's add-back of the items `owned` (at `other`) holds, to `pruned` (at `version`, types
/// `s`, pruned from `merged`): the restoration is done in `other` and carried back as what it
/// adds to the round trip of `pruned`.
fn add_back_owned_in(
    versions: &dyn KindVersions,
    s: &TypeSchema,
    version: &str,
    merged: &Value,
    pruned: Value,
    other: &str,
    owned: &Set,
) -> Result<Value, TypedError> {
    let Some(sx) = versions.schema(other) else { return Ok(pruned) };
    let sx = &*sx;
    let (Some(merged_x), Some(pruned_x)) =
        (versions.convert(merged, version, other), versions.convert(&pruned, version, other))
    else {
        return Ok(pruned);
    };
    let missing =
        with_named_fields(sx, &to_set(sx, &merged_x)?).difference(&with_named_fields(sx, &to_set(sx, &pruned_x)?));
    let owned = with_named_fields(sx, owned);
    if !missing.intersects(&owned) {
        return Ok(pruned);
    }
    let restored_x = remove_items(sx, &merged_x, &missing.difference(&owned));
    let (Some(base), Some(back)) =
        (versions.convert(&pruned_x, other, version), versions.convert(&restored_x, other, version))
    else {
        return Ok(pruned);
    };
    // The structs holding what came back are kept too.
    let added = with_named_fields(
        s,
        &with_named_fields(s, &to_set(s, &back)?).difference(&with_named_fields(s, &to_set(s, &base)?)),
    );
    let merged_set = with_named_fields(s, &to_set(s, merged)?);
    let pruned_set = with_named_fields(s, &to_set(s, &pruned)?);
    Ok(remove_items(s, merged, &merged_set.difference(&pruned_set.union(&added))))
}

/// kube's cap: past [`MAX_UPDATE_MANAGERS`] update entries, the oldest merge, per apiVersion,
/// into an `ancient-changes` entry.
fn cap_update_managers(managers: &mut Managers) {
    let secs = |e: &Entry| e.time.as_deref().and_then(crate::clock::parse_rfc3339).unwrap_or(0);
    let mut updaters: Vec<(i64, String)> = managers
        .entries
        .iter()
        .filter(|(_, e)| e.id.operation == Operation::Update)
        .map(|(k, e)| (secs(e), k.clone()))
        .collect();
    if updaters.len() <= MAX_UPDATE_MANAGERS {
        return;
    }
    updaters.sort();
    let mut length = updaters.len();
    let mut first_of_version: std::collections::HashMap<String, String> = Default::default();
    for (_, key) in updaters {
        if length <= MAX_UPDATE_MANAGERS {
            break;
        }
        let Some(entry) = managers.entries.get(&key).cloned() else { continue };
        let bucket_id = ManagerId::new(ANCIENT_CHANGES, Operation::Update, &entry.api_version, "");
        let bucket = bucket_id.identifier();
        match first_of_version.get(&entry.api_version) {
            Some(first) => {
                if !managers.entries.contains_key(&bucket) {
                    if let Some(mut f) = managers.entries.remove(first) {
                        f.id = bucket_id.clone();
                        managers.entries.insert(bucket.clone(), f);
                    }
                }
                if let Some(b) = managers.entries.get_mut(&bucket) {
                    b.set.union_in_place(&entry.set);
                    b.time = entry.time.clone();
                }
                managers.entries.remove(&key);
                length -= 1;
            }
            None => {
                first_of_version.insert(entry.api_version.clone(), key);
            }
        }
    }
}

fn has_last_applied(obj: &Value) -> bool {
    obj.get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(LAST_APPLIED))
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty())
}

/// Sets kubectl's last-applied annotation to the applied configuration (without the
/// annotation itself), as kube does when kubectl applies server-side to an object kubectl
/// applied client-side before.
fn set_last_applied(obj: &mut Value, config: &Value) {
    let mut config = config.clone();
    if let Some(Value::Object(annotations)) = config.get_mut("metadata").and_then(|m| m.get_mut("annotations")) {
        annotations.remove(LAST_APPLIED);
    }
    let text = serde_json::to_string(&config).unwrap_or_default();
    if let Some(Value::Object(annotations)) = obj.get_mut("metadata").and_then(|m| m.get_mut("annotations")) {
        annotations.insert(LAST_APPLIED.into(), text.into());
    }
}

#[cfg(test)]
mod tests;
