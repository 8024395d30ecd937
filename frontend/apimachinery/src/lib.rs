//! The Kubernetes object model and its codecs (kube's `k8s.io/apimachinery`): the bottom of the
//! frontend's crates, which every other one may use and which uses none of them.
//!
//! # Map
//!
//! * [`schema`]: the object schema of every built-in kind (protobuf field numbers, JSON names,
//!   strategic-merge-patch tags), generated from the upstream types.
//! * [`protobuf`]: the table-driven decoder of kube's protobuf bodies (`k8s\0` + `runtime.Unknown`)
//!   into JSON, over the [`schema`] tables ([`protobuf::Message`] is the table type).
//! * [`patch`]: JSON patch, merge patch and strategic merge patch, pure functions on JSON values.
//! * [`fieldpath`]: field paths and sets of them, and their `FieldsV1` wire form.
//! * [`typed`]: a kind's types as server-side apply sees them ([`typed::TypeSchema`], from the
//!   generated tables or from OpenAPI v3) and the walks over objects (field sets,
//!   comparisons, merges, removals).
//! * [`managed_fields`]: `metadata.managedFields` and server-side apply
//!   ([`managed_fields::FieldManager`]).
//! * [`clock`]: the one place the frontend reads the clocks, and `metav1.Time` formatting.
//! * [`uid`]: object UIDs.
//! * [`yaml_depth`]: the linear nesting check YAML bodies pass before they are parsed.
//!
//! Layering inside: `clock` ← `protobuf` ← `schema` (tables of `protobuf` types) ← `patch`;
//! `fieldpath` ← `typed` (over `schema`) ← `managed_fields`.
//! Nothing here knows of storage, HTTP or the registry; errors are this crate's own
//! ([`patch::PatchError`]) and the server maps them to `metav1.Status`.
//!
//! Reading order: [`protobuf`] (what a schema table is), [`schema`], [`patch`].

pub mod clock;
pub mod fieldpath;
pub mod managed_fields;
pub mod patch;
pub mod protobuf;
pub mod schema;
pub mod typed;
pub mod uid;
pub mod yaml_depth;
