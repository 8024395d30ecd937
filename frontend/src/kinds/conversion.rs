//! Conversions for kinds served under two group versions over one storage, as kube-apiserver
//! does through its internal types:
//!
//! * events.k8s.io/v1 `Event` over core/v1 `Event` storage (field renames only: `note` is
//!   `message`, `regarding` is `involvedObject`, `deprecatedX` is `x`, `reportingController`
//!   is `reportingComponent`);
//! * autoscaling/v1 `HorizontalPodAutoscaler` over autoscaling/v2 storage: the v1 CPU target
//!   and current utilization map to a `Resource` `cpu` `Utilization` metric. Unlike kube,
//!   other v2 metrics, conditions and behavior are not carried through v1 annotations: a v1
//!   read does not show them and a v1 update drops the extra metrics.

use serde_json::{json, Value};

use ballast_apiserver::error::ApiError;
use ballast_apiserver::registry::strategy::{map_field_mut, Object};
use ballast_apiserver::registry::VersionConverter;

/// events.k8s.io/v1 over core/v1 storage.
pub static EVENTS_V1: EventsV1 = EventsV1;
/// autoscaling/v1 over autoscaling/v2 storage.
pub static HPA_V1: HpaV1 = HpaV1;

/// (events.k8s.io/v1 field, core/v1 field).
const EVENT_RENAMES: &[(&str, &str)] = &[
    ("note", "message"),
    ("regarding", "involvedObject"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("reportingController", "reportingComponent"),
];

fn rename(obj: &mut Object, from: &str, to: &str) {
    if let Some(v) = obj.remove(from) {
        obj.insert(to.into(), v);
    }
}

/// The events.k8s.io/v1 converter.
#[derive(Debug)]
pub struct EventsV1;

impl VersionConverter for EventsV1 {
    fn to_stored(&self, obj: &mut Object) -> Result<(), ApiError> {
        obj.insert("apiVersion".into(), "v1".into());
        for (served, stored) in EVENT_RENAMES {
            rename(obj, served, stored);
        }
        Ok(())
    }

    fn to_served(&self, obj: &mut Object) -> Result<(), ApiError> {
        obj.insert("apiVersion".into(), "events.k8s.io/v1".into());
        for (served, stored) in EVENT_RENAMES {
            rename(obj, stored, served);
        }
        Ok(())
    }
}

/// The autoscaling/v1 HPA converter.
#[derive(Debug)]
pub struct HpaV1;

fn cpu_utilization(metrics: Option<&Value>, field: &str) -> Option<Value> {
    metrics?
        .as_array()?
        .iter()
        .find_map(|m| {
            let r = &m["resource"];
            (m["type"] == "Resource" && r["name"] == "cpu").then(|| r[field]["averageUtilization"].clone())
        })
        .filter(|v| !v.is_null())
}

impl VersionConverter for HpaV1 {
    fn to_stored(&self, obj: &mut Object) -> Result<(), ApiError> {
        obj.insert("apiVersion".into(), "autoscaling/v2".into());
        let spec = map_field_mut(obj, "spec");
        if let Some(target) = spec.remove("targetCPUUtilizationPercentage") {
            spec.insert(
                "metrics".into(),
                json!([{"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": target}}}]),
            );
        }
        if let Some(Value::Object(status)) = obj.get_mut("status") {
            if let Some(current) = status.remove("currentCPUUtilizationPercentage") {
                status.insert(
                    "currentMetrics".into(),
                    json!([{"type": "Resource", "resource": {"name": "cpu",
                        "current": {"averageUtilization": current}}}]),
                );
            }
        }
        Ok(())
    }

    fn to_served(&self, obj: &mut Object) -> Result<(), ApiError> {
        obj.insert("apiVersion".into(), "autoscaling/v1".into());
        if let Some(Value::Object(spec)) = obj.get_mut("spec") {
            let target = cpu_utilization(spec.get("metrics"), "target");
            spec.remove("metrics");
            spec.remove("behavior");
            if let Some(t) = target {
                spec.insert("targetCPUUtilizationPercentage".into(), t);
            }
        }
        if let Some(Value::Object(status)) = obj.get_mut("status") {
            let current = cpu_utilization(status.get("currentMetrics"), "current");
            status.remove("currentMetrics");
            status.remove("conditions");
            if let Some(c) = current {
                status.insert("currentCPUUtilizationPercentage".into(), c);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip() {
        let mut e = json!({"apiVersion": "events.k8s.io/v1", "note": "hi", "regarding": {"kind": "Pod"},
            "reportingController": "me", "reason": "R"})
        .as_object()
        .cloned()
        .expect("object");
        let original = e.clone();
        EVENTS_V1.to_stored(&mut e).expect("converts");
        assert_eq!(e["message"], "hi");
        assert_eq!(e["involvedObject"]["kind"], "Pod");
        assert_eq!(e["reportingComponent"], "me");
        EVENTS_V1.to_served(&mut e).expect("converts");
        assert_eq!(e, original);
    }

    #[test]
    fn hpa_v1_cpu_target_maps_to_a_metric() {
        let mut h = json!({"apiVersion": "autoscaling/v1", "spec": {"maxReplicas": 3,
            "targetCPUUtilizationPercentage": 50}})
        .as_object()
        .cloned()
        .expect("object");
        HPA_V1.to_stored(&mut h).expect("converts");
        assert_eq!(h["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"], 50);
        HPA_V1.to_served(&mut h).expect("converts");
        assert_eq!(h["spec"], json!({"maxReplicas": 3, "targetCPUUtilizationPercentage": 50}));
        assert_eq!(h["apiVersion"], "autoscaling/v1");
    }
}
