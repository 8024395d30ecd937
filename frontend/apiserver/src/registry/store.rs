//! `Store`: the generic registry over the [`Storage`](crate::storage::Storage) seam (kube's
//! `genericregistry.Store`): get,
//! list with selectors and consistent pages, create, update with optimistic concurrency,
//! `/status` writes, and the namespace admission checks. Deletion (finalizers, grace periods,
//! the namespace lifecycle) is in [`super::deletion`], `/scale` in [`super::scale`].
//!
//! Objects are converted to the stored version on the way in and to the served version on
//! the way out (only events.k8s.io, autoscaling/v1 and custom resources differ); strategies
//! see the stored form, but for kinds whose converter prepares writes in the version they
//! were sent in (custom resources: see [`super::VersionConverter::prepares_served`]). A LIST
//! converts the objects of one internal page together, so a converter that calls a webhook
//! sends one request per page.
//!
//! Optimistic concurrency: every write is a Txn on the key's `mod_revision`. A PUT that carries
//! `metadata.resourceVersion` must match it (else 409 Conflict); one that does not is retried
//! on concurrent changes, as kube's `GuaranteedUpdate` does for unconditional updates.

// #[PerformanceCriticalPath]

use std::sync::Arc;

use base64::Engine as _;
use bytes::Bytes;
use serde_json::{json, Value};

use super::admission::{self, Admission};
use super::managed;
use super::object::{self, meta_str};
use super::raw_object::RawObject;
use super::selectors::{FieldSelector, LabelSelector};
use super::strategy::{map_field_mut, Object};
use super::{ResourceKind, ServedKinds};
use crate::error::{ApiError, OPTIMISTIC_LOCK_MESSAGE};
use crate::storage::{prefix_end, KeyValue, ListPage, SharedStorage, StorageError};

/// How many times an unconditional update or delete is retried when the object changes under
/// it. kube retries until success; a bound keeps a hot key from pinning a request forever.
pub(crate) const MAX_UPDATE_ATTEMPTS: usize = 16;

/// The list query (`ListOptions` minus watch fields).
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// `limit` (0 = no limit).
    pub limit: i64,
    /// `continue`.
    pub continue_token: Option<String>,
    /// `resourceVersion` ("" = most recent).
    pub resource_version: String,
    /// `resourceVersionMatch` ("", `NotOlderThan`, `Exact`).
    pub resource_version_match: String,
}

/// The generic registry. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    storage: SharedStorage,
    /// What is served: the kinds, found by group, version and resource.
    kinds: Arc<dyn ServedKinds>,
    prefix: String,
    /// Keys per storage Range when a LIST walks a collection: the answer is written page by
    /// page, so this bounds a LIST's memory.
    list_page_size: i64,
    /// Validation other servers add to the kinds' writes.
    admission: Arc<[Arc<dyn Admission>]>,
    /// The kinds another server of the chain keeps in namespaces on the same storage (the
    /// built-in API's store holds the custom resources' here and the other way round): a
    /// namespace is emptied of those too before it goes.
    namespaced_elsewhere: Option<Arc<dyn ServedKinds>>,
}

/// The default of [`Store::with_list_page_size`]: about 4 MiB of typical 4 KiB pods, close to
/// kube's own etcd page size, and ten Ranges for a 10k-object LIST.
pub const DEFAULT_LIST_PAGE_SIZE: usize = 1000;

pub(crate) fn not_found(kind: &ResourceKind, name: &str) -> ApiError {
    ApiError::NotFound { group: kind.group.into(), resource: kind.resource.into(), name: name.into() }
}

pub(crate) fn conflict(kind: &ResourceKind, name: &str, reason: impl Into<String>) -> ApiError {
    ApiError::Conflict {
        group: kind.group.into(),
        resource: kind.resource.into(),
        name: name.into(),
        reason: reason.into(),
    }
}

/// Parses a `resourceVersion` value.
///
/// # Errors
///
/// Returns `BadRequest` when it is not a decimal revision.
pub fn parse_resource_version(rv: &str) -> Result<i64, ApiError> {
    rv.parse::<i64>()
        .ok()
        .filter(|r| *r >= 0)
        .ok_or_else(|| ApiError::BadRequest(format!("invalid resource version: {rv}")))
}

const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You \
    can start a new list without the continue parameter, or use the continue token in this response to retrieve the \
    remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were \
    created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// Encodes a continue token like kube-apiserver's: base64url of
