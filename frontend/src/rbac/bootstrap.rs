//! The RBAC policy kube-apiserver 1.33 bootstraps (facts from kube's
//! `plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go`), as full
//! `rbac.authorization.k8s.io/v1` objects: the authorizer parses them once and consults them
//! without storage, and start-up writes them into storage (create-if-absent) so clients can
//! list them.
//!
//! Included: the user-facing roles and their bindings — `cluster-admin` (to `system:masters`),
//! the aggregated `admin` / `edit` / `view` with their `system:aggregate-to-*` parts,
//! `system:discovery`, `system:basic-user`, `system:public-info-viewer` and
//! `system:monitoring`, the delegation roles (`system:auth-delegator`,
//! `system:service-account-issuer-discovery` and, in `kube-system`, the
//! `extension-apiserver-authentication-reader` Role). Left out: the roles of components this server does not run (nodes,
//! controllers, scheduler, kube-proxy), which grant nothing a user of this server needs.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use serde_json::{json, Value};

use super::policy::{Binding, Role};
use ballast_apiserver::authn::service_account::ALL_SERVICE_ACCOUNTS_GROUP;
use ballast_apiserver::authn::{AUTHENTICATED_GROUP, MASTERS_GROUP, UNAUTHENTICATED_GROUP};

/// The group bound to `system:monitoring` (may read `/metrics`).
pub const MONITORING_GROUP: &str = "system:monitoring";

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];
const READ_WRITE: &[&str] = &["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"];

const AGGREGATE_TO_ADMIN: &str = "rbac.authorization.k8s.io/aggregate-to-admin";
const AGGREGATE_TO_EDIT: &str = "rbac.authorization.k8s.io/aggregate-to-edit";
const AGGREGATE_TO_VIEW: &str = "rbac.authorization.k8s.io/aggregate-to-view";

fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Value {
    json!({"verbs": verbs, "apiGroups": groups, "resources": resources})
}

fn urls(verbs: &[&str], paths: &[&str]) -> Value {
    json!({"verbs": verbs, "nonResourceURLs": paths})
}

/// Builds a ClusterRole object with kube's bootstrap label and autoupdate annotation.
fn make_cluster_role(
    name: &str,
    extra_labels: &[(&str, &str)],
    rules: Vec<Value>,
    aggregate_from: Option<&str>,
) -> Value {
    let mut labels = serde_json::Map::new();
    labels.insert("kubernetes.io/bootstrapping".into(), "rbac-defaults".into());
    for (k, v) in extra_labels {
        labels.insert((*k).into(), (*v).into());
    }
    let mut role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        },
        "rules": Value::Array(rules),
    });
    if let Some(label) = aggregate_from {
        role["aggregationRule"] = json!({"clusterRoleSelectors": [{"matchLabels": {label: "true"}}]});
    }
    role
}

