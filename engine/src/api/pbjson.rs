//! Protobuf messages to and from JSON by their descriptors, in the mapping etcd's gateway uses
//! (grpc-gateway with Go's jsonpb, original field names, defaults left out): 64-bit integers
//! as strings, 32-bit ones as numbers, enums by name, bytes in standard base64, fields in
//! declaration order. Input takes a field by its proto name or its lowerCamelCase JSON name,
//! integers as numbers or strings, enums as names or numbers, and skips unknown fields.
//!
//! Generic over the descriptors of `proto/` (compiled in as `FILE_DESCRIPTOR_SET`), so each
//! gateway path is only a pair of type names and a handler.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::LazyLock;

use base64::Engine as _;
use prost::Message as _;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, EnumDescriptorProto, FieldDescriptorProto, FileDescriptorSet};
use serde_json::Value;

/// Messages and enums by full name with a leading dot (`.etcdserverpb.RangeRequest`).
struct Registry {
    messages: HashMap<String, DescriptorProto>,
    enums: HashMap<String, EnumDescriptorProto>,
}

fn collect(prefix: &str, m: &DescriptorProto, reg: &mut Registry) {
    let name = format!("{prefix}.{}", m.name());
    for nested in &m.nested_type {
        collect(&name, nested, reg);
    }
    for e in &m.enum_type {
        reg.enums.insert(format!("{name}.{}", e.name()), e.clone());
    }
    reg.messages.insert(name, m.clone());
}

static REGISTRY: LazyLock<Registry> = LazyLock::new(|| {
    let set = FileDescriptorSet::decode(ballast_proto::FILE_DESCRIPTOR_SET)
        .expect("invariant: the descriptors compiled in decode");
    let mut reg = Registry { messages: HashMap::new(), enums: HashMap::new() };
    for f in &set.file {
        let prefix = if f.package().is_empty() { String::new() } else { format!(".{}", f.package()) };
        for m in &f.message_type {
            collect(&prefix, m, &mut reg);
        }
        for e in &f.enum_type {
            reg.enums.insert(format!("{prefix}.{}", e.name()), e.clone());
        }
    }
    reg
});

fn message(name: &str) -> Result<&'static DescriptorProto, String> {
    REGISTRY.messages.get(name).ok_or_else(|| format!("unknown message type {name}"))
}

// ---- JSON to protobuf ----

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_key(out: &mut Vec<u8>, number: i32, wire: u8) {
    put_varint(out, ((number as u64) << 3) | u64::from(wire));
}

fn int_of(v: &Value, f: &FieldDescriptorProto) -> Result<i128, String> {
    let bad = || format!("bad value for field {}: {v}", f.name());
    match v {
        Value::Number(n) => n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from)).ok_or_else(bad),
        Value::String(s) => s.parse::<i128>().map_err(|_| bad()),
        _ => Err(bad()),
    }
}

fn enum_of(v: &Value, f: &FieldDescriptorProto) -> Result<i128, String> {
    if let Value::String(s) = v {
        if let Some(e) = REGISTRY.enums.get(f.type_name()) {
            if let Some(val) = e.value.iter().find(|x| x.name() == s) {
                return Ok(i128::from(val.number()));
            }
        }
    }
    int_of(v, f)
}

/// Encodes one (non-repeated) value of field `f`.
fn encode_value(out: &mut Vec<u8>, f: &FieldDescriptorProto, v: &Value) -> Result<(), String> {
    let n = f.number();
    match f.r#type() {
        Type::Message => {
            let inner = encode_object(f.type_name(), v)?;
            put_key(out, n, 2);
            put_varint(out, inner.len() as u64);
            out.extend_from_slice(&inner);
        }
        Type::String => {
            let s = v.as_str().ok_or_else(|| format!("field {} takes a string", f.name()))?;
            put_key(out, n, 2);
            put_varint(out, s.len() as u64);
            out.extend_from_slice(s.as_bytes());
        }
        Type::Bytes => {
            let s = v.as_str().ok_or_else(|| format!("field {} takes base64 bytes", f.name()))?;
            let b = base64::engine::general_purpose::STANDARD
                .decode(s)
                .or_else(|_| base64::engine::general_purpose::URL_SAFE.decode(s))
                .map_err(|e| format!("field {}: {e}", f.name()))?;
            put_key(out, n, 2);
            put_varint(out, b.len() as u64);
            out.extend_from_slice(&b);
        }
        Type::Bool => {
            let b = v.as_bool().ok_or_else(|| format!("field {} takes a bool", f.name()))?;
            put_key(out, n, 0);
            put_varint(out, u64::from(b));
        }
        Type::Enum => {
            put_key(out, n, 0);
            put_varint(out, enum_of(v, f)? as i64 as u64);
        }
        Type::Sint32 | Type::Sint64 => {
            let i = int_of(v, f)? as i64;
            put_key(out, n, 0);
            put_varint(out, ((i << 1) ^ (i >> 63)) as u64);
        }
        Type::Fixed64 | Type::Sfixed64 | Type::Double => {
            let bits = if f.r#type() == Type::Double {
                v.as_f64().ok_or_else(|| format!("field {} takes a number", f.name()))?.to_bits()
            } else {
                int_of(v, f)? as u64
            };
            put_key(out, n, 1);
            out.extend_from_slice(&bits.to_le_bytes());
        }
        Type::Fixed32 | Type::Sfixed32 | Type::Float => {
            let bits = if f.r#type() == Type::Float {
                (v.as_f64().ok_or_else(|| format!("field {} takes a number", f.name()))? as f32).to_bits()
            } else {
                int_of(v, f)? as u32
            };
            put_key(out, n, 5);
            out.extend_from_slice(&bits.to_le_bytes());
        }
        _ => {
            put_key(out, n, 0);
            put_varint(out, int_of(v, f)? as i64 as u64);
        }
    }
    Ok(())
}

