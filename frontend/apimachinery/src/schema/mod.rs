//! The object schema of every built-in kind: field numbers and types (for protobuf bodies),
//! JSON names, and the strategic-merge-patch tags (`patchStrategy`, `patchMergeKey`) of the
//! upstream Go types, as [`crate::protobuf::Message`] tables.
//!
//! [`generated`] is written by `tools/schema_gen.py` from the k8s-pb (prost types generated from
//! kube's `generated.proto`, whose doc comments keep the Go `+patchStrategy` markers) and
//! k8s-openapi (JSON names) crate sources, pinned to the served Kubernetes version (1.33); the
//! script's doc says how to run it. Fields newer than 1.33 in k8s-pb are left out, so a body
//! carrying them decodes as 1.33 would (unknown fields skipped).

#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod generated;

pub use generated::lookup;