fn all_cluster_roles() -> Vec<Value> {
    vec![
        make_cluster_role("cluster-admin", &[], vec![rule(&["*"], &["*"], &["*"]), urls(&["*"], &["*"])], None),
        // Delegated authentication and authorization: what an extension server needs to check
        // its callers with this server (bound by the extension server's own manifests).
        make_cluster_role(
            "system:auth-delegator",
            &[],
            vec![
                rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
                rule(&["create"], &["authorization.k8s.io"], &["subjectaccessreviews"]),
            ],
            None,
        ),
        make_cluster_role(
            "system:service-account-issuer-discovery",
            &[],
            vec![urls(
                &["get"],
                &[
                    "/.well-known/openid-configuration",
                    "/.well-known/openid-configuration/",
                    "/openid/v1/jwks",
                    "/openid/v1/jwks/",
                ],
            )],
            None,
        ),
        make_cluster_role(
            "system:discovery",
            &[],
            vec![urls(
                &["get"],
                &[
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                    "/healthz",
                    "/livez",
                    "/openapi",
                    "/openapi/*",
                    "/readyz",
                    "/version",
                    "/version/",
                ],
            )],
            None,
        ),
        make_cluster_role(
            "system:monitoring",
            &[],
            vec![urls(
                &["get"],
                &["/metrics", "/metrics/slis", "/livez", "/readyz", "/healthz", "/livez/*", "/readyz/*", "/healthz/*"],
            )],
            None,
        ),
        make_cluster_role(
            "system:basic-user",
            &[],
            vec![
                rule(&["create"], &["authorization.k8s.io"], &["selfsubjectaccessreviews", "selfsubjectrulesreviews"]),
                rule(&["create"], &["authentication.k8s.io"], &["selfsubjectreviews"]),
            ],
            None,
        ),
        make_cluster_role(
            "system:public-info-viewer",
            &[],
            vec![urls(&["get"], &["/livez", "/readyz", "/healthz", "/version", "/version/"])],
            None,
        ),
        // The aggregated user-facing roles: their rules are the union of the roles their
        // selectors pick; `view` feeds `edit`, which feeds `admin`.
        make_cluster_role("admin", &[], vec![], Some(AGGREGATE_TO_ADMIN)),
        make_cluster_role("edit", &[(AGGREGATE_TO_ADMIN, "true")], vec![], Some(AGGREGATE_TO_EDIT)),
        make_cluster_role("view", &[(AGGREGATE_TO_EDIT, "true")], vec![], Some(AGGREGATE_TO_VIEW)),
        make_cluster_role(
            "system:aggregate-to-admin",
            &[(AGGREGATE_TO_ADMIN, "true")],
            vec![
                rule(&["create"], &["authorization.k8s.io"], &["localsubjectaccessreviews"]),
                rule(READ_WRITE, &["rbac.authorization.k8s.io"], &["roles", "rolebindings"]),
            ],
            None,
        ),
        make_cluster_role(
            "system:aggregate-to-edit",
            &[(AGGREGATE_TO_EDIT, "true")],
            vec![
                rule(
                    READ,
                    &[""],
                    &["pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets", "services/proxy"],
                ),
                rule(&["impersonate"], &[""], &["serviceaccounts"]),
                rule(WRITE, &[""], &["pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward"]),
                rule(&["create"], &[""], &["pods/eviction"]),
                rule(
                    WRITE,
                    &[""],
                    &[
                        "replicationcontrollers",
                        "replicationcontrollers/scale",
                        "serviceaccounts",
                        "services",
                        "services/proxy",
                        "persistentvolumeclaims",
                        "configmaps",
                        "secrets",
                        "events",
                    ],
                ),
                rule(&["create"], &[""], &["serviceaccounts/token"]),
                rule(
                    WRITE,
                    &["apps"],
                    &[
                        "statefulsets",
                        "statefulsets/scale",
                        "daemonsets",
                        "deployments",
                        "deployments/scale",
                        "deployments/rollback",
                        "replicasets",
                        "replicasets/scale",
                    ],
                ),
                rule(WRITE, &["autoscaling"], &["horizontalpodautoscalers"]),
                rule(WRITE, &["batch"], &["jobs", "cronjobs"]),
                rule(
                    WRITE,
                    &["extensions"],
                    &[
                        "daemonsets",
                        "deployments",
                        "deployments/scale",
                        "deployments/rollback",
                        "ingresses",
                        "replicasets",
                        "replicasets/scale",
                        "replicationcontrollers/scale",
                        "networkpolicies",
                    ],
                ),
                rule(WRITE, &["policy"], &["poddisruptionbudgets"]),
                rule(WRITE, &["networking.k8s.io"], &["networkpolicies", "ingresses"]),
                rule(READ_WRITE, &["coordination.k8s.io"], &["leases"]),
            ],
            None,
        ),
        make_cluster_role(
            "system:aggregate-to-view",
            &[(AGGREGATE_TO_VIEW, "true")],
            vec![
                rule(
                    READ,
                    &[""],
                    &[
                        "pods",
                        "replicationcontrollers",
                        "replicationcontrollers/scale",
                        "serviceaccounts",
                        "services",
                        "services/status",
                        "endpoints",
                        "persistentvolumeclaims",
                        "persistentvolumeclaims/status",
                        "configmaps",
                    ],
                ),
                rule(
                    READ,
                    &[""],
                    &[
                        "limitranges",
                        "resourcequotas",
                        "bindings",
                        "events",
                        "pods/status",
                        "resourcequotas/status",
                        "namespaces/status",
                        "replicationcontrollers/status",
                        "pods/log",
                    ],
                ),
                rule(READ, &[""], &["namespaces"]),
                rule(READ, &["discovery.k8s.io"], &["endpointslices"]),
                rule(
                    READ,
                    &["apps"],
                    &[
                        "controllerrevisions",
                        "statefulsets",
                        "statefulsets/status",
                        "statefulsets/scale",
                        "daemonsets",
                        "daemonsets/status",
                        "deployments",
                        "deployments/status",
                        "deployments/scale",
                        "replicasets",
                        "replicasets/status",
                        "replicasets/scale",
                    ],
                ),
                rule(READ, &["autoscaling"], &["horizontalpodautoscalers", "horizontalpodautoscalers/status"]),
                rule(READ, &["batch"], &["jobs", "cronjobs", "cronjobs/status", "jobs/status"]),
                rule(
                    READ,
                    &["extensions"],
                    &[
                        "daemonsets",
                        "daemonsets/status",
                        "deployments",
                        "deployments/scale",
                        "deployments/status",
                        "ingresses",
                        "ingresses/status",
                        "replicasets",
                        "replicasets/scale",
                        "replicasets/status",
                        "replicationcontrollers/scale",
                        "networkpolicies",
                    ],
                ),
                rule(READ, &["policy"], &["poddisruptionbudgets", "poddisruptionbudgets/status"]),
                rule(READ, &["networking.k8s.io"], &["networkpolicies", "ingresses", "ingresses/status"]),
            ],
            None,
        ),
    ]
}

