//! [`ResourceKind`]: one row of a server's table of kinds, built with `const` modifiers, and
//! the small types its fields use ([`Verbs`], [`NameRule`], [`Subresources`],
//! [`VersionConverter`]). The generic store does the same for every row; a row says where its
//! objects are stored, how they are named and which [`Strategy`] holds its rules.

use super::strategy::{self, Binder, Strategy};
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
    /// DNS-1035 label: starts with a letter (services).
    Dns1035Label,
    /// Any path segment: no `/` or `%`, not `.` or `..` (RBAC, CSRs, flow control: names like
    /// `system:controller:x`).
    PathSegment,
}

/// The subresources a kind serves besides the object itself, as a bitset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subresources(u8);

impl Subresources {
    /// None.
    pub const NONE: Subresources = Subresources(0);
    /// `/status`: reads the object, writes only its `status`.
    pub const STATUS: Subresources = Subresources(1);
    /// `/scale`: an `autoscaling/v1` `Scale` over `spec.replicas`.
    pub const SCALE: Subresources = Subresources(1 << 1);
    /// `/finalize`: replaces the namespace's `spec.finalizers` (the namespaces kind's; the only
    /// way they change).
    pub const FINALIZE: Subresources = Subresources(1 << 2);
    /// `/token`: creates an `authentication.k8s.io/v1` `TokenRequest` for the account (the
    /// service-account server answers it, in front of the kinds; listed here so discovery and
    /// OpenAPI show it as kube's do).
    pub const TOKEN: Subresources = Subresources(1 << 3);

    /// Returns the union of two sets.
    pub const fn with(self, other: Subresources) -> Subresources {
        Subresources(self.0 | other.0)
    }

    /// Returns whether every member of `other` is in the set.
    pub const fn has(self, other: Subresources) -> bool {
        self.0 & other.0 == other.0 && other.0 != 0
    }
}

/// Where a kind's `/scale` subresource reads and writes (kube's `CustomResourceSubresourceScale`):
/// dot-separated paths into the object. Workloads use [`ScalePaths::WORKLOAD`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalePaths {
    /// The desired replicas, which a Scale write sets (`spec.replicas`).
    pub spec_replicas: String,
    /// The observed replicas (`status.replicas`).
    pub status_replicas: String,
    /// The selector: a `LabelSelector` object for workloads, a selector string for custom
    /// resources (`status.selector`); `None` leaves the Scale's selector empty.
    pub label_selector: Option<String>,
}

/// Converts between the version a kind is served in and the version its objects are stored in,
/// for kinds served under several group versions with one storage (events, HPAs, custom
/// resources).
///
/// Both directions may fail: a custom resource's conversion can be done by a webhook, whose
/// failure is the request's error. Both are synchronous; a converter that waits on the network
/// blocks only its own call (the generic store converts inside its update closures).
pub trait VersionConverter: Send + Sync + std::fmt::Debug {
    /// Rewrites a served-version object into the stored form.
    ///
    /// # Errors
    ///
    /// Why the object could not be converted, as the request's answer.
    fn to_stored(&self, obj: &mut strategy::Object) -> Result<(), crate::error::ApiError>;
    /// Rewrites a stored object into the served version.
    ///
    /// # Errors
    ///
    /// As [`VersionConverter::to_stored`].
    fn to_served(&self, obj: &mut strategy::Object) -> Result<(), crate::error::ApiError>;

    /// [`VersionConverter::to_served`] of an object just decoded from the bytes stored at
    /// `revision`: a converter may remember that it served those bytes unchanged.
    ///
    /// # Errors
    ///
    /// As [`VersionConverter::to_served`].
    fn to_served_from_storage(&self, obj: &mut strategy::Object, _revision: i64) -> Result<(), crate::error::ApiError> {
        self.to_served(obj)
    }

    /// [`VersionConverter::to_served_from_storage`] of many objects, each with the revision its
    /// bytes were stored at, converted together: a converter that calls out (a conversion
    /// webhook) sends them in one request, as kube's webhook converter converts a list.
    ///
    /// # Errors
    ///
    /// As [`VersionConverter::to_served`]; the objects are then in no defined state.
    fn to_served_from_storage_all(&self, objs: &mut [(strategy::Object, i64)]) -> Result<(), crate::error::ApiError> {
        objs.iter_mut().try_for_each(|(obj, revision)| self.to_served_from_storage(obj, *revision))
    }

    /// Whether the stored object `namespace`/`name` at `revision` is known to be served
    /// exactly as stored (the converter read it before and changed nothing), so a LIST may hand
    /// out its stored bytes without decoding it. Never, unless a converter keeps such verdicts.
    fn served_as_stored(&self, _namespace: &str, _name: &str, _revision: i64) -> bool {
        false
    }

