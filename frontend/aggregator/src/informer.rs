//! [`follow`]: one resource's objects kept in memory from one list and one watch on storage
//! (kube's informer), for the aggregator's controllers and routing. Readers take the current
//! snapshot from a `watch` channel, which also wakes them on every change.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;

use ballast_apiserver::error::ApiError;
use ballast_apiserver::registry::store::ListOptions;
use ballast_apiserver::registry::{ResourceKind, Store};
use ballast_apiserver::storage::prefix_end;

/// Every object of a resource, by `namespace/name` (`name` when cluster-scoped).
pub type Objects = Arc<BTreeMap<String, Value>>;

/// A snapshot channel: `None` until the first list has been read.
pub type Snapshots = watch::Receiver<Option<Objects>>;

/// Starts following `kind` on the current runtime; the channel holds its objects. After a
/// storage failure the list is read again after `retry`.
pub fn follow(store: Store, kind: &'static ResourceKind, retry: Duration) -> Snapshots {
    let (tx, rx) = watch::channel(None);
    tokio::spawn(async move {
        loop {
            if let Err(e) = list_and_watch(&store, kind, &tx).await {
                tracing::info!(error = %e, resource = kind.resource, "following a resource; listing again");
            }
            if tx.is_closed() {
                return;
            }
            tokio::time::sleep(retry).await;
        }
    });
    rx
}

fn key_of(obj: &Value) -> String {
    let meta = &obj["metadata"];
    let name = meta["name"].as_str().unwrap_or("");
    match meta["namespace"].as_str().filter(|n| !n.is_empty()) {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

async fn list_and_watch(
    store: &Store,
    kind: &'static ResourceKind,
    tx: &watch::Sender<Option<Objects>>,
) -> Result<(), ApiError> {
    let list = store.list(kind, "", &ListOptions::default()).await?;
    let revision: i64 = list["metadata"]["resourceVersion"].as_str().and_then(|r| r.parse().ok()).unwrap_or(0);
    let mut objects: BTreeMap<String, Value> =
        list["items"].as_array().into_iter().flatten().map(|o| (key_of(o), o.clone())).collect();
    tx.send_replace(Some(Arc::new(objects.clone())));
    let prefix = kind.collection_prefix(store.prefix(), "");
    let end = prefix_end(prefix.as_bytes());
    let mut events = store.storage().watch(prefix.as_bytes(), &end, revision).await?;
    while let Some(event) = events.next().await? {
        let key = String::from_utf8_lossy(&event.key[prefix.len().min(event.key.len())..]).into_owned();
        match &event.value {
            Some(bytes) => {
                let obj = ballast_apiserver::registry::object::from_storage_as(kind, bytes, event.revision)?;
                objects.insert(key, Value::Object(obj));
            }
            None => {
                objects.remove(&key);
            }
        }
        if tx.is_closed() {
            return Ok(());
        }
        tx.send_replace(Some(Arc::new(objects.clone())));
    }
    Ok(())
}