/// `{"v":"meta.k8s.io/v1","rv":<revision>,"start":"<key relative to the collection prefix>"}`.
fn encode_continue(revision: i64, next_key: &[u8], prefix: &str) -> String {
    let relative = String::from_utf8_lossy(&next_key[prefix.len().min(next_key.len())..]).into_owned();
    let token = json!({"v": "meta.k8s.io/v1", "rv": revision, "start": relative});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token.to_string())
}

/// Decodes a continue token into (full start key, revision).
fn decode_continue(token: &str, prefix: &str) -> Result<(Vec<u8>, i64), ApiError> {
    let bad = |why: &str| ApiError::BadRequest(format!("continue key is not valid: {why}"));
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.trim_end_matches('='))
        .map_err(|_| bad("incorrect encoded start resourceVersion (version meta.k8s.io/v1)"))?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| bad("incorrect encoded start resourceVersion"))?;
    if value["v"] != "meta.k8s.io/v1" {
        return Err(bad("server does not recognize this encoded key"));
    }
    let revision =
        value["rv"].as_i64().filter(|r| *r > 0).ok_or_else(|| bad("incorrect encoded start resourceVersion"))?;
    let start = value["start"].as_str().filter(|s| !s.is_empty()).ok_or_else(|| bad("encoded start key empty"))?;
    if start.split('/').any(|p| p == ".." || p == ".") {
        return Err(bad("path traversal attempt detected"));
    }
    Ok((format!("{prefix}{start}").into_bytes(), revision))
}

/// What a [`ListScan`] hands out per object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanForm {
    /// Decoded objects, always.
    Objects,
    /// The stored bytes ([`ListItem::Stored`]) when nothing needs the decoded object: the
    /// kind has no version conversion and a field selector, if any, is on `metadata.name` or
    /// `metadata.namespace` only. Selectors read only the labels, name and namespace.
    Stored,
}

/// One object of a LIST.
#[derive(Debug)]
pub enum ListItem {
    /// Decoded, as served.
    Object(Value),
    /// As stored, written with its resourceVersion by [`RawObject::write`].
    Stored(RawObject),
}

/// One LIST in progress: a walk of a collection's keys at one pinned revision, in internal
/// pages of at most `page_size` keys, applying the selectors as it goes (kube's etcd3
/// `GetList` when the watch cache does not serve the read).
///
/// Memory: one page of records and its decoded objects at a time, whatever the collection's
/// size. Every page reads the first page's revision, so the whole answer is one consistent
/// snapshot; a compaction past it while the walk is under way fails the next page with
/// `Expired`.
///
/// `limit`/`continue` are kube's: the walk stops once `limit` objects matched, and the
/// continue token points after the last key *examined*, so a selector that skips keys never
/// makes the next page see them again. `remainingItemCount` is only known without selectors.
#[derive(Debug)]
pub struct ListScan<'k> {
    storage: SharedStorage,
    kind: &'k ResourceKind,
    labels: LabelSelector,
    fields: FieldSelector,
    filtering: bool,
    /// The client's `limit` (0 = none).
    limit: i64,
    page_size: i64,
    /// The collection prefix (continue tokens are relative to it).
    prefix: String,
    /// The exclusive end of the collection's key range.
    end: Vec<u8>,
    /// The first key the next Range reads.
    next_key: Vec<u8>,
    /// The snapshot revision (0 until the first Range pins it).
    revision: i64,
    /// Whether this LIST resumes a continue token (changes the compaction message).
    continuing: bool,
    /// Objects matched so far.
    matched: i64,
    /// Whether the walk has reached the end of the range or the limit.
    done: bool,
    /// Whether items may be handed out as stored bytes (see [`ScanForm::Stored`]): those of
    /// kinds without a converter, and those their converter serves unchanged.
    stored: bool,
    /// The next Range, already under way while the caller encodes the current batch: one
    /// page of read-ahead (only without a `limit`, when the next page's size is known).
    ahead: Option<tokio::task::JoinHandle<Result<ListPage, StorageError>>>,
    /// The batch read by [`Store::list_scan`], handed out by the first `next_batch`.
    first: Option<Vec<ListItem>>,
    continue_token: Option<String>,
    remaining: Option<i64>,
}

impl Drop for ListScan<'_> {
    fn drop(&mut self) {
        // A client that went away leaves no read running for it.
        if let Some(ahead) = self.ahead.take() {
            ahead.abort();
        }
    }
}

