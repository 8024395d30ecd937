//! Authorization features through real clients: `kubectl auth can-i` (plain, `--as`, `--list`),
//! `kubectl auth whoami`, impersonation allowed and denied, subject access reviews, aggregated
//! bootstrap roles and the bootstrap policy written into storage.

use serde_json::{json, Value};

use crate::harness::{Backend, Cluster, Credentials, ALICE_TOKEN, BOB_TOKEN};

const JSON: Option<&str> = Some("application/json");

fn assert_forbidden(r: &crate::harness::RawResponse, message: &str) {
    assert_eq!(r.status, 403, "{}", String::from_utf8_lossy(&r.body));
    let status = r.json();
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(status["message"], message);
}

/// Stores a Role that reads configmaps in `team` and binds it to user bob; binds the built-in
/// aggregated `view` ClusterRole to carol in `team`.
async fn store_team_rbac(c: &Cluster) {
    c.etcd_put(
        "/registry/roles/team/cm-reader",
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "cm-reader", "namespace": "team"},
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}),
    )
    .await;
    c.etcd_put(
        "/registry/rolebindings/team/bob-reads",
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "bob-reads", "namespace": "team"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
                "subjects": [{"kind": "User", "name": "bob"}]}),
    )
    .await;
    c.etcd_put(
        "/registry/rolebindings/team/carol-views",
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "carol-views", "namespace": "team"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                "subjects": [{"kind": "User", "name": "carol"}]}),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_can_i_and_whoami() {
    let c = Cluster::start_on(Backend::Memory).await;
    c.create_namespace("team").await;

    // The admin (system:masters) may do anything.
    assert_eq!(c.must_kubectl(&["auth", "can-i", "create", "configmaps"]).await.trim(), "yes");
    assert_eq!(c.must_kubectl(&["auth", "can-i", "delete", "namespaces"]).await.trim(), "yes");
    // bob, impersonated by the admin, may not; kubectl says "no" and exits 1.
    let out = c.kubectl(&["auth", "can-i", "get", "cm", "-n", "team", "--as=bob"]).await;
    assert!(!out.ok, "can-i as bob should fail: {}", out.stdout);
    assert_eq!(out.stdout.trim(), "no");

    store_team_rbac(&c).await;
    assert_eq!(c.must_kubectl(&["auth", "can-i", "get", "cm", "-n", "team", "--as=bob"]).await.trim(), "yes");
    let out = c.kubectl(&["auth", "can-i", "create", "cm", "-n", "team", "--as=bob"]).await;
    assert_eq!(out.stdout.trim(), "no");
    let out = c.kubectl(&["auth", "can-i", "get", "cm", "-n", "default", "--as=bob"]).await;
    assert_eq!(out.stdout.trim(), "no");
    // carol has the aggregated `view` role: reads, no writes, no secrets.
    assert_eq!(c.must_kubectl(&["auth", "can-i", "list", "cm", "-n", "team", "--as=carol"]).await.trim(), "yes");
    assert_eq!(c.kubectl(&["auth", "can-i", "create", "cm", "-n", "team", "--as=carol"]).await.stdout.trim(), "no");
    assert_eq!(c.kubectl(&["auth", "can-i", "get", "secrets", "-n", "team", "--as=carol"]).await.stdout.trim(), "no");

    // --list shows bob's rules in the namespace (from the Role and the built-in basic-user).
    let list = c.must_kubectl(&["auth", "can-i", "--list", "-n", "team", "--as=bob"]).await;
    let cm_line = list.lines().find(|l| l.starts_with("configmaps ")).unwrap_or_else(|| panic!("{list}"));
    assert!(cm_line.contains("[get list]"), "{cm_line}");
    assert!(list.contains("selfsubjectaccessreviews.authorization.k8s.io"), "{list}");
    assert!(!list.contains("secrets"), "{list}");

    // whoami: the admin certificate's identity, then an impersonated one.
    let me: Value = serde_json::from_str(&c.must_kubectl(&["auth", "whoami", "-o", "json"]).await).expect("json");
    assert_eq!(me["kind"], "SelfSubjectReview");
    assert_eq!(me["status"]["userInfo"]["username"], "kubernetes-admin");
    let groups = me["status"]["userInfo"]["groups"].as_array().expect("groups").clone();
    assert!(groups.contains(&json!("system:masters")) && groups.contains(&json!("system:authenticated")));
    let bob = c.must_kubectl(&["auth", "whoami", "--as=bob", "--as-group=dev"]).await;
    assert!(bob.contains("bob") && bob.contains("dev") && bob.contains("system:authenticated"), "{bob}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impersonation_is_authorized_per_header() {
    let c = Cluster::start_on(Backend::Memory).await;
    c.create_namespace("team").await;
    store_team_rbac(&c).await;
    let cms = "/api/v1/namespaces/team/configmaps";

    // alice may not impersonate anyone yet.
    let r = c
        .request_with_headers(Credentials::Token(ALICE_TOKEN), "GET", cms, &[("Impersonate-User", "bob")], None, "")
        .await;
    assert_forbidden(
        &r,
        r#"users "bob" is forbidden: User "alice" cannot impersonate resource "users" in API group "" at the cluster scope"#,
    );
    // Groups without a user are a bad request.
    let r = c
        .request_with_headers(Credentials::Token(ALICE_TOKEN), "GET", cms, &[("Impersonate-Group", "dev")], None, "")
        .await;
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));

    // A ClusterRole that lets alice impersonate user bob only (by name).
    c.etcd_put(
        "/registry/clusterroles/impersonate-bob",
        &json!({"metadata": {"name": "impersonate-bob"},
                "rules": [{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"], "resourceNames": ["bob"]}]}),
    )
    .await;
    c.etcd_put(
        "/registry/clusterrolebindings/alice-impersonates",
        &json!({"metadata": {"name": "alice-impersonates"},
                "roleRef": {"kind": "ClusterRole", "name": "impersonate-bob"},
                "subjects": [{"kind": "User", "name": "alice"}]}),
    )
    .await;
    // As bob, alice reads team's configmaps (bob's RoleBinding), though alice herself cannot.
    assert_eq!(c.request(Credentials::Token(ALICE_TOKEN), "GET", cms, None, "").await.status, 403);
    let r = c
        .request_with_headers(Credentials::Token(ALICE_TOKEN), "GET", cms, &[("Impersonate-User", "bob")], None, "")
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    // ... and is bob for authorization: bob may not write.
    let r = c
        .request_with_headers(
            Credentials::Token(ALICE_TOKEN),
            "POST",
            cms,
            &[("Impersonate-User", "bob")],
            JSON,
            r#"{"metadata":{"name":"x"}}"#,
        )
        .await;
    assert_forbidden(
        &r,
        r#"configmaps is forbidden: User "bob" cannot create resource "configmaps" in API group "" in the namespace "team""#,
    );
    // Other users, groups, uids and extras each need their own grant.
    let r = c
        .request_with_headers(Credentials::Token(ALICE_TOKEN), "GET", cms, &[("Impersonate-User", "carol")], None, "")
        .await;
    assert_forbidden(
        &r,
        r#"users "carol" is forbidden: User "alice" cannot impersonate resource "users" in API group "" at the cluster scope"#,
    );
    let r = c
        .request_with_headers(
            Credentials::Token(ALICE_TOKEN),
            "GET",
            cms,
            &[("Impersonate-User", "bob"), ("Impersonate-Group", "system:masters")],
            None,
            "",
        )
        .await;
    assert_forbidden(
        &r,
        r#"groups "system:masters" is forbidden: User "alice" cannot impersonate resource "groups" in API group "" at the cluster scope"#,
    );
    let r = c
        .request_with_headers(
            Credentials::Token(ALICE_TOKEN),
            "GET",
            cms,
            &[("Impersonate-User", "bob"), ("Impersonate-Extra-Scopes", "view")],
            None,
            "",
        )
        .await;
    assert_forbidden(
        &r,
        r#"userextras.authentication.k8s.io "view" is forbidden: User "alice" cannot impersonate resource "userextras/scopes" in API group "authentication.k8s.io" at the cluster scope"#,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subject_access_reviews_and_bootstrap_policy() {
    let c = Cluster::start_on(Backend::Memory).await;
    let sar = |user: &str, verb: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
               "spec": {"user": user, "groups": ["system:authenticated"],
                        "resourceAttributes": {"namespace": "default", "verb": verb, "resource": "configmaps"}}})
        .to_string()
    };
    let path = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
    let r = c.request(Credentials::Admin, "POST", path, JSON, sar("bob", "list")).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["status"]["allowed"], false);
    let r = c
        .request(
            Credentials::Admin,
            "POST",
            path,
            JSON,
            json!({"spec": {"user": "x", "groups": ["system:masters"],
                            "nonResourceAttributes": {"verb": "get", "path": "/metrics"}}})
            .to_string(),
        )
        .await;
    let status = &r.json()["status"];
    assert_eq!(status["allowed"], true);
    assert_eq!(
        status["reason"],
        r#"RBAC: allowed by ClusterRoleBinding "cluster-admin" of ClusterRole "cluster-admin" to Group "system:masters""#
    );
    // Only privileged users may ask about others; anyone may ask about themselves.
    let r = c.request(Credentials::Token(BOB_TOKEN), "POST", path, JSON, sar("bob", "list")).await;
    assert_forbidden(
        &r,
        r#"subjectaccessreviews.authorization.k8s.io is forbidden: User "bob" cannot create resource "subjectaccessreviews" in API group "authorization.k8s.io" at the cluster scope"#,
    );
    let r = c
        .request(
            Credentials::Token(BOB_TOKEN),
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            JSON,
            json!({"spec": {"resourceAttributes": {"verb": "create", "group": "authorization.k8s.io",
                                                   "resource": "selfsubjectaccessreviews"}}})
            .to_string(),
        )
        .await;
    assert_eq!(r.status, 201);
    assert_eq!(r.json()["status"]["allowed"], true);
    // Neither attribute kind is a 422.
    let r = c
        .request(Credentials::Admin, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", JSON, "{}")
        .await;
    assert_eq!(r.status, 422, "{}", String::from_utf8_lossy(&r.body));

    // The bootstrap policy is in storage under kube's keys, written once.
    let admin = c.storage_get("/registry/clusterroles/admin").await.expect("stored admin role");
    let admin: Value = serde_json::from_slice(&admin).expect("stored json");
    assert_eq!(
        admin["aggregationRule"]["clusterRoleSelectors"][0]["matchLabels"]
            ["rbac.authorization.k8s.io/aggregate-to-admin"],
        "true"
    );
    assert!(c.storage_get("/registry/clusterrolebindings/cluster-admin").await.is_some());
    // Deleting a stored bootstrap role does not break authorization (the built-in one stands in).
    c.storage_delete("/registry/clusterroles/cluster-admin").await;
    assert_eq!(c.request(Credentials::Admin, "GET", "/api/v1/namespaces", None, "").await.status, 200);
    // A stored role that cannot be decoded is not absent: the built-in one does not stand in,
    // and the role grants nothing.
    c.etcd_put(
        "/registry/rolebindings/team/bob-views",
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "bob-views", "namespace": "team"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                "subjects": [{"kind": "User", "name": "bob"}]}),
    )
    .await;
    let services = "/api/v1/namespaces/team/services";
    assert_eq!(c.request(Credentials::Token(BOB_TOKEN), "GET", services, None, "").await.status, 200);
    c.storage_put("/registry/clusterroles/view", b"k8s\x00\x0a\x0b".to_vec()).await;
    let r = c.request(Credentials::Token(BOB_TOKEN), "GET", services, None, "").await;
    assert_eq!(r.status, 403, "{}", String::from_utf8_lossy(&r.body));
}
