//! The protobuf form of the v2 document: gnostic's `openapi.v2.Document` (the message kubectl
//! decodes when it asks `/openapi/v2` for `application/com.github.proto-openapi.spec.v2@v1.0+protobuf`,
//! the only form it accepts).
//!
//! Only what the v2 documents' builders write is encoded: info, paths with their operations, parameters and
//! responses, definitions (schemas with their vendor extensions), security. Vendor extensions
//! are `NamedAny`s whose `yaml` holds the value as JSON text, which is valid YAML, as kubectl
//! parses it with a YAML decoder. Field numbers are gnostic's `OpenAPIv2.proto`.

use serde_json::{Map, Value};

/// A protobuf message being written.
#[derive(Default)]
struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    fn key(&mut self, field: u32, wire: u8) {
        self.varint((u64::from(field) << 3) | u64::from(wire));
    }

    fn bytes(&mut self, field: u32, bytes: &[u8]) {
        self.key(field, 2);
        self.varint(bytes.len() as u64);
        self.buf.extend_from_slice(bytes);
    }

    /// Writes a non-empty string (proto3 leaves defaults out).
    fn string(&mut self, field: u32, s: &str) {
        if !s.is_empty() {
            self.bytes(field, s.as_bytes());
        }
    }

    fn bool(&mut self, field: u32, b: bool) {
        if b {
            self.key(field, 0);
            self.varint(1);
        }
    }

    fn int(&mut self, field: u32, v: i64) {
        if v != 0 {
            self.key(field, 0);
            self.varint(v as u64);
        }
    }

    fn double(&mut self, field: u32, v: f64) {
        if v != 0.0 {
            self.key(field, 1);
            self.buf.extend_from_slice(&v.to_le_bytes());
        }
    }

    /// Writes an embedded message, even when empty (presence matters for `oneof`s).
    fn message(&mut self, field: u32, write: impl FnOnce(&mut Writer)) {
        let mut inner = Writer::default();
        write(&mut inner);
        self.bytes(field, &inner.buf);
    }
}

fn str_of<'a>(v: &'a Map<String, Value>, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn strings(w: &mut Writer, field: u32, v: Option<&Value>) {
    for s in v.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
        w.bytes(field, s.as_bytes());
    }
}

/// `Any { yaml = 2 }`.
fn any(w: &mut Writer, field: u32, value: &Value) {
    let text = serde_json::to_string(value).unwrap_or_default();
    w.message(field, |a| a.string(2, &text));
}

/// `repeated NamedAny` for the `x-` keys of an object.
fn vendor_extensions(w: &mut Writer, field: u32, v: &Map<String, Value>) {
    for (name, value) in v.iter().filter(|(k, _)| k.starts_with("x-")) {
        w.message(field, |n| {
            n.string(1, name);
            any(n, 2, value);
        });
    }
}

