//! What every kind shares: decoding request bodies, the `metadata` rules of create and update,
//! and the storage form of an object.
//!
//! Storage form: the object's JSON with `metadata.resourceVersion` and `selfLink` removed (the
//! revision is the etcd `mod_revision`, which is set again on every read), as kube-apiserver
//! stores with `--storage-media-type=application/json`.

use rand::Rng;
use serde_json::{Map, Value};

use super::strategy::{map_field, map_field_mut, Object};
use super::validation;
use super::{NameRule, ResourceKind, ServedKinds};
use crate::error::{ApiError, FieldError};
use crate::protobuf;

/// The request's `fieldValidation` directive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    /// Unknown fields are a 400.
    Strict,
    /// Unknown fields are dropped with a `Warning` header (the server default).
    Warn,
    /// Unknown fields are dropped silently.
    Ignore,
}

impl FieldValidation {
    /// Parses the query parameter (empty means the default, `Warn`).
    ///
    /// # Errors
    ///
    /// Returns `BadRequest` for other values.
    pub fn parse(value: Option<&str>) -> Result<Self, ApiError> {
        match value.unwrap_or("") {
            "Strict" => Ok(Self::Strict),
            "" | "Warn" => Ok(Self::Warn),
            "Ignore" => Ok(Self::Ignore),
            other => Err(ApiError::BadRequest(format!(
                "fieldValidation must be one of \"Ignore\", \"Warn\", or \"Strict\", got \"{other}\""
            ))),
        }
    }
}

const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// The media types bodies may use.
pub const ACCEPTED_BODY_TYPES: &str = "application/json, application/yaml, application/vnd.kubernetes.protobuf";

/// Decodes a request body as `kind`, defaulting `apiVersion` and `kind` from the URL (the Python
/// client omits them) and dropping unknown fields per `validation`. Returns the object and the
/// warnings to send.
///
/// # Errors
///
/// Returns `UnsupportedMediaType` for other content types, `BadRequest` for malformed bodies,
/// a type that is not the URL's, or (with `Strict`) unknown fields.
pub fn decode(
    kinds: &dyn ServedKinds,
    kind: &ResourceKind,
    content_type: &str,
    body: &[u8],
    validation: FieldValidation,
) -> Result<(Object, Vec<String>), ApiError> {
    let media = content_type.split(';').next().unwrap_or("").trim();
    let (value, duplicates) = match media {
        "" | "application/json" | "*/*" => super::strict_json::parse(body)
            .map_err(|e| ApiError::BadRequest(format!("couldn't get version/kind; json parse error: {e}")))?,
        "application/vnd.kubernetes.protobuf" => match kind.object_schema() {
            Some(schema) => (
                protobuf::decode_object(body, schema, crate::schema::GO_ZEROS)
                    .map_err(|e| ApiError::BadRequest(format!("failed to decode protobuf body: {e}")))?,
                Vec::new(),
            ),
            None => return Err(ApiError::UnsupportedMediaType(ACCEPTED_BODY_TYPES.into())),
        },
        _ => return Err(ApiError::UnsupportedMediaType(ACCEPTED_BODY_TYPES.into())),
    };
    let json_body = (media != "application/vnd.kubernetes.protobuf").then_some(body);
    check_value(kinds, kind, value, validation, &duplicates, json_body)
}

/// The second half of [`decode`], for a body already parsed (or produced by a patch): checks
/// `apiVersion`/`kind` against the URL's and handles unknown fields per `validation`.
///
/// # Errors
///
/// As [`decode`].
pub fn decode_value(
    kinds: &dyn ServedKinds,
    kind: &ResourceKind,
    value: Value,
    validation: FieldValidation,
) -> Result<(Object, Vec<String>), ApiError> {
    check_value(kinds, kind, value, validation, &[], None)
}

