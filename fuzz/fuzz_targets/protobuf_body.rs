//! kube protobuf bodies (`k8s\0` + `runtime.Unknown` + the object) as the server decodes them
//! into JSON over each kind's schema table: never a panic; messages nested past the limit are
//! refused (the CRD schema type is recursive, so nesting is the input's to choose); what decodes
//! is a JSON object that round-trips.
#![no_main]

use ballast_apimachinery::{protobuf, schema};
use ballast_fuzz::assert_round_trip;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// Kinds with the schemas that reach most of the decoder: maps, repeated and embedded
/// messages, int-or-string, quantities, and the recursive JSONSchemaProps.
const KINDS: [(&str, &str, &str); 6] = [
    ("", "v1", "ConfigMap"),
    ("", "v1", "Pod"),
    ("", "v1", "Secret"),
    ("apps", "v1", "Deployment"),
    ("batch", "v1", "CronJob"),
    ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, body)) = data.split_first() else { return };
    let (group, version, kind) = KINDS[usize::from(pick) % KINDS.len()];
    let schema = schema::lookup(group, version, kind).expect("invariant: a built-in kind has a schema");
    // The envelope, as a client sends it, and the bare message inside it.
    let decoded =
        if pick & 0x80 == 0 { protobuf::decode_object(body, schema, schema::GO_ZEROS) } else { protobuf::decode_message(body, schema, schema::GO_ZEROS) };
    match decoded {
        Ok(value) => {
            assert!(matches!(value, Value::Object(_)), "decoded to a non-object: {value}");
            assert_round_trip(&value, "protobuf body");
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
