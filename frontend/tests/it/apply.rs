//! Server-side apply and managedFields with kubectl and raw HTTPS: ownership recorded on every
//! write, apply merging by the kinds' list and map types, conflicts, force, dry runs, diff,
//! status, the move from client-side apply, and refusals that write nothing.

use serde_json::{json, Value};

use crate::harness::{both_backends, in_memory, Backend, Cluster, Credentials, Options};

both_backends!(
    configmap_apply_session,
    two_appliers_share_a_deployment,
    hpa_v1_carries_v2_fields_in_annotations,
    scale_keeps_known_versions_and_lists_updaters_as_kube
);
in_memory!(
    updates_record_managers,
    client_side_then_server_side,
    status_and_scale_apply,
    scale_owns_the_replicas,
    creates_mark_structs_by_their_go_kinds,
    custom_resource_versions_keep_their_managers,
    hpa_versions_keep_their_managers,
    event_versions_keep_their_managers,
    apply_refusals_write_nothing
);

fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// Reads an object in-process, managed fields included (what `kubectl get -o json
/// --show-managed-fields` prints); kubectl's part in these tests is apply, patch and label.
async fn get(c: &Cluster, args: &[&str]) -> Value {
    c.must_get(&crate::harness::object_path(args[0], args[1])).await
}

/// The managedFields entries as (manager, operation, subresource, fieldsV1).
fn managers(obj: &Value) -> Vec<(String, String, String, Value)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|e| {
                    let s = |k: &str| e[k].as_str().unwrap_or("").to_string();
                    (s("manager"), s("operation"), s("subresource"), e["fieldsV1"].clone())
                })
                .collect()
        })
        .unwrap_or_default()
}

fn fields_of(obj: &Value, manager: &str) -> Value {
    managers(obj).into_iter().find(|m| m.0 == manager).map(|m| m.3).unwrap_or(Value::Null)
}

fn write(c: &Cluster, name: &str, text: &str) -> String {
    let file = c.dir().join(name);
    std::fs::write(&file, text).expect("write manifest");
    file.display().to_string()
}

const CM: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  labels: {app: web}\ndata:\n  a: '1'\n  b: '2'\n";

