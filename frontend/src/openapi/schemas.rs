//! The schema definitions every OpenAPI document draws from, built once from k8s-openapi's
//! `schemars` output and fixed up where that output differs from what kube-apiserver publishes.
//!
//! Definitions are kept in one neutral form (references as `#/definitions/<name>`, the v2
//! spelling) and rendered per document flavour by [`render`]:
//!
//! * v3 (`#/components/schemas/<name>`): a reference with sibling keys (a field's own
//!   description) becomes `{"allOf": [{"$ref": ...}], "description": ...}`, as upstream writes
//!   it, because OpenAPI 3.0 ignores siblings of `$ref`;
//! * v2: references keep their siblings, as upstream's swagger document does.
//!
//! Fix-ups against upstream (what kubectl reads: types, formats, descriptions, required lists):
//!
//! * `IntOrString` is `format: int-or-string` with `oneOf` integer/string (v3) or
//!   `type: string` (v2), and `Quantity` is `oneOf` string/number (v3) or `type: string` (v2),
//!   instead of k8s-openapi's bare `x-kubernetes-int-or-string`; apiextensions' `JSON` (any
//!   JSON value) has no type, where k8s-openapi says `object`;
//! * every top-level kind carries `x-kubernetes-group-version-kind`, and so do the list kinds,
//!   which k8s-openapi has no schema for and which are written here; no kind requires
//!   `metadata` (k8s-openapi's schemas do);
//! * strategic-merge-patch tags (`x-kubernetes-patch-strategy`, `x-kubernetes-patch-merge-key`),
//!   which k8s-openapi drops, come from the generated object schemas ([`ballast_apimachinery::schema`]), so
//!   kubectl's client-side apply merges lists like upstream; so do the server-side-apply
//!   markers (`x-kubernetes-list-type`, `x-kubernetes-list-map-keys`, `x-kubernetes-map-type`).
//!
//! This module must not know about HTTP or the registry's storage; it only reads the registry's
//! tables.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use k8s_openapi::schemars::generate::SchemaSettings;
use k8s_openapi::schemars::{JsonSchema, Schema, SchemaGenerator};
use k8s_openapi::Resource;
use serde_json::{json, Map, Value};

use crate::kinds;
use crate::reviews::VIRTUAL_RESOURCES;
use ballast_apimachinery::protobuf::{Field, FieldType, Message};
use ballast_apiserver::registry::ResourceKind;
use ballast_apiserver::served as discovery;

/// The neutral reference prefix.
const REF_PREFIX: &str = "#/definitions/";

/// The name of `ObjectMeta`'s definition.
pub const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
/// The name of `ListMeta`'s definition.
pub const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
/// The name of `Status`'s definition.
pub const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
/// The name of `DeleteOptions`' definition.
pub const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
/// The name of `WatchEvent`'s definition.
pub const WATCH_EVENT: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent";
/// The name of `Patch`'s definition.
pub const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
/// The name of `autoscaling/v1` `Scale`'s definition.
pub const SCALE: &str = "io.k8s.api.autoscaling.v1.Scale";
/// The name of `core/v1` `Binding`'s definition.
pub const BINDING: &str = "io.k8s.api.core.v1.Binding";

const INT_OR_STRING: &str = "io.k8s.apimachinery.pkg.util.intstr.IntOrString";
const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";
const ANY_JSON: &str = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON";

/// A k8s-openapi type that is a top-level kind: its group, version and kind, and how to put its
/// schema into a generator.
struct TypedKind {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    name: fn() -> String,
    add: fn(&mut SchemaGenerator) -> Schema,
}

macro_rules! typed_kinds {
    ($($t:ty),* $(,)?) => {
        &[$(TypedKind {
            group: <$t as Resource>::GROUP,
            version: <$t as Resource>::VERSION,
            kind: <$t as Resource>::KIND,
            name: || <$t as JsonSchema>::schema_name().into_owned(),
            add: |g| g.subschema_for::<$t>(),
        }),*]
    };
}

