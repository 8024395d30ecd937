//! core/v1: every built-in resource of the legacy group, and the strategies of namespaces,
//! configmaps and secrets (services are in [`super::service`], pods in [`super::pod_spec`]).
//! Object schemas (protobuf, patch tags) come from [`ballast_apimachinery::schema`].

use base64::Engine as _;
use serde_json::{json, Value};

use super::categories::ALL_CATEGORY;
use super::pod_spec::{PodBinder, PodStrategy, ReplicationControllerStrategy};
use ballast_apiserver::error::FieldError;
use ballast_apiserver::registry::strategy::{map_field, map_field_mut, Object, Strategy};
use ballast_apiserver::registry::validation::config_map_key;
use ballast_apiserver::registry::{NameRule, ResourceKind, Subresources, Verbs, META_SELECTORS};

const STATUS: Subresources = Subresources::STATUS;
const SPEC: &[&str] = &["spec"];

/// The core/v1 rows, in discovery order.
pub static ROWS: &[&ResourceKind] = &[
    &ResourceKind::row("", "v1", "bindings", "Binding", "binding", true)
        .with_verbs(Verbs::CREATE)
        .with_fields(&["target"])
        .creates_bind(),
    &ResourceKind::row("", "v1", "componentstatuses", "ComponentStatus", "componentstatus", false)
        .with_verbs(Verbs::GET.with(Verbs::LIST))
        .short(&["cs"])
        .with_fields(&["conditions"]),
    &CONFIGMAPS,
    &ResourceKind::row("", "v1", "endpoints", "Endpoints", "endpoints", true)
        .short(&["ep"])
        .stored_as("services/endpoints")
        .with_fields(&["subsets"]),
    &ResourceKind::row("", "v1", "events", "Event", "event", true)
        .short(&["ev"])
        .with_fields(EVENT_FIELDS)
        .selectors(EVENT_SELECTORS),
    &ResourceKind::row("", "v1", "limitranges", "LimitRange", "limitrange", true).short(&["limits"]),
    &NAMESPACES,
    &ResourceKind::row("", "v1", "nodes", "Node", "node", false)
        .short(&["no"])
        .stored_as("minions")
        .sub(STATUS)
        .selectors(&[("metadata.name", "metadata.name"), ("spec.unschedulable", "spec.unschedulable")])
        .rules(&NodeStrategy),
    &ResourceKind::row("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", "persistentvolumeclaim", true)
        .short(&["pvc"])
        .sub(STATUS)
        .rules(&PendingPhase),
    &ResourceKind::row("", "v1", "persistentvolumes", "PersistentVolume", "persistentvolume", false)
        .short(&["pv"])
        .sub(STATUS)
        .rules(&PendingPhase),
    &ResourceKind::row("", "v1", "pods", "Pod", "pod", true)
        .short(&["po"])
        .categories(ALL_CATEGORY)
        .sub(STATUS)
        .generation(SPEC)
        .selectors(POD_SELECTORS)
        .rules(&PodStrategy)
        .bound_by(&PodBinder),
    &ResourceKind::row("", "v1", "podtemplates", "PodTemplate", "podtemplate", true)
        .with_fields(&["template"])
        .generation(&["template"])
        .rules(&super::pod_spec::PodTemplateStrategy),
    &ResourceKind::row("", "v1", "replicationcontrollers", "ReplicationController", "replicationcontroller", true)
        .short(&["rc"])
        .categories(ALL_CATEGORY)
        .stored_as("controllers")
        .sub(STATUS.with(Subresources::SCALE))
        .generation(SPEC)
        .selectors(&[
            ("metadata.name", "metadata.name"),
            ("metadata.namespace", "metadata.namespace"),
            ("status.replicas", "status.replicas"),
        ])
        .rules(&ReplicationControllerStrategy),
    &ResourceKind::row("", "v1", "resourcequotas", "ResourceQuota", "resourcequota", true)
        .short(&["quota"])
        .sub(STATUS),
    &SECRETS,
    &ResourceKind::row("", "v1", "serviceaccounts", "ServiceAccount", "serviceaccount", true)
        .short(&["sa"])
        .with_fields(&["secrets", "imagePullSecrets", "automountServiceAccountToken"])
        .sub(Subresources::TOKEN),
    &ResourceKind::row("", "v1", "services", "Service", "service", true)
        .short(&["svc"])
        .categories(ALL_CATEGORY)
        .stored_as("services/specs")
        .names(NameRule::Dns1035Label)
        .sub(STATUS)
        .rules(&super::service::ServiceStrategy),
];

