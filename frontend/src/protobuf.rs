//! Decoding of Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`) into
//! the JSON form the rest of the frontend works on.
//!
//! kubectl's typed commands (`create namespace|configmap|secret ...`) send protobuf, and client-go
//! does not retry in JSON after a 415, so built-in kinds must decode it. The wire format
//! (`k8s.io/apimachinery/pkg/runtime/serializer/protobuf`) is the 4-byte magic `k8s\0` followed
//! by a `runtime.Unknown` message `{1: typeMeta {1: apiVersion, 2: kind}, 2: raw, 3:
//! contentEncoding, 4: contentType}`, where `raw` is the object in the field numbering of the
//! upstream `generated.proto` files.
//!
//! Each kind supplies a [`Message`] schema (a static table of field numbers, JSON names and
//! types) in `registry::kinds`, so adding a kind is data, not code. Go's gogo-protobuf writes
//! empty strings and zero numbers for non-pointer fields; JSON omits them (`omitempty`), so the
//! decoder drops zero values, empty maps and empty messages, which is what the JSON encoding of
//! the same object would have carried.

use base64::Engine as _;
use serde_json::{Map, Value};

/// The envelope's magic prefix.
pub const MAGIC: &[u8] = b"k8s\0";

/// The type of one field.
#[derive(Debug, Clone, Copy)]
pub enum FieldType {
    /// `string`.
    String,
    /// `bytes`, base64 in JSON.
    Bytes,
    /// `int64` / `int32` (varint).
    Int,
    /// `bool`.
    Bool,
    /// An embedded message.
    Message(&'static Message),
    /// `metav1.Time` (`{1: seconds, 2: nanos}`), RFC 3339 in JSON.
    Time,
    /// `map<string, string>`.
    MapStringString,
    /// `map<string, bytes>`, values base64 in JSON.
    MapStringBytes,
}

/// One field of a message schema.
#[derive(Debug)]
pub struct Field {
    /// The protobuf field number.
    pub number: u32,
    /// The JSON field name.
    pub json: &'static str,
    /// The value type.
    pub ty: FieldType,
    /// Whether the field is `repeated` (a JSON array).
    pub repeated: bool,
    /// How a strategic merge patch treats the field (the upstream type's `patchStrategy` and
    /// `patchMergeKey` tags).
    pub patch: PatchMeta,
}

/// The strategic-merge-patch tags of one field. Lists without them are replaced whole; maps
/// and structs are merged key by key whatever the tags say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PatchMeta {
    /// `patchStrategy`: "" (none), "merge", "replace", "retainKeys" or "merge,retainKeys".
    pub strategy: &'static str,
    /// `patchMergeKey`: the field identifying an element of a merged list of objects; "" for
    /// lists of primitives (merged as sets) and for fields without the merge strategy.
    pub merge_key: &'static str,
}

impl PatchMeta {
    /// No tags.
    pub const NONE: PatchMeta = PatchMeta { strategy: "", merge_key: "" };

    /// Whether the strategy includes `merge`.
    pub fn merges(&self) -> bool {
        self.strategy.split(',').any(|s| s == "merge")
    }

    /// Whether the strategy includes `retainKeys`.
    pub fn retains_keys(&self) -> bool {
        self.strategy.split(',').any(|s| s == "retainKeys")
    }
}

/// A message schema: the fields the decoder knows. Unknown field numbers are skipped.
#[derive(Debug)]
pub struct Message {
    /// The fields.
    pub fields: &'static [Field],
}

/// Shorthand for a singular field in schema tables.
pub const fn field(number: u32, json: &'static str, ty: FieldType) -> Field {
    Field { number, json, ty, repeated: false, patch: PatchMeta::NONE }
}

/// Shorthand for a repeated field in schema tables.
pub const fn repeated(number: u32, json: &'static str, ty: FieldType) -> Field {
    Field { number, json, ty, repeated: true, patch: PatchMeta::NONE }
}

/// Decoding failures; all become 400 BadRequest.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// The body does not start with `k8s\0`.
    #[error("provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]")]
    MissingMagic,
    /// The bytes end inside a field.
    #[error("unexpected end of protobuf data")]
    Truncated,
    /// A varint is longer than 10 bytes.
    #[error("malformed protobuf varint")]
    BadVarint,
    /// A wire type this decoder does not handle (groups).
    #[error("unsupported protobuf wire type {0}")]
    WireType(u8),
    /// A string field holds invalid UTF-8.
    #[error("protobuf string is not UTF-8")]
    Utf8,
}

