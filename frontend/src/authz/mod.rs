//! Authorization: may this user do this request?
//!
//! * [`rbac`]: the RBAC types (rules, subjects, role references) and rule matching, as
//!   `k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac` defines them.
//! * [`bootstrap`]: the built-in ClusterRoles and ClusterRoleBindings kube-apiserver creates at
//!   start (cluster-admin for `system:masters`, discovery for authenticated users, the public
//!   health and version paths for everyone).
//!
//! [`RbacAuthorizer`] consults the built-in bindings first (no storage read for the admin or
//! for discovery), then the Role/ClusterRole/RoleBinding/ClusterRoleBinding objects in storage
//! under kube-apiserver's keys (`/registry/clusterrolebindings/<name>`,
//! `/registry/rolebindings/<ns>/<name>`, ...). It reads storage on each request that the built-in
//! roles do not allow; a watch-fed cache is the next step when RBAC objects are served over REST.

pub mod bootstrap;
pub mod rbac;

use crate::authn::UserInfo;
use crate::request_info::RequestInfo;
use crate::storage::{etcd3::prefix_end, Etcd3Storage, StorageError};

use rbac::{Binding, Role};

/// The authorizer's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed; carries the rule's source for logs.
    Allow(String),
    /// No rule allows it.
    Deny,
}

/// RBAC over built-in and stored roles and bindings.
#[derive(Debug, Clone)]
pub struct RbacAuthorizer {
    storage: Etcd3Storage,
    prefix: String,
}

impl RbacAuthorizer {
    /// Builds an authorizer reading RBAC objects under `prefix` (normally `/registry`).
    pub fn new(storage: Etcd3Storage, prefix: &str) -> Self {
        RbacAuthorizer { storage, prefix: prefix.trim_end_matches('/').to_string() }
    }

    /// Decides one request.
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
                        return Ok(Decision::Allow(format!("ClusterRoleBinding {}", binding.name)));
                    }
                }
            }
        }
        for binding in self.read_bindings("clusterrolebindings", None).await? {
            if binding.role_ref.kind == "ClusterRole" && binding.applies_to(user, "") {
                if let Some(role) = self.cluster_role(&binding.role_ref.name).await? {
                    if role.allows(request) {
                        return Ok(Decision::Allow(format!("ClusterRoleBinding {}", binding.name)));
                    }
                }
            }
        }
        if request.is_resource_request && !request.namespace.is_empty() {
            let ns = request.namespace.as_str();
            for binding in self.read_bindings("rolebindings", Some(ns)).await? {
                if !binding.applies_to(user, ns) {
                    continue;
                }
                let role = match binding.role_ref.kind.as_str() {
                    "ClusterRole" => self.cluster_role(&binding.role_ref.name).await?,
                    "Role" => self.read_role(&format!("{}/roles/{ns}/{}", self.prefix, binding.role_ref.name)).await?,
                    _ => None,
                };
                if role.is_some_and(|r| r.allows_resource(request)) {
                    return Ok(Decision::Allow(format!("RoleBinding {ns}/{}", binding.name)));
                }
            }
        }
        Ok(Decision::Deny)
    }

    async fn read_bindings(&self, resource: &str, namespace: Option<&str>) -> Result<Vec<Binding>, StorageError> {
        let start = match namespace {
            Some(ns) => format!("{}/{resource}/{ns}/", self.prefix),
            None => format!("{}/{resource}/", self.prefix),
        };
        let page = self.storage.list(start.as_bytes(), &prefix_end(start.as_bytes()), 0, 0).await?;
        // An object that does not parse grants nothing, as in kube (it would not have been
        // accepted by validation in the first place).
        Ok(page.kvs.iter().filter_map(|kv| serde_json::from_slice(&kv.value).ok()).collect())
    }

    async fn cluster_role(&self, name: &str) -> Result<Option<Role>, StorageError> {
        if let Some(role) = self.read_role(&format!("{}/clusterroles/{name}", self.prefix)).await? {
            return Ok(Some(role));
        }
        Ok(bootstrap::cluster_role(name))
    }

    async fn read_role(&self, key: &str) -> Result<Option<Role>, StorageError> {
        let (kv, _) = self.storage.get(key.as_bytes()).await?;
        Ok(kv.and_then(|kv| serde_json::from_slice(&kv.value).ok()))
    }
}

/// Returns kube's reason text for a denied request (`forbiddenMessage`).
pub fn forbidden_reason(user: &UserInfo, request: &RequestInfo) -> String {
    if !request.is_resource_request {
        return format!("User \"{}\" cannot {} path \"{}\"", user.name, request.verb, request.path);
    }
    let mut resource = request.resource.clone();
    if !request.subresource.is_empty() {
        resource = format!("{resource}/{}", request.subresource);
    }
    if request.namespace.is_empty() {
        format!(
            "User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\" at the cluster scope",
            user.name, request.verb, request.api_group
        )
    } else {
        format!(
            "User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\" in the namespace \"{}\"",
            user.name, request.verb, request.api_group, request.namespace
        )
    }
}
