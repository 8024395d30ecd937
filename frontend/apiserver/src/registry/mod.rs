//! The registry: what a kind is, and how objects of any kind are created, read, changed and
//! deleted.
//!
//! * [`kind`]: [`ResourceKind`], one row of a table of kinds: discovery data (names, verbs,
//!   short names, categories, subresources), its storage key prefix, its selectable fields, its
//!   generation rule, its version converter and its [`Strategy`]; [`served_kinds`]:
//!   [`ServedKinds`], the table a server is given (the built-in API's is one), with each
//!   kind's printer, schema pruning, the OpenAPI documents and the resources answered without
//!   storage.
//! * [`strategy`]: the per-kind hooks (`prepare_for_create`, `validate`, ...), a trait with
//!   default methods.
//! * [`object`]: what every kind shares: decoding, `metadata` rules (uid, creationTimestamp,
//!   generateName, names), strict-field checks, and the storage form; [`raw_object`]: stored
//!   objects served as stored bytes (LIST's fast path), found in them by [`json_scan`].
//! * [`store`]: `Store`, kube's generic registry: get, list (selectors, pages), create, update
//!   (compare-and-swap with retries), `/status`, over the `storage::Storage` seam; [`deletion`]:
//!   delete and deletecollection with finalizers, grace periods and the namespace lifecycle;
//!   [`scale`]: the `/scale` subresource; [`binding`]: `/binding` and creates that bind (the
//!   generic part; a row's [`strategy::Binder`] binds).
//! * [`admission`]: validation another server adds to a kind's writes (the apiextensions
//!   server's checks of CustomResourceDefinitions, which the built-in API stores).
//! * [`managed`]: managedFields on every write (the manager of a request, the kind's
//!   server-side-apply schema); [`apply`]: server-side apply PATCHes, which may create.
//! * [`table`]: server-side printing (Table and PartialObjectMetadata forms) with a kind's
//!   [`table::Printer`].
//! * `testing` (tests only): a two-kind `ServedKinds` for this crate's own tests; `store_tests`:
//!   the store, patches, deletion and the watch cache on `MemStorage`, in process.
//! * [`selectors`], [`validation`]: label/field selectors and name/key rules; [`strict_json`]:
//!   JSON parsing that reports duplicate fields for strict decoding.
//!
//! Layering: `routes` → `registry` → `storage`. The registry never sees HTTP.

pub mod admission;
pub mod apply;
pub mod binding;
pub mod deletion;
pub mod json_scan;
pub mod kind;
pub mod managed;
pub mod object;
pub mod patch;
pub mod raw_object;
pub mod scale;
pub mod selectors;
pub mod served_kinds;
pub mod store;
#[cfg(test)]
mod store_tests;
pub mod strategy;
pub mod strict_json;
pub mod table;
#[cfg(test)]
pub(crate) mod testing;
pub mod validation;

pub use kind::{NameRule, ResourceKind, ScalePaths, Subresources, Verbs, VersionConverter, CRUD, META_SELECTORS};
pub use served_kinds::{ApiGroup, ServedKinds};
pub use store::Store;
pub use strategy::Strategy;
