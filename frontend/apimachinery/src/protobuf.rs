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
//! Worked example: the smallest ConfigMap body, byte by byte.
//!
//! ```
//! use ballast_apimachinery::{protobuf::decode_object, schema::{lookup, GO_ZEROS}};
//!
//! let body = [
//!     &b"k8s\0"[..],                                  // magic
//!     b"\x0a\x0f\x0a\x02v1\x12\x09ConfigMap",          // 1: typeMeta {1: apiVersion, 2: kind}
//!     b"\x12\x0d",                                     // 2: raw, 13 bytes of ConfigMap:
//!     b"\x0a\x03\x0a\x01a",                             //    1: metadata {1: name}
//!     b"\x12\x06\x0a\x01k\x12\x01v",                    //    2: data entry {1: key, 2: value}
//! ]
//! .concat();
//! let schema = lookup("", "v1", "ConfigMap").expect("a built-in kind");
//! let object = decode_object(&body, schema, GO_ZEROS).expect("a valid body");
//! assert_eq!(
//!     object,
//!     serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}})
//! );
//! ```
//!
//! Every built-in kind's [`Message`] schema (field numbers, JSON names, types and the
//! strategic-merge-patch tags) is generated from the upstream types into `crate::schema`, so
//! the decoder is one table-driven walk. Kube's non-object JSON forms (IntOrString, Quantity,
//! Time, MicroTime, Duration, RawExtension, the CRD schema unions) are [`FieldType`]s of their
//! own; an embedded Go struct (`json:",inline"`) is a field with an empty JSON name whose fields
//! land in the parent.
//!
//! Zero values: gogo-protobuf writes every non-pointer field, zero or not, and a pointer field
//! only when it is set, so a zero on the wire means "set" for a pointer and nothing for a
//! non-pointer. Which is which comes from the Go types, not the `.proto` files: the caller
//! passes a [`GoZeros`] (the generated `schema::GO_ZEROS`) naming, per message, the number and
//! boolean fields that are non-pointers with `omitempty`, and the string fields that are
//! neither pointers nor `omitempty`. A zero of the first is dropped, as kube's JSON of the same
//! Go object omits it (`paused: false`, `minReadySeconds: 0`, `hostNetwork: false`,
//! `metadata.generation: 0`), so the stored object and the fields a create owns in
//! `managedFields` are kube's. Every other number or boolean on the wire is kept, zero or not:
//! a pointer's zero was set on purpose (`replicas: 0`, `backoffLimit: 0`,
//! `allowPrivilegeEscalation: false`) and a non-pointer without `omitempty` is printed by kube
//! too (`containerPort`, PriorityClass `value`). An empty string of the second is kept, as kube
//! prints it as `""` (an Event's `reportingComponent`, a RoleRef's `apiGroup`); any other empty
//! string is dropped (`omitempty`, or a pointer that was not set), and so are null times. Empty
//! messages are kept (`emptyDir: {}` means something; kube's JSON prints `resources: {}` too).
//! What remains different from kube: a field absent from the body is absent from the JSON,
//! where kube would print its zero (a Go client writes every non-pointer field, so only other
//! encoders leave them out).

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
    /// `double` (fixed64).
    Double,
    /// An embedded message.
    Message(&'static Message),
    /// `metav1.Time` (`{1: seconds, 2: nanos}`), RFC 3339 in JSON.
    Time,
    /// `metav1.MicroTime`, RFC 3339 with microseconds.
    MicroTime,
    /// `metav1.Duration` (`{1: nanoseconds}`), Go's duration string in JSON ("1h0m0s").
    Duration,
    /// `intstr.IntOrString` (`{1: type, 2: intVal, 3: strVal}`), a number or a string.
    IntOrString,
    /// `resource.Quantity` (`{1: string}`), the string.
    Quantity,
    /// `runtime.RawExtension`, `metav1.FieldsV1`, apiextensions `JSON` (`{1: raw}`): the raw
    /// bytes are the JSON value.
    RawJson,
    /// A message holding one `repeated string` (`ExtraValue`, `Verbs`), an array in JSON.
    StringList,
    /// `map<string, V>`, an object in JSON.
    Map(&'static FieldType),
    /// `JSONSchemaPropsOrArray` (`{1: schema, 2: repeated schema}`): the list if it has
    /// items, else the schema.
    SchemaOrArray(&'static Message),
    /// `JSONSchemaPropsOrBool` (`{1: allows, 2: schema}`): the schema if set, else the bool.
    SchemaOrBool(&'static Message),
    /// `JSONSchemaPropsOrStringArray` (`{1: schema, 2: repeated string}`): the schema if set,
    /// else the strings.
    SchemaOrStringArray(&'static Message),
}

/// One field of a message schema.
#[derive(Debug, Clone, Copy)]
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
    /// How server-side apply merges the field (the upstream type's `listType`, `listMapKey`
    /// and `mapType` markers).
    pub merge: MergeMeta,
}

/// The server-side-apply markers of one field. Empty strings mean "no marker": a list then
/// follows its [`PatchMeta`] (a `merge` list is keyed by its merge key, or a set without one)
/// and is otherwise atomic; a map is granular.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MergeMeta {
    /// `listType`: "atomic", "set" or "map".
    pub list_type: &'static str,
    /// `listMapKey`s of a `map` list, in declaration order.
    pub list_keys: &'static [&'static str],
    /// Defaults of key fields an element may omit, as (field, JSON text), e.g.
    /// `("protocol", "\"TCP\"")` for container ports.
    pub key_defaults: &'static [(&'static str, &'static str)],
    /// `mapType`: "atomic" or "granular".
    pub map_type: &'static str,
}

impl MergeMeta {
    /// No markers.
    pub const NONE: MergeMeta = MergeMeta { list_type: "", list_keys: &[], key_defaults: &[], map_type: "" };
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
    Field { number, json, ty, repeated: false, patch: PatchMeta::NONE, merge: MergeMeta::NONE }
}

/// Shorthand for an embedded struct whose fields are the parent's in JSON.
pub const fn inline(number: u32, ty: FieldType) -> Field {
    Field { number, json: "", ty, repeated: false, patch: PatchMeta::NONE, merge: MergeMeta::NONE }
}

/// Adds strategic-merge-patch tags to a field.
pub const fn tagged(field: Field, strategy: &'static str, merge_key: &'static str) -> Field {
    Field { patch: PatchMeta { strategy, merge_key }, ..field }
}

/// Adds server-side-apply list markers to a field.
pub const fn listed(
    field: Field,
    list_type: &'static str,
    list_keys: &'static [&'static str],
    key_defaults: &'static [(&'static str, &'static str)],
) -> Field {
    Field { merge: MergeMeta { list_type, list_keys, key_defaults, map_type: field.merge.map_type }, ..field }
}

