//! The registry: what each kind is, and how objects are created, read, changed and deleted.
//!
//! * [`kinds`]: the table of served kinds. Each [`ResourceKind`] row carries discovery data
//!   (names, verbs, short names), its storage key prefix, its selectable fields, its protobuf
//!   schema and its [`Strategy`]; adding a kind is adding a row (plus a strategy when it has
//!   rules of its own).
//! * [`strategy`]: the per-kind hooks (`prepare_for_create`, `validate`, ...), a trait with
//!   default methods.
//! * [`object`]: what every kind shares: decoding, `metadata` rules (uid, creationTimestamp,
//!   generateName, names), strict-field checks, and the storage form.
//! * [`store`]: `Store`, kube's generic registry: get, list (selectors, pages), create, update
//!   (compare-and-swap with retries), delete, deletecollection, over `storage::Etcd3Storage`.
//! * [`watch`]: watch streams with selector transitions and watch-list initial events.
//! * [`table`]: server-side printing (Table and PartialObjectMetadata forms).
//! * [`selectors`], [`validation`]: label/field selectors and name/key rules.
//!
//! Layering: `routes` → `registry` → `storage`. The registry never sees HTTP.

pub mod kinds;
pub mod object;
pub mod selectors;
pub mod store;
pub mod strategy;
pub mod table;
pub mod validation;
pub mod watch;

pub use store::Store;
pub use strategy::Strategy;

use crate::protobuf;

/// The verbs a kind supports, as a bitset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verbs(u16);

impl Verbs {
    /// `get`.
    pub const GET: Verbs = Verbs(1);
    /// `list`.
    pub const LIST: Verbs = Verbs(1 << 1);
    /// `watch`.
    pub const WATCH: Verbs = Verbs(1 << 2);
    /// `create`.
    pub const CREATE: Verbs = Verbs(1 << 3);
    /// `update`.
    pub const UPDATE: Verbs = Verbs(1 << 4);
    /// `patch`.
    pub const PATCH: Verbs = Verbs(1 << 5);
    /// `delete`.
    pub const DELETE: Verbs = Verbs(1 << 6);
    /// `deletecollection`.
    pub const DELETECOLLECTION: Verbs = Verbs(1 << 7);

    /// Returns the union of two sets.
    pub const fn with(self, other: Verbs) -> Verbs {
        Verbs(self.0 | other.0)
    }

    /// Returns whether `verb` (a Kubernetes verb name) is in the set.
    pub fn allows(self, verb: &str) -> bool {
        Self::NAMES.iter().any(|(v, name)| *name == verb && self.0 & v.0 != 0)
    }

    /// Returns the verb names in the set, sorted as discovery lists them.
    pub fn names(self) -> Vec<&'static str> {
        Self::NAMES.iter().filter(|(v, _)| self.0 & v.0 != 0).map(|(_, n)| *n).collect()
    }

    const NAMES: [(Verbs, &'static str); 8] = [
        (Verbs::CREATE, "create"),
        (Verbs::DELETE, "delete"),
        (Verbs::DELETECOLLECTION, "deletecollection"),
        (Verbs::GET, "get"),
        (Verbs::LIST, "list"),
        (Verbs::PATCH, "patch"),
        (Verbs::UPDATE, "update"),
        (Verbs::WATCH, "watch"),
    ];
}

/// Which name rule a kind's objects follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// DNS-1123 subdomain (most kinds).
    Subdomain,
    /// DNS-1123 label (namespaces).
    Label,
}

/// One served kind: a row of the registry table.
#[derive(Debug)]
pub struct ResourceKind {
    /// API group, "" for core.
    pub group: &'static str,
    /// API version.
    pub version: &'static str,
    /// Plural resource name (URL segment).
    pub resource: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Singular name.
    pub singular: &'static str,
    /// Short names for kubectl.
    pub short_names: &'static [&'static str],
    /// Categories (`all`, ...).
    pub categories: &'static [&'static str],
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Supported verbs.
    pub verbs: Verbs,
    /// The name rule.
    pub name_rule: NameRule,
    /// The storage key segment after the prefix (`/registry/<storage_resource>/...`).
    pub storage_resource: &'static str,
    /// Top-level fields besides `apiVersion`, `kind` and `metadata`.
    pub fields: &'static [&'static str],
    /// Field selectors: (selector name, dot-separated JSON path).
    pub field_selectors: &'static [(&'static str, &'static str)],
    /// Whether DELETE answers with the deleted object (else a Success Status).
    pub return_deleted_object: bool,
    /// The protobuf schema of the object.
    pub protobuf: &'static protobuf::Message,
    /// The kind's rules.
    pub strategy: &'static dyn Strategy,
}

impl ResourceKind {
    /// Returns `group/version`, or `version` for core.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Returns the storage key of one object.
    pub fn key(&self, prefix: &str, namespace: &str, name: &str) -> String {
        if self.namespaced {
            format!("{prefix}/{}/{namespace}/{name}", self.storage_resource)
        } else {
            format!("{prefix}/{}/{name}", self.storage_resource)
        }
    }

    /// Returns the key prefix of a collection: one namespace, or all of the kind.
    pub fn collection_prefix(&self, prefix: &str, namespace: &str) -> String {
        if self.namespaced && !namespace.is_empty() {
            format!("{prefix}/{}/{namespace}/", self.storage_resource)
        } else {
            format!("{prefix}/{}/", self.storage_resource)
        }
    }
}

/// Returns the kind served at `group/version/resource`.
pub fn find(group: &str, version: &str, resource: &str) -> Option<&'static ResourceKind> {
    kinds::ALL.iter().copied().find(|k| k.group == group && k.version == version && k.resource == resource)
}
