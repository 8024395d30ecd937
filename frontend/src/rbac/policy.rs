//! RBAC objects as stored (JSON of `rbac.authorization.k8s.io/v1` kinds) and rule matching.
//!
//! Only the fields authorization reads are decoded; unknown fields are ignored.

use std::collections::BTreeMap;

use serde::Deserialize;

use ballast_apiserver::authn::UserInfo;
use ballast_apiserver::request_info::RequestInfo;

/// One `PolicyRule`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default, rename_all = "camelCase")]
pub struct PolicyRule {
    /// Verbs, `*` for all.
    pub verbs: Vec<String>,
    /// API groups, `*` for all, "" for core.
    pub api_groups: Vec<String>,
    /// Resources, `*`, `res/sub` or `*/sub`.
    pub resources: Vec<String>,
    /// Object names; empty allows all.
    pub resource_names: Vec<String>,
    /// Non-resource URL paths; a trailing `*` matches a prefix.
    #[serde(rename = "nonResourceURLs")]
    pub non_resource_urls: Vec<String>,
}

fn has(list: &[String], value: &str) -> bool {
    list.iter().any(|v| v == "*" || v == value)
}

impl PolicyRule {
    /// Returns whether this rule allows a resource request.
    pub fn allows_resource(&self, req: &RequestInfo) -> bool {
        has(&self.verbs, &req.verb)
            && has(&self.api_groups, &req.api_group)
            && self.resource_matches(&req.resource, &req.subresource)
            && (self.resource_names.is_empty() || self.resource_names.contains(&req.name))
    }

    fn resource_matches(&self, resource: &str, subresource: &str) -> bool {
        let combined = if subresource.is_empty() { resource.to_string() } else { format!("{resource}/{subresource}") };
        self.resources.iter().any(|r| {
            r == "*" || *r == combined || (!subresource.is_empty() && r.strip_prefix("*/") == Some(subresource))
        })
    }

    /// Returns whether this rule allows a non-resource request.
    pub fn allows_non_resource(&self, req: &RequestInfo) -> bool {
        has(&self.verbs, &req.verb)
            && self.non_resource_urls.iter().any(|u| {
                u == "*" || *u == req.path || u.strip_suffix('*').is_some_and(|prefix| req.path.starts_with(prefix))
            })
    }
}