/// Every kind k8s-openapi has a type for that the registry or the access reviews may serve (plus
/// the subresource kinds `Scale`, `Binding` and `TokenRequest`). Served kinds missing here get a schema-less placeholder; the
/// unit tests require that none is missing.
static TYPED_KINDS: &[TypedKind] = {
    use k8s_openapi::api::admissionregistration::v1 as admission;
    use k8s_openapi::api::{
        apps, authentication, authorization, autoscaling, batch, certificates, coordination, core, discovery, events,
        flowcontrol, networking, node, policy, rbac, scheduling, storage,
    };
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apiregistration;
    typed_kinds![
        core::v1::Binding,
        core::v1::ComponentStatus,
        core::v1::ConfigMap,
        core::v1::Endpoints,
        core::v1::Event,
        core::v1::LimitRange,
        core::v1::Namespace,
        core::v1::Node,
        core::v1::PersistentVolume,
        core::v1::PersistentVolumeClaim,
        core::v1::Pod,
        core::v1::PodTemplate,
        core::v1::ReplicationController,
        core::v1::ResourceQuota,
        core::v1::Secret,
        core::v1::Service,
        core::v1::ServiceAccount,
        apiregistration::APIService,
        apps::v1::ControllerRevision,
        apps::v1::DaemonSet,
        apps::v1::Deployment,
        apps::v1::ReplicaSet,
        apps::v1::StatefulSet,
        events::v1::Event,
        autoscaling::v1::HorizontalPodAutoscaler,
        autoscaling::v1::Scale,
        autoscaling::v2::HorizontalPodAutoscaler,
        batch::v1::CronJob,
        batch::v1::Job,
        certificates::v1::CertificateSigningRequest,
        networking::v1::Ingress,
        networking::v1::IngressClass,
        networking::v1::IPAddress,
        networking::v1::NetworkPolicy,
        networking::v1::ServiceCIDR,
        policy::v1::PodDisruptionBudget,
        rbac::v1::ClusterRole,
        rbac::v1::ClusterRoleBinding,
        rbac::v1::Role,
        rbac::v1::RoleBinding,
        storage::v1::CSIDriver,
        storage::v1::CSIStorageCapacity,
        storage::v1::CSINode,
        storage::v1::StorageClass,
        storage::v1::VolumeAttachment,
        admission::MutatingWebhookConfiguration,
        admission::ValidatingAdmissionPolicy,
        admission::ValidatingAdmissionPolicyBinding,
        admission::ValidatingWebhookConfiguration,
        apiextensions::CustomResourceDefinition,
        scheduling::v1::PriorityClass,
        coordination::v1::Lease,
        node::v1::RuntimeClass,
        discovery::v1::EndpointSlice,
        flowcontrol::v1::FlowSchema,
        flowcontrol::v1::PriorityLevelConfiguration,
        authorization::v1::LocalSubjectAccessReview,
        authorization::v1::SelfSubjectAccessReview,
        authorization::v1::SelfSubjectRulesReview,
        authorization::v1::SubjectAccessReview,
        authentication::v1::SelfSubjectReview,
        authentication::v1::TokenReview,
        authentication::v1::TokenRequest,
    ]
};

/// Adds the meta types operations refer to (they are not reachable from any kind).
fn add_meta_types(g: &mut SchemaGenerator) {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
    g.subschema_for::<meta::Status>();
    g.subschema_for::<meta::DeleteOptions>();
    g.subschema_for::<meta::WatchEvent<k8s_openapi::api::core::v1::Pod>>();
    g.subschema_for::<meta::Patch>();
    g.subschema_for::<meta::ListMeta>();
    g.subschema_for::<meta::APIResourceList>();
}

/// Which document a schema is rendered for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// Swagger 2.0 (`/openapi/v2`).
    V2,
    /// OpenAPI 3.0 (`/openapi/v3/...`).
    V3,
}

impl Flavor {
    /// Returns the reference to definition `name`.
    pub fn reference(self, name: &str) -> String {
        match self {
            Flavor::V2 => format!("#/definitions/{name}"),
            Flavor::V3 => format!("#/components/schemas/{name}"),
        }
    }
}

/// The definitions, in neutral form, with the names of the served kinds' schemas.
#[derive(Debug)]
pub struct Definitions {
    /// Definition name to schema.
    pub schemas: BTreeMap<String, Value>,
    /// `(group, version, kind)` to definition name, for every served kind with a schema and
    /// for the subresource kinds.
    kinds: BTreeMap<(String, String, String), String>,
    /// Served kinds k8s-openapi has no type for (`group/version/Kind`).
    pub untyped: Vec<String>,
}

impl Definitions {
    /// Returns the definition name of a kind's schema, if it has one.
    pub fn kind_schema(&self, group: &str, version: &str, kind: &str) -> Option<&str> {
        self.kinds.get(&(group.to_string(), version.to_string(), kind.to_string())).map(String::as_str)
    }