/// Encodes the JSON object `v` as message `type_name`.
///
/// # Errors
/// A text saying what in `v` does not fit the message.
pub fn encode_object(type_name: &str, v: &Value) -> Result<Vec<u8>, String> {
    let m = message(type_name)?;
    let mut out = Vec::new();
    let obj = match v {
        Value::Object(o) => o,
        Value::Null => return Ok(out),
        other => return Err(format!("cannot unmarshal {other} into {}", m.name())),
    };
    for (k, val) in obj {
        // An unknown field is skipped, as etcd's gateway skips it (grpc-gateway lets jsonpb
        // allow unknown fields).
        let Some(f) = m.field.iter().find(|f| f.name() == k || f.json_name() == k) else { continue };
        if val.is_null() {
            continue;
        }
        if f.label() == Label::Repeated {
            let items = val.as_array().ok_or_else(|| format!("field {} takes a list", f.name()))?;
            for item in items {
                encode_value(&mut out, f, item)?;
            }
        } else {
            encode_value(&mut out, f, val)?;
        }
    }
    Ok(out)
}

// ---- protobuf to JSON ----

fn varint(buf: &[u8], pos: &mut usize) -> Result<u64, String> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos).ok_or("truncated varint")?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("varint too long".into())
}

/// A decoded field value, before it is written as JSON.
fn scalar_json(out: &mut String, f: &FieldDescriptorProto, raw: u64) {
    let _ = match f.r#type() {
        Type::Int64 | Type::Sfixed64 => write!(out, "\"{}\"", raw as i64),
        Type::Uint64 | Type::Fixed64 => write!(out, "\"{raw}\""),
        Type::Sint64 => write!(out, "\"{}\"", ((raw >> 1) as i64) ^ -((raw & 1) as i64)),
        Type::Int32 | Type::Sfixed32 => write!(out, "{}", raw as i64 as i32),
        Type::Sint32 => write!(out, "{}", ((raw >> 1) as i32) ^ -((raw & 1) as i32)),
        Type::Uint32 | Type::Fixed32 => write!(out, "{}", raw as u32),
        Type::Bool => write!(out, "{}", raw != 0),
        Type::Double => write!(out, "{}", f64::from_bits(raw)),
        Type::Float => write!(out, "{}", f32::from_bits(raw as u32)),
        Type::Enum => {
            let n = raw as i64 as i32;
            let name = REGISTRY
                .enums
                .get(f.type_name())
                .and_then(|e| e.value.iter().find(|v| v.number() == n))
                .map(|v| v.name().to_string());
            match name {
                Some(s) => write!(out, "\"{s}\""),
                None => write!(out, "{n}"),
            }
        }
        _ => write!(out, "{raw}"),
    };
}

/// Writes message `type_name` encoded in `buf` as JSON.
///
/// # Errors
/// `buf` is not a valid encoding of the message.
pub fn to_json(type_name: &str, buf: &[u8]) -> Result<String, String> {
    let mut out = String::new();
    write_message(&mut out, type_name, buf)?;
    Ok(out)
}