async fn configmap_apply_session(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let path = write(&c, "cm.yaml", CM);
    assert_eq!(
        c.must_kubectl(&["apply", "--server-side", "-f", &path]).await.trim(),
        "configmap/cm serverside-applied"
    );
    let cm = get(&c, &["cm", "cm"]).await;
    assert_eq!(cm["data"], json!({"a": "1", "b": "2"}));
    let entry = &cm["metadata"]["managedFields"][0];
    assert_eq!(entry["manager"], "kubectl");
    assert_eq!(entry["operation"], "Apply");
    assert_eq!(entry["apiVersion"], "v1");
    assert_eq!(entry["fieldsType"], "FieldsV1");
    assert!(entry["time"].as_str().is_some_and(|t| t.len() == 20 && t.ends_with('Z')), "{entry}");
    assert_eq!(entry["fieldsV1"], json!({"f:data": {"f:a": {}, "f:b": {}}, "f:metadata": {"f:labels": {"f:app": {}}}}));
    let rv = cm["metadata"]["resourceVersion"].clone();

    // Another manager changing `a` conflicts, and nothing is written.
    let other = write(&c, "other.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {a: '9'}\n");
    let refused = c.kubectl(&["apply", "--server-side", "--field-manager=other", "-f", &other]).await;
    assert!(!refused.ok);
    assert!(
        refused.stderr.contains(r#"Apply failed with 1 conflict: conflict with "kubectl": .data.a"#),
        "{}",
        refused.stderr
    );
    assert_eq!(get(&c, &["cm", "cm"]).await["metadata"]["resourceVersion"], rv);
    // Setting the same value is shared ownership, not a conflict.
    let same = write(&c, "same.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {b: '2'}\n");
    c.must_kubectl(&["apply", "--server-side", "--field-manager=sharer", "-f", &same]).await;
    let cm = get(&c, &["cm", "cm"]).await;
    assert_eq!(fields_of(&cm, "sharer"), json!({"f:data": {"f:b": {}}}));
    assert_eq!(fields_of(&cm, "kubectl")["f:data"], json!({"f:a": {}, "f:b": {}}));
    // Forced, `a` changes hands.
    let forced =
        c.must_kubectl(&["apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", &other]).await;
    assert_eq!(forced.trim(), "configmap/cm serverside-applied");
    let cm = get(&c, &["cm", "cm"]).await;
    assert_eq!(cm["data"], json!({"a": "9", "b": "2"}));
    assert_eq!(fields_of(&cm, "other"), json!({"f:data": {"f:a": {}}}));
    assert_eq!(fields_of(&cm, "kubectl"), json!({"f:data": {"f:b": {}}, "f:metadata": {"f:labels": {"f:app": {}}}}));

    // kubectl stops sending `b` and the label: the label goes (only kubectl owned it), `b`
    // stays (the sharer owns it too), `a` stays (other's).
    let path = write(&c, "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {c: '3'}\n");
    // A server-side dry run and diff show the change and write nothing.
    let rv = get(&c, &["cm", "cm"]).await["metadata"]["resourceVersion"].clone();
    let dry = c.must_kubectl(&["apply", "--server-side", "--dry-run=server", "-f", &path, "-o", "json"]).await;
    assert_eq!(json_of(&dry)["data"], json!({"a": "9", "b": "2", "c": "3"}));
    let diff = c.kubectl(&["diff", "--server-side", "-f", &path]).await;
    assert!(diff.stdout.contains("+  c: \"3\""), "{}\n{}", diff.stdout, diff.stderr);
    assert_eq!(get(&c, &["cm", "cm"]).await["metadata"]["resourceVersion"], rv);
    c.must_kubectl(&["apply", "--server-side", "-f", &path]).await;
    let cm = get(&c, &["cm", "cm"]).await;
    assert_eq!(cm["data"], json!({"a": "9", "b": "2", "c": "3"}));
    assert_eq!(cm["metadata"].get("labels"), None);
    assert_eq!(fields_of(&cm, "kubectl"), json!({"f:data": {"f:c": {}}}));
    // Re-applying the same configuration writes nothing.
    let rv = cm["metadata"]["resourceVersion"].clone();
    c.must_kubectl(&["apply", "--server-side", "-f", &path]).await;
    assert_eq!(get(&c, &["cm", "cm"]).await["metadata"]["resourceVersion"], rv);
}

const DEPLOY_A: &str = r"apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: a
        image: nginx:1
        ports: [{containerPort: 80}]
        env: [{name: X, value: '1'}]
";

const DEPLOY_B: &str = r"apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  template:
    spec:
      containers:
      - name: b
        image: busybox:1
        args: [sleep, '3600']
";

async fn two_appliers_share_a_deployment(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let a = write(&c, "a.yaml", DEPLOY_A);
    let b = write(&c, "b.yaml", DEPLOY_B);
    c.must_kubectl(&["apply", "--server-side", "--field-manager=team-a", "-f", &a]).await;
    c.must_kubectl(&["apply", "--server-side", "--field-manager=team-b", "-f", &b]).await;
    let d = get(&c, &["deploy", "web"]).await;
    let names: Vec<&str> = d["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .map(|c| c["name"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(names, ["a", "b"]);
    let a_fields = fields_of(&d, "team-a");
    let a_containers = &a_fields["f:spec"]["f:template"]["f:spec"]["f:containers"];
    assert_eq!(
        a_containers[r#"k:{"name":"a"}"#],
        json!({".": {}, "f:env": {r#"k:{"name":"X"}"#: {".": {}, "f:name": {}, "f:value": {}}}, "f:image": {}, "f:name": {},
               "f:ports": {r#"k:{"containerPort":80,"protocol":"TCP"}"#: {".": {}, "f:containerPort": {}}}})
    );
    assert_eq!(a_fields["f:spec"]["f:selector"], json!({}), "a label selector is atomic");
    let b_fields = fields_of(&d, "team-b");
    assert_eq!(
        b_fields,
        json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {r#"k:{"name":"b"}"#: {".": {}, "f:args": {}, "f:image": {}, "f:name": {}}}}}}})
    );
    // team-b asking for replicas team-a set conflicts; team-a changing its image does not.
    let b_replicas = write(&c, "b2.yaml", &DEPLOY_B.replace("spec:\n  template:", "spec:\n  replicas: 5\n  template:"));
    let refused = c.kubectl(&["apply", "--server-side", "--field-manager=team-b", "-f", &b_replicas]).await;
    assert!(
        refused.stderr.contains(r#"Apply failed with 1 conflict: conflict with "team-a": .spec.replicas"#),
        "{}",
        refused.stderr
    );
    let a2 = write(&c, "a2.yaml", &DEPLOY_A.replace("nginx:1", "nginx:2"));
    c.must_kubectl(&["apply", "--server-side", "--field-manager=team-a", "-f", &a2]).await;
    // team-b withdraws its container: it goes, team-a's stays.
    let b3 = write(&c, "b3.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n");
    c.must_kubectl(&["apply", "--server-side", "--field-manager=team-b", "-f", &b3]).await;
    let d = get(&c, &["deploy", "web"]).await;
    let containers = &d["spec"]["template"]["spec"]["containers"];
    assert_eq!(containers.as_array().map(Vec::len), Some(1), "{containers}");
    assert_eq!(containers[0]["image"], "nginx:2");
    assert!(managers(&d).iter().all(|m| m.0 != "team-b"), "{:?}", managers(&d));
}

async fn updates_record_managers(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    c.must_kubectl(&["create", "configmap", "u", "--from-literal=a=1"]).await;
    let cm = get(&c, &["cm", "u"]).await;
    let entries = managers(&cm);
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!((entries[0].0.as_str(), entries[0].1.as_str()), ("kubectl-create", "Update"));
    assert_eq!(entries[0].3, json!({"f:data": {".": {}, "f:a": {}}}));
    assert_eq!(cm["metadata"]["managedFields"][0]["apiVersion"], "v1");
    // A patch by another manager adds its entry; the same manager's next patch merges into it.
    c.must_kubectl(&["patch", "cm", "u", "--type=merge", "-p", r#"{"data":{"b":"2"}}"#]).await;
    c.must_kubectl(&["patch", "cm", "u", "--type=merge", "-p", r#"{"data":{"c":"3"}}"#]).await;
    let cm = get(&c, &["cm", "u"]).await;
    assert_eq!(fields_of(&cm, "kubectl-patch"), json!({"f:data": {"f:b": {}, "f:c": {}}}));
    // A changed value moves to its new writer (the creator keeps the map it created).
    c.must_kubectl(&["patch", "cm", "u", "--type=merge", "-p", r#"{"data":{"a":"9"}}"#]).await;
    let cm = get(&c, &["cm", "u"]).await;
    assert_eq!(fields_of(&cm, "kubectl-create"), json!({"f:data": {}}), "{:?}", managers(&cm));
    assert_eq!(fields_of(&cm, "kubectl-patch"), json!({"f:data": {"f:a": {}, "f:b": {}, "f:c": {}}}));
    // `managedFields: []` clears them; an update then records none.
    c.must_kubectl(&["patch", "cm", "u", "--type=merge", "-p", r#"{"metadata":{"managedFields":[]}}"#]).await;
    assert_eq!(get(&c, &["cm", "u"]).await["metadata"].get("managedFields"), None);
    c.must_kubectl(&["label", "cm", "u", "x=y"]).await;
    assert_eq!(get(&c, &["cm", "u"]).await["metadata"].get("managedFields"), None);
    // Invalid managedFields in a request are ignored (the stored ones stay).
    c.must_kubectl(&["create", "configmap", "v", "--from-literal=a=1"]).await;
    c.must_kubectl(&[
        "patch",
        "cm",
        "v",
        "--type=merge",
        "-p",
        r#"{"metadata":{"managedFields":[{"manager":"x","operation":"Bogus"}]},"data":{"b":"2"}}"#,
    ])
    .await;
    let cm = get(&c, &["cm", "v"]).await;
    let names: Vec<String> = managers(&cm).into_iter().map(|m| m.0).collect();
    assert_eq!(names, ["kubectl-create", "kubectl-patch"]);
    // Without fieldManager the manager is the User-Agent up to its first '/'.
    let r = c
        .request_with_headers(
            Credentials::Admin,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            &[("user-agent", "my-controller/v1.2.3 (linux/amd64) kubernetes/abc")],
            Some("application/json"),
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ua"},"data":{"a":"1"}}"#,
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(managers(&r.json())[0].0, "my-controller");
    let r = c
        .request(
            Credentials::Admin,
            "POST",
            "/api/v1/namespaces/default/configmaps?fieldManager=a%0Ab",
            Some("application/json"),
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bad-manager"}}"#,
        )
        .await;
    assert_eq!(r.status, 422, "{}", String::from_utf8_lossy(&r.body));
    assert!(r.json()["message"]
        .as_str()
        .unwrap_or("")
        .starts_with("CreateOptions.meta.k8s.io \"\" is invalid: fieldManager"));
    // Past ten update managers the oldest merge into ancient-changes. The first patch is
    // kubectl's `--field-manager`; the others send the same request in-process.
    c.must_kubectl(&["patch", "cm", "v", "--type=merge", "--field-manager", "m00", "-p", r#"{"data":{"k0":"v"}}"#])
        .await;
    for i in 1..11 {
        let path = format!("/api/v1/namespaces/default/configmaps/v?fieldManager=m{i:02}");
        let body = format!(r#"{{"data":{{"k{i}":"v"}}}}"#);
        let r = c.request(Credentials::Admin, "PATCH", &path, Some("application/merge-patch+json"), body).await;
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    }
    let cm = get(&c, &["cm", "v"]).await;
    let entries = managers(&cm);
    assert_eq!(entries.len(), 10, "{entries:?}");
    assert!(entries.iter().any(|m| m.0 == "ancient-changes"), "{entries:?}");
}

async fn client_side_then_server_side(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let path = write(&c, "cm.yaml", CM);
    assert_eq!(c.must_kubectl(&["apply", "-f", &path]).await.trim(), "configmap/cm created");
    let cm = get(&c, &["cm", "cm"]).await;
    assert_eq!(managers(&cm)[0].0, "kubectl-client-side-apply");
    c.must_kubectl(&["apply", "-f", &write(&c, "cm.yaml", &CM.replace("b: '2'", "b: '3'"))]).await;
    // kubectl moves ownership to its apply manager, and then owns what it applies.
    let out = c.must_kubectl(&["apply", "--server-side", "-f", &path]).await;
    assert_eq!(out.trim(), "configmap/cm serverside-applied");
    let cm = get(&c, &["cm", "cm"]).await;
    assert_eq!(cm["data"], json!({"a": "1", "b": "3"}));
    let names: Vec<(String, String)> = managers(&cm).into_iter().map(|m| (m.0, m.1)).collect();
    assert!(names.contains(&("kubectl".into(), "Apply".into())), "{names:?}");
    // The next server-side apply that drops `b` removes it: kubectl owns it now.
    let path = write(
        &c,
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, labels: {app: web}}\ndata: {a: '1'}\n",
    );
    c.must_kubectl(&["apply", "--server-side", "-f", &path]).await;
    assert_eq!(get(&c, &["cm", "cm"]).await["data"], json!({"a": "1"}));
}

async fn status_and_scale_apply(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let a = write(&c, "a.yaml", DEPLOY_A);
    c.must_kubectl(&["apply", "--server-side", "-f", &a]).await;
    let status = write(
        &c,
        "status.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nstatus: {observedGeneration: 1, replicas: 2}\n",
    );
    c.must_kubectl(&["apply", "--server-side", "--subresource=status", "--field-manager=ctrl", "-f", &status]).await;
    let d = get(&c, &["deploy", "web"]).await;
    assert_eq!(d["status"]["replicas"], 2);
    let ctrl = managers(&d).into_iter().find(|m| m.0 == "ctrl").expect("ctrl entry");
    assert_eq!((ctrl.1.as_str(), ctrl.2.as_str()), ("Apply", "status"));
    assert_eq!(ctrl.3, json!({"f:status": {"f:observedGeneration": {}, "f:replicas": {}}}));
    // Status applied to the object itself is ignored, as kube resets it.
    c.must_kubectl(&["apply", "--server-side", "--field-manager=other", "-f", &status]).await;
    assert_eq!(fields_of(&get(&c, &["deploy", "web"]).await, "other"), Value::Null);
    // /scale: kubectl scale is an update of the scale subresource.
    c.must_kubectl(&["scale", "deploy", "web", "--replicas=3"]).await;
    let d = get(&c, &["deploy", "web"]).await;
    let scale = managers(&d).into_iter().find(|m| m.2 == "scale").expect("scale entry");
    assert_eq!(scale.3, json!({"f:spec": {"f:replicas": {}}}));
    assert_eq!(fields_of(&d, "kubectl")["f:spec"].get("f:replicas"), None, "replicas moved to the scaler");
    let r = c
        .request(
            Credentials::Admin,
            "PATCH",
            "/apis/apps/v1/namespaces/default/deployments/web/scale?fieldManager=hpa",
            Some("application/apply-patch+yaml"),
            "apiVersion: autoscaling/v1\nkind: Scale\nmetadata: {name: web}\nspec: {replicas: 4}\n",
        )
        .await;
    assert_eq!(r.status, 409, "{}", String::from_utf8_lossy(&r.body));
    let r = c
        .request(
            Credentials::Admin,
            "PATCH",
            "/apis/apps/v1/namespaces/default/deployments/web/scale?fieldManager=hpa&force=true",
            Some("application/apply-patch+yaml"),
            "apiVersion: autoscaling/v1\nkind: Scale\nmetadata: {name: web}\nspec: {replicas: 4}\n",
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["spec"]["replicas"], 4);
}

/// The managers owning `.spec.replicas`, sorted.
fn replicas_owners(obj: &Value) -> Vec<String> {
    let mut out: Vec<String> =
        managers(obj).into_iter().filter(|m| m.3["f:spec"].get("f:replicas").is_some()).map(|m| m.0).collect();
    out.sort();
    out
}

/// Ownership of a Deployment's replicas through `/scale`, in kube's own integration flow:
/// scaling takes the replicas from their appliers, applying a Scale conflicts with (or, forced,
/// takes from) the appliers of the object, a PUT of the Scale owns them, an apply of the same
/// value shares them.
async fn scale_owns_the_replicas(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let object = "/apis/apps/v1/namespaces/default/deployments/test";
    let scale = format!("{object}/scale");
    let send = |method: &'static str, path: String, ty: Option<&'static str>, body: String| {
        let c = &c;
        async move {
            let r = c.request(Credentials::Admin, method, &path, ty, body).await;
            (r.status, r.json())
        }
    };
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "test"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "nginx"}},
            "template": {"metadata": {"labels": {"app": "nginx"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]}}}})
    .to_string();
    let apply = Some("application/apply-patch+yaml");
    let merge = Some("application/merge-patch+json");
    let scale_body = |n: i64| {
        json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {"name": "test", "namespace": "default"}, "spec": {"replicas": n}})
        .to_string()
    };
    let current = || async { get(&c, &["deploy", "test"]).await };
    let (status, _) = send("PATCH", format!("{object}?fieldManager=apply_test"), apply, deployment.clone()).await;
    assert_eq!(status, 201);
    assert_eq!(replicas_owners(&current().await), ["apply_test"]);

    let (status, answer) =
        send("PATCH", format!("{scale}?fieldManager=scale_test"), merge, r#"{"spec":{"replicas":5}}"#.into()).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["kind"], "Scale");
    assert_eq!(answer["metadata"].get("managedFields"), None, "kube's Scales carry no managedFields");
    let d = current().await;
    assert_eq!(d["spec"]["replicas"], 5);
    assert_eq!(replicas_owners(&d), ["scale_test"]);
    let entry =
        d["metadata"]["managedFields"].as_array().expect("entries").iter().find(|e| e["manager"] == "scale_test");
    let entry = entry.expect("scale_test entry");
    assert_eq!(
        (&entry["operation"], &entry["apiVersion"], &entry["subresource"], entry.get("time")),
        (&json!("Update"), &json!("apps/v1"), &json!("scale"), None),
        "{entry}"
    );

    let (status, answer) = send("PATCH", format!("{object}?fieldManager=apply_test"), apply, deployment.clone()).await;
    assert_eq!(status, 409, "{answer}");
    assert_eq!(
        answer["message"],
        r#"Apply failed with 1 conflict: conflict with "scale_test" with subresource "scale" using apps/v1: .spec.replicas"#
    );
    let (status, _) =
        send("PATCH", format!("{object}?fieldManager=apply_test&force=true"), apply, deployment.clone()).await;
    assert_eq!(status, 200);
    let d = current().await;
    assert_eq!((d["spec"]["replicas"].clone(), replicas_owners(&d)), (json!(1), vec!["apply_test".to_string()]));

    // Applying a Scale meets the object's appliers at the Scale's own path.
    let (status, answer) = send("PATCH", format!("{scale}?fieldManager=apply_scale"), apply, scale_body(17)).await;
    assert_eq!(status, 409, "{answer}");
    assert_eq!(answer["message"], r#"Apply failed with 1 conflict: conflict with "apply_test": .spec.replicas"#);
    assert_eq!(
        answer["details"]["causes"],
        json!([{"reason": "FieldManagerConflict", "message": "conflict with \"apply_test\"", "field": ".spec.replicas"}])
    );
    let (status, answer) =
        send("PATCH", format!("{scale}?fieldManager=apply_scale&force=true"), apply, scale_body(17)).await;
    assert_eq!((status, &answer["spec"]["replicas"]), (200, &json!(17)), "{answer}");
    let d = current().await;
    assert_eq!(replicas_owners(&d), ["apply_scale"]);
    assert!(fields_of(&d, "apply_test")["f:spec"]["f:template"].is_object(), "the applier keeps the rest");

    let (status, answer) = send("PUT", format!("{scale}?fieldManager=replace_test"), None, scale_body(7)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(replicas_owners(&current().await), ["replace_test"]);
    let (status, _) = send("PATCH", format!("{scale}?fieldManager=co_owning_test"), apply, scale_body(7)).await;
    assert_eq!(status, 200);
    assert_eq!(replicas_owners(&current().await), ["co_owning_test", "replace_test"]);
    // An update manager of the Scale is named at the Scale's version.
    let (status, answer) = send("PATCH", format!("{scale}?fieldManager=hpa"), apply, scale_body(2)).await;
    assert_eq!(status, 409, "{answer}");
    assert_eq!(
        answer["message"],
        "Apply failed with 2 conflicts: conflicts with \"co_owning_test\" with subresource \"scale\":\n- .spec.replicas\n\
         conflicts with \"replace_test\" with subresource \"scale\" using autoscaling/v1:\n- .spec.replicas"
    );

    let (status, _) =
        send("PATCH", format!("{scale}?fieldManager=scale_test"), merge, r#"{"spec":{"replicas":5}}"#.into()).await;
    assert_eq!(status, 200);
    assert_eq!(replicas_owners(&current().await), ["scale_test"]);
    // A Scale write that leaves the replicas alone moves nothing.
    let (status, _) =
        send("PATCH", format!("{scale}?fieldManager=status_test"), merge, r#"{"status":{"replicas":42}}"#.into()).await;
    assert_eq!(status, 200);
    let d = current().await;
    assert_eq!((d["spec"]["replicas"].clone(), replicas_owners(&d)), (json!(5), vec!["scale_test".to_string()]));
    let (_, answer) = send("GET", scale.clone(), None, String::new()).await;
    assert_eq!(answer["metadata"].get("managedFields"), None);
}

/// Gadgets served as v1 (stored) and v2, conversion `None`, both with `/scale` and one schema.
fn gadgets() -> String {
    let version = |name: &str, storage: bool| {
        format!(
            "  - name: {name}\n    served: true\n    storage: {storage}\n    subresources: {{scale: \
             {{specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}}}}\n    schema:\n      \
             openAPIV3Schema: {{type: object, properties: {{spec: {{type: object, properties: \
             {{color: {{type: string}}, size: {{type: string}}, replicas: {{type: integer}}}}}}}}}}\n"
        )
    };
    format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: gadgets.example.com}}\n\
         spec:\n  group: example.com\n  scope: Namespaced\n  names: {{plural: gadgets, singular: gadget, kind: Gadget}}\n\
         \x20 versions:\n{}{}",
        version("v1", true),
        version("v2", false)
    )
}

/// managedFields of a custom resource written through two versions: each entry keeps the
/// apiVersion it was written in whichever version reads it, and conflicts are found across
/// versions (the versions' fields are the same, conversion `None` changes only apiVersion).
async fn custom_resource_versions_keep_their_managers(backend: Backend) {
    let c = Cluster::start_with(Options { backend: Some(backend), crds: true, ..Options::default() }).await;
    c.must_kubectl(&["apply", "--server-side", "-f", &write(&c, "gadgets.yaml", &gadgets())]).await;
    c.must_kubectl(&["wait", "--for", "condition=established", "--timeout=30s", "crd/gadgets.example.com"]).await;
    let at = |v: &str| format!("/apis/example.com/{v}/namespaces/default/gadgets/g");
    let apply = Some("application/apply-patch+yaml");
    let send = |method: &'static str, path: String, ty: Option<&'static str>, body: String| {
        let c = &c;
        async move {
            let r = c.request(Credentials::Admin, method, &path, ty, body).await;
            (r.status, r.json())
        }
    };
    let gadget = |v: &str, spec: Value| {
        json!({"apiVersion": format!("example.com/{v}"), "kind": "Gadget", "metadata": {"name": "g"}, "spec": spec})
            .to_string()
    };
    let (status, answer) = send(
        "PATCH",
        format!("{}?fieldManager=a", at("v2")),
        apply,
        gadget("v2", json!({"color": "red", "replicas": 1})),
    )
    .await;
    assert_eq!(status, 201, "{answer}");
    let (status, answer) = send(
        "PATCH",
        format!("{}?fieldManager=u", at("v1")),
        Some("application/merge-patch+json"),
        r#"{"spec":{"size":"2m"}}"#.into(),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let versions = |obj: &Value| -> Vec<(String, String)> {
        obj["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| (e["manager"].as_str().unwrap_or("").into(), e["apiVersion"].as_str().unwrap_or("").into()))
            .collect()
    };
    let expected = vec![("a".to_string(), "example.com/v2".to_string()), ("u".into(), "example.com/v1".into())];
    for v in ["v1", "v2"] {
        let (_, obj) = send("GET", at(v), None, String::new()).await;
        assert_eq!(obj["apiVersion"], format!("example.com/{v}"));
        assert_eq!(versions(&obj), expected, "read through {v}");
        assert_eq!(fields_of(&obj, "a"), json!({"f:spec": {"f:color": {}, "f:replicas": {}}}));
    }
    // A v1 applier meets the v2 applier's fields.
    let (status, answer) =
        send("PATCH", format!("{}?fieldManager=b", at("v1")), apply, gadget("v1", json!({"color": "blue"}))).await;
    assert_eq!(status, 409, "{answer}");
    assert_eq!(answer["message"], r#"Apply failed with 1 conflict: conflict with "a": .spec.color"#);
    // An update through v2 takes the v1 updater's field.
    let (status, _) = send(
        "PATCH",
        format!("{}?fieldManager=w", at("v2")),
        Some("application/merge-patch+json"),
        r#"{"spec":{"size":"3m"}}"#.into(),
    )
    .await;
    assert_eq!(status, 200);
    let (_, obj) = send("GET", at("v1"), None, String::new()).await;
    assert_eq!(fields_of(&obj, "u"), Value::Null, "u lost its only field");
    assert_eq!(fields_of(&obj, "w"), json!({"f:spec": {"f:size": {}}}));
    // The applier moving to v1 keeps one entry, now at v1; its replicas move through v1's Scale.
    let (status, _) = send(
        "PATCH",
        format!("{}?fieldManager=a", at("v1")),
        apply,
        gadget("v1", json!({"color": "red", "replicas": 1})),
    )
    .await;
    assert_eq!(status, 200);
    let (status, answer) = send(
        "PATCH",
        format!("{}/scale?fieldManager=hpa", at("v2")),
        Some("application/merge-patch+json"),
        r#"{"spec":{"replicas":4}}"#.into(),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let (_, obj) = send("GET", at("v2"), None, String::new()).await;
    assert_eq!(obj["spec"]["replicas"], 4);
    assert_eq!(
        versions(&obj),
        vec![
            ("a".to_string(), "example.com/v1".to_string()),
            ("hpa".into(), "example.com/v2".into()),
            ("w".into(), "example.com/v2".into())
        ]
    );
    assert_eq!(fields_of(&obj, "a"), json!({"f:spec": {"f:color": {}}}));
}

async fn apply_refusals_write_nothing(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    c.must_kubectl(&["apply", "--server-side", "-f", &write(&c, "cm.yaml", CM)]).await;
    let rv = get(&c, &["cm", "cm"]).await["metadata"]["resourceVersion"].clone();
    let path = "/api/v1/namespaces/default/configmaps/cm";
    let cases: Vec<(&str, String, u16, &str)> = vec![
        ("?fieldManager=m", "[1, 2]".into(), 400, "error decoding YAML"),
        ("?fieldManager=m", "{not: yaml: at all".into(), 400, "error decoding YAML"),
        ("?fieldManager=m", "metadata: {name: cm}\ndata: {a: x}\n".into(), 400, "invalid object type: /, Kind="),
        (
            "?fieldManager=m",
            "apiVersion: v1\nkind: Secret\nmetadata: {name: cm}\n".into(),
            400,
            "invalid object type: /v1, Kind=Secret",
        ),
        (
            "?fieldManager=m",
            "apiVersion: v2\nkind: ConfigMap\nmetadata: {name: cm}\n".into(),
            400,
            "Incorrect version specified in apply patch. Specified patch version: v2, expected: v1",
        ),
        (
            "?fieldManager=m",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\n".into(),
            400,
            "the name of the object (other) does not match the name on the URL (cm)",
        ),
        (
            "?fieldManager=m",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, managedFields: [{manager: x}]}\n".into(),
            400,
            "metadata.managedFields must be nil",
        ),
        (
            "?fieldManager=m",
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm}}\ndata: {}\n", "[".repeat(5000)),
            400,
            "error decoding YAML",
        ),
        (
            "?fieldManager=m",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {a: '7'}\n".into(),
            409,
            "Apply failed with 1 conflict: conflict with \"kubectl\": .data.a",
        ),
        (
            "?fieldManager=m&dryRun=All&force=true",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {a: '7'}\n".into(),
            200,
            "",
        ),
        (
            "?fieldManager=m&fieldValidation=Strict",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndatum: {a: '7'}\n".into(),
            400,
            "unknown field \"datum\"",
        ),
        (
            "?fieldManager=m&dryRun=Bogus",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n".into(),
            400,
            "dryRun",
        ),
    ];
    for (query, body, status, message) in cases {
        let full = format!("{path}{query}");
        let r = c.request(Credentials::Admin, "PATCH", &full, Some("application/apply-patch+yaml"), body.clone()).await;
        assert_eq!(r.status, status, "{query} {}: {}", &body[..body.len().min(80)], String::from_utf8_lossy(&r.body));
        if status != 200 {
            let got = r.json()["message"].as_str().unwrap_or("").to_string();
            assert!(got.contains(message), "{query}: {got}");
        }
        if status == 409 {
            assert_eq!(
                r.json()["details"]["causes"],
                json!([{"reason": "FieldManagerConflict", "message": "conflict with \"kubectl\"", "field": ".data.a"}])
            );
        }
    }
    // CBOR apply bodies are behind kube's CBOR feature gate, off by default: the answer is its
    // 415 for any unknown patch type.
    let r = c
        .request(
            Credentials::Admin,
            "PATCH",
            &format!("{path}?fieldManager=m"),
            Some("application/apply-patch+cbor"),
            b"\xa0".to_vec(),
        )
        .await;
    assert_eq!(r.status, 415);
    assert_eq!(
        r.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "the body of the request was in an unknown format - accepted media types include: \
                application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, \
                application/apply-patch+yaml",
            "reason": "UnsupportedMediaType", "code": 415})
    );
    let r = c
        .request(Credentials::Admin, "PATCH", &format!("{path}?force=true"), Some("application/merge-patch+json"), "{}")
        .await;
    assert_eq!(r.status, 422);
    assert_eq!(
        r.json()["message"],
        r#"PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch"#
    );
    assert_eq!(get(&c, &["cm", "cm"]).await["metadata"]["resourceVersion"], rv);
    // An apply creates what is missing (201), on the object only.
    let r = c
        .request(
            Credentials::Admin,
            "PATCH",
            "/api/v1/namespaces/default/configmaps/fresh?fieldManager=m",
            Some("application/apply-patch+yaml"),
            "{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"fresh\"}, \"data\": {\"k\": \"v\"}}",
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(fields_of(&r.json(), "m"), json!({"f:data": {"f:k": {}}}));
    let r = c
        .request(
            Credentials::Admin,
            "PATCH",
            "/apis/apps/v1/namespaces/default/deployments/absent/status?fieldManager=m",
            Some("application/apply-patch+yaml"),
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: absent}\nstatus: {replicas: 1}\n",
        )
        .await;
    assert_eq!(r.status, 404);
}

/// The managedFields entries of `obj` as (manager, operation, apiVersion), sorted (their order
/// depends on their times).
fn entry_versions(obj: &Value) -> Vec<(String, String, String)> {
    let list = obj["metadata"]["managedFields"].as_array().cloned().unwrap_or_default();
    let mut out: Vec<_> = list
        .iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or("").to_string();
            (s("manager"), s("operation"), s("apiVersion"))
        })
        .collect();
    out.sort();
    out
}

/// A write to `/scale` keeps the entries of versions kube no longer serves but still knows the
/// replicas of (a Deployment's `apps/v1beta1`), drops those of versions it does not know, and
/// when it leaves the replicas alone lists an updater owning them twice, as kube does.
async fn scale_keeps_known_versions_and_lists_updaters_as_kube(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let mut deployment = crate::kinds::deployment("web");
    deployment["spec"]["replicas"] = 1.into();
    crate::kinds::kubectl_create(&c, &deployment).await;
    let d = get(&c, &["deploy", "web"]).await;
    assert_eq!(d["spec"]["replicas"], 1);
    let creator = fields_of(&d, "kubectl-create");
    assert_eq!(creator["f:spec"]["f:replicas"], json!({}), "{creator}");

    // `kubectl scale` to the replicas the object has changes no field: the creator's update
    // entry loses the replicas to the one it has through the Scale (another identity, by its
    // apiVersion), which comes back without time beside it.
    c.must_kubectl(&["scale", "deployment", "web", "--replicas=1"]).await;
    let d = get(&c, &["deploy", "web"]).await;
    let entries: Vec<&Value> = d["metadata"]["managedFields"].as_array().expect("entries").iter().collect();
    let creators: Vec<&&Value> = entries.iter().filter(|e| e["manager"] == "kubectl-create").collect();
    assert_eq!(creators.len(), 2, "{entries:?}");
    assert_eq!(
        (&creators[0]["operation"], &creators[0]["apiVersion"], creators[0].get("time"), &creators[0]["fieldsV1"]),
        (&json!("Update"), &json!("apps/v1"), None, &json!({"f:spec": {"f:replicas": {}}}))
    );
    let mut rest = creator.clone();
    rest["f:spec"].as_object_mut().expect("spec").remove("f:replicas");
    assert_eq!(creators[1]["fieldsV1"], rest);
    assert!(creators[1]["time"].is_string());
    assert_eq!(entries.len(), 2, "the scaler changed nothing: {entries:?}");

    // Entries at apps/v1beta1 (a version kube knows the replicas of, though it serves it no
    // more) and at extensions/v1beta1 (one it does not), as an older server stored them: a
    // scale write keeps the first, taking its replicas, and drops the second.
    let key = "/registry/deployments/default/web";
    let mut stored: Value = serde_json::from_slice(&c.storage_get(key).await.expect("stored")).expect("JSON");
    let managed = stored["metadata"]["managedFields"].as_array_mut().expect("entries");
    for (manager, version) in [("old", "apps/v1beta1"), ("gone", "extensions/v1beta1")] {
        managed.push(json!({"manager": manager, "operation": "Update", "apiVersion": version,
            "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:replicas": {}, "f:paused": {}}}}));
    }
    c.storage_put(key, stored.to_string().into_bytes()).await;
    c.must_kubectl(&["scale", "deployment", "web", "--replicas=3"]).await;
    let d = get(&c, &["deploy", "web"]).await;
    assert_eq!(d["spec"]["replicas"], 3);
    assert_eq!(fields_of(&d, "old"), json!({"f:spec": {"f:paused": {}}}), "kept, without the replicas");
    assert_eq!(fields_of(&d, "gone"), Value::Null, "dropped");
    let owners = replicas_owners(&d);
    assert!(owners.len() == 1 && owners[0].starts_with("kubectl"), "the scaler alone: {owners:?}");
}

/// `kubectl create` of a ReplicationController (whose template is a pointer in Go) and of a
/// Deployment (whose template is a value): kube's `.` marks the first's template as added by
/// the create, not the second's.
async fn creates_mark_structs_by_their_go_kinds(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let template = json!({"metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}});
    let rc = json!({"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"app": "web"}, "template": template}});
    crate::kinds::kubectl_create(&c, &rc).await;
    crate::kinds::kubectl_create(&c, &crate::kinds::deployment("web")).await;
    let rc = json_of(&c.must_kubectl(&["get", "rc", "web", "-o", "json", "--show-managed-fields"]).await);
    let template = &fields_of(&rc, "kubectl-create")["f:spec"]["f:template"];
    assert_eq!(template["."], json!({}), "{template}");
    assert_eq!(template["f:spec"]["."], json!({}), "{template}");
    assert_eq!(template["f:spec"]["f:containers"]["."], json!({}), "{template}");
    let d = json_of(&c.must_kubectl(&["get", "deploy", "web", "-o", "json", "--show-managed-fields"]).await);
    let template = &fields_of(&d, "kubectl-create")["f:spec"]["f:template"];
    assert_eq!(template.get("."), None, "{template}");
    assert_eq!(template["f:spec"].get("."), None, "{template}");
    assert_eq!(template["f:spec"]["f:containers"].get("."), None, "{template}");
}

/// An HPA written through `autoscaling/v2` and `autoscaling/v1`, whose CPU target is a
/// `metrics` item in one and `targetCPUUtilizationPercentage` in the other: every manager's
/// entry keeps the version it wrote through, and its fields are compared, released and pruned
/// in that version.
async fn hpa_versions_keep_their_managers(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let path = |v: &str| format!("/apis/autoscaling/{v}/namespaces/default/horizontalpodautoscalers/web");
    let send = |method: &'static str, url: String, content_type: &'static str, body: String| {
        let c = &c;
        async move {
            let r = c.request(Credentials::Admin, method, &url, Some(content_type), body).await;
            (r.status, r.json())
        }
    };
    let apply = |v: &'static str, manager: &'static str, spec: &str| {
        let url = format!("{}?fieldManager={manager}", path(v));
        let body = format!(
            "apiVersion: autoscaling/{v}\nkind: HorizontalPodAutoscaler\nmetadata: {{name: web}}\nspec: {spec}\n"
        );
        send("PATCH", url, "application/apply-patch+yaml", body)
    };
    let current = || async { c.must_get(&path("v2")).await };
    const TARGET: &str = "scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}";
    let cpu = |n: u32| {
        format!("[{{type: Resource, resource: {{name: cpu, target: {{type: Utilization, averageUtilization: {n}}}}}}}]")
    };

    // A applies through v2: its entry is at v2, the metrics list one (atomic) field.
    let spec_a = format!("{{{TARGET}, minReplicas: 1, maxReplicas: 5, metrics: {}}}", cpu(50));
    let (status, answer) = apply("v2", "a", &spec_a).await;
    assert_eq!(status, 201, "{answer}");
    let h = current().await;
    assert_eq!(entry_versions(&h), [("a".into(), "Apply".into(), "autoscaling/v2".into())]);
    assert_eq!(
        fields_of(&h, "a"),
        json!({"f:spec": {"f:maxReplicas": {}, "f:metrics": {}, "f:minReplicas": {},
            "f:scaleTargetRef": {"f:apiVersion": {}, "f:kind": {}, "f:name": {}}}})
    );
    let rv = h["metadata"]["resourceVersion"].clone();

    // B changing the CPU target through v1 conflicts with A's metrics, named in A's version.
    let (status, answer) = apply("v1", "b", "{targetCPUUtilizationPercentage: 60}").await;
    assert_eq!(status, 409, "{answer}");
    assert_eq!(answer["message"], r#"Apply failed with 1 conflict: conflict with "a": .spec.metrics"#);
    assert_eq!(answer["details"]["causes"][0]["field"], ".spec.metrics");
    assert_eq!(current().await["metadata"]["resourceVersion"], rv, "nothing written");
    // The same values through v1 are shared: B's entry is at v1, in v1's fields.
    let (status, answer) = apply("v1", "b", "{maxReplicas: 5, targetCPUUtilizationPercentage: 50}").await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["spec"]["targetCPUUtilizationPercentage"], 50);
    let h = current().await;
    assert_eq!(
        entry_versions(&h),
        [("a".into(), "Apply".into(), "autoscaling/v2".into()), ("b".into(), "Apply".into(), "autoscaling/v1".into())]
    );
    assert_eq!(fields_of(&h, "b"), json!({"f:spec": {"f:maxReplicas": {}, "f:targetCPUUtilizationPercentage": {}}}));
    assert_eq!(fields_of(&h, "a")["f:spec"]["f:metrics"], json!({}), "A keeps its metrics");

    // A stops sending the metrics: B still owns the CPU target through v1, so they stay.
    let spec_a2 = format!("{{{TARGET}, minReplicas: 1, maxReplicas: 5}}");
    let (status, answer) = apply("v2", "a", &spec_a2).await;
    assert_eq!(status, 200, "{answer}");
    let h = current().await;
    assert_eq!(
        h["spec"]["metrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu",
        "target": {"type": "Utilization", "averageUtilization": 50}}}])
    );
    assert_eq!(fields_of(&h, "a")["f:spec"].get("f:metrics"), None);

    // B, last applied through v1, now applies through v2 without the CPU target: pruned in
    // v1, where B owned it, the metrics go (and the server's default comes back, nobody's).
    let (status, answer) = apply("v2", "b", "{maxReplicas: 5}").await;
    assert_eq!(status, 200, "{answer}");
    let h = current().await;
    assert_eq!(h["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"], 80, "{h}");
    assert_eq!(
        entry_versions(&h),
        [("a".into(), "Apply".into(), "autoscaling/v2".into()), ("b".into(), "Apply".into(), "autoscaling/v2".into())]
    );
    assert_eq!(fields_of(&h, "b"), json!({"f:spec": {"f:maxReplicas": {}}}));

    // An update through v1 records a v1 entry in v1's fields; an applier setting the metrics
    // through v2 then conflicts with it, named with its version.
    let (status, answer) = send(
        "PATCH",
        format!("{}?fieldManager=c", path("v1")),
        "application/merge-patch+json",
        r#"{"spec":{"targetCPUUtilizationPercentage":70}}"#.into(),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let h = current().await;
    assert!(entry_versions(&h).contains(&("c".into(), "Update".into(), "autoscaling/v1".into())), "{h}");
    assert_eq!(fields_of(&h, "c"), json!({"f:spec": {"f:targetCPUUtilizationPercentage": {}}}));
    let spec_a3 = format!("{{{TARGET}, minReplicas: 1, maxReplicas: 5, metrics: {}}}", cpu(50));
    let (status, answer) = apply("v2", "a", &spec_a3).await;
    assert_eq!(status, 409, "{answer}");
    assert_eq!(
        answer["message"],
        r#"Apply failed with 1 conflict: conflict with "c" using autoscaling/v1: .spec.targetCPUUtilizationPercentage"#
    );
    // An update through v2 changing the metrics takes the target away from C's v1 entry,
    // which, left empty, goes.
    let (status, answer) = send(
        "PATCH",
        format!("{}?fieldManager=d", path("v2")),
        "application/merge-patch+json",
        json!({"spec": {"metrics": [{"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": 90}}}]}})
        .to_string(),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let h = current().await;
    let entries = entry_versions(&h);
    assert!(!entries.iter().any(|e| e.0 == "c"), "{entries:?}");
    assert!(entries.contains(&("d".into(), "Update".into(), "autoscaling/v2".into())), "{entries:?}");
    assert_eq!(fields_of(&h, "d"), json!({"f:spec": {"f:metrics": {}}}));
    // Read through v1, the managers are the same entries, each at its own version.
    let v1 = c.must_get(&path("v1")).await;
    assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 90);
    assert_eq!(entry_versions(&v1), entries);
}

/// An HPA created through `autoscaling/v2` with a metric and a behavior v1 cannot express: read
/// through v1 (by kubectl) they are annotations, a v1 write back keeps them, and a v1 applier
/// owns them through the annotation, as kube's conversion and field manager do.
async fn hpa_v1_carries_v2_fields_in_annotations(backend: Backend) {
    const METRICS: &str = "autoscaling.alpha.kubernetes.io/metrics";
    const BEHAVIOR: &str = "autoscaling.alpha.kubernetes.io/behavior";
    let c = Cluster::start_on(backend).await;
    let path = |v: &str| format!("/apis/autoscaling/{v}/namespaces/default/horizontalpodautoscalers/web");
    let memory = json!({"type": "Resource", "resource": {"name": "memory",
        "target": {"type": "AverageValue", "averageValue": "500Mi"}}});
    let cpu = |n: u32| json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": n}}});
    let hpa = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "maxReplicas": 5, "metrics": [cpu(50), memory.clone()],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 300}}}});
    crate::kinds::kubectl_create(&c, &hpa).await;

    let v1 = json_of(&c.must_kubectl(&["get", "horizontalpodautoscalers.v1.autoscaling", "web", "-o", "json"]).await);
    assert_eq!(v1["apiVersion"], "autoscaling/v1");
    assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 50);
    assert_eq!(v1["spec"].get("metrics"), None);
    let annotations = &v1["metadata"]["annotations"];
    assert_eq!(
        annotations[METRICS],
        r#"[{"type":"Resource","resource":{"name":"memory","targetAverageValue":"500Mi"}}]"#
    );
    assert_eq!(
        annotations[BEHAVIOR],
        concat!(
            r#"{"ScaleUp":{"StabilizationWindowSeconds":0,"SelectPolicy":"Max","Policies":[{"Type":"Pods","Value":4,"PeriodSeconds":15},{"Type":"Percent","Value":100,"PeriodSeconds":15}],"Tolerance":null},"#,
            r#""ScaleDown":{"StabilizationWindowSeconds":300,"SelectPolicy":"Max","Policies":[{"Type":"Percent","Value":100,"PeriodSeconds":15}],"Tolerance":null}}"#
        )
    );
    let stored_behavior = c.must_get(&path("v2")).await["spec"]["behavior"].clone();

    // A v1 client writes what it read back with another maximum: nothing v2 holds is lost, no
    // annotation is stored, and the writer owns only what it changed.
    let mut back = v1.clone();
    back["spec"]["maxReplicas"] = 6.into();
    back["metadata"]["managedFields"] = Value::Null;
    let r =
        c.request(Credentials::Admin, "PUT", &format!("{}?fieldManager=u", path("v1")), None, back.to_string()).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let h = c.must_get(&path("v2")).await;
    assert_eq!(h["spec"]["maxReplicas"], 6);
    assert_eq!(h["spec"]["metrics"], json!([memory, cpu(50)]), "the annotation's metrics first, as kube orders them");
    assert_eq!(h["spec"]["behavior"], stored_behavior);
    assert_eq!(h["metadata"].get("annotations"), None);
    assert_eq!(fields_of(&h, "u"), json!({"f:spec": {"f:maxReplicas": {}}}));

    // A v1 applier setting other metrics through the annotation conflicts with the creator's
    // metrics, takes them when forced, and owns the annotation at v1.
    let pods = r#"[{"type":"Pods","pods":{"metricName":"qps","targetAverageValue":"1k"}}]"#;
    let apply = |force: bool, annotation: Option<&str>| {
        let c = &c;
        let annotations = annotation.map_or(String::new(), |a| format!(", annotations: {{{METRICS}: '{a}'}}"));
        let body = format!(
            "apiVersion: autoscaling/v1\nkind: HorizontalPodAutoscaler\nmetadata: {{name: web{annotations}}}\n\
             spec: {{maxReplicas: 6, targetCPUUtilizationPercentage: 50}}\n"
        );
        let url = format!("{}?fieldManager=b&force={force}", path("v1"));
        async move { c.request(Credentials::Admin, "PATCH", &url, Some("application/apply-patch+yaml"), body).await }
    };
    let r = apply(false, Some(pods)).await;
    assert_eq!(r.status, 409, "{:?}", r.body);
    let message = r.json()["message"].as_str().unwrap_or_default().to_string();
    assert!(message.contains(r#"conflict with "kubectl-create""#) && message.contains(".spec.metrics"), "{message}");
    let r = apply(true, Some(pods)).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let h = c.must_get(&path("v2")).await;
    let qps = json!({"type": "Pods", "pods": {"metric": {"name": "qps"},
        "target": {"type": "AverageValue", "averageValue": "1k"}}});
    assert_eq!(h["spec"]["metrics"], json!([qps, cpu(50)]));
    assert_eq!(
        fields_of(&h, "b"),
        json!({"f:metadata": {"f:annotations": {format!("f:{METRICS}"): {}}},
            "f:spec": {"f:maxReplicas": {}, "f:targetCPUUtilizationPercentage": {}}})
    );
    // Its next apply without the annotation releases it, but the metrics stay: pruned in v1,
    // the creator's fields are added back in v2, where the metrics field is still set (the
    // CPU target), with the merged object's value, as kube's field manager does.
    let r = apply(false, None).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let h = c.must_get(&path("v2")).await;
    assert_eq!(h["spec"]["metrics"], json!([qps, cpu(50)]));
    assert_eq!(fields_of(&h, "b"), json!({"f:spec": {"f:maxReplicas": {}, "f:targetCPUUtilizationPercentage": {}}}));
}

/// An Event written through core `v1` and `events.k8s.io/v1`, where `message` is `note`: each
/// writer's entry is in its own version's fields, and a conflict names the field as its owner
/// wrote it.
async fn event_versions_keep_their_managers(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let core = "/api/v1/namespaces/default/events";
    let events = "/apis/events.k8s.io/v1/namespaces/default/events";
    let body = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
        "reason": "Started", "message": "started", "type": "Normal"});
    let r = c
        .request(
            Credentials::Admin,
            "POST",
            &format!("{core}?fieldManager=kubelet"),
            Some("application/json"),
            body.to_string(),
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(fields_of(&r.json(), "kubelet")["f:message"], json!({}));

    let r = c
        .request(
            Credentials::Admin,
            "PATCH",
            &format!("{events}/e1?fieldManager=recorder"),
            Some("application/merge-patch+json"),
            r#"{"note":"restarted"}"#,
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let e = c.must_get(&format!("{core}/e1")).await;
    assert_eq!(e["message"], "restarted");
    assert_eq!(
        entry_versions(&e),
        [
            ("kubelet".into(), "Update".into(), "v1".into()),
            ("recorder".into(), "Update".into(), "events.k8s.io/v1".into())
        ]
    );
    assert_eq!(fields_of(&e, "recorder"), json!({"f:note": {}}), "in events.k8s.io/v1's fields");
    assert_eq!(fields_of(&e, "kubelet").get("f:message"), None, "the message moved to the recorder");
    assert_eq!(fields_of(&e, "kubelet")["f:reason"], json!({}));

    let r = c
        .request(
            Credentials::Admin,
            "PATCH",
            &format!("{core}/e1?fieldManager=kubelet"),
            Some("application/apply-patch+yaml"),
            "apiVersion: v1\nkind: Event\nmetadata: {name: e1}\nmessage: again\n",
        )
        .await;
    assert_eq!(r.status, 409, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(
        r.json()["message"],
        r#"Apply failed with 1 conflict: conflict with "recorder" using events.k8s.io/v1: .note"#
    );
}