fn group_binding(name: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> =
        groups.iter().map(|g| json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": g})).collect();
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        },
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": subjects,
    })
}

fn all_cluster_role_bindings() -> Vec<Value> {
    vec![
        group_binding("cluster-admin", &[MASTERS_GROUP]),
        group_binding("system:monitoring", &[MONITORING_GROUP]),
        group_binding("system:discovery", &[AUTHENTICATED_GROUP]),
        group_binding("system:basic-user", &[AUTHENTICATED_GROUP]),
        group_binding("system:public-info-viewer", &[AUTHENTICATED_GROUP, UNAUTHENTICATED_GROUP]),
        group_binding("system:service-account-issuer-discovery", &[ALL_SERVICE_ACCOUNTS_GROUP]),
    ]
}

/// The Role (and its RoleBinding) kube bootstraps in `kube-system` that reads the
/// `extension-apiserver-authentication` ConfigMap: extension servers bind themselves to it to
/// learn how to trust this server's front proxy and clients. Namespaced, so they are not part
/// of the compiled-in policy; start-up writes them into storage, where the authorizer reads
/// RoleBindings.
pub fn namespaced_objects() -> Vec<(&'static str, Value)> {
    let meta = |name: &str| {
        json!({
            "name": name,
            "namespace": "kube-system",
            "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        })
    };
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": meta(EXTENSION_AUTH_READER),
        "rules": [{"verbs": READ, "apiGroups": [""], "resources": ["configmaps"],
                   "resourceNames": ["extension-apiserver-authentication"]}],
    });
    let user = |name: &str| json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": name});
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": meta("system::extension-apiserver-authentication-reader"),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": EXTENSION_AUTH_READER},
        "subjects": [user("system:kube-controller-manager"), user("system:kube-scheduler")],
    });
    vec![("roles", role), ("rolebindings", binding)]
}

/// The Role that reads the `extension-apiserver-authentication` ConfigMap.
pub const EXTENSION_AUTH_READER: &str = "extension-apiserver-authentication-reader";

struct Policy {
    objects: Vec<Value>,
    binding_objects: Vec<Value>,
    roles: BTreeMap<String, Role>,
    bindings: Vec<Binding>,
}

static POLICY: LazyLock<Policy> = LazyLock::new(|| {
    let objects = all_cluster_roles();
    let binding_objects = all_cluster_role_bindings();
    let roles = objects
        .iter()
        .filter_map(|o| serde_json::from_value::<Role>(o.clone()).ok())
        .map(|r| (r.name.clone(), r))
        .collect();
    let bindings = binding_objects.iter().filter_map(|o| serde_json::from_value(o.clone()).ok()).collect();
    Policy { objects, binding_objects, roles, bindings }
});

/// Returns a built-in ClusterRole by name (aggregated roles come with their selectors, not
/// their aggregated rules).
pub fn cluster_role(name: &str) -> Option<&'static Role> {
    POLICY.roles.get(name)
}

