//! A small [`ServedKinds`] for the generic server's own tests: a namespaced `configmaps`-like
//! kind and a cluster-scoped `namespaces` kind with the default strategy, the default printer,
//! no schemas and empty OpenAPI documents. The real kinds are the built-in API's.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use bytes::Bytes;
use serde_json::{Map, Value};

use super::kind::{NameRule, ResourceKind};
use super::served_kinds::{ApiGroup, ServedKinds};
use super::served_kinds::{Document, Documents};
use super::table::printer::{Printer, DEFAULT};
use crate::served::VirtualResource;

/// A namespaced kind with `data`, `binaryData` and `immutable` fields.
pub(crate) static CONFIGMAPS: ResourceKind = ResourceKind::row("", "v1", "configmaps", "ConfigMap", "configmap", true)
    .with_fields(&["data", "binaryData", "immutable"]);

/// Namespaces, named by DNS-1123 labels.
pub(crate) static NAMESPACES: ResourceKind =
    ResourceKind::row("", "v1", "namespaces", "Namespace", "namespace", false).names(NameRule::Label);

static KINDS: [&ResourceKind; 2] = [&CONFIGMAPS, &NAMESPACES];

static DOCUMENTS: LazyLock<Documents> = LazyLock::new(|| Documents {
    v3_index: Document::new(br#"{"paths":{}}"#.to_vec()),
    v3: BTreeMap::new(),
    v2: Document::new(br#"{"swagger":"2.0"}"#.to_vec()),
    v2_protobuf: Bytes::new(),
});

/// The two kinds above, in core/v1.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TestKinds;

impl ServedKinds for TestKinds {
    fn groups(&self) -> &'static [ApiGroup] {
        &[ApiGroup { name: "", versions: &["v1"] }]
    }

    fn kinds(&self) -> &[&'static ResourceKind] {
        &KINDS
    }

    fn namespaces(&self) -> &'static ResourceKind {
        &NAMESPACES
    }

    fn printer(&self, _kind: &ResourceKind) -> &'static Printer {
        &DEFAULT
    }

    fn prune_unknown_fields(&self, _kind: &ResourceKind, _obj: &mut Map<String, Value>) -> Vec<String> {
        Vec::new()
    }

    fn virtual_resources(&self) -> &'static [VirtualResource] {
        &[]
    }

    fn openapi(&self) -> &'static Documents {
        &DOCUMENTS
    }

    fn openapi_if_built(&self) -> Option<&'static Documents> {
        Some(&DOCUMENTS)
    }
}
