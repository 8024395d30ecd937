//! kube-rs as a client: typed CRUD on configmaps over TLS with the admin kubeconfig's client
//! certificate, pages with limit/continue, a raw watch, and the runtime's watcher: a reflector
//! that relists after a 410 and converges, and the streaming-list (watch-list) start; a custom
//! resource through `#[derive(CustomResource)]`: its definition created from the type, typed
//! CRUD and `/status`, and a reflector following it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::{reflector, watcher, WatchStreamExt};

use crate::harness::{both_backends, wait_for, Backend, Cluster, Options};
use ballast_apiserver::watch_cache::WatchCacheConfig;

both_backends!(
    typed_crud_pages_and_watch,
    reflector_relists_after_410,
    streaming_list_watcher,
    custom_resource_derive_and_reflector
);
crate::harness::in_memory!(server_side_apply);

async fn client(c: &Cluster) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(c.kubeconfig_path()).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
        .await
        .expect("client config");
    kube::Client::try_from(config).expect("client")
}

async fn create_ns(client: &kube::Client, name: &str) {
    let ns =
        Namespace { metadata: ObjectMeta { name: Some(name.into()), ..ObjectMeta::default() }, ..Namespace::default() };
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await.expect("create namespace");
}

fn cm(name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta { name: Some(name.into()), ..ObjectMeta::default() },
        data: Some(BTreeMap::from([("k".to_string(), value.to_string())])),
        ..ConfigMap::default()
    }
}

fn names<'a>(items: impl IntoIterator<Item = &'a ConfigMap>) -> BTreeSet<String> {
    items.into_iter().filter_map(|c| c.metadata.name.clone()).collect()
}

