//! LIST of large collections: answers bigger than gRPC's default 4 MiB message pass (through
//! kubectl and raw requests), and the streamed answer, read from storage in small internal
//! pages, equals a reference reading straight from etcd: same items in the same order, same
//! metadata, with selectors, with `limit`/`continue` (tokens, `remainingItemCount`, one
//! snapshot across pages, 410 for a compacted token), and as a Table or metadata list. Plain
//! lists write stored bytes without decoding them, also under label selectors and field
//! selectors on `metadata.name`/`metadata.namespace`, each object at its own mod_revision;
//! objects stored in other writers' forms still list exactly as the decoding path presents
//! them.

use futures::StreamExt;
use serde_json::{json, Value};

use crate::harness::{both_backends, Backend, Cluster, Credentials, Options};

both_backends!(
    lists_larger_than_four_mebibytes_are_answered_whole,
    streamed_lists_equal_a_reference_reading,
    pages_continue_on_one_snapshot_and_expire_when_compacted,
    streamed_tables_and_metadata_lists_hold_every_item,
    objects_other_writers_stored_list_as_they_decode,
    name_selectors_and_revisions_on_stored_bytes,
);

const JSON: Option<&str> = Some("application/json");

/// The internal page size of the streaming tests: small, so a list spans many Ranges.
const SMALL_PAGE: usize = 7;

async fn small_page_cluster(backend: Backend) -> Cluster {
    Cluster::start_with(Options {
        backend: Some(backend),
        configure: Some(Box::new(|config, _| config.list_page_size = SMALL_PAGE)),
        ..Options::default()
    })
    .await
}

/// Creates configmaps through the API, 16 at a time.
async fn create_cms(c: &Cluster, objects: Vec<(String, Value)>) {
    let mut sends = futures::stream::iter(objects.into_iter().map(|(ns, body)| async move {
        let path = format!("/api/v1/namespaces/{ns}/configmaps");
        let r = c.request(Credentials::Admin, "POST", &path, JSON, body.to_string()).await;
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    }))
    .buffer_unordered(16);
    while sends.next().await.is_some() {}
}

async fn create_namespace(c: &Cluster, name: &str) {
    let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    let r = c.request(Credentials::Admin, "POST", "/api/v1/namespaces", JSON, body.to_string()).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
}

async fn get_json(c: &Cluster, path: &str) -> Value {
    let r = c.request(Credentials::Admin, "GET", path, None, "").await;
    assert_eq!(r.status, 200, "GET {path}: {}", String::from_utf8_lossy(&r.body));
    r.json()
}

fn names(items: &Value) -> Vec<String> {
    items
        .as_array()
        .expect("an array")
        .iter()
        .map(|o| format!("{}/{}", o["metadata"]["namespace"].as_str().unwrap_or(""), o["metadata"]["name"]))
        .collect()
}

async fn lists_larger_than_four_mebibytes_are_answered_whole(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    // 300 × 16 KiB ≈ 4.7 MiB: one etcd Range answer larger than tonic's default limit.
    let blob = "x".repeat(16 * 1024);
    let objects = (0..300)
        .map(|i| {
            let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("big-{i:03}")}, "data": {"blob": blob}});
            ("default".to_string(), body)
        })
        .collect();
    create_cms(&c, objects).await;

    // kubectl pages by 500, so this is one page of all 300.
    let out = c.must_kubectl(&["get", "cm", "-n", "default", "-o", "json"]).await;
    let list: Value = serde_json::from_str(&out).expect("kubectl prints JSON");
    let items = list["items"].as_array().expect("items");
    assert_eq!(items.len(), 300);
    assert!(items.iter().all(|o| o["data"]["blob"].as_str().map(str::len) == Some(16 * 1024)));

    // A raw LIST without a limit.
    let list = get_json(&c, "/api/v1/namespaces/default/configmaps").await;
    let got = names(&list["items"]);
    let want: Vec<String> = (0..300).map(|i| format!("default/\"big-{i:03}\"")).collect();
    assert_eq!(got, want);
    assert!(list["metadata"]["continue"].is_null());
}

