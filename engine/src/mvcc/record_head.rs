//! [`RecordHead`]: what the start-up rebuild of the index needs of a history record, read
//! without its value.
//!
//! A record is an encoded `mvccpb.KeyValue`. Decoding it whole copies its value, the bulk of
//! its bytes; once the value cache is full the rebuild has no use for the value, so it reads the
//! key and the small fields only and steps over the value (a gigabyte of history is then read,
//! not copied).

use bytes::Bytes;
use prost::encoding::{decode_key, decode_varint, skip_field, DecodeContext, WireType};

/// A history record's fields other than its value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordHead {
    /// `KeyValue.key`.
    pub key: Bytes,
    /// `KeyValue.create_revision`.
    pub create_revision: i64,
    /// `KeyValue.version`.
    pub version: i64,
    /// `KeyValue.lease`.
    pub lease: i64,
}

/// `KeyValue` field numbers (etcd's `mvccpb/kv.proto`).
const KEY: u32 = 1;
const CREATE_REVISION: u32 = 2;
const VERSION: u32 = 4;
const LEASE: u32 = 6;

/// Reads `record`'s head as `KeyValue::decode` would (a field given twice: the last one), or
/// None when it does not decode.
pub fn decode(mut record: &[u8]) -> Option<RecordHead> {
    let mut head = RecordHead::default();
    let buf = &mut record;
    while !buf.is_empty() {
        let (tag, wire) = decode_key(buf).ok()?;
        match (tag, wire) {
            (KEY, WireType::LengthDelimited) => {
                let len = usize::try_from(decode_varint(buf).ok()?).ok()?;
                let bytes = buf.get(..len)?;
                head.key = Bytes::copy_from_slice(bytes);
                *buf = &buf[len..];
            }
            // int64 fields are varints; a negative one is its two's complement, as prost reads it.
            (CREATE_REVISION, WireType::Varint) => head.create_revision = decode_varint(buf).ok()? as i64,
            (VERSION, WireType::Varint) => head.version = decode_varint(buf).ok()? as i64,
            (LEASE, WireType::Varint) => head.lease = decode_varint(buf).ok()? as i64,
            _ => skip_field(wire, tag, buf, DecodeContext::default()).ok()?,
        }
    }
    Some(head)
}

#[cfg(test)]
mod tests {
    use ballast_proto::mvccpb::KeyValue;
    use prost::Message;

    use super::*;

    #[test]
    fn reads_what_a_full_decode_reads_but_the_value() {
        for kv in [
            KeyValue {
                key: Bytes::from_static(b"/registry/pods/default/a"),
                create_revision: 7,
                mod_revision: 9,
                version: 3,
                value: Bytes::from(vec![0xab; 5000]),
                lease: 0x1234_5678_9abc,
            },
            KeyValue { key: Bytes::from_static(b"k"), create_revision: -1, ..Default::default() },
            KeyValue::default(),
        ] {
            let head = decode(&kv.encode_to_vec()).expect("decodes");
            assert_eq!(
                head,
                RecordHead {
                    key: kv.key.clone(),
                    create_revision: kv.create_revision,
                    version: kv.version,
                    lease: kv.lease
                }
            );
        }
    }

    #[test]
    fn a_damaged_record_does_not_decode() {
        let kv =
            KeyValue { key: Bytes::from_static(b"key"), value: Bytes::from_static(b"value"), ..Default::default() };
        let bytes = kv.encode_to_vec();
        assert!(decode(&bytes[..bytes.len() - 1]).is_none(), "cut inside the value");
        assert!(decode(&[0x0a, 0x05, b'k']).is_none(), "a key longer than the record");
        assert!(KeyValue::decode(&bytes[..bytes.len() - 1]).is_err(), "as a full decode");
    }
}
