//! The built-in RBAC policy kube-apiserver 1.33 bootstraps, reduced to what this frontend
//! serves: cluster-admin bound to `system:masters`; discovery and self-reviews for
//! `system:authenticated`; `/healthz`, `/livez`, `/readyz` and `/version` for everyone
//! (`system:public-info-viewer`), which is all an anonymous user may read.

use crate::authn::{AUTHENTICATED_GROUP, MASTERS_GROUP, UNAUTHENTICATED_GROUP};

use super::rbac::{Binding, PolicyRule, Role, RoleRef, Subject};

fn strings(values: &[&str]) -> Vec<String> {
    values.iter().map(|v| v.to_string()).collect()
}

fn non_resource(paths: &[&str]) -> PolicyRule {
    PolicyRule { verbs: strings(&["get"]), non_resource_urls: strings(paths), ..PolicyRule::default() }
}

/// Returns a built-in ClusterRole by name.
pub fn cluster_role(name: &str) -> Option<Role> {
    let rules = match name {
        "cluster-admin" => vec![
            PolicyRule {
                verbs: strings(&["*"]),
                api_groups: strings(&["*"]),
                resources: strings(&["*"]),
                ..PolicyRule::default()
            },
            PolicyRule { verbs: strings(&["*"]), non_resource_urls: strings(&["*"]), ..PolicyRule::default() },
        ],
        "system:discovery" => vec![non_resource(&[
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
        ])],
        "system:public-info-viewer" => vec![non_resource(&["/healthz", "/livez", "/readyz", "/version", "/version/"])],
        "system:basic-user" => vec![
            PolicyRule {
                verbs: strings(&["create"]),
                api_groups: strings(&["authorization.k8s.io"]),
                resources: strings(&["selfsubjectaccessreviews", "selfsubjectrulesreviews"]),
                ..PolicyRule::default()
            },
            PolicyRule {
                verbs: strings(&["create"]),
                api_groups: strings(&["authentication.k8s.io"]),
                resources: strings(&["selfsubjectreviews"]),
                ..PolicyRule::default()
            },
        ],
        _ => return None,
    };
    Some(Role { rules })
}

fn group_binding(name: &str, groups: &[&str]) -> Binding {
    Binding {
        name: name.to_string(),
        subjects: groups
            .iter()
            .map(|g| Subject { kind: "Group".into(), name: g.to_string(), namespace: String::new() })
            .collect(),
        role_ref: RoleRef { kind: "ClusterRole".into(), name: name.to_string() },
    }
}

/// Returns the built-in ClusterRoleBindings (each named after its ClusterRole, as in kube).
pub fn cluster_role_bindings() -> Vec<Binding> {
    vec![
        group_binding("cluster-admin", &[MASTERS_GROUP]),
        group_binding("system:discovery", &[AUTHENTICATED_GROUP]),
        group_binding("system:basic-user", &[AUTHENTICATED_GROUP]),
        group_binding("system:public-info-viewer", &[AUTHENTICATED_GROUP, UNAUTHENTICATED_GROUP]),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authn::UserInfo;
    use crate::request_info::parse;
    use http::Method;

    fn allowed(user: &UserInfo, method: &Method, path: &str) -> bool {
        let req = parse(method, path, None);
        cluster_role_bindings()
            .iter()
            .any(|b| b.applies_to(user, "") && cluster_role(&b.role_ref.name).is_some_and(|r| r.allows(&req)))
    }

    #[test]
    fn anonymous_reads_only_public_info() {
        let anon = UserInfo::anonymous();
        for path in ["/healthz", "/livez", "/readyz", "/version"] {
            assert!(allowed(&anon, &Method::GET, path), "{path}");
        }
        assert!(!allowed(&anon, &Method::GET, "/api"));
        assert!(!allowed(&anon, &Method::GET, "/api/v1/namespaces"));
    }

    #[test]
    fn authenticated_users_read_discovery_and_masters_do_anything() {
        let user = UserInfo { name: "u".into(), uid: String::new(), groups: vec![AUTHENTICATED_GROUP.into()] };
        assert!(allowed(&user, &Method::GET, "/apis"));
        assert!(allowed(&user, &Method::GET, "/api/v1"));
        assert!(!allowed(&user, &Method::GET, "/api/v1/namespaces"));
        let admin = UserInfo { name: "a".into(), uid: String::new(), groups: vec![MASTERS_GROUP.into()] };
        assert!(allowed(&admin, &Method::DELETE, "/api/v1/namespaces/x"));
    }
}
