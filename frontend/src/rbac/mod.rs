//! RBAC authorization (kube's `plugin/pkg/auth/authorizer/rbac`): the built-in API's
//! authorizer, given to the generic server's chain as an `Authorizer`.
//!
//! * [`policy`]: the RBAC types (rules, subjects, role references, aggregation selectors) and
//!   rule matching, as `k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac` defines them.
//! * [`bootstrap`]: kube-apiserver 1.33's built-in ClusterRoles and ClusterRoleBindings.
//!
//! [`RbacAuthorizer`] consults the built-in bindings first (no storage read for the admin or
//! for discovery), then the Role/ClusterRole/RoleBinding/ClusterRoleBinding objects in storage
//! under kube-apiserver's keys (`/registry/clusterrolebindings/<name>`,
//! `/registry/rolebindings/<ns>/<name>`, ...). A ClusterRole referenced by a binding is the
//! stored one, or the built-in one of that name when storage lacks it, so authorization works
//! whether or not the bootstrap objects were written.
//!
//! Aggregated ClusterRoles (`aggregationRule`): kube fills their rules with a controller; this
//! server has none yet, so the authorizer computes the union at authorization time from the
//! stored and built-in ClusterRoles whose labels match (transitively: `view` → `edit` →
//! `admin`). The stored rules of an aggregated role are ignored, as the controller would
//! overwrite them.
//!
//! Storage is read on each request the built-in bindings do not allow; a watch-fed cache of the
//! RBAC objects is the next step once they are served over REST.

pub mod bootstrap;
pub mod policy;

use std::collections::{BTreeMap, BTreeSet};

use ballast_apimachinery::uid::new_uid;
use ballast_apiserver::authn::UserInfo;
use ballast_apiserver::authz::{Authorizer, Decision};
use ballast_apiserver::request_info::RequestInfo;
use ballast_apiserver::storage::decode_errors;
use ballast_apiserver::storage::{prefix_end, SharedStorage, StorageError};
use futures::future::BoxFuture;

use policy::{Binding, PolicyRule, Role, Subject};

/// RBAC over built-in and stored roles and bindings.
#[derive(Debug, Clone)]
pub struct RbacAuthorizer {
    storage: SharedStorage,
    prefix: String,
}

/// kube's `describeSubject`.
fn describe_subject(s: &Subject, binding_namespace: &str) -> String {
    if s.kind == "ServiceAccount" {
        let ns = if s.namespace.is_empty() { binding_namespace } else { s.namespace.as_str() };
        format!("{} \"{}/{ns}\"", s.kind, s.name)
    } else {
        format!("{} \"{}\"", s.kind, s.name)
    }
}

fn allow_reason(binding: &Binding, namespace: &str, user: &UserInfo) -> String {
    let subject = binding.matching_subject(user, namespace).map(|s| describe_subject(s, namespace)).unwrap_or_default();
    let what = if namespace.is_empty() {
        format!("ClusterRoleBinding \"{}\"", binding.name)
    } else {
        format!("RoleBinding \"{}/{namespace}\"", binding.name)
    };
    format!("RBAC: allowed by {what} of {} \"{}\" to {subject}", binding.role_ref.kind, binding.role_ref.name)
}

/// Returns whether a stored ClusterRoleBinding is a built-in one as written at start (same name,
/// subjects and role): it was decided already, from memory, so reading its role again would only
/// cost storage reads on every request. (An edited copy of a built-in *role* is therefore not
/// consulted through a built-in binding; kube's start-up reconciliation would restore it too.)
fn is_builtin(binding: &Binding) -> bool {
    bootstrap::cluster_role_bindings().iter().any(|b| {
        b.name == binding.name
            && b.role_ref.name == binding.role_ref.name
            && b.role_ref.kind == binding.role_ref.kind
            && b.subjects == binding.subjects
    })
}

/// Resolves ClusterRoles for one authorization: stored ones override built-in ones by name;
/// the full set is listed at most once, and only when an aggregated role needs it.
struct ClusterRoles<'a> {
    authorizer: &'a RbacAuthorizer,
    all: Option<BTreeMap<String, Role>>,
}