/// Adds the server-side-apply map marker to a field.
pub const fn map_typed(field: Field, map_type: &'static str) -> Field {
    Field { merge: MergeMeta { map_type, ..field.merge }, ..field }
}

/// Shorthand for a repeated field in schema tables.
pub const fn repeated(number: u32, json: &'static str, ty: FieldType) -> Field {
    Field { number, json, ty, repeated: true, patch: PatchMeta::NONE, merge: MergeMeta::NONE }
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
    /// A RawExtension or JSON field does not hold JSON.
    #[error("embedded raw object is not JSON")]
    RawNotJson,
    /// Messages nested deeper than [`MAX_DEPTH`].
    #[error("protobuf messages nested deeper than {MAX_DEPTH}")]
    TooDeep,
}

/// What the Go types say about zeros on the wire (see the module doc).
#[derive(Clone, Copy, Debug)]
pub struct GoZeros {
    /// Names, per message, its number and boolean fields whose zero on the wire means "unset"
    /// (non-pointer Go fields with `omitempty`); the decoder drops such a zero.
    pub unset: fn(&Message) -> &'static [&'static str],
    /// Names, per message, its string fields whose empty value kube prints as `""` (neither
    /// pointers nor `omitempty`); the decoder keeps such an empty string and drops others.
    pub printed_empty: fn(&Message) -> &'static [&'static str],
}