/// `Schema`.
fn schema(w: &mut Writer, s: &Map<String, Value>) {
    w.string(1, str_of(s, "$ref"));
    w.string(2, str_of(s, "format"));
    w.string(3, str_of(s, "title"));
    w.string(4, str_of(s, "description"));
    if let Some(d) = s.get("default") {
        any(w, 5, d);
    }
    let num = |k: &str| s.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let int = |k: &str| s.get(k).and_then(Value::as_i64).unwrap_or(0);
    let flag = |k: &str| s.get(k).and_then(Value::as_bool).unwrap_or(false);
    w.double(6, num("multipleOf"));
    w.double(7, num("maximum"));
    w.bool(8, flag("exclusiveMaximum"));
    w.double(9, num("minimum"));
    w.bool(10, flag("exclusiveMinimum"));
    w.int(11, int("maxLength"));
    w.int(12, int("minLength"));
    w.string(13, str_of(s, "pattern"));
    w.int(14, int("maxItems"));
    w.int(15, int("minItems"));
    w.bool(16, flag("uniqueItems"));
    w.int(17, int("maxProperties"));
    w.int(18, int("minProperties"));
    strings(w, 19, s.get("required"));
    for e in s.get("enum").and_then(Value::as_array).into_iter().flatten() {
        any(w, 20, e);
    }
    match s.get("additionalProperties") {
        Some(Value::Object(inner)) => w.message(21, |a| a.message(1, |x| schema(x, inner))),
        Some(Value::Bool(b)) => {
            let b = *b;
            // A oneof member is present even when false, so write it explicitly.
            w.message(21, |a| {
                a.key(2, 0);
                a.varint(u64::from(b));
            });
        }
        _ => {}
    }
    match s.get("type") {
        Some(Value::String(t)) => w.message(22, |x| x.string(1, t)),
        Some(types @ Value::Array(_)) => w.message(22, |x| strings(x, 1, Some(types))),
        _ => {}
    }
    match s.get("items") {
        Some(Value::Object(inner)) => w.message(23, |x| x.message(1, |y| schema(y, inner))),
        Some(Value::Array(list)) => w.message(23, |x| {
            for inner in list.iter().filter_map(Value::as_object) {
                x.message(1, |y| schema(y, inner));
            }
        }),
        _ => {}
    }
    for inner in s.get("allOf").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_object) {
        w.message(24, |x| schema(x, inner));
    }
    if let Some(Value::Object(props)) = s.get("properties") {
        w.message(25, |p| named_schemas(p, props));
    }
    w.bool(27, flag("readOnly"));
    if let Some(e) = s.get("example") {
        any(w, 30, e);
    }
    vendor_extensions(w, 31, s);
}

/// `repeated NamedSchema additional_properties = 1`.
fn named_schemas(w: &mut Writer, map: &Map<String, Value>) {
    for (name, value) in map {
        let Some(inner) = value.as_object() else { continue };
        w.message(1, |n| {
            n.string(1, name);
            n.message(2, |x| schema(x, inner));
        });
    }
}

/// `ParametersItem { Parameter parameter = 1 }`.
fn parameter(w: &mut Writer, p: &Map<String, Value>) {
    w.message(1, |param| {
        if str_of(p, "in") == "body" {
            param.message(1, |b| {
                b.string(1, str_of(p, "description"));
                b.string(2, str_of(p, "name"));
                b.string(3, "body");
                b.bool(4, p.get("required").and_then(Value::as_bool).unwrap_or(false));
                if let Some(Value::Object(s)) = p.get("schema") {
                    b.message(5, |x| schema(x, s));
                }
            });
            return;
        }
        param.message(2, |non_body| {
            // Query (3) and path (4) sub-schemas; their `type` and `uniqueItems` numbers differ.
            let (member, ty, unique) = if str_of(p, "in") == "path" { (4, 5, 19) } else { (3, 6, 20) };
            non_body.message(member, |q| {
                q.bool(1, p.get("required").and_then(Value::as_bool).unwrap_or(false));
                q.string(2, str_of(p, "in"));
                q.string(3, str_of(p, "description"));
                q.string(4, str_of(p, "name"));
                q.string(ty, str_of(p, "type"));
                q.bool(unique, p.get("uniqueItems").and_then(Value::as_bool).unwrap_or(false));
            });
        });
    });
}

/// `Operation`.
fn operation(w: &mut Writer, o: &Map<String, Value>) {
    strings(w, 1, o.get("tags"));
    w.string(3, str_of(o, "description"));
    w.string(5, str_of(o, "operationId"));
    strings(w, 6, o.get("produces"));
    strings(w, 7, o.get("consumes"));
    for p in o.get("parameters").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_object) {
        w.message(8, |x| parameter(x, p));
    }
    if let Some(Value::Object(responses)) = o.get("responses") {
        w.message(9, |rs| {
            for (code, r) in responses {
                let Some(r) = r.as_object() else { continue };
                rs.message(1, |named| {
                    named.string(1, code);
                    named.message(2, |value| {
                        value.message(1, |resp| {
                            resp.string(1, str_of(r, "description"));
                            if let Some(Value::Object(s)) = r.get("schema") {
                                resp.message(2, |item| item.message(1, |x| schema(x, s)));
                            }
                        });
                    });
                });
            }
        });
    }
    strings(w, 10, o.get("schemes"));
    vendor_extensions(w, 13, o);
}

