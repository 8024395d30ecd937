//! Stored objects served as the bytes storage holds, without decoding them into a tree and
//! encoding them again.
//!
//! A stored object lacks only its `resourceVersion` (storage keeps it as the key's
//! mod_revision; see [`super::object::to_storage`]). When a LIST needs nothing else from the
//! object (no version conversion, the plain JSON form, selectors on labels, `metadata.name` or
//! `metadata.namespace` only), the answer is the stored bytes with `"resourceVersion":"<rev>"`
//! spliced in as the first member of the top-level `metadata` object. For a 10k-object LIST
//! this turns most of the frontend's work (a parse into `serde_json::Value`, an encode, and
//! freeing the tree) into a short scan and one copy per object.
//!
//! The scan ([`Cursor`]) reads the object's top-level member names up to `metadata`, then
//! `metadata`'s members: that says whether it already has a `resourceVersion` and where its
//! labels, name and namespace are, without decoding any of them. When nothing after `metadata`
//! could be a second `metadata` member, the rest is copied unread (kube-apiserver and this
//! frontend write `metadata` before `spec` and `status`, so for most objects that is most of
//! the bytes); otherwise the scan reads the remaining top-level members too. Anything that is not
//! a JSON object with one object-valued `metadata` lacking `resourceVersion` (another writer's
//! format, duplicate `metadata`, a truncated value, ...) is given back and takes the decoding
//! path, which reports it as before.

// #[PerformanceCriticalPath]

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::Write as _;
use std::ops::Range;
use std::sync::LazyLock;

use bytes::{BufMut, Bytes, BytesMut};
use memchr::memmem::Finder;

use super::json_scan::Cursor;

/// A stored object ready to be written with its `resourceVersion`.
#[derive(Debug)]
pub struct RawObject {
    /// The stored bytes (a slice of the storage response, shared with the page's other objects).
    bytes: Bytes,
    /// Where the revision goes and what `metadata` holds.
    meta: Metadata,
    revision: i64,
}

/// Where things are in a stored object's top-level `metadata` (offsets into its bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Metadata {
    /// Offset just after the `{` that opens `metadata`.
    insert_at: usize,
    /// Whether `metadata` has other members (the splice then needs a comma).
    has_members: bool,
    /// The values of `labels`, `name` and `namespace`, when present.
    labels: Option<Range<usize>>,
    name: Option<Range<usize>>,
    namespace: Option<Range<usize>>,
}

/// The labels of a raw object, for label selectors (owned: keys and values may be escaped).
pub type Labels = BTreeMap<String, String>;

/// A top-level member name `metadata`, as written without escapes.
static METADATA_NAME: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"metadata\""));
/// The escape that can spell a letter of `metadata` (`\u006d`, ...).
static LATIN_ESCAPE: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\\u00"));

/// Whether `rest` might hold another top-level `metadata` member: it names `"metadata"`
/// anywhere, or has a `\u00` escape (with which a member name can spell it). Pod templates
/// and HTML-escaped strings send an object through the whole-object scan, which is only slower.
fn may_name_metadata(rest: &[u8]) -> bool {
    METADATA_NAME.find(rest).is_some() || (memchr::memchr(b'\\', rest).is_some() && LATIN_ESCAPE.find(rest).is_some())
}

/// Finds the top-level `metadata` of a stored object (see the module doc); `None` when the
/// bytes need the decoding path.
fn locate(bytes: &[u8]) -> Option<Metadata> {
    let mut c = Cursor::new(bytes);
    if !c.eat(b'{') || c.eat(b'}') {
        return None;
    }
    let mut found = None;
    loop {
        if c.member_name()?.is("metadata") {
            if found.is_some() {
                return None;
            }
            found = Some(metadata(&mut c)?);
            // Nothing after it can be another `metadata`, and the object is not cut short: the
            // rest is used as it is, unread.
            let rest = c.rest();
            if !may_name_metadata(rest) && rest.trim_ascii_end().last() == Some(&b'}') {
                return found;
            }
        } else {
            c.skip_value()?;
        }
        if !c.after_member()? {
            break;
        }
    }
    // The object is closed; only whitespace may follow it.
    if c.peek().is_some() {
        return None;
    }
    found
}

