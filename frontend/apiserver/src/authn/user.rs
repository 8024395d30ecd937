//! [`UserInfo`]: an authenticated identity, and kube's well-known user and group names.

use std::collections::BTreeMap;

/// The name of the anonymous user.
pub const ANONYMOUS_USER: &str = "system:anonymous";
/// The group of anonymous requests.
pub const UNAUTHENTICATED_GROUP: &str = "system:unauthenticated";
/// The group every authenticated user is in.
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";
/// The group that is allowed everything (bound to cluster-admin, exempt from max-in-flight).
pub const MASTERS_GROUP: &str = "system:masters";

/// An authenticated identity (`user.Info`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    /// The user name.
    pub name: String,
    /// The uid, may be empty.
    pub uid: String,
    /// The groups.
    pub groups: Vec<String>,
    /// Extra attributes (`user.Info.GetExtra`), set by impersonation's `Impersonate-Extra-*`.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// Returns a user without extra attributes.
    pub fn new(name: impl Into<String>, uid: impl Into<String>, groups: Vec<String>) -> Self {
        UserInfo { name: name.into(), uid: uid.into(), groups, extra: BTreeMap::new() }
    }

    /// Returns the anonymous user.
    pub fn anonymous() -> Self {
        UserInfo::new(ANONYMOUS_USER, "", vec![UNAUTHENTICATED_GROUP.into()])
    }

    /// Returns whether the user is in `group`.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
}
