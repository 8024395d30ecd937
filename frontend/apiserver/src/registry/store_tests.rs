//! The generic store on the in-memory storage twin, in process: create, read, update with
//! optimistic concurrency, pages and selectors, patches, finalizers and the namespace
//! lifecycle, and the watch cache fed by the same storage. Each test takes milliseconds; the
//! integration tests (`frontend/tests/it`) prove the same paths through kubectl and against
//! real etcd.

use std::sync::Arc;

use serde_json::{json, Value};

use super::deletion::DeleteOptions;
use super::object::{meta_str, FieldValidation};
use super::patch::{PatchRequest, PatchTarget};
use super::selectors::LabelSelector;
use super::store::ListOptions;
use super::strategy::Object;
use super::testing::{TestKinds, CONFIGMAPS, NAMESPACES};
use super::Store;
use crate::error::{ApiError, OPTIMISTIC_LOCK_MESSAGE};
use crate::patch::PatchType;
use crate::storage::MemStorage;
use crate::watch_cache::{CacheItem, EventType, WatchCacheConfig, WatchCaches};

async fn store() -> Store {
    let store = Store::new(Arc::new(MemStorage::new()), "/registry", Arc::new(TestKinds));
    store.ensure_system_namespaces().await.expect("system namespaces");
    store
}

