//! Pods and the pod template every workload embeds: kube's defaults (`SetDefaults_PodSpec`,
//! `SetDefaults_Container`, and what the default admission plugins add to pods) and the
//! validation kubectl users meet first (containers, names, images, enums, pod immutability).
//!
//! The pod strategy also decides graceful deletion as kube's `CheckGracefulDelete` does: a
//! pod no kubelet runs (unscheduled, or finished) is deleted at once.

use std::collections::HashSet;

use serde_json::{json, Map, Value};

use ballast_apiserver::error::FieldError;
use ballast_apiserver::registry::strategy::{default_at, get_path, map_field_mut, Binder, Object, Strategy};
use ballast_apiserver::registry::validation::{dns1123_label, non_negative, selector_matches, supported_if_set};

/// `restartPolicy` values a bare pod may use.
pub const ALL_RESTART_POLICIES: &[&str] = &["Always", "OnFailure", "Never"];

/// Returns the image pull policy kube defaults for `image`: `Always` for `:latest` or no tag,
/// else `IfNotPresent`.
pub fn default_pull_policy(image: &str) -> &'static str {
    if image.contains('@') {
        return "IfNotPresent";
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.rsplit_once(':') {
        Some((_, tag)) if tag != "latest" => "IfNotPresent",
        _ => "Always",
    }
}

fn default_container(c: &mut Map<String, Value>) {
    let image = c.get("image").and_then(Value::as_str).unwrap_or("").to_string();
    for (key, value) in [
        ("terminationMessagePath", Value::from("/dev/termination-log")),
        ("terminationMessagePolicy", Value::from("File")),
        ("imagePullPolicy", Value::from(default_pull_policy(&image))),
    ] {
        default_at(c, &[key], value);
    }
    if !c.contains_key("resources") {
        c.insert("resources".into(), json!({}));
    }
    if let Some(Value::Array(ports)) = c.get_mut("ports") {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            default_at(p, &["protocol"], "TCP".into());
        }
    }
}

/// Applies the pod spec defaults (used for pods and for every pod template).
pub fn default_pod_spec(spec: &mut Object) {
    default_at(spec, &["restartPolicy"], "Always".into());
    default_at(spec, &["dnsPolicy"], "ClusterFirst".into());
    default_at(spec, &["terminationGracePeriodSeconds"], 30.into());
    default_at(spec, &["schedulerName"], "default-scheduler".into());
    if !spec.contains_key("securityContext") {
        spec.insert("securityContext".into(), json!({}));
    }
    for list in ["containers", "initContainers"] {
        if let Some(Value::Array(cs)) = spec.get_mut(list) {
            cs.iter_mut().filter_map(Value::as_object_mut).for_each(default_container);
        }
    }
}

/// Applies the template defaults under `path` (e.g. `["spec", "template"]`).
pub fn default_template(obj: &mut Object, path: &[&str]) {
    if get_path(obj, path).is_none() {
        return;
    }
    let mut spec_path = path.to_vec();
    spec_path.push("spec");
    let spec = ballast_apiserver::registry::strategy::path_mut(obj, &spec_path);
    default_pod_spec(spec);
    let mut meta_path = path.to_vec();
    meta_path.push("metadata");
    // kube serializes a template's empty creationTimestamp as null.
    default_at(obj, &[&meta_path[..], &["creationTimestamp"]].concat(), Value::Null);
}

fn validate_containers(spec: &Value, at: &str, list: &str, names: &mut HashSet<String>, errs: &mut Vec<FieldError>) {
    let Some(cs) = spec.get(list).and_then(Value::as_array) else { return };
    for (i, c) in cs.iter().enumerate() {
        let p = format!("{at}.{list}[{i}]");
        match c["name"].as_str().unwrap_or("") {
            "" => errs.push(FieldError::required(format!("{p}.name"), "")),
            name => {
                for m in dns1123_label(name) {
                    errs.push(FieldError::invalid(format!("{p}.name"), name, m));
                }
                if !names.insert(name.to_string()) {
                    errs.push(FieldError::duplicate(format!("{p}.name"), name));
                }
            }
        }
        if c["image"].as_str().unwrap_or("").trim().is_empty() {
            errs.push(FieldError::required(format!("{p}.image"), ""));
        }
        errs.extend(supported_if_set(
            &format!("{p}.imagePullPolicy"),
            c.get("imagePullPolicy"),
            &["Always", "IfNotPresent", "Never"],
        ));
        errs.extend(supported_if_set(
            &format!("{p}.terminationMessagePolicy"),
            c.get("terminationMessagePolicy"),
            &["File", "FallbackToLogsOnError"],
        ));
    }
}

