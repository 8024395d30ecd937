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
    use ballast_apiserver::registry::deletion::namespaced_storages;
    use ballast_apiserver::registry::object::{decode, FieldValidation};

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
}
