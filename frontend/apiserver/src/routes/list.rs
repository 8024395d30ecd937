//! LIST responses written as storage is read: the body is a stream that asks the registry's
//! [`ListScan`] for one internal page at a time and encodes it, so a LIST of any size holds one
//! page of objects and one page of output, never the whole answer.
//!
//! Forms: the `<Kind>List` as JSON or YAML, `PartialObjectMetadataList`, and `Table` (rows
//! computed per page). A YAML list is written item by item too: each item is its own YAML
//! document turned into a block sequence entry (`- ` before its first line, two spaces before
//! the others), which is what a whole-list emitter writes.
//!
//! Keys are written in the order `serde_json` writes a whole list (sorted, since objects are
//! `BTreeMap`s): `apiVersion`, `items`, `kind`, `metadata`. That puts `metadata` last, which
//! is also what streaming needs: `continue` and `remainingItemCount` are only known once the
//! walk reached the limit. A Table puts its list `metadata` after `rows` for the same reason.
//!
//! Errors: everything [`Store::list_scan`] refuses (bad options, compacted snapshot, storage
//! down) is refused before the headers, as a Status. A storage failure after the headers ends
//! the body without the closing brackets, as kube abandons a response it cannot finish: the
//! client sees a truncated body, never a short list that looks complete.

// #[PerformanceCriticalPath]

use std::convert::Infallible;

use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderValue, StatusCode};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use serde_json::Value;

use super::negotiation::Output;
use crate::body::Response;
use crate::error::ApiError;
use crate::registry::store::{ListItem, ListOptions, ListScan, ScanForm, Store};
use crate::registry::table::{self, IncludeObject, Printer, TableOptions};
use crate::registry::ResourceKind;

