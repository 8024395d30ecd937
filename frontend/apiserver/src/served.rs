//! What a server serves besides the rows of its served kinds, shared by the routes that serve
//! it and the OpenAPI documents that describe it: the shape of resources answered without
//! storage ([`VirtualResource`]), each kind's subresources, and the form of the Kubernetes
//! version it reports.
//!
//! It sits below both `routes` and the OpenAPI documents (the built-in API's), so neither needs
//! the other to learn what exists.

use crate::registry::ResourceKind;

/// The Kubernetes version a server reports at `/version` (kubectl warns past one minor of
/// skew, and picks its own version by it): the version of the API surface it serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Version {
    /// Major version (`1`).
    pub major: u32,
    /// Minor version (`33`).
    pub minor: u32,
    /// Patch version (`0`).
    pub patch: u32,
}

impl Version {
    /// Returns `v<major>.<minor>.<patch>`, kube's `gitVersion`.
    pub fn git_version(self) -> String {
        format!("v{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// A resource answered without storage (the built-in API's access reviews), listed by
/// discovery next to the served kinds.
#[derive(Debug, Clone, Copy)]
pub struct VirtualResource {
    /// API group.
    pub group: &'static str,
    /// API version.
    pub version: &'static str,
    /// Plural resource.
    pub resource: &'static str,
    /// Singular resource.
    pub singular: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Whether it lives in a namespace.
    pub namespaced: bool,
    /// Verbs (only `create`).
    pub verbs: &'static [&'static str],
}

/// A served subresource as discovery lists it (OpenAPI's paths come from the same list).
#[derive(Debug, Clone, Copy)]
pub struct Sub {
    /// The subresource's name (`status`, `scale`, ...).
    pub name: &'static str,
    /// The group of the kind it answers with.
    pub group: &'static str,
    /// The version of the kind it answers with.
    pub version: &'static str,
    /// The kind it answers with (`Scale` for `/scale`).
    pub kind: &'static str,
    /// Its verbs.
    pub verbs: &'static [&'static str],
}

const SUBRESOURCE_VERBS: &[&str] = &["get", "patch", "update"];

/// The subresources of a kind, sorted by name as kube lists them.
pub fn subresources(k: &ResourceKind) -> Vec<Sub> {
    let mut out = Vec::new();
    if k.binder.is_some() {
        out.push(Sub { name: "binding", group: "", version: "v1", kind: "Binding", verbs: &["create"] });
    }
    if k.has_finalize() {
        out.push(Sub { name: "finalize", group: k.group, version: k.version, kind: k.kind, verbs: &["update"] });
    }
    if k.has_scale() {
        out.push(Sub { name: "scale", group: "autoscaling", version: "v1", kind: "Scale", verbs: SUBRESOURCE_VERBS });
    }
    if k.has_status() {
        out.push(Sub { name: "status", group: k.group, version: k.version, kind: k.kind, verbs: SUBRESOURCE_VERBS });
    }
    if k.has_token() {
        out.push(Sub {
            name: "token",
            group: "authentication.k8s.io",
            version: "v1",
            kind: "TokenRequest",
            verbs: &["create"],
        });
    }
    out
}
