//! Conversions for kinds served under two group versions over one storage, as kube-apiserver
//! does through its internal types:
//!
//! * events.k8s.io/v1 `Event` over core/v1 `Event` storage (field renames only: `note` is
//!   `message`, `regarding` is `involvedObject`, `deprecatedX` is `x`, `reportingController`
//!   is `reportingComponent`);
//! * autoscaling/v1 `HorizontalPodAutoscaler` over autoscaling/v2 storage: the v1 CPU target
//!   and current utilization map to a `Resource` `cpu` `Utilization` metric, and what else v2
//!   holds travels in annotations ([`super::hpa_v1`]).

use super::hpa_v1;
use ballast_apiserver::error::ApiError;
use ballast_apiserver::registry::strategy::Object;
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

impl VersionConverter for HpaV1 {
    fn to_stored(&self, obj: &mut Object) -> Result<(), ApiError> {
        obj.insert("apiVersion".into(), "autoscaling/v2".into());
        hpa_v1::to_v2(obj);
        Ok(())
    }

    fn to_served(&self, obj: &mut Object) -> Result<(), ApiError> {
        obj.insert("apiVersion".into(), "autoscaling/v1".into());
        hpa_v1::to_v1(obj);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