/// How each object of the list becomes bytes.
#[derive(Debug, Clone, Copy)]
enum ItemForm {
    /// The object as served: the stored bytes with their resourceVersion where possible
    /// ([`ScanForm::Stored`]), else the decoded and converted object.
    Object,
    /// `PartialObjectMetadata` of this API version.
    Metadata(&'static str),
    /// One Table row.
    Row { printer: &'static Printer, include_object: IncludeObject, now: i64 },
    /// The object as served, as one entry of a YAML block sequence.
    Yaml,
}

impl ItemForm {
    fn write(self, out: &mut BytesMut, item: &ListItem) {
        let obj = match item {
            ListItem::Stored(raw) => return raw.write(out),
            ListItem::Object(obj) => obj,
        };
        if let ItemForm::Yaml = self {
            return put_yaml_entry(out, obj);
        }
        let mut writer = out.writer();
        // Serialising a `Value` into memory cannot fail (its keys are strings).
        let _ = match self {
            ItemForm::Object => serde_json::to_writer(&mut writer, obj),
            ItemForm::Metadata(v) => serde_json::to_writer(&mut writer, &table::partial_metadata(obj, v)),
            ItemForm::Row { printer, include_object, now } => {
                serde_json::to_writer(&mut writer, &table::row(printer, obj, include_object, now))
            }
            ItemForm::Yaml => Ok(()),
        };
    }
}

/// The state of one LIST body between polls.
#[derive(Debug)]
struct ListBody {
    scan: ListScan<'static>,
    form: ItemForm,
    /// Whether an item was written (the next one needs a comma).
    wrote_item: bool,
    /// The bytes before the first item, until the first chunk carries them.
    head: Option<Bytes>,
    /// The bytes after the last item, up to `"metadata":`.
    tail: Bytes,
    finished: bool,
    /// The last page-sized chunks handed to the connection, kept to be written again once the
    /// connection has sent them (see [`ListBody::buffer`]).
    spent: Vec<Bytes>,
}

/// How many sent chunks a LIST keeps for reuse: the connection holds on to the chunk it is
/// sending while the next one is written, so two buffers take turns.
const SPENT_CHUNKS: usize = 2;

impl ListBody {
    /// Returns an empty buffer: one of the sent chunks when the connection is done with it,
    /// else a new one. A page is a megabyte or more; a fresh buffer of that size is memory the
    /// allocator just returned to the kernel, and writing it costs a page fault per 4 KiB
    /// (measured: a tenth or more of a LIST's CPU time).
    fn buffer(&mut self) -> BytesMut {
        let sent = self.spent.iter().position(Bytes::is_unique).map(|i| self.spent.remove(i));
        match sent.map(Bytes::try_into_mut) {
            Some(Ok(mut buffer)) => {
                buffer.clear();
                buffer
            }
            _ => BytesMut::new(),
        }
    }

    /// Returns `out` as the next chunk, keeping a handle on it for [`ListBody::buffer`].
    fn chunk(&mut self, out: BytesMut) -> Bytes {
        let chunk = out.freeze();
        if self.spent.len() == SPENT_CHUNKS {
            self.spent.remove(0);
        }
        self.spent.push(chunk.clone());
        chunk
    }

    /// Returns the next chunk: the head and the first page, a page of items, or the tail.
    async fn next_chunk(&mut self) -> Option<Bytes> {
        loop {
            if self.finished {
                return None;
            }
            let mut out = self.buffer();
            if let Some(head) = self.head.take() {
                out.extend_from_slice(&head);
            }
            match self.scan.next_batch().await {
                Ok(Some(batch)) => {
                    // One allocation per page for stored bytes, instead of doubling a page's
                    // worth of buffer from empty (each doubling copies what it has).
                    let stored: usize = batch
                        .iter()
                        .map(|item| match item {
                            ListItem::Stored(raw) => raw.encoded_len() + 1,
                            ListItem::Object(_) => 0,
                        })
                        .sum();
                    out.reserve(stored);
                    for obj in &batch {
                        match (self.form, self.wrote_item) {
                            (ItemForm::Yaml, false) => out.extend_from_slice(b"items:\n"),
                            (ItemForm::Yaml, true) => {}
                            (_, true) => out.put_u8(b','),
                            (_, false) => {}
                        }
                        self.wrote_item = true;
                        self.form.write(&mut out, obj);
                    }
                }
                Ok(None) if matches!(self.form, ItemForm::Yaml) => {
                    if !self.wrote_item {
                        out.extend_from_slice(b"items: []\n");
                    }
                    out.extend_from_slice(&self.tail);
                    out.extend_from_slice(b"metadata:\n");
                    let metadata = serde_yaml_ng::to_string(&self.scan.metadata()).unwrap_or_default();
                    put_indented(&mut out, &metadata, "  ", "  ");
                    self.finished = true;
                }
                Ok(None) => {
                    out.extend_from_slice(&self.tail);
                    out.extend_from_slice(b"\"metadata\":");
                    let _ = serde_json::to_writer((&mut out).writer(), &self.scan.metadata());
                    out.put_u8(b'}');
                    self.finished = true;
                }
                Err(e) => {
                    tracing::warn!(error = %e, revision = self.scan.revision(), "LIST failed after its headers; ending the body");
                    self.finished = true;
                    return None;
                }
            }
            if !out.is_empty() {
                return Some(self.chunk(out));
            }
        }
    }
}

/// Appends `obj` as one entry of a YAML block sequence.
fn put_yaml_entry(out: &mut BytesMut, obj: &Value) {
    // Serialising a `Value` cannot fail (its keys are strings).
    let text = serde_yaml_ng::to_string(obj).unwrap_or_default();
    put_indented(out, &text, "- ", "  ");
}

/// Appends `text` line by line, the first line after `first`, the other non-empty lines
/// after `rest`. Empty lines stay empty: inside a block scalar they are content whatever
/// their indentation, so they need none.
fn put_indented(out: &mut BytesMut, text: &str, first: &str, rest: &str) {
    for (i, line) in text.lines().enumerate() {
        if i == 0 {
            out.extend_from_slice(first.as_bytes());
        } else if !line.is_empty() {
            out.extend_from_slice(rest.as_bytes());
        }
        out.extend_from_slice(line.as_bytes());
        out.put_u8(b'\n');
    }
}

/// Appends `"name":value,` to `out`.
fn put_field(out: &mut BytesMut, name: &str, value: &Value) {
    let _ = serde_json::to_writer(out.writer(), name);
    out.put_u8(b':');
    let _ = serde_json::to_writer(out.writer(), value);
    out.put_u8(b',');
}

/// The fixed parts of one LIST body: the bytes before the first item (top-level fields that
/// sort before the item array, then the array's opening), and the fields written between the
/// array's close and `metadata`.
fn frame(
    kind: &ResourceKind,
    printer: &'static Printer,
    output: Output,
    include_object: IncludeObject,
) -> (Bytes, Bytes, ItemForm) {
    let mut head = BytesMut::from(&b"{"[..]);
    let mut tail = BytesMut::from(&b"]"[..]);
    let (form, array) = match output {
        Output::Yaml => {
            // `apiVersion`, then `items` as the first item is written (or `items: []`), then
            // the tail up to `metadata`.
            let head = format!("apiVersion: {}\n", yaml_scalar(&kind.api_version()));
            let tail = format!("kind: {}\n", yaml_scalar(&format!("{}List", kind.kind)));
            return (Bytes::from(head), Bytes::from(tail), ItemForm::Yaml);
        }
        Output::Json => {
            put_field(&mut head, "apiVersion", &Value::from(kind.api_version()));
            tail.put_u8(b',');
            put_field(&mut tail, "kind", &Value::from(format!("{}List", kind.kind)));
            (ItemForm::Object, "items")
        }
        Output::Metadata(v) => {
            put_field(&mut head, "apiVersion", &Value::from(v));
            tail.put_u8(b',');
            put_field(&mut tail, "kind", &Value::from("PartialObjectMetadataList"));
            (ItemForm::Metadata(v), "items")
        }
        Output::Table(v) => {
            let opts = TableOptions { api_version: v, include_object, no_headers: false };
            put_field(&mut head, "apiVersion", &Value::from(v));
            put_field(&mut head, "columnDefinitions", &table::column_definitions(printer, opts));
            put_field(&mut head, "kind", &Value::from("Table"));
            tail.put_u8(b',');
            (ItemForm::Row { printer, include_object, now: crate::clock::unix_now() }, "rows")
        }
    };
    let _ = serde_json::to_writer((&mut head).writer(), array);
    head.extend_from_slice(b":[");
    (head.freeze(), tail.freeze(), form)
}

/// Returns `value` as a YAML scalar (quoted only where YAML needs it).
fn yaml_scalar(value: &str) -> String {
    serde_yaml_ng::to_string(value).unwrap_or_default().trim_end().to_string()
}

/// Serves a LIST as a streamed body (JSON, YAML, `PartialObjectMetadataList` or `Table`).
///
/// # Errors
///
/// Returns the refusals of [`Store::list_scan`], before any byte is written.
pub async fn serve(
    store: &Store,
    kind: &'static ResourceKind,
    namespace: &str,
    opts: &ListOptions,
    output: Output,
    include_object: IncludeObject,
) -> Result<Response, ApiError> {
    let (head, tail, form) = frame(kind, store.kinds().printer(kind), output, include_object);
    // Only the plain list can write objects as stored; the other forms read into them.
    let scan_form = if matches!(form, ItemForm::Object) { ScanForm::Stored } else { ScanForm::Objects };
    let scan = store.list_scan(kind, namespace, opts, scan_form).await?;
    let state = ListBody { scan, form, wrote_item: false, head: Some(head), tail, finished: false, spent: Vec::new() };
    let stream = futures::stream::unfold(state, |mut state| async move {
        let chunk = state.next_chunk().await?;
        Some((Ok::<_, Infallible>(Frame::data(chunk)), state))
    });
    let mut resp = http::Response::new(StreamBody::new(stream).boxed_unsync());
    *resp.status_mut() = StatusCode::OK;
    let headers = resp.headers_mut();
    let media = if matches!(output, Output::Yaml) { "application/yaml" } else { "application/json" };
    headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static(media));
    headers.insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    Ok(resp)
}
