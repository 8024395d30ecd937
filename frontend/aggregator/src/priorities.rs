//! The group and version priorities of the built-in group versions, which kube-apiserver gives
//! their Local APIServices (and so the order of `/apis`), and those of custom resources.

/// An APIService's `groupPriorityMinimum` and `versionPriority`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Priority {
    /// Orders groups in discovery, highest first.
    pub group: i64,
    /// Orders versions within a group, highest first.
    pub version: i64,
}

/// The priorities of CustomResourceDefinition group versions (kube's CRD registration):
/// below every built-in group; versions of equal priority then sort in Kubernetes version
/// order.
pub const CUSTOM_RESOURCES: Priority = Priority { group: 1000, version: 100 };

/// kube-apiserver's table: (group, version, group priority, version priority). Groups missing
/// here and not from a definition get no Local APIService, as in kube.
const BUILT_IN: &[(&str, &str, i64, i64)] = &[
    ("", "v1", 18000, 1),
    ("apiregistration.k8s.io", "v1", 18000, 15),
    ("apps", "v1", 17800, 15),
    ("events.k8s.io", "v1", 17750, 15),
    ("authentication.k8s.io", "v1", 17700, 15),
    ("authorization.k8s.io", "v1", 17600, 15),
    ("autoscaling", "v2", 17500, 30),
    ("autoscaling", "v1", 17500, 15),
    ("batch", "v1", 17400, 15),
    ("certificates.k8s.io", "v1", 17300, 15),
    ("networking.k8s.io", "v1", 17200, 15),
    ("policy", "v1", 17100, 15),
    ("rbac.authorization.k8s.io", "v1", 17000, 15),
    ("storage.k8s.io", "v1", 16800, 15),
    ("apiextensions.k8s.io", "v1", 16700, 15),
    ("admissionregistration.k8s.io", "v1", 16700, 15),
    ("scheduling.k8s.io", "v1", 16600, 15),
    ("coordination.k8s.io", "v1", 16500, 15),
    ("node.k8s.io", "v1", 16300, 15),
    ("discovery.k8s.io", "v1", 16200, 15),
    ("resource.k8s.io", "v1beta2", 16200, 15),
    ("flowcontrol.apiserver.k8s.io", "v1", 16100, 21),
];

/// The priority of a built-in group version, if it is one.
pub fn built_in(group: &str, version: &str) -> Option<Priority> {
    BUILT_IN
        .iter()
        .find(|(g, v, _, _)| *g == group && *v == version)
        .map(|&(_, _, group, version)| Priority { group, version })
}
