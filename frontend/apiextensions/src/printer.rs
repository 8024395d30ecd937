//! Table printing of custom resources from a version's `additionalPrinterColumns` (kube's
//! custom resource table convertor): Name, then each column's JSONPath value typed as the
//! column says (`date` columns as ages); a version without columns prints Name and Age.

use serde_json::Value;

use ballast_apiserver::registry::table::age::{age, parse_rfc3339};
use ballast_apiserver::registry::table::printer::{Column, NAME};

use crate::definition::PrinterColumn;
use crate::jsonpath::Path;

/// The column a version without printer columns gets (kube's default).
pub fn default_columns() -> Vec<PrinterColumn> {
    vec![PrinterColumn {
        name: "Age".into(),
        type_: "date".into(),
        format: String::new(),
        description: "CreationTimestamp is a timestamp representing the server time when this object was created. \
            It is not guaranteed to be set in happens-before order across separate operations. Clients may not set \
            this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. \
            Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
            .into(),
        priority: 0,
        json_path: ".metadata.creationTimestamp".into(),
    }]
}

/// Returns the header of each column (with the Name column first).
pub fn columns(cols: &[PrinterColumn]) -> Vec<Column> {
    let leak = |s: &str| -> &'static str { Box::leak(s.to_string().into_boxed_str()) };
    let mut out = vec![NAME];
    for c in cols {
        let description = if c.description.is_empty() {
            format!("Custom resource definition column (in JSONPath format): {}", c.json_path)
        } else {
            c.description.clone()
        };
        out.push(Column {
            name: leak(&c.name),
            type_: leak(&c.type_),
            format: leak(&c.format),
            priority: u8::try_from(c.priority.clamp(0, 255)).unwrap_or(u8::MAX),
            description: leak(&description),
        });
    }
    out
}

/// Returns a cell computer for `cols`: their paths parsed once.
pub fn cells(cols: &[PrinterColumn]) -> impl Fn(&Value, i64) -> Vec<Value> + Send + Sync + 'static {
    let parsed: Vec<(Option<Path>, String)> =
        cols.iter().map(|c| (Path::parse(&c.json_path).ok(), c.type_.clone())).collect();
    move |obj: &Value, now: i64| {
        let mut row = vec![obj["metadata"]["name"].clone()];
        for (path, type_) in &parsed {
            let found = path.as_ref().and_then(|p| p.find(obj).into_iter().next());
            row.push(found.map_or(Value::Null, |v| cell(type_, v, now)));
        }
        row
    }
}

fn cell(type_: &str, v: &Value, now: i64) -> Value {
    match type_ {
        "integer" => v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)).map_or(Value::Null, Value::from),
        "number" => v.as_f64().map_or(Value::Null, Value::from),
        "boolean" => v.as_bool().map_or(Value::Null, Value::from),
        "date" => match v.as_str() {
            Some(s) if parse_rfc3339(s).is_some() => age(Some(s), now).into(),
            Some(_) => "<invalid>".into(),
            None => Value::Null,
        },
        // String columns print whatever is there, as kube's JSONPath printer does.
        _ => match v {
            Value::String(s) => s.clone().into(),
            other => other.to_string().into(),
        },
    }
}
