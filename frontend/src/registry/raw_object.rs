//! Stored objects served as the bytes storage holds, without decoding them into a tree and
//! encoding them again.
//!
//! A stored object lacks only its `resourceVersion` (storage keeps it as the key's
//! mod_revision; see [`super::object::to_storage`]). When a LIST needs nothing else from the
//! object (no version conversion, no field selector, the plain JSON form), the answer is the
//! stored bytes with `"resourceVersion":"<rev>"` spliced in as the first member of the
//! top-level `metadata` object. For a 10k-object LIST this turns most of the frontend's work
//! (a parse into `serde_json::Value`, an encode, and freeing the tree) into one validating scan
//! and two copies per object.
//!
//! The scan is serde_json's own (borrowed [`RawValue`]s), so anything that is not a plain JSON
//! object with one object-valued `metadata` lacking `resourceVersion` (another writer's format,
//! duplicate keys, ...) is refused here and takes the decoding path, which reports it as
//! before.

// #[PerformanceCriticalPath]

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::Write as _;

use bytes::{BufMut, BytesMut};
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::value::RawValue;

/// A stored object ready to be written with its `resourceVersion`.
#[derive(Debug)]
pub struct RawObject {
    bytes: Vec<u8>,
    /// Offset just after the `{` that opens `metadata`.
    insert_at: usize,
    /// Whether `metadata` has other members (the splice then needs a comma).
    meta_has_members: bool,
    revision: i64,
}

/// The labels of a raw object, for label selectors (owned: keys and values may be escaped).
pub type Labels = BTreeMap<String, String>;

#[derive(Deserialize)]
struct Top<'a> {
    #[serde(borrow)]
    metadata: &'a RawValue,
}

#[derive(Deserialize)]
struct Meta {
    #[serde(rename = "resourceVersion")]
    resource_version: Option<IgnoredAny>,
    labels: Option<BTreeMap<String, String>>,
}

/// A `metadata` object's member names only, to learn whether it is empty without decoding it.
#[derive(Deserialize)]
struct MetaKeys<'a>(#[serde(borrow)] BTreeMap<Cow<'a, str>, IgnoredAny>);

impl RawObject {
    /// Prepares `bytes` (a stored object) to be served at `revision`; with `want_labels`,
    /// also returns its labels. Gives the bytes back when they need the decoding path (see
    /// the module doc).
    ///
    /// # Errors
    ///
    /// Returns `bytes` unchanged when they are not a plain stored object.
    pub fn new(bytes: Vec<u8>, revision: i64, want_labels: bool) -> Result<(RawObject, Labels), Vec<u8>> {
        match Self::locate(&bytes, want_labels) {
            Some((insert_at, meta_has_members, labels)) => {
                Ok((RawObject { bytes, insert_at, meta_has_members, revision }, labels))
            }
            None => Err(bytes),
        }
    }

