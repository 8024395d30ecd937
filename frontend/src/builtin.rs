//! [`BuiltinKinds`]: the built-in API as the generic server takes it (a `ServedKinds`): the
//! table of kinds ([`crate::kinds`]), their Table printers ([`crate::printers`]) and the OpenAPI
//! documents and schemas built from k8s-openapi ([`crate::openapi`]).

use serde_json::{Map, Value};

use crate::kinds::{self, NAMESPACES};
use crate::openapi;
use crate::printers::printer;
use ballast_apiserver::registry::served_kinds::Documents;
use ballast_apiserver::registry::table::Printer;
use ballast_apiserver::registry::{ApiGroup, ResourceKind, ServedKinds};
use ballast_apiserver::served::VirtualResource;

/// The 59 built-in resources of kube-apiserver 1.33, in its discovery order.
#[derive(Debug, Clone, Copy, Default)]
pub struct BuiltinKinds;

impl ServedKinds for BuiltinKinds {
    fn groups(&self) -> &'static [ApiGroup] {
        kinds::GROUPS
    }

    fn kinds(&self) -> &[&'static ResourceKind] {
        &kinds::ALL
    }

    fn namespaces(&self) -> &'static ResourceKind {
        &NAMESPACES
    }

    fn printer(&self, kind: &ResourceKind) -> &'static Printer {
        printer(kind.group, kind.resource)
    }

    fn prune_unknown_fields(&self, kind: &ResourceKind, obj: &mut Map<String, Value>) -> Vec<String> {
        openapi::unknown_fields::prune(kind.group, kind.version, kind.kind, obj)
    }

    fn type_mismatch(&self, kind: &ResourceKind, obj: &Map<String, Value>) -> Option<String> {
        openapi::field_types::first_mismatch(kind.group, kind.version, kind.kind, obj)
    }

    fn virtual_resources(&self) -> &'static [VirtualResource] {
        &crate::reviews::VIRTUAL_RESOURCES
    }

    fn openapi(&self) -> &'static Documents {
        openapi::documents()
    }

    fn openapi_if_built(&self) -> Option<&'static Documents> {
        openapi::built()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ballast_apiserver::error::ApiError;
    use ballast_apiserver::registry::deletion::namespaced_storages;
    use ballast_apiserver::registry::object::{decode, FieldValidation};
    use ballast_apiserver::registry::Store;
    use ballast_apiserver::storage::MemStorage;
    use serde_json::json;
    use std::sync::Arc;

    #[test]
    fn strict_decoding_finds_nested_unknown_fields() {
        let deployments = BuiltinKinds.find("apps", "v1", "deployments").expect("row");
        let body = br#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},
            "spec":{"foo":1,"selector":{"matchLabels":{"a":"b"}},"template":{"spec":{"containers":[{"name":"c","image":"i"}]}}}}"#;
        let err =
            decode(&BuiltinKinds, deployments, "application/json", body, FieldValidation::Strict).expect_err("strict");
        assert_eq!(
            err.to_string(),
            "Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding error: \
             unknown field \"spec.foo\""
        );
        let (obj, warnings) =
            decode(&BuiltinKinds, deployments, "application/json", body, FieldValidation::Warn).expect("warn");
        assert_eq!(warnings, vec![r#"unknown field "spec.foo""#]);
        let twice = br#"{"metadata":{"name":"d"},"spec":{"replicas":1,"replicas":2}}"#;
        let err =
            decode(&BuiltinKinds, deployments, "application/json", twice, FieldValidation::Strict).expect_err("strict");
        assert!(err.to_string().ends_with(r#"strict decoding error: duplicate field "spec.replicas""#), "{err}");
        // Several findings come in document order, as kube lists them.
        let mixed = br#"{"metadata":{"name":"d","zz":1,"name":"e"},"spec":{"replicas":1,"b":1,"replicas":2,"a":1}}"#;
        let err =
            decode(&BuiltinKinds, deployments, "application/json", mixed, FieldValidation::Strict).expect_err("strict");
        assert!(
            err.to_string().ends_with(
                r#"strict decoding error: unknown field "metadata.zz", duplicate field "metadata.name", unknown field "spec.b", duplicate field "spec.replicas", unknown field "spec.a""#
            ),
            "{err}"
        );
        assert!(obj["spec"].get("foo").is_none());
        assert_eq!(obj["spec"]["selector"]["matchLabels"]["a"], "b");
    }

    #[test]
    fn every_namespaced_storage_is_swept_once() {
        let prefixes: Vec<&str> = namespaced_storages(&BuiltinKinds).map(|k| k.storage_resource).collect();
        let unique: std::collections::HashSet<&&str> = prefixes.iter().collect();
        assert_eq!(prefixes.len(), unique.len(), "{prefixes:?}");
        assert!(prefixes.contains(&"events") && prefixes.contains(&"horizontalpodautoscalers"));
        assert!(!prefixes.contains(&"bindings"));
    }

    #[tokio::test]
    async fn bindings_and_pod_binding_place_a_pod_once() {
        let store = Store::new(Arc::new(MemStorage::new()), "/registry", Arc::new(BuiltinKinds));
        store.ensure_system_namespaces().await.expect("system namespaces");
        let pods = BuiltinKinds.find("", "v1", "pods").expect("pods");
        let bindings = BuiltinKinds.find("", "v1", "bindings").expect("bindings");
        for name in ["a", "b"] {
            let pod = json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
            store.create(pods, "default", pod.as_object().cloned().expect("object"), false).await.expect("create");
        }
        let binding = |name: &str| {
            json!({"metadata": {"name": name}, "target": {"name": "node-1"}}).as_object().cloned().expect("object")
        };
        // The collection form names the pod in the body; the subresource form in the URL too.
        store.bind(bindings, "default", None, &binding("a"), false).await.expect("bind a");
        store.bind(pods, "default", Some("b"), &binding("b"), false).await.expect("bind b");
        for name in ["a", "b"] {
            let pod = store.get(pods, "default", name).await.expect("get");
            assert_eq!(pod["spec"]["nodeName"], "node-1");
            assert_eq!(pod["status"]["conditions"][0]["type"], "PodScheduled");
        }
        let again = store.bind(pods, "default", Some("a"), &binding("a"), false).await.expect_err("bound");
        assert!(matches!(again, ApiError::Conflict { .. }), "{again}");
        assert!(again.to_string().contains(r#"pod a is already assigned to node "node-1""#), "{again}");
        let mismatch = store.bind(pods, "default", Some("a"), &binding("b"), false).await;
        assert!(matches!(mismatch, Err(ApiError::BadRequest(_))), "{mismatch:?}");
    }
}
