//! Object lifecycle through kubectl and raw HTTPS: the status and scale subresources with
//! generation, finalizers and deletionTimestamp, propagation policies, graceful pod deletion,
//! `kubectl wait --for=delete`, and namespace admission (missing or terminating namespaces).
//!
//! kubectl's delete options (`--wait=false`, `--grace-period`, `--force`), `wait --for=delete`,
//! `replace` and its refusals are checked through kubectl; objects are created and read by the
//! in-process client.

use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::{in_memory, wait_for, Backend, Cluster, Credentials};
use crate::kinds::{deployment, replace};

in_memory!(
    status_and_scale_subresources,
    finalizers_hold_deletion_until_removed,
    propagation_policy_and_graceful_pods,
    namespaces_refuse_content_when_missing_or_terminating,
);

const JSON: Option<&str> = Some("application/json");

async fn put(c: &Cluster, path: &str, body: &Value) -> crate::harness::RawResponse {
    c.request(Credentials::Admin, "PUT", path, JSON, body.to_string()).await
}

async fn status_and_scale_subresources(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    c.must_post(&deployment("web")).await;
    let path = "/apis/apps/v1/namespaces/default/deployments/web";

    // A main-resource update ignores status; a spec change bumps the generation.
    let mut d = c.request(Credentials::Admin, "GET", path, None, "").await.json();
    d["status"] = json!({"replicas": 7});
    d["metadata"]["labels"]["tier"] = "front".into();
    let r = put(&c, path, &d).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let after = r.json();
    assert_eq!(after["status"], json!({}));
    assert_eq!(after["metadata"]["generation"], 1, "a metadata change keeps the generation");

    // /status writes only status.
    let mut s = after.clone();
    s["status"] = json!({"replicas": 2, "observedGeneration": 1});
    s["spec"]["replicas"] = 9.into();
    let r = put(&c, &format!("{path}/status"), &s).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let body = r.json();
    assert_eq!(body["status"]["replicas"], 2);
    assert_eq!(body["spec"]["replicas"], 1);
    assert_eq!(body["metadata"]["generation"], 1);
    let got = c.request(Credentials::Admin, "GET", &format!("{path}/status"), None, "").await.json();
    assert_eq!(got["status"]["replicas"], 2);

    // /scale reads and writes spec.replicas through an autoscaling/v1 Scale.
    let scale = c.request(Credentials::Admin, "GET", &format!("{path}/scale"), None, "").await.json();
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["apiVersion"], "autoscaling/v1");
    assert_eq!(scale["spec"], json!({"replicas": 1}));
    assert_eq!(scale["status"], json!({"replicas": 2, "selector": "app=web"}));
    let mut want = scale.clone();
    want["spec"]["replicas"] = 3.into();
    let r = put(&c, &format!("{path}/scale"), &want).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["spec"]["replicas"], 3);
    let d = c.must_get("/apis/apps/v1/namespaces/default/deployments/web").await;
    assert_eq!((&d["spec"]["replicas"], &d["metadata"]["generation"]), (&json!(3), &json!(2)));
    // The Scale's resourceVersion is a precondition.
    let stale = put(&c, &format!("{path}/scale"), &want).await;
    assert_eq!(stale.status, 409, "{}", String::from_utf8_lossy(&stale.body));
    want["metadata"].as_object_mut().expect("meta").remove("resourceVersion");
    want["spec"]["replicas"] = (-1).into();
    let negative = put(&c, &format!("{path}/scale"), &want).await;
    assert_eq!(negative.status, 422);
    assert_eq!(
        negative.json()["message"],
        r#"Scale.autoscaling "web" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"#
    );
    // Kinds without the subresource answer 404.
    let none = c.request(Credentials::Admin, "GET", "/api/v1/namespaces/default/configmaps/x/scale", None, "").await;
    assert_eq!(none.status, 404);
}