/// A Role or ClusterRole: its rules, and for aggregated ClusterRoles the label selectors whose
/// matching ClusterRoles' rules it also grants.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, from = "RawRole")]
pub struct Role {
    /// The role's name.
    pub name: String,
    /// The role's labels (what aggregation selectors match).
    pub labels: BTreeMap<String, String>,
    /// The rules.
    pub rules: Vec<PolicyRule>,
    /// `aggregationRule.clusterRoleSelectors`, if any (each a `matchLabels` map; `None` means
    /// a selector this authorizer cannot evaluate, which matches nothing).
    pub aggregation: Option<Vec<Option<BTreeMap<String, String>>>>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct RawRole {
    metadata: Metadata,
    rules: Vec<PolicyRule>,
    aggregation_rule: Option<RawAggregationRule>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct RawAggregationRule {
    cluster_role_selectors: Vec<RawSelector>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct RawSelector {
    match_labels: BTreeMap<String, String>,
    match_expressions: Vec<serde_json::Value>,
}

impl From<RawRole> for Role {
    fn from(raw: RawRole) -> Self {
        let aggregation = raw.aggregation_rule.map(|a| {
            a.cluster_role_selectors
                .into_iter()
                // matchExpressions are not evaluated: such a selector selects nothing rather
                // than more than it should (fail closed).
                .map(|s| s.match_expressions.is_empty().then_some(s.match_labels))
                .collect()
        });
        Role { name: raw.metadata.name, labels: raw.metadata.labels, rules: raw.rules, aggregation }
    }
}

impl Role {
    /// Returns whether the aggregation selector `selector` selects this role.
    pub fn selected_by(&self, selector: &BTreeMap<String, String>) -> bool {
        selector.iter().all(|(k, v)| self.labels.get(k) == Some(v))
    }
}

impl Role {
    /// Returns whether any rule allows the request (resource or non-resource).
    pub fn allows(&self, req: &RequestInfo) -> bool {
        if req.is_resource_request {
            self.allows_resource(req)
        } else {
            self.rules.iter().any(|r| r.allows_non_resource(req))
        }
    }

    /// Returns whether any rule allows the resource request (RoleBindings grant only these).
    pub fn allows_resource(&self, req: &RequestInfo) -> bool {
        req.is_resource_request && self.rules.iter().any(|r| r.allows_resource(req))
    }
}

/// A binding's `roleRef`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default, rename_all = "camelCase")]
pub struct RoleRef {
    /// `Role` or `ClusterRole`.
    pub kind: String,
    /// The role's name.
    pub name: String,
}

/// A binding's subject.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Subject {
    /// `User`, `Group` or `ServiceAccount`.
    pub kind: String,
    /// The name.
    pub name: String,
    /// For service accounts: their namespace (defaults to the binding's).
    pub namespace: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct Metadata {
    name: String,
    labels: BTreeMap<String, String>,
}

/// A RoleBinding or ClusterRoleBinding.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase", from = "RawBinding")]
pub struct Binding {
    /// The binding's name (for logs).
    pub name: String,
    /// Who it applies to.
    pub subjects: Vec<Subject>,
    /// What it grants.
    pub role_ref: RoleRef,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct RawBinding {
    metadata: Metadata,
    subjects: Vec<Subject>,
    role_ref: RoleRef,
}

impl From<RawBinding> for Binding {
    fn from(raw: RawBinding) -> Self {
        Binding { name: raw.metadata.name, subjects: raw.subjects, role_ref: raw.role_ref }
    }
}

impl Binding {
    /// Returns the first subject that names the user, for kube's allow reason.
    pub fn matching_subject(&self, user: &UserInfo, namespace: &str) -> Option<&Subject> {
        self.subjects.iter().find(|s| subject_matches(s, user, namespace))
    }

    /// Returns whether the binding names the user, one of its groups, or (as
    /// `system:serviceaccount:<ns>:<name>`) its service account. `namespace` is the binding's
    /// own namespace ("" for cluster bindings).
    pub fn applies_to(&self, user: &UserInfo, namespace: &str) -> bool {
        self.subjects.iter().any(|s| subject_matches(s, user, namespace))
    }
}

fn subject_matches(s: &Subject, user: &UserInfo, namespace: &str) -> bool {
    match s.kind.as_str() {
        "User" => s.name == user.name,
        "Group" => user.in_group(&s.name),
        "ServiceAccount" => {
            let ns = if s.namespace.is_empty() { namespace } else { s.namespace.as_str() };
            !ns.is_empty() && user.name == format!("system:serviceaccount:{ns}:{}", s.name)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ballast_apiserver::request_info::parse;
    use http::Method;

    fn rule(json: &str) -> PolicyRule {
        serde_json::from_str(json).expect("rule")
    }

    #[test]
    fn resource_rules_match_like_kube() {
        let r = rule(r#"{"verbs":["get","list"],"apiGroups":[""],"resources":["configmaps"]}"#);
        assert!(r.allows_resource(&parse(&Method::GET, "/api/v1/namespaces/a/configmaps", None)));
        assert!(!r.allows_resource(&parse(&Method::POST, "/api/v1/namespaces/a/configmaps", None)));
        assert!(!r.allows_resource(&parse(&Method::GET, "/api/v1/namespaces/a/secrets", None)));
        let named = rule(r#"{"verbs":["*"],"apiGroups":["*"],"resources":["*/status"],"resourceNames":["x"]}"#);
        assert!(named.allows_resource(&parse(&Method::PUT, "/api/v1/namespaces/x/status", None)));
        assert!(!named.allows_resource(&parse(&Method::PUT, "/api/v1/namespaces/y/status", None)));
    }

    #[test]
    fn non_resource_rules_match_prefixes() {
        let r = rule(r#"{"verbs":["get"],"nonResourceURLs":["/api","/api/*"]}"#);
        assert!(r.allows_non_resource(&parse(&Method::GET, "/api", None)));
        assert!(r.allows_non_resource(&parse(&Method::GET, "/api/v1", None)));
        assert!(!r.allows_non_resource(&parse(&Method::GET, "/apis", None)));
    }

    #[test]
    fn bindings_match_users_groups_and_service_accounts() {
        let b: Binding = serde_json::from_str(
            r#"{"metadata":{"name":"b"},"roleRef":{"kind":"Role","name":"r"},
                "subjects":[{"kind":"User","name":"alice"},{"kind":"Group","name":"dev"},
                            {"kind":"ServiceAccount","name":"bot"}]}"#,
        )
        .expect("binding");
        let user =
            |name: &str, groups: &[&str]| UserInfo::new(name, "", groups.iter().map(|g| g.to_string()).collect());
        assert!(b.applies_to(&user("alice", &[]), "ns"));
        assert!(b.applies_to(&user("bob", &["dev"]), "ns"));
        assert!(b.applies_to(&user("system:serviceaccount:ns:bot", &[]), "ns"));
        assert!(!b.applies_to(&user("system:serviceaccount:other:bot", &[]), "ns"));
        assert!(!b.applies_to(&user("carol", &["ops"]), "ns"));
        assert_eq!(b.name, "b");
    }
}
