//! [`Printer`]: a kind's Table columns and the function computing one object's cells, and
//! [`DEFAULT`], kube's default table convertor (Name and Created At) for kinds that have none.

use serde_json::Value;

/// One column of a Table (`metav1.TableColumnDefinition`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    /// Header text, as kube spells it (kubectl upper-cases it).
    pub name: &'static str,
    /// OpenAPI type: `string`, `integer`, `boolean`, `date`, `number`.
    pub type_: &'static str,
    /// OpenAPI format: `name` for the name column, else empty.
    pub format: &'static str,
    /// 0 = always shown; 1 = shown with `-o wide`.
    pub priority: u8,
    /// What the column holds.
    pub description: &'static str,
}

/// A column shown always.
pub const fn col(name: &'static str, type_: &'static str, description: &'static str) -> Column {
    Column { name, type_, format: "", priority: 0, description }
}

/// A column shown with `-o wide`.
pub const fn wide(name: &'static str, type_: &'static str, description: &'static str) -> Column {
    Column { name, type_, format: "", priority: 1, description }
}

/// The name column every printer starts with.
pub const NAME: Column = Column {
    name: "Name",
    type_: "string",
    format: "name",
    priority: 0,
    description: "The object's name, unique within its namespace (or cluster-wide for cluster-scoped kinds).",
};
/// The age column.
pub const AGE: Column = col("Age", "string", "How long ago the object was created.");
/// Computes the cells of one object at time `now` (seconds since the epoch), one per column.
/// A closure rather than a `fn`, so printers built at run time (a CustomResourceDefinition's
/// columns) carry their column paths.
pub type Cells = dyn Fn(&Value, i64) -> Vec<Value> + Send + Sync;

/// A kind's printer: its columns and the function computing one row's cells at time `now`
/// (seconds since the epoch).
pub struct Printer {
    /// The columns, in print order.
    pub columns: &'static [Column],
    /// Computes the cells of one object, one per column.
    pub cells: &'static Cells,
}

impl std::fmt::Debug for Printer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Printer").field("columns", &self.columns).finish_non_exhaustive()
    }
}

/// The printer of kinds that have none of their own (kube's default table convertor).
pub static DEFAULT: Printer = Printer {
    columns: &[NAME, col("Created At", "date", "When the object was created.")],
    cells: &|o, _| vec![o["metadata"]["name"].as_str().unwrap_or("").into(), created_at(o).into()],
};

/// `metadata.creationTimestamp` re-formatted in UTC, as the default convertor prints it.
pub fn created_at(obj: &Value) -> String {
    obj["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(super::age::parse_rfc3339)
        .map_or_else(|| "0001-01-01T00:00:00Z".into(), crate::clock::format_rfc3339)
}