/// [`decode_value`] with the parser's findings: keys the JSON body held twice, and the body
/// itself (when JSON) to report findings in document order.
fn check_value(
    kinds: &dyn ServedKinds,
    kind: &ResourceKind,
    value: Value,
    validation: FieldValidation,
    duplicates: &[String],
    json_body: Option<&[u8]>,
) -> Result<(Object, Vec<String>), ApiError> {
    let Value::Object(mut obj) = value else {
        return Err(ApiError::BadRequest("couldn't get version/kind; json parse error: not an object".into()));
    };
    // What is stored must read back with its managedFields, which nest a few levels deeper
    // than the fields they describe (the limit patched objects are held to).
    let depth = 1 + obj.values().map(ballast_apimachinery::patch::depth).max().unwrap_or(0);
    if depth > ballast_apimachinery::patch::MAX_RESULT_DEPTH {
        return Err(ApiError::BadRequest(format!(
            "the object nests {depth} levels deep, more than the {} allowed",
            ballast_apimachinery::patch::MAX_RESULT_DEPTH
        )));
    }
    let api_version = kind.api_version();
    match obj.get("apiVersion").and_then(Value::as_str) {
        None | Some("") => {
            obj.insert("apiVersion".into(), api_version.clone().into());
        }
        Some(v) if v == api_version => {}
        Some(v) => {
            return Err(ApiError::BadRequest(format!(
                "the API version in the data ({v}) does not match the expected API version ({api_version})"
            )))
        }
    }
    match obj.get("kind").and_then(Value::as_str) {
        None | Some("") => {
            obj.insert("kind".into(), kind.kind.into());
        }
        Some(k) if k == kind.kind => {}
        Some(k) => {
            return Err(ApiError::BadRequest(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                kind.kind
            )))
        }
    }
    // A value of the wrong JSON type fails decoding in kube before anything is validated.
    if let Some(complaint) = kinds.type_mismatch(kind, &obj) {
        return Err(ApiError::BadRequest(format!(
            "{k} in version \"{v}\" cannot be handled as a {k}: {complaint}",
            k = kind.kind,
            v = kind.version,
        )));
    }
    null_labels_and_annotations_to_empty(&mut obj);
    let mut unknown = Vec::new();
    obj.retain(|k, _| {
        let known = matches!(k.as_str(), "apiVersion" | "kind" | "metadata")
            || kind.fields_from_schema
            || kind.fields.contains(&k.as_str());
        if !known {
            unknown.push(k.clone());
        }
        known
    });
    if let Some(Value::Object(meta)) = obj.get_mut("metadata") {
        meta.retain(|k, _| {
            let known = OBJECT_META_FIELDS.contains(&k.as_str());
            if !known {
                unknown.push(format!("metadata.{k}"));
            }
            known
        });
    } else if obj.contains_key("metadata") {
        return Err(ApiError::BadRequest("metadata must be an object".into()));
    }
    // Below the top level the kind's OpenAPI schema says what is known (kube decodes into the
    // Go type, which drops the rest).
    unknown.extend(kinds.prune_unknown_fields(kind, &mut obj));
    let mut findings: Vec<(&str, &String)> =
        unknown.iter().map(|f| ("unknown", f)).chain(duplicates.iter().map(|f| ("duplicate", f))).collect();
    if let (true, Some(body)) = (findings.len() > 1, json_body) {
        // kube reports them in document order; the parsed object no longer has it.
        let order = super::strict_json::key_order(body);
        let position = |(what, path): &(&str, &String)| {
            let mut at = order.iter().enumerate().filter(|(_, p)| p == path).map(|(i, _)| i);
            // A duplicate is reported where its second occurrence is.
            if *what == "duplicate" { at.nth(1) } else { at.next() }.unwrap_or(usize::MAX)
        };
        findings.sort_by_key(position);
    }
    let messages: Vec<String> = findings.iter().map(|(what, f)| format!("{what} field \"{f}\"")).collect();
    match validation {
        FieldValidation::Strict if !messages.is_empty() => Err(ApiError::BadRequest(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}",
            messages.join(", "),
            kind = kind.kind,
            version = kind.version,
        ))),
        FieldValidation::Warn => Ok((obj, messages)),
        _ => Ok((obj, Vec::new())),
    }
}