    /// Finds where the revision goes: (offset after metadata's `{`, whether metadata has
    /// members, labels if wanted).
    fn locate(bytes: &[u8], want_labels: bool) -> Option<(usize, bool, Labels)> {
        // Derived structs also accept a JSON array of their fields; a stored object is an object.
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            return None;
        }
        let top: Top<'_> = serde_json::from_slice(bytes).ok()?;
        let meta = top.metadata.get();
        if !meta.starts_with('{') {
            return None;
        }
        let labels = if want_labels {
            let parsed: Meta = serde_json::from_str(meta).ok()?;
            if parsed.resource_version.is_some() {
                return None;
            }
            parsed.labels.unwrap_or_default()
        } else {
            let parsed: MetaKeys<'_> = serde_json::from_str(meta).ok()?;
            if parsed.0.contains_key("resourceVersion") {
                return None;
            }
            Labels::new()
        };
        let meta_has_members = meta[1..].trim_start().as_bytes().first() != Some(&b'}');
        // `meta` borrows from `bytes`, so its offset is a pointer difference.
        let insert_at = meta.as_ptr() as usize - bytes.as_ptr() as usize + 1;
        Some((insert_at, meta_has_members, labels))
    }

    /// Appends the object, with its `resourceVersion`, to `out`.
    pub fn write(&self, out: &mut BytesMut) {
        let (head, tail) = self.bytes.split_at(self.insert_at);
        out.reserve(self.bytes.len() + 40);
        out.put_slice(head);
        out.put_slice(b"\"resourceVersion\":\"");
        let _ = write!(out.writer(), "{}", self.revision);
        out.put_u8(b'"');
        if self.meta_has_members {
            out.put_u8(b',');
        }
        out.put_slice(tail);
    }

    /// Returns the bytes [`RawObject::write`] appends.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = BytesMut::new();
        self.write(&mut out);
        out.to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn served(stored: &str, revision: i64) -> Option<Value> {
        let (raw, _) = RawObject::new(stored.as_bytes().to_vec(), revision, false).ok()?;
        Some(serde_json::from_slice(&raw.to_vec()).expect("valid JSON"))
    }

    #[test]
    fn splices_the_revision_wherever_metadata_sits() {
        for stored in [
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","namespace":"n"},"spec":{}}"#,
            r#"{"metadata":{"name":"a","namespace":"n"},"kind":"Pod","apiVersion":"v1","spec":{}}"#,
            r#"{"spec":{},"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","namespace":"n"}}"#,
            " {\n \"kind\" : \"Pod\", \"apiVersion\":\"v1\",\"spec\":{},\n \"metadata\" :\t{ \"name\":\"a\",\"namespace\":\"n\" } } ",
        ] {
            let v = served(stored, 42).expect(stored);
            assert_eq!(v["metadata"], json!({"name": "a", "namespace": "n", "resourceVersion": "42"}), "{stored}");
            assert_eq!(v["kind"], "Pod");
        }
    }

    #[test]
    fn strings_that_look_like_metadata_are_not_the_member() {
        let stored =
            r#"{"data":{"metadata":"{\"x\":1}","k\"metadata":"v"},"kind":"ConfigMap","metadata":{"name":"m"}}"#;
        let v = served(stored, 7).expect("served");
        assert_eq!(v["metadata"], json!({"name": "m", "resourceVersion": "7"}));
        assert_eq!(v["data"]["metadata"], "{\"x\":1}");
        assert_eq!(v["data"]["k\"metadata"], "v");
    }

    #[test]
    fn empty_metadata_gets_no_comma() {
        assert_eq!(served(r#"{"metadata":{ }}"#, 3).expect("served")["metadata"], json!({"resourceVersion": "3"}));
        assert_eq!(served(r#"{"metadata":{}}"#, 3).expect("served")["metadata"], json!({"resourceVersion": "3"}));
    }

    #[test]
    fn escaped_member_names_are_understood() {
        // "metadat\u0061" is "metadata"; the escaped resourceVersion must be seen too.
        let v = served(r#"{"metadat\u0061":{"name":"e"}}"#, 5).expect("served");
        assert_eq!(v["metadata"], json!({"name": "e", "resourceVersion": "5"}));
        assert!(served(r#"{"metadata":{"name":"e","resourceVersio\u006e":"1"}}"#, 5).is_none());
    }

    #[test]
    fn unusual_objects_take_the_decoding_path() {
        for stored in [
            r#"{"metadata":{"name":"a","resourceVersion":"9"}}"#,
            r#"{"metadata":null}"#,
            r#"{"metadata":"x"}"#,
            r#"{"kind":"Pod"}"#,
            r#"{"metadata":{"name":"a"},"metadata":{"name":"b"}}"#,
            r#"[{"metadata":{}}]"#,
            r#"{"metadata":{"name":"a"}"#,
            "not json",
            "",
        ] {
            assert!(served(stored, 1).is_none(), "{stored}");
        }
    }

    #[test]
    fn labels_come_back_when_asked() {
        let stored = br#"{"metadata":{"name":"a","labels":{"app":"web","t\u0069er":"x"}}}"#.to_vec();
        let (_, labels) = RawObject::new(stored.clone(), 1, true).expect("raw");
        assert_eq!(labels, Labels::from([("app".into(), "web".into()), ("tier".into(), "x".into())]));
        let (_, none) = RawObject::new(stored, 1, false).expect("raw");
        assert!(none.is_empty());
    }
}