/// The fields of core/v1 Event (also the stored form of events.k8s.io/v1 Event).
pub const EVENT_FIELDS: &[&str] = &[
    "involvedObject",
    "reason",
    "message",
    "source",
    "firstTimestamp",
    "lastTimestamp",
    "count",
    "type",
    "eventTime",
    "series",
    "action",
    "related",
    "reportingComponent",
    "reportingInstance",
];

const EVENT_SELECTORS: &[(&str, &str)] = &[
    ("metadata.name", "metadata.name"),
    ("metadata.namespace", "metadata.namespace"),
    ("involvedObject.kind", "involvedObject.kind"),
    ("involvedObject.namespace", "involvedObject.namespace"),
    ("involvedObject.name", "involvedObject.name"),
    ("involvedObject.uid", "involvedObject.uid"),
    ("involvedObject.apiVersion", "involvedObject.apiVersion"),
    ("involvedObject.resourceVersion", "involvedObject.resourceVersion"),
    ("involvedObject.fieldPath", "involvedObject.fieldPath"),
    ("reason", "reason"),
    ("reportingComponent", "reportingComponent"),
    ("source", "source.component"),
    ("type", "type"),
];

const POD_SELECTORS: &[(&str, &str)] = &[
    ("metadata.name", "metadata.name"),
    ("metadata.namespace", "metadata.namespace"),
    ("spec.nodeName", "spec.nodeName"),
    ("spec.restartPolicy", "spec.restartPolicy"),
    ("spec.schedulerName", "spec.schedulerName"),
    ("spec.serviceAccountName", "spec.serviceAccountName"),
    ("status.phase", "status.phase"),
    ("status.podIP", "status.podIP"),
    ("status.nominatedNodeName", "status.nominatedNodeName"),
];

/// core/v1 Namespace.
pub static NAMESPACES: ResourceKind = ResourceKind::row("", "v1", "namespaces", "Namespace", "namespace", false)
    .short(&["ns"])
    .with_verbs(
        Verbs::GET
            .with(Verbs::LIST)
            .with(Verbs::WATCH)
            .with(Verbs::CREATE)
            .with(Verbs::UPDATE)
            .with(Verbs::PATCH)
            .with(Verbs::DELETE),
    )
    .names(NameRule::Label)
    .sub(STATUS.with(Subresources::FINALIZE))
    .selectors(&[("metadata.name", "metadata.name"), ("status.phase", "status.phase")])
    .returns_deleted()
    .rules(&NamespaceStrategy);

/// core/v1 ConfigMap.
pub static CONFIGMAPS: ResourceKind = ResourceKind::row("", "v1", "configmaps", "ConfigMap", "configmap", true)
    .short(&["cm"])
    .with_fields(&["data", "binaryData", "immutable"])
    .selectors(META_SELECTORS)
    .rules(&ConfigMapStrategy);

/// core/v1 Secret.
pub static SECRETS: ResourceKind = ResourceKind::row("", "v1", "secrets", "Secret", "secret", true)
    .with_fields(&["data", "stringData", "type", "immutable"])
    .selectors(&[("metadata.name", "metadata.name"), ("metadata.namespace", "metadata.namespace"), ("type", "type")])
    .rules(&SecretStrategy);

/// Returns the namespaces row (tests and the namespace lifecycle use it directly).
pub fn namespaces() -> &'static ResourceKind {
    &NAMESPACES
}

/// Returns the configmaps row.
pub fn configmaps() -> &'static ResourceKind {
    &CONFIGMAPS
}

/// Returns the secrets row.
pub fn secrets() -> &'static ResourceKind {
    &SECRETS
}

/// The label kube-apiserver puts on every namespace, naming it (for namespace selectors).
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Namespaces: phase `Active` and the `kubernetes` finalizer on create; spec and status are
/// kept on update (only `/finalize` and `/status` change them); the name label is enforced.
#[derive(Debug)]
struct NamespaceStrategy;