/// Reads every configmap straight from etcd at `revision`, as the API should present them.
async fn reference(c: &Cluster, namespace: Option<&str>, revision: i64) -> Vec<Value> {
    let prefix = match namespace {
        Some(ns) => format!("/registry/configmaps/{ns}/"),
        None => "/registry/configmaps/".to_string(),
    };
    let mut kv = c.etcd_client().await.kv_client();
    let opts = etcd_client::GetOptions::new().with_prefix().with_revision(revision);
    let resp = kv.get(prefix.as_str(), Some(opts)).await.expect("etcd range");
    resp.kvs()
        .iter()
        .map(|kv| {
            let mut obj: Value = serde_json::from_slice(kv.value()).expect("stored JSON");
            obj["metadata"]["resourceVersion"] = kv.mod_revision().to_string().into();
            obj
        })
        .collect()
}

/// The fields the stored form and the served form share.
fn essence(items: &[Value]) -> Vec<Value> {
    items
        .iter()
        .map(|o| {
            let m = &o["metadata"];
            json!([m["namespace"], m["name"], m["resourceVersion"], m["uid"], m["labels"], o["data"]])
        })
        .collect()
}

async fn seed(c: &Cluster) {
    for ns in ["alpha", "beta"] {
        create_namespace(c, ns).await;
    }
    let objects = (0..60)
        .map(|i| {
            let ns = if i % 3 == 0 { "beta" } else { "alpha" };
            let parity = if i % 2 == 0 { "even" } else { "odd" };
            let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("cm-{i:02}"), "labels": {"parity": parity, "tens": (i / 10).to_string()}},
                "data": {"i": i.to_string()}});
            (ns.to_string(), body)
        })
        .collect();
    create_cms(c, objects).await;
}

async fn streamed_lists_equal_a_reference_reading(backend: Backend) {
    let c = small_page_cluster(backend).await;
    seed(&c).await;

    for (path, namespace) in [("/api/v1/configmaps", None), ("/api/v1/namespaces/alpha/configmaps", Some("alpha"))] {
        let list = get_json(&c, path).await;
        assert_eq!((list["kind"].as_str(), list["apiVersion"].as_str()), (Some("ConfigMapList"), Some("v1")));
        let rv: i64 = list["metadata"]["resourceVersion"].as_str().and_then(|r| r.parse().ok()).expect("list RV");
        assert_eq!(list["metadata"].as_object().map(|m| m.len()), Some(1), "{}", list["metadata"]);
        let want = reference(&c, namespace, rv).await;
        let got = list["items"].as_array().expect("items");
        // All namespaces: the 60 seeded and kube-system's extension-apiserver-authentication.
        assert_eq!(got.len(), if namespace.is_some() { 40 } else { 61 });
        assert_eq!(essence(got), essence(&want), "{path}");

        // Label and field selectors apply across the internal pages.
        let list = get_json(&c, &format!("{path}?labelSelector=parity%3Deven,tens%20in%20(1,4)")).await;
        let filtered: Vec<Value> = want
            .iter()
            .filter(|o| {
                let l = &o["metadata"]["labels"];
                l["parity"] == "even" && (l["tens"] == "1" || l["tens"] == "4")
            })
            .cloned()
            .collect();
        assert!(!filtered.is_empty());
        assert_eq!(essence(list["items"].as_array().expect("items")), essence(&filtered));
        let list = get_json(&c, &format!("{path}?fieldSelector=metadata.name%3Dcm-04")).await;
        assert_eq!(names(&list["items"]), ["alpha/\"cm-04\""]);
    }
    // A selector that matches nothing still answers a well-formed empty list.
    let list = get_json(&c, "/api/v1/configmaps?labelSelector=parity%3Dnone").await;
    assert_eq!(list["items"], json!([]));
    assert!(list["metadata"]["resourceVersion"].as_str().is_some());
    // So does an empty collection.
    let list = get_json(&c, "/api/v1/namespaces/kube-public/configmaps").await;
    assert_eq!(list["items"], json!([]));
}