/// Go decodes a JSON `null` in a `map[string]string` as the map's zero value, the empty
/// string, so kube stores `"a": ""` for a label or annotation sent as `"a": null` (of every
/// kind: custom resources' metadata goes through the same Go type).
fn null_labels_and_annotations_to_empty(obj: &mut Object) {
    let Some(Value::Object(meta)) = obj.get_mut("metadata") else { return };
    for field in ["labels", "annotations"] {
        if let Some(Value::Object(map)) = meta.get_mut(field) {
            map.values_mut().filter(|v| v.is_null()).for_each(|v| *v = Value::String(String::new()));
        }
    }
}

/// Returns `metadata.<field>` as a string ("" when absent).
pub fn meta_str<'a>(obj: &'a Object, field: &str) -> &'a str {
    map_field(obj, "metadata").and_then(|m| m.get(field)).and_then(Value::as_str).unwrap_or("")
}

/// Returns the labels of an object.
pub fn labels(obj: &Value) -> std::collections::BTreeMap<String, String> {
    obj.get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .map(|l| l.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
        .unwrap_or_default()
}

pub use crate::uid::new_uid;

/// The alphabet of generated name suffixes (no vowels, so no words; no look-alike digits).
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Returns `prefix` (cut to 58 characters) plus five random characters, like kube's
/// `SimpleNameGenerator`.
pub fn generate_name(prefix: &str) -> String {
    let mut rng = rand::thread_rng();
    let cut: String = prefix.chars().take(58).collect();
    let suffix: String = (0..5).map(|_| NAME_ALPHABET[rng.gen_range(0..NAME_ALPHABET.len())] as char).collect();
    cut + &suffix
}

fn invalid(kind: &ResourceKind, name: &str, causes: Vec<FieldError>) -> ApiError {
    ApiError::Invalid { group: kind.group.into(), kind: kind.kind.into(), name: name.into(), causes }
}

/// Validates `metadata` (name, namespace, labels, annotations) for `kind`.
fn validate_meta(kind: &ResourceKind, obj: &Object, namespace: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = meta_str(obj, "name");
    if name.is_empty() {
        errs.push(FieldError::required("metadata.name", "name or generateName is required"));
    } else {
        let problems = match kind.name_rule {
            NameRule::Label => validation::dns1123_label(name),
            NameRule::Subdomain => validation::dns1123_subdomain(name),
            NameRule::Dns1035Label => validation::dns1035_label(name),
            NameRule::PathSegment => validation::path_segment_name(name),
        };
        errs.extend(problems.into_iter().map(|p| FieldError::invalid("metadata.name", name, p)));
    }
    if kind.namespaced {
        if namespace.is_empty() {
            errs.push(FieldError::required("metadata.namespace", ""));
        }
    } else if !meta_str(obj, "namespace").is_empty() {
        errs.push(FieldError::forbidden("metadata.namespace", "not allowed on this type"));
    }
    let meta = map_field(obj, "metadata");
    if let Some(labels) = meta.and_then(|m| m.get("labels")) {
        match labels.as_object() {
            Some(labels) => errs.extend(validation::labels(labels, "metadata.labels")),
            None => errs.push(FieldError::invalid("metadata.labels", labels.clone(), "must be an object")),
        }
    }
    if let Some(list) = meta.and_then(|m| m.get("finalizers")) {
        let names: Vec<&str> = list.as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        for (i, f) in names.iter().enumerate() {
            for p in validation::qualified_name(f) {
                errs.push(FieldError::invalid(format!("metadata.finalizers[{i}]"), *f, p));
            }
            if names[..i].contains(f) {
                errs.push(FieldError::duplicate(format!("metadata.finalizers[{i}]"), *f));
            }
        }
        if names.contains(&"orphan") && names.contains(&"foregroundDeletion") {
            errs.push(FieldError::invalid(
                "metadata.finalizers",
                list.clone(),
                "finalizer orphan and foregroundDeletion cannot be both set",
            ));
        }
    }
    if let Some(annotations) = meta.and_then(|m| m.get("annotations")) {
        match annotations.as_object() {
            Some(annotations) => errs.extend(validation::annotations(annotations, "metadata.annotations")),
            None => errs.push(FieldError::invalid("metadata.annotations", annotations.clone(), "must be an object")),
        }
    }
    if let Some(refs) = meta.and_then(|m| m.get("ownerReferences")) {
        errs.extend(validation::owner_references(refs));
    }
    errs
}

/// Checks that the body's namespace agrees with the URL's, and fills it in.
fn settle_namespace(kind: &ResourceKind, obj: &mut Object, namespace: &str) -> Result<(), ApiError> {
    if !kind.namespaced {
        return Ok(());
    }
    let body_ns = meta_str(obj, "namespace");
    if !body_ns.is_empty() && body_ns != namespace {
        return Err(ApiError::BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request".into(),
        ));
    }
    map_field_mut(obj, "metadata").insert("namespace".into(), namespace.into());
    Ok(())
}