/// How deep messages may nest in a body. Only self-referential schemas (a CRD's
/// `JSONSchemaProps`) nest without bound, and each level costs stack: 100 is protobuf's own
/// default recursion limit, far beyond any real schema's nesting, and keeps a 3 MiB body of
/// nested messages from overflowing the stack of the thread that decodes it.
pub const MAX_DEPTH: usize = 100;

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

#[derive(Clone, Copy)]
enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
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
                let b = self.take(8)?;
                Wire::Fixed64(u64::from_le_bytes(b.try_into().map_err(|_| DecodeError::Truncated)?))
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

/// Whether a decoded field is left out of the JSON (see the module doc's zero-value rule).
fn is_dropped(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Bool(_) | Value::Number(_) | Value::Object(_) => false,
    }
}

/// The fields of a small fixed-layout message, by number.
fn fields_of(bytes: &[u8]) -> Result<Vec<(u32, Wire<'_>)>, DecodeError> {
    let mut r = Reader { buf: bytes };
    let mut out = Vec::new();
    while let Some(f) = r.next()? {
        out.push(f);
    }
    Ok(out)
}

fn varint_field(fields: &[(u32, Wire<'_>)], number: u32) -> Option<u64> {
    fields.iter().rev().find_map(|(n, w)| match (n, w) {
        (n, Wire::Varint(v)) if *n == number => Some(*v),
        _ => None,
    })
}

fn bytes_field<'a>(fields: &[(u32, Wire<'a>)], number: u32) -> Option<&'a [u8]> {
    fields.iter().rev().find_map(|(n, w)| match (n, w) {
        (n, Wire::Bytes(b)) if *n == number => Some(*b),
        _ => None,
    })
}

fn time(bytes: &[u8], micros: bool) -> Result<Value, DecodeError> {
    let f = fields_of(bytes)?;
    let seconds = varint_field(&f, 1).unwrap_or(0) as i64;
    let nanos = varint_field(&f, 2).unwrap_or(0);
    if seconds == 0 && nanos == 0 {
        // The zero Time is JSON null, and omitted like every other empty value.
        return Ok(Value::Null);
    }
    let text = crate::clock::format_rfc3339(seconds);
    if !micros {
        return Ok(Value::String(text));
    }
    let base = text.trim_end_matches('Z');
    Ok(Value::String(format!("{base}.{:06}Z", nanos / 1000)))
}

/// Go's `time.Duration.String()`: "1h2m3.5s", "1.5ms", "0s".
fn go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    let frac = |value: u64, unit: u64| {
        let whole = value / unit;
        let rest = value % unit;
        if rest == 0 {
            whole.to_string()
        } else {
            let digits = unit.to_string().len() - 1;
            let text = format!("{whole}.{rest:0digits$}");
            text.trim_end_matches('0').to_string()
        }
    };
    if n < 1_000 {
        return format!("{sign}{n}ns");
    }
    if n < 1_000_000 {
        return format!("{sign}{}µs", frac(n, 1_000));
    }
    if n < 1_000_000_000 {
        return format!("{sign}{}ms", frac(n, 1_000_000));
    }
    let (h, rest) = (n / 3_600_000_000_000, n % 3_600_000_000_000);
    let (m, rest) = (rest / 60_000_000_000, rest % 60_000_000_000);
    let secs = frac(rest, 1_000_000_000);
    match (h, m) {
        (0, 0) => format!("{sign}{secs}s"),
        (0, m) => format!("{sign}{m}m{secs}s"),
        (h, m) => format!("{sign}{h}h{m}m{secs}s"),
    }
}

