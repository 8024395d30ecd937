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
//! Finding `metadata` reads only the object's first members when it comes early (as both
//! kube-apiserver and this frontend write it, before `spec` and `status`) and nothing after
//! it could be a second `metadata` member; the rest of the bytes is then copied unread, as
//! kube's watch cache serves what it decoded once. Otherwise serde_json reads the whole
//! object (borrowed [`RawValue`]s, no tree). Anything that is not a plain JSON object with one
//! object-valued `metadata` lacking `resourceVersion` (another writer's format, duplicate
//! keys, ...) is given back and takes the decoding path, which reports it as before.

// #[PerformanceCriticalPath]

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

/// Only whether `metadata` carries a `resourceVersion`.
#[derive(Deserialize)]
struct MetaRevision {
    #[serde(rename = "resourceVersion")]
    resource_version: Option<IgnoredAny>,
}

impl<'a> Top<'a> {
    /// The `metadata` member of a whole, valid JSON object with no duplicate `metadata`.
    fn metadata_of(bytes: &'a [u8]) -> Option<&'a str> {
        // Derived structs also accept a JSON array of their fields; a stored object is an object.
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            return None;
        }
        let top: Top<'a> = serde_json::from_slice(bytes).ok()?;
        Some(top.metadata.get())
    }
}

/// Reads the top-level members of `bytes` up to `metadata` (which both kube-apiserver and
/// this frontend write before `spec` and `status`), returning its value and the bytes after
/// it. `None` when the object does not start that way (the whole-object path decides then).
fn leading_metadata(bytes: &[u8]) -> Option<(&str, &[u8])> {
    let mut pos = skip_ws(bytes, 0);
    if bytes.get(pos) != Some(&b'{') {
        return None;
    }
    pos += 1;
    // A few short members (`apiVersion`, `kind`) come first; give up after that.
    for _ in 0..4 {
        pos = skip_ws(bytes, pos);
        if bytes.get(pos) != Some(&b'"') {
            return None;
        }
        let key_end = pos + 1 + bytes[pos + 1..].iter().position(|b| *b == b'"')?;
        let key = &bytes[pos + 1..key_end];
        if key.contains(&b'\\') {
            return None;
        }
        pos = skip_ws(bytes, key_end + 1);
        if bytes.get(pos) != Some(&b':') {
            return None;
        }
        pos = skip_ws(bytes, pos + 1);
        let value: &RawValue = serde_json::Deserializer::from_slice(&bytes[pos..]).into_iter().next()?.ok()?;
        let value = value.get();
        let end = value.as_ptr() as usize - bytes.as_ptr() as usize + value.len();
        if key == b"metadata" {
            return Some((value, &bytes[end..]));
        }
        pos = skip_ws(bytes, end);
        if bytes.get(pos) != Some(&b',') {
            return None;
        }
        pos += 1;
    }
    None
}

/// Whether `rest` might hold another top-level `metadata` member: it names `"metadata"`
/// anywhere, or has a `\u00` escape (with which a member name can spell it). Pod templates
/// and HTML-escaped strings send an object down the whole-object path, which is only slower.
fn may_name_metadata(rest: &[u8]) -> bool {
    memchr::memmem::find(rest, b"\"metadata\"").is_some() || memchr::memmem::find(rest, b"\\u00").is_some()
}

fn skip_ws(bytes: &[u8], mut pos: usize) -> usize {
    while bytes.get(pos).is_some_and(u8::is_ascii_whitespace) {
        pos += 1;
    }
    pos
}

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
        let meta = match leading_metadata(bytes) {
            // Nothing after `metadata` can be another `metadata` member, so the bytes are
            // used as they are without reading the rest.
            Some((meta, rest)) if !may_name_metadata(rest) => meta,
            _ => Top::metadata_of(bytes)?,
        };
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
            let parsed: MetaRevision = serde_json::from_str(meta).ok()?;
            if parsed.resource_version.is_some() {
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
        out.reserve(self.encoded_len());
        out.put_slice(head);
        out.put_slice(b"\"resourceVersion\":\"");
        let _ = write!(out.writer(), "{}", self.revision);
        out.put_u8(b'"');
        if self.meta_has_members {
            out.put_u8(b',');
        }
        out.put_slice(tail);
    }

    /// Returns how many bytes [`RawObject::write`] appends, at most.
    pub fn encoded_len(&self) -> usize {
        // `"resourceVersion":"<i64>",` is at most 41 bytes.
        self.bytes.len() + 41
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
            r#"{"a":1,"b":2,"c":3,"d":4,"metadata":{"name":"a"}"#,
            "not json",
            "",
        ] {
            assert!(served(stored, 1).is_none(), "{stored}");
        }
    }

    #[test]
    fn early_metadata_is_found_without_reading_the_rest() {
        // After an early `metadata` the rest is copied as is (here: not even JSON).
        let v = RawObject::new(
            br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":@@@}"#.to_vec(),
            9,
            false,
        )
        .expect("fast path");
        assert_eq!(
            String::from_utf8(v.0.to_vec()).expect("utf-8"),
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"resourceVersion":"9","name":"p"},"spec":@@@}"#
        );
        // A later member that names "metadata" (a pod template) or could spell it with an
        // escape sends the object through the whole-object read.
        let template =
            r#"{"kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"metadata":{"labels":{"a":"b"}}}}}"#;
        let v = served(template, 4).expect("served");
        assert_eq!(v["metadata"], json!({"name": "d", "resourceVersion": "4"}));
        assert_eq!(v["spec"]["template"]["metadata"], json!({"labels": {"a": "b"}}));
        let html = r#"{"kind":"ConfigMap","metadata":{"name":"h"},"data":{"x":"\u003cb\u003e"}}"#;
        assert_eq!(served(html, 4).expect("served")["data"]["x"], "<b>");
        assert!(served(r#"{"metadata":{"name":"a"},"metadat\u0061":{"name":"b"}}"#, 1).is_none());
        assert!(served(r#"{"metadata":{"name":"a"},"spec":{},"metadata":{"name":"b"}}"#, 1).is_none());
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
