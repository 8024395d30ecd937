//! [`ApiServiceAdmission`]: kube-aggregator's checks of APIServices, run on the built-in API's
//! writes of them through the generic server's admission seam, with kube's paths and texts.

use serde_json::Value;

use ballast_apiserver::error::FieldError;
use ballast_apiserver::registry::admission::Admission;
use ballast_apiserver::registry::strategy::Object;
use ballast_apiserver::registry::validation::{dns1035_label, dns1123_subdomain};
use ballast_apiserver::registry::ResourceKind;

use crate::apiservice::name_of;

/// Validation of APIServices.
#[derive(Debug, Default)]
pub struct ApiServiceAdmission;

impl Admission for ApiServiceAdmission {
    fn handles(&self, kind: &ResourceKind) -> bool {
        kind.group == "apiregistration.k8s.io" && kind.resource == "apiservices"
    }

    fn validate_create(&self, obj: &Object) -> Vec<FieldError> {
        validate(&Value::Object(obj.clone()))
    }

    fn validate_update(&self, new: &Object, _old: &Object) -> Vec<FieldError> {
        validate(&Value::Object(new.clone()))
    }
}

/// Validates an APIService; every finding at once.
pub fn validate(obj: &Value) -> Vec<FieldError> {
    let spec = &obj["spec"];
    let group = spec["group"].as_str().unwrap_or("");
    let version = spec["version"].as_str().unwrap_or("");
    let mut errs = Vec::new();
    let name = obj["metadata"]["name"].as_str().unwrap_or("");
    let required = name_of(group, version);
    if !name.is_empty() && name != required {
        errs.push(FieldError::invalid(
            "metadata.name",
            name,
            format!("must be `spec.version+\".\"+spec.group`: {required:?}"),
        ));
    }
    if group.is_empty() && version != "v1" {
        errs.push(FieldError::required("spec.group", "only v1 may have an empty group and it better be legacy kube"));
    }
    if !group.is_empty() {
        for e in dns1123_subdomain(group) {
            errs.push(FieldError::invalid("spec.group", group, e));
        }
    }
    for e in dns1035_label(version) {
        errs.push(FieldError::invalid("spec.version", version, e));
    }
    let group_priority = spec["groupPriorityMinimum"].as_i64().unwrap_or(0);
    if !(1..=20000).contains(&group_priority) {
        errs.push(FieldError::invalid(
            "spec.groupPriorityMinimum",
            group_priority,
            "must be positive and less than 20000",
        ));
    }
    let version_priority = spec["versionPriority"].as_i64().unwrap_or(0);
    if !(1..=1000).contains(&version_priority) {
        errs.push(FieldError::invalid("spec.versionPriority", version_priority, "must be positive and less than 1000"));
    }
    let ca_bundle = spec["caBundle"].as_str().unwrap_or("");
    let ca_bytes =
        base64::Engine::decode(&base64::engine::general_purpose::STANDARD, ca_bundle).map(|b| b.len()).unwrap_or(0);
    let insecure = spec["insecureSkipTLSVerify"].as_bool().unwrap_or(false);
    let Some(service) = spec["service"].as_object() else {
        if !ca_bundle.is_empty() {
            errs.push(FieldError::invalid(
                "spec.caBundle",
                format!("{ca_bytes} bytes"),
                "local APIServices may not have a caBundle",
            ));
        }
        if insecure {
            errs.push(FieldError::invalid(
                "spec.insecureSkipTLSVerify",
                true,
                "local APIServices may not have insecureSkipTLSVerify",
            ));
        }
        return errs;
    };
    let empty = |k: &str| service.get(k).and_then(Value::as_str).unwrap_or("").is_empty();
    if empty("namespace") {
        errs.push(FieldError::required("spec.service.namespace", ""));
    }
    if empty("name") {
        errs.push(FieldError::required("spec.service.name", ""));
    }
    if let Some(port) = service.get("port").and_then(Value::as_i64) {
        if !(1..=65535).contains(&port) {
            errs.push(FieldError::invalid(
                "spec.service.port",
                port,
                "port is not valid: must be between 1 and 65535, inclusive",
            ));
        }
    }
    if insecure && !ca_bundle.is_empty() {
        errs.push(FieldError::invalid("spec.insecureSkipTLSVerify", true, "may not be true if caBundle is present"));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(obj: &Value) -> Vec<String> {
        validate(obj).into_iter().map(|e| format!("{}: {:?}", e.field, e.kind)).collect()
    }

    #[test]
    fn a_remote_apiservice_passes() {
        let ok = json!({"metadata": {"name": "v1.x.io"}, "spec": {"group": "x.io", "version": "v1",
            "groupPriorityMinimum": 100, "versionPriority": 10, "insecureSkipTLSVerify": true,
            "service": {"namespace": "ns", "name": "svc", "port": 8443}}});
        assert!(validate(&ok).is_empty(), "{:?}", validate(&ok));
    }

    #[test]
    fn kube_findings() {
        let bad = json!({"metadata": {"name": "v1.y.io"}, "spec": {"group": "x.io", "version": "V1",
            "groupPriorityMinimum": 0, "versionPriority": 1001, "insecureSkipTLSVerify": true, "caBundle": "UEVN",
            "service": {"namespace": "", "name": "svc"}}});
        let found = messages(&bad);
        let fields: Vec<&str> = found.iter().map(|m| m.split(':').next().unwrap_or("")).collect();
        assert_eq!(
            fields,
            [
                "metadata.name",
                "spec.version",
                "spec.groupPriorityMinimum",
                "spec.versionPriority",
                "spec.service.namespace",
                "spec.insecureSkipTLSVerify"
            ]
        );
        assert!(found[0].contains("must be `spec.version+\\\".\\\"+spec.group`"), "{}", found[0]);
        let local = json!({"metadata": {"name": "v1.x.io"}, "spec": {"group": "x.io", "version": "v1",
            "groupPriorityMinimum": 1, "versionPriority": 1, "caBundle": "UEVN"}});
        assert!(messages(&local)[0].contains("local APIServices may not have a caBundle"));
        let core = json!({"metadata": {"name": "v2."}, "spec": {"group": "", "version": "v2",
            "groupPriorityMinimum": 1, "versionPriority": 1}});
        assert!(messages(&core)[0].contains("only v1 may have an empty group"));
    }
}
