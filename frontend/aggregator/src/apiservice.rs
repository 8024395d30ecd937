//! [`ApiService`]: an `apiregistration.k8s.io/v1` APIService read from its JSON, with what the
//! aggregator needs of it (where its group version is served, how to trust the server there,
//! its priorities and whether it is available).

use serde_json::{json, Value};

/// The label autoregistration puts on the APIServices it manages (kube's
/// `kube-aggregator.kubernetes.io/automanaged`): `onstart` for the built-in group versions,
/// `true` for those of CustomResourceDefinitions.
pub const AUTOMANAGED_LABEL: &str = "kube-aggregator.kubernetes.io/automanaged";

/// The port of `spec.service` when it names none (kube's default).
pub const DEFAULT_SERVICE_PORT: u16 = 443;

/// `spec.service`: the Service in front of the extension server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The Service port requests go to.
    pub port: u16,
}

impl ServiceRef {
    /// The name the extension server's serving certificate must carry (kube checks
    /// `<service>.<namespace>.svc`, whatever address the Service resolves to).
    pub fn server_name(&self) -> String {
        format!("{}.{}.svc", self.name, self.namespace)
    }
}

/// One APIService.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiService {
    /// `metadata.name`: `<version>.<group>`.
    pub name: String,
    /// `spec.group` ("" for the core group).
    pub group: String,
    /// `spec.version`.
    pub version: String,
    /// `spec.groupPriorityMinimum`.
    pub group_priority_minimum: i64,
    /// `spec.versionPriority`.
    pub version_priority: i64,
    /// `spec.service`; `None` for a Local APIService (served by this process's delegates).
    pub service: Option<ServiceRef>,
    /// `spec.caBundle`, decoded (PEM).
    pub ca_bundle: Vec<u8>,
    /// `spec.insecureSkipTLSVerify`.
    pub insecure_skip_tls_verify: bool,
    /// Whether the `Available` condition is True.
    pub available: bool,
    /// The whole object as stored.
    pub object: Value,
}

impl ApiService {
    /// Reads an APIService; absent fields read as empty or zero (validation rejects those on
    /// write).
    pub fn from_json(obj: &Value) -> ApiService {
        let spec = &obj["spec"];
        let text = |v: &Value| v.as_str().unwrap_or("").to_string();
        let service = spec["service"].as_object().map(|s| ServiceRef {
            namespace: s.get("namespace").map(text).unwrap_or_default(),
            name: s.get("name").map(text).unwrap_or_default(),
            port: s
                .get("port")
                .and_then(Value::as_u64)
                .and_then(|p| u16::try_from(p).ok())
                .unwrap_or(DEFAULT_SERVICE_PORT),
        });
        let ca_bundle = spec["caBundle"]
            .as_str()
            .and_then(|b| base64::Engine::decode(&base64::engine::general_purpose::STANDARD, b).ok())
            .unwrap_or_default();
        let available = obj["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Available" && c["status"] == "True");
        ApiService {
            name: text(&obj["metadata"]["name"]),
            group: text(&spec["group"]),
            version: text(&spec["version"]),
            group_priority_minimum: spec["groupPriorityMinimum"].as_i64().unwrap_or(0),
            version_priority: spec["versionPriority"].as_i64().unwrap_or(0),
            service,
            ca_bundle,
            insecure_skip_tls_verify: spec["insecureSkipTLSVerify"].as_bool().unwrap_or(false),
            available,
            object: obj.clone(),
        }
    }

    /// Whether the delegates serve it (no `spec.service`).
    pub fn is_local(&self) -> bool {
        self.service.is_none()
    }

    /// The `Available` condition as stored, if any.
    pub fn available_condition(&self) -> Option<&Value> {
        self.object["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "Available")
    }
}

/// The name an APIService of `group`/`version` must have.
pub fn name_of(group: &str, version: &str) -> String {
    format!("{version}.{group}")
}

/// A Local APIService as autoregistration writes it.
pub fn local(group: &str, version: &str, priority: crate::priorities::Priority, automanaged: &str) -> Value {
    json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": name_of(group, version), "labels": {AUTOMANAGED_LABEL: automanaged}},
        "spec": {
            "group": group,
            "version": version,
            "groupPriorityMinimum": priority.group,
            "versionPriority": priority.version,
        },
    })
}

/// Orders versions as Kubernetes does when priorities tie: GA before beta before alpha
/// before anything else, then higher major, then higher minor; non-kube names last, by name.
pub fn compare_versions(a: &str, b: &str) -> std::cmp::Ordering {
    fn parse(v: &str) -> Option<(u8, u64, u64)> {
        let rest = v.strip_prefix('v')?;
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let major: u64 = rest[..digits].parse().ok()?;
        let tail = &rest[digits..];
        if tail.is_empty() {
            return Some((0, major, 0));
        }
        let (level, minor) = if let Some(m) = tail.strip_prefix("beta") {
            (1, m)
        } else if let Some(m) = tail.strip_prefix("alpha") {
            (2, m)
        } else {
            return None;
        };
        Some((level, major, minor.parse().ok()?))
    }
    match (parse(a), parse(b)) {
        (Some((la, ma, na)), Some((lb, mb, nb))) => la.cmp(&lb).then(mb.cmp(&ma)).then(nb.cmp(&na)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_version_order() {
        let mut v =
            vec!["foo10", "v1", "v11alpha2", "v10", "v12alpha1", "v2", "v3beta1", "foo1", "v10beta3", "v11beta2"];
        v.sort_by(|a, b| compare_versions(a, b));
        assert_eq!(
            v,
            ["v10", "v2", "v1", "v11beta2", "v10beta3", "v3beta1", "v12alpha1", "v11alpha2", "foo1", "foo10"]
        );
    }

    #[test]
    fn reads_a_remote_apiservice() {
        let a = ApiService::from_json(&json!({
            "metadata": {"name": "v1.x.io"},
            "spec": {"group": "x.io", "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 5,
                     "service": {"namespace": "ns", "name": "svc"}, "caBundle": "UEVN"},
            "status": {"conditions": [{"type": "Available", "status": "True"}]},
        }));
        assert_eq!(a.service.as_ref().map(|s| s.port), Some(443));
        assert_eq!(a.service.as_ref().map(ServiceRef::server_name).as_deref(), Some("svc.ns.svc"));
        assert_eq!(a.ca_bundle, b"PEM");
        assert!(a.available && !a.is_local());
    }
}
