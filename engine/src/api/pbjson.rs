//! Protobuf messages to and from JSON by their descriptors, in the mapping etcd's gateway uses
//! (grpc-gateway with Go's jsonpb, original field names, defaults left out): 64-bit integers
//! as strings, 32-bit ones as numbers, enums by name, bytes in standard base64, fields in
//! declaration order. Input takes a field by its proto name or its lowerCamelCase JSON name,
//! integers as numbers or strings, enums as names or numbers, and skips unknown fields; input
//! that does not fit is refused with the texts of Go's jsonpb and `encoding/json`, which etcd's
//! gateway answers with (see [`gojson`]).
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

use super::gojson;

/// Messages and enums by full name with a leading dot (`.etcdserverpb.RangeRequest`).
struct Registry {
    messages: HashMap<String, DescriptorProto>,
    enums: HashMap<String, EnumDescriptorProto>,
    /// Each enum's Go type name in etcd's generated code (`etcdserverpb.RangeRequest_SortOrder`),
    /// which the gateway's errors name.
    go_names: HashMap<String, String>,
}

impl Registry {
    /// Adds enum `e` declared in `scope` (a package or message name with a leading dot) of
    /// package `package`.
    fn add_enum(&mut self, package: &str, scope: &str, e: &EnumDescriptorProto) {
        let name = format!("{scope}.{}", e.name());
        let nested = name.strip_prefix(&format!(".{package}.")).unwrap_or(&name).replace('.', "_");
        self.go_names.insert(name.clone(), format!("{package}.{nested}"));
        self.enums.insert(name, e.clone());
    }
}

fn collect(package: &str, prefix: &str, m: &DescriptorProto, reg: &mut Registry) {
    let name = format!("{prefix}.{}", m.name());
    for nested in &m.nested_type {
        collect(package, &name, nested, reg);
    }
    for e in &m.enum_type {
        reg.add_enum(package, &name, e);
    }
    reg.messages.insert(name, m.clone());
}

static REGISTRY: LazyLock<Registry> = LazyLock::new(|| {
    let set = FileDescriptorSet::decode(ballast_proto::FILE_DESCRIPTOR_SET)
        .expect("invariant: the descriptors compiled in decode");
    let mut reg = Registry { messages: HashMap::new(), enums: HashMap::new(), go_names: HashMap::new() };
    for f in &set.file {
        let prefix = if f.package().is_empty() { String::new() } else { format!(".{}", f.package()) };
        for m in &f.message_type {
            collect(f.package(), &prefix, m, &mut reg);
        }
        for e in &f.enum_type {
            reg.add_enum(f.package(), &prefix, e);
        }
    }
    reg
});

fn message(name: &str) -> Result<&'static DescriptorProto, String> {
    REGISTRY.messages.get(name).ok_or_else(|| format!("unknown message type {name}"))
}

// ---- JSON to protobuf ----

/// Deepest nesting of messages in a request: the protobuf decoder's own limit, which the
/// gRPC services would refuse a deeper request with anyway.
const MAX_DEPTH: usize = 100;

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

fn put_len(out: &mut Vec<u8>, number: i32, data: &[u8]) {
    put_key(out, number, 2);
    put_varint(out, data.len() as u64);
    out.extend_from_slice(data);
}

/// Where a value sits, which decides what `null` means: a field left unset, a oneof member
/// set to its zero value, or a zero item of a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Field,
    Oneof,
    Item,
}

/// The Go type etcd's gateway decodes field `f` into, as its type errors name it.
fn go_type(f: &FieldDescriptorProto) -> &'static str {
    match f.r#type() {
        Type::Int64 | Type::Sint64 | Type::Sfixed64 => "int64",
        Type::Uint64 | Type::Fixed64 => "uint64",
        Type::Int32 | Type::Sint32 | Type::Sfixed32 => "int32",
        Type::Uint32 | Type::Fixed32 => "uint32",
        Type::Bool => "bool",
        Type::String => "string",
        Type::Bytes => "[]uint8",
        Type::Double => "float64",
        Type::Float => "float32",
        Type::Enum => REGISTRY.go_names.get(f.type_name()).map_or("int32", String::as_str),
        _ => "map[string]json.RawMessage",
    }
}