/// Walks a collection with `limit`, returning the pages.
async fn walk(c: &Cluster, path: &str, limit: usize) -> Vec<Value> {
    let mut pages = Vec::new();
    let mut token = String::new();
    loop {
        let sep = if path.contains('?') { '&' } else { '?' };
        let mut url = format!("{path}{sep}limit={limit}");
        if !token.is_empty() {
            url.push_str(&format!("&continue={token}"));
        }
        let page = get_json(c, &url).await;
        token = page["metadata"]["continue"].as_str().unwrap_or("").to_string();
        pages.push(page);
        if token.is_empty() {
            return pages;
        }
        assert!(pages.len() < 100, "the walk does not end");
    }
}

async fn pages_continue_on_one_snapshot_and_expire_when_compacted(backend: Backend) {
    let c = small_page_cluster(backend).await;
    seed(&c).await;
    let path = "/api/v1/namespaces/alpha/configmaps";

    // Pages of 10 over internal pages of 7: every page full, counts exact, one revision.
    let pages = walk(&c, path, 10).await;
    assert_eq!(pages.len(), 4);
    let rv = pages[0]["metadata"]["resourceVersion"].clone();
    let mut items = Vec::new();
    for (i, page) in pages.iter().enumerate() {
        assert_eq!(page["metadata"]["resourceVersion"], rv);
        assert_eq!(page["items"].as_array().map(Vec::len), Some(10));
        let remaining = page["metadata"]["remainingItemCount"].as_i64();
        assert_eq!(remaining, (i < 3).then(|| 30 - 10 * i as i64), "page {i}: {}", page["metadata"]);
        items.extend(page["items"].as_array().expect("items").iter().cloned());
    }
    let rv_num: i64 = rv.as_str().and_then(|r| r.parse().ok()).expect("RV");
    assert_eq!(essence(&items), essence(&reference(&c, Some("alpha"), rv_num).await));

    // With a selector: full pages of matches, no remainingItemCount, and the walk still covers
    // exactly the matching objects.
    let pages = walk(&c, &format!("{path}?labelSelector=parity%3Dodd"), 6).await;
    let mut odd = Vec::new();
    for page in &pages {
        assert!(page["metadata"]["remainingItemCount"].is_null(), "{}", page["metadata"]);
        odd.extend(names(&page["items"]));
    }
    let want: Vec<String> =
        (0..60).filter(|i| i % 3 != 0 && i % 2 == 1).map(|i| format!("alpha/\"cm-{i:02}\"")).collect();
    assert_eq!(odd, want);
    assert!(pages[..pages.len() - 1].iter().all(|p| p["items"].as_array().map(Vec::len) == Some(6)));

    // A continue token reads its snapshot: an object created after the first page is absent.
    let first = get_json(&c, &format!("{path}?limit=5")).await;
    let token = first["metadata"]["continue"].as_str().expect("continue").to_string();
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-99"}});
    let r = c.request(Credentials::Admin, "POST", path, JSON, body.to_string()).await;
    assert_eq!(r.status, 201);
    let rest = get_json(&c, &format!("{path}?limit=100&continue={token}")).await;
    assert_eq!(rest["items"].as_array().map(Vec::len), Some(35));
    assert!(!names(&rest["items"]).contains(&"alpha/\"cm-99\"".to_string()));
    assert_eq!(rest["metadata"]["resourceVersion"], first["metadata"]["resourceVersion"]);
    assert!(rest["metadata"]["continue"].is_null());

    // Once that snapshot is compacted, the token is 410 Expired (before any body is written).
    let now: i64 =
        get_json(&c, path).await["metadata"]["resourceVersion"].as_str().and_then(|r| r.parse().ok()).expect("RV");
    c.etcd_client().await.compact(now, None).await.expect("compact");
    let r = c.request(Credentials::Admin, "GET", &format!("{path}?limit=5&continue={token}"), None, "").await;
    assert_eq!(r.status, 410, "{}", String::from_utf8_lossy(&r.body));
    let status = r.json();
    assert_eq!((status["kind"].as_str(), status["reason"].as_str()), (Some("Status"), Some("Expired")));
    assert!(status["message"].as_str().unwrap_or("").starts_with("The provided continue parameter is too old"));
    // An exact read of a compacted revision is refused the same way.
    let r = c
        .request(
            Credentials::Admin,
            "GET",
            &format!("{path}?resourceVersion={rv_num}&resourceVersionMatch=Exact"),
            None,
            "",
        )
        .await;
    assert_eq!(r.status, 410, "{}", String::from_utf8_lossy(&r.body));
}