impl ListScan<'_> {
    /// Returns the next objects that match, in key order, or `None` after the last. A batch
    /// holds at most one internal page; it is empty only when the walk just finished.
    ///
    /// # Errors
    ///
    /// Returns `Expired` when the snapshot was compacted while walking, storage errors
    /// otherwise.
    pub async fn next_batch(&mut self) -> Result<Option<Vec<ListItem>>, ApiError> {
        if let Some(first) = self.first.take() {
            return Ok(Some(first));
        }
        if self.done {
            return Ok(None);
        }
        self.read_batch().await.map(Some)
    }

    /// Returns the list's metadata: `resourceVersion` (the snapshot), and once the walk is
    /// done, `continue` and `remainingItemCount` when the limit cut it short.
    pub fn metadata(&self) -> Value {
        let mut metadata = json!({"resourceVersion": self.revision.to_string()});
        if let Some(token) = &self.continue_token {
            metadata["continue"] = token.clone().into();
        }
        if let Some(n) = self.remaining {
            metadata["remainingItemCount"] = n.into();
        }
        metadata
    }

    /// Returns the revision the list reads (known once [`Store::list_scan`] returned).
    pub fn revision(&self) -> i64 {
        self.revision
    }

    /// Returns whether a `limit` was asked for (then `continue` is only known at the end).
    pub fn limited(&self) -> bool {
        self.limit > 0
    }

    /// Reads Ranges until at least one object matched or the walk ends.
    async fn read_batch(&mut self) -> Result<Vec<ListItem>, ApiError> {
        let mut batch = Vec::new();
        while batch.is_empty() && !self.done {
            let want = if self.limit > 0 { (self.limit - self.matched).min(self.page_size) } else { self.page_size };
            let read = match self.ahead.take().map(|ahead| async { ahead.await.ok() }) {
                Some(ahead) => match ahead.await {
                    Some(read) => read,
                    // The read-ahead task was lost (panicked): read again here.
                    None => self.storage.list(&self.next_key, &self.end, want, self.revision).await,
                },
                None => self.storage.list(&self.next_key, &self.end, want, self.revision).await,
            };
            let page = match read {
                Ok(page) => page,
                Err(StorageError::Compacted { .. }) if self.continuing => {
                    return Err(ApiError::Expired(CONTINUE_EXPIRED.into()))
                }
                Err(StorageError::Compacted { .. }) => {
                    return Err(ApiError::Expired("The resourceVersion for the provided list is too old.".into()))
                }
                Err(e) => return Err(e.into()),
            };
            // Every page of one list reads the same snapshot: the first page's revision. (A read
            // at a pinned revision reports the store's current revision in its header, so the
            // header only counts for the first, unpinned read.)
            if self.revision == 0 {
                self.revision = page.revision;
            }
            let Some(last) = page.kvs.last() else {
                self.done = true;
                break;
            };
            let mut after_last = last.key.to_vec();
            after_last.push(0);
            self.next_key = after_last;
            if page.more && self.limit == 0 {
                let storage = self.storage.clone();
                let (start, end, revision) = (self.next_key.clone(), self.end.clone(), self.revision);
                let read = async move { storage.list(&start, &end, want, revision).await };
                self.ahead = Some(tokio::spawn(read));
            }
            let (more, count, examined) = (page.more, page.count, page.kvs.len() as i64);
            let before = batch.len();
            self.items(page.kvs, &mut batch)?;
            self.matched += (batch.len() - before) as i64;
            if !more {
                self.done = true;
            } else if self.limit > 0 && self.matched >= self.limit {
                self.continue_token = Some(encode_continue(self.revision, &self.next_key, &self.prefix));
                if !self.filtering {
                    self.remaining = Some(count - examined);
                }
                self.done = true;
            }
        }
        Ok(batch)
    }

    /// Appends the records of one page that pass the selectors to `batch` as list items, in
    /// key order. The records that need decoding are decoded first and converted to the
    /// served version together ([`VersionConverter::to_served_from_storage_all`]), then
    /// selected, since field selectors read the served form.
    ///
    /// [`VersionConverter::to_served_from_storage_all`]: super::VersionConverter::to_served_from_storage_all
    fn items(&self, kvs: Vec<KeyValue>, batch: &mut Vec<ListItem>) -> Result<(), ApiError> {
        /// A record's place in the page: handed out as stored (or not selected), or the
        /// next of the decoded objects.
        enum Slot {
            Ready(Option<ListItem>),
            Decoded,
        }
        let mut slots = Vec::with_capacity(kvs.len());
        let mut decoded: Vec<(Object, i64)> = Vec::new();
        for kv in kvs {
            match self.stored_item(kv.value, kv.mod_revision) {
                Ok(item) => slots.push(Slot::Ready(item)),
                Err(bytes) => {
                    slots.push(Slot::Decoded);
                    decoded.push((object::from_storage(&bytes, kv.mod_revision)?, kv.mod_revision));
                }
            }
        }
        if let (Some(converter), false) = (self.kind.converter, decoded.is_empty()) {
            converter.to_served_from_storage_all(&mut decoded)?;
        }
        let mut decoded = decoded.into_iter().map(|(obj, _)| Value::Object(obj));
        batch.reserve(slots.len());
        for slot in slots {
            let item = match slot {
                Slot::Ready(item) => item,
                Slot::Decoded => {
                    let obj =
                        decoded.next().ok_or_else(|| ApiError::Internal("a decoded list item went missing".into()))?;
                    (self.labels.matches(&object::labels(&obj)) && self.fields.matches(&obj))
                        .then_some(ListItem::Object(obj))
                }
            };
            batch.extend(item);
        }
        Ok(())
    }

    /// Returns a record served as its stored bytes as a list item, or `None` when the
    /// selectors leave it out; its bytes back when it must be decoded.
    fn stored_item(&self, bytes: Bytes, revision: i64) -> Result<Option<ListItem>, Bytes> {
        if !self.stored {
            return Err(bytes);
        }
        match RawObject::new(bytes, revision) {
            // An object a converter would change is decoded and converted.
            Ok(raw) if !self.as_stored(&raw, revision) => Err(raw.into_bytes()),
            Ok(raw) => match self.selects(&raw) {
                Some(selected) => Ok(selected.then_some(ListItem::Stored(raw))),
                // Labels or names of another shape than strings: decode.
                None => Err(raw.into_bytes()),
            },
            // Unusual bytes take the decoding path, which reports what is wrong with them.
            Err(back) => Err(back),
        }
    }

    /// Whether a stored object is served as stored: always without a converter, else when the
    /// converter knows this revision needs no change.
    fn as_stored(&self, raw: &RawObject, revision: i64) -> bool {
        let Some(converter) = self.kind.converter else { return true };
        match (raw.namespace(), raw.name()) {
            (Some(namespace), Some(name)) => converter.served_as_stored(&namespace, &name, revision),
            _ => false,
        }
    }

    /// Returns whether a stored object passes the selectors, reading only the metadata they
    /// name; `None` when those are not plain strings (the decoding path decides then).
    fn selects(&self, raw: &RawObject) -> Option<bool> {
        if !self.labels.is_empty() && !self.labels.matches(&raw.labels()?) {
            return Some(false);
        }
        if self.fields.is_empty() {
            return Some(true);
        }
        // `stored` is only set when every field requirement is on one of these two.
        self.fields.matches_with(|path| match path {
            "metadata.name" => raw.name(),
            "metadata.namespace" => raw.namespace(),
            _ => None,
        })
    }
}