/// The envelope's type information and payload.
#[derive(Debug)]
pub struct Envelope<'a> {
    /// `apiVersion` of the object.
    pub api_version: String,
    /// `kind` of the object.
    pub kind: String,
    /// The object's own protobuf bytes.
    pub raw: &'a [u8],
}

struct Reader<'a> {
    buf: &'a [u8],
}

enum Wire<'a> {
    Varint(u64),
    Fixed64,
    Fixed32,
    Bytes(&'a [u8]),
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut value = 0u64;
        for i in 0..10 {
            let (&b, rest) = self.buf.split_first().ok_or(DecodeError::Truncated)?;
            self.buf = rest;
            value |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Ok(value);
            }
        }
        Err(DecodeError::BadVarint)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.buf.len() < n {
            return Err(DecodeError::Truncated);
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    fn next(&mut self) -> Result<Option<(u32, Wire<'a>)>, DecodeError> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let number = (key >> 3) as u32;
        let wire = match (key & 7) as u8 {
            0 => Wire::Varint(self.varint()?),
            1 => {
                self.take(8)?;
                Wire::Fixed64
            }
            2 => {
                let len = self.varint()? as usize;
                Wire::Bytes(self.take(len)?)
            }
            5 => {
                self.take(4)?;
                Wire::Fixed32
            }
            other => return Err(DecodeError::WireType(other)),
        };
        Ok(Some((number, wire)))
    }
}

fn utf8(bytes: &[u8]) -> Result<String, DecodeError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::Utf8)
}

/// Splits a `k8s\0`-prefixed body into its type information and raw object bytes.
///
/// # Errors
///
/// Returns `MissingMagic` or a wire-format error.
pub fn envelope(body: &[u8]) -> Result<Envelope<'_>, DecodeError> {
    let rest = body.strip_prefix(MAGIC).ok_or(DecodeError::MissingMagic)?;
    let mut env = Envelope { api_version: String::new(), kind: String::new(), raw: &[] };
    let mut r = Reader { buf: rest };
    while let Some((number, wire)) = r.next()? {
        match (number, wire) {
            (1, Wire::Bytes(type_meta)) => {
                let mut t = Reader { buf: type_meta };
                while let Some((n, w)) = t.next()? {
                    match (n, w) {
                        (1, Wire::Bytes(v)) => env.api_version = utf8(v)?,
                        (2, Wire::Bytes(v)) => env.kind = utf8(v)?,
                        _ => {}
                    }
                }
            }
            (2, Wire::Bytes(raw)) => env.raw = raw,
            _ => {}
        }
    }
    Ok(env)
}

