//! kubectl's typed `create` commands, which send protobuf bodies, for kinds across the built-in
//! groups; each object is read back as JSON (in-process) to check the fields came through.

use serde_json::{json, Value};

use crate::harness::{in_memory, Backend, Cluster, Credentials};

in_memory!(typed_creates_decode_protobuf_bodies, malformed_protobuf_is_refused);

/// Reads an object back in-process: kubectl's part here is the protobuf create.
async fn get(c: &Cluster, what: &[&str]) -> Value {
    c.must_get(&crate::harness::object_path(what[0], what[1])).await
}

async fn typed_creates_decode_protobuf_bodies(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let created =
        c.must_kubectl(&["create", "deployment", "web", "--image=nginx:1.27", "--replicas=0", "--port=80"]).await;
    assert_eq!(created.trim(), "deployment.apps/web created");
    let d = get(&c, &["deployment", "web"]).await;
    assert_eq!(d["spec"]["replicas"], 0, "an explicit zero is kept: {d}");
    let container = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!((container["name"].clone(), container["image"].clone()), (json!("nginx"), json!("nginx:1.27")));
    assert_eq!(container["ports"][0]["containerPort"], 80);
    assert_eq!(d["spec"]["selector"]["matchLabels"], json!({"app": "web"}));
    // Defaults applied to the decoded object as to a JSON one.
    assert_eq!(d["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");

    c.must_kubectl(&["create", "job", "once", "--image=busybox", "--", "echo", "hi"]).await;
    let job = get(&c, &["job", "once"]).await;
    assert_eq!(job["spec"]["template"]["spec"]["containers"][0]["command"], json!(["echo", "hi"]));
    c.must_kubectl(&["create", "cronjob", "nightly", "--image=busybox", "--schedule=0 3 * * *"]).await;
    assert_eq!(get(&c, &["cronjob", "nightly"]).await["spec"]["schedule"], "0 3 * * *");

    c.must_kubectl(&["create", "role", "reader", "--verb=get,list", "--resource=pods,configmaps"]).await;
    let role = get(&c, &["role", "reader"]).await;
    assert_eq!(role["rules"][0]["verbs"], json!(["get", "list"]));
    c.must_kubectl(&["create", "rolebinding", "reader-bob", "--role=reader", "--user=bob"]).await;
    let rb = get(&c, &["rolebinding", "reader-bob"]).await;
    assert_eq!(rb["roleRef"], json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"}));
    assert_eq!(rb["subjects"][0]["name"], "bob");
    c.must_kubectl(&["create", "clusterrole", "node-reader", "--verb=get", "--resource=nodes"]).await;
    assert_eq!(get(&c, &["clusterrole", "node-reader"]).await["rules"][0]["resources"], json!(["nodes"]));

    c.must_kubectl(&["create", "quota", "small", "--hard=cpu=1,memory=1Gi,pods=4"]).await;
    assert_eq!(get(&c, &["quota", "small"]).await["spec"]["hard"], json!({"cpu": "1", "memory": "1Gi", "pods": "4"}));
    c.must_kubectl(&["create", "priorityclass", "high", "--value=1000", "--description=urgent"]).await;
    let pc = get(&c, &["priorityclass", "high"]).await;
    assert_eq!((pc["value"].clone(), pc["description"].clone()), (json!(1000), json!("urgent")));
    c.must_kubectl(&["create", "serviceaccount", "robot"]).await;
    get(&c, &["serviceaccount", "robot"]).await;
    c.must_kubectl(&["create", "poddisruptionbudget", "web-pdb", "--selector=app=web", "--min-available=50%"]).await;
    assert_eq!(get(&c, &["pdb", "web-pdb"]).await["spec"]["minAvailable"], "50%");
    c.must_kubectl(&["create", "ingress", "site", "--rule=example.com/=web:80"]).await;
    let ing = get(&c, &["ingress", "site"]).await;
    assert_eq!(ing["spec"]["rules"][0]["host"], "example.com");
    assert_eq!(
        ing["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"],
        json!({"name": "web", "port": {"number": 80}})
    );
}

async fn malformed_protobuf_is_refused(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let path = "/apis/apps/v1/namespaces/default/deployments";
    let pb = "application/vnd.kubernetes.protobuf";
    // No magic prefix, then a truncated field inside the envelope.
    for body in [&b"\x0a\x05hello"[..], &b"k8s\x00\x12\x09\x0a\x07trunc"[..]] {
        let r = c.request(Credentials::Admin, "POST", path, Some(pb), body.to_vec()).await;
        assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.json()["reason"], "BadRequest");
    }
    let list = c.request(Credentials::Admin, "GET", path, None, Vec::new()).await;
    assert_eq!(list.json()["items"], json!([]), "nothing was written");
}