/// Returns every built-in ClusterRole.
pub fn cluster_roles() -> impl Iterator<Item = &'static Role> {
    POLICY.roles.values()
}

/// Returns the built-in ClusterRoleBindings (each named after its ClusterRole, as in kube).
pub fn cluster_role_bindings() -> &'static [Binding] {
    &POLICY.bindings
}

/// Returns the built-in ClusterRoles as stored objects (without uid and timestamps).
pub fn cluster_role_objects() -> &'static [Value] {
    &POLICY.objects
}

/// Returns the built-in ClusterRoleBindings as stored objects.
pub fn cluster_role_binding_objects() -> &'static [Value] {
    &POLICY.binding_objects
}

#[cfg(test)]
mod tests {
    use super::*;
    use ballast_apiserver::authn::UserInfo;
    use ballast_apiserver::request_info::parse;
    use http::Method;

    fn allowed(user: &UserInfo, method: &Method, path: &str) -> bool {
        let req = parse(method, path, None);
        cluster_role_bindings()
            .iter()
            .any(|b| b.applies_to(user, "") && cluster_role(&b.role_ref.name).is_some_and(|r| r.allows(&req)))
    }

    #[test]
    fn every_object_parses() {
        assert_eq!(cluster_role_objects().len(), POLICY.roles.len());
        assert_eq!(cluster_role_binding_objects().len(), cluster_role_bindings().len());
        assert!(cluster_role("view").is_some_and(|r| r.aggregation.is_some()));
        assert!(cluster_role("edit").is_some_and(|r| r.labels.get(AGGREGATE_TO_ADMIN).is_some_and(|v| v == "true")));
    }

    #[test]
    fn anonymous_reads_only_public_info() {
        let anon = UserInfo::anonymous();
        for path in ["/healthz", "/livez", "/readyz", "/version"] {
            assert!(allowed(&anon, &Method::GET, path), "{path}");
        }
        assert!(!allowed(&anon, &Method::GET, "/api"));
        assert!(!allowed(&anon, &Method::GET, "/metrics"));
        assert!(!allowed(&anon, &Method::GET, "/api/v1/namespaces"));
    }

    #[test]
    fn authenticated_users_read_discovery_and_masters_do_anything() {
        let user = UserInfo::new("u", "", vec![AUTHENTICATED_GROUP.into()]);
        assert!(allowed(&user, &Method::GET, "/apis"));
        assert!(allowed(&user, &Method::GET, "/api/v1"));
        assert!(!allowed(&user, &Method::GET, "/api/v1/namespaces"));
        assert!(!allowed(&user, &Method::GET, "/metrics"));
        let monitor = UserInfo::new("m", "", vec![MONITORING_GROUP.into()]);
        assert!(allowed(&monitor, &Method::GET, "/metrics"));
        let admin = UserInfo::new("a", "", vec![MASTERS_GROUP.into()]);
        assert!(allowed(&admin, &Method::DELETE, "/api/v1/namespaces/x"));
    }

    #[test]
    fn service_accounts_read_the_issuer_documents_and_delegators_review() {
        let sa = UserInfo::new("system:serviceaccount:a:b", "", vec![ALL_SERVICE_ACCOUNTS_GROUP.into()]);
        assert!(allowed(&sa, &Method::GET, "/.well-known/openid-configuration"));
        assert!(allowed(&sa, &Method::GET, "/openid/v1/jwks"));
        assert!(!allowed(&UserInfo::anonymous(), &Method::GET, "/openid/v1/jwks"));
        let delegator = cluster_role("system:auth-delegator").expect("role");
        let review = |path: &str| parse(&Method::POST, path, None);
        assert!(delegator.allows(&review("/apis/authentication.k8s.io/v1/tokenreviews")));
        assert!(delegator.allows(&review("/apis/authorization.k8s.io/v1/subjectaccessreviews")));
        assert!(!delegator.allows(&review("/api/v1/namespaces/a/configmaps")));
        let objects = namespaced_objects();
        assert!(serde_json::from_value::<Role>(objects[0].1.clone()).is_ok());
        assert!(serde_json::from_value::<Binding>(objects[1].1.clone()).is_ok());
    }
}
