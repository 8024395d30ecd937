//! [`Registry`]: the served custom resources of one frontend, rebuilt from the definitions in
//! storage whenever one changes, and [`CrdKinds`], the generic server's `ServedKinds` over it.
//!
//! The generic server takes kinds as `&'static ResourceKind` rows (the built-in table is
//! static), so a served version's row is built once per distinct definition content
//! ([`Registry::intern`]). What makes a row large, its compiled schema and rules and its
//! converter with the schemas it defaults and prunes by, sits behind a small handle and is
//! dropped once no definition serves the version (deleted, or its spec changed) and the last
//! request holding it is done. The row's names, printer and handle, and the lists of rows and
//! groups, stay for the life of the process: a few hundred bytes to a few KiB per distinct
//! definition content (and set of them) this frontend has seen, not per request or watch
//! event.
//!
//! A request is served by one [`Snapshot`] from start to end ([`Registry::pinned`]): the
//! snapshot holds its rows' parts, so a definition changed while the request is under way
//! (a new schema, a new version) does not fail it; it finishes by the definition it started
//! with, as kube-apiserver lets requests drain from a definition's old storage, and the next
//! request uses the new one.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};

use serde_json::{Map, Value};

use ballast_apimachinery::typed::TypeSchema;
use ballast_apiserver::error::{ApiError, FieldError};
use ballast_apiserver::registry::served_kinds::{ApiGroup, Document, Documents};
use ballast_apiserver::registry::strategy::{Object, Strategy};
use ballast_apiserver::registry::table::Printer;
use ballast_apiserver::registry::{
    ResourceKind, ScalePaths, ServedKinds, Subresources, VersionConverter, META_SELECTORS,
};
use ballast_apiserver::served::VirtualResource;

use crate::conversion::{ServedForm, Verdicts, Webhook};
use crate::definition::{Definition, PrinterColumn, Version};
use crate::webhook_client::Services;
use crate::{printer, rules, schema};

/// The rules of one served version's custom resources: defaulting and schema validation,
/// with the schema's patterns and CEL rules compiled once, when the version is built.
#[derive(Debug)]
pub struct CustomResourceStrategy {
    schema: Option<Value>,
    patterns: schema::Patterns,
    rules: Option<rules::CompiledRules>,
    status: bool,
}

impl CustomResourceStrategy {
    /// The strategy of a version with `schema` (`openAPIV3Schema`), and `/status` when
    /// `status` (a new object's status is then dropped).
    pub fn new(schema: Option<Value>, status: bool) -> CustomResourceStrategy {
        let patterns = schema.as_ref().map(schema::Patterns::of).unwrap_or_default();
        let rules = schema.as_ref().and_then(rules::CompiledRules::compile);
        CustomResourceStrategy { schema, patterns, rules, status }
    }

    fn default_root(&self, obj: &mut Object) {
        if let Some(schema) = &self.schema {
            let mut v = Value::Object(std::mem::take(obj));
            schema::apply_defaults(schema, &mut v);
            if let Value::Object(m) = v {
                *obj = m;
            }
        }
    }

    /// Schema validation, then the schema's CEL rules (with the stored object on update).
    fn check(&self, obj: &Object, old: Option<&Object>) -> Vec<FieldError> {
        let Some(schema) = &self.schema else { return Vec::new() };
        let mut errs = schema::validate_root(schema, &self.patterns, obj);
        if let Some(rules) = &self.rules {
            rules.validate_root(obj, old, &mut errs);
        }
        errs
    }
}

impl Strategy for CustomResourceStrategy {
    fn prepare_for_create(&self, obj: &mut Object) {
        // kube drops a new object's status when `/status` owns it.
        if self.status {
            obj.remove("status");
        }
        self.default_root(obj);
    }

    fn validate(&self, obj: &Object) -> Vec<FieldError> {
        self.check(obj, None)
    }

    fn prepare_for_update(&self, new: &mut Object, _old: &Object) {
        self.default_root(new);
    }

    fn validate_update(&self, new: &Object, old: &Object) -> Vec<FieldError> {
        self.check(new, Some(old))
    }

    fn reset_status_on_create(&self) -> bool {
        false
    }
}