/// Validates a (defaulted) pod spec at `at` with the allowed restart policies.
pub fn validate_pod_spec(spec: Option<&Value>, at: &str, restart_policies: &[&str], errs: &mut Vec<FieldError>) {
    let Some(spec) = spec.filter(|s| s.is_object()) else {
        errs.push(FieldError::required(format!("{at}.containers"), ""));
        return;
    };
    if spec.get("containers").and_then(Value::as_array).is_none_or(Vec::is_empty) {
        errs.push(FieldError::required(format!("{at}.containers"), ""));
    }
    let mut names = HashSet::new();
    validate_containers(spec, at, "containers", &mut names, errs);
    validate_containers(spec, at, "initContainers", &mut names, errs);
    match spec.get("restartPolicy").and_then(Value::as_str) {
        Some(p) if restart_policies.contains(&p) => {}
        None | Some("") if restart_policies.len() > 1 => {
            let values: Vec<String> = restart_policies.iter().map(|p| format!("{p:?}")).collect();
            errs.push(FieldError::required(
                format!("{at}.restartPolicy"),
                format!("valid values: {}", values.join(", ")),
            ));
        }
        p => errs.push(FieldError::not_supported(format!("{at}.restartPolicy"), p.unwrap_or(""), restart_policies)),
    }
    errs.extend(supported_if_set(
        &format!("{at}.dnsPolicy"),
        spec.get("dnsPolicy"),
        &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
    ));
    errs.extend(non_negative(&format!("{at}.activeDeadlineSeconds"), spec.get("activeDeadlineSeconds")));
}

/// Validates a workload's pod template at `at` against its selector.
pub fn validate_template(
    template: Option<&Value>,
    selector: Option<&Value>,
    at: &str,
    restart_policies: &[&str],
    errs: &mut Vec<FieldError>,
) {
    let Some(template) = template.filter(|t| t.is_object()) else {
        errs.push(FieldError::required(at, ""));
        return;
    };
    let labels = template["metadata"]["labels"].as_object().cloned().unwrap_or_default();
    if let Some(sel) = selector {
        if !selector_matches(sel, &labels) {
            errs.push(FieldError::invalid(
                format!("{at}.metadata.labels"),
                Value::Object(labels),
                "`selector` does not match template `labels`",
            ));
        }
    }
    validate_pod_spec(template.get("spec"), &format!("{at}.spec"), restart_policies, errs);
}

/// The QoS class kube derives from container resources.
fn qos_class(spec: &Value) -> &'static str {
    let cs: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .flat_map(|l| spec.get(*l).and_then(Value::as_array).into_iter().flatten())
        .collect();
    let has = |c: &Value, part: &str| c["resources"][part].as_object().is_some_and(|m| !m.is_empty());
    if cs.iter().all(|c| !has(c, "requests") && !has(c, "limits")) {
        return "BestEffort";
    }
    let guaranteed = cs.iter().all(|c| {
        ["cpu", "memory"].iter().all(|r| {
            let limit = &c["resources"]["limits"][*r];
            let request = &c["resources"]["requests"][*r];
            !limit.is_null() && (request.is_null() || request == limit)
        })
    });
    if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

const POD_UPDATE_FORBIDDEN: &str = "pod updates may not change fields other than `spec.containers[*].image`,\
`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing \
tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// Returns the pod spec with the fields an update may change blanked out.
fn mutable_fields_cleared(spec: Option<&Value>) -> Value {
    let mut spec = spec.cloned().unwrap_or(Value::Null);
    if let Some(s) = spec.as_object_mut() {
        for key in ["activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds"] {
            s.remove(key);
        }
        for list in ["containers", "initContainers"] {
            if let Some(Value::Array(cs)) = s.get_mut(list) {
                for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                    c.remove("image");
                }
            }
        }
    }
    spec
}

/// Pod binding (kube's `BindingREST`): sets `spec.nodeName` once, bumps the generation and
/// records the `PodScheduled` condition.
#[derive(Debug)]
pub struct PodBinder;

impl Binder for PodBinder {
    fn bind(&self, old: &Object, node: &str) -> Result<Object, String> {
        let name = get_path(old, &["metadata", "name"]).and_then(Value::as_str).unwrap_or("");
        let current = get_path(old, &["spec", "nodeName"]).and_then(Value::as_str).unwrap_or("");
        if !current.is_empty() {
            return Err(format!("pod {name} is already assigned to node {current:?}"));
        }
        if get_path(old, &["metadata", "deletionTimestamp"]).and_then(Value::as_str).is_some_and(|t| !t.is_empty()) {
            return Err(format!("pod {name} is being deleted, cannot be assigned to a host"));
        }
        let mut new = old.clone();
        map_field_mut(&mut new, "spec").insert("nodeName".into(), node.into());
        let generation = get_path(old, &["metadata", "generation"]).and_then(Value::as_i64).unwrap_or(0);
        map_field_mut(&mut new, "metadata").insert("generation".into(), (generation + 1).into());
        let status = map_field_mut(&mut new, "status");
        let conditions = status.entry("conditions").or_insert_with(|| json!([]));
        if let Value::Array(list) = conditions {
            list.retain(|c| c["type"] != "PodScheduled");
            list.push(json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null,
                "lastTransitionTime": ballast_apimachinery::clock::now_rfc3339()}));
        }
        Ok(new)
    }
}