async fn streamed_tables_and_metadata_lists_hold_every_item(backend: Backend) {
    let c = small_page_cluster(backend).await;
    seed(&c).await;
    let path = "/api/v1/namespaces/alpha/configmaps";
    let want: Vec<String> = (0..60).filter(|i| i % 3 != 0).map(|i| format!("cm-{i:02}")).collect();

    let table = c.request_with_accept(Credentials::Admin, path, "application/json;as=Table;v=v1;g=meta.k8s.io").await;
    assert_eq!(table.status, 200);
    let table = table.json();
    assert_eq!((table["kind"].as_str(), table["apiVersion"].as_str()), (Some("Table"), Some("meta.k8s.io/v1")));
    assert!(table["columnDefinitions"].as_array().is_some_and(|c| !c.is_empty()));
    let rows = table["rows"].as_array().expect("rows");
    let row_names: Vec<&str> = rows.iter().filter_map(|r| r["cells"][0].as_str()).collect();
    assert_eq!(row_names, want);
    assert_eq!(rows[0]["object"]["kind"], "PartialObjectMetadata");
    assert!(table["metadata"]["resourceVersion"].as_str().is_some());

    // A Table page carries the continue token and count like the list.
    let page = c
        .request_with_accept(
            Credentials::Admin,
            &format!("{path}?limit=15"),
            "application/json;as=Table;v=v1;g=meta.k8s.io",
        )
        .await
        .json();
    assert_eq!(page["rows"].as_array().map(Vec::len), Some(15));
    assert_eq!(page["metadata"]["remainingItemCount"], 25);
    assert!(page["metadata"]["continue"].as_str().is_some());

    let meta = c
        .request_with_accept(
            Credentials::Admin,
            path,
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
        )
        .await
        .json();
    assert_eq!(meta["kind"], "PartialObjectMetadataList");
    let items = meta["items"].as_array().expect("items");
    assert!(items.iter().all(|i| i["kind"] == "PartialObjectMetadata" && i.get("data").is_none()));
    let meta_names: Vec<&str> = items.iter().filter_map(|i| i["metadata"]["name"].as_str()).collect();
    assert_eq!(meta_names, want);

    // kubectl's table and kubectl's chunked JSON list agree.
    let out =
        c.must_kubectl(&["get", "cm", "-n", "alpha", "--no-headers", "-o", "custom-columns=N:.metadata.name"]).await;
    assert_eq!(out.lines().collect::<Vec<_>>(), want);
    let out = c.must_kubectl(&["get", "cm", "-n", "alpha", "--chunk-size=4", "-o", "json"]).await;
    let list: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(list["items"].as_array().map(Vec::len), Some(40));

    // YAML is streamed too, across the internal pages, and says what JSON says: also for
    // multi-line values (block scalars, blank lines inside) and an empty list.
    let text = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "zz-multiline"},
        "data": {"script": "line one\n\n  indented after a blank\nlast: not a key\n", "empty": ""}});
    create_cms(&c, vec![("alpha".to_string(), text)]).await;
    let json_list = get_json(&c, path).await;
    let yaml = c.request_with_accept(Credentials::Admin, path, "application/yaml").await;
    assert_eq!(yaml.status, 200);
    assert_eq!(yaml.headers["content-type"], "application/yaml");
    let yaml: Value = serde_yaml_ng::from_slice(&yaml.body).expect("YAML");
    assert_eq!(yaml, json_list);
    assert_eq!(yaml["items"].as_array().map(Vec::len), Some(41));
    let empty = c
        .request_with_accept(Credentials::Admin, "/api/v1/namespaces/kube-public/configmaps", "application/yaml")
        .await;
    let empty: Value = serde_yaml_ng::from_slice(&empty.body).expect("YAML");
    assert_eq!((empty["kind"].as_str(), &empty["items"]), (Some("ConfigMapList"), &json!([])));
    assert!(empty["metadata"]["resourceVersion"].is_string());
}

