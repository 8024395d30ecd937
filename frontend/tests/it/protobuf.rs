//! kubectl's typed `create` commands, which send protobuf bodies, for kinds across the built-in
//! groups; each object is read back as JSON (in-process) to check the fields came through.

use serde_json::{json, Value};

use crate::harness::{in_memory, Backend, Cluster, Credentials};

in_memory!(
    typed_creates_decode_protobuf_bodies,
    malformed_protobuf_is_refused,
    unset_zeros_are_stored_as_kube_stores_them,
    empty_strings_kube_prints_are_kept
);

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

/// `kubectl create deployment` sends every non-pointer field of the Go object, so `paused:
/// false`, `minReadySeconds: 0`, `hostNetwork: false` and a container's `stdin: false` are on
/// the wire. Kube stores the Go object, whose JSON leaves those zeros out, and the creator's
/// managedFields own only what that JSON holds: defaults (`progressDeadlineSeconds: 600`) and
/// the pointer `replicas`, never `f:paused`.
async fn unset_zeros_are_stored_as_kube_stores_them(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    c.must_kubectl(&["create", "deployment", "x", "--image=nginx"]).await;
    let out = c.must_kubectl(&["get", "deployment", "x", "-o", "json", "--show-managed-fields"]).await;
    let d: Value = serde_json::from_str(&out).expect("kubectl prints JSON");
    let spec = &d["spec"];
    for absent in ["paused", "minReadySeconds"] {
        assert!(spec.get(absent).is_none(), "{absent} is unset: {spec}");
    }
    assert_eq!((spec["replicas"].clone(), spec["progressDeadlineSeconds"].clone()), (json!(1), json!(600)));
    assert_eq!(spec["revisionHistoryLimit"], 10);
    let pod = &spec["template"]["spec"];
    for absent in ["hostNetwork", "hostPID", "hostIPC"] {
        assert!(pod.get(absent).is_none(), "{absent} is unset: {pod}");
    }
    let container = pod["containers"][0].as_object().expect("a container");
    for absent in ["stdin", "stdinOnce", "tty"] {
        assert!(!container.contains_key(absent), "{absent} is unset: {container:?}");
    }

    let managed = d["metadata"]["managedFields"].as_array().expect("managedFields");
    let create = managed.iter().find(|e| e["manager"] == "kubectl-create").expect("kubectl-create's entry");
    let fields = &create["fieldsV1"]["f:spec"];
    assert!(fields.get("f:paused").is_none() && fields.get("f:minReadySeconds").is_none(), "{fields}");
    for owned in ["f:replicas", "f:progressDeadlineSeconds", "f:revisionHistoryLimit", "f:selector"] {
        assert!(fields.get(owned).is_some(), "{owned} is owned: {fields}");
    }
    let pod_fields = &fields["f:template"]["f:spec"];
    assert!(pod_fields.get("f:hostNetwork").is_none(), "{pod_fields}");
    assert_eq!(pod_fields["f:terminationGracePeriodSeconds"], json!({}), "{pod_fields}");
    let container_fields = &pod_fields["f:containers"]["k:{\"name\":\"nginx\"}"];
    assert!(container_fields.get("f:stdin").is_none() && container_fields.get("f:tty").is_none(), "{container_fields}");
    assert_eq!(container_fields["f:image"], json!({}), "{container_fields}");
}

/// A length-delimited protobuf field `number: body` (both short: one-byte key and length).
fn pb_field(number: u8, body: &[u8]) -> Vec<u8> {
    [&[number << 3 | 2, u8::try_from(body.len()).expect("a short field")][..], body].concat()
}

/// A Go client writes every non-pointer string of an Event, empty or not. Kube's JSON of the
/// decoded Event prints the empty ones without `omitempty` (`reportingComponent`,
/// `reportingInstance`) as `""` and leaves out the empty ones with it (`message`, `type`,
/// `action`, the source's `component` and `host`).
async fn empty_strings_kube_prints_are_kept(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let metadata = pb_field(1, &[pb_field(1, b"started"), pb_field(3, b"default")].concat());
    let involved = pb_field(2, &[pb_field(1, b"Pod"), pb_field(2, b"default"), pb_field(3, b"p")].concat());
    let source = pb_field(5, &[pb_field(1, b""), pb_field(2, b"")].concat());
    let strings = [(3, &b"Started"[..]), (4, b""), (9, b""), (12, b""), (14, b""), (15, b"")];
    let raw: Vec<u8> =
        [metadata, involved, source].into_iter().chain(strings.map(|(n, v)| pb_field(n, v))).flatten().collect();
    let type_meta = pb_field(1, &[pb_field(1, b"v1"), pb_field(2, b"Event")].concat());
    let body = [b"k8s\x00".to_vec(), type_meta, pb_field(2, &raw)].concat();
    let path = "/api/v1/namespaces/default/events";
    let r = c.request(Credentials::Admin, "POST", path, Some("application/vnd.kubernetes.protobuf"), body).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let event = c.must_get(&format!("{path}/started")).await;
    assert_eq!((event["reportingComponent"].clone(), event["reportingInstance"].clone()), (json!(""), json!("")));
    assert_eq!(event["reason"], "Started");
    for absent in ["message", "type", "action"] {
        assert!(event.get(absent).is_none(), "{absent} is omitempty: {event}");
    }
    assert_eq!(event["source"], json!({}), "{event}");
}