/// Pods: spec defaults plus what kube's default admission adds (service account `default`,
/// priority 0, the not-ready/unreachable tolerations), status `Pending` with its QoS class,
/// validation, spec immutability, and graceful deletion.
#[derive(Debug)]
pub struct PodStrategy;

impl Strategy for PodStrategy {
    fn prepare_for_create(&self, obj: &mut Object) {
        let spec = map_field_mut(obj, "spec");
        default_pod_spec(spec);
        default_at(spec, &["enableServiceLinks"], true.into());
        default_at(spec, &["serviceAccountName"], "default".into());
        let sa = spec.get("serviceAccountName").cloned().unwrap_or(Value::Null);
        default_at(spec, &["serviceAccount"], sa);
        default_at(spec, &["priority"], 0.into());
        default_at(spec, &["preemptionPolicy"], "PreemptLowerPriority".into());
        if !spec.contains_key("tolerations") {
            let t =
                |key: &str| json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300});
            spec.insert(
                "tolerations".into(),
                json!([t("node.kubernetes.io/not-ready"), t("node.kubernetes.io/unreachable")]),
            );
        }
        let qos = qos_class(&Value::Object(spec.clone()));
        obj.insert("status".into(), json!({"phase": "Pending", "qosClass": qos}));
    }

    fn validate(&self, obj: &Object) -> Vec<FieldError> {
        let mut errs = Vec::new();
        validate_pod_spec(obj.get("spec"), "spec", ALL_RESTART_POLICIES, &mut errs);
        errs
    }

    fn prepare_for_update(&self, new: &mut Object, _old: &Object) {
        // Decoding defaults every body, updates included (admission additions are not redone).
        let spec = map_field_mut(new, "spec");
        default_pod_spec(spec);
        default_at(spec, &["enableServiceLinks"], true.into());
    }

    fn validate_update(&self, new: &Object, old: &Object) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        if mutable_fields_cleared(new.get("spec")) != mutable_fields_cleared(old.get("spec")) {
            errs.push(FieldError::forbidden("spec", POD_UPDATE_FORBIDDEN));
        }
        errs
    }

    fn graceful_delete(&self, obj: &Object, requested: Option<i64>) -> Option<i64> {
        let unscheduled = get_path(obj, &["spec", "nodeName"]).and_then(Value::as_str).is_none_or(str::is_empty);
        let phase = get_path(obj, &["status", "phase"]).and_then(Value::as_str).unwrap_or("");
        if unscheduled || phase == "Failed" || phase == "Succeeded" {
            return Some(0);
        }
        let default = get_path(obj, &["spec", "terminationGracePeriodSeconds"]).and_then(Value::as_i64).unwrap_or(30);
        Some(requested.unwrap_or(default).max(0))
    }
}

/// PodTemplates: the template is defaulted and validated like a pod's.
#[derive(Debug)]
pub struct PodTemplateStrategy;

impl Strategy for PodTemplateStrategy {
    fn prepare_for_create(&self, obj: &mut Object) {
        default_template(obj, &["template"]);
    }

    fn validate(&self, obj: &Object) -> Vec<FieldError> {
        let mut errs = Vec::new();
        validate_template(obj.get("template"), None, "template", ALL_RESTART_POLICIES, &mut errs);
        errs
    }

    fn prepare_for_update(&self, new: &mut Object, _old: &Object) {
        self.prepare_for_create(new);
    }
}

/// ReplicationControllers: replicas 1, selector and labels from the template when empty.
#[derive(Debug)]
pub struct ReplicationControllerStrategy;

impl Strategy for ReplicationControllerStrategy {
    fn prepare_for_create(&self, obj: &mut Object) {
        let labels = get_path(obj, &["spec", "template", "metadata", "labels"]).cloned();
        if let Some(labels) = labels.filter(|l| l.as_object().is_some_and(|m| !m.is_empty())) {
            let empty = |v: Option<&Value>| v.and_then(Value::as_object).is_none_or(Map::is_empty);
            if empty(get_path(obj, &["spec", "selector"])) {
                map_field_mut(obj, "spec").insert("selector".into(), labels.clone());
            }
            if empty(get_path(obj, &["metadata", "labels"])) {
                map_field_mut(obj, "metadata").insert("labels".into(), labels);
            }
        }
        default_at(obj, &["spec", "replicas"], 1.into());
        default_template(obj, &["spec", "template"]);
    }