impl ClusterRoles<'_> {
    async fn all(&mut self) -> Result<&BTreeMap<String, Role>, StorageError> {
        if self.all.is_none() {
            let mut all: BTreeMap<String, Role> =
                bootstrap::cluster_roles().map(|r| (r.name.clone(), r.clone())).collect();
            for role in self.authorizer.read_all::<Role>("clusterroles", None).await? {
                all.insert(role.name.clone(), role);
            }
            self.all = Some(all);
        }
        Ok(self.all.get_or_insert_with(BTreeMap::new))
    }

    /// Returns the effective rules of ClusterRole `name`, or `None` when it does not exist.
    async fn rules(&mut self, name: &str) -> Result<Option<Vec<PolicyRule>>, StorageError> {
        let key = format!("{}/clusterroles/{name}", self.authorizer.prefix);
        let role = match self.authorizer.read_one::<Role>(&key).await? {
            Stored::Decoded(role) => role,
            // A stored role that does not decode grants nothing; it does not stand aside for
            // the built-in role of its name, as an absent one does.
            Stored::Undecodable => return Ok(None),
            Stored::Absent => match bootstrap::cluster_role(name) {
                Some(role) => role.clone(),
                None => return Ok(None),
            },
        };
        if role.aggregation.is_none() {
            return Ok(Some(role.rules));
        }
        let all = self.all().await?;
        let mut rules = Vec::new();
        let mut seen = BTreeSet::new();
        aggregate(all, &role, &mut seen, &mut rules);
        Ok(Some(rules))
    }
}

/// Appends the rules of every role `role`'s selectors pick, following aggregated roles; `seen`
/// breaks cycles.
fn aggregate<'a>(
    all: &'a BTreeMap<String, Role>,
    role: &'a Role,
    seen: &mut BTreeSet<&'a str>,
    out: &mut Vec<PolicyRule>,
) {
    if !seen.insert(role.name.as_str()) {
        return;
    }
    let Some(selectors) = &role.aggregation else {
        out.extend(role.rules.iter().cloned());
        return;
    };
    for candidate in all.values() {
        let picked = selectors.iter().flatten().any(|s| !s.is_empty() && candidate.selected_by(s));
        if picked {
            aggregate(all, candidate, seen, out);
        }
    }
}

impl RbacAuthorizer {
    /// Builds an authorizer reading RBAC objects under `prefix` (normally `/registry`).
    pub fn new(storage: SharedStorage, prefix: &str) -> Self {
        RbacAuthorizer { storage, prefix: prefix.trim_end_matches('/').to_string() }
    }

    /// Decides one request (or a SubjectAccessReview's attributes, expressed the same way).
    ///
    /// # Errors
    ///
    /// Returns the storage error when stored bindings cannot be read (the caller answers 500:
    /// kube-apiserver also fails closed).
    pub async fn authorize(&self, user: &UserInfo, request: &RequestInfo) -> Result<Decision, StorageError> {
        for binding in bootstrap::cluster_role_bindings() {
            if binding.applies_to(user, "") {
                if let Some(role) = bootstrap::cluster_role(&binding.role_ref.name) {
                    if role.allows(request) {
                        return Ok(Decision::Allow(allow_reason(binding, "", user)));
                    }
                }
            }
        }
        let mut roles = ClusterRoles { authorizer: self, all: None };
        for binding in self.read_all::<Binding>("clusterrolebindings", None).await? {
            if is_builtin(&binding) {
                continue;
            }
            if binding.role_ref.kind == "ClusterRole" && binding.applies_to(user, "") {
                if let Some(rules) = roles.rules(&binding.role_ref.name).await? {
                    let role = Role { rules, ..Role::default() };
                    if role.allows(request) {
                        return Ok(Decision::Allow(allow_reason(&binding, "", user)));
                    }
                }
            }
        }
        if request.is_resource_request && !request.namespace.is_empty() {
            let ns = request.namespace.as_str();
            for binding in self.read_all::<Binding>("rolebindings", Some(ns)).await? {
                if !binding.applies_to(user, ns) {
                    continue;
                }
                let rules = self.role_ref_rules(&mut roles, &binding, ns).await?;
                if rules.is_some_and(|rules| Role { rules, ..Role::default() }.allows_resource(request)) {
                    return Ok(Decision::Allow(allow_reason(&binding, ns, user)));
                }
            }
        }
        Ok(Decision::Deny)
    }

    async fn role_ref_rules(
        &self,
        roles: &mut ClusterRoles<'_>,
        binding: &Binding,
        ns: &str,
    ) -> Result<Option<Vec<PolicyRule>>, StorageError> {
        match binding.role_ref.kind.as_str() {
            "ClusterRole" => roles.rules(&binding.role_ref.name).await,
            "Role" => {
                let key = format!("{}/roles/{ns}/{}", self.prefix, binding.role_ref.name);
                Ok(self.read_one::<Role>(&key).await?.decoded().map(|r| r.rules))
            }
            _ => Ok(None),
        }
    }