    /// Returns the definition name of a kind's list schema, if the kind has a schema.
    pub fn list_schema(&self, group: &str, version: &str, kind: &str) -> Option<String> {
        self.kind_schema(group, version, kind).map(|n| format!("{n}List"))
    }

    /// Returns the definitions `roots` refer to, transitively, roots included.
    pub fn closure<'a>(&self, roots: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<String> = roots.into_iter().map(str::to_string).collect();
        while let Some(name) = todo.pop() {
            if !seen.insert(name.clone()) {
                continue;
            }
            if let Some(schema) = self.schemas.get(&name) {
                collect_refs(schema, &mut todo);
            }
        }
        seen.retain(|n| self.schemas.contains_key(n));
        seen
    }

    /// Resolves a (neutral) schema that may be a reference or wrap one.
    pub fn resolve<'a>(&'a self, schema: &'a Value) -> &'a Value {
        let mut current = schema;
        for _ in 0..8 {
            let Some(name) = current.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix(REF_PREFIX))
            else {
                return current;
            };
            match self.schemas.get(name) {
                Some(next) => current = next,
                None => return current,
            }
        }
        current
    }
}

fn collect_refs(schema: &Value, out: &mut Vec<String>) {
    match schema {
        Value::Object(map) => {
            for (k, v) in map {
                if k == "$ref" {
                    if let Some(name) = v.as_str().and_then(|r| r.strip_prefix(REF_PREFIX)) {
                        out.push(name.to_string());
                    }
                } else {
                    collect_refs(v, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

/// A compiled schema's fields (see `field_types` and `unknown_fields`): name and node, sorted
/// by name.
pub type Fields = Vec<(&'static str, usize)>;

/// Sorts a compiled schema's fields for [`field_node`].
pub fn sorted_fields(mut fields: Fields) -> Fields {
    fields.sort_unstable_by_key(|(name, _)| *name);
    fields
}

/// The node of field `key` in sorted fields.
pub fn field_node(fields: &Fields, key: &str) -> Option<usize> {
    fields.binary_search_by(|(name, _)| (*name).cmp(key)).ok().map(|i| fields[i].1)
}

/// Returns the definitions, building them on first use.
pub fn definitions() -> &'static Definitions {
    static DEFINITIONS: LazyLock<Definitions> = LazyLock::new(build);
    &DEFINITIONS
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "kind": kind, "version": version})
}

fn build() -> Definitions {
    let mut settings = SchemaSettings::draft07();
    settings.definitions_path = "/definitions".into();
    settings.meta_schema = None;
    settings.transforms = Vec::new();
    let mut generator = settings.into_generator();
    let mut kinds = BTreeMap::new();
    let served = |t: &TypedKind| {
        kinds::ALL.iter().any(|k| k.group == t.group && k.version == t.version && k.kind == t.kind)
            || VIRTUAL_RESOURCES.iter().any(|v| v.group == t.group && v.version == t.version && v.kind == t.kind)
            || kinds::ALL
                .iter()
                .flat_map(|k| discovery::subresources(k))
                .any(|s| (s.group, s.version, s.kind) == (t.group, t.version, t.kind))
    };
    for t in TYPED_KINDS.iter().filter(|t| served(t)) {
        (t.add)(&mut generator);
        kinds.insert((t.group.to_string(), t.version.to_string(), t.kind.to_string()), (t.name)());
    }
    add_meta_types(&mut generator);
    let mut schemas: BTreeMap<String, Value> = generator.take_definitions(false).into_iter().collect();

    for ((group, version, kind), name) in &kinds {
        if let Some(Value::Object(schema)) = schemas.get_mut(name) {
            schema.insert("x-kubernetes-group-version-kind".into(), json!([gvk(group, version, kind)]));
            // k8s-openapi requires `metadata` (its Rust field is not optional); upstream never does,
            // and kubectl's client-side validation would reject manifests without one.
            if let Some(Value::Array(required)) = schema.get_mut("required") {
                required.retain(|f| f != "metadata");
                if required.is_empty() {
                    schema.remove("required");
                }
            }
        }
    }
    let mut untyped = Vec::new();
    let mut tagged = BTreeSet::new();
    for k in kinds::ALL.iter() {
        let key = (k.group.to_string(), k.version.to_string(), k.kind.to_string());
        let Some(name) = kinds.get(&key).cloned() else {
            untyped.push(format!("{}/{}", k.api_version(), k.kind));
            continue;
        };
        if k.verbs.allows("list") {
            schemas.insert(format!("{name}List"), list_schema(k, &name));
        }
        if let Some(message) = k.object_schema() {
            if let Some(root) = schemas.get(&name).cloned() {
                copy_patch_tags(&mut schemas, &root, &name, message, &mut tagged);
            }
        }
    }
    untyped.sort();
    untyped.dedup();
    add_meta_gvks(&mut schemas);
    Definitions { schemas, kinds, untyped }
}

/// Writes the `<Kind>List` schema k8s-openapi has no type for, as upstream publishes it.
fn list_schema(k: &ResourceKind, item: &str) -> Value {
    json!({
        "description": format!("{}List is a list of {} objects.", k.kind, k.kind),
        "type": "object",
        "properties": {
            "apiVersion": {
                "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
                "type": "string",
            },
            "items": {
                "description": format!("List of {}.", k.resource),
                "type": "array",
                "items": {"$ref": format!("{REF_PREFIX}{item}")},
            },
            "kind": {
                "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
                "type": "string",
            },
            "metadata": {
                "$ref": format!("{REF_PREFIX}{LIST_META}"),
                "description": "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
            },
        },
        "required": ["items"],
        "x-kubernetes-group-version-kind": [gvk(k.group, k.version, &format!("{}List", k.kind))],
    })
}

/// Gives the meta kinds every group version uses (`Status`, `DeleteOptions`, `WatchEvent`) a
/// group-version-kind per served group version, as upstream lists them.
fn add_meta_gvks(schemas: &mut BTreeMap<String, Value>) {
    let mut gvs = group_versions();
    gvs.sort();
    for (name, kind) in [(DELETE_OPTIONS, "DeleteOptions"), (WATCH_EVENT, "WatchEvent")] {
        let list: Vec<Value> = gvs.iter().map(|(g, v)| gvk(g, v, kind)).collect();
        if let Some(Value::Object(schema)) = schemas.get_mut(name) {
            schema.insert("x-kubernetes-group-version-kind".into(), Value::Array(list));
        }
    }
    if let Some(Value::Object(schema)) = schemas.get_mut(STATUS) {
        schema.insert("x-kubernetes-group-version-kind".into(), json!([gvk("", "v1", "Status")]));
    }
}

/// Sets the patch extensions on one property of a definition (if both exist).
fn set_patch_tags(schemas: &mut BTreeMap<String, Value>, definition: &str, property: &str, strategy: &str, key: &str) {
    let target = schemas.get_mut(definition).and_then(|d| d.get_mut("properties")).and_then(|p| p.get_mut(property));
    if let Some(Value::Object(target)) = target {
        target.insert("x-kubernetes-patch-strategy".into(), strategy.into());
        if !key.is_empty() {
            target.insert("x-kubernetes-patch-merge-key".into(), key.into());
        }
    }
}

/// Sets the server-side-apply extensions kube publishes (`x-kubernetes-list-type`,
/// `x-kubernetes-list-map-keys`, `x-kubernetes-map-type`) on one property, from the field's
/// upstream markers.
fn set_merge_markers(schemas: &mut BTreeMap<String, Value>, definition: &str, field: &Field) {
    let target = schemas.get_mut(definition).and_then(|d| d.get_mut("properties")).and_then(|p| p.get_mut(field.json));
    let Some(Value::Object(target)) = target else { return };
    if !field.merge.list_type.is_empty() {
        target.insert("x-kubernetes-list-type".into(), field.merge.list_type.into());
        if !field.merge.list_keys.is_empty() {
            target.insert("x-kubernetes-list-map-keys".into(), json!(field.merge.list_keys));
        }
    }
    if !field.merge.map_type.is_empty() {
        target.insert("x-kubernetes-map-type".into(), field.merge.map_type.into());
    }
}

/// Follows a registry object schema and the OpenAPI definition `name` side by side, copying the
/// strategic-merge-patch tags onto the definition's properties. Each (definition, message) pair
/// is walked once: the schemas are recursive (JSONSchemaProps) and shared (ObjectMeta), and a
/// depth limit alone would walk JSONSchemaProps' many self-references exponentially often.
fn copy_patch_tags(
    schemas: &mut BTreeMap<String, Value>,
    definition: &Value,
    name: &str,
    message: &'static Message,
    walked: &mut BTreeSet<(String, usize)>,
) {
    if !walked.insert((name.to_string(), std::ptr::from_ref(message) as usize)) {
        return;
    }
    let Some(properties) = definition.get("properties").and_then(Value::as_object) else { return };
    for field in message.fields {
        if let (true, FieldType::Message(embedded)) = (field.json.is_empty(), field.ty) {
            // An embedded Go struct: its fields are this definition's properties.
            copy_patch_tags(schemas, definition, name, embedded, walked);
            continue;
        }
        let Some(property) = properties.get(field.json) else { continue };
        if !field.patch.strategy.is_empty() {
            set_patch_tags(schemas, name, field.json, field.patch.strategy, field.patch.merge_key);
        }
        set_merge_markers(schemas, name, field);
        let FieldType::Message(inner) = field.ty else { continue };
        let element = if field.repeated { property.get("items").unwrap_or(property) } else { property };
        let Some(child) = element.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix(REF_PREFIX)) else {
            continue;
        };
        let child = child.to_string();
        if let Some(child_definition) = schemas.get(&child).cloned() {
            copy_patch_tags(schemas, &child_definition, &child, inner, walked);
        }
    }
}

/// Renders a neutral schema for a document flavour (see the module doc).
pub fn render(name: &str, schema: &Value, flavor: Flavor) -> Value {
    match name {
        INT_OR_STRING => {
            let description = schema.get("description").cloned().unwrap_or(Value::Null);
            return match flavor {
                Flavor::V2 => json!({"description": description, "format": "int-or-string", "type": "string"}),
                Flavor::V3 => json!({"description": description, "format": "int-or-string",
                    "oneOf": [{"type": "integer"}, {"type": "string"}]}),
            };
        }
        QUANTITY => {
            let description = schema.get("description").cloned().unwrap_or(Value::Null);
            return match flavor {
                Flavor::V2 => json!({"description": description, "type": "string"}),
                Flavor::V3 => json!({"description": description, "oneOf": [{"type": "string"}, {"type": "number"}]}),
            };
        }
        ANY_JSON => {
            // Any JSON value (a definition's `default`, `enum`, `example`): kube gives it no
            // type, and kubectl's client-side validation holds a number or a string against
            // the `object` k8s-openapi says.
            let description = schema.get("description").cloned().unwrap_or(Value::Null);
            return json!({"description": description});
        }
        _ => {}
    }
    render_value(schema, flavor)
}

fn render_value(schema: &Value, flavor: Flavor) -> Value {
    match schema {
        Value::Object(map) => {
            if let Some(Value::String(reference)) = map.get("$ref") {
                let target =
                    reference.strip_prefix(REF_PREFIX).map_or_else(|| reference.clone(), |n| flavor.reference(n));
                let mut out = Map::new();
                if flavor == Flavor::V3 && map.len() > 1 {
                    out.insert("allOf".into(), json!([{"$ref": target}]));
                } else {
                    out.insert("$ref".into(), target.into());
                }
                for (k, v) in map.iter().filter(|(k, _)| *k != "$ref") {
                    out.insert(k.clone(), render_value(v, flavor));
                }
                return Value::Object(out);
            }
            Value::Object(map.iter().map(|(k, v)| (k.clone(), render_value(v, flavor))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| render_value(v, flavor)).collect()),
        other => other.clone(),
    }
}

/// Returns every served group version: the registry's groups in discovery order, then the
/// review groups `access_review` serves.
pub fn group_versions() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&'static str, &'static str)> =
        kinds::GROUPS.iter().flat_map(|g| g.versions.iter().map(move |v| (g.name, *v))).collect();
    for v in &VIRTUAL_RESOURCES {
        if !out.contains(&(v.group, v.version)) {
            out.push((v.group, v.version));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_served_kind_has_a_schema_with_its_gvk() {
        let defs = definitions();
        assert!(defs.untyped.is_empty(), "kinds without a k8s-openapi type: {:?}", defs.untyped);
        for k in kinds::ALL.iter() {
            let name = defs.kind_schema(k.group, k.version, k.kind).expect("schema");
            let schema = &defs.schemas[name];
            let gvks = schema["x-kubernetes-group-version-kind"].as_array().expect("gvk");
            assert!(gvks.contains(&gvk(k.group, k.version, k.kind)), "{name}");
            assert!(schema["description"].as_str().is_some_and(|d| !d.is_empty()), "{name}");
        }
        assert_eq!(defs.kind_schema("", "v1", "Pod"), Some("io.k8s.api.core.v1.Pod"));
        assert!(defs.schemas["io.k8s.api.core.v1.ConfigMap"].get("required").is_none());
        assert_eq!(defs.schemas["io.k8s.api.certificates.v1.CertificateSigningRequest"]["required"], json!(["spec"]));
        assert_eq!(defs.kind_schema("apps", "v1", "Deployment"), Some("io.k8s.api.apps.v1.Deployment"));
    }

    #[test]
    fn lists_refer_to_their_items() {
        let defs = definitions();
        let list = &defs.schemas["io.k8s.api.core.v1.ConfigMapList"];
        assert_eq!(list["properties"]["items"]["items"]["$ref"], "#/definitions/io.k8s.api.core.v1.ConfigMap");
        assert_eq!(list["x-kubernetes-group-version-kind"][0]["kind"], "ConfigMapList");
    }

    #[test]
    fn closure_reaches_nested_types_and_meta() {
        let defs = definitions();
        let closure = defs.closure(["io.k8s.api.apps.v1.Deployment"]);
        for name in ["io.k8s.api.core.v1.Container", OBJECT_META, INT_OR_STRING, QUANTITY] {
            assert!(closure.contains(name), "{name}");
        }
        assert!(!closure.contains("io.k8s.api.core.v1.ConfigMap"));
    }

    #[test]
    fn flavors_render_references_and_int_or_string_like_upstream() {
        let defs = definitions();
        let pod_spec = &defs.schemas["io.k8s.api.core.v1.PodSpec"];
        let v3 = render("io.k8s.api.core.v1.PodSpec", pod_spec, Flavor::V3);
        assert_eq!(
            v3["properties"]["containers"]["items"]["$ref"],
            "#/components/schemas/io.k8s.api.core.v1.Container"
        );
        // A reference with a description of its own is wrapped in allOf in v3, kept in v2.
        assert_eq!(
            v3["properties"]["dnsConfig"]["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.api.core.v1.PodDNSConfig"
        );
        let v2 = render("io.k8s.api.core.v1.PodSpec", pod_spec, Flavor::V2);
        assert_eq!(v2["properties"]["dnsConfig"]["$ref"], "#/definitions/io.k8s.api.core.v1.PodDNSConfig");
        let ios = render(INT_OR_STRING, &defs.schemas[INT_OR_STRING], Flavor::V3);
        assert_eq!(ios["format"], "int-or-string");
        assert_eq!(render(INT_OR_STRING, &defs.schemas[INT_OR_STRING], Flavor::V2)["type"], "string");
        assert_eq!(render(QUANTITY, &defs.schemas[QUANTITY], Flavor::V3)["oneOf"][1]["type"], "number");
    }

    #[test]
    fn patch_tags_come_from_the_object_schemas() {
        use ballast_apimachinery::protobuf::{MergeMeta, PatchMeta};
        const MERGE_BY_NAME: PatchMeta = PatchMeta { strategy: "merge", merge_key: "name" };
        static CONTAINER: Message = Message {
            fields: &[Field {
                number: 7,
                json: "env",
                ty: FieldType::String,
                repeated: true,
                patch: MERGE_BY_NAME,
                merge: MergeMeta::NONE,
            }],
        };
        static POD_SPEC: Message = Message {
            fields: &[Field {
                number: 2,
                json: "containers",
                ty: FieldType::Message(&CONTAINER),
                repeated: true,
                patch: MERGE_BY_NAME,
                merge: MergeMeta { list_type: "map", list_keys: &["name"], key_defaults: &[], map_type: "" },
            }],
        };
        let mut schemas = definitions().schemas.clone();
        let pod_spec = schemas["io.k8s.api.core.v1.PodSpec"].clone();
        copy_patch_tags(&mut schemas, &pod_spec, "io.k8s.api.core.v1.PodSpec", &POD_SPEC, &mut BTreeSet::new());
        let containers = &schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(containers["x-kubernetes-list-type"], "map");
        assert_eq!(containers["x-kubernetes-list-map-keys"], json!(["name"]));
        let env = &schemas["io.k8s.api.core.v1.Container"]["properties"]["env"];
        assert_eq!(env["x-kubernetes-patch-merge-key"], "name");
    }
}