fn set_name_label(obj: &mut Object) {
    let name = map_field(obj, "metadata").and_then(|m| m.get("name")).cloned().unwrap_or(Value::Null);
    if let Value::String(name) = name {
        let labels = map_field_mut(map_field_mut(obj, "metadata"), "labels");
        labels.insert(NAMESPACE_NAME_LABEL.into(), Value::String(name));
    }
}

impl Strategy for NamespaceStrategy {
    fn prepare_for_create(&self, obj: &mut Object) {
        obj.insert("status".into(), serde_json::json!({"phase": "Active"}));
        let spec = map_field_mut(obj, "spec");
        let finalizers = spec.entry("finalizers").or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(list) = finalizers {
            if !list.iter().any(|f| f == "kubernetes") {
                list.push("kubernetes".into());
            }
        }
        set_name_label(obj);
    }

    fn prepare_for_update(&self, new: &mut Object, old: &Object) {
        // spec.finalizers change only through /finalize; status only through /status.
        for key in ["spec", "status"] {
            match old.get(key) {
                Some(v) => new.insert(key.into(), v.clone()),
                None => new.remove(key),
            };
        }
        set_name_label(new);
    }
}

fn immutable(obj: &Object) -> bool {
    obj.get("immutable").and_then(Value::as_bool).unwrap_or(false)
}

/// Validates data keys (and, for `bytes_base64`, that values are base64) of `obj[field]`.
fn validate_data(obj: &Object, field: &str, bytes_base64: bool, errs: &mut Vec<FieldError>) {
    let Some(value) = obj.get(field) else { return };
    let Some(data) = value.as_object() else {
        errs.push(FieldError::invalid(field, value.clone(), "must be an object"));
        return;
    };
    for (key, v) in data {
        for msg in config_map_key(key) {
            errs.push(FieldError::invalid(format!("{field}[{key}]"), key.as_str(), msg));
        }
        let ok = match v {
            Value::String(s) if bytes_base64 => base64::engine::general_purpose::STANDARD.decode(s).is_ok(),
            Value::String(_) => true,
            _ => false,
        };
        if !ok {
            errs.push(FieldError::invalid(format!("{field}[{key}]"), v.clone(), "must be a base64-encoded string"));
        }
    }
}

/// kube's bound on a ConfigMap's or Secret's data (`MaxSecretSize`, 1 MiB): they are mounted
/// into pods whole, and the store's request limit (etcd's 1.5 MiB) must hold the object.
const MAX_DATA_BYTES: usize = 1024 * 1024;

/// The bytes of the values of `obj[field]`: strings as they are, or (for `base64`) decoded.
fn data_bytes(obj: &Object, field: &str, base64: bool) -> usize {
    let values = map_field(obj, field).into_iter().flatten().filter_map(|(_, v)| v.as_str());
    if base64 {
        // Decoded size of valid base64; an invalid value is reported by `validate_data`.
        values
            .map(|s| (s.len() / 4 * 3).saturating_sub(s.bytes().rev().take_while(|&b| b == b'=').count().min(2)))
            .sum()
    } else {
        values.map(str::len).sum()
    }
}

fn immutable_violations(new: &Object, old: &Object, fields: &[&str]) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if !immutable(old) {
        return errs;
    }
    if !immutable(new) {
        errs.push(FieldError::forbidden("immutable", "field is immutable when `immutable` is set"));
    }
    for f in fields {
        if new.get(*f) != old.get(*f) {
            errs.push(FieldError::forbidden(*f, "field is immutable when `immutable` is set"));
        }
    }
    errs
}

/// ConfigMaps: valid, non-overlapping keys in `data` and `binaryData`; `immutable` freezes them.
#[derive(Debug)]
struct ConfigMapStrategy;

impl Strategy for ConfigMapStrategy {
    fn validate(&self, obj: &Object) -> Vec<FieldError> {
        let mut errs = Vec::new();
        validate_data(obj, "data", false, &mut errs);
        validate_data(obj, "binaryData", true, &mut errs);
        if data_bytes(obj, "data", false) + data_bytes(obj, "binaryData", true) > MAX_DATA_BYTES {
            // kube names no field: the limit is on the object's data as a whole.
            errs.push(FieldError::too_long("", MAX_DATA_BYTES));
        }
        if let (Some(data), Some(binary)) = (map_field(obj, "data"), map_field(obj, "binaryData")) {
            for key in binary.keys().filter(|k| data.contains_key(*k)) {
                errs.push(FieldError::invalid(
                    format!("data[{key}]"),
                    key.as_str(),
                    "duplicate of key present in binaryData",
                ));
            }
        }
        errs
    }

