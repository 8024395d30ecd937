//! Bodies for the tests of the compiled schema checks ([`super::field_types`],
//! [`super::unknown_fields`]): objects of several kinds as clients and the store hold them, and
//! every variant of them with one value changed to another JSON type or one unknown field
//! added, so that the compiled check can be held to the walk it stands in for.

use serde_json::{json, Map, Value};

/// `(group, version, kind, object)`.
pub(crate) fn bodies() -> Vec<(&'static str, &'static str, &'static str, Map<String, Value>)> {
    let container = json!({"name": "web", "image": "registry.k8s.io/web:1",
        "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
        "env": [{"name": "MODE", "value": "bench"}, {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "resources": {"requests": {"cpu": "100m", "memory": 64}, "limits": {"memory": "128Mi"}},
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"}, "periodSeconds": 5},
        "securityContext": {"runAsNonRoot": true, "capabilities": {"drop": ["ALL"]}}});
    let pod_spec = json!({"containers": [container], "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
        "nodeSelector": {"disk": "ssd"}, "volumes": [{"name": "v", "emptyDir": {}}], "securityContext": {}});
    let meta = json!({"name": "x", "namespace": "default", "labels": {"app": "x"}, "annotations": {"a": "b"},
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "o", "uid": "u", "controller": true}],
        "managedFields": [{"manager": "m", "operation": "Apply", "apiVersion": "apps/v1",
            "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}}]});
    let objects = [
        (
            "apps",
            "v1",
            "Deployment",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "x"}},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
                "template": {"metadata": {"labels": {"app": "x"}}, "spec": pod_spec}},
            "status": {"replicas": 3, "conditions": [{"type": "Available", "status": "True"}]}}),
        ),
        (
            "",
            "v1",
            "Service",
            json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80, "targetPort": "http"}],
            "selector": {"app": "x"}, "type": "ClusterIP"}}),
        ),
        (
            "",
            "v1",
            "ConfigMap",
            json!({"metadata": {"name": "c"}, "data": {"k": "v"}, "binaryData": {"b": "AA=="},
            "immutable": false}),
        ),
        (
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            json!({"metadata": {"name": "ws.example.com"},
            "spec": {"group": "example.com", "names": {"kind": "W", "plural": "ws"}, "scope": "Namespaced",
                "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                    "type": "object", "properties": {"spec": {"type": "object", "default": {"a": 1},
                        "x-kubernetes-preserve-unknown-fields": true}}}}}]}}),
        ),
    ];
    objects
        .into_iter()
        .filter_map(|(g, v, k, o)| match o {
            Value::Object(m) => Some((g, v, k, m)),
            _ => None,
        })
        .collect()
}

/// Every copy of `value` with one value replaced by another JSON type, or one object given an
/// unknown field.
pub(crate) fn variants(value: &Map<String, Value>) -> Vec<Map<String, Value>> {
    let root = Value::Object(value.clone());
    let mut paths = Vec::new();
    collect_paths(&root, &mut Vec::new(), &mut paths);
    let replacements = [
        json!("s"),
        json!(1),
        json!(1.5),
        json!(true),
        json!({}),
        json!([]),
        json!({"zzBogus": 1}),
        json!([1]),
        json!(null),
    ];
    let mut out = Vec::new();
    for path in &paths {
        for r in &replacements {
            let mut copy = root.clone();
            if let Some(at) = pointer_mut(&mut copy, path) {
                *at = r.clone();
            }
            out.push(copy);
        }
        let mut copy = root.clone();
        if let Some(Value::Object(m)) = pointer_mut(&mut copy, path) {
            m.insert("zzBogus".into(), json!(1));
            out.push(copy);
        }
    }
    out.into_iter().filter_map(|v| if let Value::Object(m) = v { Some(m) } else { None }).collect()
}

#[derive(Clone)]
enum Step {
    Key(String),
    Index(usize),
}

fn collect_paths(v: &Value, at: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    if !at.is_empty() {
        out.push(at.clone());
    }
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                at.push(Step::Key(k.clone()));
                collect_paths(child, at, out);
                at.pop();
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                at.push(Step::Index(i));
                collect_paths(child, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn pointer_mut<'a>(v: &'a mut Value, path: &[Step]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |v, step| match step {
        Step::Key(k) => v.get_mut(k.as_str()),
        Step::Index(i) => v.get_mut(*i),
    })
}
