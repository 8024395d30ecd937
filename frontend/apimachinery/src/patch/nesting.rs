//! How deep patches and patched objects may nest: patch bodies read with serde_json's nesting
//! limit (refused by name), and the depth of a result measured without recursion.

use serde_json::Value;

/// How deep a patched object may nest. Every JSON the server reads (bodies, patches, stored
/// objects) is parsed with serde_json's nesting limit of 127 levels; kube's decoder allows
/// 10,000, which Ballast does not reach. A JSON patch can build deeper than either of its inputs
/// (a deep value added at a deep path), and what the server stores must read back, with its
/// `metadata.managedFields` (whose `fieldsV1` mirror the object's fields three levels further
/// down): 120 leaves that room.
pub const MAX_RESULT_DEPTH: usize = 120;

/// Parses a patch body; the error is the message of a malformed patch. A body nested past
/// serde_json's limit is refused as it is read (in time linear in the limit, not the body),
/// with the limit named.
pub(super) fn parse(patch: &[u8]) -> Result<Value, String> {
    serde_json::from_slice(patch).map_err(|e| {
        let text = e.to_string();
        match text.strip_prefix("recursion limit exceeded") {
            Some(at) => format!("error decoding patch: exceeded max depth of 127{at}"),
            None => text,
        }
    })
}

/// How deep `value` nests (a scalar is 0, `[]` and `{}` are 1), walked without recursion so a
/// deep value cannot overflow the stack.
pub fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 1)];
    while let Some((v, d)) = stack.pop() {
        match v {
            Value::Array(items) => {
                deepest = deepest.max(d);
                stack.extend(items.iter().map(|c| (c, d + 1)));
            }
            Value::Object(map) => {
                deepest = deepest.max(d);
                stack.extend(map.values().map(|c| (c, d + 1)));
            }
            _ => {}
        }
    }
    deepest
}
