//! What the fuzz targets share: the checks every decoded value must pass.

use serde_json::Value;

pub use ballast_apimachinery::patch::depth;

/// The deepest nesting serde_json reads, which every JSON the server reads (bodies, patches,
/// stored objects) is parsed under.
pub const JSON_DEPTH_LIMIT: usize = 127;

/// Asserts that `value`, written as JSON, reads back as the same value: what the server stores
/// must be readable again (which also bounds its nesting by serde_json's limit).
///
/// Floating-point numbers may come back one unit in the last place off: serde_json without its
/// `float_roundtrip` feature (which the server does not enable) parses long mantissas with a
/// fast, not always correctly rounded, algorithm.
///
/// # Panics
///
/// When it does not, which the fuzzer reports as a crash.
pub fn assert_round_trip(value: &Value, what: &str) {
    let text = serde_json::to_vec(value).expect("invariant: a serde_json Value always serializes");
    match serde_json::from_slice::<Value>(&text) {
        Ok(back) => assert!(same(&back, value), "{what}: JSON round trip changed the value: {value} became {back}"),
        Err(e) => panic!("{what}: written JSON does not read back ({e}); depth {}", depth(value)),
    }
}

/// Equality of JSON values, with floats equal within a few units in the last place.
fn same(a: &Value, b: &Value) -> bool {
    let mut pairs = vec![(a, b)];
    while let Some((a, b)) = pairs.pop() {
        match (a, b) {
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => pairs.extend(x.iter().zip(y)),
            (Value::Object(x), Value::Object(y)) if x.len() == y.len() => {
                for (k, v) in x {
                    let Some(w) = y.get(k) else { return false };
                    pairs.push((v, w));
                }
            }
            (Value::Number(x), Value::Number(y)) => {
                if x != y {
                    let (Some(x), Some(y)) = (x.as_f64(), y.as_f64()) else { return false };
                    if (x - y).abs() > 4.0 * f64::EPSILON * x.abs().max(y.abs()) {
                        return false;
                    }
                }
            }
            _ if a != b => return false,
            _ => {}
        }
    }
    true
}
