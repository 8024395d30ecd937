//! The remaining groups: autoscaling (v2 preferred, v1 over the same storage), events.k8s.io
//! (over core events' storage), certificates, policy, storage, scheduling, coordination, node
//! and discovery, with the strategies of HPAs, PodDisruptionBudgets, Leases, StorageClasses
//! and PriorityClasses.

use serde_json::{json, Value};

use super::categories::ALL_CATEGORY;
use super::conversion::{EVENTS_V1, HPA_V1};
use ballast_apiserver::error::FieldError;
use ballast_apiserver::registry::strategy::{default_at, get_path, Object, Strategy};
use ballast_apiserver::registry::validation::non_negative;
use ballast_apiserver::registry::{NameRule, ResourceKind, Subresources};

const STATUS: Subresources = Subresources::STATUS;

/// The rows of these groups.
pub static ROWS: &[&ResourceKind] =
    &[
        &ResourceKind::row(
            "autoscaling",
            "v2",
            "horizontalpodautoscalers",
            "HorizontalPodAutoscaler",
            "horizontalpodautoscaler",
            true,
        )
        .short(&["hpa"])
        .categories(ALL_CATEGORY)
        .sub(STATUS)
        .generation(&["spec"])
        .rules(&HpaStrategy),
        &ResourceKind::row(
            "autoscaling",
            "v1",
            "horizontalpodautoscalers",
            "HorizontalPodAutoscaler",
            "horizontalpodautoscaler",
            true,
        )
        .short(&["hpa"])
        .categories(ALL_CATEGORY)
        .sub(STATUS)
        .generation(&["spec"])
        .converted(&HPA_V1)
        .rules(&HpaStrategy),
        &ResourceKind::row("events.k8s.io", "v1", "events", "Event", "event", true)
            .short(&["ev"])
            .with_fields(&[
                "eventTime",
                "series",
                "reportingController",
                "reportingInstance",
                "action",
                "reason",
                "regarding",
                "related",
                "note",
                "type",
                "deprecatedSource",
                "deprecatedFirstTimestamp",
                "deprecatedLastTimestamp",
                "deprecatedCount",
            ])
            .converted(&EVENTS_V1),
        &ResourceKind::row(
            "certificates.k8s.io",
            "v1",
            "certificatesigningrequests",
            "CertificateSigningRequest",
            "certificatesigningrequest",
            false,
        )
        .short(&["csr"])
        .names(NameRule::PathSegment)
        .sub(STATUS),
        &ResourceKind::row("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", "poddisruptionbudget", true)
            .short(&["pdb"])
            .sub(STATUS)
            .generation(&["spec"])
            .rules(&PdbStrategy),
        &ResourceKind::row("storage.k8s.io", "v1", "csidrivers", "CSIDriver", "csidriver", false)
            .with_fields(&["spec"]),
        &ResourceKind::row("storage.k8s.io", "v1", "csinodes", "CSINode", "csinode", false).with_fields(&["spec"]),
        &ResourceKind::row(
            "storage.k8s.io",
            "v1",
            "csistoragecapacities",
            "CSIStorageCapacity",
            "csistoragecapacity",
            true,
        )
        .with_fields(&["nodeTopology", "storageClassName", "capacity", "maximumVolumeSize"]),
        &ResourceKind::row("storage.k8s.io", "v1", "storageclasses", "StorageClass", "storageclass", false)
            .short(&["sc"])
            .with_fields(&[
                "provisioner",
                "parameters",
                "reclaimPolicy",
                "mountOptions",
                "allowVolumeExpansion",
                "volumeBindingMode",
                "allowedTopologies",
            ])
            .rules(&StorageClassStrategy),
        &ResourceKind::row("storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", "volumeattachment", false)
            .sub(STATUS),
        &ResourceKind::row("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", "priorityclass", false)
            .short(&["pc"])
            .with_fields(&["value", "globalDefault", "description", "preemptionPolicy"])
            .rules(&PriorityClassStrategy),
        &ResourceKind::row("coordination.k8s.io", "v1", "leases", "Lease", "lease", true)
            .with_fields(&["spec"])
            .rules(&LeaseStrategy),
        &ResourceKind::row("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", "runtimeclass", false)
            .with_fields(&["handler", "overhead", "scheduling"]),
        &ResourceKind::row("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", "endpointslice", true)
            .with_fields(&["addressType", "endpoints", "ports"])
            .generation(&["addressType", "endpoints", "ports"]),
    ];

/// HorizontalPodAutoscalers (rules on the stored autoscaling/v2 form): minReplicas 1, a CPU
/// 80% target when no metric is given, kube's default rules in a behavior that is given.
#[derive(Debug)]
struct HpaStrategy;