async fn objects_other_writers_stored_list_as_they_decode(backend: Backend) {
    let c = small_page_cluster(backend).await;
    create_namespace(&c, "other").await;
    let mut kv = c.etcd_client().await.kv_client();
    // Written straight to storage: Go's field order with whitespace and a string that names
    // "metadata"; an escaped member name; a stored resourceVersion (served as the key's
    // revision instead); an empty metadata.
    let stored = [
        ("go-order", "{ \"kind\" : \"ConfigMap\", \"apiVersion\":\"v1\",\n \"metadata\": { \"name\":\"go-order\", \"namespace\":\"other\", \"labels\":{\"app\":\"x\"} },\n \"data\":{\"metadata\":\"{\\\"not\\\":\\\"this\\\"}\"} }"),
        ("escaped", r#"{"apiVersion":"v1","kind":"ConfigMap","metadat\u0061":{"name":"escaped","namespace":"other","labels":{"app":"\u0078"}},"data":{"k":"v"}}"#),
        ("old-writer", r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"old-writer","namespace":"other","resourceVersion":"1"}}"#),
        ("z-empty-meta", r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}"#),
    ];
    for (name, value) in stored {
        serde_json::from_str::<Value>(value).unwrap_or_else(|e| panic!("{name} is JSON: {e}"));
        kv.put(format!("/registry/configmaps/other/{name}"), value, None).await.expect("etcd put");
    }
    let objects = (0..20)
        .map(|i| {
            let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("api-{i:02}"), "labels": {"app": if i % 2 == 0 { "x" } else { "y" }}},
                "data": {"i": i.to_string()}});
            ("other".to_string(), body)
        })
        .collect();
    create_cms(&c, objects).await;

    let list = get_json(&c, "/api/v1/namespaces/other/configmaps").await;
    let rv: i64 = list["metadata"]["resourceVersion"].as_str().and_then(|r| r.parse().ok()).expect("list RV");
    let want = reference(&c, Some("other"), rv).await;
    assert_eq!(want.len(), 24);
    assert_eq!(list["items"].as_array().expect("items"), &want, "every item exactly as decoded");
    let escaped = want.iter().find(|o| o["metadata"]["name"] == "escaped").expect("escaped");
    assert_eq!(escaped["metadata"]["labels"]["app"], "x");
    let old = list["items"].as_array().and_then(|i| i.iter().find(|o| o["metadata"]["name"] == "old-writer"));
    assert_ne!(old.expect("old-writer")["metadata"]["resourceVersion"], "1", "served at its own revision");

    // A label selector reads the labels of stored bytes, escaped ones included.
    let list = get_json(&c, "/api/v1/namespaces/other/configmaps?labelSelector=app%3Dx").await;
    let got: Vec<&str> =
        list["items"].as_array().expect("items").iter().filter_map(|o| o["metadata"]["name"].as_str()).collect();
    let want_x: Vec<&str> = want
        .iter()
        .filter(|o| o["metadata"]["labels"]["app"] == "x")
        .filter_map(|o| o["metadata"]["name"].as_str())
        .collect();
    assert_eq!(got, want_x);
    assert!(got.contains(&"escaped") && got.contains(&"go-order") && got.len() == 12, "{got:?}");

    // A kind served in another version than stored still converts every item.
    let event = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1"},
        "involvedObject": {"kind": "Pod", "name": "web-0", "namespace": "other"},
        "reason": "Started", "message": "started container", "type": "Normal"});
    let r = c.request(Credentials::Admin, "POST", "/api/v1/namespaces/other/events", JSON, event.to_string()).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let list = get_json(&c, "/apis/events.k8s.io/v1/namespaces/other/events").await;
    let item = &list["items"][0];
    assert_eq!(
        (item["apiVersion"].as_str(), item["note"].as_str()),
        (Some("events.k8s.io/v1"), Some("started container"))
    );
    assert_eq!(item["regarding"]["name"], "web-0");
}