fn object(value: Value) -> Object {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

fn configmap(name: &str, labels: &Value) -> Object {
    object(json!({"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}))
}

fn names(list: &Value) -> Vec<&str> {
    list["items"].as_array().expect("items").iter().map(|o| o["metadata"]["name"].as_str().unwrap_or("")).collect()
}

#[tokio::test]
async fn create_read_update_with_optimistic_concurrency() {
    let s = store().await;
    let created = s.create(&CONFIGMAPS, "default", configmap("a", &json!({})), false).await.expect("create");
    let rv = meta_str(&created, "resourceVersion").to_string();
    assert_eq!(meta_str(&created, "uid").len(), 36);
    let again = s.create(&CONFIGMAPS, "default", configmap("a", &json!({})), false).await;
    assert!(matches!(again, Err(ApiError::AlreadyExists { .. })), "{again:?}");
    assert_eq!(meta_str(&s.get(&CONFIGMAPS, "default", "a").await.expect("get"), "resourceVersion"), rv);

    let mut changed = created.clone();
    changed.insert("data".into(), json!({"k": "w"}));
    let updated = s.update(&CONFIGMAPS, "default", "a", changed.clone(), false).await.expect("update");
    assert_eq!(updated["data"]["k"], "w");
    assert_ne!(meta_str(&updated, "resourceVersion"), rv);
    // The same body again carries the old resourceVersion: a conflict, with kube's message.
    let stale = s.update(&CONFIGMAPS, "default", "a", changed, false).await.expect_err("stale");
    assert!(matches!(stale, ApiError::Conflict { .. }) && stale.to_string().contains(OPTIMISTIC_LOCK_MESSAGE));

    let missing = s.create(&CONFIGMAPS, "nowhere", configmap("b", &json!({})), false).await.expect_err("no ns");
    assert!(matches!(missing, ApiError::NotFound { .. }), "{missing}");
}

#[tokio::test]
async fn lists_page_on_one_snapshot_and_select_by_label() {
    let s = store().await.with_list_page_size(2);
    for (name, tier) in [("a", "web"), ("b", "db"), ("c", "web"), ("d", "web"), ("e", "db")] {
        s.create(&CONFIGMAPS, "default", configmap(name, &json!({"tier": tier})), false).await.expect("create");
    }
    let first =
        s.list(&CONFIGMAPS, "default", &ListOptions { limit: 2, ..ListOptions::default() }).await.expect("page");
    assert_eq!(names(&first), ["a", "b"]);
    let token = first["metadata"]["continue"].as_str().expect("a continue token").to_string();
    // A write between pages is not seen: the pages read the first page's revision.
    s.create(&CONFIGMAPS, "default", configmap("bb", &json!({})), false).await.expect("create");
    let rest = ListOptions { continue_token: Some(token), ..ListOptions::default() };
    assert_eq!(names(&s.list(&CONFIGMAPS, "default", &rest).await.expect("rest")), ["c", "d", "e"]);

    let web = ListOptions { labels: LabelSelector::parse("tier=web").expect("selector"), ..ListOptions::default() };
    assert_eq!(names(&s.list(&CONFIGMAPS, "", &web).await.expect("selected")), ["a", "c", "d"]);
}

#[tokio::test]
async fn patches_apply_and_refusals_write_nothing() {
    let s = store().await;
    s.create(&CONFIGMAPS, "default", configmap("a", &json!({})), false).await.expect("create");
    let patch = |patch_type, body: &'static [u8]| PatchRequest {
        target: PatchTarget::Object,
        patch_type,
        body,
        validation: FieldValidation::Strict,
        dry_run: false,
        manager: "tests",
        force: false,
    };
    let (merged, _) =
        s.patch(&CONFIGMAPS, "default", "a", patch(PatchType::Merge, br#"{"data":{"x":"y"}}"#)).await.expect("merge");
    assert_eq!(merged["data"], json!({"k": "v", "x": "y"}));
    let (patched, _) = s
        .patch(&CONFIGMAPS, "default", "a", patch(PatchType::Json, br#"[{"op":"remove","path":"/data/k"}]"#))
        .await
        .expect("json patch");
    assert_eq!(patched["data"], json!({"x": "y"}));
    let rv = meta_str(patched.as_object().expect("object"), "resourceVersion").to_string();

    let failed = s.patch(&CONFIGMAPS, "default", "a", patch(PatchType::Json, br#"[{"op":"remove","path":"/nope"}]"#));
    assert!(failed.await.is_err());
    let unknown = s.patch(&CONFIGMAPS, "default", "a", patch(PatchType::Merge, br#"{"extra":1}"#)).await;
    assert!(matches!(unknown, Err(ApiError::BadRequest(_))), "{unknown:?}");
    let missing = s.patch(&CONFIGMAPS, "default", "b", patch(PatchType::Merge, b"{}")).await;
    assert!(matches!(missing, Err(ApiError::NotFound { .. })), "{missing:?}");
    assert_eq!(meta_str(&s.get(&CONFIGMAPS, "default", "a").await.expect("get"), "resourceVersion"), rv);
}

#[tokio::test]
async fn finalizers_hold_deletion_until_the_last_is_removed() {
    let s = store().await;
    let mut held = configmap("a", &json!({}));
    held["metadata"]["finalizers"] = json!(["example.com/x"]);
    s.create(&CONFIGMAPS, "default", held, false).await.expect("create");
    let answer = s.delete(&CONFIGMAPS, "default", "a", &DeleteOptions::default()).await.expect("delete");
    assert!(!answer["metadata"]["deletionTimestamp"].is_null(), "{answer}");
    let mut current = s.get(&CONFIGMAPS, "default", "a").await.expect("still there");
    current["metadata"]["finalizers"] = json!([]);
    s.update(&CONFIGMAPS, "default", "a", current, false).await.expect("release");
    let gone = s.get(&CONFIGMAPS, "default", "a").await;
    assert!(matches!(gone, Err(ApiError::NotFound { .. })), "{gone:?}");
}

#[tokio::test]
async fn deleting_a_namespace_empties_it_and_refuses_new_content() {
    let s = store().await;
    s.create(&NAMESPACES, "", object(json!({"metadata": {"name": "team"}})), false).await.expect("namespace");
    s.create(&CONFIGMAPS, "team", configmap("a", &json!({})), false).await.expect("create");
    s.delete(&NAMESPACES, "", "team", &DeleteOptions::default()).await.expect("delete namespace");
    let gone = s.get(&CONFIGMAPS, "team", "a").await;
    assert!(matches!(gone, Err(ApiError::NotFound { .. })), "{gone:?}");
    let namespace = s.get(&NAMESPACES, "", "team").await;
    assert!(matches!(namespace, Err(ApiError::NotFound { .. })), "{namespace:?}");
    let refused = s.create(&CONFIGMAPS, "team", configmap("b", &json!({})), false).await;
    assert!(matches!(refused, Err(ApiError::NotFound { .. })), "{refused:?}");
}

#[tokio::test]
async fn the_watch_cache_fans_out_what_the_store_writes() {
    let s = store().await;
    let caches = WatchCaches::new(s.storage().clone(), WatchCacheConfig::default());
    let prefix = CONFIGMAPS.collection_prefix(s.prefix(), "");
    let namespaces = s.list(&NAMESPACES, "", &ListOptions::default()).await.expect("list");
    let start: i64 = namespaces["metadata"]["resourceVersion"].as_str().and_then(|r| r.parse().ok()).expect("revision");
    let mut first = caches.subscribe(&CONFIGMAPS, &prefix, start).await.expect("cache").expect("in window");
    let mut second = caches.subscribe(&CONFIGMAPS, &prefix, start).await.expect("cache").expect("in window");
    s.create(&CONFIGMAPS, "default", configmap("a", &json!({})), false).await.expect("create");
    for sub in [&mut first, &mut second] {
        let event = loop {
            match sub.next().await.expect("open") {
                CacheItem::Event(event) => break event,
                CacheItem::Progress(_) => continue,
            }
        };
        let object = event.object(EventType::Added).expect("added");
        assert_eq!(object["metadata"]["name"], "a");
    }
}