/// Prepares a new object: server-set metadata, the kind's defaults, validation.
///
/// # Errors
///
/// Returns `BadRequest` when `resourceVersion` is set or the namespaces disagree, and `Invalid`
/// when validation fails.
pub fn prepare_create(kind: &ResourceKind, obj: &mut Object, namespace: &str) -> Result<(), ApiError> {
    if !meta_str(obj, "resourceVersion").is_empty() {
        return Err(ApiError::BadRequest("resourceVersion should not be set on objects to be created".into()));
    }
    settle_namespace(kind, obj, namespace)?;
    if meta_str(obj, "name").is_empty() {
        let prefix = meta_str(obj, "generateName").to_string();
        if !prefix.is_empty() {
            map_field_mut(obj, "metadata").insert("name".into(), generate_name(&prefix).into());
        }
    }
    let meta = map_field_mut(obj, "metadata");
    for server_owned in
        ["deletionTimestamp", "deletionGracePeriodSeconds", "selfLink", "managedFields", "resourceVersion"]
    {
        meta.remove(server_owned);
    }
    meta.insert("uid".into(), new_uid().into());
    meta.insert("creationTimestamp".into(), crate::clock::now_rfc3339().into());
    meta.remove("generation");
    if !kind.generation.is_empty() || kind.fields_from_schema {
        meta.insert("generation".into(), 1.into());
    }
    if kind.has_status() && kind.strategy.reset_status_on_create() {
        obj.insert("status".into(), Value::Object(Map::new()));
    }
    kind.strategy.prepare_for_create(obj);
    let mut errs = validate_meta(kind, obj, namespace);
    errs.extend(kind.strategy.validate(obj));
    if !errs.is_empty() {
        return Err(invalid(kind, meta_str(obj, "name"), errs));
    }
    Ok(())
}

/// Prepares an update of `old` to `new`: keeps what only the server sets, applies the kind's
/// rules, validates.
///
/// # Errors
///
/// Returns `Conflict` when the body's uid is not the stored one, `BadRequest` for namespace
/// mismatches, and `Invalid` when validation fails.
pub fn prepare_update(kind: &ResourceKind, new: &mut Object, old: &Object, namespace: &str) -> Result<(), ApiError> {
    settle_namespace(kind, new, namespace)?;
    let old_uid = meta_str(old, "uid").to_string();
    let new_uid = meta_str(new, "uid");
    if !new_uid.is_empty() && new_uid != old_uid {
        return Err(ApiError::Conflict {
            group: kind.group.into(),
            resource: kind.resource.into(),
            name: meta_str(new, "name").into(),
            reason: format!("Precondition failed: UID in precondition: {new_uid}, UID in object meta: {old_uid}"),
        });
    }
    let old_meta = map_field(old, "metadata");
    let meta = map_field_mut(new, "metadata");
    for kept in ["uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"] {
        match old_meta.and_then(|m| m.get(kept)) {
            Some(v) => meta.insert(kept.into(), v.clone()),
            None => meta.remove(kept),
        };
    }
    meta.remove("selfLink");
    meta.remove("managedFields");
    // Status changes only through /status.
    if kind.has_status() {
        match old.get("status") {
            Some(status) => new.insert("status".into(), status.clone()),
            None => new.remove("status"),
        };
    }
    kind.strategy.prepare_for_update(new, old);
    bump_generation(kind, new, old);
    let mut errs = validate_meta(kind, new, namespace);
    errs.extend(finalizers_while_deleting(new, old));
    errs.extend(kind.strategy.validate_update(new, old));
    if !errs.is_empty() {
        return Err(invalid(kind, meta_str(new, "name"), errs));
    }
    Ok(())
}