/// Go's `Unmarshal` of `raw` into the number field `f` holds: its bits (integers as 64-bit
/// two's complement, floats as IEEE bits), or `None` for `null`.
fn go_number(f: &FieldDescriptorProto, raw: &[u8]) -> Result<Option<u64>, String> {
    gojson::check_valid(raw)?;
    let text = std::str::from_utf8(raw).map_err(|e| e.to_string())?.trim_matches(|c| " \t\r\n".contains(c));
    match gojson::kind(text.as_bytes()) {
        "null" => return Ok(None),
        "number" => {}
        other => return Err(gojson::type_error(other, go_type(f))),
    }
    let bad = || gojson::type_error(&format!("number {text}"), go_type(f));
    let bits = match f.r#type() {
        Type::Int64 | Type::Sint64 | Type::Sfixed64 => text.parse::<i64>().map_err(|_| bad())? as u64,
        Type::Uint64 | Type::Fixed64 => text.parse::<u64>().map_err(|_| bad())?,
        Type::Uint32 | Type::Fixed32 => u64::from(text.parse::<u32>().map_err(|_| bad())?),
        Type::Double => text.parse::<f64>().ok().filter(|v| v.is_finite()).ok_or_else(bad)?.to_bits(),
        Type::Float => u64::from(text.parse::<f32>().ok().filter(|v| v.is_finite()).ok_or_else(bad)?.to_bits()),
        _ => i64::from(text.parse::<i32>().map_err(|_| bad())?) as u64,
    };
    Ok(Some(bits))
}

/// Bytes given as a list of numbers, each a Go `uint8`.
fn byte_list(raw: &[u8]) -> Result<Vec<u8>, String> {
    gojson::array_items(raw)
        .into_iter()
        .map(|item| match gojson::kind(item) {
            "null" => Ok(0),
            "number" => {
                let text = String::from_utf8_lossy(item);
                text.parse::<u8>().map_err(|_| gojson::type_error(&format!("number {text}"), "uint8"))
            }
            other => Err(gojson::type_error(other, "uint8")),
        })
        .collect()
}

/// Appends one value of field `f` (an item of it, when repeated) given as the checked JSON
/// `raw`, read as etcd's gateway (Go's jsonpb) reads it.
fn encode_value(
    out: &mut Vec<u8>,
    f: &FieldDescriptorProto,
    raw: &[u8],
    slot: Slot,
    depth: usize,
) -> Result<(), String> {
    let n = f.number();
    let null = raw == b"null";
    match f.r#type() {
        Type::Message => {
            // A message left null is unset, in a list too (where Go's would hold a nil).
            if null && slot != Slot::Item {
                return Ok(());
            }
            let inner = encode_message(f.type_name(), raw, depth + 1)?;
            put_len(out, n, &inner);
        }
        Type::String => {
            let s = match gojson::kind(raw) {
                "string" => gojson::unquote(raw),
                "null" if slot == Slot::Field => return Ok(()),
                "null" => String::new(),
                other => return Err(gojson::type_error(other, "string")),
            };
            put_len(out, n, s.as_bytes());
        }
        Type::Bytes => {
            let b = match gojson::kind(raw) {
                "string" => gojson::base64_decode(gojson::unquote(raw).as_bytes())?,
                "array" => byte_list(raw)?,
                "null" if slot != Slot::Item => return Ok(()),
                "null" => Vec::new(),
                other => return Err(gojson::type_error(other, "[]uint8")),
            };
            put_len(out, n, &b);
        }
        Type::Bool => {
            let b = match gojson::kind(raw) {
                "bool" => raw == b"true",
                "null" if slot == Slot::Field => return Ok(()),
                "null" => false,
                other => return Err(gojson::type_error(other, "bool")),
            };
            put_key(out, n, 0);
            put_varint(out, u64::from(b));
        }
        // An enum by name; the name is matched as written, escapes and all.
        Type::Enum if raw.first() == Some(&b'"') => {
            let name = &raw[1..raw.len() - 1];
            let value = REGISTRY
                .enums
                .get(f.type_name())
                .and_then(|e| e.value.iter().find(|v| v.name().as_bytes() == name))
                .ok_or_else(|| format!("unknown value {} for enum {}", gojson::go_quote(name), go_type(f)))?;
            put_key(out, n, 0);
            put_varint(out, i64::from(value.number()) as u64);
        }
        ty => {
            let non_finite = match raw {
                b"\"NaN\"" => Some(f64::NAN),
                b"\"Infinity\"" => Some(f64::INFINITY),
                b"\"-Infinity\"" => Some(f64::NEG_INFINITY),
                _ => None,
            };
            let bits = match (ty, non_finite) {
                (Type::Double, Some(v)) => Some(v.to_bits()),
                (Type::Float, Some(v)) => Some(u64::from((v as f32).to_bits())),
                // A number may be quoted: the quotes are dropped and the rest read as JSON.
                (_, _) => match raw {
                    [b'"', inner @ .., b'"'] => go_number(f, inner)?,
                    _ => go_number(f, raw)?,
                },
            };
            let bits = match (bits, slot) {
                (None, Slot::Field) => return Ok(()),
                (b, _) => b.unwrap_or(0),
            };
            match ty {
                Type::Sint32 | Type::Sint64 => {
                    let i = bits as i64;
                    put_key(out, n, 0);
                    put_varint(out, ((i << 1) ^ (i >> 63)) as u64);
                }
                Type::Fixed64 | Type::Sfixed64 | Type::Double => {
                    put_key(out, n, 1);
                    out.extend_from_slice(&bits.to_le_bytes());
                }
                Type::Fixed32 | Type::Sfixed32 | Type::Float => {
                    put_key(out, n, 5);
                    out.extend_from_slice(&(bits as u32).to_le_bytes());
                }
                _ => {
                    put_key(out, n, 0);
                    put_varint(out, bits);
                }
            }
        }
    }
    Ok(())
}