fn scalar(ty: FieldType, wire: Wire<'_>, depth: usize, zeros: GoZeros) -> Result<Option<Value>, DecodeError> {
    Ok(Some(match (ty, wire) {
        (FieldType::String, Wire::Bytes(b)) => Value::String(utf8(b)?),
        (FieldType::Bytes, Wire::Bytes(b)) => b64(b),
        (FieldType::Int, Wire::Varint(v)) => Value::from(v as i64),
        (FieldType::Bool, Wire::Varint(v)) => Value::Bool(v != 0),
        (FieldType::Double, Wire::Fixed64(v)) => {
            serde_json::Number::from_f64(f64::from_bits(v)).map_or(Value::Null, Value::Number)
        }
        (FieldType::Message(m), Wire::Bytes(b)) => decode_at(b, m, depth + 1, zeros)?,
        (FieldType::Time, Wire::Bytes(b)) => time(b, false)?,
        (FieldType::MicroTime, Wire::Bytes(b)) => time(b, true)?,
        (FieldType::Duration, Wire::Bytes(b)) => {
            Value::String(go_duration(varint_field(&fields_of(b)?, 1).unwrap_or(0) as i64))
        }
        (FieldType::IntOrString, Wire::Bytes(b)) => {
            let f = fields_of(b)?;
            if varint_field(&f, 1) == Some(1) {
                Value::String(utf8(bytes_field(&f, 3).unwrap_or_default())?)
            } else {
                Value::from(varint_field(&f, 2).unwrap_or(0) as i32)
            }
        }
        (FieldType::Quantity, Wire::Bytes(b)) => {
            Value::String(utf8(bytes_field(&fields_of(b)?, 1).unwrap_or_default())?)
        }
        (FieldType::RawJson, Wire::Bytes(b)) => match bytes_field(&fields_of(b)?, 1) {
            None | Some([]) => Value::Null,
            Some(raw) => serde_json::from_slice(raw).map_err(|_| DecodeError::RawNotJson)?,
        },
        (FieldType::StringList, Wire::Bytes(b)) => {
            let mut items = Vec::new();
            for (n, w) in fields_of(b)? {
                if let (1, Wire::Bytes(s)) = (n, w) {
                    items.push(Value::String(utf8(s)?));
                }
            }
            Value::Array(items)
        }
        (FieldType::SchemaOrArray(m), Wire::Bytes(b)) => {
            let f = fields_of(b)?;
            let items: Vec<Value> = f
                .iter()
                .filter_map(|(n, w)| match (n, w) {
                    (2, Wire::Bytes(item)) => Some(decode_at(item, m, depth + 1, zeros)),
                    _ => None,
                })
                .collect::<Result<_, _>>()?;
            if items.is_empty() {
                bytes_field(&f, 1).map(|s| decode_at(s, m, depth + 1, zeros)).transpose()?.unwrap_or(Value::Null)
            } else {
                Value::Array(items)
            }
        }
        (FieldType::SchemaOrBool(m), Wire::Bytes(b)) => {
            let f = fields_of(b)?;
            match bytes_field(&f, 2) {
                Some(schema) => decode_at(schema, m, depth + 1, zeros)?,
                None => Value::Bool(varint_field(&f, 1).unwrap_or(0) != 0),
            }
        }
        (FieldType::SchemaOrStringArray(m), Wire::Bytes(b)) => {
            let f = fields_of(b)?;
            match bytes_field(&f, 1) {
                Some(schema) => decode_at(schema, m, depth + 1, zeros)?,
                None => Value::Array(
                    f.iter()
                        .filter_map(|(n, w)| match (n, w) {
                            (2, Wire::Bytes(s)) => Some(utf8(s).map(Value::String)),
                            _ => None,
                        })
                        .collect::<Result<_, _>>()?,
                ),
            }
        }
        (FieldType::Map(value_ty), Wire::Bytes(b)) => {
            // One map entry `{1: key, 2: value}`; the caller gathers entries into one object.
            let mut key = String::new();
            let mut value = None;
            for (n, w) in fields_of(b)? {
                match (n, w) {
                    (1, Wire::Bytes(k)) => key = utf8(k)?,
                    (2, w) => value = scalar(*value_ty, w, depth, zeros)?,
                    _ => {}
                }
            }
            let value = value.unwrap_or_else(|| empty_of(*value_ty));
            let mut entry = Map::new();
            entry.insert(key, value);
            Value::Object(entry)
        }
        // A field whose wire type does not match the schema is skipped, as protobuf decoders do.
        _ => return Ok(None),
    }))
}