/// Sets `metadata.generation` to the stored one, plus one when a generation field changed.
/// Kinds whose fields come from a schema (custom resources) have a generation too, bumped by
/// a change of anything but `metadata` (and `status` when `/status` owns it), as kube's custom
/// resource strategy does.
fn bump_generation(kind: &ResourceKind, new: &mut Object, old: &Object) {
    if kind.generation.is_empty() && !kind.fields_from_schema {
        return;
    }
    let old_generation = map_field(old, "metadata").and_then(|m| m.get("generation")).and_then(Value::as_i64);
    let changed = if kind.fields_from_schema {
        let counted = |k: &String| k != "metadata" && !(k == "status" && kind.has_status());
        new.keys().chain(old.keys()).filter(|k| counted(k)).any(|k| new.get(k) != old.get(k))
    } else {
        kind.generation.iter().any(|f| new.get(*f) != old.get(*f))
    };
    let generation = old_generation.unwrap_or(1) + i64::from(changed);
    map_field_mut(new, "metadata").insert("generation".into(), generation.into());
}

fn finalizers(obj: &Object) -> Vec<&str> {
    map_field(obj, "metadata")
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|l| l.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Refuses finalizers added to an object that is being deleted, as kube does.
fn finalizers_while_deleting(new: &Object, old: &Object) -> Option<FieldError> {
    if meta_str(old, "deletionTimestamp").is_empty() {
        return None;
    }
    let old_list = finalizers(old);
    let added: Vec<&str> = finalizers(new).into_iter().filter(|f| !old_list.contains(f)).collect();
    (!added.is_empty()).then(|| {
        FieldError::forbidden(
            "metadata.finalizers",
            format!("no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"),
        )
    })
}

/// Returns whether an update of `old` to `new` completes a deletion (kube's
/// `shouldDeleteDuringUpdate`): the object is being deleted with no grace period left, and the
/// update removed its last finalizers. An update of an object that had no finalizers (a
/// terminating namespace, whose contents are still being removed) deletes nothing.
pub fn completes_deletion(new: &Object, old: &Object) -> bool {
    !meta_str(new, "deletionTimestamp").is_empty()
        && finalizers(new).is_empty()
        && !finalizers(old).is_empty()
        && map_field(new, "metadata")
            .and_then(|m| m.get("deletionGracePeriodSeconds"))
            .and_then(Value::as_i64)
            .unwrap_or(0)
            == 0
}

/// Returns the finalizers of an object.
pub fn finalizer_list(obj: &Object) -> Vec<String> {
    finalizers(obj).into_iter().map(String::from).collect()
}

/// Prepares a `/status` write: the stored object with the body's `status` (and nothing else
/// from the body: kube resets spec and metadata for status updates).
///
/// # Errors
///
/// Returns `Conflict` when the body's uid is not the stored one and `BadRequest` for a
/// namespace mismatch.
pub fn prepare_status_update(
    kind: &ResourceKind,
    body: &Object,
    old: &Object,
    namespace: &str,
) -> Result<Object, ApiError> {
    let mut check = body.clone();
    settle_namespace(kind, &mut check, namespace)?;
    let body_uid = meta_str(body, "uid");
    let old_uid = meta_str(old, "uid");
    if !body_uid.is_empty() && body_uid != old_uid {
        return Err(ApiError::Conflict {
            group: kind.group.into(),
            resource: kind.resource.into(),
            name: meta_str(old, "name").into(),
            reason: format!("Precondition failed: UID in precondition: {body_uid}, UID in object meta: {old_uid}"),
        });
    }
    let mut new = old.clone();
    match body.get("status") {
        Some(status) => new.insert("status".into(), status.clone()),
        None => new.remove("status"),
    };
    Ok(new)
}

/// Rewrites a decoded body into the stored version (a no-op for most kinds).
///
/// # Errors
///
/// The converter's, when it cannot convert (a failing conversion webhook).
pub fn to_stored_version(kind: &ResourceKind, obj: &mut Object) -> Result<(), ApiError> {
    match kind.converter {
        Some(c) => c.to_stored(obj),
        None => Ok(()),
    }
}

/// Rewrites a stored object into `kind`'s served version (a no-op for most kinds).
///
/// # Errors
///
/// As [`to_stored_version`].
pub fn to_served_version(kind: &ResourceKind, obj: &mut Object) -> Result<(), ApiError> {
    match kind.converter {
        Some(c) => c.to_served(obj),
        None => Ok(()),
    }
}

/// Whether `kind`'s writes are prepared in the version they were sent in (see
/// [`VersionConverter::prepares_served`](super::VersionConverter::prepares_served)); other
/// kinds' writes are prepared in their stored form.
pub fn prepared_as_served(kind: &ResourceKind) -> bool {
    kind.converter.is_some_and(|c| c.prepares_served())
}

/// Rewrites a decoded body into the form its write is prepared in.
///
/// # Errors
///
/// As [`to_stored_version`].
pub fn to_prepared_form(kind: &ResourceKind, obj: &mut Object) -> Result<(), ApiError> {
    if prepared_as_served(kind) {
        return Ok(());
    }
    to_stored_version(kind, obj)
}

/// Returns the stored object `old` in the form a write over it is prepared in: converted to
/// the served version only for kinds prepared as served.
///
/// # Errors
///
/// As [`to_served_version`].
pub fn stored_in_prepared_form<'a>(
    kind: &ResourceKind,
    old: &'a Object,
) -> Result<std::borrow::Cow<'a, Object>, ApiError> {
    if !prepared_as_served(kind) {
        return Ok(std::borrow::Cow::Borrowed(old));
    }
    let mut served = old.clone();
    to_served_version(kind, &mut served)?;
    Ok(std::borrow::Cow::Owned(served))
}