/// What a served version's row checks and converts its objects with: its strategy (the
/// compiled schema and rules) and its converter (with the schemas it defaults and prunes
/// by). Held by the registry while a definition serves the version and by every snapshot that
/// serves it; dropped, with all of that, once no definition serves the version and the last
/// request whose snapshot served it is done; counted while alive ([`Registry::rows_alive`]).
#[derive(Debug)]
struct RowParts {
    strategy: CustomResourceStrategy,
    form: Option<ServedForm>,
    alive: Arc<AtomicUsize>,
}

impl Drop for RowParts {
    fn drop(&mut self) {
        self.alive.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A served version's strategy and converter as its row holds them. The generic server holds
/// rows as `'static`, so this small handle stays for the process (with the few hundred bytes
/// of its parts' allocation), but what it hands out ([`RowParts`]) is only borrowed: it goes
/// once the row is retired (no definition serves the version any more: deleted, or its spec
/// changed) and no request whose snapshot served the row is under way. A watch cache of a
/// retired row ends (its watchers start again on the current row); a request that reaches a
/// row whose parts went (one not pinned to a snapshot) is refused rather than checked or
/// converted by nothing. Reading the parts takes no lock.
#[derive(Debug)]
struct RowHandle {
    parts: Weak<RowParts>,
    retired: AtomicBool,
}

impl RowHandle {
    fn current(&self) -> Option<Arc<RowParts>> {
        self.parts.upgrade()
    }

    fn retire(&self) {
        self.retired.store(true, Ordering::Release);
    }

    fn retired() -> Vec<FieldError> {
        vec![FieldError::forbidden("<nil>", "the resource's definition changed while the request was served; retry")]
    }

    /// Runs `f` on the current served form, keeping the parts alive meanwhile.
    fn with_form<T>(&self, f: impl FnOnce(&ServedForm) -> Result<T, ApiError>) -> Result<T, ApiError> {
        let parts = self.current().ok_or_else(|| {
            ApiError::Internal("the resource's definition changed while the request was served; retry".into())
        })?;
        // Only rows built with a served form are given this handle as their converter.
        let form =
            parts.form.as_ref().ok_or_else(|| ApiError::Internal("a row converts without a served form".into()))?;
        f(form)
    }
}

impl Strategy for RowHandle {
    fn prepare_for_create(&self, obj: &mut Object) {
        if let Some(p) = self.current() {
            p.strategy.prepare_for_create(obj);
        }
    }

    fn validate(&self, obj: &Object) -> Vec<FieldError> {
        self.current().map_or_else(RowHandle::retired, |p| p.strategy.validate(obj))
    }

    fn prepare_for_update(&self, new: &mut Object, old: &Object) {
        if let Some(p) = self.current() {
            p.strategy.prepare_for_update(new, old);
        }
    }

    fn validate_update(&self, new: &Object, old: &Object) -> Vec<FieldError> {
        self.current().map_or_else(RowHandle::retired, |p| p.strategy.validate_update(new, old))
    }

    fn reset_status_on_create(&self) -> bool {
        self.current().is_some_and(|p| p.strategy.reset_status_on_create())
    }

    fn retired(&self) -> bool {
        self.retired.load(Ordering::Acquire)
    }
}

impl VersionConverter for RowHandle {
    fn to_stored(&self, obj: &mut Object) -> Result<(), ApiError> {
        self.with_form(|f| f.to_stored(obj))
    }

    fn to_served(&self, obj: &mut Object) -> Result<(), ApiError> {
        self.with_form(|f| f.to_served(obj))
    }

    fn to_served_from_storage(&self, obj: &mut Object, revision: i64) -> Result<(), ApiError> {
        self.with_form(|f| f.to_served_from_storage(obj, revision))
    }

    fn to_served_from_storage_all(&self, objs: &mut [(Object, i64)]) -> Result<(), ApiError> {
        self.with_form(|f| f.to_served_from_storage_all(objs))
    }

    fn served_as_stored(&self, namespace: &str, name: &str, revision: i64) -> bool {
        let parts = self.current();
        parts.as_ref().and_then(|p| p.form.as_ref()).is_some_and(|f| f.served_as_stored(namespace, name, revision))
    }

    fn to_version(&self, obj: &mut Object, api_version: &str) -> Option<Result<(), ApiError>> {
        match self.with_form(|f| Ok(f.to_version(obj, api_version))) {
            Ok(done) => done,
            Err(e) => Some(Err(e)),
        }
    }

    fn prepares_served(&self) -> bool {
        true
    }
}

/// What one served version's content was built into.
#[derive(Debug, Clone)]
struct Built {
    kind: &'static ResourceKind,
    printer: &'static Printer,
    handle: &'static RowHandle,
    parts: Arc<RowParts>,
}

impl Built {
    /// Marks the row retired; its parts go with the registry's entry and the last snapshot
    /// holding them.
    fn retire(&self) {
        self.handle.retire();
    }
}

/// Whether a schema sets a default anywhere.
fn has_defaults(schema: &Value) -> bool {
    match schema {
        Value::Object(m) => m.contains_key("default") || m.values().any(has_defaults),
        Value::Array(a) => a.iter().any(has_defaults),
        _ => false,
    }
}

/// One served version of one definition.
#[derive(Debug, Clone)]
pub struct ServedVersion {
    /// The row the generic server serves.
    pub kind: &'static ResourceKind,
    /// Its Table printer.
    pub printer: &'static Printer,
    /// The version's OpenAPI v3 schema as written.
    pub schema: Option<Arc<Value>>,
    /// The schema server-side apply merges and tracks ownership by (list and map types from
    /// the schema's `x-kubernetes-*` markers; deduced where there is no schema).
    pub apply: Arc<TypeSchema>,
    /// The definition's name.
    pub definition: String,
    /// The warning sent with every request, for deprecated versions.
    pub warning: Option<String>,
    /// Whether the definition converts between versions through a webhook (its versions
    /// may differ in shape).
    pub webhook: bool,
    /// Whether the definition is being deleted (its resources are still served, for the
    /// cleanup and for clients watching them go, but creates are refused).
    pub terminating: bool,
    /// The row's strategy and converter, kept while this snapshot is (only held: the row
    /// reads them through its handle).
    _parts: Arc<RowParts>,
}

/// What is served at one moment.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Every served row.
    pub kinds: &'static [&'static ResourceKind],
    /// The served groups, preferred version first.
    pub groups: &'static [ApiGroup],
    /// The served versions, in `kinds` order.
    pub served: Vec<ServedVersion>,
    /// Every definition in storage, by name.
    pub definitions: BTreeMap<String, Definition>,
}