impl Strategy for HpaStrategy {
    fn prepare_for_create(&self, obj: &mut Object) {
        default_at(obj, &["spec", "minReplicas"], 1.into());
        let no_metrics = get_path(obj, &["spec", "metrics"]).and_then(Value::as_array).is_none_or(Vec::is_empty);
        if no_metrics {
            let cpu = json!([{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 80}}}]);
            ballast_apiserver::registry::strategy::map_field_mut(obj, "spec").insert("metrics".into(), cpu);
        }
        // kube fills in the rules of a behavior that is given, field by field; an HPA without
        // one keeps none.
        if get_path(obj, &["spec", "behavior"]).is_some_and(Value::is_object) {
            let up = json!({"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
                {"type": "Pods", "value": 4, "periodSeconds": 15},
                {"type": "Percent", "value": 100, "periodSeconds": 15}]});
            let down =
                json!({"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]});
            for (direction, defaults) in [("scaleUp", up), ("scaleDown", down)] {
                let Value::Object(defaults) = defaults else { continue };
                for (k, v) in defaults {
                    default_at(obj, &["spec", "behavior", direction, k.as_str()], v);
                }
            }
        }
        // The v1 form's annotations are never stored (kube drops them on every write).
        super::hpa_v1::drop_round_trip(obj);
        super::hpa_v1::v2_status_zeros(obj);
    }

    fn validate(&self, obj: &Object) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let target = get_path(obj, &["spec", "scaleTargetRef"]).cloned().unwrap_or(Value::Null);
        for f in ["kind", "name"] {
            if target[f].as_str().unwrap_or("").is_empty() {
                errs.push(FieldError::required(format!("spec.scaleTargetRef.{f}"), ""));
            }
        }
        let min = get_path(obj, &["spec", "minReplicas"]).and_then(Value::as_i64).unwrap_or(1);
        let max = get_path(obj, &["spec", "maxReplicas"]).and_then(Value::as_i64).unwrap_or(0);
        if max < 1 {
            errs.push(FieldError::invalid("spec.maxReplicas", max, "must be greater than or equal to 1"));
        } else if min > max {
            errs.push(FieldError::invalid("spec.maxReplicas", max, "must be greater than or equal to `minReplicas`"));
        }
        errs
    }

    fn prepare_for_update(&self, new: &mut Object, _old: &Object) {
        self.prepare_for_create(new);
    }
}

/// PodDisruptionBudgets: at most one of minAvailable and maxUnavailable.
#[derive(Debug)]
struct PdbStrategy;

impl Strategy for PdbStrategy {
    fn prepare_for_create(&self, obj: &mut Object) {
        obj.insert(
            "status".into(),
            json!({"currentHealthy": 0, "desiredHealthy": 0, "disruptionsAllowed": 0, "expectedPods": 0}),
        );
    }

    fn validate(&self, obj: &Object) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
        if !spec["minAvailable"].is_null() && !spec["maxUnavailable"].is_null() {
            errs.push(FieldError::invalid("spec", spec.clone(), "minAvailable and maxUnavailable cannot be both set"));
        }
        for f in ["minAvailable", "maxUnavailable"] {
            errs.extend(non_negative(&format!("spec.{f}"), spec.get(f)));
        }
        errs
    }
}

/// Leases: positive durations, non-negative transitions.
#[derive(Debug)]
struct LeaseStrategy;

impl Strategy for LeaseStrategy {
    fn validate(&self, obj: &Object) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if let Some(d) = get_path(obj, &["spec", "leaseDurationSeconds"]).and_then(Value::as_i64) {
            if d <= 0 {
                errs.push(FieldError::invalid("spec.leaseDurationSeconds", d, "must be greater than 0"));
            }
        }
        errs.extend(non_negative("spec.leaseTransitions", get_path(obj, &["spec", "leaseTransitions"])));
        errs
    }
}

/// StorageClasses: reclaimPolicy Delete and volumeBindingMode Immediate; provisioner required.
#[derive(Debug)]
struct StorageClassStrategy;

impl Strategy for StorageClassStrategy {
    fn prepare_for_create(&self, obj: &mut Object) {
        default_at(obj, &["reclaimPolicy"], "Delete".into());
        default_at(obj, &["volumeBindingMode"], "Immediate".into());
    }

    fn validate(&self, obj: &Object) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if obj.get("provisioner").and_then(Value::as_str).unwrap_or("").is_empty() {
            errs.push(FieldError::required("provisioner", ""));
        }
        errs
    }
}

/// PriorityClasses: preemptionPolicy PreemptLowerPriority.
#[derive(Debug)]
struct PriorityClassStrategy;

impl Strategy for PriorityClassStrategy {
    fn prepare_for_create(&self, obj: &mut Object) {
        default_at(obj, &["preemptionPolicy"], "PreemptLowerPriority".into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Object {
        match v {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    #[test]
    fn hpa_defaults_and_bounds() {
        let mut hpa = obj(json!({"spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3}}));
        HpaStrategy.prepare_for_create(&mut hpa);
        assert_eq!(hpa["spec"]["minReplicas"], 1);
        assert_eq!(hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"], 80);
        assert!(hpa["spec"].get("behavior").is_none(), "no behavior given, none made");
        assert!(HpaStrategy.validate(&hpa).is_empty());
        hpa["spec"]["behavior"] = json!({"scaleUp": {"selectPolicy": "Min"}});
        HpaStrategy.prepare_for_create(&mut hpa);
        assert_eq!(
            hpa["spec"]["behavior"],
            json!({"scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Min", "policies": [
                {"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}]},
                "scaleDown": {"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}})
        );
        hpa["spec"]["maxReplicas"] = 0.into();
        assert_eq!(HpaStrategy.validate(&hpa).len(), 1);
    }

    #[test]
    fn pdb_and_lease_rules() {
        let both = obj(json!({"spec": {"minAvailable": 1, "maxUnavailable": 1}}));
        assert!(PdbStrategy.validate(&both)[0].to_string().ends_with("cannot be both set"));
        let lease = obj(json!({"spec": {"leaseDurationSeconds": 0}}));
        assert_eq!(
            LeaseStrategy.validate(&lease)[0].to_string(),
            "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"
        );
    }
}