impl Store {
    /// Builds a store of `kinds` whose keys start with `prefix` (normally `/registry`).
    pub fn new(storage: SharedStorage, prefix: &str, kinds: Arc<dyn ServedKinds>) -> Self {
        Store {
            storage,
            kinds,
            prefix: prefix.trim_end_matches('/').to_string(),
            list_page_size: DEFAULT_LIST_PAGE_SIZE as i64,
            admission: Arc::new([]),
            namespaced_elsewhere: None,
        }
    }

    /// Adds the kinds another server keeps in namespaces on this storage to what deleting a
    /// namespace empties (and waits for).
    pub fn with_namespaced_elsewhere(mut self, kinds: Arc<dyn ServedKinds>) -> Self {
        self.namespaced_elsewhere = Some(kinds);
        self
    }

    /// The other server's kinds of [`Store::with_namespaced_elsewhere`], if any.
    pub(crate) fn namespaced_elsewhere(&self) -> Option<&Arc<dyn ServedKinds>> {
        self.namespaced_elsewhere.as_ref()
    }

    /// Adds `plugin` to the validation run on every create and update of the kinds it handles.
    pub fn with_admission(mut self, plugin: Arc<dyn Admission>) -> Self {
        let mut plugins: Vec<Arc<dyn Admission>> = self.admission.iter().cloned().collect();
        plugins.push(plugin);
        self.admission = plugins.into();
        self
    }