    /// Converts `obj`, an object of any version this converter's kind is served in, straight
    /// to `api_version`, without defaults (the field manager's view of an object in a
    /// manager's version), when this converter can: a conversion webhook converts between any
    /// two versions in one call. `None` when it cannot; objects then go through the stored
    /// version.
    fn to_version(
        &self,
        _obj: &mut strategy::Object,
        _api_version: &str,
    ) -> Option<Result<(), crate::error::ApiError>> {
        None
    }

    /// Whether writes are prepared (defaulted, validated, their managers recorded) in the
    /// version they were sent in and converted to the stored version after, with the stored
    /// object converted to that version for comparison, as kube handles custom resources,
    /// whose versions each have their own schema and rules. Otherwise a write is converted to
    /// the stored form first and prepared there (built-in kinds, whose strategy is written
    /// for their stored form).
    fn prepares_served(&self) -> bool {
        false
    }
}

/// One served kind: a row of a server's table of kinds. Rows are built with [`ResourceKind::row`] and
/// the `const` modifiers below, so a row names only what differs from the common case.
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
    /// The storage key segment after the prefix (`/registry/<storage_resource>/...`); kinds
    /// served under several group versions share it.
    pub storage_resource: &'static str,
    /// Top-level fields besides `apiVersion`, `kind` and `metadata`.
    pub fields: &'static [&'static str],
    /// Field selectors: (selector name, dot-separated JSON path).
    pub field_selectors: &'static [(&'static str, &'static str)],
    /// Whether DELETE answers with the deleted object (else a Success Status).
    pub return_deleted_object: bool,
    /// An override of the object schema (field numbers, JSON names, types, strategic-merge-patch
    /// tags); `None` uses the generated one (see [`ResourceKind::object_schema`]). Protobuf
    /// bodies are decoded with it and strategic merge patches follow its tags.
    pub schema: Option<&'static protobuf::Message>,
    /// Served subresources.
    pub subresources: Subresources,
    /// The top-level fields whose change bumps `metadata.generation`; empty for kinds without
    /// a generation. Create sets it to 1.
    pub generation: &'static [&'static str],
    /// Where `/scale` reads and writes; `None` is a workload's `spec.replicas`,
    /// `status.replicas` and `spec.selector`.
    pub scale_paths: Option<&'static ScalePaths>,
    /// Group versions (`apps/v1beta1`) kube no longer serves the kind in but whose replicas
    /// path (`spec.replicas`) its scale handler still knows: their managedFields entries
    /// outlive a write to `/scale`, and their owners of the replicas own the Scale's.
    pub scale_versions: &'static [&'static str],
    /// Whether the top-level fields are the schema's business too: `fields` is not consulted
    /// and [`ServedKinds::prune_unknown_fields`](super::ServedKinds::prune_unknown_fields)
    /// decides at every level (custom resources, whose schema may keep any field).
    pub fields_from_schema: bool,
    /// Whether strategic merge patches are accepted (kube refuses them for custom resources,
    /// which have no patch strategy tags).
    pub strategic_merge: bool,
    /// The conversion to the stored version, when the served version is not the stored one.
    pub converter: Option<&'static dyn VersionConverter>,
    /// The kind's rules.
    pub strategy: &'static dyn Strategy,
    /// How `/binding` binds an object to a node; `None` for kinds without `/binding`.
    pub binder: Option<&'static dyn Binder>,
    /// Whether a create of this kind binds an object instead of storing one: the object of the
    /// same group version that serves `/binding`, named by the body (core/v1 `bindings`).
    pub create_binds: bool,
}

/// The field selectors every kind supports.
pub const META_SELECTORS: &[(&str, &str)] =
    &[("metadata.name", "metadata.name"), ("metadata.namespace", "metadata.namespace")];

/// The verbs of most kinds.
pub const CRUD: Verbs = Verbs::GET
    .with(Verbs::LIST)
    .with(Verbs::WATCH)
    .with(Verbs::CREATE)
    .with(Verbs::UPDATE)
    .with(Verbs::PATCH)
    .with(Verbs::DELETE)
    .with(Verbs::DELETECOLLECTION);