async fn typed_crud_pages_and_watch(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let client = client(&c).await;
    create_ns(&client, "kr").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "kr");

    let created = api.create(&PostParams::default(), &cm("a", "1")).await.expect("create");
    assert!(created.metadata.uid.is_some() && created.metadata.resource_version.is_some());
    let mut got = api.get("a").await.expect("get");
    assert_eq!(got.data.as_ref().and_then(|d| d.get("k")).map(String::as_str), Some("1"));
    let stale = got.clone();
    got.data = Some(BTreeMap::from([("k".to_string(), "2".to_string())]));
    let replaced = api.replace("a", &PostParams::default(), &got).await.expect("replace");
    assert_ne!(replaced.metadata.resource_version, stale.metadata.resource_version);
    match api.replace("a", &PostParams::default(), &stale).await {
        Err(kube::Error::Api(status)) => assert_eq!((status.code, status.reason.as_str()), (409, "Conflict")),
        other => panic!("a stale replace must conflict: {other:?}"),
    }
    match api.create(&PostParams::default(), &cm("a", "x")).await {
        Err(kube::Error::Api(status)) => assert_eq!((status.code, status.reason.as_str()), (409, "AlreadyExists")),
        other => panic!("a second create must fail: {other:?}"),
    }

    // Pages: seven more objects, three per page, every one exactly once.
    for i in 0..7 {
        api.create(&PostParams::default(), &cm(&format!("p{i}"), "v")).await.expect("create page item");
    }
    let mut seen = Vec::new();
    let mut pages = 0;
    let mut params = ListParams::default().limit(3);
    loop {
        let page = api.list(&params).await.expect("list page");
        pages += 1;
        assert!(page.items.len() <= 3);
        seen.extend(page.items.iter().filter_map(|c| c.metadata.name.clone()));
        match page.metadata.continue_.filter(|t| !t.is_empty()) {
            Some(token) => params = ListParams::default().limit(3).continue_token(&token),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    let unique: BTreeSet<&String> = seen.iter().collect();
    assert_eq!((seen.len(), unique.len()), (8, 8), "{seen:?}");

    // A watch from the list's revision sees the changes after it.
    let rv = api.list(&ListParams::default()).await.expect("list").metadata.resource_version.expect("rv");
    let stream = api.watch(&WatchParams::default().timeout(2), &rv).await.expect("watch");
    let writer = async {
        api.create(&PostParams::default(), &cm("w", "1")).await.expect("create");
        api.delete("w", &DeleteParams::default()).await.expect("delete");
    };
    let (events, ()) = tokio::join!(stream.try_collect::<Vec<_>>(), writer);
    let kinds: Vec<String> = events
        .expect("watch events")
        .into_iter()
        .map(|e| match e {
            WatchEvent::Added(o) => format!("ADDED {}", o.metadata.name.unwrap_or_default()),
            WatchEvent::Deleted(o) => format!("DELETED {}", o.metadata.name.unwrap_or_default()),
            WatchEvent::Modified(o) => format!("MODIFIED {}", o.metadata.name.unwrap_or_default()),
            WatchEvent::Bookmark(_) => "BOOKMARK".into(),
            WatchEvent::Error(e) => format!("ERROR {}", e.code),
        })
        .collect();
    assert_eq!(kinds, ["ADDED w", "DELETED w"]);
}

async fn reflector_relists_after_410(backend: Backend) {
    // A small window so writes elsewhere push the reflector's revision out of the cache, and
    // its re-watch must read etcd's (compacted) history.
    let watch_cache = WatchCacheConfig { capacity: 4, ..WatchCacheConfig::default() };
    let c =
        Cluster::start_with(Options { backend: Some(backend), watch_cache: Some(watch_cache), ..Options::default() })
            .await;
    let client = client(&c).await;
    create_ns(&client, "r").await;
    create_ns(&client, "other").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "r");
    let others: Api<ConfigMap> = Api::namespaced(client.clone(), "other");
    api.create(&PostParams::default(), &cm("r0", "v")).await.expect("create");

    let (reader, writer) = reflector::store::<ConfigMap>();
    let inits = Arc::new(AtomicUsize::new(0));
    let expired = Arc::new(AtomicUsize::new(0));
    let (i, e) = (inits.clone(), expired.clone());
    // Each watch ends after a second, so the watcher re-watches from its last revision.
    // Without bookmarks that revision stays at its last event: with them, every timed-out
    // watch would end with a bookmark at the newest revision and the watcher would never hold
    // a compacted one.
    let config = watcher::Config::default().timeout(1).disable_bookmarks();
    let stream = reflector(writer, watcher(api.clone(), config));
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(item) = stream.next().await {
            match item {
                Ok(watcher::Event::Init) => {
                    i.fetch_add(1, Ordering::SeqCst);
                }
                Err(err) if err.to_string().contains("Expired") || err.to_string().contains("410") => {
                    e.fetch_add(1, Ordering::SeqCst);
                }
                _ => {}
            }
        }
    });
    let has = |want: &[&str]| {
        let want: BTreeSet<String> = want.iter().map(|s| s.to_string()).collect();
        let reader = reader.clone();
        move || names(reader.state().iter().map(|c| c.as_ref())) == want
    };
    let r0 = has(&["r0"]);
    assert!(wait_for(Duration::from_secs(20), async || r0()).await, "reflector never listed r0");

    for n in 0..8 {
        others.create(&PostParams::default(), &cm(&format!("o{n}"), "v")).await.expect("create elsewhere");
    }
    let rv: i64 = others
        .list(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .and_then(|r| r.parse().ok())
        .expect("rv");
    c.etcd_client().await.compact(rv, None).await.expect("compact");
    let relisted = wait_for(Duration::from_secs(20), async || inits.load(Ordering::SeqCst) >= 2).await;
    assert!(relisted, "the watcher never relisted (expired errors: {})", expired.load(Ordering::SeqCst));
    assert!(expired.load(Ordering::SeqCst) >= 1, "the relist must come from a 410");

    api.create(&PostParams::default(), &cm("r1", "v")).await.expect("create");
    api.delete("r0", &DeleteParams::default()).await.expect("delete");
    let converged = has(&["r1"]);
    assert!(
        wait_for(Duration::from_secs(20), async || converged()).await,
        "reflector holds {:?}",
        names(reader.state().iter().map(|c| c.as_ref()))
    );
    task.abort();
}

async fn next(
    stream: &mut futures::stream::BoxStream<'static, watcher::Result<watcher::Event<ConfigMap>>>,
) -> watcher::Event<ConfigMap> {
    tokio::time::timeout(Duration::from_secs(20), stream.next())
        .await
        .expect("watcher event in time")
        .expect("stream open")
        .expect("no watcher error")
}

async fn streaming_list_watcher(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let client = client(&c).await;
    create_ns(&client, "s").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "s");
    for name in ["a", "b", "c"] {
        api.create(&PostParams::default(), &cm(name, "v")).await.expect("create");
    }
    let mut stream = watcher(api.clone(), watcher::Config::default().streaming_lists()).boxed();
    assert!(matches!(next(&mut stream).await, watcher::Event::Init));
    let mut initial = BTreeSet::new();
    loop {
        match next(&mut stream).await {
            watcher::Event::InitApply(cm) => {
                initial.insert(cm.metadata.name.unwrap_or_default());
            }
            watcher::Event::InitDone => break,
            other => panic!("unexpected event during the initial stream: {other:?}"),
        }
    }
    assert_eq!(initial, BTreeSet::from(["a".to_string(), "b".to_string(), "c".to_string()]));
    api.create(&PostParams::default(), &cm("d", "v")).await.expect("create");
    match next(&mut stream).await {
        watcher::Event::Apply(cm) => assert_eq!(cm.metadata.name.as_deref(), Some("d")),
        other => panic!("expected the new object, got {other:?}"),
    }
}

