//! apps/v1: deployments, replicasets, statefulsets, daemonsets, controllerrevisions, with
//! kube's defaults and the selector rules (required, matches the template labels, immutable).

use serde_json::{json, Value};

use super::categories::ALL_CATEGORY;
use super::pod_spec::{default_template, validate_template};
use ballast_apiserver::error::FieldError;
use ballast_apiserver::registry::strategy::{default_at, get_path, Object, Strategy};
use ballast_apiserver::registry::validation::non_negative;
use ballast_apiserver::registry::{ResourceKind, Subresources};

const SPEC: &[&str] = &["spec"];
const STATUS_SCALE: Subresources = Subresources::STATUS.with(Subresources::SCALE);

/// The apps/v1 rows.
pub static ROWS: &[&ResourceKind] = &[
    &ResourceKind::row("apps", "v1", "controllerrevisions", "ControllerRevision", "controllerrevision", true)
        .with_fields(&["data", "revision"]),
    &ResourceKind::row("apps", "v1", "daemonsets", "DaemonSet", "daemonset", true)
        .short(&["ds"])
        .categories(ALL_CATEGORY)
        .sub(Subresources::STATUS)
        .generation(SPEC)
        .rules(&Workload::DAEMON_SET),
    &ResourceKind::row("apps", "v1", "deployments", "Deployment", "deployment", true)
        .short(&["deploy"])
        .categories(ALL_CATEGORY)
        .sub(STATUS_SCALE)
        .scale_versions(&["apps/v1beta1", "apps/v1beta2"])
        .generation(SPEC)
        .rules(&Workload::DEPLOYMENT),
    &ResourceKind::row("apps", "v1", "replicasets", "ReplicaSet", "replicaset", true)
        .short(&["rs"])
        .categories(ALL_CATEGORY)
        .sub(STATUS_SCALE)
        .scale_versions(&["apps/v1beta2"])
        .generation(SPEC)
        .rules(&Workload::REPLICA_SET),
    &ResourceKind::row("apps", "v1", "statefulsets", "StatefulSet", "statefulset", true)
        .short(&["sts"])
        .categories(ALL_CATEGORY)
        .sub(STATUS_SCALE)
        .scale_versions(&["apps/v1beta1", "apps/v1beta2"])
        .generation(SPEC)
        .rules(&Workload::STATEFUL_SET),
];

/// A default under `spec`: the path and a maker of the value.
type SpecDefault = (&'static [&'static str], fn() -> Value);

/// The shared strategy of the apps workloads: `defaults` are (path under `spec`, value) pairs
/// applied when absent; the template is defaulted as a pod's and must be selected.
#[derive(Debug)]
pub struct Workload {
    kind: &'static str,
    replicas: bool,
    defaults: &'static [SpecDefault],
}

impl Workload {
    const DEPLOYMENT: Workload = Workload {
        kind: "deployment",
        replicas: true,
        defaults: &[
            (&["strategy", "type"], || "RollingUpdate".into()),
            (&["revisionHistoryLimit"], || 10.into()),
            (&["progressDeadlineSeconds"], || 600.into()),
        ],
    };
    const REPLICA_SET: Workload = Workload { kind: "replicaset", replicas: true, defaults: &[] };
    const STATEFUL_SET: Workload = Workload {
        kind: "statefulset",
        replicas: true,
        defaults: &[
            (&["podManagementPolicy"], || "OrderedReady".into()),
            (&["updateStrategy", "type"], || "RollingUpdate".into()),
            (&["revisionHistoryLimit"], || 10.into()),
            (&["persistentVolumeClaimRetentionPolicy"], || json!({"whenDeleted": "Retain", "whenScaled": "Retain"})),
        ],
    };
    const DAEMON_SET: Workload = Workload {
        kind: "daemonset",
        replicas: false,
        defaults: &[
            (&["updateStrategy", "type"], || "RollingUpdate".into()),
            (&["revisionHistoryLimit"], || 10.into()),
        ],
    };
}

impl Strategy for Workload {
    fn prepare_for_create(&self, obj: &mut Object) {
        if self.replicas {
            default_at(obj, &["spec", "replicas"], 1.into());
        }
        for (path, value) in self.defaults {
            default_at(obj, &[&["spec"][..], path].concat(), value());
        }
        let update_type = |obj: &Object, key: &str| {
            get_path(obj, &["spec", key, "type"]).and_then(Value::as_str) == Some("RollingUpdate")
        };
        match self.kind {
            "deployment" if update_type(obj, "strategy") => {
                default_at(obj, &["spec", "strategy", "rollingUpdate", "maxUnavailable"], "25%".into());
                default_at(obj, &["spec", "strategy", "rollingUpdate", "maxSurge"], "25%".into());
            }
            "statefulset" if update_type(obj, "updateStrategy") => {
                default_at(obj, &["spec", "updateStrategy", "rollingUpdate", "partition"], 0.into());
            }
            "daemonset" if update_type(obj, "updateStrategy") => {
                default_at(obj, &["spec", "updateStrategy", "rollingUpdate", "maxUnavailable"], 1.into());
                default_at(obj, &["spec", "updateStrategy", "rollingUpdate", "maxSurge"], 0.into());
            }
            _ => {}
        }
        default_template(obj, &["spec", "template"]);
    }

