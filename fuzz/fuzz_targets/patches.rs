//! PATCH bodies of the three formats applied to a stored object: never a panic; the result
//! nests no deeper than the limit and is readable again (a patch cannot build an object nested past what the server can read back,
//! or one that does not round-trip); a JSON patch grows the object by at most the copy limit
//! plus what its own text adds; a merge patch is idempotent (RFC 7386).
//!
//! Input: one byte picking the format and the kind, then the object's JSON, a NUL, the patch.
#![no_main]

use ballast_apimachinery::patch::{self, json_patch, PatchType};
use ballast_apimachinery::schema;
use ballast_fuzz::{assert_round_trip, depth};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

const KINDS: [(&str, &str, &str); 3] = [("", "v1", "ConfigMap"), ("", "v1", "Pod"), ("apps", "v1", "Deployment")];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else { return };
    let ty = [PatchType::Json, PatchType::Merge, PatchType::Strategic][usize::from(pick & 3) % 3];
    let (group, version, kind) = KINDS[usize::from(pick >> 2) % KINDS.len()];
    let (doc, body) = match rest.iter().position(|&b| b == 0) {
        Some(at) => (serde_json::from_slice::<Value>(&rest[..at]).ok(), &rest[at + 1..]),
        None => (None, rest),
    };
    // A stored object is a JSON object the server could read; anything else stands in for one.
    let doc = doc.filter(Value::is_object).unwrap_or_else(|| {
        json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": "x", "labels": {"a": "b"}},
               "data": {"k": "v"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
    });
    let Ok(out) = patch::apply(ty, &doc, body, schema::lookup(group, version, kind)) else { return };
    assert!(depth(&out) <= patch::MAX_RESULT_DEPTH, "a patched object nests {} deep", depth(&out));
    assert_round_trip(&out, "patched object");
    match ty {
        PatchType::Json => {
            let (before, after) = (doc.to_string().len(), out.to_string().len());
            assert!(
                after <= before + json_patch::MAX_COPY_BYTES + 2 * body.len() + 64,
                "a {}-byte JSON patch grew the object from {before} to {after} bytes",
                body.len()
            );
        }
        PatchType::Merge => {
            let twice = patch::apply(ty, &out, body, None).expect("a merge patch that applied once applies again");
            assert_eq!(twice, out, "merge patch is not idempotent");
        }
        _ => {}
    }
});