/// Reads the value of a `metadata` member, which must be an object without `resourceVersion`.
fn metadata(c: &mut Cursor<'_>) -> Option<Metadata> {
    if !c.eat(b'{') {
        return None;
    }
    let mut found = Metadata { insert_at: c.pos(), has_members: false, labels: None, name: None, namespace: None };
    if c.eat(b'}') {
        return Some(found);
    }
    found.has_members = true;
    loop {
        let member = c.member_name()?;
        // One comparison per member name; escaped names (rare) are decoded first.
        let decoded;
        let name = match member.plain() {
            Some(name) => name,
            None => {
                decoded = member.decode()?;
                decoded.as_bytes()
            }
        };
        let slot = match name {
            b"resourceVersion" => return None,
            b"labels" => Some(&mut found.labels),
            b"name" => Some(&mut found.name),
            b"namespace" => Some(&mut found.namespace),
            _ => None,
        };
        let len = c.skip_value()?.len();
        // A duplicate would make the answer depend on which one a reader keeps.
        if slot.is_some_and(|slot| slot.replace(c.pos() - len..c.pos()).is_some()) {
            return None;
        }
        if !c.after_member()? {
            return Some(found);
        }
    }
}

impl RawObject {
    /// Prepares `bytes` (a stored object) to be served at `revision`.
    ///
    /// # Errors
    ///
    /// Returns `bytes` unchanged when they need the decoding path (see the module doc).
    pub fn new(bytes: Bytes, revision: i64) -> Result<RawObject, Bytes> {
        match locate(&bytes) {
            Some(meta) => Ok(RawObject { bytes, meta, revision }),
            None => Err(bytes),
        }
    }

    /// Returns the stored bytes (for the decoding path).
    pub fn into_bytes(self) -> Bytes {
        self.bytes
    }

    /// Returns `metadata.labels` (empty when absent or null); `None` when they are not a map of
    /// strings to strings.
    pub fn labels(&self) -> Option<Labels> {
        match &self.meta.labels {
            None => Some(Labels::new()),
            Some(at) => {
                serde_json::from_slice::<Option<Labels>>(&self.bytes[at.clone()]).ok().map(Option::unwrap_or_default)
            }
        }
    }