/// Rewrites a prepared write into the stored form (a no-op where it was prepared there).
///
/// # Errors
///
/// As [`to_stored_version`].
pub fn prepared_to_stored(kind: &ResourceKind, obj: &mut Object) -> Result<(), ApiError> {
    if prepared_as_served(kind) {
        return to_stored_version(kind, obj);
    }
    Ok(())
}

/// Decodes a stored value as `kind` serves it, with `resourceVersion` set to `revision`.
///
/// # Errors
///
/// As [`from_storage`].
pub fn from_storage_as(kind: &ResourceKind, bytes: &[u8], revision: i64) -> Result<Object, ApiError> {
    let mut obj = from_storage(bytes, revision)?;
    if let Some(c) = kind.converter {
        c.to_served_from_storage(&mut obj, revision)?;
    }
    Ok(obj)
}

/// Returns the bytes to store for `obj` (without `resourceVersion`).
pub fn to_storage(obj: &Object) -> Vec<u8> {
    // Serialised in place, the two fields skipped, rather than from a copy without them: a
    // write would otherwise copy the whole object once more only to drop it.
    serde_json::to_vec(&Stored(obj)).unwrap_or_default()
}

/// The `metadata` fields never stored (the store's revision stands for `resourceVersion`).
const UNSTORED_META: [&str; 2] = ["resourceVersion", "selfLink"];

/// The metadata fields [`to_storage`] writes.
fn stored_meta(meta: &Object) -> impl Iterator<Item = (&String, &Value)> {
    meta.iter().filter(|(k, _)| !UNSTORED_META.contains(&k.as_str()))
}

/// An object as [`to_storage`] writes it.
struct Stored<'a>(&'a Object);

/// An object's metadata without [`UNSTORED_META`].
struct StoredMeta<'a>(&'a Object);

impl serde::Serialize for Stored<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            match v {
                Value::Object(meta) if k == "metadata" => map.serialize_entry(k, &StoredMeta(meta))?,
                _ => map.serialize_entry(k, v)?,
            }
        }
        map.end()
    }
}