    /// Returns every rule that applies to `user` in `namespace` ("" = cluster-wide only), for
    /// SelfSubjectRulesReview: rules of matching ClusterRoleBindings (built-in and stored), and
    /// of matching RoleBindings in the namespace.
    ///
    /// # Errors
    ///
    /// Returns the storage error when RBAC objects cannot be read.
    pub async fn rules_for(&self, user: &UserInfo, namespace: &str) -> Result<Vec<PolicyRule>, StorageError> {
        let mut out = Vec::new();
        for binding in bootstrap::cluster_role_bindings() {
            if binding.applies_to(user, "") {
                if let Some(role) = bootstrap::cluster_role(&binding.role_ref.name) {
                    out.extend(role.rules.iter().cloned());
                }
            }
        }
        let mut roles = ClusterRoles { authorizer: self, all: None };
        for binding in self.read_all::<Binding>("clusterrolebindings", None).await? {
            if !is_builtin(&binding) && binding.role_ref.kind == "ClusterRole" && binding.applies_to(user, "") {
                out.extend(roles.rules(&binding.role_ref.name).await?.unwrap_or_default());
            }
        }
        if !namespace.is_empty() {
            for binding in self.read_all::<Binding>("rolebindings", Some(namespace)).await? {
                if binding.applies_to(user, namespace) {
                    out.extend(self.role_ref_rules(&mut roles, &binding, namespace).await?.unwrap_or_default());
                }
            }
        }
        let mut seen = BTreeSet::new();
        out.retain(|r| seen.insert(format!("{r:?}")));
        Ok(out)
    }