    /// Returns `metadata.name` (empty when absent); `None` when it is not a string.
    pub fn name(&self) -> Option<Cow<'_, str>> {
        self.string_at(self.meta.name.as_ref())
    }

    /// Returns `metadata.namespace` (empty when absent); `None` when it is not a string.
    pub fn namespace(&self) -> Option<Cow<'_, str>> {
        self.string_at(self.meta.namespace.as_ref())
    }

    fn string_at(&self, at: Option<&Range<usize>>) -> Option<Cow<'_, str>> {
        match at {
            None => Some(Cow::Borrowed("")),
            Some(at) => Cursor::new(&self.bytes[at.clone()]).string()?.decode(),
        }
    }

    /// Appends the object, with its `resourceVersion`, to `out`.
    pub fn write(&self, out: &mut BytesMut) {
        let (head, tail) = self.bytes.split_at(self.meta.insert_at);
        out.reserve(self.encoded_len());
        out.put_slice(head);
        out.put_slice(b"\"resourceVersion\":\"");
        let _ = write!(out.writer(), "{}", self.revision);
        out.put_u8(b'"');
        if self.meta.has_members {
            out.put_u8(b',');
        }
        out.put_slice(tail);
    }

    /// Returns how many bytes [`RawObject::write`] appends, at most.
    pub fn encoded_len(&self) -> usize {
        // `"resourceVersion":"<i64>",` is at most 41 bytes.
        self.bytes.len() + 41
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// The bytes [`RawObject::write`] appends.
    fn bytes_of(raw: &RawObject) -> Vec<u8> {
        let mut out = BytesMut::new();
        raw.write(&mut out);
        out.to_vec()
    }

    fn raw(stored: &str) -> Option<RawObject> {
        RawObject::new(Bytes::copy_from_slice(stored.as_bytes()), 42).ok()
    }

    fn served(stored: &str, revision: i64) -> Option<Value> {
        let raw = RawObject::new(Bytes::copy_from_slice(stored.as_bytes()), revision).ok()?;
        Some(serde_json::from_slice(&bytes_of(&raw)).expect("valid JSON"))
    }

    #[test]
    fn splices_the_revision_wherever_metadata_sits() {
        for stored in [
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","namespace":"n"},"spec":{}}"#,
            r#"{"metadata":{"name":"a","namespace":"n"},"kind":"Pod","apiVersion":"v1","spec":{}}"#,
            r#"{"spec":{},"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","namespace":"n"}}"#,
            r#"{"spec":{"x":[1,2,{"y":null}]},"a":true,"b":-1.5e3,"c":"s","d":[],"e":{},"kind":"Pod","metadata":{"name":"a","namespace":"n"}}"#,
            " {\n \"kind\" : \"Pod\", \"apiVersion\":\"v1\",\"spec\":{},\n \"metadata\" :\t{ \"name\":\"a\",\"namespace\":\"n\" } } ",
            "{\"kind\":\"Pod\",\"metadata\":{\r\n\"name\"\r\n:\r\n\"a\" ,\"namespace\":\"n\"\r\n}\r\n}\r\n",
        ] {
            let v = served(stored, 42).expect(stored);
            assert_eq!(v["metadata"], json!({"name": "a", "namespace": "n", "resourceVersion": "42"}), "{stored}");
            assert_eq!(v["kind"], "Pod");
        }
    }

    #[test]
    fn the_splice_is_the_first_member_of_metadata() {
        let raw = raw(r#"{"kind":"Pod","metadata":{"name":"p"},"spec":{}}"#).expect("fast path");
        assert_eq!(
            String::from_utf8(bytes_of(&raw)).expect("utf-8"),
            r#"{"kind":"Pod","metadata":{"resourceVersion":"42","name":"p"},"spec":{}}"#
        );
        assert!(raw.encoded_len() >= bytes_of(&raw).len());
        let raw = RawObject::new(Bytes::from_static(br#"{"metadata":{}}"#), i64::MAX).expect("fast path");
        assert_eq!(bytes_of(&raw), format!(r#"{{"metadata":{{"resourceVersion":"{}"}}}}"#, i64::MAX).into_bytes());
        assert!(raw.encoded_len() >= bytes_of(&raw).len());
    }

    #[test]
    fn strings_that_look_like_metadata_are_not_the_member() {
        let stored =
            r#"{"data":{"metadata":"{\"x\":1}","k\"metadata":"v"},"kind":"ConfigMap","metadata":{"name":"m"}}"#;
        let v = served(stored, 7).expect("served");
        assert_eq!(v["metadata"], json!({"name": "m", "resourceVersion": "7"}));
        assert_eq!(v["data"]["metadata"], "{\"x\":1}");
        assert_eq!(v["data"]["k\"metadata"], "v");
        // After the member: a value "metadata", a string naming it, an array of metadata
        // objects; the scan reads them all and still finds one member.
        let stored = r#"{"metadata":{"name":"m"},"kind":"metadata","note":"\"metadata\":{}","list":[{"metadata":{"resourceVersion":"1"}}]}"#;
        let v = served(stored, 8).expect("served");
        assert_eq!(v["metadata"], json!({"name": "m", "resourceVersion": "8"}));
        assert_eq!(v["list"][0]["metadata"], json!({"resourceVersion": "1"}));
        assert_eq!(v["note"], "\"metadata\":{}");
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
        let raw = raw(r#"{"metadata":{"n\u0061me":"\u0065\"x","labels":{"a\u0062":"c"}}}"#).expect("fast path");
        assert_eq!(raw.name().as_deref(), Some("e\"x"));
        assert_eq!(raw.labels(), Some(Labels::from([("ab".into(), "c".into())])));
    }

    #[test]
    fn unusual_objects_take_the_decoding_path() {
        for stored in [
            r#"{"metadata":{"name":"a","resourceVersion":"9"}}"#,
            r#"{"metadata":null}"#,
            r#"{"metadata":"x"}"#,
            r#"{"metadata":[]}"#,
            r#"{"kind":"Pod"}"#,
            r#"{}"#,
            r#"{"metadata":{"name":"a"},"metadata":{"name":"b"}}"#,
            r#"{"metadata":{"name":"a","name":"b"}}"#,
            r#"{"metadata":{"labels":{},"labels":{"a":"b"}}}"#,
            r#"[{"metadata":{}}]"#,
            r#"{"a":1,"b":2,"c":3,"d":4,"metadata":{"name":"a"}"#,
            r#"{"metadata":{"name":"a"}}{"metadata":{}}"#,
            r#"{"kind":"Pod","metadata":{"name":"a",}}"#,
            r#"{"kind":"Pod","metadata":{"name":"a""labels":{}}}"#,
            r#"{"kind":"Pod","metadata":{"labels":{"a":"b"]}}"#,
            r#"{"kind":"Pod","metadata":{"name":"a"}"#,
            r#"{"kind" "Pod","metadata":{}}"#,
            "not json",
            "",
        ] {
            assert!(served(stored, 1).is_none(), "{stored}");
        }
    }

    #[test]
    fn early_metadata_is_found_without_reading_the_rest() {
        // After an early `metadata` the rest is copied as is (here: not even JSON).
        let v = raw(r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":@@@}"#).expect("fast path");
        assert_eq!(
            String::from_utf8(bytes_of(&v)).expect("utf-8"),
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"resourceVersion":"42","name":"p"},"spec":@@@}"#
        );
        // A later member that names "metadata" (a pod template) or could spell it with an
        // escape sends the object through the whole-object scan.
        let template =
            r#"{"kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"metadata":{"labels":{"a":"b"}}}}}"#;
        let v = served(template, 4).expect("served");
        assert_eq!(v["metadata"], json!({"name": "d", "resourceVersion": "4"}));
        assert_eq!(v["spec"]["template"]["metadata"], json!({"labels": {"a": "b"}}));
        let html = r#"{"kind":"ConfigMap","metadata":{"name":"h"},"data":{"x":"\u003cb\u003e"}}"#;
        assert_eq!(served(html, 4).expect("served")["data"]["x"], "<b>");
        assert!(served(r#"{"metadata":{"name":"a"},"metadat\u0061":{"name":"b"}}"#, 1).is_none());
        assert!(served(r#"{"metadata":{"name":"a"},"spec":{},"metadata":{"name":"b"}}"#, 1).is_none());
        assert!(served(r#"{"metadata":{"name":"a"},"spec":{"metadata":1},@}"#, 1).is_none());
    }

    #[test]
    fn labels_name_and_namespace_are_read_on_demand() {
        let full =
            raw(r#"{"metadata":{"name":"a","namespace":"ns","labels":{"app":"web","t\u0069er":"x"}}}"#).expect("raw");
        assert_eq!(full.labels(), Some(Labels::from([("app".into(), "web".into()), ("tier".into(), "x".into())])));
        assert_eq!((full.name().as_deref(), full.namespace().as_deref()), (Some("a"), Some("ns")));
        // Absent reads as empty, as the decoding path's selectors see it; so do null labels.
        let bare = raw(r#"{"metadata":{"uid":"u"}}"#).expect("raw");
        assert_eq!(bare.labels(), Some(Labels::new()));
        assert_eq!((bare.name().as_deref(), bare.namespace().as_deref()), (Some(""), Some("")));
        assert_eq!(raw(r#"{"metadata":{"labels":null}}"#).expect("raw").labels(), Some(Labels::new()));
        // Values the fast path cannot compare send the object to the decoding path.
        let odd = raw(r#"{"metadata":{"name":7,"labels":{"a":1}}}"#).expect("raw");
        assert_eq!((odd.name(), odd.labels()), (None, None));
    }
}
