//! core/v1 Services: kube's defaults (type ClusterIP, sessionAffinity None, port protocol TCP
//! and targetPort = port, traffic policies, single-stack IPv4) and the port, type and
//! external-name rules. Cluster IP and node port allocation are not done here (no allocator):
//! `spec.clusterIP` stays as the client sent it.

use serde_json::{json, Value};

use ballast_apiserver::error::FieldError;
use ballast_apiserver::registry::strategy::{default_at, get_path, map_field_mut, Object, Strategy};
use ballast_apiserver::registry::validation::{supported, supported_if_set};

/// Services: kube's defaults (type ClusterIP, sessionAffinity None, port protocol TCP and
/// targetPort = port, traffic policies, single-stack IPv4) and the port, type and
/// external-name rules. Cluster IP and node port allocation are not done (no allocator).
#[derive(Debug)]
pub struct ServiceStrategy;

const SERVICE_TYPES: &[&str] = &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];

impl Strategy for ServiceStrategy {
    fn prepare_for_create(&self, obj: &mut Object) {
        default_at(obj, &["spec", "type"], "ClusterIP".into());
        let ty = get_path(obj, &["spec", "type"]).and_then(Value::as_str).unwrap_or("").to_string();
        default_at(obj, &["spec", "sessionAffinity"], "None".into());
        if ty != "ExternalName" {
            default_at(obj, &["spec", "internalTrafficPolicy"], "Cluster".into());
            default_at(obj, &["spec", "ipFamilyPolicy"], "SingleStack".into());
            default_at(obj, &["spec", "ipFamilies"], json!(["IPv4"]));
        }
        if ty == "NodePort" || ty == "LoadBalancer" {
            default_at(obj, &["spec", "externalTrafficPolicy"], "Cluster".into());
        }
        let spec = map_field_mut(obj, "spec");
        if let Some(Value::Array(ports)) = spec.get_mut("ports") {
            for port in ports.iter_mut().filter_map(Value::as_object_mut) {
                if port.get("protocol").is_none_or(|p| p.as_str().is_none_or(str::is_empty)) {
                    port.insert("protocol".into(), "TCP".into());
                }
                let missing_target = match port.get("targetPort") {
                    None | Some(Value::Null) => true,
                    Some(Value::Number(n)) => n.as_i64() == Some(0),
                    Some(Value::String(s)) => s.is_empty(),
                    _ => false,
                };
                if missing_target {
                    let p = port.get("port").cloned().unwrap_or(Value::Null);
                    port.insert("targetPort".into(), p);
                }
            }
        }
        obj.insert("status".into(), json!({"loadBalancer": {}}));
    }

    fn validate(&self, obj: &Object) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let ty = get_path(obj, &["spec", "type"]);
        errs.extend(supported("spec.type", ty, SERVICE_TYPES));
        errs.extend(supported_if_set(
            "spec.sessionAffinity",
            get_path(obj, &["spec", "sessionAffinity"]),
            &["ClientIP", "None"],
        ));
        let external_name = ty.and_then(Value::as_str) == Some("ExternalName");
        let headless = get_path(obj, &["spec", "clusterIP"]).and_then(Value::as_str) == Some("None");
        if external_name && get_path(obj, &["spec", "externalName"]).and_then(Value::as_str).is_none_or(str::is_empty) {
            errs.push(FieldError::required("spec.externalName", ""));
        }
        let ports = get_path(obj, &["spec", "ports"]).and_then(Value::as_array).cloned().unwrap_or_default();
        if ports.is_empty() && !external_name && !headless {
            errs.push(FieldError::required("spec.ports", ""));
        }
        let mut names = std::collections::HashSet::new();
        for (i, port) in ports.iter().enumerate() {
            let at = format!("spec.ports[{i}]");
            let name = port["name"].as_str().unwrap_or("");
            if ports.len() > 1 && name.is_empty() {
                errs.push(FieldError::required(format!("{at}.name"), ""));
            } else if !name.is_empty() && !names.insert(name.to_string()) {
                errs.push(FieldError::duplicate(format!("{at}.name"), name));
            }
            match port["port"].as_i64() {
                Some(1..=65535) => {}
                Some(p) => {
                    errs.push(FieldError::invalid(format!("{at}.port"), p, "must be between 1 and 65535, inclusive"))
                }
                None => errs.push(FieldError::required(format!("{at}.port"), "")),
            }
            errs.extend(supported_if_set(&format!("{at}.protocol"), port.get("protocol"), &["SCTP", "TCP", "UDP"]));
        }
        errs
    }

    fn prepare_for_update(&self, new: &mut Object, old: &Object) {
        // The allocated address stays unless the update names it.
        for key in ["clusterIP", "clusterIPs"] {
            if get_path(new, &["spec", key]).is_none() {
                if let Some(v) = get_path(old, &["spec", key]).cloned() {
                    map_field_mut(new, "spec").insert(key.into(), v);
                }
            }
        }
        self.prepare_for_create(new);
        if let Some(status) = old.get("status") {
            new.insert("status".into(), status.clone());
        }
    }

    fn validate_update(&self, new: &Object, old: &Object) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let old_ip = get_path(old, &["spec", "clusterIP"]).and_then(Value::as_str).unwrap_or("");
        let new_ip = get_path(new, &["spec", "clusterIP"]).and_then(Value::as_str).unwrap_or("");
        if !old_ip.is_empty() && new_ip != old_ip {
            errs.push(FieldError::invalid("spec.clusterIPs[0]", new_ip, "may not change once set"));
        }
        errs
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
    fn service_defaults_and_ports() {
        let mut svc = obj(json!({"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}}));
        ServiceStrategy.prepare_for_create(&mut svc);
        assert_eq!(svc["spec"]["type"], "ClusterIP");
        assert_eq!(svc["spec"]["sessionAffinity"], "None");
        assert_eq!(svc["spec"]["ports"][0], json!({"port": 80, "protocol": "TCP", "targetPort": 80}));
        assert!(ServiceStrategy.validate(&svc).is_empty());
        let two = obj(json!({"spec": {"type": "ClusterIP", "sessionAffinity": "None",
            "ports": [{"port": 80, "protocol": "TCP"}, {"port": 0, "protocol": "TCP"}]}}));
        let errs: Vec<String> = ServiceStrategy.validate(&two).iter().map(ToString::to_string).collect();
        assert_eq!(
            errs,
            vec![
                "spec.ports[0].name: Required value",
                "spec.ports[1].name: Required value",
                "spec.ports[1].port: Invalid value: 0: must be between 1 and 65535, inclusive",
            ]
        );
        let none = obj(json!({"spec": {"type": "Bogus", "sessionAffinity": "None"}}));
        let errs: Vec<String> = ServiceStrategy.validate(&none).iter().map(ToString::to_string).collect();
        assert!(errs[0].starts_with(r#"spec.type: Unsupported value: "Bogus": supported values: "ClusterIP""#));
        assert_eq!(errs[1], "spec.ports: Required value");
    }
}
