//! Raw HTTPS requests for what kubectl cannot show directly: authentication and authorization
//! refusals, malformed bodies, conflicts, validation, pages, watch streams and discovery forms.
//! Each asserts kube-apiserver's status code, reason and message.

use serde_json::{json, Value};

use crate::harness::{in_memory, Backend, Cluster, Credentials, Options, ALICE_TOKEN, BOB_TOKEN};

in_memory!(
    anonymous_reads_only_public_info,
    bad_or_missing_credentials_are_401,
    rbac_denies_by_default_and_honours_stored_bindings,
    write_errors_use_kube_statuses,
    protobuf_bodies_from_kubectl_create_decode,
    lists_select_and_page,
    watch_from_resource_version_replays_history,
    discovery_forms_follow_accept,
);

const JSON: Option<&str> = Some("application/json");

async fn create_cm(c: &Cluster, ns: &str, body: Value) -> Value {
    let r = c
        .request(Credentials::Admin, "POST", &format!("/api/v1/namespaces/{ns}/configmaps"), JSON, body.to_string())
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    r.json()
}

fn assert_status(r: &crate::harness::RawResponse, code: u16, reason: &str, message: &str) {
    let body = r.json();
    assert_eq!(r.status, code, "{body}");
    assert_eq!(body["kind"], "Status", "{body}");
    assert_eq!(body["status"], "Failure", "{body}");
    assert_eq!(body["code"], code, "{body}");
    assert_eq!(body["reason"], reason, "{body}");
    assert_eq!(body["message"], message, "{body}");
}

async fn anonymous_reads_only_public_info(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let r = c.request(Credentials::None, "GET", "/api/v1/namespaces", None, "").await;
    assert_status(
        &r,
        403,
        "Forbidden",
        r#"namespaces is forbidden: User "system:anonymous" cannot list resource "namespaces" in API group "" at the cluster scope"#,
    );
    let r = c.request(Credentials::None, "GET", "/api/v1/namespaces/default/configmaps/x", None, "").await;
    assert_status(
        &r,
        403,
        "Forbidden",
        r#"configmaps "x" is forbidden: User "system:anonymous" cannot get resource "configmaps" in API group "" in the namespace "default""#,
    );
    let r = c.request(Credentials::None, "GET", "/api", None, "").await;
    assert_status(&r, 403, "Forbidden", r#"forbidden: User "system:anonymous" cannot get path "/api""#);
    for path in ["/healthz", "/livez", "/readyz"] {
        let r = c.request(Credentials::None, "GET", path, None, "").await;
        assert_eq!((r.status, &r.body[..]), (200, &b"ok"[..]), "{path}");
    }
    let r = c.request(Credentials::None, "GET", "/version", None, "").await;
    assert_eq!(r.status, 200);
    assert!(r.json()["gitVersion"].as_str().is_some_and(|v| v.starts_with("v1.33.")));
}

async fn bad_or_missing_credentials_are_401(backend: Backend) {
    let c =
        Cluster::start_with(Options { anonymous_auth_off: true, backend: Some(backend), ..Options::default() }).await;
    let r = c.request(Credentials::None, "GET", "/api/v1/namespaces", None, "").await;
    assert_status(&r, 401, "Unauthorized", "Unauthorized");
    let r = c.request(Credentials::Token("not-a-token"), "GET", "/healthz", None, "").await;
    assert_status(&r, 401, "Unauthorized", "Unauthorized");
    // Valid credentials still work with anonymous auth off.
    let r = c.request(Credentials::Token(BOB_TOKEN), "GET", "/api", None, "").await;
    assert_eq!(r.status, 200);
    let r = c.request(Credentials::Admin, "GET", "/api/v1/namespaces", None, "").await;
    assert_eq!(r.status, 200);
}

async fn rbac_denies_by_default_and_honours_stored_bindings(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    // An invalid token is 401 even though anonymous auth is on.
    let r = c.request(Credentials::Token("wrong"), "GET", "/api", None, "").await;
    assert_status(&r, 401, "Unauthorized", "Unauthorized");
    // bob is authenticated: discovery yes, resources no.
    assert_eq!(c.request(Credentials::Token(BOB_TOKEN), "GET", "/api/v1", None, "").await.status, 200);
    let r = c.request(Credentials::Token(BOB_TOKEN), "GET", "/api/v1/namespaces/default/configmaps", None, "").await;
    assert_status(
        &r,
        403,
        "Forbidden",
        r#"configmaps is forbidden: User "bob" cannot list resource "configmaps" in API group "" in the namespace "default""#,
    );
    // A Role and RoleBinding stored under kube-apiserver's keys grant alice's group read access.
    c.etcd_put(
        "/registry/roles/default/cm-reader",
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "cm-reader", "namespace": "default"},
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]}),
    )
    .await;
    c.etcd_put(
        "/registry/rolebindings/default/dev-reads",
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "dev-reads", "namespace": "default"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
                "subjects": [{"kind": "Group", "name": "dev"}]}),
    )
    .await;
    let r = c.request(Credentials::Token(ALICE_TOKEN), "GET", "/api/v1/namespaces/default/configmaps", None, "").await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["kind"], "ConfigMapList");
    let r = c
        .request(
            Credentials::Token(ALICE_TOKEN),
            "POST",
            "/api/v1/namespaces/default/configmaps",
            JSON,
            r#"{"metadata":{"name":"x"}}"#,
        )
        .await;
    assert_status(
        &r,
        403,
        "Forbidden",
        r#"configmaps is forbidden: User "alice" cannot create resource "configmaps" in API group "" in the namespace "default""#,
    );
    let r =
        c.request(Credentials::Token(ALICE_TOKEN), "GET", "/api/v1/namespaces/kube-system/configmaps", None, "").await;
    assert_eq!(r.status, 403);
    // A ClusterRoleBinding to the built-in cluster-admin role makes bob an administrator.
    c.etcd_put(
        "/registry/clusterrolebindings/bob-admin",
        &json!({"metadata": {"name": "bob-admin"}, "roleRef": {"kind": "ClusterRole", "name": "cluster-admin"},
                "subjects": [{"kind": "User", "name": "bob"}]}),
    )
    .await;
    let r = c.request(Credentials::Token(BOB_TOKEN), "GET", "/api/v1/namespaces", None, "").await;
    assert_eq!(r.status, 200);
}

