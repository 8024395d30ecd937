//! The strategic-merge-patch tags of the built-in types (`patchStrategy`, `patchMergeKey` on
//! the upstream Go fields), which k8s-openapi's schemas leave out and kube-apiserver publishes
//! as `x-kubernetes-patch-strategy` / `x-kubernetes-patch-merge-key`.
//!
//! kubectl's client-side apply builds its three-way strategic merge patch from the OpenAPI v3
//! schema when the PATCH operation accepts `application/strategic-merge-patch+json`. Without these
//! tags it would treat `containers`, `env`, `ports`... as atomic lists and could never remove an
//! element a manifest dropped. The registry's object schemas ([`crate::protobuf::Message`]) carry
//! the same tags for the kinds they describe and are applied on top (see
//! [`super::schemas`]); this table covers the kinds that have none yet.

/// `(definition, property, strategy, merge key)`.
pub(super) const PATCH_TAGS: &[(&str, &str, &str, &str)] = &[
    ("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "finalizers", "merge", ""),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "ownerReferences", "merge", "uid"),
    ("io.k8s.api.core.v1.PodSpec", "volumes", "merge,retainKeys", "name"),
    ("io.k8s.api.core.v1.PodSpec", "initContainers", "merge", "name"),
    ("io.k8s.api.core.v1.PodSpec", "containers", "merge", "name"),
    ("io.k8s.api.core.v1.PodSpec", "ephemeralContainers", "merge", "name"),
    ("io.k8s.api.core.v1.PodSpec", "imagePullSecrets", "merge", "name"),
    ("io.k8s.api.core.v1.PodSpec", "hostAliases", "merge", "ip"),
    ("io.k8s.api.core.v1.PodSpec", "topologySpreadConstraints", "merge", "topologyKey"),
    ("io.k8s.api.core.v1.PodSpec", "schedulingGates", "merge", "name"),
    ("io.k8s.api.core.v1.PodSpec", "resourceClaims", "merge,retainKeys", "name"),
    ("io.k8s.api.core.v1.Container", "ports", "merge", "containerPort"),
    ("io.k8s.api.core.v1.Container", "env", "merge", "name"),
    ("io.k8s.api.core.v1.Container", "volumeMounts", "merge", "mountPath"),
    ("io.k8s.api.core.v1.Container", "volumeDevices", "merge", "devicePath"),
    ("io.k8s.api.core.v1.EphemeralContainer", "ports", "merge", "containerPort"),
    ("io.k8s.api.core.v1.EphemeralContainer", "env", "merge", "name"),
    ("io.k8s.api.core.v1.EphemeralContainer", "volumeMounts", "merge", "mountPath"),
    ("io.k8s.api.core.v1.EphemeralContainer", "volumeDevices", "merge", "devicePath"),
    ("io.k8s.api.core.v1.PodStatus", "conditions", "merge", "type"),
    ("io.k8s.api.core.v1.PodStatus", "podIPs", "merge", "ip"),
    ("io.k8s.api.core.v1.PodStatus", "hostIPs", "merge", "ip"),
    ("io.k8s.api.core.v1.PodStatus", "resourceClaimStatuses", "merge,retainKeys", "name"),
    ("io.k8s.api.core.v1.NodeSpec", "podCIDRs", "merge", ""),
    ("io.k8s.api.core.v1.NodeStatus", "conditions", "merge", "type"),
    ("io.k8s.api.core.v1.NodeStatus", "addresses", "merge", "type"),
    ("io.k8s.api.core.v1.NamespaceStatus", "conditions", "merge", "type"),
    ("io.k8s.api.core.v1.PersistentVolumeClaimStatus", "conditions", "merge", "type"),
    ("io.k8s.api.core.v1.ReplicationControllerStatus", "conditions", "merge", "type"),
    ("io.k8s.api.core.v1.ComponentStatus", "conditions", "merge", "type"),
    ("io.k8s.api.core.v1.ServiceSpec", "ports", "merge", "port"),
    ("io.k8s.api.core.v1.ServiceStatus", "conditions", "merge", "type"),
    ("io.k8s.api.core.v1.ServiceAccount", "secrets", "merge", "name"),
    ("io.k8s.api.apps.v1.DeploymentSpec", "strategy", "retainKeys", ""),
    ("io.k8s.api.apps.v1.DeploymentStatus", "conditions", "merge", "type"),
    ("io.k8s.api.apps.v1.DaemonSetStatus", "conditions", "merge", "type"),
    ("io.k8s.api.apps.v1.ReplicaSetStatus", "conditions", "merge", "type"),
    ("io.k8s.api.apps.v1.StatefulSetStatus", "conditions", "merge", "type"),
    ("io.k8s.api.batch.v1.JobStatus", "conditions", "merge", "type"),
    ("io.k8s.api.policy.v1.PodDisruptionBudgetSpec", "selector", "replace", ""),
    ("io.k8s.api.policy.v1.PodDisruptionBudgetStatus", "conditions", "merge", "type"),
    ("io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerStatus", "conditions", "merge", "type"),
    ("io.k8s.api.storage.v1.CSINodeSpec", "drivers", "merge", "name"),
];
