//! The object schema of every built-in kind: field numbers and types (for protobuf bodies),
//! JSON names, and the strategic-merge-patch tags (`patchStrategy`, `patchMergeKey`) of the
//! upstream Go types, as [`crate::protobuf::Message`] tables.
//!
//! [`generated`] is written by `tools/schema_gen.py` from the k8s-pb (prost types generated from
//! kube's `generated.proto`, whose doc comments keep the Go `+patchStrategy` markers) and
//! k8s-openapi (JSON names) crate sources, pinned to the served Kubernetes version (1.33); the
//! script's doc says how to run it. Fields newer than 1.33 in k8s-pb are left out, so a body
//! carrying them decodes as 1.33 would (unknown fields skipped).
//!
//! [`zero_values`] is written by `tools/zero_value_gen.py` from the Go types themselves (which
//! fields are value structs, which are written as `null` when unset): what a type's zero value
//! holds in JSON, which server-side apply compares a create against.

#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod generated;
#[allow(clippy::all, clippy::pedantic)]
pub mod zero_values;

pub use generated::{lookup, ATOMIC_STRUCTS};

use crate::protobuf::Message;

/// What the zero value of `message`'s Go type holds in JSON: its value-struct fields (written
/// as objects, their own zero values within) and its fields written as `null`; `None` when
/// it holds neither.
pub fn zero_fields(message: &'static Message) -> Option<(&'static [&'static str], &'static [&'static str])> {
    zero_values::ZERO_VALUES.iter().find(|(m, _, _)| std::ptr::eq(*m, message)).map(|(_, v, n)| (*v, *n))
}

#[cfg(test)]
mod tests {
    //! The generated tables decode the protobuf bodies kubectl sends.

    use super::*;
    use crate::protobuf::{decode_message, decode_object, DecodeError};
    use serde_json::json;

    #[test]
    fn decodes_kubectl_create_configmap() {
        // The exact body `kubectl create configmap cm1 --from-literal=a=b` sends
        // (kubectl-transcripts/create-cm).
        let body = b"k8s\x00\n\x0f\n\x02v1\x12\tConfigMap\x12\x1d\n\x13\n\x03cm1\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12\x06\n\x01a\x12\x01b\x1a\x00\"\x00";
        let obj = decode_object(body, lookup("", "v1", "ConfigMap").expect("schema")).expect("decode");
        assert_eq!(
            obj,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm1"}, "data": {"a": "b"}})
        );
    }

    #[test]
    fn explicit_zeros_survive_and_generated_tags_are_upstream_ones() {
        // Deployment{spec{replicas: 0, paused: false}}: replicas is a pointer, so 0 is meant.
        let deployment = lookup("apps", "v1", "Deployment").expect("deployment schema");
        let obj = decode_message(b"\x12\x04\x08\x00\x38\x00", deployment).expect("decode");
        assert_eq!(obj, json!({"spec": {"replicas": 0, "paused": false}}));
        let pod_spec = generated::API_CORE_V1_PODSPEC.fields.iter();
        let tags: Vec<(&str, &str, &str)> = pod_spec
            .filter(|f| matches!(f.json, "containers" | "volumes" | "imagePullSecrets"))
            .map(|f| (f.json, f.patch.strategy, f.patch.merge_key))
            .collect();
        assert_eq!(
            tags,
            [
                ("volumes", "merge,retainKeys", "name"),
                ("containers", "merge", "name"),
                ("imagePullSecrets", "merge", "name")
            ]
        );
    }

    #[test]
    fn rejects_bodies_without_magic() {
        assert_eq!(
            decode_object(b"{}", lookup("", "v1", "ConfigMap").expect("schema")),
            Err(DecodeError::MissingMagic)
        );
        assert_eq!(
            decode_object(b"k8s\x00\x12\x05ab", lookup("", "v1", "ConfigMap").expect("schema")),
            Err(DecodeError::Truncated)
        );
    }

    #[test]
    fn decodes_secret_bytes_and_namespace_spec() {
        // Secret{metadata{name:"s"}, data{"k": [0xff]}, type:"Opaque"}
        let raw = b"\n\x03\n\x01s\x12\x06\n\x01k\x12\x01\xff\x1a\x06Opaque";
        let obj = decode_message(raw, lookup("", "v1", "Secret").expect("schema")).expect("decode");
        assert_eq!(obj, json!({"metadata": {"name": "s"}, "data": {"k": "/w=="}, "type": "Opaque"}));
        // Namespace{metadata{name:"x", labels{"a":"b"}}, spec{finalizers:["kubernetes"]}}
        let raw = b"\n\x0b\n\x01xZ\x06\n\x01a\x12\x01b\x12\x0c\n\nkubernetes";
        let obj = decode_message(raw, lookup("", "v1", "Namespace").expect("schema")).expect("decode");
        assert_eq!(
            obj,
            json!({"metadata": {"name": "x", "labels": {"a": "b"}}, "spec": {"finalizers": ["kubernetes"]}})
        );
    }
}