/// kube-rs `Patch::Apply`: creates, then merges with ownership; a second manager conflicts
/// unless it forces, and the 409 reaches the client as kube's Status.
async fn server_side_apply(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let client = client(&c).await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let params = PatchParams::apply("kube-rs-app");
    let applied = api.patch("ssa", &params, &Patch::Apply(cm("ssa", "1"))).await.expect("apply creates");
    assert_eq!(applied.data.as_ref().and_then(|d| d.get("k")).map(String::as_str), Some("1"));
    let entries = applied.metadata.managed_fields.expect("managedFields");
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].manager.as_deref(), Some("kube-rs-app"));
    assert_eq!(entries[0].operation.as_deref(), Some("Apply"));
    let other = PatchParams::apply("other");
    let err = api.patch("ssa", &other, &Patch::Apply(cm("ssa", "2"))).await.expect_err("conflict");
    match err {
        kube::Error::Api(status) => {
            assert_eq!(status.code, 409);
            assert_eq!(status.message, r#"Apply failed with 1 conflict: conflict with "kube-rs-app": .data.k"#);
        }
        other => panic!("not a Status: {other:?}"),
    }
    let forced = api.patch("ssa", &other.force(), &Patch::Apply(cm("ssa", "2"))).await.expect("forced apply");
    assert_eq!(forced.data.as_ref().and_then(|d| d.get("k")).map(String::as_str), Some("2"));
}

/// A custom resource as a kube-rs operator declares it.
#[derive(kube::CustomResource, serde::Serialize, serde::Deserialize, Clone, Debug, schemars::JsonSchema)]
#[kube(group = "kube-rs.example.com", version = "v1", kind = "Gadget", namespaced, status = "GadgetStatus")]
#[kube(shortname = "gd", printcolumn = r#"{"name":"Size","type":"integer","jsonPath":".spec.size"}"#)]
pub(crate) struct GadgetSpec {
    size: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    color: Option<String>,
}

#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default, schemars::JsonSchema)]
pub(crate) struct GadgetStatus {
    ready: bool,
}

async fn custom_resource_derive_and_reflector(backend: Backend) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::runtime::wait::{await_condition, conditions};
    use kube::CustomResourceExt;

    let c = Cluster::start_with(Options { backend: Some(backend), crds: true, ..Options::default() }).await;
    let client = client(&c).await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &Gadget::crd()).await.expect("create the derived definition");
    let established = await_condition(crds.clone(), "gadgets.kube-rs.example.com", conditions::is_crd_established());
    tokio::time::timeout(Duration::from_secs(30), established).await.expect("established in time").expect("wait");

    create_ns(&client, "gadgets").await;
    let api: Api<Gadget> = Api::namespaced(client.clone(), "gadgets");
    let (reader, writer) = reflector::store::<Gadget>();
    let events = Arc::new(AtomicUsize::new(0));
    let seen = events.clone();
    let follow = reflector::reflector(writer, watcher(api.clone(), watcher::Config::default()))
        .applied_objects()
        .try_for_each(move |_| {
            seen.fetch_add(1, Ordering::Relaxed);
            async { Ok(()) }
        });
    let task = tokio::spawn(follow);

    for (name, size) in [("a", 1), ("b", 2), ("c", 3)] {
        let g = Gadget::new(name, GadgetSpec { size, color: None });
        api.create(&PostParams::default(), &g).await.expect("create a gadget");
    }
    let mut b = api.get("b").await.expect("get");
    assert_eq!(b.spec.size, 2);
    b.spec.color = Some("teal".into());
    api.replace("b", &PostParams::default(), &b).await.expect("replace");
    let status = serde_json::json!({"status": {"ready": true}});
    api.patch_status("a", &PatchParams::default(), &Patch::Merge(&status)).await.expect("patch /status");
    api.delete("c", &DeleteParams::default()).await.expect("delete");

    let converged = wait_for(Duration::from_secs(15), async || {
        let state = reader.state();
        let mut names: Vec<String> = state.iter().filter_map(|g| g.metadata.name.clone()).collect();
        names.sort();
        let ready =
            state.iter().any(|g| g.metadata.name.as_deref() == Some("a") && g.status.as_ref().is_some_and(|s| s.ready));
        let teal = state.iter().any(|g| g.spec.color.as_deref() == Some("teal"));
        names == ["a", "b"] && ready && teal
    })
    .await;
    assert!(converged, "the reflector follows the custom resources: {:?}", reader.state());
    assert!(events.load(Ordering::Relaxed) >= 5, "every change came as an event");
    task.abort();

    // The printer column the derive declared is served in the Table kubectl reads.
    let out = c.must_kubectl(&["get", "gd", "-n", "gadgets"]).await;
    assert!(out.lines().next().is_some_and(|h| h.contains("SIZE")), "{out}");
}