/// The JSON of a map value that is absent from its entry (protobuf omits empty values).
fn empty_of(ty: FieldType) -> Value {
    match ty {
        FieldType::String | FieldType::Quantity => Value::String(String::new()),
        FieldType::Bytes => b64(&[]),
        FieldType::Int => Value::from(0),
        FieldType::Bool => Value::Bool(false),
        FieldType::StringList => Value::Array(Vec::new()),
        _ => Value::Object(Map::new()),
    }
}

/// Decodes one message into a JSON object (see the module doc for which empty values stay).
///
/// # Errors
///
/// Returns a wire-format error.
pub fn decode_message(bytes: &[u8], schema: &Message, zeros: GoZeros) -> Result<Value, DecodeError> {
    decode_at(bytes, schema, 0, zeros)
}

fn is_empty_string(value: &Value) -> bool {
    matches!(value, Value::String(s) if s.is_empty())
}

/// Whether a decoded number or boolean is its type's zero.
fn is_zero(value: &Value) -> bool {
    match value {
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        _ => false,
    }
}

/// Decodes a message nested `depth` messages deep, refusing one deeper than [`MAX_DEPTH`].
fn decode_at(bytes: &[u8], schema: &Message, depth: usize, zeros: GoZeros) -> Result<Value, DecodeError> {
    if depth > MAX_DEPTH {
        return Err(DecodeError::TooDeep);
    }
    let mut out = Map::new();
    // Empty strings an embedded struct kept (its own printed ones): the parent's table does
    // not name them.
    let mut embedded_empty = Vec::new();
    let mut r = Reader { buf: bytes };
    while let Some((number, wire)) = r.next()? {
        let Some(field) = schema.fields.iter().find(|f| f.number == number) else { continue };
        let Some(v) = scalar(field.ty, wire, depth, zeros)? else { continue };
        match (field.ty, v) {
            (FieldType::Message(_), Value::Object(embedded)) if field.json.is_empty() => {
                embedded_empty.extend(embedded.iter().filter(|(_, v)| is_empty_string(v)).map(|(k, _)| k.clone()));
                out.extend(embedded);
            }
            (FieldType::Map(_), Value::Object(entry)) => {
                if let Value::Object(map) = out.entry(field.json).or_insert_with(|| Value::Object(Map::new())) {
                    map.extend(entry);
                }
            }
            (_, v) if field.repeated => {
                if let Value::Array(list) = out.entry(field.json).or_insert_with(|| Value::Array(Vec::new())) {
                    list.push(v);
                }
            }
            // The last occurrence of a field wins, so an unset zero also clears an earlier value.
            (FieldType::Int | FieldType::Bool | FieldType::Double, v)
                if is_zero(&v) && (zeros.unset)(schema).contains(&field.json) =>
            {
                out.remove(field.json);
            }
            (_, v) => {
                out.insert(field.json.to_string(), v);
            }
        }
    }
    // Map values and list items may legitimately be empty (`data: {"a": ""}`); only whole
    // fields are dropped, and an empty string only where kube prints it.
    let printed = (zeros.printed_empty)(schema);
    out.retain(|k, v| {
        !is_dropped(v) || is_empty_string(v) && (printed.contains(&k.as_str()) || embedded_empty.contains(k))
    });
    Ok(Value::Object(out))
}

