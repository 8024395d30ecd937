//! Server-side printing as kubectl shows it (Table columns and rows, `-o wide`, `get -w`), the
//! raw Table and PartialObjectMetadata forms, and YAML answers and bodies.

use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::AsyncBufReadExt;

use crate::harness::{in_memory, wait_for, Backend, Cluster, Credentials};

in_memory!(
    kubectl_get_prints_kube_columns,
    kubectl_get_watch_prints_rows_as_they_come,
    table_and_metadata_forms,
    yaml_answers_and_bodies
);

const TABLE: &str =
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

/// Splits kubectl's column output into rows of whitespace-separated fields.
fn rows(out: &str) -> Vec<Vec<String>> {
    out.lines().map(|l| l.split_whitespace().map(String::from).collect()).collect()
}

fn row<'a>(rows: &'a [Vec<String>], name: &str) -> &'a [String] {
    rows.iter().find(|r| r.first().is_some_and(|n| n == name)).unwrap_or_else(|| panic!("no row {name} in {rows:?}"))
}

fn is_age(s: &str) -> bool {
    s.ends_with('s') && s[..s.len() - 1].parse::<u32>().is_ok()
}

async fn kubectl_get_prints_kube_columns(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    // kubectl's part is reading; the objects are written in-process.
    c.create_namespace("t").await;
    let two = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "two", "namespace": "t"},
                     "data": {"a": "1", "b": "2"}});
    c.must_post(&two).await;
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "t"},
                        "data": {"k": "dg=="}});
    c.must_post(&secret).await;

    let cms = rows(&c.must_kubectl(&["get", "cm", "-n", "t"]).await);
    assert_eq!(cms[0], ["NAME", "DATA", "AGE"]);
    let two = row(&cms, "two");
    assert_eq!(two[1], "2");
    assert!(is_age(&two[2]), "{two:?}");

    let secrets = rows(&c.must_kubectl(&["get", "secrets", "-n", "t"]).await);
    assert_eq!(secrets[0], ["NAME", "TYPE", "DATA", "AGE"]);
    assert_eq!(row(&secrets, "s")[1..3], ["Opaque", "1"]);

    let ns = rows(&c.must_kubectl(&["get", "ns", "-o", "wide"]).await);
    assert_eq!(ns[0], ["NAME", "STATUS", "AGE"]);
    for name in ["default", "kube-system", "t"] {
        assert_eq!(row(&ns, name)[1], "Active");
    }
    // One object, and no headers.
    let one = rows(&c.must_kubectl(&["get", "cm", "two", "-n", "t", "--no-headers"]).await);
    assert_eq!(one.len(), 1);
    assert_eq!(one[0][..2], ["two", "2"]);
    // Every namespace: kubectl adds the NAMESPACE column from the row metadata.
    let all = rows(&c.must_kubectl(&["get", "cm", "-A"]).await);
    assert_eq!(all[0], ["NAMESPACE", "NAME", "DATA", "AGE"]);
    assert!(all.iter().any(|r| r[..3] == ["t", "two", "2"]), "{all:?}");
}

async fn kubectl_get_watch_prints_rows_as_they_come(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    c.create_namespace("w").await;
    c.must_post(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "before", "namespace": "w"},
                        "data": {"a": "1"}}))
        .await;
    let mut watcher = c.spawn_kubectl(&["get", "cm", "-n", "w", "-w", "--request-timeout=60s"]);
    let stdout = watcher.stdout.take().expect("piped stdout");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let _ = tx.send(line);
        }
    });
    let mut seen: Vec<Vec<String>> = Vec::new();
    let mut until = async |pred: &dyn Fn(&[String]) -> bool| {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while !seen.iter().any(|r| pred(r)) {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(line)) => seen.push(line.split_whitespace().map(String::from).collect()),
                _ => panic!("kubectl never printed the expected row; got:\n{seen:?}"),
            }
        }
        seen.clone()
    };
    let first = until(&|r| r.first().is_some_and(|n| n == "before")).await;
    assert_eq!(first[0], ["NAME", "DATA", "AGE"], "headers once, from the list");
    c.must_kubectl(&["create", "configmap", "during", "-n", "w", "--from-literal=a=1", "--from-literal=b=2"]).await;
    let after = until(&|r| r.first().is_some_and(|n| n == "during")).await;
    assert_eq!(row(&after, "during")[1], "2");
    assert_eq!(after.iter().filter(|r| r.first().is_some_and(|n| n == "NAME")).count(), 1, "{after:?}");
    watcher.kill().await.expect("stop kubectl");
    let ok = wait_for(Duration::from_secs(5), async || watcher.try_wait().ok().flatten().is_some()).await;
    assert!(ok, "kubectl did not stop");
}

