//! YAML request bodies as the server converts them to JSON (the linear depth scan, then the
//! parser): never a panic or a stack overflow; nesting past kube's limit is refused; the JSON
//! produced reads back as itself.
#![no_main]

use ballast_apimachinery::yaml_depth;
use ballast_apiserver::routes::resource::yaml_body_to_json;
use ballast_fuzz::assert_round_trip;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|body: &[u8]| {
    let too_deep = yaml_depth::check(body, yaml_depth::MAX_DEPTH).is_err();
    match yaml_body_to_json(body) {
        Ok(json) => {
            assert!(!too_deep, "a body past the depth limit was parsed");
            let value: Value = serde_json::from_slice(&json).expect("the conversion writes readable JSON");
            assert_round_trip(&value, "yaml body");
        }
        Err(e) => {
            let text = e.to_string();
            assert!(text.contains("error converting YAML to JSON"), "unexpected error text: {text}");
        }
    }
});