fn b64(bytes: &[u8]) -> Value {
    Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_i64() == Some(0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

fn map_entry(bytes: &[u8], bytes_value: bool) -> Result<(String, Value), DecodeError> {
    let mut r = Reader { buf: bytes };
    let (mut key, mut value) = (String::new(), if bytes_value { b64(&[]) } else { Value::String(String::new()) });
    while let Some((n, w)) = r.next()? {
        match (n, w) {
            (1, Wire::Bytes(k)) => key = utf8(k)?,
            (2, Wire::Bytes(v)) => value = if bytes_value { b64(v) } else { Value::String(utf8(v)?) },
            _ => {}
        }
    }
    Ok((key, value))
}

fn time(bytes: &[u8]) -> Result<Value, DecodeError> {
    let mut r = Reader { buf: bytes };
    let mut seconds = 0i64;
    while let Some((n, w)) = r.next()? {
        if let (1, Wire::Varint(v)) = (n, w) {
            seconds = v as i64;
        }
    }
    // The zero Time is JSON null, and omitted like every other empty value.
    Ok(if seconds == 0 { Value::Null } else { Value::String(crate::clock::format_rfc3339(seconds)) })
}

fn scalar(ty: FieldType, wire: Wire<'_>) -> Result<Option<Value>, DecodeError> {
    Ok(Some(match (ty, wire) {
        (FieldType::String, Wire::Bytes(b)) => Value::String(utf8(b)?),
        (FieldType::Bytes, Wire::Bytes(b)) => b64(b),
        (FieldType::Int, Wire::Varint(v)) => Value::from(v as i64),
        (FieldType::Bool, Wire::Varint(v)) => Value::Bool(v != 0),
        (FieldType::Message(m), Wire::Bytes(b)) => decode_message(b, m)?,
        (FieldType::Time, Wire::Bytes(b)) => time(b)?,
        // A field whose wire type does not match the schema is skipped, as protobuf decoders do.
        _ => return Ok(None),
    }))
}

/// Decodes one message into a JSON object, dropping empty values.
///
/// # Errors
///
/// Returns a wire-format error.
pub fn decode_message(bytes: &[u8], schema: &Message) -> Result<Value, DecodeError> {
    let mut out = Map::new();
    let mut r = Reader { buf: bytes };
    while let Some((number, wire)) = r.next()? {
        let Some(field) = schema.fields.iter().find(|f| f.number == number) else { continue };
        match field.ty {
            FieldType::MapStringString | FieldType::MapStringBytes => {
                let Wire::Bytes(entry) = wire else { continue };
                let (k, v) = map_entry(entry, matches!(field.ty, FieldType::MapStringBytes))?;
                let map = out.entry(field.json).or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(map) = map {
                    map.insert(k, v);
                }
            }
            ty if field.repeated => {
                if let Some(v) = scalar(ty, wire)? {
                    let list = out.entry(field.json).or_insert_with(|| Value::Array(Vec::new()));
                    if let Value::Array(list) = list {
                        list.push(v);
                    }
                }
            }
            ty => {
                if let Some(v) = scalar(ty, wire)? {
                    out.insert(field.json.to_string(), v);
                }
            }
        }
    }
    // Map values and list items may legitimately be empty (`data: {"a": ""}`); only whole
    // fields are dropped.
    out.retain(|_, v| !is_empty(v));
    Ok(Value::Object(out))
}

/// Decodes an enveloped object with the kind's schema; `apiVersion` and `kind` come from the
/// envelope.
///
/// # Errors
///
/// Returns `MissingMagic` or a wire-format error.
pub fn decode_object(body: &[u8], schema: &Message) -> Result<Value, DecodeError> {
    let env = envelope(body)?;
    let mut obj = decode_message(env.raw, schema)?;
    if let Value::Object(map) = &mut obj {
        if !env.api_version.is_empty() {
            map.insert("apiVersion".into(), env.api_version.into());
        }
        if !env.kind.is_empty() {
            map.insert("kind".into(), env.kind.into());
        }
    }
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::kinds;
    use serde_json::json;

    #[test]
    fn decodes_kubectl_create_configmap() {
        // The exact body `kubectl create configmap cm1 --from-literal=a=b` sends
        // (kubectl-transcripts/create-cm).
        let body = b"k8s\x00\n\x0f\n\x02v1\x12\tConfigMap\x12\x1d\n\x13\n\x03cm1\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12\x06\n\x01a\x12\x01b\x1a\x00\"\x00";
        let obj = decode_object(body, kinds::configmaps().schema.expect("schema")).expect("decode");
        assert_eq!(
            obj,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm1"}, "data": {"a": "b"}})
        );
    }

    #[test]
    fn rejects_bodies_without_magic() {
        assert_eq!(decode_object(b"{}", kinds::configmaps().schema.expect("schema")), Err(DecodeError::MissingMagic));
        assert_eq!(
            decode_object(b"k8s\x00\x12\x05ab", kinds::configmaps().schema.expect("schema")),
            Err(DecodeError::Truncated)
        );
    }

    #[test]
    fn decodes_secret_bytes_and_namespace_spec() {
        // Secret{metadata{name:"s"}, data{"k": [0xff]}, type:"Opaque"}
        let raw = b"\n\x03\n\x01s\x12\x06\n\x01k\x12\x01\xff\x1a\x06Opaque";
        let obj = decode_message(raw, kinds::secrets().schema.expect("schema")).expect("decode");
        assert_eq!(obj, json!({"metadata": {"name": "s"}, "data": {"k": "/w=="}, "type": "Opaque"}));
        // Namespace{metadata{name:"x", labels{"a":"b"}}, spec{finalizers:["kubernetes"]}}
        let raw = b"\n\x0b\n\x01xZ\x06\n\x01a\x12\x01b\x12\x0c\n\nkubernetes";
        let obj = decode_message(raw, kinds::namespaces().schema.expect("schema")).expect("decode");
        assert_eq!(
            obj,
            json!({"metadata": {"name": "x", "labels": {"a": "b"}}, "spec": {"finalizers": ["kubernetes"]}})
        );
    }
}
