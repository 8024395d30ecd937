//! kubectl against the frontend: the commands a person types first.

use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncBufReadExt;

use crate::harness::{in_memory, wait_for, Backend, Cluster};

in_memory!(
    namespaces_get_create_delete,
    configmap_and_secret_lifecycle,
    get_watch_sees_writes_from_another_client,
    discovery_commands,
);

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

async fn namespaces_get_create_delete(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let out = c.must_kubectl(&["get", "ns"]).await;
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(out.contains(ns), "{ns} missing from:\n{out}");
    }
    assert_eq!(c.must_kubectl(&["create", "ns", "team-a"]).await.trim(), "namespace/team-a created");
    let ns = json(&c.must_kubectl(&["get", "ns", "team-a", "-o", "json"]).await);
    assert_eq!(ns["status"]["phase"], "Active");
    assert_eq!(ns["spec"]["finalizers"][0], "kubernetes");
    assert_eq!(ns["metadata"]["labels"]["kubernetes.io/metadata.name"], "team-a");
    let again = c.kubectl(&["create", "ns", "team-a"]).await;
    assert!(!again.ok);
    assert!(
        again.stderr.contains(r#"Error from server (AlreadyExists): namespaces "team-a" already exists"#),
        "{}",
        again.stderr
    );
    c.must_kubectl(&["create", "configmap", "inside", "-n", "team-a", "--from-literal=k=v"]).await;
    assert_eq!(c.must_kubectl(&["delete", "ns", "team-a"]).await.trim(), r#"namespace "team-a" deleted"#);
    let gone = c.kubectl(&["get", "ns", "team-a"]).await;
    assert!(gone.stderr.contains(r#"Error from server (NotFound): namespaces "team-a" not found"#), "{}", gone.stderr);
    // The namespace's contents went with it.
    c.must_kubectl(&["create", "ns", "team-a"]).await;
    let cms = json(&c.must_kubectl(&["get", "cm", "-n", "team-a", "-o", "json"]).await);
    assert_eq!(cms["items"], Value::Array(vec![]));
}

async fn configmap_and_secret_lifecycle(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    c.must_kubectl(&["create", "ns", "apps"]).await;
    let created =
        c.must_kubectl(&["create", "configmap", "cm1", "-n", "apps", "--from-literal=a=b", "--from-literal=c=d"]).await;
    assert_eq!(created.trim(), "configmap/cm1 created");
    let cm = json(&c.must_kubectl(&["get", "cm", "cm1", "-n", "apps", "-o", "json"]).await);
    assert_eq!(cm["apiVersion"], "v1");
    assert_eq!(cm["kind"], "ConfigMap");
    assert_eq!(cm["data"], serde_json::json!({"a": "b", "c": "d"}));
    assert_eq!(cm["metadata"]["namespace"], "apps");
    assert_eq!(cm["metadata"]["uid"].as_str().map(str::len), Some(36));
    assert!(cm["metadata"]["creationTimestamp"].as_str().is_some_and(|t| t.ends_with('Z')));
    let rv1: i64 =
        cm["metadata"]["resourceVersion"].as_str().and_then(|r| r.parse().ok()).expect("numeric resourceVersion");

    // replace (PUT) with the resourceVersion kubectl read.
    let mut edited = cm.clone();
    edited["data"]["a"] = "changed".into();
    let file = c.dir.path().join("cm1.json");
    std::fs::write(&file, edited.to_string()).expect("write manifest");
    // Client-side validation needs OpenAPI documents, which are not served yet.
    let replaced = c.must_kubectl(&["replace", "--validate=false", "-f", file.to_str().expect("utf-8 path")]).await;
    assert_eq!(replaced.trim(), "configmap/cm1 replaced");
    let cm2 = json(&c.must_kubectl(&["get", "cm", "cm1", "-n", "apps", "-o", "json"]).await);
    assert_eq!(cm2["data"]["a"], "changed");
    assert_eq!(cm2["metadata"]["uid"], cm["metadata"]["uid"]);
    let rv2: i64 = cm2["metadata"]["resourceVersion"].as_str().and_then(|r| r.parse().ok()).expect("rv");
    assert!(rv2 > rv1, "resourceVersion must grow: {rv1} -> {rv2}");
    // Replacing again with the stale resourceVersion is a conflict.
    let stale = c.kubectl(&["replace", "--validate=false", "-f", file.to_str().expect("utf-8 path")]).await;
    assert!(!stale.ok);
    assert!(
        stale.stderr.contains(r#"Operation cannot be fulfilled on configmaps "cm1": the object has been modified"#),
        "{}",
        stale.stderr
    );

    let s = c.must_kubectl(&["create", "secret", "generic", "s1", "-n", "apps", "--from-literal=user=admin"]).await;
    assert_eq!(s.trim(), "secret/s1 created");
    let secret = json(&c.must_kubectl(&["get", "secret", "s1", "-n", "apps", "-o", "json"]).await);
    assert_eq!(secret["type"], "Opaque");
    assert_eq!(secret["data"]["user"], "YWRtaW4=");

    let listed = c.must_kubectl(&["get", "cm,secrets", "-n", "apps", "-o", "name"]).await;
    assert_eq!(listed.lines().collect::<Vec<_>>(), vec!["configmap/cm1", "secret/s1"]);
    assert_eq!(c.must_kubectl(&["delete", "cm", "cm1", "-n", "apps"]).await.trim(), r#"configmap "cm1" deleted"#);
    assert_eq!(c.must_kubectl(&["delete", "secret", "s1", "-n", "apps"]).await.trim(), r#"secret "s1" deleted"#);
    let gone = c.kubectl(&["get", "cm", "cm1", "-n", "apps"]).await;
    assert!(gone.stderr.contains(r#"configmaps "cm1" not found"#), "{}", gone.stderr);
    // Creating in a namespace that does not exist is refused with the namespace's NotFound.
    let missing = c.kubectl(&["create", "configmap", "x", "-n", "nowhere", "--from-literal=a=b"]).await;
    assert!(missing.stderr.contains(r#"namespaces "nowhere" not found"#), "{}", missing.stderr);
}

async fn get_watch_sees_writes_from_another_client(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    c.create_namespace("w").await;
    c.must_post(&serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": "before", "namespace": "w"}, "data": {"a": "1"}}))
        .await;
    let mut watcher =
        c.spawn_kubectl(&["get", "configmaps", "-n", "w", "--watch", "--output-watch-events", "-o", "json"]);
    let stdout = watcher.stdout.take().expect("piped stdout");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let _ = tx.send(line);
        }
    });
    let mut seen = String::new();
    let mut until = async |needle: &str| {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while !seen.contains(needle) {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(line)) => seen.push_str(&line),
                _ => panic!("watch output never contained {needle:?}; got:\n{seen}"),
            }
        }
    };
    until(r#""name":"before""#).await;
    c.must_kubectl(&["create", "configmap", "during", "-n", "w", "--from-literal=a=2"]).await;
    until(r#""name":"during""#).await;
    c.must_kubectl(&["delete", "configmap", "during", "-n", "w"]).await;
    until(r#""type":"DELETED""#).await;
    watcher.kill().await.expect("stop kubectl");
    let ok = wait_for(Duration::from_secs(5), async || watcher.try_wait().ok().flatten().is_some()).await;
    assert!(ok, "kubectl did not stop");
}

async fn discovery_commands(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let versions = c.must_kubectl(&["api-versions"]).await;
    assert!(versions.lines().any(|l| l == "v1") && versions.lines().any(|l| l == "apps/v1"), "{versions}");
    let resources = c.must_kubectl(&["api-resources"]).await;
    let rows: Vec<Vec<&str>> = resources.lines().skip(1).map(|l| l.split_whitespace().collect()).collect();
    assert!(rows.contains(&vec!["configmaps", "cm", "v1", "true", "ConfigMap"]), "{resources}");
    assert!(rows.contains(&vec!["namespaces", "ns", "v1", "false", "Namespace"]), "{resources}");
    assert!(rows.contains(&vec!["secrets", "v1", "true", "Secret"]), "{resources}");
    let version = c.must_kubectl(&["version", "-o", "json"]).await;
    assert_eq!(json(&version)["serverVersion"]["minor"], "33");
    // The machine's kubectl as a person runs it: where it is gcloud's dispatcher, it reads the
    // server's version and runs the kubectl of that minor, the binary the other tests run.
    let dispatched = c.kubectl_through_dispatcher(&["version", "-o", "json"]).await;
    assert!(dispatched.ok, "{}", dispatched.stderr);
    let dispatched = json(&dispatched.stdout);
    assert_eq!(dispatched["serverVersion"]["minor"], "33");
    assert_eq!(dispatched["clientVersion"], json(&version)["clientVersion"]);
    let namespaces = c.kubectl_through_dispatcher(&["get", "ns", "default", "-o", "name"]).await;
    assert_eq!(namespaces.stdout.trim(), "namespace/default", "{}", namespaces.stderr);
    let health = c.must_kubectl(&["get", "--raw", "/readyz?verbose"]).await;
    assert!(health.contains("[+]etcd ok") && health.contains("readyz check passed"), "{health}");
    assert!(c.kubeconfig_path().ends_with("admin.kubeconfig"));
}