    /// Returns the same store serving `kinds` instead (a server built on this one's storage,
    /// prefix and page size).
    pub fn with_kinds(&self, kinds: Arc<dyn ServedKinds>) -> Store {
        Store { kinds, ..self.clone() }
    }

    /// The finalizers admission adds to the first DELETE of `obj`.
    pub(crate) fn finalizers_on_delete(&self, kind: &ResourceKind, obj: &Object) -> Vec<String> {
        self.admission.iter().filter(|a| a.handles(kind)).flat_map(|a| a.finalizers_on_delete(obj)).collect()
    }

    /// Runs admission over a prepared create (`old` = `None`) or update, joining its findings
    /// to the preparation's outcome.
    pub(crate) fn admit(
        &self,
        kind: &ResourceKind,
        prepared: Result<(), ApiError>,
        new: &Object,
        old: Option<&Object>,
    ) -> Result<(), ApiError> {
        if let Err(ref e) = prepared {
            if !matches!(e, ApiError::Invalid { .. }) {
                return prepared;
            }
        }
        let findings: Vec<_> = self
            .admission
            .iter()
            .filter(|a| a.handles(kind))
            .flat_map(|a| match old {
                None => a.validate_create(new),
                Some(old) => a.validate_update(new, old),
            })
            .collect();
        admission::join(kind, meta_str(new, "name"), prepared, findings)
    }

    /// Sets how many keys one storage Range reads while a LIST walks a collection (at least 1).
    pub fn with_list_page_size(mut self, keys: usize) -> Self {
        self.list_page_size = i64::try_from(keys.max(1)).unwrap_or(i64::MAX);
        self
    }

    /// Returns the served kinds.
    pub fn kinds(&self) -> &Arc<dyn ServedKinds> {
        &self.kinds
    }

    /// Returns the storage.
    pub fn storage(&self) -> &SharedStorage {
        &self.storage
    }

    /// Returns the key prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Reads one object in its stored form, with its key-value (for the revision).
    pub(crate) async fn read(
        &self,
        kind: &ResourceKind,
        namespace: &str,
        name: &str,
    ) -> Result<(Object, KeyValue), ApiError> {
        let key = kind.key(&self.prefix, namespace, name);
        let (kv, _) = self.storage.get(key.as_bytes()).await?;
        let kv = kv.ok_or_else(|| not_found(kind, name))?;
        Ok((object::from_storage(&kv.value, kv.mod_revision)?, kv))
    }

    /// Reads one object.
    ///
    /// # Errors
    ///
    /// Returns `NotFound` when absent.
    pub async fn get(&self, kind: &ResourceKind, namespace: &str, name: &str) -> Result<Object, ApiError> {
        let mut obj = self.read(kind, namespace, name).await?.0;
        object::to_served_version(kind, &mut obj)?;
        Ok(obj)
    }

    /// Lists a collection (`namespace` "" = all namespaces) as a `<Kind>List`, whole in
    /// memory. For internal callers (collection deletes, initial watch events); the LIST verb
    /// streams through [`Store::list_scan`] instead.
    ///
    /// # Errors
    ///
    /// Returns `BadRequest` for bad options or tokens and `Expired` when the asked-for snapshot
    /// was compacted.
    pub async fn list(&self, kind: &ResourceKind, namespace: &str, opts: &ListOptions) -> Result<Value, ApiError> {
        let mut scan = self.list_scan(kind, namespace, opts, ScanForm::Objects).await?;
        let mut items = Vec::new();
        while let Some(batch) = scan.next_batch().await? {
            for item in batch {
                match item {
                    ListItem::Object(obj) => items.push(obj),
                    ListItem::Stored(_) => {
                        return Err(ApiError::Internal("a scan for objects handed out stored bytes".into()));
                    }
                }
            }
        }
        Ok(json!({
            "kind": format!("{}List", kind.kind),
            "apiVersion": kind.api_version(),
            "metadata": scan.metadata(),
            "items": items,
        }))
    }