impl Snapshot {
    /// Returns the served version of `kind`.
    pub fn served(&self, kind: &ResourceKind) -> Option<&ServedVersion> {
        self.served.iter().find(|s| std::ptr::eq(s.kind, kind) || s.kind.is(kind))
    }
}

/// The snapshot a request is served by ([`Registry::pinned`]), and the registry it is of (by
/// address).
struct Pinned {
    registry: usize,
    snapshot: Arc<Snapshot>,
}

tokio::task_local! {
    static PINNED: Pinned;
}

/// The served custom resources.
#[derive(Debug, Default)]
pub struct Registry {
    current: RwLock<Arc<Snapshot>>,
    /// Rows and printers of the versions served now, by the content they were built from.
    interned: Mutex<HashMap<String, Built>>,
    /// The served lists made so far, by content.
    lists: Mutex<InternedLists>,
    /// Where conversion webhooks' Services are looked up.
    services: std::sync::OnceLock<Services>,
    /// How many rows' parts are alive (served, or still held by a request).
    alive: Arc<AtomicUsize>,
}

/// The `'static` data rows and served lists are made of, each made once per distinct content:
/// a definition whose spec changes, created again, or with the printer columns of another,
/// reuses what was made before.
#[derive(Debug, Default)]
struct InternedLists {
    /// By the rows' addresses (rows are interned, so equal rows are one address).
    kinds: HashMap<Vec<usize>, &'static [&'static ResourceKind]>,
    /// By group names and versions.
    groups: HashMap<Vec<(String, Vec<String>)>, &'static [ApiGroup]>,
    /// Names, versions and paths.
    strings: std::collections::HashSet<&'static str>,
    /// Lists of them: short names, categories, a group's versions.
    string_lists: HashMap<Vec<String>, &'static [&'static str]>,
    /// Table printers, by their columns (a printer holds no more than its columns).
    printers: HashMap<Vec<PrinterColumn>, &'static Printer>,
}