/// Decodes an enveloped object with the kind's schema; `apiVersion` and `kind` come from the
/// envelope, and `zeros` says which zeros to drop (see the module doc).
///
/// # Errors
///
/// Returns `MissingMagic` or a wire-format error.
pub fn decode_object(body: &[u8], schema: &Message, zeros: GoZeros) -> Result<Value, DecodeError> {
    let env = envelope(body)?;
    let mut obj = decode_message(env.raw, schema, zeros)?;
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
    use serde_json::json;

    /// Keeps every zero: these tests' messages are not kube's.
    const KEEP_ALL: GoZeros = GoZeros { unset: |_| &[], printed_empty: |_| &[] };

    #[test]
    fn kube_value_forms() {
        assert_eq!(go_duration(0), "0s");
        assert_eq!(go_duration(3_600_000_000_000), "1h0m0s");
        assert_eq!(go_duration(90_000_000_000), "1m30s");
        assert_eq!(go_duration(1_500_000_000), "1.5s");
        assert_eq!(go_duration(2_000_000), "2ms");
        assert_eq!(go_duration(-5_000_000_000), "-5s");
        // IntOrString {type: 1, strVal: "25%"} and {intVal: 1}; Quantity {string: "100m"}.
        assert_eq!(
            scalar(FieldType::IntOrString, Wire::Bytes(b"\x08\x01\x1a\x0325%"), 0, KEEP_ALL),
            Ok(Some(json!("25%")))
        );
        assert_eq!(scalar(FieldType::IntOrString, Wire::Bytes(b"\x10\x01"), 0, KEEP_ALL), Ok(Some(json!(1))));
        assert_eq!(scalar(FieldType::Quantity, Wire::Bytes(b"\n\x04100m"), 0, KEEP_ALL), Ok(Some(json!("100m"))));
        // MicroTime {seconds: 1, nanos: 5000}; RawExtension {raw: {"a":1}}.
        assert_eq!(
            scalar(FieldType::MicroTime, Wire::Bytes(b"\x08\x01\x10\x88\x27"), 0, KEEP_ALL),
            Ok(Some(json!("1970-01-01T00:00:01.000005Z")))
        );
        assert_eq!(scalar(FieldType::RawJson, Wire::Bytes(b"\n\x07{\"a\":1}"), 0, KEEP_ALL), Ok(Some(json!({"a": 1}))));
        assert_eq!(scalar(FieldType::RawJson, Wire::Bytes(b"\n\x02{x"), 0, KEEP_ALL), Err(DecodeError::RawNotJson));
    }

    /// A CRD schema nested a million levels deep (a few MB of bytes) is refused, not followed
    /// until the stack overflows.
    #[test]
    fn nesting_past_the_limit_is_refused() {
        // A schema that refers to itself as JSONSchemaProps does: items (24) is a
        // JSONSchemaPropsOrArray whose field 1 is the schema again.
        static PROPS: Message = Message { fields: &[field(24, "items", FieldType::SchemaOrArray(&PROPS))] };
        let (props, items) = (&PROPS, 24u32);
        let nest = |levels: usize| {
            let mut msg = Vec::new();
            for _ in 0..levels {
                // items: JSONSchemaPropsOrArray { schema (1): msg }
                let mut wrapper = vec![0x0a];
                push_varint(&mut wrapper, msg.len() as u64);
                wrapper.extend_from_slice(&msg);
                let mut outer = Vec::new();
                push_varint(&mut outer, u64::from(items) << 3 | 2);
                push_varint(&mut outer, wrapper.len() as u64);
                outer.extend_from_slice(&wrapper);
                msg = outer;
            }
            msg
        };
        assert!(decode_message(&nest(MAX_DEPTH / 2), props, KEEP_ALL).is_ok());
        assert_eq!(decode_message(&nest(200_000), props, KEEP_ALL), Err(DecodeError::TooDeep));
    }

    fn push_varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
}