/// Appends field `f` given as `raw`: one value, or for a repeated field a list of them.
fn encode_field(out: &mut Vec<u8>, f: &FieldDescriptorProto, raw: &[u8], depth: usize) -> Result<(), String> {
    if f.label() != Label::Repeated {
        return encode_value(out, f, raw, Slot::Field, depth);
    }
    match gojson::kind(raw) {
        "null" => Ok(()),
        "array" => {
            gojson::array_items(raw).into_iter().try_for_each(|item| encode_value(out, f, item, Slot::Item, depth))
        }
        other => Err(gojson::type_error(other, "[]json.RawMessage")),
    }
}

/// Encodes the checked JSON value `raw` as message `type_name`, as etcd's gateway reads a
/// request: the fields in declaration order (so the first error is the first field's), then
/// the oneof members; a field by its lowerCamelCase JSON name or else its proto name, the
/// last of repeated keys, unknown fields skipped; `null` for an unset field.
fn encode_message(type_name: &str, raw: &[u8], depth: usize) -> Result<Vec<u8>, String> {
    let m = message(type_name)?;
    if depth > MAX_DEPTH {
        return Err(format!("{type_name} nested more than {MAX_DEPTH} deep"));
    }
    let mut out = Vec::new();
    match gojson::kind(raw) {
        "null" => return Ok(out),
        "object" => {}
        other => return Err(gojson::type_error(other, "map[string]json.RawMessage")),
    }
    let members = gojson::object_members(raw);
    let find = |key: &str| members.iter().rev().find(|(k, _)| k == key).map(|(_, v)| *v);
    let value_of = |f: &FieldDescriptorProto| find(f.json_name()).or_else(|| find(f.name()));
    let in_oneof = |f: &&FieldDescriptorProto| f.oneof_index.is_some() && !f.proto3_optional();
    for f in m.field.iter().filter(|f| !in_oneof(f)) {
        if let Some(v) = value_of(f) {
            encode_field(&mut out, f, v, depth)?;
        }
    }
    // Of several members of one oneof, the last read is kept.
    let mut oneofs: Vec<(i32, Vec<u8>)> = Vec::new();
    for f in m.field.iter().filter(in_oneof) {
        if let Some(v) = value_of(f) {
            let mut member = Vec::new();
            encode_value(&mut member, f, v, Slot::Oneof, depth)?;
            oneofs.retain(|(i, _)| *i != f.oneof_index());
            oneofs.push((f.oneof_index(), member));
        }
    }
    for (_, member) in oneofs {
        out.extend_from_slice(&member);
    }
    Ok(out)
}