async fn finalizers_hold_deletion_until_removed(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "held", "finalizers": ["example.com/hold"]}, "data": {"a": "1"}});
    c.must_post(&cm).await;
    let out = c.must_kubectl(&["delete", "cm", "held", "--wait=false"]).await;
    assert_eq!(out.trim(), r#"configmap "held" deleted"#);
    let held = c.must_get("/api/v1/namespaces/default/configmaps/held").await;
    assert!(held["metadata"]["deletionTimestamp"].is_string(), "{held}");
    assert_eq!(held["metadata"]["deletionGracePeriodSeconds"], 0);

    // No new finalizers on a deleting object.
    let mut more = held.clone();
    more["metadata"]["finalizers"] = json!(["example.com/hold", "example.com/more"]);
    let refused = replace(&c, &more).await;
    assert!(
        refused.stderr.contains("no new finalizers can be added if the object is being deleted"),
        "{}",
        refused.stderr
    );

    // kubectl wait sees the deletion that removing the last finalizer causes.
    let mut waiter = c.spawn_kubectl(&["wait", "--for=delete", "cm/held", "--timeout=30s"]);
    let mut released = held.clone();
    released["metadata"]["finalizers"] = json!([]);
    let r = replace(&c, &released).await;
    assert!(r.ok, "{}", r.stderr);
    let status =
        tokio::time::timeout(Duration::from_secs(40), waiter.wait()).await.expect("kubectl wait ends").expect("wait");
    assert!(status.success());
    let gone = c.kubectl(&["get", "cm", "held"]).await;
    assert!(gone.stderr.contains(r#"configmaps "held" not found"#), "{}", gone.stderr);
}

async fn propagation_policy_and_graceful_pods(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    c.must_post(&deployment("fg")).await;
    let path = "/apis/apps/v1/namespaces/default/deployments/fg";
    let r = c
        .request(Credentials::Admin, "DELETE", path, JSON, json!({"propagationPolicy": "Foreground"}).to_string())
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let answer = r.json();
    assert_eq!(answer["kind"], "Deployment");
    assert_eq!(answer["metadata"]["finalizers"], json!(["foregroundDeletion"]));
    assert!(answer["metadata"]["deletionTimestamp"].is_string());
    // With no dependents (and no garbage collector), the object then goes.
    assert_eq!(c.request(Credentials::Admin, "GET", path, None, "").await.status, 404);
    let bad =
        c.request(Credentials::Admin, "DELETE", path, JSON, json!({"propagationPolicy": "Sideways"}).to_string()).await;
    assert_eq!(bad.status, 422);

    // An unscheduled pod is deleted at once; one bound to a node waits out its grace period.
    let pod = |name: &str, node: Option<&str>| {
        let mut p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}});
        if let Some(n) = node {
            p["spec"]["nodeName"] = n.into();
        }
        p
    };
    c.must_post(&pod("pending", None)).await;
    let p = c.must_get("/api/v1/namespaces/default/pods/pending").await;
    assert_eq!(p["status"]["phase"], "Pending");
    assert_eq!(p["spec"]["containers"][0]["imagePullPolicy"], "IfNotPresent");
    assert_eq!(c.must_kubectl(&["delete", "pod", "pending"]).await.trim(), r#"pod "pending" deleted"#);
    c.must_post(&pod("bound", None)).await;
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "bound"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}});
    let bind_path = "/api/v1/namespaces/default/pods/bound/binding";
    let r = c.request(Credentials::Admin, "POST", bind_path, JSON, binding.to_string()).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let again = c.request(Credentials::Admin, "POST", bind_path, JSON, binding.to_string()).await;
    assert_eq!(again.status, 409);
    assert_eq!(
        again.json()["message"],
        r#"Operation cannot be fulfilled on pods "bound": pod bound is already assigned to node "node-1""#
    );
    let p = c.must_get("/api/v1/namespaces/default/pods/bound").await;
    assert_eq!((&p["spec"]["nodeName"], &p["metadata"]["generation"]), (&json!("node-1"), &json!(2)));
    c.must_kubectl(&["delete", "pod", "bound", "--wait=false"]).await;
    let p = c.must_get("/api/v1/namespaces/default/pods/bound").await;
    assert_eq!(p["metadata"]["deletionGracePeriodSeconds"], 30);
    assert_eq!(p["metadata"]["generation"], 3);
    c.must_post(&pod("placed", Some("node-2"))).await;
    c.must_kubectl(&["delete", "pod", "placed", "--grace-period=5", "--wait=false"]).await;
    let p = c.must_get("/api/v1/namespaces/default/pods/placed").await;
    assert_eq!(p["metadata"]["deletionGracePeriodSeconds"], 5);
    c.must_kubectl(&["delete", "pod", "bound", "--grace-period=0", "--force"]).await;
    let gone = c.kubectl(&["get", "pod", "bound"]).await;
    assert!(gone.stderr.contains(r#"pods "bound" not found"#), "{}", gone.stderr);
}

async fn namespaces_refuse_content_when_missing_or_terminating(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let lease = |ns: &str| json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l", "namespace": ns}});
    let file = c.dir.path().join("lease.json");
    std::fs::write(&file, lease("nope").to_string()).expect("write");
    let out = c.kubectl(&["create", "--validate=false", "-f", file.to_str().expect("path")]).await;
    assert!(
        out.stderr.starts_with("Error from server (NotFound)") && out.stderr.contains(r#"namespaces "nope" not found"#),
        "{}",
        out.stderr
    );

    c.create_namespace("going").await;
    // spec.finalizers change only through /finalize.
    let mut ns = c.must_get("/api/v1/namespaces/going").await;
    ns["spec"]["finalizers"] = json!([]);
    let main = put(&c, "/api/v1/namespaces/going", &ns).await;
    assert_eq!(main.json()["spec"]["finalizers"], json!(["kubernetes"]));
    ns["metadata"].as_object_mut().expect("meta").remove("resourceVersion");
    let fin = put(&c, "/api/v1/namespaces/going/finalize", &ns).await;
    assert_eq!(fin.status, 200, "{}", String::from_utf8_lossy(&fin.body));
    assert_eq!(fin.json()["spec"]["finalizers"], json!([]));
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "held", "namespace": "going", "finalizers": ["example.com/hold"]}});
    c.must_post(&cm).await;
    c.must_kubectl(&["delete", "ns", "going", "--wait=false"]).await;
    let ns = c.must_get("/api/v1/namespaces/going").await;
    assert_eq!(ns["status"]["phase"], "Terminating");
    // Status writes to a terminating namespace keep it (its contents are not gone yet).
    let mut status = ns.clone();
    status["status"]["conditions"] = json!([{"type": "NamespaceContentRemaining", "status": "True"}]);
    let r = put(&c, "/api/v1/namespaces/going/status", &status).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(c.must_get("/api/v1/namespaces/going").await["status"]["phase"], "Terminating");
    std::fs::write(&file, lease("going").to_string()).expect("write");
    let out = c.kubectl(&["create", "--validate=false", "-f", file.to_str().expect("path")]).await;
    assert!(
        out.stderr.contains("unable to create new content in namespace going because it is being terminated"),
        "{}",
        out.stderr
    );
    // Releasing the last object finishes the namespace.
    let mut held = c.must_get("/api/v1/namespaces/going/configmaps/held").await;
    held["metadata"]["finalizers"] = json!([]);
    let r = replace(&c, &held).await;
    assert!(r.ok, "{}", r.stderr);
    let gone = wait_for(Duration::from_secs(10), async || {
        c.request(Credentials::Admin, "GET", "/api/v1/namespaces/going", None, "").await.status == 404
    })
    .await;
    assert!(gone, "namespace still there");
}
