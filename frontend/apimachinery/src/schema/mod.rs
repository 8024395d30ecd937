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
//! holds in JSON, which server-side apply compares a create against), and which number and
//! boolean fields are non-pointers with `omitempty` (a zero of theirs in a protobuf body means
//! unset, and the decoder drops it as kube's JSON does), and which string fields are neither
//! pointers nor `omitempty` (kube's JSON prints their empty value, and the decoder keeps it).

#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod generated;
#[allow(clippy::all, clippy::pedantic)]
pub mod zero_values;

pub use generated::{lookup, ATOMIC_STRUCTS};

use crate::protobuf::{GoZeros, Message};

/// What the zero value of `message`'s Go type holds in JSON: its value-struct fields (written
/// as objects, their own zero values within) and its fields written as `null`; `None` when
/// it holds neither.
pub fn zero_fields(message: &'static Message) -> Option<(&'static [&'static str], &'static [&'static str])> {
    zero_values::ZERO_VALUES.iter().find(|(m, _, _)| std::ptr::eq(*m, message)).map(|(_, v, n)| (*v, *n))
}

/// The number and boolean fields of `message` whose zero means "unset" (non-pointer Go fields
/// with `omitempty`): protobuf carries that zero, kube's JSON omits it.
pub fn unset_zeros(message: &Message) -> &'static [&'static str] {
    zero_values::UNSET_ZEROS.iter().find(|(m, _)| std::ptr::eq(*m, message)).map_or(&[], |(_, names)| names)
}

/// The fields of `message` whose zero kube's JSON prints (neither pointers nor `omitempty`),
/// so that its Go type's zero value holds it: numbers and booleans, then strings.
pub fn printed_zeros(message: &Message) -> impl Iterator<Item = &'static str> {
    let scalars = zero_values::PRINTED_SCALAR_ZEROS.iter().find(|(m, _)| std::ptr::eq(*m, message));
    scalars.map_or(&[][..], |(_, names)| names).iter().chain(printed_empty_strings(message)).copied()
}

/// The string fields of `message` whose empty value kube's JSON prints as `""` (neither
/// pointers nor `omitempty`).
pub fn printed_empty_strings(message: &Message) -> &'static [&'static str] {
    zero_values::PRINTED_EMPTY_STRINGS.iter().find(|(m, _)| std::ptr::eq(*m, message)).map_or(&[], |(_, names)| names)
}