fn write_message(out: &mut String, type_name: &str, buf: &[u8]) -> Result<(), String> {
    let m = message(type_name)?;
    // Each field's values, as JSON texts, in the order they came.
    let mut values: HashMap<i32, Vec<String>> = HashMap::new();
    let mut pos = 0;
    while pos < buf.len() {
        let key = varint(buf, &mut pos)?;
        let (number, wire) = ((key >> 3) as i32, (key & 7) as u8);
        let field = m.field.iter().find(|f| f.number() == number);
        let mut text = String::new();
        match wire {
            0 => {
                let raw = varint(buf, &mut pos)?;
                if let Some(f) = field {
                    scalar_json(&mut text, f, raw);
                }
            }
            1 | 5 => {
                let width = if wire == 1 { 8 } else { 4 };
                let bytes = buf.get(pos..pos + width).ok_or("truncated fixed field")?;
                pos += width;
                let mut le = [0u8; 8];
                le[..width].copy_from_slice(bytes);
                if let Some(f) = field {
                    scalar_json(&mut text, f, u64::from_le_bytes(le));
                }
            }
            2 => {
                let len = varint(buf, &mut pos)? as usize;
                let data = buf.get(pos..pos + len).ok_or("truncated field")?;
                pos += len;
                let Some(f) = field else { continue };
                match f.r#type() {
                    Type::Message => write_message(&mut text, f.type_name(), data)?,
                    Type::String => {
                        text = serde_json::to_string(&String::from_utf8_lossy(data)).map_err(|e| e.to_string())?
                    }
                    Type::Bytes => {
                        let _ = write!(text, "\"{}\"", base64::engine::general_purpose::STANDARD.encode(data));
                    }
                    _ => {
                        // A packed repeated scalar: each element separately.
                        let mut p = 0;
                        let mut items = Vec::new();
                        while p < data.len() {
                            let mut t = String::new();
                            scalar_json(&mut t, f, varint(data, &mut p)?);
                            items.push(t);
                        }
                        values.entry(number).or_default().extend(items);
                        continue;
                    }
                }
            }
            _ => return Err(format!("unsupported wire type {wire}")),
        }
        if field.is_some() {
            values.entry(number).or_default().push(text);
        }
    }
    out.push('{');
    let mut first = true;
    for f in &m.field {
        let Some(vals) = values.get(&f.number()) else { continue };
        if !first {
            out.push(',');
        }
        first = false;
        let _ = write!(out, "\"{}\":", f.name());
        if f.label() == Label::Repeated {
            let _ = write!(out, "[{}]", vals.join(","));
        } else if let Some(last) = vals.last() {
            // A repeated occurrence of a singular field: the last one wins, as in protobuf.
            out.push_str(last);
        }
    }
    out.push('}');
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ballast_proto::etcdserverpb::{compare, Compare, RangeResponse, ResponseHeader, TxnRequest};
    use ballast_proto::mvccpb::KeyValue;

    #[test]
    fn a_range_response_reads_as_etcds_gateway_writes_it() {
        let r = RangeResponse {
            header: Some(ResponseHeader { cluster_id: 1, member_id: u64::MAX, revision: 18, raft_term: 2 }),
            kvs: vec![KeyValue {
                key: b"foo".to_vec().into(),
                create_revision: 18,
                mod_revision: 18,
                version: 1,
                value: b"bar".to_vec().into(),
                lease: 0,
            }],
            more: false,
            count: 1,
        };
        let json = to_json(".etcdserverpb.RangeResponse", &r.encode_to_vec()).expect("json");
        assert_eq!(
            json,
            "{\"header\":{\"cluster_id\":\"1\",\"member_id\":\"18446744073709551615\",\"revision\":\"18\",\"raft_term\":\"2\"},\
             \"kvs\":[{\"key\":\"Zm9v\",\"create_revision\":\"18\",\"mod_revision\":\"18\",\"version\":\"1\",\"value\":\"YmFy\"}],\
             \"count\":\"1\"}"
        );
    }

    #[test]
    fn json_input_takes_names_enums_and_numbers_as_strings() {
        let v: Value = serde_json::from_str(
            r#"{"compare":[{"key":"Zm9v","result":"EQUAL","target":"CREATE","createRevision":"0"}],
                "success":[{"request_put":{"key":"Zm9v","value":"YmFy"}}]}"#,
        )
        .expect("json");
        let t = TxnRequest::decode(encode_object(".etcdserverpb.TxnRequest", &v).expect("encode").as_slice())
            .expect("decode");
        assert_eq!(t.compare[0].target_union, Some(compare::TargetUnion::CreateRevision(0)));
        assert_eq!(t.compare[0].result, compare::CompareResult::Equal as i32);
        // EQUAL is the enum's default: left out of the answer, as jsonpb leaves it.
        assert_eq!(t.compare[0].target, compare::CompareTarget::Create as i32);
        assert_eq!(t.success.len(), 1);
        let back = to_json(".etcdserverpb.Compare", &t.compare[0].encode_to_vec()).expect("json");
        assert_eq!(back, "{\"target\":\"CREATE\",\"key\":\"Zm9v\",\"create_revision\":\"0\"}");
        let _ = Compare::default();
    }

    #[test]
    fn bad_input_is_an_error() {
        let v: Value = serde_json::from_str(r#"{"key":123}"#).expect("json");
        assert!(encode_object(".etcdserverpb.RangeRequest", &v).is_err());
        let v: Value = serde_json::from_str(r#"{"key":"!!"}"#).expect("json");
        assert!(encode_object(".etcdserverpb.RangeRequest", &v).is_err());
        let v: Value = serde_json::from_str(r#"{"nope":"x","key":"Zm9v"}"#).expect("json");
        assert_eq!(
            encode_object(".etcdserverpb.RangeRequest", &v),
            Ok(b"\x0a\x03foo".to_vec()),
            "unknown fields are skipped"
        );
    }
}