    /// Writes the built-in ClusterRoles and ClusterRoleBindings, and the namespaced Role and
    /// RoleBinding of `kube-system`, into storage where absent (kube's
    /// RBAC post-start hook); existing objects, including edited ones, are left alone, so this
    /// is idempotent across restarts. Returns how many objects were created.
    ///
    /// # Errors
    ///
    /// Returns the first storage error other than "already exists".
    pub async fn write_bootstrap_policy(&self) -> Result<usize, StorageError> {
        let mut created = 0;
        let namespaced = bootstrap::namespaced_objects();
        let objects = bootstrap::cluster_role_objects()
            .iter()
            .map(|o| ("clusterroles", o))
            .chain(bootstrap::cluster_role_binding_objects().iter().map(|o| ("clusterrolebindings", o)))
            .chain(namespaced.iter().map(|(resource, o)| (*resource, o)));
        for (resource, object) in objects {
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            let key = match object["metadata"]["namespace"].as_str() {
                Some(ns) => format!("{}/{resource}/{ns}/{name}", self.prefix),
                None => format!("{}/{resource}/{name}", self.prefix),
            };
            let mut object = object.clone();
            object["metadata"]["uid"] = new_uid().into();
            object["metadata"]["creationTimestamp"] = ballast_apimachinery::clock::now_rfc3339().into();
            match self.storage.create(key.as_bytes(), serde_json::to_vec(&object).unwrap_or_default()).await {
                Ok(_) => created += 1,
                Err(StorageError::KeyExists) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(created)
    }

    async fn read_all<T: serde::de::DeserializeOwned>(
        &self,
        resource: &str,
        namespace: Option<&str>,
    ) -> Result<Vec<T>, StorageError> {
        let start = match namespace {
            Some(ns) => format!("{}/{resource}/{ns}/", self.prefix),
            None => format!("{}/{resource}/", self.prefix),
        };
        let page = self.storage.list(start.as_bytes(), &prefix_end(start.as_bytes()), 0, 0).await?;
        // An object that does not parse grants nothing (it would not have been accepted by
        // validation in the first place); it is logged and counted, not passed over silently.
        Ok(page.kvs.iter().filter_map(|kv| decode_rbac(resource, &kv.key, &kv.value)).collect())
    }

    async fn read_one<T: serde::de::DeserializeOwned>(&self, key: &str) -> Result<Stored<T>, StorageError> {
        let (kv, _) = self.storage.get(key.as_bytes()).await?;
        let Some(kv) = kv else { return Ok(Stored::Absent) };
        let resource = key.strip_prefix(&self.prefix).unwrap_or(key).trim_start_matches('/');
        let resource = resource.split('/').next().unwrap_or_default();
        Ok(decode_rbac(resource, &kv.key, &kv.value).map_or(Stored::Undecodable, Stored::Decoded))
    }
}

/// A stored RBAC object as read: absent, decoded, or present but undecodable (which grants
/// nothing and is not the same as absent).
#[derive(Debug)]
enum Stored<T> {
    Absent,
    Decoded(T),
    Undecodable,
}

impl<T> Stored<T> {
    fn decoded(self) -> Option<T> {
        match self {
            Stored::Decoded(t) => Some(t),
            Stored::Absent | Stored::Undecodable => None,
        }
    }
}

/// Decodes a stored RBAC object of `resource`; a failure is logged and counted.
fn decode_rbac<T: serde::de::DeserializeOwned>(resource: &str, key: &[u8], value: &[u8]) -> Option<T> {
    match serde_json::from_slice(value) {
        Ok(t) => Some(t),
        Err(e) => {
            decode_errors::record(&format!("{resource}.rbac.authorization.k8s.io"), key, &e.to_string());
            None
        }
    }
}

impl Authorizer for RbacAuthorizer {
    fn authorize<'a>(
        &'a self,
        user: &'a UserInfo,
        request: &'a RequestInfo,
    ) -> BoxFuture<'a, Result<Decision, StorageError>> {
        Box::pin(RbacAuthorizer::authorize(self, user, request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregation_unions_transitively_and_breaks_cycles() {
        let all: BTreeMap<String, Role> = bootstrap::cluster_roles().map(|r| (r.name.clone(), r.clone())).collect();
        let mut rules = Vec::new();
        aggregate(&all, &all["admin"], &mut BTreeSet::new(), &mut rules);
        let admin = Role { rules, ..Role::default() };
        let req = |m: &http::Method, p: &str| ballast_apiserver::request_info::parse(m, p, None);
        // From system:aggregate-to-view (via view → edit → admin), -to-edit and -to-admin.
        assert!(admin.allows(&req(&http::Method::GET, "/api/v1/namespaces/a/configmaps")));
        assert!(admin.allows(&req(&http::Method::DELETE, "/api/v1/namespaces/a/secrets/s")));
        assert!(admin.allows(&req(&http::Method::POST, "/apis/rbac.authorization.k8s.io/v1/namespaces/a/rolebindings")));
        let mut rules = Vec::new();
        aggregate(&all, &all["view"], &mut BTreeSet::new(), &mut rules);
        let view = Role { rules, ..Role::default() };
        assert!(view.allows(&req(&http::Method::GET, "/api/v1/namespaces/a/configmaps")));
        assert!(!view.allows(&req(&http::Method::GET, "/api/v1/namespaces/a/secrets")));
        assert!(!view.allows(&req(&http::Method::POST, "/api/v1/namespaces/a/configmaps")));
        // A role that selects itself does not loop.
        let mut looped = all["view"].clone();
        looped.labels.insert("rbac.authorization.k8s.io/aggregate-to-view".into(), "true".into());
        let mut with_loop = all.clone();
        with_loop.insert("view".into(), looped);
        let mut rules = Vec::new();
        aggregate(&with_loop, &with_loop["view"], &mut BTreeSet::new(), &mut rules);
        assert!(!rules.is_empty());
    }

    #[test]
    fn stored_copies_of_builtin_bindings_are_recognised() {
        for object in bootstrap::cluster_role_binding_objects() {
            let stored: Binding = serde_json::from_value(object.clone()).expect("binding");
            assert!(is_builtin(&stored), "{}", stored.name);
        }
        let mut widened: Binding =
            serde_json::from_value(bootstrap::cluster_role_binding_objects()[0].clone()).expect("binding");
        widened.subjects.push(Subject { kind: "User".into(), name: "mallory".into(), namespace: String::new() });
        assert!(!is_builtin(&widened), "an edited built-in binding is evaluated from storage");
    }

    #[test]
    fn undecodable_rbac_objects_are_counted_and_grant_nothing() {
        let resource = "rolebindings.rbac.authorization.k8s.io";
        let before = decode_errors::count(resource);
        let got: Option<Binding> = decode_rbac("rolebindings", b"/registry/rolebindings/ns/rb", b"\x0a\x0bk8s\x00");
        assert!(got.is_none());
        assert_eq!(decode_errors::count(resource), before + 1);
        assert!(Stored::<Role>::Undecodable.decoded().is_none());
    }

    #[test]
    fn allow_reasons_read_like_kube() {
        let b: Binding = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "rb"}, "roleRef": {"kind": "Role", "name": "r"},
            "subjects": [{"kind": "ServiceAccount", "name": "bot"}]
        }))
        .expect("binding");
        let user = UserInfo::new("system:serviceaccount:ns:bot", "", vec![]);
        assert_eq!(
            allow_reason(&b, "ns", &user),
            r#"RBAC: allowed by RoleBinding "rb/ns" of Role "r" to ServiceAccount "bot/ns""#
        );
    }
}
