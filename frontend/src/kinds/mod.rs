//! The built-in kinds: one [`ResourceKind`] row per resource, grouped by API group, and the
//! group table discovery serves them under.
//!
//! The rows follow kube-apiserver 1.33 with its default feature gates: resource names, kinds,
//! scope, verbs, short names, categories, subresources and storage key prefixes (its
//! `SpecialDefaultResourcePrefixes` plus the aggregator's and apiextensions' group-qualified
//! prefixes). Kinds with rules of their own carry a
//! [`Strategy`](ballast_apiserver::registry::Strategy); the pod template rules that workloads
//! share live in [`pod_spec`].

pub mod admission;
pub mod apps;
pub mod batch;
pub mod categories;
pub mod cluster;
pub mod conversion;
pub mod core;
pub mod hpa_v1;
pub mod networking;
pub mod pod_spec;
pub mod rbac;
pub mod service;

use std::sync::LazyLock;

pub use self::core::{configmaps, namespaces, secrets, CONFIGMAPS, NAMESPACES, NAMESPACE_NAME_LABEL, SECRETS};

use ballast_apiserver::registry::{ApiGroup, ResourceKind};
use ballast_apiserver::served::Version;

/// The version of kube-apiserver whose built-in API the rows follow, reported at `/version`
/// and in the OpenAPI documents.
pub const KUBERNETES_VERSION: Version = Version { major: 1, minor: 33, patch: 0 };

/// The served groups, in kube-apiserver's discovery order (its group priorities); the first
/// version of each is the preferred one.
pub static GROUPS: &[ApiGroup] = &[
    ApiGroup { name: "", versions: &["v1"] },
    ApiGroup { name: "apiregistration.k8s.io", versions: &["v1"] },
    ApiGroup { name: "apps", versions: &["v1"] },
    ApiGroup { name: "events.k8s.io", versions: &["v1"] },
    ApiGroup { name: "autoscaling", versions: &["v2", "v1"] },
    ApiGroup { name: "batch", versions: &["v1"] },
    ApiGroup { name: "certificates.k8s.io", versions: &["v1"] },
    ApiGroup { name: "networking.k8s.io", versions: &["v1"] },
    ApiGroup { name: "policy", versions: &["v1"] },
    ApiGroup { name: "rbac.authorization.k8s.io", versions: &["v1"] },
    ApiGroup { name: "storage.k8s.io", versions: &["v1"] },
    ApiGroup { name: "admissionregistration.k8s.io", versions: &["v1"] },
    ApiGroup { name: "apiextensions.k8s.io", versions: &["v1"] },
    ApiGroup { name: "scheduling.k8s.io", versions: &["v1"] },
    ApiGroup { name: "coordination.k8s.io", versions: &["v1"] },
    ApiGroup { name: "node.k8s.io", versions: &["v1"] },
    ApiGroup { name: "discovery.k8s.io", versions: &["v1"] },
    ApiGroup { name: "flowcontrol.apiserver.k8s.io", versions: &["v1"] },
];

/// Every served kind.
pub static ALL: LazyLock<Vec<&'static ResourceKind>> = LazyLock::new(|| {
    [core::ROWS, apps::ROWS, batch::ROWS, rbac::ROWS, networking::ROWS, admission::ROWS, cluster::ROWS]
        .into_iter()
        .flatten()
        .copied()
        .collect()
});

/// Returns the kinds of one group version, in table order.
pub fn of<'a>(group: &'a str, version: &'a str) -> impl Iterator<Item = &'static ResourceKind> + 'a {
    ALL.iter().copied().filter(move |k| k.group == group && k.version == version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_is_in_a_served_group_and_unique() {
        let mut seen = std::collections::HashSet::new();
        for k in ALL.iter() {
            assert!(seen.insert((k.group, k.version, k.resource)), "duplicate row {}/{}", k.group, k.resource);
            let group = GROUPS.iter().find(|g| g.name == k.group).expect("group listed");
            assert!(group.versions.contains(&k.version), "{}/{}", k.group, k.version);
            assert!(k.field_selectors.iter().any(|(n, _)| *n == "metadata.name"), "{}", k.resource);
        }
        // Every listed group version serves something.
        for g in GROUPS {
            for v in g.versions {
                assert!(of(g.name, v).next().is_some(), "{}/{v} is empty", g.name);
            }
        }
    }

    /// Discovery lists `serviceaccounts/token` as kube-apiserver does (`kubectl api-resources`
    /// and clients that check for TokenRequest support read it).
    #[test]
    fn service_accounts_list_their_token_subresource() {
        let sa = ALL.iter().find(|k| k.group.is_empty() && k.resource == "serviceaccounts").expect("row");
        let subs = ballast_apiserver::served::subresources(sa);
        let token: Vec<_> = subs.iter().map(|s| (s.name, s.group, s.version, s.kind, s.verbs)).collect();
        assert_eq!(token, [("token", "authentication.k8s.io", "v1", "TokenRequest", &["create"][..])]);
    }

    #[test]
    fn storage_prefixes_follow_kube() {
        let key = |g: &str, r: &str| {
            let k = ALL.iter().find(|k| k.group == g && k.resource == r).expect("row");
            k.collection_prefix("/registry", "")
        };
        assert_eq!(key("", "services"), "/registry/services/specs/");
        assert_eq!(key("", "endpoints"), "/registry/services/endpoints/");
        assert_eq!(key("", "nodes"), "/registry/minions/");
        assert_eq!(key("", "replicationcontrollers"), "/registry/controllers/");
        assert_eq!(key("networking.k8s.io", "ingresses"), "/registry/ingress/");
        assert_eq!(key("events.k8s.io", "events"), key("", "events"));
        assert_eq!(key("apiregistration.k8s.io", "apiservices"), "/registry/apiregistration.k8s.io/apiservices/");
        assert_eq!(
            key("apiextensions.k8s.io", "customresourcedefinitions"),
            "/registry/apiextensions.k8s.io/customresourcedefinitions/"
        );
        assert_eq!(key("coordination.k8s.io", "leases"), "/registry/leases/");
        assert_eq!(key("apps", "deployments"), "/registry/deployments/");
    }
}
