//! Objects as typed values (kube's structured-merge-diff `typed` and `schema`): what a kind's
//! fields are ([`schema::TypeSchema`]) and the walks server-side apply makes over objects with
//! it ([`walk`]: field sets, comparisons, merges, removals).
//!
//! Values are plain `serde_json::Value`s; the schema is passed alongside. Nothing here knows
//! of managers or of the server: `crate::managed_fields` drives these walks.

pub mod schema;
pub mod walk;

pub use schema::{ListKind, Node, TypeId, TypeSchema};
pub use walk::{compare, merge, remove_items, to_set, with_named_fields, Comparison, TypedError};