impl InternedLists {
    fn str(&mut self, s: &str) -> &'static str {
        if let Some(found) = self.strings.get(s) {
            return found;
        }
        let made: &'static str = Box::leak(s.to_string().into_boxed_str());
        self.strings.insert(made);
        made
    }

    fn strs(&mut self, list: &[String]) -> &'static [&'static str] {
        if let Some(found) = self.string_lists.get(list) {
            return found;
        }
        let made: Vec<&'static str> = list.iter().map(|s| self.str(s)).collect();
        let made: &'static [&'static str] = Box::leak(made.into_boxed_slice());
        self.string_lists.insert(list.to_vec(), made);
        made
    }

    fn printer(&mut self, cols: Vec<PrinterColumn>) -> &'static Printer {
        if let Some(found) = self.printers.get(&cols) {
            return found;
        }
        let columns: &'static [_] = Box::leak(printer::columns(&cols).into_boxed_slice());
        let cells = printer::cells(&cols);
        let made: &'static Printer = Box::leak(Box::new(Printer { columns, cells: Box::leak(Box::new(cells)) }));
        self.printers.insert(cols, made);
        made
    }
}

/// kube's version priority order: GA before beta before alpha, higher numbers first, then
/// other names alphabetically.
pub fn version_priority(name: &str) -> (u8, i64, i64, String) {
    let parse = || -> Option<(u8, i64, i64)> {
        let rest = name.strip_prefix('v')?;
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let major: i64 = digits.parse().ok()?;
        let tail = &rest[digits.len()..];
        if tail.is_empty() {
            return Some((0, -major, 0));
        }
        for (rank, stage) in [(1, "beta"), (2, "alpha")] {
            if let Some(n) = tail.strip_prefix(stage) {
                let minor: i64 = n.parse().ok()?;
                return Some((rank, -major, -minor));
            }
        }
        None
    };
    match parse() {
        Some((rank, major, minor)) => (rank, major, minor, String::new()),
        None => (3, 0, 0, name.to_string()),
    }
}

impl Registry {
    /// A registry whose conversion webhooks resolve Services through `services`.
    pub fn with_services(services: Services) -> Registry {
        let registry = Registry::default();
        let _ = registry.services.set(services);
        registry
    }

    /// Returns what is served now, or, inside [`Registry::pinned`], what the request is served
    /// by.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        let registry = std::ptr::from_ref(self) as usize;
        if let Ok(Some(pinned)) = PINNED.try_with(|p| (p.registry == registry).then(|| p.snapshot.clone())) {
            return pinned;
        }
        self.current.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Runs `request` on `snapshot`: every row it finds in this registry is one of the
    /// snapshot's, whose parts stay until it is done, whatever definition changes land
    /// meanwhile (kube lets a request finish on the storage of the definition it started
    /// with). Tasks the request spawns read the registry's current snapshot.
    pub async fn pinned<F: Future>(&self, snapshot: Arc<Snapshot>, request: F) -> F::Output {
        PINNED.scope(Pinned { registry: std::ptr::from_ref(self) as usize, snapshot }, request).await
    }

    /// Returns the OpenAPI v3 schema (`openAPIV3Schema`, `x-kubernetes-*` extensions intact)
    /// of the custom resource `group/version` `kind`, if served: what merge semantics of a
    /// patch read.
    pub fn openapi_schema(&self, group: &str, version: &str, kind: &str) -> Option<Arc<Value>> {
        let snap = self.snapshot();
        let found =
            snap.served.iter().find(|s| s.kind.group == group && s.kind.version == version && s.kind.kind == kind);
        found.and_then(|s| s.schema.clone())
    }

