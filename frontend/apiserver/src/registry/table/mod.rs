//! Server-side printing: objects as a `meta.k8s.io` `Table` (what `kubectl get` asks for), and
//! objects as `PartialObjectMetadata` (what metadata informers ask for).
//!
//! * [`printer`]: a kind's columns and cell function ([`Printer`]), and kube's default Name +
//!   Created At for kinds that have none (each kind's printer comes from its `ServedKinds`);
//! * [`age`]: human durations for `Age` cells.
//!
//! A Table carries one row per object; each row's `object` is, per `includeObject`, the
//! object's metadata as `PartialObjectMetadata` (the default), the whole object, or nothing.
//! Ages are computed at request time, so two reads of the same object may differ.

pub mod age;
pub mod printer;

use serde_json::{json, Map, Value};

pub use printer::{Column, Printer};

use crate::error::ApiError;

/// What each row carries besides its cells (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    /// Nothing.
    None,
    /// The object's metadata as `PartialObjectMetadata` (kube's default for built-in kinds).
    #[default]
    Metadata,
    /// The whole object.
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` query parameter ("" = default).
    ///
    /// # Errors
    ///
    /// Returns `BadRequest` for other values, as kube does.
    pub fn parse(value: Option<&str>) -> Result<Self, ApiError> {
        match value.unwrap_or("") {
            "" | "Metadata" => Ok(IncludeObject::Metadata),
            "None" => Ok(IncludeObject::None),
            "Object" => Ok(IncludeObject::Object),
            other => Err(ApiError::BadRequest(format!(
                "includeObject: Unsupported value: \"{other}\": supported values: \"Metadata\", \"None\", \"Object\""
            ))),
        }
    }
}

/// How a Table response is shaped.
#[derive(Debug, Clone, Copy)]
pub struct TableOptions {
    /// `meta.k8s.io/v1` or `meta.k8s.io/v1beta1`: the version the client asked for.
    pub api_version: &'static str,
    /// What rows carry.
    pub include_object: IncludeObject,
    /// Leaves out `columnDefinitions` (every watch event after the first).
    pub no_headers: bool,
}

/// Returns `obj` as `PartialObjectMetadata` of `api_version` (`meta.k8s.io/v1`).
pub fn partial_metadata(obj: &Value, api_version: &str) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": api_version,
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| Value::Object(Map::new())),
    })
}

/// Returns a list as `PartialObjectMetadataList`, keeping the list's metadata.
pub fn partial_metadata_list(list: &Value, api_version: &str) -> Value {
    let items: Vec<Value> =
        list["items"].as_array().into_iter().flatten().map(|o| partial_metadata(o, api_version)).collect();
    json!({
        "kind": "PartialObjectMetadataList",
        "apiVersion": api_version,
        "metadata": list.get("metadata").cloned().unwrap_or_else(|| Value::Object(Map::new())),
        "items": items,
    })
}

fn column_json(c: &Column) -> Value {
    json!({
        "name": c.name,
        "type": c.type_,
        "format": c.format,
        "description": c.description,
        "priority": c.priority,
    })
}

/// Returns one Table row for `obj`: its cells at time `now`, and per `includeObject` its
/// metadata, itself or nothing. Rows stand alone, so a list's Table can be written row by row.
pub fn row(printer: &Printer, obj: &Value, include_object: IncludeObject, now: i64) -> Value {
    let mut row = Map::new();
    row.insert("cells".into(), Value::Array((printer.cells)(obj, now)));
    match include_object {
        IncludeObject::None => {}
        IncludeObject::Metadata => {
            row.insert("object".into(), partial_metadata(obj, "meta.k8s.io/v1"));
        }
        IncludeObject::Object => {
            row.insert("object".into(), obj.clone());
        }
    }
    Value::Object(row)
}

/// Returns the `columnDefinitions` of `printer`'s Table (`null` with `no_headers`).
pub fn column_definitions(printer: &Printer, opts: TableOptions) -> Value {
    if opts.no_headers {
        return Value::Null;
    }
    Value::Array(printer.columns.iter().map(column_json).collect())
}

/// Builds a Table of `objects` printed by `p`, with `metadata` as the Table's list metadata
/// (`resourceVersion`, `continue`, `remainingItemCount`), at time `now`.
pub fn build(p: &Printer, objects: &[&Value], metadata: &Value, opts: TableOptions, now: i64) -> Value {
    let rows: Vec<Value> = objects.iter().map(|o| row(p, o, opts.include_object, now)).collect();
    json!({
        "kind": "Table",
        "apiVersion": opts.api_version,
        "metadata": metadata,
        "columnDefinitions": column_definitions(p, opts),
        "rows": rows,
    })
}

/// Builds the Table of a list answer (`{"metadata": ..., "items": [...]}`).
pub fn from_list(p: &Printer, list: &Value, opts: TableOptions, now: i64) -> Value {
    let items: Vec<&Value> = list["items"].as_array().into_iter().flatten().collect();
    let mut meta = Map::new();
    for key in ["resourceVersion", "continue", "remainingItemCount"] {
        if let Some(v) = list["metadata"].get(key) {
            meta.insert(key.into(), v.clone());
        }
    }
    build(p, &items, &Value::Object(meta), opts, now)
}

/// Builds the one-row Table of a single object.
pub fn from_object(p: &Printer, obj: &Value, opts: TableOptions, now: i64) -> Value {
    let rv = obj["metadata"]["resourceVersion"].clone();
    let meta = if rv.is_null() { json!({}) } else { json!({"resourceVersion": rv}) };
    build(p, &[obj], &meta, opts, now)
}