    fn validate(&self, obj: &Object) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if self.replicas {
            errs.extend(non_negative("spec.replicas", get_path(obj, &["spec", "replicas"])));
        }
        errs.extend(non_negative("spec.revisionHistoryLimit", get_path(obj, &["spec", "revisionHistoryLimit"])));
        let selector = get_path(obj, &["spec", "selector"]);
        let empty = selector.and_then(Value::as_object).is_none_or(|s| {
            s.get("matchLabels").and_then(Value::as_object).is_none_or(|m| m.is_empty())
                && s.get("matchExpressions").and_then(Value::as_array).is_none_or(Vec::is_empty)
        });
        match selector {
            None | Some(Value::Null) => errs.push(FieldError::required("spec.selector", "")),
            Some(sel) if empty => errs.push(FieldError::invalid(
                "spec.selector",
                sel.clone(),
                format!("empty selector is invalid for {}", self.kind),
            )),
            Some(_) => {}
        }
        let selector = selector.filter(|_| !empty);
        validate_template(get_path(obj, &["spec", "template"]), selector, "spec.template", &["Always"], &mut errs);
        errs
    }

    fn prepare_for_update(&self, new: &mut Object, _old: &Object) {
        self.prepare_for_create(new);
    }

    fn validate_update(&self, new: &Object, old: &Object) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let new_sel = get_path(new, &["spec", "selector"]);
        if new_sel != get_path(old, &["spec", "selector"]) {
            errs.push(FieldError::invalid(
                "spec.selector",
                new_sel.cloned().unwrap_or(Value::Null),
                "field is immutable",
            ));
        }
        if self.kind == "statefulset" && fixed_statefulset_spec(new) != fixed_statefulset_spec(old) {
            errs.push(FieldError::forbidden("spec", STATEFULSET_UPDATE_FORBIDDEN));
        }
        errs
    }
}

const STATEFULSET_UPDATE_FORBIDDEN: &str = "updates to statefulset spec for fields other than 'replicas', \
'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and \
'minReadySeconds' are forbidden";

/// Returns a StatefulSet spec without the fields an update may change.
fn fixed_statefulset_spec(obj: &Object) -> Value {
    let mut spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    if let Some(s) = spec.as_object_mut() {
        for key in [
            "replicas",
            "ordinals",
            "template",
            "updateStrategy",
            "revisionHistoryLimit",
            "persistentVolumeClaimRetentionPolicy",
            "minReadySeconds",
        ] {
            s.remove(key);
        }
    }
    spec
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

    fn deployment() -> Object {
        obj(json!({"metadata": {"name": "web"}, "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}}}))
    }

    #[test]
    fn deployment_defaults_like_kube() {
        let mut d = deployment();
        Workload::DEPLOYMENT.prepare_for_create(&mut d);
        let spec = &d["spec"];
        assert_eq!(spec["replicas"], 1);
        assert_eq!(
            spec["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        assert_eq!(spec["revisionHistoryLimit"], 10);
        assert_eq!(spec["progressDeadlineSeconds"], 600);
        assert_eq!(spec["template"]["spec"]["restartPolicy"], "Always");
        assert_eq!(spec["template"]["spec"]["containers"][0]["imagePullPolicy"], "Always");
        assert!(Workload::DEPLOYMENT.validate(&d).is_empty(), "{:?}", Workload::DEPLOYMENT.validate(&d));
    }

    #[test]
    fn selector_rules() {
        let mut d = deployment();
        d["spec"].as_object_mut().expect("spec").remove("selector");
        Workload::DEPLOYMENT.prepare_for_create(&mut d);
        let errs: Vec<String> = Workload::DEPLOYMENT.validate(&d).iter().map(ToString::to_string).collect();
        assert_eq!(errs, vec!["spec.selector: Required value"]);

        let mut d = deployment();
        d["spec"]["selector"]["matchLabels"]["app"] = "other".into();
        Workload::DEPLOYMENT.prepare_for_create(&mut d);
        let errs: Vec<String> = Workload::DEPLOYMENT.validate(&d).iter().map(ToString::to_string).collect();
        assert_eq!(
            errs,
            vec![
                r#"spec.template.metadata.labels: Invalid value: {"app":"web"}: `selector` does not match template `labels`"#
            ]
        );

        let mut old = deployment();
        Workload::DEPLOYMENT.prepare_for_create(&mut old);
        let mut new = old.clone();
        new["spec"]["selector"]["matchLabels"]["tier"] = "x".into();
        new["spec"]["template"]["metadata"]["labels"]["tier"] = "x".into();
        let errs = Workload::DEPLOYMENT.validate_update(&new, &old);
        assert!(errs[0].to_string().ends_with("field is immutable"), "{errs:?}");
    }

    #[test]
    fn statefulset_service_name_is_fixed() {
        let mut old = deployment();
        Workload::STATEFUL_SET.prepare_for_create(&mut old);
        let mut new = old.clone();
        new["spec"]["replicas"] = 3.into();
        assert!(Workload::STATEFUL_SET.validate_update(&new, &old).is_empty());
        new["spec"]["serviceName"] = "other".into();
        let errs = Workload::STATEFUL_SET.validate_update(&new, &old);
        assert!(errs[0].to_string().starts_with("spec: Forbidden: updates to statefulset spec"), "{errs:?}");
    }

    #[test]
    fn statefulset_and_daemonset_defaults() {
        let mut s = deployment();
        Workload::STATEFUL_SET.prepare_for_create(&mut s);
        assert_eq!(s["spec"]["podManagementPolicy"], "OrderedReady");
        assert_eq!(s["spec"]["updateStrategy"], json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}));
        let mut ds = deployment();
        Workload::DAEMON_SET.prepare_for_create(&mut ds);
        assert!(ds["spec"].get("replicas").is_none());
        assert_eq!(ds["spec"]["updateStrategy"]["rollingUpdate"], json!({"maxUnavailable": 1, "maxSurge": 0}));
    }
}