impl serde::Serialize for StoredMeta<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(None)?;
        for (k, v) in stored_meta(self.0) {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// Whether `new` stores as the same bytes as `old` ([`to_storage`] of each), compared as
/// values: no encoding, and it stops at the first difference.
pub fn stores_same(new: &Object, old: &Object) -> bool {
    new.len() == old.len()
        && new.iter().zip(old).all(|((nk, nv), (ok, ov))| {
            nk == ok
                && match (nv, ov) {
                    (Value::Object(n), Value::Object(o)) if nk == "metadata" => {
                        let stored = |m| stored_meta(m).collect::<Vec<_>>();
                        stored(n) == stored(o)
                    }
                    _ => nv == ov,
                }
        })
}

/// Decodes a stored value and sets its `resourceVersion` to `revision`.
///
/// # Errors
///
/// Returns `Internal` when the stored bytes are not a JSON object (another writer's format).
pub fn from_storage(bytes: &[u8], revision: i64) -> Result<Object, ApiError> {
    let mut obj: Map<String, Value> =
        serde_json::from_slice(bytes).map_err(|e| ApiError::Internal(format!("stored object is not JSON: {e}")))?;
    map_field_mut(&mut obj, "metadata").insert("resourceVersion".into(), revision.to_string().into());
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::testing::{TestKinds, CONFIGMAPS};
    use serde_json::json;

    fn obj(v: Value) -> Object {
        match v {
            Value::Object(m) => m,
            _ => Object::new(),
        }
    }

    #[test]
    fn storage_skips_revision_and_self_link_and_no_op_check_agrees_with_bytes() {
        let base = obj(json!({"kind": "ConfigMap", "data": {"k": "v"},
            "metadata": {"name": "a", "resourceVersion": "5", "selfLink": "/x", "uid": "u"}}));
        assert_eq!(
            String::from_utf8(to_storage(&base)).unwrap_or_default(),
            r#"{"data":{"k":"v"},"kind":"ConfigMap","metadata":{"name":"a","uid":"u"}}"#
        );
        let variants = [
            json!({"kind": "ConfigMap", "data": {"k": "v"}, "metadata": {"name": "a", "resourceVersion": "9", "uid": "u"}}),
            json!({"kind": "ConfigMap", "data": {"k": "w"}, "metadata": {"name": "a", "uid": "u"}}),
            json!({"kind": "ConfigMap", "data": {"k": "v"}, "metadata": {"name": "a", "uid": "v"}}),
            json!({"kind": "ConfigMap", "data": {"k": "v"}, "metadata": {"name": "a"}}),
            json!({"kind": "ConfigMap", "data": {"k": "v"}, "metadata": "a"}),
            json!({"kind": "ConfigMap", "data": {"k": "v"}}),
            json!({"kind": "ConfigMap", "data": {"k": "v"}, "metadata": {"name": "a", "uid": "u"}, "x": 1}),
        ];
        for v in variants {
            let other = obj(v);
            let same = to_storage(&other) == to_storage(&base);
            assert_eq!(stores_same(&other, &base), same, "{other:?}");
            assert_eq!(stores_same(&base, &other), same, "{other:?}");
        }
        assert!(stores_same(&obj(json!({"metadata": {"resourceVersion": "1"}})), &obj(json!({"metadata": {}}))));
    }

    #[test]
    fn decode_defaults_type_and_handles_unknown_fields() {
        let body = br#"{"metadata":{"name":"a","bogus":1},"data":{"k":"v"},"extra":true}"#;
        let (obj, warnings) =
            decode(&TestKinds, &CONFIGMAPS, "application/json", body, FieldValidation::Warn).expect("decode");
        assert_eq!(obj["kind"], "ConfigMap");
        assert_eq!(obj["apiVersion"], "v1");
        assert!(!obj.contains_key("extra"));
        // In document order, as kube lists them.
        assert_eq!(warnings, vec![r#"unknown field "metadata.bogus""#, r#"unknown field "extra""#]);
        let err =
            decode(&TestKinds, &CONFIGMAPS, "application/json", body, FieldValidation::Strict).expect_err("strict");
        assert_eq!(
            err.to_string(),
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: \
             unknown field \"metadata.bogus\", unknown field \"extra\""
        );
        let err =
            decode(&TestKinds, &CONFIGMAPS, "application/json", b"{not json", FieldValidation::Warn).expect_err("bad");
        assert!(matches!(err, ApiError::BadRequest(_)));
        let err = decode(&TestKinds, &CONFIGMAPS, "application/json", br#"{"kind":"Secret"}"#, FieldValidation::Warn);
        assert!(err.is_err());
    }

    #[test]
    fn null_labels_and_annotations_decode_as_empty_strings() {
        let body = br#"{"metadata":{"name":"a","labels":{"l":null,"m":"x"},"annotations":{"a":null}}}"#;
        let (obj, _) =
            decode(&TestKinds, &CONFIGMAPS, "application/json", body, FieldValidation::Strict).expect("decode");
        assert_eq!(obj["metadata"]["labels"], json!({"l": "", "m": "x"}));
        assert_eq!(obj["metadata"]["annotations"], json!({"a": ""}));
        // A patch's result is decoded the same way.
        let patched = json!({"metadata": {"name": "a", "annotations": {"b": null}}});
        let (obj, _) = decode_value(&TestKinds, &CONFIGMAPS, patched, FieldValidation::Strict).expect("decode");
        assert_eq!(obj["metadata"]["annotations"], json!({"b": ""}));
    }

    #[test]
    fn create_sets_server_fields_and_validates_names() {
        let mut obj = json!({"metadata": {"generateName": "cm-"}}).as_object().cloned().expect("obj");
        prepare_create(&CONFIGMAPS, &mut obj, "default").expect("valid");
        let name = meta_str(&obj, "name");
        assert!(name.starts_with("cm-") && name.len() == 8, "{name}");
        assert_eq!(meta_str(&obj, "namespace"), "default");
        assert_eq!(meta_str(&obj, "uid").len(), 36);
        let mut bad = json!({"metadata": {"name": "Bad_Name"}}).as_object().cloned().expect("obj");
        let err = prepare_create(&CONFIGMAPS, &mut bad, "default").expect_err("invalid");
        assert!(err
            .to_string()
            .starts_with(r#"ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name""#));
        let mut rv = json!({"metadata": {"name": "a", "resourceVersion": "5"}}).as_object().cloned().expect("obj");
        assert!(matches!(prepare_create(&CONFIGMAPS, &mut rv, "default"), Err(ApiError::BadRequest(_))));
    }

    #[test]
    fn only_removing_the_last_finalizer_completes_a_deletion() {
        let obj = |v: Value| v.as_object().cloned().expect("obj");
        let held = obj(json!({"metadata": {"deletionTimestamp": "t", "deletionGracePeriodSeconds": 0,
            "finalizers": ["a"]}}));
        let released = obj(json!({"metadata": {"deletionTimestamp": "t", "deletionGracePeriodSeconds": 0}}));
        assert!(completes_deletion(&released, &held));
        // A terminating namespace has no finalizers in metadata: its updates delete nothing.
        assert!(!completes_deletion(&released, &released));
        let graceful = obj(json!({"metadata": {"deletionTimestamp": "t", "deletionGracePeriodSeconds": 30}}));
        assert!(!completes_deletion(&graceful, &held));
    }

    #[test]
    fn finalizer_names_are_checked() {
        let mut obj = json!({"metadata": {"name": "a", "finalizers": ["example.com/x", "bad name", "example.com/x"]}})
            .as_object()
            .cloned()
            .expect("obj");
        let err = prepare_create(&CONFIGMAPS, &mut obj, "default").expect_err("invalid");
        let ApiError::Invalid { causes, .. } = err else { panic!("not Invalid: {err}") };
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["metadata.finalizers[1]", "metadata.finalizers[2]"]);
    }

    #[test]
    fn storage_form_has_no_resource_version() {
        let obj = json!({"metadata": {"name": "a", "resourceVersion": "7"}}).as_object().cloned().expect("obj");
        let stored = to_storage(&obj);
        assert_eq!(stored, br#"{"metadata":{"name":"a"}}"#.to_vec());
        assert_eq!(meta_str(&from_storage(&stored, 9).expect("read"), "resourceVersion"), "9");
    }
}