async fn write_errors_use_kube_statuses(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    c.create_namespace("e").await;
    let path = "/api/v1/namespaces/e/configmaps";
    let r = c.request(Credentials::Admin, "POST", path, JSON, "{not json").await;
    let body = r.json();
    assert_eq!((r.status, &body["reason"]), (400, &json!("BadRequest")), "{body}");
    assert!(body["message"].as_str().is_some_and(|m| m.contains("json parse error")), "{body}");

    let cm = create_cm(&c, "e", json!({"metadata": {"name": "cm"}, "data": {"k": "1"}})).await;
    let r = c.request(Credentials::Admin, "POST", path, JSON, json!({"metadata": {"name": "cm"}}).to_string()).await;
    assert_status(&r, 409, "AlreadyExists", r#"configmaps "cm" already exists"#);

    // Two writers start from the same resourceVersion; the second loses.
    let mut first = cm.clone();
    first["data"]["k"] = "2".into();
    let r = c.request(Credentials::Admin, "PUT", &format!("{path}/cm"), JSON, first.to_string()).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let mut second = cm.clone();
    second["data"]["k"] = "3".into();
    let r = c.request(Credentials::Admin, "PUT", &format!("{path}/cm"), JSON, second.to_string()).await;
    assert_status(
        &r,
        409,
        "Conflict",
        r#"Operation cannot be fulfilled on configmaps "cm": the object has been modified; please apply your changes to the latest version and try again"#,
    );
    assert_eq!(r.json()["details"], json!({"name": "cm", "kind": "configmaps"}));

    let r = c.request(Credentials::Admin, "GET", &format!("{path}/missing"), None, "").await;
    assert_status(&r, 404, "NotFound", r#"configmaps "missing" not found"#);
    let r = c
        .request(Credentials::Admin, "POST", "/api/v1/namespaces/nope/configmaps", JSON, r#"{"metadata":{"name":"x"}}"#)
        .await;
    assert_status(&r, 404, "NotFound", r#"namespaces "nope" not found"#);

    let r = c
        .request(
            Credentials::Admin,
            "POST",
            path,
            JSON,
            json!({"metadata": {"name": "Bad_Name"}, "data": {"a b": "x"}}).to_string(),
        )
        .await;
    let body = r.json();
    assert_eq!((r.status, &body["reason"]), (422, &json!("Invalid")), "{body}");
    assert!(body["message"].as_str().is_some_and(|m| m.starts_with(r#"ConfigMap "Bad_Name" is invalid: [metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain"#)), "{body}");
    let fields: Vec<&str> =
        body["details"]["causes"].as_array().expect("causes").iter().filter_map(|c| c["field"].as_str()).collect();
    assert_eq!(fields, vec!["metadata.name", "data[a b]"]);
    let r = c.request(Credentials::Admin, "POST", "/api/v1/namespaces", JSON, r#"{"metadata":{"name":"a.b"}}"#).await;
    assert_eq!((r.status, &r.json()["details"]["causes"][0]["field"]), (422, &json!("metadata.name")));

    let r = c.request(Credentials::Admin, "PUT", &format!("{path}/other"), JSON, cm.to_string()).await;
    assert_status(&r, 400, "BadRequest", "the name of the object (cm) does not match the name on the URL (other)");
    let r = c.request(Credentials::Admin, "POST", path, Some("text/plain"), "a: b").await;
    assert_eq!(r.status, 415);
    // The server answers 413 from the declared length without reading the body.
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 3145729\r\n\r\n"
    );
    let answer = c.raw_exchange(Credentials::Admin, &head).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains(r#""message":"Request entity too large: limit is 3145728""#), "{answer}");
    assert!(answer.contains(r#""reason":"RequestEntityTooLarge""#), "{answer}");
    let r = c.request(Credentials::Admin, "PATCH", &format!("{path}/cm"), Some("application/json"), "{}").await;
    assert_eq!((r.status, &r.json()["reason"]), (415, &json!("UnsupportedMediaType")));
    let r = c
        .request(
            Credentials::Admin,
            "PATCH",
            "/api/v1/namespaces/e/bindings/b",
            Some("application/merge-patch+json"),
            "{}",
        )
        .await;
    assert_eq!((r.status, &r.json()["reason"]), (405, &json!("MethodNotAllowed")));
    let r = c.request(Credentials::Admin, "GET", "/api/v1/namespaces/e/widgets", None, "").await;
    assert_eq!((r.status, &r.json()["reason"]), (404, &json!("NotFound")));

    // Delete with a stale resourceVersion precondition, then for real.
    let r = c
        .request(
            Credentials::Admin,
            "DELETE",
            &format!("{path}/cm"),
            JSON,
            json!({"preconditions": {"resourceVersion": "1"}}).to_string(),
        )
        .await;
    assert_eq!((r.status, &r.json()["reason"]), (409, &json!("Conflict")));
    let r = c
        .request(Credentials::Admin, "DELETE", &format!("{path}/cm"), JSON, r#"{"propagationPolicy":"Background"}"#)
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["status"], "Success");
    assert_eq!(r.json()["details"]["uid"], cm["metadata"]["uid"]);
}

async fn protobuf_bodies_from_kubectl_create_decode(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    // The exact body `kubectl create configmap cm1 --from-literal=a=b` sends.
    let body: &[u8] = b"k8s\x00\n\x0f\n\x02v1\x12\tConfigMap\x12\x1d\n\x13\n\x03cm1\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12\x06\n\x01a\x12\x01b\x1a\x00\"\x00";
    let r = c
        .request(
            Credentials::Admin,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            Some("application/vnd.kubernetes.protobuf"),
            body.to_vec(),
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let cm = r.json();
    assert_eq!((&cm["metadata"]["name"], &cm["data"]), (&json!("cm1"), &json!({"a": "b"})));
    let r = c
        .request(
            Credentials::Admin,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            Some("application/vnd.kubernetes.protobuf"),
            "{}",
        )
        .await;
    assert_eq!((r.status, &r.json()["reason"]), (400, &json!("BadRequest")));
}

async fn lists_select_and_page(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    c.create_namespace("l").await;
    c.create_namespace("m").await;
    for (name, tier) in [("a", "web"), ("b", "db"), ("c", "web"), ("d", "cache"), ("e", "")] {
        let labels = if tier.is_empty() { json!({}) } else { json!({"tier": tier}) };
        create_cm(&c, "l", json!({"metadata": {"name": name, "labels": labels}})).await;
    }
    create_cm(&c, "m", json!({"metadata": {"name": "a", "labels": {"tier": "web"}}})).await;
    let names = |list: &Value| -> Vec<String> {
        list["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap_or("").to_string())
            .collect()
    };
    let get = async |query: &str| {
        let r =
            c.request(Credentials::Admin, "GET", &format!("/api/v1/namespaces/l/configmaps?{query}"), None, "").await;
        assert_eq!(r.status, 200, "{query}: {}", String::from_utf8_lossy(&r.body));
        r.json()
    };
    assert_eq!(names(&get("labelSelector=tier%3Dweb").await), ["a", "c"]);
    assert_eq!(names(&get("labelSelector=tier%20in%20(db,cache)").await), ["b", "d"]);
    assert_eq!(names(&get("labelSelector=tier%20notin%20(web)").await), ["b", "d", "e"]);
    assert_eq!(names(&get("labelSelector=!tier").await), ["e"]);
    assert_eq!(names(&get("fieldSelector=metadata.name%3Dd").await), ["d"]);
    assert_eq!(names(&get("fieldSelector=metadata.name!%3Dd&labelSelector=tier").await), ["a", "b", "c"]);
    let r = c
        .request(Credentials::Admin, "GET", "/api/v1/namespaces/l/configmaps?fieldSelector=data.x%3D1", None, "")
        .await;
    assert_status(&r, 400, "BadRequest", "field label not supported: data.x");
    // All namespaces.
    let r = c.request(Credentials::Admin, "GET", "/api/v1/configmaps?labelSelector=tier%3Dweb", None, "").await;
    assert_eq!(names(&r.json()), ["a", "c", "a"]);

    // Pages of two from one snapshot, even though a write lands between pages.
    let first = get("limit=2").await;
    assert_eq!(names(&first), ["a", "b"]);
    assert_eq!(first["metadata"]["remainingItemCount"], 3);
    let rv = first["metadata"]["resourceVersion"].clone();
    create_cm(&c, "l", json!({"metadata": {"name": "bb"}})).await;
    let token = first["metadata"]["continue"].as_str().expect("continue token").to_string();
    let second = get(&format!("limit=2&continue={token}")).await;
    assert_eq!(names(&second), ["c", "d"]);
    assert_eq!(second["metadata"]["resourceVersion"], rv);
    let token = second["metadata"]["continue"].as_str().expect("continue token").to_string();
    let third = get(&format!("limit=2&continue={token}")).await;
    assert_eq!(names(&third), ["e"]);
    assert!(third["metadata"].get("continue").is_none());
    // Filtered pages still fill up to the limit.
    let web = get("limit=1&labelSelector=tier%3Dweb").await;
    assert_eq!(names(&web), ["a"]);
    let token = web["metadata"]["continue"].as_str().expect("continue token").to_string();
    assert_eq!(names(&get(&format!("limit=1&labelSelector=tier%3Dweb&continue={token}")).await), ["c"]);
}

async fn watch_from_resource_version_replays_history(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    c.create_namespace("w").await;
    let list = c.request(Credentials::Admin, "GET", "/api/v1/namespaces/w/configmaps", None, "").await.json();
    let rv = list["metadata"]["resourceVersion"].as_str().expect("list rv").to_string();
    let cm = create_cm(&c, "w", json!({"metadata": {"name": "x", "labels": {"app": "a"}}})).await;
    let mut changed = cm.clone();
    changed["metadata"]["labels"]["app"] = "b".into();
    let r = c.request(Credentials::Admin, "PUT", "/api/v1/namespaces/w/configmaps/x", JSON, changed.to_string()).await;
    assert_eq!(r.status, 200);
    let r = c.request(Credentials::Admin, "DELETE", "/api/v1/namespaces/w/configmaps/x", None, "").await;
    assert_eq!(r.status, 200);

    let watch = async |query: &str| -> Vec<(String, String, String)> {
        let r = c
            .request(
                Credentials::Admin,
                "GET",
                &format!("/api/v1/namespaces/w/configmaps?watch=true&timeoutSeconds=1&{query}"),
                None,
                "",
            )
            .await;
        assert_eq!(r.status, 200);
        assert_eq!(r.headers["content-type"], "application/json");
        String::from_utf8_lossy(&r.body)
            .lines()
            .map(|l| {
                let e: Value = serde_json::from_str(l).expect("one JSON event per line");
                let rv = e["object"]["metadata"]["resourceVersion"].as_str().unwrap_or("").to_string();
                (
                    e["type"].as_str().unwrap_or("").to_string(),
                    e["object"]["metadata"]["labels"]["app"].as_str().unwrap_or("").to_string(),
                    rv,
                )
            })
            .collect()
    };
    // The three watches each run to their one-second timeout; they run at once.
    let (all, labelled) = (format!("resourceVersion={rv}"), format!("resourceVersion={rv}&labelSelector=app%3Da"));
    let (events, selected, current) = tokio::join!(watch(&all), watch(&labelled), watch(""));
    let kinds: Vec<(&str, &str)> = events.iter().map(|(t, app, _)| (t.as_str(), app.as_str())).collect();
    assert_eq!(kinds, [("ADDED", "a"), ("MODIFIED", "b"), ("DELETED", "b")]);
    let rvs: Vec<i64> = events.iter().map(|(_, _, rv)| rv.parse().expect("numeric rv")).collect();
    assert!(rvs.windows(2).all(|w| w[0] < w[1]), "{rvs:?}");
    // With a selector, leaving it is a DELETED and the later delete is not seen.
    let kinds: Vec<(&str, &str)> = selected.iter().map(|(t, app, _)| (t.as_str(), app.as_str())).collect();
    assert_eq!(kinds, [("ADDED", "a"), ("DELETED", "a")]);
    // Without a resourceVersion: the current state first (nothing here), then nothing.
    assert!(current.is_empty(), "{current:?}");
}

async fn discovery_forms_follow_accept(backend: Backend) {
    let c = Cluster::start_on(backend).await;
    let kubectl_accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,\
        application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
    let agg = c.request_with_accept(Credentials::Admin, "/api", kubectl_accept).await;
    assert_eq!(agg.headers["content-type"], "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList");
    let doc = agg.json();
    assert_eq!(doc["kind"], "APIGroupDiscoveryList");
    let resources = &doc["items"][0]["versions"][0]["resources"];
    let cms =
        resources.as_array().expect("resources").iter().find(|r| r["resource"] == "configmaps").cloned().expect("cm");
    assert_eq!(cms["responseKind"], json!({"group": "", "version": "v1", "kind": "ConfigMap"}));
    assert_eq!((&cms["scope"], &cms["singularResource"]), (&json!("Namespaced"), &json!("configmap")));
    let apis = c.request_with_accept(Credentials::Admin, "/apis", kubectl_accept).await.json();
    assert_eq!(apis["items"][0]["metadata"]["name"], "apiregistration.k8s.io");
    let legacy = c.request_with_accept(Credentials::Admin, "/api", "application/json, */*").await;
    assert_eq!(legacy.headers["content-type"], "application/json");
    assert_eq!(legacy.json()["versions"], json!(["v1"]));
    let none = c.request_with_accept(Credentials::Admin, "/api", "application/vnd.kubernetes.protobuf").await;
    assert_eq!((none.status, &none.json()["reason"]), (406, &json!("NotAcceptable")));
    let v1 = c.request(Credentials::Admin, "GET", "/api/v1", None, "").await.json();
    assert_eq!(v1["kind"], "APIResourceList");
    let cms = v1["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["name"] == "configmaps")
        .cloned()
        .expect("configmaps");
    assert_eq!(
        cms,
        json!({"name": "configmaps", "singularName": "configmap", "namespaced": true, "kind": "ConfigMap",
        "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"], "shortNames": ["cm"]})
    );
    let apis = c.request(Credentials::Admin, "GET", "/apis", None, "").await.json();
    assert_eq!(apis["kind"], "APIGroupList");
    assert_eq!(
        apis["groups"][1],
        json!({"name": "apps", "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
            "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"}})
    );
}