/// The zero rules of the built-in kinds' Go types, for the protobuf decoder.
pub const GO_ZEROS: GoZeros = GoZeros { unset: unset_zeros, printed_empty: printed_empty_strings };

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
        let obj = decode_object(body, lookup("", "v1", "ConfigMap").expect("schema"), GO_ZEROS).expect("decode");
        assert_eq!(
            obj,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm1"}, "data": {"a": "b"}})
        );
    }

    /// A varint field `number: value` (both below 128; the key takes two bytes from field 16).
    fn varint(number: u8, value: u8) -> Vec<u8> {
        match number << 3 {
            key if key < 0x80 => vec![key, value],
            key => vec![key, 1, value],
        }
    }

    /// A length-delimited field `number: parts` (shorter than 128 bytes).
    fn nested(number: u8, parts: &[Vec<u8>]) -> Vec<u8> {
        let body = parts.concat();
        [vec![number << 3 | 2, u8::try_from(body.len()).expect("a short message")], body].concat()
    }

    #[test]
    fn zeros_of_omitempty_values_are_dropped_and_pointer_zeros_kept() {
        // What gogo-protobuf writes for a Deployment whose non-pointer fields are zero:
        // replicas (*int32) 0, minReadySeconds (int32, omitempty) 0, paused (bool, omitempty)
        // false, progressDeadlineSeconds (*int32) 0, and in the pod template hostNetwork
        // (bool, omitempty) false, a container's stdin (bool, omitempty) false and a port's
        // containerPort (int32, no omitempty) 0 and hostPort (int32, omitempty) 0.
        let port = nested(6, &[varint(2, 0), varint(3, 0)]);
        let container = nested(2, &[nested(1, &[b"c".to_vec()]), port, varint(16, 0)]);
        let pod_spec = nested(2, &[container, varint(11, 0)]);
        let spec = nested(2, &[varint(1, 0), varint(5, 0), varint(7, 0), varint(9, 0), nested(3, &[pod_spec])]);
        let metadata = nested(1, &[nested(1, &[b"x".to_vec()]), varint(7, 0)]);
        let deployment = lookup("apps", "v1", "Deployment").expect("deployment schema");
        let obj = decode_message(&[metadata, spec].concat(), deployment, GO_ZEROS).expect("decode");
        assert_eq!(
            obj,
            json!({
                "metadata": {"name": "x"},
                "spec": {
                    "replicas": 0,
                    "progressDeadlineSeconds": 0,
                    "template": {"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 0}]}]}}
                }
            })
        );
        // The last occurrence wins: `paused: true` then `paused: false` is unset.
        let spec = nested(2, &[varint(7, 1), varint(7, 0)]);
        assert_eq!(decode_message(&spec, deployment, GO_ZEROS), Ok(json!({"spec": {}})));
        // A non-zero value of an omitempty field is kept.
        let spec = nested(2, &[varint(7, 1), varint(5, 3)]);
        assert_eq!(
            decode_message(&spec, deployment, GO_ZEROS),
            Ok(json!({"spec": {"paused": true, "minReadySeconds": 3}}))
        );
    }

    #[test]
    fn pod_spec_host_network_false_is_unset() {
        // Pod{spec{hostNetwork: false, hostPID: true}}: kube's JSON has hostPID only.
        let pod = lookup("", "v1", "Pod").expect("pod schema");
        let body = nested(2, &[varint(11, 0), varint(12, 1)]);
        assert_eq!(decode_message(&body, pod, GO_ZEROS), Ok(json!({"spec": {"hostPID": true}})));
        assert_eq!(unset_zeros(&generated::API_CORE_V1_PODSPEC), ["hostNetwork", "hostPID", "hostIPC"]);
        // A message without such fields has none; a pointer (`replicas`) is never listed.
        assert!(unset_zeros(&generated::API_CORE_V1_CONFIGMAP).is_empty());
        assert!(!unset_zeros(&generated::API_APPS_V1_DEPLOYMENTSPEC).contains(&"replicas"));
    }

    #[test]
    fn empty_strings_are_kept_where_kube_prints_them() {
        // Event{reason: "", message: "x", type: "", reportingComponent: "", reportingInstance: ""}
        // as a Go client writes it: kube prints the two without omitempty as "".
        let event = lookup("", "v1", "Event").expect("event schema");
        let body = [nested(3, &[]), nested(4, &[b"x".to_vec()]), nested(9, &[]), nested(14, &[]), nested(15, &[])];
        assert_eq!(
            decode_message(&body.concat(), event, GO_ZEROS),
            Ok(json!({"message": "x", "reportingComponent": "", "reportingInstance": ""}))
        );
        // The last occurrence wins: a printed field's later "" replaces an earlier value; an
        // omitempty one's clears it.
        let body = [nested(14, &[b"a".to_vec()]), nested(14, &[]), nested(3, &[b"r".to_vec()]), nested(3, &[])];
        assert_eq!(decode_message(&body.concat(), event, GO_ZEROS), Ok(json!({"reportingComponent": ""})));
        // Within an embedded struct (EphemeralContainer inlines EphemeralContainerCommon), its
        // own table decides: `name` is printed, `image` (omitempty) is not.
        let common = nested(1, &[nested(1, &[]), nested(2, &[])]);
        // ephemeralContainers is field 34: a two-byte key.
        let ephemeral = [vec![0x92, 0x02, u8::try_from(common.len()).expect("short")], common].concat();
        let pod_spec = nested(2, &[ephemeral]);
        let pod = lookup("", "v1", "Pod").expect("pod schema");
        assert_eq!(
            decode_message(&pod_spec, pod, GO_ZEROS),
            Ok(json!({"spec": {"ephemeralContainers": [{"name": ""}]}}))
        );
        assert_eq!(printed_empty_strings(&generated::API_RBAC_V1_ROLEREF), ["apiGroup", "kind", "name"]);
        assert!(printed_empty_strings(&generated::API_CORE_V1_CONFIGMAP).is_empty());
    }

    #[test]
    fn generated_tags_are_upstream_ones() {
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
            decode_object(b"{}", lookup("", "v1", "ConfigMap").expect("schema"), GO_ZEROS),
            Err(DecodeError::MissingMagic)
        );
        assert_eq!(
            decode_object(b"k8s\x00\x12\x05ab", lookup("", "v1", "ConfigMap").expect("schema"), GO_ZEROS),
            Err(DecodeError::Truncated)
        );
    }

    #[test]
    fn decodes_secret_bytes_and_namespace_spec() {
        // Secret{metadata{name:"s"}, data{"k": [0xff]}, type:"Opaque"}
        let raw = b"\n\x03\n\x01s\x12\x06\n\x01k\x12\x01\xff\x1a\x06Opaque";
        let obj = decode_message(raw, lookup("", "v1", "Secret").expect("schema"), GO_ZEROS).expect("decode");
        assert_eq!(obj, json!({"metadata": {"name": "s"}, "data": {"k": "/w=="}, "type": "Opaque"}));
        // Namespace{metadata{name:"x", labels{"a":"b"}}, spec{finalizers:["kubernetes"]}}
        let raw = b"\n\x0b\n\x01xZ\x06\n\x01a\x12\x01b\x12\x0c\n\nkubernetes";
        let obj = decode_message(raw, lookup("", "v1", "Namespace").expect("schema"), GO_ZEROS).expect("decode");
        assert_eq!(
            obj,
            json!({"metadata": {"name": "x", "labels": {"a": "b"}}, "spec": {"finalizers": ["kubernetes"]}})
        );
    }
}