/// Encodes a v2 document (as the built-in API and the apiextensions server write it) as
/// `openapi.v2.Document`.
pub fn encode(doc: &Value) -> Vec<u8> {
    let mut w = Writer::default();
    let Some(doc) = doc.as_object() else { return w.buf };
    w.string(1, str_of(doc, "swagger"));
    if let Some(Value::Object(info)) = doc.get("info") {
        w.message(2, |i| {
            i.string(1, str_of(info, "title"));
            i.string(2, str_of(info, "version"));
        });
    }
    if let Some(Value::Object(paths)) = doc.get("paths") {
        w.message(8, |ps| {
            for (path, item) in paths {
                let Some(item) = item.as_object() else { continue };
                ps.message(2, |named| {
                    named.string(1, path);
                    named.message(2, |pi| {
                        for (method, field) in [("get", 2), ("put", 3), ("post", 4), ("delete", 5), ("patch", 8)] {
                            if let Some(Value::Object(o)) = item.get(method) {
                                pi.message(field, |x| operation(x, o));
                            }
                        }
                        for p in item.get("parameters").and_then(Value::as_array).into_iter().flatten() {
                            if let Some(p) = p.as_object() {
                                pi.message(9, |x| parameter(x, p));
                            }
                        }
                    });
                });
            }
        });
    }
    if let Some(Value::Object(defs)) = doc.get("definitions") {
        w.message(9, |d| named_schemas(d, defs));
    }
    for requirement in doc.get("security").and_then(Value::as_array).into_iter().flatten() {
        let Some(requirement) = requirement.as_object() else { continue };
        w.message(12, |sr| {
            for (name, scopes) in requirement {
                sr.message(1, |n| {
                    n.string(1, name);
                    n.message(2, |arr| strings(arr, 1, Some(scopes)));
                });
            }
        });
    }
    if let Some(Value::Object(defs)) = doc.get("securityDefinitions") {
        w.message(13, |sd| {
            for (name, def) in defs {
                let Some(def) = def.as_object() else { continue };
                sd.message(1, |n| {
                    n.string(1, name);
                    n.message(2, |item| {
                        item.message(2, |k| {
                            k.string(1, str_of(def, "type"));
                            k.string(2, str_of(def, "name"));
                            k.string(3, str_of(def, "in"));
                            k.string(4, str_of(def, "description"));
                        });
                    });
                });
            }
        });
    }
    w.buf
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn encodes_known_bytes() {
        // swagger = "2.0" (field 1), info { title = "K" } (field 2).
        let out = encode(&json!({"swagger": "2.0", "info": {"title": "K"}}));
        assert_eq!(out, vec![0x0a, 3, b'2', b'.', b'0', 0x12, 3, 0x0a, 1, b'K']);
    }

    #[test]
    fn schemas_keep_refs_types_and_extensions() {
        let doc = json!({"definitions": {"A": {"type": "object", "properties": {"b": {"$ref": "#/definitions/B"}},
            "x-kubernetes-group-version-kind": [{"group": "", "kind": "A", "version": "v1"}]}}});
        let out = encode(&doc);
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains("#/definitions/B"));
        assert!(text.contains("x-kubernetes-group-version-kind"));
        assert!(text.contains(r#"[{"group":"","kind":"A","version":"v1"}]"#));
        // definitions (9) -> NamedSchema (1) -> name "A".
        assert_eq!(out[0], 0x4a);
    }
}