/// Encodes the JSON value `raw` (already checked as JSON, e.g. by
/// [`gojson::first_value`]) as message `type_name`.
///
/// # Errors
/// What in `raw` does not fit the message, in the words etcd's gateway uses.
pub fn encode_json(type_name: &str, raw: &[u8]) -> Result<Vec<u8>, String> {
    encode_message(type_name, raw, 0)
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
    use ballast_proto::etcdserverpb::{compare, Compare, RangeRequest, RangeResponse, ResponseHeader, TxnRequest};
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
        let v = br#"{"compare":[{"key":"Zm9v","result":"EQUAL","target":"CREATE","createRevision":"0"}],
                "success":[{"request_put":{"key":"Zm9v","value":"YmFy"}}]}"#;
        let t =
            TxnRequest::decode(encode_json(".etcdserverpb.TxnRequest", v).expect("encode").as_slice()).expect("decode");
        assert_eq!(t.compare[0].target_union, Some(compare::TargetUnion::CreateRevision(0)));
        assert_eq!(t.compare[0].result, compare::CompareResult::Equal as i32);
        assert_eq!(t.compare[0].target, compare::CompareTarget::Create as i32);
        assert_eq!(t.success.len(), 1);
        // EQUAL is the enum's default: left out of the answer, as jsonpb leaves it.
        let back = to_json(".etcdserverpb.Compare", &t.compare[0].encode_to_vec()).expect("json");
        assert_eq!(back, "{\"target\":\"CREATE\",\"key\":\"Zm9v\",\"create_revision\":\"0\"}");
        let _ = Compare::default();
    }

    fn err(type_name: &str, json: &str) -> String {
        encode_json(type_name, json.as_bytes()).expect_err(json)
    }

    #[test]
    fn bad_input_is_refused_in_gos_words() {
        let range = ".etcdserverpb.RangeRequest";
        assert_eq!(err(range, r#"{"key":123}"#), "json: cannot unmarshal number into Go value of type []uint8");
        assert_eq!(err(range, r#"{"key":"!!"}"#), "illegal base64 data at input byte 0");
        assert_eq!(err(range, "[1]"), "json: cannot unmarshal array into Go value of type map[string]json.RawMessage");
        assert_eq!(err(range, r#"{"limit":"1.5"}"#), "json: cannot unmarshal number 1.5 into Go value of type int64");
        assert_eq!(err(range, r#"{"limit":"abc"}"#), "invalid character 'a' looking for beginning of value");
        assert_eq!(err(range, r#"{"limit":""}"#), "unexpected end of JSON input");
        assert_eq!(
            err(range, r#"{"serializable":"true"}"#),
            "json: cannot unmarshal string into Go value of type bool"
        );
        assert_eq!(
            err(range, r#"{"sort_order":"NOPE"}"#),
            "unknown value \"NOPE\" for enum etcdserverpb.RangeRequest_SortOrder"
        );
        assert_eq!(
            err(range, r#"{"sort_order":true}"#),
            "json: cannot unmarshal bool into Go value of type etcdserverpb.RangeRequest_SortOrder"
        );
        // The first field in declaration order is the one named, whatever the body's order.
        assert_eq!(
            err(range, r#"{"limit":true,"key":1}"#),
            "json: cannot unmarshal number into Go value of type []uint8"
        );
        // The lowerCamelCase name wins over the proto name.
        assert_eq!(
            err(range, r#"{"rangeEnd":1,"range_end":"AA=="}"#),
            "json: cannot unmarshal number into Go value of type []uint8"
        );
        assert_eq!(
            err(".etcdserverpb.AlarmRequest", r#"{"memberID":-1}"#),
            "json: cannot unmarshal number -1 into Go value of type uint64"
        );
        assert_eq!(
            err(".etcdserverpb.MemberAddRequest", r#"{"peerURLs":"x"}"#),
            "json: cannot unmarshal string into Go value of type []json.RawMessage"
        );
    }

    #[test]
    fn what_go_accepts_is_accepted() {
        let range = |json: &str| {
            RangeRequest::decode(encode_json(".etcdserverpb.RangeRequest", json.as_bytes()).expect(json).as_slice())
                .expect("decode")
        };
        assert_eq!(range(r#"{"nope":"x","key":"Zm9v"}"#).key, &b"foo"[..], "unknown fields are skipped");
        assert_eq!(range(r#"{"key":[102,111,111]}"#).key, &b"foo"[..], "bytes as a list of numbers");
        assert_eq!(range(r#"{"key":"Zm9v\n","limit":" 1"}"#).limit, 1);
        assert_eq!(range(r#"{"key":"Zm9v","key":"YmFy"}"#).key, &b"bar"[..], "the last of repeated keys");
        assert_eq!(range(r#"{"k\u0065y":"Zm9v","limit":null,"sort_order":7}"#).sort_order, 7);
        assert_eq!(range("null"), RangeRequest::default());
    }
}