    fn validate(&self, obj: &Object) -> Vec<FieldError> {
        let mut errs = Vec::new();
        errs.extend(non_negative("spec.replicas", get_path(obj, &["spec", "replicas"])));
        let selector = get_path(obj, &["spec", "selector"]);
        if selector.and_then(Value::as_object).is_none_or(Map::is_empty) {
            errs.push(FieldError::required("spec.selector", ""));
        }
        validate_template(get_path(obj, &["spec", "template"]), selector, "spec.template", &["Always"], &mut errs);
        errs
    }

    fn prepare_for_update(&self, new: &mut Object, _old: &Object) {
        self.prepare_for_create(new);
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
    fn pull_policy_follows_the_tag() {
        assert_eq!(default_pull_policy("nginx"), "Always");
        assert_eq!(default_pull_policy("nginx:latest"), "Always");
        assert_eq!(default_pull_policy("nginx:1.27"), "IfNotPresent");
        assert_eq!(default_pull_policy("localhost:5000/nginx"), "Always");
        assert_eq!(default_pull_policy("nginx@sha256:abc"), "IfNotPresent");
    }

    #[test]
    fn pod_defaults_and_validation() {
        let mut pod = obj(json!({"spec": {"containers": [{"name": "c", "image": "nginx"}]}}));
        PodStrategy.prepare_for_create(&mut pod);
        assert_eq!(pod["spec"]["restartPolicy"], "Always");
        assert_eq!(pod["spec"]["dnsPolicy"], "ClusterFirst");
        assert_eq!(pod["spec"]["terminationGracePeriodSeconds"], 30);
        let c = &pod["spec"]["containers"][0];
        assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(c["terminationMessagePolicy"], "File");
        assert_eq!(c["imagePullPolicy"], "Always");
        assert_eq!(pod["status"], json!({"phase": "Pending", "qosClass": "BestEffort"}));
        assert!(PodStrategy.validate(&pod).is_empty());

        let bad = obj(json!({"spec": {"containers": [{"name": "c"}, {"name": "c", "image": "x"}],
            "restartPolicy": "Sometimes", "dnsPolicy": "ClusterFirst"}}));
        let errs: Vec<String> = PodStrategy.validate(&bad).iter().map(ToString::to_string).collect();
        assert_eq!(errs[0], "spec.containers[0].image: Required value");
        assert_eq!(errs[1], r#"spec.containers[1].name: Duplicate value: "c""#);
        assert!(errs[2].starts_with(r#"spec.restartPolicy: Unsupported value: "Sometimes""#), "{errs:?}");
        let empty = obj(json!({"spec": {"restartPolicy": "Always", "dnsPolicy": "ClusterFirst"}}));
        let errs: Vec<String> = PodStrategy.validate(&empty).iter().map(ToString::to_string).collect();
        assert_eq!(errs, vec!["spec.containers: Required value"]);
    }

    #[test]
    fn pod_spec_is_immutable_but_images() {
        let mut old = obj(json!({"spec": {"containers": [{"name": "c", "image": "nginx"}]}}));
        PodStrategy.prepare_for_create(&mut old);
        let mut image = old.clone();
        image["spec"]["containers"][0]["image"] = "nginx:2".into();
        assert!(PodStrategy.validate_update(&image, &old).is_empty());
        let mut policy = old.clone();
        policy["spec"]["restartPolicy"] = "Never".into();
        let errs = PodStrategy.validate_update(&policy, &old);
        assert!(errs[0].to_string().starts_with("spec: Forbidden: pod updates may not change fields"));
    }

    #[test]
    fn unscheduled_pods_delete_at_once() {
        let pending = obj(json!({"spec": {}}));
        assert_eq!(PodStrategy.graceful_delete(&pending, Some(30)), Some(0));
        let running = obj(json!({"spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 10},
            "status": {"phase": "Running"}}));
        assert_eq!(PodStrategy.graceful_delete(&running, None), Some(10));
        assert_eq!(PodStrategy.graceful_delete(&running, Some(0)), Some(0));
    }

    #[test]
    fn rc_selector_comes_from_the_template() {
        let mut rc = obj(json!({"metadata": {}, "spec": {"template": {"metadata": {"labels": {"app": "a"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}}}}));
        ReplicationControllerStrategy.prepare_for_create(&mut rc);
        assert_eq!(rc["spec"]["selector"], json!({"app": "a"}));
        assert_eq!(rc["spec"]["replicas"], 1);
        assert!(
            ReplicationControllerStrategy.validate(&rc).is_empty(),
            "{:?}",
            ReplicationControllerStrategy.validate(&rc)
        );
    }
}