    /// Rebuilds what is served from every definition in storage.
    pub fn replace(&self, definitions: BTreeMap<String, Definition>) {
        // Held throughout, so two rebuilds never retire what the other serves.
        let mut interned = self.interned.lock().unwrap_or_else(PoisonError::into_inner);
        let mut statics = self.lists.lock().unwrap_or_else(PoisonError::into_inner);
        let mut used = std::collections::HashSet::new();
        let mut served = Vec::new();
        let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for def in definitions.values() {
            let Some(names) = &def.accepted else { continue };
            if !def.condition_true("Established") {
                continue;
            }
            for version in def.versions.iter().filter(|v| v.served) {
                let (key, built) = self.intern(&mut interned, &mut statics, def, names, version);
                used.insert(key);
                let Built { kind, printer, parts, .. } = built;
                groups.entry(def.group.clone()).or_default().push(version.name.clone());
                let warning = version.deprecated.then(|| {
                    version
                        .deprecation_warning
                        .clone()
                        .unwrap_or_else(|| format!("{}/{} {} is deprecated", def.group, version.name, names.kind))
                });
                let apply = Arc::new(match &version.schema {
                    Some(s) => TypeSchema::from_openapi_v3(s, &Map::new()),
                    None => TypeSchema::deduced(),
                });
                served.push(ServedVersion {
                    kind,
                    printer,
                    apply,
                    schema: version.schema.clone().map(Arc::new),
                    definition: def.name.clone(),
                    warning,
                    webhook: def.webhook.is_some(),
                    terminating: def.terminating,
                    _parts: parts,
                });
            }
        }
        let groups: Vec<(String, Vec<String>)> = groups
            .into_iter()
            .map(|(name, mut versions)| {
                versions.sort_by_key(|v| version_priority(v));
                versions.dedup();
                (name, versions)
            })
            .collect();
        let kinds: Vec<&'static ResourceKind> = served.iter().map(|s| s.kind).collect();
        let (kinds, groups) = intern_lists(&mut statics, kinds, groups);
        drop(statics);
        let snapshot = Snapshot { kinds, groups, served, definitions };
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(snapshot);
        interned.retain(|key, built| {
            let keep = used.contains(key);
            if !keep {
                built.retire();
            }
            keep
        });
    }

    /// How many served versions' compiled rows are kept: one per version served now.
    pub fn rows_kept(&self) -> usize {
        self.interned.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// How many rows' parts (compiled schema and rules, converter and its schemas) are still
    /// in memory: those served now, and retired ones a request still holds.
    pub fn rows_alive(&self) -> usize {
        self.alive.load(Ordering::Relaxed)
    }

    /// Returns what one served version was built into, and its key, building it on first
    /// sight of this content.
    fn intern(
        &self,
        interned: &mut HashMap<String, Built>,
        statics: &mut InternedLists,
        def: &Definition,
        names: &crate::definition::Names,
        version: &Version,
    ) -> (String, Built) {
        let key = format!("{}\n{}\n{}\n{:?}", def.uid, version.name, def.object["spec"], names);
        let built = interned
            .entry(key.clone())
            .or_insert_with(|| build(def, names, version, self.services.get(), &self.alive, statics))
            .clone();
        (key, built)
    }
}

/// Returns the served lists as the generic server takes them (`'static` slices), made on
/// first sight of this content: a definition's status written or a replica's watch event
/// rebuilds the snapshot with the same lists, which must not leak a copy each time.
fn intern_lists(
    lists: &mut InternedLists,
    kinds: Vec<&'static ResourceKind>,
    groups: Vec<(String, Vec<String>)>,
) -> (&'static [&'static ResourceKind], &'static [ApiGroup]) {
    let kinds_key: Vec<usize> = kinds.iter().map(|k| std::ptr::from_ref(*k) as usize).collect();
    let kinds = *lists.kinds.entry(kinds_key).or_insert_with(|| Box::leak(kinds.into_boxed_slice()));
    if let Some(found) = lists.groups.get(&groups) {
        return (kinds, found);
    }
    let built: Vec<ApiGroup> = groups
        .iter()
        .map(|(name, versions)| ApiGroup { name: lists.str(name), versions: lists.strs(versions) })
        .collect();
    let built: &'static [ApiGroup] = Box::leak(built.into_boxed_slice());
    lists.groups.insert(groups, built);
    (kinds, built)
}

/// Strips a JSONPath's leading dot: `.spec.replicas` -> `spec.replicas`.
fn dotted(path: &str) -> String {
    path.trim_start_matches('.').to_string()
}

