//! networking.k8s.io/v1: ingresses (stored under kube's `ingress` prefix), ingress classes,
//! network policies, and the service CIDR and IP address kinds that are GA in 1.33.

use serde_json::Value;

use ballast_apiserver::error::FieldError;
use ballast_apiserver::registry::strategy::{Object, Strategy};
use ballast_apiserver::registry::validation::supported;
use ballast_apiserver::registry::{NameRule, ResourceKind, Subresources};

const GROUP: &str = "networking.k8s.io";

/// The networking.k8s.io/v1 rows.
pub static ROWS: &[&ResourceKind] = &[
    &ResourceKind::row(GROUP, "v1", "ingressclasses", "IngressClass", "ingressclass", false)
        .with_fields(&["spec"])
        .generation(&["spec"]),
    &ResourceKind::row(GROUP, "v1", "ingresses", "Ingress", "ingress", true)
        .short(&["ing"])
        .stored_as("ingress")
        .sub(Subresources::STATUS)
        .generation(&["spec"])
        .rules(&IngressStrategy),
    &ResourceKind::row(GROUP, "v1", "ipaddresses", "IPAddress", "ipaddress", false)
        .short(&["ip"])
        .names(NameRule::PathSegment)
        .with_fields(&["spec"]),
    &ResourceKind::row(GROUP, "v1", "networkpolicies", "NetworkPolicy", "networkpolicy", true)
        .short(&["netpol"])
        .with_fields(&["spec"])
        .generation(&["spec"]),
    &ResourceKind::row(GROUP, "v1", "servicecidrs", "ServiceCIDR", "servicecidr", false)
        .sub(Subresources::STATUS)
        .generation(&["spec"]),
];

/// Ingresses: every path needs a `pathType` (and a leading `/` for Prefix and Exact) and
/// exactly one backend.
#[derive(Debug)]
struct IngressStrategy;

fn validate_backend(backend: &Value, at: &str, errs: &mut Vec<FieldError>) {
    let service = backend.get("service").filter(|s| s.is_object());
    let resource = backend.get("resource").filter(|s| s.is_object());
    match (service, resource) {
        (Some(_), Some(_)) => {
            errs.push(FieldError::invalid(at, backend.clone(), "cannot set both resource and service backends"))
        }
        (None, None) => errs.push(FieldError::invalid(at, backend.clone(), "resource or service backend is required")),
        (Some(s), None) => {
            if s["name"].as_str().unwrap_or("").is_empty() {
                errs.push(FieldError::required(format!("{at}.service.name"), ""));
            }
            let port = &s["port"];
            if port["name"].as_str().unwrap_or("").is_empty() && port["number"].as_i64().unwrap_or(0) == 0 {
                errs.push(FieldError::invalid(
                    format!("{at}.service.port"),
                    port.clone(),
                    "port name or number is required",
                ));
            }
        }
        (None, Some(_)) => {}
    }
}

impl Strategy for IngressStrategy {
    fn validate(&self, obj: &Object) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
        let rules = spec["rules"].as_array().cloned().unwrap_or_default();
        if rules.is_empty() && spec.get("defaultBackend").is_none() {
            errs.push(FieldError::invalid(
                "spec",
                spec.clone(),
                "either `defaultBackend` or `rules` must be specified",
            ));
        }
        if let Some(b) = spec.get("defaultBackend") {
            validate_backend(b, "spec.defaultBackend", &mut errs);
        }
        for (i, rule) in rules.iter().enumerate() {
            for (j, path) in rule["http"]["paths"].as_array().into_iter().flatten().enumerate() {
                let at = format!("spec.rules[{i}].http.paths[{j}]");
                match path["pathType"].as_str() {
                    None | Some("") => {
                        errs.push(FieldError::required(format!("{at}.pathType"), "pathType must be specified"))
                    }
                    Some(t) => {
                        errs.extend(supported(
                            &format!("{at}.pathType"),
                            path.get("pathType"),
                            &["Exact", "ImplementationSpecific", "Prefix"],
                        ));
                        let p = path["path"].as_str().unwrap_or("");
                        if (t == "Exact" || t == "Prefix") && !p.starts_with('/') {
                            errs.push(FieldError::invalid(format!("{at}.path"), p, "must be an absolute path"));
                        }
                    }
                }
                validate_backend(&path["backend"], &format!("{at}.backend"), &mut errs);
            }
        }
        errs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ingress_paths_need_types_and_backends() {
        let ok = json!({"spec": {"rules": [{"http": {"paths": [{"path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}});
        assert!(IngressStrategy.validate(ok.as_object().expect("object")).is_empty());
        let bad = json!({"spec": {"rules": [{"http": {"paths": [{"path": "x", "backend": {}}]}}]}});
        let errs: Vec<String> =
            IngressStrategy.validate(bad.as_object().expect("object")).iter().map(ToString::to_string).collect();
        assert_eq!(errs[0], "spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified");
        assert!(errs[1].ends_with("resource or service backend is required"), "{errs:?}");
    }
}