    /// Starts reading a collection for a LIST: validates the options, pins the snapshot and
    /// reads the first internal page, so every refusal (bad token, compacted revision, storage
    /// down) is known before a caller commits to a response. The rest is read page by page as
    /// the caller asks ([`ListScan::next_batch`]).
    ///
    /// # Errors
    ///
    /// As [`Store::list`].
    pub async fn list_scan<'k>(
        &self,
        kind: &'k ResourceKind,
        namespace: &str,
        opts: &ListOptions,
        form: ScanForm,
    ) -> Result<ListScan<'k>, ApiError> {
        let prefix = kind.collection_prefix(&self.prefix, namespace);
        let end = prefix_end(prefix.as_bytes());
        let (next_key, revision, continuing) = match &opts.continue_token {
            Some(token) => {
                if !opts.resource_version.is_empty() {
                    return Err(ApiError::BadRequest(
                        "specifying resource version is not allowed when using continue".into(),
                    ));
                }
                let (start, revision) = decode_continue(token, &prefix)?;
                (start, revision, true)
            }
            None => {
                let exact = opts.resource_version_match == "Exact"
                    || (opts.resource_version_match.is_empty() && opts.limit > 0 && opts.resource_version != "0");
                let revision = if exact && !opts.resource_version.is_empty() {
                    parse_resource_version(&opts.resource_version)?
                } else {
                    0
                };
                (prefix.clone().into_bytes(), revision, false)
            }
        };
        let mut scan = ListScan {
            storage: self.storage.clone(),
            kind,
            filtering: !opts.labels.is_empty() || !opts.fields.is_empty(),
            labels: opts.labels.clone(),
            fields: opts.fields.clone(),
            limit: opts.limit,
            page_size: self.list_page_size,
            prefix,
            end,
            next_key,
            revision,
            continuing,
            matched: 0,
            done: false,
            stored: form == ScanForm::Stored && opts.fields.only_metadata_names(),
            ahead: None,
            first: None,
            continue_token: None,
            remaining: None,
        };
        scan.first = Some(scan.read_batch().await?);
        Ok(scan)
    }

    /// Refuses creates in a namespace that is missing (404) or terminating (403), as kube's
    /// NamespaceLifecycle admission does.
    async fn check_namespace(&self, kind: &ResourceKind, namespace: &str, name: &str) -> Result<(), ApiError> {
        let ns = match self.get(self.kinds.namespaces(), "", namespace).await {
            Ok(ns) => ns,
            Err(ApiError::NotFound { .. }) => return Err(not_found(self.kinds.namespaces(), namespace)),
            Err(e) => return Err(e),
        };
        if !meta_str(&ns, "deletionTimestamp").is_empty() {
            return Err(ApiError::Forbidden {
                group: kind.group.into(),
                resource: kind.resource.into(),
                name: name.into(),
                reason: format!("unable to create new content in namespace {namespace} because it is being terminated"),
            });
        }
        Ok(())
    }

    /// Creates an object (already decoded); returns it as stored.
    ///
    /// # Errors
    ///
    /// Returns `Invalid`, `BadRequest`, `NotFound`/`Forbidden` for the namespace, and
    /// `AlreadyExists`.
    pub async fn create(
        &self,
        kind: &ResourceKind,
        namespace: &str,
        obj: Object,
        dry_run: bool,
    ) -> Result<Object, ApiError> {
        self.create_by(kind, namespace, obj, dry_run, managed::SERVER_MANAGER).await
    }

    /// [`Store::create`] on behalf of `manager`, who then owns the fields it set.
    ///
    /// # Errors
    ///
    /// As [`Store::create`].
    pub async fn create_by(
        &self,
        kind: &ResourceKind,
        namespace: &str,
        mut obj: Object,
        dry_run: bool,
        manager: &str,
    ) -> Result<Object, ApiError> {
        let requested = managed::take_requested(&mut obj);
        object::to_prepared_form(kind, &mut obj)?;
        let prepared = object::prepare_create(kind, &mut obj, namespace);
        self.admit(kind, prepared, &obj, None)?;
        managed::track(&**self.kinds(), kind, None, &mut obj, requested.as_ref(), manager, "");
        object::prepared_to_stored(kind, &mut obj)?;
        self.create_prepared(kind, namespace, obj, dry_run).await
    }

    /// Stores an object already prepared for creation (checks its namespace first).
    pub(crate) async fn create_prepared(
        &self,
        kind: &ResourceKind,
        namespace: &str,
        mut obj: Object,
        dry_run: bool,
    ) -> Result<Object, ApiError> {
        let name = meta_str(&obj, "name").to_string();
        if kind.namespaced {
            self.check_namespace(kind, namespace, &name).await?;
        }
        if dry_run {
            object::to_served_version(kind, &mut obj)?;
            return Ok(obj);
        }
        let key = kind.key(&self.prefix, namespace, &name);
        match self.storage.create(key.as_bytes(), object::to_storage(&obj)).await {
            Ok(revision) => {
                map_field_mut(&mut obj, "metadata").insert("resourceVersion".into(), revision.to_string().into());
                object::to_served_version(kind, &mut obj)?;
                Ok(obj)
            }
            Err(StorageError::KeyExists) => {
                Err(ApiError::AlreadyExists { group: kind.group.into(), resource: kind.resource.into(), name })
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Replaces an object (PUT). With `metadata.resourceVersion` in `obj` the update is
    /// conditional on it; without, it is retried over concurrent changes. `status` changes are
    /// ignored for kinds with a `/status` subresource; an update that removes the last
    /// finalizer of an object being deleted deletes it.
    ///
    /// # Errors
    ///
    /// Returns `NotFound`, `Conflict`, `BadRequest` (name mismatch), `Invalid`.
    pub async fn update(
        &self,
        kind: &ResourceKind,
        namespace: &str,
        name: &str,
        obj: Object,
        dry_run: bool,
    ) -> Result<Object, ApiError> {
        self.update_by(kind, namespace, name, obj, dry_run, managed::SERVER_MANAGER).await
    }

    /// [`Store::update`] on behalf of `manager`.
    ///
    /// # Errors
    ///
    /// As [`Store::update`].
    pub async fn update_by(
        &self,
        kind: &ResourceKind,
        namespace: &str,
        name: &str,
        mut obj: Object,
        dry_run: bool,
        manager: &str,
    ) -> Result<Object, ApiError> {
        let precondition = body_precondition(&obj, name)?;
        let requested = managed::take_requested(&mut obj);
        object::to_prepared_form(kind, &mut obj)?;
        let mut out = self
            .guaranteed_update(kind, namespace, name, precondition, dry_run, |stored| {
                let old = object::stored_in_prepared_form(kind, stored)?;
                let mut new = obj.clone();
                let prepared = object::prepare_update(kind, &mut new, &old, namespace);
                self.admit(kind, prepared, &new, Some(&old))?;
                managed::track(&**self.kinds(), kind, Some(&old), &mut new, requested.as_ref(), manager, "");
                object::prepared_to_stored(kind, &mut new)?;
                Ok(new)
            })
            .await?;
        object::to_served_version(kind, &mut out)?;
        Ok(out)
    }

    /// Replaces an object's `status` (PUT on `/status`): everything else stays as stored.
    ///
    /// # Errors
    ///
    /// As [`Store::update`].
    pub async fn update_status(
        &self,
        kind: &ResourceKind,
        namespace: &str,
        name: &str,
        obj: Object,
        dry_run: bool,
    ) -> Result<Object, ApiError> {
        self.update_status_by(kind, namespace, name, obj, dry_run, managed::SERVER_MANAGER).await
    }

    /// [`Store::update_status`] on behalf of `manager`.
    ///
    /// # Errors
    ///
    /// As [`Store::update`].
    pub async fn update_status_by(
        &self,
        kind: &ResourceKind,
        namespace: &str,
        name: &str,
        mut obj: Object,
        dry_run: bool,
        manager: &str,
    ) -> Result<Object, ApiError> {
        let precondition = body_precondition(&obj, name)?;
        object::to_prepared_form(kind, &mut obj)?;
        let mut out = self
            .guaranteed_update(kind, namespace, name, precondition, dry_run, |stored| {
                let old = object::stored_in_prepared_form(kind, stored)?;
                let mut new = object::prepare_status_update(kind, &obj, &old, namespace)?;
                managed::track(&**self.kinds(), kind, Some(&old), &mut new, None, manager, "status");
                object::prepared_to_stored(kind, &mut new)?;
                Ok(new)
            })
            .await?;
        object::to_served_version(kind, &mut out)?;
        Ok(out)
    }

    /// Replaces a namespace's `spec.finalizers` (PUT on `/finalize`), the only way they change.
    ///
    /// # Errors
    ///
    /// As [`Store::update`].
    pub async fn finalize_namespace(&self, name: &str, obj: Object, dry_run: bool) -> Result<Object, ApiError> {
        let precondition = body_precondition(&obj, name)?;
        let finalizers = obj.get("spec").and_then(|s| s.get("finalizers")).cloned();
        self.guaranteed_update(self.kinds.namespaces(), "", name, precondition, dry_run, |old| {
            let mut new = old.clone();
            let spec = map_field_mut(&mut new, "spec");
            match &finalizers {
                Some(f) => spec.insert("finalizers".into(), f.clone()),
                None => spec.remove("finalizers"),
            };
            Ok(new)
        })
        .await
    }

    /// kube's `GuaranteedUpdate`: reads the stored object, lets `update` derive the new one,
    /// and writes it with a compare-and-swap on the read revision, retrying on races unless
    /// `precondition` pins a revision. A no-op writes nothing. Returns the stored form.
    pub(crate) async fn guaranteed_update<F>(
        &self,
        kind: &ResourceKind,
        namespace: &str,
        name: &str,
        precondition: Option<i64>,
        dry_run: bool,
        mut update: F,
    ) -> Result<Object, ApiError>
    where
        F: FnMut(&Object) -> Result<Object, ApiError>,
    {
        let key = kind.key(&self.prefix, namespace, name);
        for _ in 0..MAX_UPDATE_ATTEMPTS {
            let (old, kv) = self.read(kind, namespace, name).await?;
            if precondition.is_some_and(|rv| rv != kv.mod_revision) {
                return Err(conflict(kind, name, OPTIMISTIC_LOCK_MESSAGE));
            }
            let mut new = update(&old)?;
            if dry_run {
                map_field_mut(&mut new, "metadata")
                    .insert("resourceVersion".into(), kv.mod_revision.to_string().into());
                return Ok(new);
            }
            let completes_deletion = object::completes_deletion(&new, &old);
            let result = if completes_deletion {
                self.storage.delete(key.as_bytes(), kv.mod_revision).await
            } else {
                // A no-op update writes nothing and keeps the resourceVersion (no watch event).
                if object::stores_same(&new, &old) {
                    map_field_mut(&mut new, "metadata")
                        .insert("resourceVersion".into(), kv.mod_revision.to_string().into());
                    return Ok(new);
                }
                self.storage.update(key.as_bytes(), object::to_storage(&new), kv.mod_revision).await
            };
            match result {
                Ok(revision) => {
                    map_field_mut(&mut new, "metadata").insert("resourceVersion".into(), revision.to_string().into());
                    if completes_deletion && kind.namespaced {
                        self.finish_namespace_if_terminating(namespace).await?;
                    }
                    return Ok(new);
                }
                Err(StorageError::Conflict { .. }) if precondition.is_none() => continue,
                Err(StorageError::Conflict { .. }) => return Err(conflict(kind, name, OPTIMISTIC_LOCK_MESSAGE)),
                Err(StorageError::KeyNotFound) => return Err(not_found(kind, name)),
                Err(e) => return Err(e.into()),
            }
        }
        Err(conflict(kind, name, OPTIMISTIC_LOCK_MESSAGE))
    }

    /// Creates the namespaces kube-apiserver always has (`default`, `kube-system`,
    /// `kube-public`, `kube-node-lease`) when they are missing.
    ///
    /// # Errors
    ///
    /// Returns storage errors other than "already exists".
    pub async fn ensure_system_namespaces(&self) -> Result<(), ApiError> {
        for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
            let Value::Object(obj) = obj else { continue };
            match self.create(self.kinds.namespaces(), "", obj, false).await {
                Ok(_) | Err(ApiError::AlreadyExists { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Checks the body's name against the URL's and returns its resourceVersion precondition.
fn body_precondition(obj: &Object, name: &str) -> Result<Option<i64>, ApiError> {
    let body_name = meta_str(obj, "name");
    if body_name != name {
        return Err(ApiError::BadRequest(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    match meta_str(obj, "resourceVersion") {
        "" => Ok(None),
        rv => parse_resource_version(rv).map(Some),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip_and_reject_traversal() {
        let prefix = "/registry/configmaps/ns/";
        let token = encode_continue(42, b"/registry/configmaps/ns/b\x00", prefix);
        let (start, rev) = decode_continue(&token, prefix).expect("decode");
        assert_eq!((start, rev), (b"/registry/configmaps/ns/b\x00".to_vec(), 42));
        let evil = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(r#"{"v":"meta.k8s.io/v1","rv":3,"start":"../secrets/x"}"#);
        assert!(decode_continue(&evil, prefix).is_err());
        assert!(decode_continue("!!", prefix).is_err());
    }
}
