//! JSON request bodies as the server parses them (`strict_json`, which also finds duplicate
//! keys): never a panic; the value is serde_json's own reading of the body (last duplicate wins);
//! nesting past the limit is refused; what is accepted round-trips, with no duplicates found the
//! second time.
#![no_main]

use ballast_apiserver::registry::strict_json;
use ballast_fuzz::{assert_round_trip, depth, JSON_DEPTH_LIMIT};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|body: &[u8]| {
    let plain = serde_json::from_slice::<Value>(body);
    match strict_json::parse(body) {
        Ok((value, duplicates)) => {
            assert_eq!(plain.as_ref().ok(), Some(&value), "strict and plain readings differ");
            assert!(depth(&value) <= JSON_DEPTH_LIMIT, "accepted nesting of {}", depth(&value));
            assert_round_trip(&value, "json body");
            let again = serde_json::to_vec(&value).expect("serializes");
            let (_, none) = strict_json::parse(&again).expect("re-reads");
            assert!(none.is_empty(), "duplicates in a written value: {none:?}");
            if !duplicates.is_empty() {
                let order = strict_json::key_order(body);
                for d in &duplicates {
                    assert!(order.iter().filter(|k| *k == d).count() >= 2, "{d} reported but not seen twice");
                }
            }
        }
        Err(_) => assert!(plain.is_err(), "strict parsing refused what serde_json reads"),
    }
});