fn build(
    def: &Definition,
    names: &crate::definition::Names,
    version: &Version,
    services: Option<&Services>,
    alive: &Arc<AtomicUsize>,
    statics: &mut InternedLists,
) -> Built {
    let short = statics.strs(&names.short_names);
    let categories = statics.strs(&names.categories);
    let mut selectors: Vec<(&'static str, &'static str)> = META_SELECTORS.to_vec();
    for f in &version.selectable_fields {
        let path = statics.str(&dotted(f));
        selectors.push((path, path));
    }
    let mut subresources = Subresources::NONE;
    if version.status {
        subresources = subresources.with(Subresources::STATUS);
    }
    let scale_paths = version.scale.as_ref().map(|s| {
        subresources = subresources.with(Subresources::SCALE);
        &*Box::leak(Box::new(ScalePaths {
            spec_replicas: dotted(&s.spec_replicas_path),
            status_replicas: dotted(&s.status_replicas_path),
            label_selector: s.label_selector_path.as_deref().map(dotted),
        }))
    });
    let storage = def.storage_version().unwrap_or(&version.name);
    // Objects are read through a converter only when their served form differs from the
    // stored one (another version, or defaults to apply): the rest are served as stored.
    let defaults = version.schema.as_ref().is_some_and(has_defaults);
    let webhook = def.webhook.as_ref().map(|spec| {
        let schemas = def
            .versions
            .iter()
            .filter_map(|v| Some((format!("{}/{}", def.group, v.name), Arc::new(v.schema.clone()?))))
            .collect();
        Arc::new(Webhook { spec: spec.clone(), services: services.cloned(), schemas })
    });
    let served_form = (def.versions.len() > 1 || defaults).then(|| ServedForm {
        stored: format!("{}/{storage}", def.group),
        served: format!("{}/{}", def.group, version.name),
        defaults: version.schema.clone().filter(|_| defaults),
        webhook,
        unchanged: Verdicts::default(),
    });
    let converts = served_form.is_some();
    // A write is defaulted and checked by this version's schema and rules, in this version
    // (the converter prepares writes as served: the stored object an update compares with is
    // converted to this version first), as kube checks a custom resource in the version it
    // was sent in.
    alive.fetch_add(1, Ordering::Relaxed);
    let parts = RowParts {
        strategy: CustomResourceStrategy::new(version.schema.clone(), version.status),
        form: served_form,
        alive: alive.clone(),
    };
    let parts = Arc::new(parts);
    let handle: &'static RowHandle =
        Box::leak(Box::new(RowHandle { parts: Arc::downgrade(&parts), retired: AtomicBool::new(false) }));
    let converter = converts.then_some(handle as &'static dyn VersionConverter);
    let mut kind = ResourceKind::row(
        statics.str(&def.group),
        statics.str(&version.name),
        statics.str(&names.plural),
        statics.str(&names.kind),
        statics.str(&names.singular),
        def.namespaced,
    )
    .short(short)
    .categories(categories)
    .stored_as(statics.str(&format!("{}/{}", def.group, names.plural)))
    .with_fields(&[])
    .selectors(Box::leak(selectors.into_boxed_slice()))
    .returns_deleted()
    .sub(subresources)
    .rules(handle as &'static dyn Strategy);
    kind.scale_paths = scale_paths;
    kind.fields_from_schema = true;
    kind.strategic_merge = false;
    kind.converter = converter;
    let cols = if version.columns.is_empty() { printer::default_columns() } else { version.columns.clone() };
    let printer = statics.printer(cols);
    Built { kind: &*Box::leak(Box::new(kind)), printer, handle, parts }
}

/// The namespaces kind, read to check that a namespace exists before creating in it.
static NAMESPACES: ResourceKind = ResourceKind::row("", "v1", "namespaces", "Namespace", "namespace", false);

/// No OpenAPI documents through the generic route: the apiextensions server answers its own.
static NO_DOCUMENTS: std::sync::OnceLock<Documents> = std::sync::OnceLock::new();

fn no_documents() -> &'static Documents {
    NO_DOCUMENTS.get_or_init(|| Documents {
        v3_index: Document::new(b"{\"paths\":{}}".to_vec()),
        v3: BTreeMap::new(),
        v2: Document::new(b"{}".to_vec()),
        v2_protobuf: bytes::Bytes::new(),
    })
}

/// The generic server's view of the [`Registry`].
#[derive(Debug, Clone)]
pub struct CrdKinds(pub Arc<Registry>);

impl ServedKinds for CrdKinds {
    fn groups(&self) -> &'static [ApiGroup] {
        self.0.snapshot().groups
    }

    fn kinds(&self) -> &[&'static ResourceKind] {
        self.0.snapshot().kinds
    }

    fn namespaces(&self) -> &'static ResourceKind {
        &NAMESPACES
    }

    fn printer(&self, kind: &ResourceKind) -> &'static Printer {
        self.0.snapshot().served(kind).map_or(&ballast_apiserver::registry::table::printer::DEFAULT, |s| s.printer)
    }

    fn prune_unknown_fields(&self, kind: &ResourceKind, obj: &mut Map<String, Value>) -> Vec<String> {
        let snap = self.0.snapshot();
        match snap.served(kind).and_then(|s| s.schema.clone()) {
            Some(schema) => {
                let mut pruned = schema::prune_root(&schema, obj);
                pruned.sort();
                pruned
            }
            None => Vec::new(),
        }
    }

    fn virtual_resources(&self) -> &'static [VirtualResource] {
        &[]
    }

    /// Managers of a custom resource converted by a webhook are compared in their own
    /// version, converted through the webhook; under conversion `None` every version has the
    /// same fields, so every manager is compared in the request's version.
    fn converts_managed_fields(&self, kind: &ResourceKind) -> bool {
        self.0.snapshot().served(kind).is_some_and(|s| s.webhook)
    }

    fn apply_schema(&self, kind: &ResourceKind) -> Arc<TypeSchema> {
        let snap = self.0.snapshot();
        snap.served(kind).map_or_else(|| Arc::new(TypeSchema::deduced()), |s| s.apply.clone())
    }

    fn openapi(&self) -> &'static Documents {
        no_documents()
    }

    fn openapi_if_built(&self) -> Option<&'static Documents> {
        Some(no_documents())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An established definition of `widgets.example.com` whose `spec.size` has `maximum`.
    fn definition(maximum: i64) -> Definition {
        Definition::from_json(&json!({
            "metadata": {"name": "widgets.example.com", "uid": "u1"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                    "type": "object", "properties": {"spec": {"type": "object", "properties": {
                        "size": {"type": "integer", "maximum": maximum, "default": 1}}}}}}}]},
            "status": {"acceptedNames": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                "listKind": "WidgetList"},
                "conditions": [{"type": "Established", "status": "True"}]}
        }))
    }

    fn serve(registry: &Registry, defs: &[Definition]) -> Option<&'static ResourceKind> {
        registry.replace(defs.iter().map(|d| (d.name.clone(), d.clone())).collect());
        registry.snapshot().served.first().map(|s| s.kind)
    }

    #[test]
    fn rows_of_versions_no_longer_served_are_dropped() {
        let registry = Registry::default();
        let first = serve(&registry, &[definition(5)]).expect("served");
        let obj = json!({"spec": {"size": 7}});
        let obj = obj.as_object().expect("object");
        assert_eq!(first.strategy.validate(obj).len(), 1, "size 7 is over the maximum of 5");

        // The same content again (a status write) keeps the row.
        let again = serve(&registry, &[definition(5)]).expect("served");
        assert!(std::ptr::eq(first, again));
        assert_eq!(registry.rows_kept(), 1);

        // A changed spec builds a new row; the old one's compiled schema is dropped, and a
        // write that still reaches it is refused, not waved through.
        let first_printer = registry.snapshot().served[0].printer;
        let second = serve(&registry, &[definition(10)]).expect("served");
        assert!(!std::ptr::eq(first, second));
        // What does not depend on the spec's change is made once: names, the printer.
        assert!(std::ptr::eq(first.resource, second.resource));
        assert!(std::ptr::eq(first_printer, registry.snapshot().served[0].printer));
        assert_eq!(registry.rows_kept(), 1);
        assert!(second.strategy.validate(obj).is_empty(), "size 7 is within the new maximum");
        let refused: Vec<String> = first.strategy.validate(obj).iter().map(ToString::to_string).collect();
        assert_eq!(
            refused,
            vec!["<nil>: Forbidden: the resource's definition changed while the request was served; retry"]
        );

        // Deleting the definition leaves nothing kept, and no row's parts alive.
        assert!(serve(&registry, &[]).is_none());
        assert_eq!(registry.rows_kept(), 0);
        assert_eq!(registry.rows_alive(), 0);
        assert_eq!(second.strategy.validate(obj).len(), 1);
        assert!(second.strategy.retired());
    }

    /// A request pinned to a snapshot finds that snapshot's row and checks by its schema
    /// while the definition changes under it; the next request finds the new row, and the old
    /// row's parts go when the pinned request is done.
    #[tokio::test]
    async fn a_pinned_request_keeps_its_row_while_the_definition_changes() {
        let registry = Arc::new(Registry::default());
        let first = serve(&registry, &[definition(5)]).expect("served");
        let obj = json!({"spec": {"size": 7}});
        let obj = obj.as_object().expect("object").clone();
        let (changed, go_on) = (tokio::sync::Notify::new(), tokio::sync::Notify::new());
        let request = {
            let (registry, obj) = (registry.clone(), obj.clone());
            let (changed, go_on) = (&changed, &go_on);
            async move {
                let find = || registry.snapshot().served.first().map(|s| s.kind).expect("served");
                let before = find();
                changed.notify_one();
                go_on.notified().await;
                let after = find();
                (before, after, after.strategy.validate(&obj).len())
            }
        };
        let change = async {
            changed.notified().await;
            assert!(serve(&registry, &[definition(10)]).is_some());
            assert_eq!(registry.rows_alive(), 2, "the pinned request still holds the first row's parts");
            go_on.notify_one();
        };
        let ((before, after, errors), ()) = tokio::join!(registry.pinned(registry.snapshot(), request), change);
        assert!(std::ptr::eq(before, first) && std::ptr::eq(after, first), "one row throughout the request");
        assert_eq!(errors, 1, "checked by the schema it started with: 7 is over 5");
        assert_eq!(registry.rows_alive(), 1, "the first row's parts went with the request");
        let now = registry.snapshot().served.first().map(|s| s.kind).expect("served");
        assert!(!std::ptr::eq(now, first));
        assert!(now.strategy.validate(&obj).is_empty(), "the next request checks by the new schema");
        assert!(first.strategy.retired());
    }

    /// `definition(5)` under another name and uid, with two versions (so it converts).
    fn converting(i: usize) -> Definition {
        let mut def = definition(5);
        let mut object = def.object.clone();
        object["metadata"] = json!({"name": format!("widgets{i}.example.com"), "uid": format!("u{i}")});
        object["spec"]["group"] = format!("example{i}.com").into();
        let v1 = object["spec"]["versions"][0].clone();
        let mut v2 = v1.clone();
        v2["name"] = "v2".into();
        v2["storage"] = false.into();
        object["spec"]["versions"] = json!([v1, v2]);
        def = Definition::from_json(&object);
        def
    }

    #[test]
    fn parts_of_deleted_definitions_are_freed_and_requests_holding_them_finish() {
        let registry = Registry::default();
        for i in 0..200 {
            let kind = serve(&registry, &[converting(i)]).expect("served");
            assert_eq!(registry.rows_alive(), 2, "two versions served");
            let converter = kind.converter.expect("two versions convert");
            let mut obj: Object = json!({"apiVersion": format!("example{i}.com/v1"), "kind": "Widget",
                "metadata": {"name": "a"}, "spec": {}})
            .as_object()
            .cloned()
            .expect("object");
            converter.to_served(&mut obj).expect("converts while served");
            // A request that took one version's parts before the definition went keeps them
            // until it is done; the other version's go at once.
            let held = {
                let interned = registry.interned.lock().expect("lock");
                interned.values().next().and_then(|b| b.handle.current()).expect("parts")
            };
            assert!(serve(&registry, &[]).is_none());
            assert_eq!(registry.rows_kept(), 0);
            assert_eq!(registry.rows_alive(), 1, "the held parts are still there");
            drop(held);
            assert_eq!(registry.rows_alive(), 0, "definition {i}'s parts are freed");
            let err = converter.to_stored(&mut obj).expect_err("a retired row converts nothing");
            assert_eq!(
                err.to_string(),
                "Internal error occurred: the resource's definition changed while the request was served; retry"
            );
        }
    }
}
