//! PATCH with kubectl (patch in three forms, label, annotate, scale, client-side apply) and
//! refusals over raw HTTPS, on both backends.

use serde_json::{json, Value};

use crate::harness::{in_memory, Backend, Cluster, Credentials};

in_memory!(kubectl_patch_label_annotate_scale, kubectl_apply_create_then_configure, patch_refusals_write_nothing,);

fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// Reads an object in-process: kubectl's part here is the writes and their output.
async fn get(c: &Cluster, args: &[&str]) -> Value {
    c.must_get(&crate::harness::object_path(args[0], args[1])).await
}

async fn kubectl_patch_label_annotate_scale(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    c.must_kubectl(&["create", "configmap", "cfg", "--from-literal=a=1", "--from-literal=b=2"]).await;
    let out =
        c.must_kubectl(&["patch", "configmap", "cfg", "--type=merge", "-p", r#"{"data":{"a":null,"m":"x"}}"#]).await;
    assert_eq!(out.trim(), "configmap/cfg patched");
    c.must_kubectl(&[
        "patch",
        "configmap",
        "cfg",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/data/b","value":"22"}]"#,
    ])
    .await;
    c.must_kubectl(&["patch", "configmap", "cfg", "--type=strategic", "-p", r#"{"data":{"s":"y"}}"#]).await;
    let cm = get(&c, &["configmap", "cfg"]).await;
    assert_eq!(cm["data"], json!({"b": "22", "m": "x", "s": "y"}));
    // A patch that changes nothing writes nothing.
    let rv = cm["metadata"]["resourceVersion"].clone();
    let same = c.must_kubectl(&["patch", "configmap", "cfg", "--type=merge", "-p", r#"{"data":{"s":"y"}}"#]).await;
    assert_eq!(same.trim(), "configmap/cfg patched (no change)");
    assert_eq!(get(&c, &["configmap", "cfg"]).await["metadata"]["resourceVersion"], rv);
    // A failing JSON patch test is kube's 422.
    let failed = c
        .kubectl(&[
            "patch",
            "configmap",
            "cfg",
            "--type=json",
            "-p",
            r#"[{"op":"test","path":"/data/b","value":"nope"}]"#,
        ])
        .await;
    assert!(!failed.ok);
    assert!(failed.stderr.contains("The request is invalid"), "{}", failed.stderr);
    assert!(failed.stderr.contains("testing value /data/b failed: test failed"), "{}", failed.stderr);

    assert_eq!(c.must_kubectl(&["label", "configmap", "cfg", "tier=web"]).await.trim(), "configmap/cfg labeled");
    let clash = c.kubectl(&["label", "configmap", "cfg", "tier=db"]).await;
    assert!(clash.stderr.contains("'tier' already has a value (web), and --overwrite is false"), "{}", clash.stderr);
    c.must_kubectl(&["label", "configmap", "cfg", "tier=db", "--overwrite"]).await;
    assert_eq!(c.must_kubectl(&["annotate", "configmap", "cfg", "owner=me"]).await.trim(), "configmap/cfg annotated");
    let cm = get(&c, &["configmap", "cfg"]).await;
    assert_eq!(cm["metadata"]["labels"]["tier"], "db");
    assert_eq!(cm["metadata"]["annotations"]["owner"], "me");
    c.must_kubectl(&["label", "configmap", "cfg", "tier-"]).await;
    c.must_kubectl(&["annotate", "configmap", "cfg", "owner-"]).await;
    let cm = get(&c, &["configmap", "cfg"]).await;
    assert!(cm["metadata"]["labels"].get("tier").is_none(), "{cm}");
    assert!(cm["metadata"]["annotations"].get("owner").is_none(), "{cm}");

    // dry-run=server changes nothing.
    let dry = c
        .must_kubectl(&["patch", "configmap", "cfg", "--type=merge", "-p", r#"{"data":{"d":"1"}}"#, "--dry-run=server"])
        .await;
    assert!(dry.starts_with("configmap/cfg patched"), "{dry}");
    assert!(get(&c, &["configmap", "cfg"]).await["data"].get("d").is_none());

    // scale: a merge patch on /scale; status patches go to /status.
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
    });
    let created = c
        .request(
            Credentials::Admin,
            "POST",
            "/apis/apps/v1/namespaces/default/deployments",
            Some("application/json"),
            deployment.to_string(),
        )
        .await;
    assert_eq!(created.status, 201, "{}", String::from_utf8_lossy(&created.body));
    assert_eq!(
        c.must_kubectl(&["scale", "deployment", "web", "--replicas=3"]).await.trim(),
        "deployment.apps/web scaled"
    );
    let web = get(&c, &["deployment", "web"]).await;
    assert_eq!(web["spec"]["replicas"], 3);
    assert_eq!(web["metadata"]["generation"], 2);
    c.must_kubectl(&[
        "patch",
        "deployment",
        "web",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"replicas":3},"spec":{"replicas":9}}"#,
    ])
    .await;
    let web = get(&c, &["deployment", "web"]).await;
    assert_eq!((web["status"]["replicas"].clone(), web["spec"]["replicas"].clone()), (json!(3), json!(3)));
    // A status change through the main resource is dropped, as for updates.
    c.must_kubectl(&["patch", "deployment", "web", "--type=merge", "-p", r#"{"status":{"replicas":7}}"#]).await;
    assert_eq!(get(&c, &["deployment", "web"]).await["status"]["replicas"], 3);
}

const V1: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: applied
  labels: {app: one}
data:
  keep: \"1\"
  drop: \"2\"
";

const V2: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: applied
  labels: {app: one, extra: two}
data:
  keep: \"1\"
  new: \"3\"
";

async fn kubectl_apply_create_then_configure(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let file = c.dir().join("applied.yaml");
    std::fs::write(&file, V1).expect("write manifest");
    let path = file.display().to_string();
    assert_eq!(c.must_kubectl(&["apply", "--validate=false", "-f", &path]).await.trim(), "configmap/applied created");
    // Another writer's key survives the next apply (it was never in a manifest).
    c.must_kubectl(&["patch", "configmap", "applied", "--type=merge", "-p", r#"{"data":{"theirs":"x"}}"#]).await;
    std::fs::write(&file, V2).expect("write manifest");
    assert_eq!(
        c.must_kubectl(&["apply", "--validate=false", "-f", &path]).await.trim(),
        "configmap/applied configured"
    );
    let cm = get(&c, &["configmap", "applied"]).await;
    assert_eq!(cm["data"], json!({"keep": "1", "new": "3", "theirs": "x"}));
    assert_eq!(cm["metadata"]["labels"], json!({"app": "one", "extra": "two"}));
    let last =
        cm["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"].as_str().expect("annotation");
    assert_eq!(json_of(last)["data"], json!({"keep": "1", "new": "3"}));
    assert_eq!(c.must_kubectl(&["apply", "--validate=false", "-f", &path]).await.trim(), "configmap/applied unchanged");
}

async fn patch_refusals_write_nothing(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    c.must_kubectl(&["create", "configmap", "cfg", "--from-literal=a=1"]).await;
    let rv = get(&c, &["configmap", "cfg"]).await["metadata"]["resourceVersion"].clone();
    let path = "/api/v1/namespaces/default/configmaps/cfg";
    let send = |ct: &'static str, body: &'static str| c.request(Credentials::Admin, "PATCH", path, Some(ct), body);

    for (ct, body) in [
        ("application/merge-patch+json", "{not json"),
        ("application/strategic-merge-patch+json", "[1,2]"),
        ("application/json-patch+json", r#"{"op":"add"}"#),
    ] {
        let r = send(ct, body).await;
        assert_eq!(r.status, 400, "{ct} {body}: {}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.json()["reason"], "BadRequest");
    }
    let r = send("application/json-patch+json", r#"[{"op":"remove","path":"/data/missing"}]"#).await;
    assert_eq!(r.status, 422);
    assert_eq!(r.json()["reason"], "Invalid");
    let r = send("application/merge-patch+json", r#"{"metadata":{"resourceVersion":"1"},"data":{"a":"2"}}"#).await;
    assert_eq!(r.status, 409, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["reason"], "Conflict");
    let r = send("application/merge-patch+json", r#"{"metadata":{"name":"other"}}"#).await;
    assert_eq!(r.status, 400);
    let r = send("application/apply-patch+yaml", "data: {a: '3'}").await;
    assert_eq!(r.status, 422, "an apply needs a fieldManager");
    assert_eq!(
        r.json()["message"],
        r#"PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch"#
    );
    let r = send("application/apply-patch+cbor", "data: {a: '3'}").await;
    assert_eq!(r.status, 415);
    assert_eq!(r.json()["reason"], "UnsupportedMediaType");
    let r = c
        .request(Credentials::Admin, "PATCH", path, Some("application/merge-patch+json"), r#"{"dataa":{"x":"1"}}"#)
        .await;
    assert_eq!(r.status, 200, "unknown fields are dropped by default");
    let r = c
        .request(
            Credentials::Admin,
            "PATCH",
            &format!("{path}?fieldValidation=Strict"),
            Some("application/merge-patch+json"),
            r#"{"dataa":{"x":"1"}}"#,
        )
        .await;
    assert_eq!(r.status, 400);
    assert!(
        r.json()["message"].as_str().unwrap_or("").contains(r#"strict decoding error: unknown field "dataa""#),
        "{}",
        r.json()
    );
    let r = c
        .request(
            Credentials::Admin,
            "PATCH",
            "/api/v1/namespaces/default/configmaps/absent",
            Some("application/merge-patch+json"),
            "{}",
        )
        .await;
    assert_eq!(r.status, 404);
    let r = c
        .request(
            Credentials::Token(crate::harness::BOB_TOKEN),
            "PATCH",
            path,
            Some("application/merge-patch+json"),
            "{}",
        )
        .await;
    assert_eq!(r.status, 403);
    // None of the refusals (nor the unknown-field patch, which changed nothing) wrote.
    assert_eq!(get(&c, &["configmap", "cfg"]).await["metadata"]["resourceVersion"], rv);
}