async fn name_selectors_and_revisions_on_stored_bytes(backend: Backend) {
    let c = small_page_cluster(backend).await;
    seed(&c).await;
    // Changed objects: their resourceVersion must be their own latest mod_revision, not the
    // creation's nor the list's.
    for name in ["cm-04", "cm-09", "cm-12"] {
        let ns = if name == "cm-09" || name == "cm-12" { "beta" } else { "alpha" };
        let path = format!("/api/v1/namespaces/{ns}/configmaps/{name}");
        let patch = json!({"data": {"changed": "yes"}}).to_string();
        let r = c.request(Credentials::Admin, "PATCH", &path, Some("application/merge-patch+json"), patch).await;
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    }
    // Another writer's objects: an escaped member name and value, and a name that is not a
    // string (which only the decoding path can compare, as kube would: "7").
    let mut kv = c.etcd_client().await.kv_client();
    let odd = [
        (
            "alpha",
            "esc",
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"n\u0061me":"esc\u0061ped","namespace":"alpha","labels":{"parity":"odd"}}}"#,
        ),
        ("beta", "seven", r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":7,"namespace":"beta"}}"#),
    ];
    for (ns, key, value) in odd {
        kv.put(format!("/registry/configmaps/{ns}/{key}"), value, None).await.expect("etcd put");
    }

    let all = get_json(&c, "/api/v1/configmaps").await;
    let rv: i64 = all["metadata"]["resourceVersion"].as_str().and_then(|r| r.parse().ok()).expect("list RV");
    let want = reference(&c, None, rv).await;
    assert_eq!(all["items"].as_array().expect("items"), &want, "every item as stored, at its mod_revision");
    let patched = want.iter().filter(|o| o["data"]["changed"] == "yes").count();
    assert_eq!(patched, 3);
    let rvs: Vec<&str> = want.iter().filter_map(|o| o["metadata"]["resourceVersion"].as_str()).collect();
    assert_eq!(rvs.iter().collect::<std::collections::HashSet<_>>().len(), rvs.len(), "one revision per write");

    let select = |query: &str| {
        let c = &c;
        let path = format!("/api/v1/configmaps?{query}");
        async move { names(&get_json(c, &path).await["items"]) }
    };
    let beta: Vec<String> = want
        .iter()
        .filter(|o| o["metadata"]["namespace"] == "beta")
        .map(|o| format!("beta/{}", o["metadata"]["name"]))
        .collect();
    assert_eq!(beta.len(), 21);
    assert_eq!(select("fieldSelector=metadata.namespace%3Dbeta").await, beta);
    assert_eq!(select("fieldSelector=metadata.namespace!%3Dbeta,metadata.name%3Dcm-04").await, ["alpha/\"cm-04\""]);
    assert_eq!(select("fieldSelector=metadata.name%3Dcm-04,metadata.namespace%3Dbeta").await, Vec::<String>::new());
    assert_eq!(select("fieldSelector=metadata.name%3Descaped").await, ["alpha/\"escaped\""]);
    assert_eq!(select("fieldSelector=metadata.name%3D7").await, ["beta/7"]);
    // Label and field selectors together, across the internal pages.
    let odd_alpha: Vec<String> = (0..60)
        .filter(|i| i % 3 != 0 && i % 2 == 1)
        .map(|i| format!("alpha/\"cm-{i:02}\""))
        .chain(["alpha/\"escaped\"".to_string()])
        .collect();
    let mut got = select("labelSelector=parity%3Dodd&fieldSelector=metadata.namespace%3Dalpha").await;
    got.sort();
    let mut want_odd = odd_alpha;
    want_odd.sort();
    assert_eq!(got, want_odd);

    // A field selector on anything but names decodes every object, and still filters.
    for (name, kind) in [("s-opaque", "Opaque"), ("s-basic", "kubernetes.io/basic-auth"), ("s-default", "")] {
        let mut body = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
            "stringData": {"username": "u", "password": "p"}});
        if !kind.is_empty() {
            body["type"] = kind.into();
        }
        let r = c.request(Credentials::Admin, "POST", "/api/v1/namespaces/alpha/secrets", JSON, body.to_string()).await;
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    }
    let path = "/api/v1/namespaces/alpha/secrets?fieldSelector=type%3DOpaque,metadata.name!%3Ds-basic";
    assert_eq!(names(&get_json(&c, path).await["items"]), ["alpha/\"s-default\"", "alpha/\"s-opaque\""]);
}
