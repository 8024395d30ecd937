//! Authorization: may this user do this request? The chain's filters ask an [`Authorizer`]
//! (kube's `authorizer.Authorizer`); the built-in API gives its RBAC authorizer.

use futures::future::BoxFuture;

use crate::authn::UserInfo;
use crate::request_info::RequestInfo;
use crate::storage::StorageError;

/// Decides whether a user may make a request.
pub trait Authorizer: Send + Sync + std::fmt::Debug {
    /// Returns the decision on `request` by `user`.
    ///
    /// # Errors
    ///
    /// Storage errors, when the decision needs stored policy that cannot be read.
    fn authorize<'a>(
        &'a self,
        user: &'a UserInfo,
        request: &'a RequestInfo,
    ) -> BoxFuture<'a, Result<Decision, StorageError>>;
}

/// The authorizer's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed; carries kube's reason (`RBAC: allowed by ClusterRoleBinding "x" of ...`).
    Allow(String),
    /// No rule allows it.
    Deny,
}

impl Decision {
    /// Returns whether the request is allowed.
    pub fn allowed(&self) -> bool {
        matches!(self, Decision::Allow(_))
    }

    /// Returns the reason text (empty for a plain denial, as RBAC gives none).
    pub fn reason(&self) -> &str {
        match self {
            Decision::Allow(reason) => reason,
            Decision::Deny => "",
        }
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