impl ResourceKind {
    /// Returns a row with the common case: all verbs, subdomain names, `spec` and `status`,
    /// no generation, storage under the resource name, the default strategy.
    pub const fn row(
        group: &'static str,
        version: &'static str,
        resource: &'static str,
        kind: &'static str,
        singular: &'static str,
        namespaced: bool,
    ) -> ResourceKind {
        ResourceKind {
            group,
            version,
            resource,
            kind,
            singular,
            short_names: &[],
            categories: &[],
            namespaced,
            verbs: CRUD,
            name_rule: NameRule::Subdomain,
            storage_resource: resource,
            fields: &["spec", "status"],
            field_selectors: META_SELECTORS,
            return_deleted_object: false,
            schema: None,
            subresources: Subresources::NONE,
            generation: &[],
            scale_paths: None,
            scale_versions: &[],
            fields_from_schema: false,
            strategic_merge: true,
            converter: None,
            strategy: &strategy::DefaultStrategy,
            binder: None,
            create_binds: false,
        }
    }

    /// Sets the unserved versions whose replicas path `/scale` knows.
    pub const fn scale_versions(self, scale_versions: &'static [&'static str]) -> Self {
        ResourceKind { scale_versions, ..self }
    }

    /// Sets the short names.
    pub const fn short(self, short_names: &'static [&'static str]) -> Self {
        ResourceKind { short_names, ..self }
    }

    /// Sets the categories.
    pub const fn categories(self, categories: &'static [&'static str]) -> Self {
        ResourceKind { categories, ..self }
    }

    /// Sets the verbs.
    pub const fn with_verbs(self, verbs: Verbs) -> Self {
        ResourceKind { verbs, ..self }
    }

    /// Sets the name rule.
    pub const fn names(self, name_rule: NameRule) -> Self {
        ResourceKind { name_rule, ..self }
    }

    /// Sets the storage key segment.
    pub const fn stored_as(self, storage_resource: &'static str) -> Self {
        ResourceKind { storage_resource, ..self }
    }

    /// Sets the top-level fields.
    pub const fn with_fields(self, fields: &'static [&'static str]) -> Self {
        ResourceKind { fields, ..self }
    }

    /// Sets the field selectors (which must include the metadata ones).
    pub const fn selectors(self, field_selectors: &'static [(&'static str, &'static str)]) -> Self {
        ResourceKind { field_selectors, ..self }
    }

    /// Makes DELETE answer with the deleted object.
    pub const fn returns_deleted(self) -> Self {
        ResourceKind { return_deleted_object: true, ..self }
    }

    /// The object schema: the kind's own override, else the generated table of its served
    /// group, version and kind.
    pub fn object_schema(&self) -> Option<&'static protobuf::Message> {
        self.schema.or_else(|| crate::schema::lookup(self.group, self.version, self.kind))
    }

    /// Sets the object schema.
    pub const fn with_schema(self, message: &'static protobuf::Message) -> Self {
        ResourceKind { schema: Some(message), ..self }
    }

    /// Sets the subresources.
    pub const fn sub(self, subresources: Subresources) -> Self {
        ResourceKind { subresources, ..self }
    }

    /// Sets the fields whose change bumps the generation.
    pub const fn generation(self, generation: &'static [&'static str]) -> Self {
        ResourceKind { generation, ..self }
    }

    /// Sets the converter to the stored version.
    pub const fn converted(self, converter: &'static dyn VersionConverter) -> Self {
        ResourceKind { converter: Some(converter), ..self }
    }

    /// Serves `/binding` with `binder`.
    pub const fn bound_by(self, binder: &'static dyn Binder) -> Self {
        ResourceKind { binder: Some(binder), ..self }
    }

    /// Makes a create bind an object of the same group version instead of storing one.
    pub const fn creates_bind(self) -> Self {
        ResourceKind { create_binds: true, ..self }
    }

    /// Sets the strategy.
    pub const fn rules(self, strategy: &'static dyn Strategy) -> Self {
        ResourceKind { strategy, ..self }
    }

    /// Returns `group/version`, or `version` for core.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Returns whether `/status` is served.
    pub fn has_status(&self) -> bool {
        self.subresources.has(Subresources::STATUS)
    }

    /// Returns whether `/scale` is served.
    pub fn has_scale(&self) -> bool {
        self.subresources.has(Subresources::SCALE)
    }

    /// Returns whether `/finalize` is served.
    pub fn has_finalize(&self) -> bool {
        self.subresources.has(Subresources::FINALIZE)
    }

    /// Returns whether `/token` is served.
    pub fn has_token(&self) -> bool {
        self.subresources.has(Subresources::TOKEN)
    }

    /// Returns whether `other` is the same resource (group, version and resource).
    pub fn is(&self, other: &ResourceKind) -> bool {
        self.group == other.group && self.version == other.version && self.resource == other.resource
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