async fn table_and_metadata_forms(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let path = "/api/v1/namespaces/default/configmaps";
    let body = json!({"metadata": {"name": "cm", "labels": {"a": "b"}}, "data": {"k": "v"}}).to_string();
    assert_eq!(c.request(Credentials::Admin, "POST", path, Some("application/json"), body).await.status, 201);

    let t = c.request_with_accept(Credentials::Admin, path, TABLE).await;
    assert_eq!(t.status, 200);
    let t = t.json();
    assert_eq!((t["kind"].as_str(), t["apiVersion"].as_str()), (Some("Table"), Some("meta.k8s.io/v1")));
    let names: Vec<&str> =
        t["columnDefinitions"].as_array().expect("columns").iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(names, ["Name", "Data", "Age"]);
    assert_eq!(t["columnDefinitions"][0]["format"], "name");
    assert!(t["metadata"]["resourceVersion"].as_str().is_some_and(|rv| rv.parse::<i64>().is_ok()));
    assert_eq!(t["rows"][0]["cells"].as_array().expect("cells")[..2], [json!("cm"), json!(1)]);
    let obj = &t["rows"][0]["object"];
    assert_eq!(
        (obj["kind"].as_str(), obj["metadata"]["labels"]["a"].as_str()),
        (Some("PartialObjectMetadata"), Some("b"))
    );
    assert!(obj.get("data").is_none());

    let full =
        c.request_with_accept(Credentials::Admin, &format!("{path}/cm?includeObject=Object"), TABLE).await.json();
    assert_eq!(full["rows"].as_array().map(Vec::len), Some(1));
    assert_eq!(full["rows"][0]["object"]["data"]["k"], "v");
    let none = c.request_with_accept(Credentials::Admin, &format!("{path}?includeObject=None"), TABLE).await.json();
    assert!(none["rows"][0].get("object").is_none(), "{none}");
    let bad = c.request_with_accept(Credentials::Admin, &format!("{path}?includeObject=All"), TABLE).await;
    assert_eq!(bad.status, 400);

    let v1beta1 =
        c.request_with_accept(Credentials::Admin, path, "application/json;as=Table;v=v1beta1;g=meta.k8s.io").await;
    assert_eq!(v1beta1.json()["apiVersion"], "meta.k8s.io/v1beta1");
    // Kinds with no printer of their own still make Tables (namespaces have one; the default
    // form is covered by unit tests). A Table-only Accept is served, a protobuf-only one is not.
    let only = c
        .request_with_accept(Credentials::Admin, "/api/v1/namespaces", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .await;
    assert_eq!(only.json()["columnDefinitions"][1]["name"], "Status");
    let pb = c.request_with_accept(Credentials::Admin, path, "application/vnd.kubernetes.protobuf").await;
    assert_eq!((pb.status, pb.json()["reason"].as_str()), (406, Some("NotAcceptable")));

    let meta = c
        .request_with_accept(
            Credentials::Admin,
            path,
            "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
        )
        .await
        .json();
    assert_eq!(meta["kind"], "PartialObjectMetadataList");
    assert_eq!(meta["items"][0]["metadata"]["name"], "cm");
    assert!(meta["items"][0].get("data").is_none());

    // A Table watch: one row per event, column definitions only in the first.
    let list = c.request_with_accept(Credentials::Admin, path, "application/json").await.json();
    let rv = list["metadata"]["resourceVersion"].as_str().expect("rv").to_string();
    for name in ["w1", "w2"] {
        let body = json!({"metadata": {"name": name}}).to_string();
        assert_eq!(c.request(Credentials::Admin, "POST", path, Some("application/json"), body).await.status, 201);
    }
    let w = c
        .request_with_accept(
            Credentials::Admin,
            &format!("{path}?watch=true&timeoutSeconds=1&resourceVersion={rv}"),
            TABLE,
        )
        .await;
    let events: Vec<Value> =
        String::from_utf8_lossy(&w.body).lines().map(|l| serde_json::from_str(l).expect("event")).collect();
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0]["type"], "ADDED");
    assert_eq!(events[0]["object"]["kind"], "Table");
    assert_eq!(events[0]["object"]["rows"][0]["cells"][0], "w1");
    assert!(events[0]["object"]["columnDefinitions"].is_array());
    assert!(events[1]["object"]["columnDefinitions"].is_null());
    assert_eq!(events[1]["object"]["rows"][0]["cells"].as_array().expect("cells")[..2], [json!("w2"), json!(0)]);
}

async fn yaml_answers_and_bodies(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let path = "/api/v1/namespaces/default/configmaps";
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\n  labels:\n    app: web\ndata:\n  port: \"8080\"\n";
    let r = c.request(Credentials::Admin, "POST", path, Some("application/yaml"), yaml).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["data"]["port"], "8080", "JSON stays the default answer");

    let r = c.request_with_accept(Credentials::Admin, &format!("{path}/from-yaml"), "application/yaml").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["content-type"], "application/yaml");
    let text = String::from_utf8_lossy(&r.body);
    assert!(text.contains("name: from-yaml"), "{text}");
    let back: Value = serde_yaml_ng::from_str(&text).expect("YAML");
    assert_eq!(back["metadata"]["labels"]["app"], "web");
    let list: Value =
        serde_yaml_ng::from_slice(&c.request_with_accept(Credentials::Admin, path, "application/yaml").await.body)
            .expect("YAML list");
    assert_eq!(list["kind"], "ConfigMapList");

    // Update with a YAML body.
    let mut updated = back.clone();
    updated["data"]["port"] = "9090".into();
    let r = c
        .request(
            Credentials::Admin,
            "PUT",
            &format!("{path}/from-yaml"),
            Some("application/yaml"),
            serde_yaml_ng::to_string(&updated).expect("yaml"),
        )
        .await;
    assert_eq!((r.status, r.json()["data"]["port"].as_str()), (200, Some("9090")));

    let r =
        c.request(Credentials::Admin, "POST", path, Some("application/yaml"), "metadata: [unclosed\n  name: x").await;
    assert_eq!(r.status, 400);
    let status = r.json();
    assert_eq!((status["kind"].as_str(), status["reason"].as_str()), (Some("Status"), Some("BadRequest")));
    assert!(status["message"].as_str().is_some_and(|m| m.starts_with("error converting YAML to JSON")), "{status}");
    let listed = c.request(Credentials::Admin, "GET", path, None, "").await.json();
    assert_eq!(listed["items"].as_array().map(Vec::len), Some(1), "a bad body writes nothing");
    // Watches have no YAML form.
    let w = c
        .request_with_accept(Credentials::Admin, &format!("{path}?watch=true&timeoutSeconds=1"), "application/yaml")
        .await;
    assert_eq!(w.status, 406);
}