    fn validate_update(&self, new: &Object, old: &Object) -> Vec<FieldError> {
        let mut errs = immutable_violations(new, old, &["data", "binaryData"]);
        errs.extend(self.validate(new));
        errs
    }
}

/// Secrets: `stringData` is folded into `data` (base64), `type` defaults to `Opaque` and may not
/// change, keys are config keys, `immutable` freezes the data.
#[derive(Debug)]
struct SecretStrategy;

fn fold_string_data(obj: &mut Object) {
    let Some(Value::Object(string_data)) = obj.remove("stringData") else { return };
    let data = map_field_mut(obj, "data");
    for (k, v) in string_data {
        if let Value::String(s) = v {
            data.insert(k, Value::String(base64::engine::general_purpose::STANDARD.encode(s)));
        }
    }
}

impl Strategy for SecretStrategy {
    fn prepare_for_create(&self, obj: &mut Object) {
        fold_string_data(obj);
        if obj.get("type").and_then(Value::as_str).is_none_or(str::is_empty) {
            obj.insert("type".into(), "Opaque".into());
        }
    }

    fn validate(&self, obj: &Object) -> Vec<FieldError> {
        let mut errs = Vec::new();
        validate_data(obj, "data", true, &mut errs);
        if data_bytes(obj, "data", true) > MAX_DATA_BYTES {
            errs.push(FieldError::too_long("data", MAX_DATA_BYTES));
        }
        errs
    }

    fn prepare_for_update(&self, new: &mut Object, _old: &Object) {
        self.prepare_for_create(new);
    }

    fn validate_update(&self, new: &Object, old: &Object) -> Vec<FieldError> {
        let mut errs = immutable_violations(new, old, &["data"]);
        if new.get("type") != old.get("type") {
            errs.push(FieldError::invalid(
                "type",
                new.get("type").cloned().unwrap_or(Value::Null),
                "field is immutable",
            ));
        }
        errs.extend(self.validate(new));
        errs
    }
}

/// Nodes: the kubelet registers a node with its status, so create keeps it.
#[derive(Debug)]
struct NodeStrategy;

impl Strategy for NodeStrategy {
    fn reset_status_on_create(&self) -> bool {
        false
    }
}

/// Persistent volumes and claims start in phase `Pending`.
#[derive(Debug)]
struct PendingPhase;

impl Strategy for PendingPhase {
    fn prepare_for_create(&self, obj: &mut Object) {
        obj.insert("status".into(), json!({"phase": "Pending"}));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Object {
        match v {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    #[test]
    fn namespace_create_sets_phase_finalizer_and_label() {
        let mut ns = obj(json!({"metadata": {"name": "x"}}));
        NAMESPACES.strategy.prepare_for_create(&mut ns);
        assert!(NAMESPACES.has_status());
        assert_eq!(ns["status"], json!({"phase": "Active"}));
        assert_eq!(ns["spec"], json!({"finalizers": ["kubernetes"]}));
        assert_eq!(ns["metadata"]["labels"][NAMESPACE_NAME_LABEL], "x");
    }

    #[test]
    fn configmap_keys_and_immutability() {
        let bad = obj(json!({"data": {"a b": "1", "": "2"}}));
        let errs = CONFIGMAPS.strategy.validate(&bad);
        assert_eq!(errs.len(), 2);
        assert!(errs.iter().any(|e| e.field == "data[]"));
        let old = obj(json!({"data": {"a": "1"}, "immutable": true}));
        let new = obj(json!({"data": {"a": "2"}, "immutable": true}));
        assert_eq!(CONFIGMAPS.strategy.validate_update(&new, &old).len(), 1);
    }

    #[test]
    fn secret_folds_string_data_and_defaults_type() {
        let mut s = obj(json!({"stringData": {"k": "v"}}));
        SECRETS.strategy.prepare_for_create(&mut s);
        assert_eq!(s, obj(json!({"data": {"k": "dg=="}, "type": "Opaque"})));
        assert_eq!(SECRETS.strategy.validate(&obj(json!({"data": {"k": "!!"}}))).len(), 1);
    }
}
