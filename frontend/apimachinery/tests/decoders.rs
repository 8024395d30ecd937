//! Property tests of every decoder a request body reaches (YAML nesting check, protobuf
//! bodies, the three patch formats): arbitrary input never panics, and nesting or copying past
//! the limits is refused rather than followed. The `fuzz/` targets search the same entry points
//! with coverage feedback; these bounded runs go with the rest of the unit tests.

use ballast_apimachinery::patch::{self, json_patch, PatchType};
use ballast_apimachinery::{protobuf, schema, yaml_depth};
use proptest::prelude::*;
use serde_json::{json, Value};

fn config() -> ProptestConfig {
    // Enough cases to reach the decoders' branches; each runs in microseconds.
    ProptestConfig { cases: 512, ..ProptestConfig::default() }
}

/// Bytes that look like YAML or JSON more often than uniform noise does.
fn structured_bytes() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b"[".to_vec()),
        Just(b"]".to_vec()),
        Just(b"{".to_vec()),
        Just(b"}".to_vec()),
        Just(b"- ".to_vec()),
        Just(b"? ".to_vec()),
        Just(b": ".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"  ".to_vec()),
        Just(b"'".to_vec()),
        Just(b"\"".to_vec()),
        Just(b"\\".to_vec()),
        Just(b"#".to_vec()),
        Just(b",".to_vec()),
        "[a-z0-9]{1,4}".prop_map(String::into_bytes),
        any::<u8>().prop_map(|b| vec![b]),
    ];
    proptest::collection::vec(piece, 0..200).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn yaml_depth_check_never_panics(text in structured_bytes(), max in 0usize..64) {
        let _ = yaml_depth::check(&text, max);
    }

    /// Flow nesting is counted: `d` open brackets on one line nest `d + 1` levels (the line's
    /// own block level counts too).
    #[test]
    fn yaml_flow_nesting_is_counted(depth in 0usize..300, max in 1usize..200) {
        let text = "[".repeat(depth);
        prop_assert_eq!(yaml_depth::check(text.as_bytes(), max).is_err(), depth + 1 > max);
    }

    #[test]
    fn protobuf_bodies_never_panic(mut body in proptest::collection::vec(any::<u8>(), 0..400), kind in 0usize..4) {
        let (group, version, name) = [
            ("", "v1", "ConfigMap"),
            ("", "v1", "Pod"),
            ("apps", "v1", "Deployment"),
            ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        ][kind];
        let schema = schema::lookup(group, version, name).expect("a built-in schema");
        let _ = protobuf::decode_message(&body, schema, schema::GO_ZEROS);
        body.splice(0..0, *b"k8s\0");
        let _ = protobuf::decode_object(&body, schema, schema::GO_ZEROS);
    }

    #[test]
    fn patches_never_panic(patch in structured_bytes(), ty in 0usize..3) {
        let ty = [PatchType::Json, PatchType::Merge, PatchType::Strategic][ty];
        let doc = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "labels": {"a": "b"}},
            "data": {"k": "v"}});
        let _ = patch::apply(ty, &doc, &patch, schema::lookup("", "v1", "ConfigMap"));
    }

    /// However the copies are arranged, a JSON patch never grows the document by more than
    /// the copy limit (plus what its own values add).
    #[test]
    fn json_patch_copies_stay_within_the_limit(ops in proptest::collection::vec((0usize..4, 0usize..4), 0..40)) {
        let mut patch = vec![json!({"op": "add", "path": "/a", "value": {"x": "y".repeat(4096)}})];
        for (from, to) in ops {
            let path = |n: usize| if n == 0 { "/a".to_string() } else { format!("/a/k{n}") };
            patch.push(json!({"op": "copy", "from": path(from), "path": format!("{}/c{to}", path(from))}));
        }
        let body = Value::Array(patch).to_string();
        if let Ok(out) = json_patch::apply(&json!({}), body.as_bytes()) {
            let size = out.to_string().len();
            prop_assert!(size <= json_patch::MAX_COPY_BYTES + 2 * body.len() + 4096 + 64, "{} bytes", size);
        }
    }
}
