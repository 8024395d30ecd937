//! Watches on a collection: an etcd watch (with previous values) turned into Kubernetes watch
//! events, with kube's selector semantics: an object that starts matching is `ADDED`, one that
//! stops matching is `DELETED` (its previous state at the event's revision).
//!
//! Start points (`resourceVersion`):
//! * unset or `"0"`: synthetic `ADDED` for every current object, then changes after that list's
//!   revision;
//! * `N`: changes after revision N; a compacted N ends the watch with an `ERROR` 410 event.
//!
//! With `sendInitialEvents=true` the current state is sent first whatever the start point, then,
//! if bookmarks are allowed, a `BOOKMARK` annotated `k8s.io/initial-events-end: "true"` (the
//! watch-list protocol client-go informers use from 1.35 on).
//!
//! Each HTTP watch holds one etcd watch; a shared upstream watch per resource is a later step.

// #[PerformanceCriticalPath]

use std::collections::VecDeque;

use serde_json::{json, Value};

use super::object;
use super::selectors::{FieldSelector, LabelSelector};
use super::store::{parse_resource_version, ListOptions, Store};
use super::ResourceKind;
use crate::error::ApiError;
use crate::storage::{etcd3::prefix_end, StorageError, WatchEvents};

/// Watch options from the query.
#[derive(Debug, Clone, Default)]
pub struct WatchOptions {
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// `resourceVersion`.
    pub resource_version: String,
    /// `sendInitialEvents=true`.
    pub send_initial_events: bool,
    /// `allowWatchBookmarks=true`.
    pub allow_bookmarks: bool,
}

/// One running watch.
#[derive(Debug)]
pub struct Watch {
    kind: &'static ResourceKind,
    labels: LabelSelector,
    fields: FieldSelector,
    initial: VecDeque<Value>,
    events: WatchEvents,
    done: bool,
}

fn event(kind: &str, object: Value) -> Value {
    let mut e = serde_json::Map::new();
    e.insert("type".into(), kind.into());
    e.insert("object".into(), object);
    Value::Object(e)
}

impl Watch {
    /// Starts a watch on `kind` in `namespace` ("" = all).
    ///
    /// # Errors
    ///
    /// Returns `BadRequest` for a bad resourceVersion and storage errors.
    pub async fn start(
        store: &Store,
        kind: &'static ResourceKind,
        namespace: &str,
        opts: WatchOptions,
    ) -> Result<Watch, ApiError> {
        let prefix = kind.collection_prefix(store.prefix(), namespace);
        let end = prefix_end(prefix.as_bytes());
        let mut initial = VecDeque::new();
        let from_state = opts.send_initial_events || opts.resource_version.is_empty() || opts.resource_version == "0";
        let after = if from_state {
            let list_opts =
                ListOptions { labels: opts.labels.clone(), fields: opts.fields.clone(), ..ListOptions::default() };
            let list = store.list(kind, namespace, &list_opts).await?;
            let revision = parse_resource_version(list["metadata"]["resourceVersion"].as_str().unwrap_or("0"))?;
            for item in list["items"].as_array().into_iter().flatten() {
                initial.push_back(event("ADDED", item.clone()));
            }
            if opts.send_initial_events && opts.allow_bookmarks {
                let bookmark = json!({
                    "kind": kind.kind,
                    "apiVersion": kind.api_version(),
                    "metadata": {
                        "resourceVersion": revision.to_string(),
                        "annotations": {"k8s.io/initial-events-end": "true"},
                    },
                });
                initial.push_back(event("BOOKMARK", bookmark));
            }
            revision
        } else {
            parse_resource_version(&opts.resource_version)?
        };
        let events = store.storage().watch(prefix.as_bytes(), &end, after).await?;
        Ok(Watch { kind, labels: opts.labels, fields: opts.fields, initial, events, done: false })
    }

    fn passes(&self, obj: &Value) -> bool {
        self.labels.matches(&object::labels(obj)) && self.fields.matches(obj)
    }

    /// Returns the next event as JSON (`{"type": ..., "object": ...}`), or `None` when the
    /// watch has ended. Errors become a final `ERROR` event carrying a Status.
    pub async fn next(&mut self) -> Option<Value> {
        if let Some(e) = self.initial.pop_front() {
            return Some(e);
        }
        while !self.done {
            let change = match self.events.next().await {
                Ok(Some(change)) => change,
                Ok(None) => return None,
                Err(e) => {
                    self.done = true;
                    let err = match e {
                        StorageError::Compacted { .. } => ApiError::Expired(e.to_string()),
                        other => ApiError::Storage(other),
                    };
                    return Some(event("ERROR", err.status()));
                }
            };
            let decode = |bytes: &Option<Vec<u8>>| {
                bytes
                    .as_ref()
                    .and_then(|b| object::from_storage_as(self.kind, b, change.revision).ok())
                    .map(Value::Object)
            };
            let current = decode(&change.value);
            let previous = decode(&change.prev_value);
            let current_passes = current.as_ref().is_some_and(|o| self.passes(o));
            let previous_passes = previous.as_ref().is_some_and(|o| self.passes(o));
            let out = match (current, previous) {
                (Some(cur), _) if current_passes && !previous_passes => event("ADDED", cur),
                (Some(cur), _) if current_passes => event("MODIFIED", cur),
                (_, Some(prev)) if previous_passes => event("DELETED", prev),
                _ => continue,
            };
            return Some(out);
        }
        None
    }

    /// Returns the kind being watched.
    pub fn kind(&self) -> &'static ResourceKind {
        self.kind
    }
}
