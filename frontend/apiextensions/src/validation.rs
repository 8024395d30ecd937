//! [`DefinitionAdmission`]: the checks kube's CustomResourceDefinition strategy makes, run on
//! the built-in API's writes of definitions through the generic server's admission seam. Every
//! finding is reported at once, with kube's paths and texts.

use serde_json::Value;

use ballast_apiserver::error::FieldError;
use ballast_apiserver::registry::admission::Admission;
use ballast_apiserver::registry::strategy::Object;
use ballast_apiserver::registry::validation::{dns1035_label, dns1123_label, dns1123_subdomain};
use ballast_apiserver::registry::ResourceKind;

use crate::definition::{Definition, Version};
use crate::jsonpath::Path;
use crate::schema::{depth, MAX_SCHEMA_DEPTH};

/// The annotation protected groups need.
pub const API_APPROVED: &str = "api-approved.kubernetes.io";

/// Validation of CustomResourceDefinitions.
#[derive(Debug, Default)]
pub struct DefinitionAdmission;

impl Admission for DefinitionAdmission {
    fn handles(&self, kind: &ResourceKind) -> bool {
        kind.group == "apiextensions.k8s.io" && kind.resource == "customresourcedefinitions"
    }

    fn validate_create(&self, obj: &Object) -> Vec<FieldError> {
        validate(&Value::Object(obj.clone()), None)
    }

    fn validate_update(&self, new: &Object, old: &Object) -> Vec<FieldError> {
        validate(&Value::Object(new.clone()), Some(&Value::Object(old.clone())))
    }

    fn finalizers_on_delete(&self, _obj: &Object) -> Vec<String> {
        vec![CLEANUP_FINALIZER.to_string()]
    }
}

/// The finalizer a deleted definition keeps until its custom resources are gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

fn is_protected(group: &str) -> bool {
    group == "k8s.io" || group.ends_with(".k8s.io") || group == "kubernetes.io" || group.ends_with(".kubernetes.io")
}

/// (state, finding) of the approval annotation: `None` when approved or bypassed.
fn approval(obj: &Value) -> Option<FieldError> {
    let field = format!("metadata.annotations[{API_APPROVED}]");
    let annotation = obj["metadata"]["annotations"][API_APPROVED].as_str().unwrap_or("");
    if annotation.is_empty() {
        return Some(FieldError::required(
            field,
            format!("protected groups must have approval annotation {API_APPROVED:?}, see https://github.com/kubernetes/enhancements/pull/1111"),
        ));
    }
    if annotation.starts_with("unapproved") {
        return None;
    }
    let url_ok = annotation
        .split_once("://")
        .is_some_and(|(scheme, rest)| !scheme.is_empty() && !rest.split('/').next().unwrap_or("").is_empty());
    (!url_ok).then(|| {
        FieldError::invalid(
            field,
            annotation,
            format!("protected groups must have approval annotation {API_APPROVED:?} with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111"),
        )
    })
}

/// Validates a definition (`old` is the stored one on update).
pub fn validate(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let def = Definition::from_json(obj);
    let mut errs = Vec::new();
    let required_name = format!("{}.{}", def.names.plural, def.group);
    if !def.name.is_empty() && def.name != required_name {
        errs.push(FieldError::invalid("metadata.name", def.name.clone(), "must be spec.names.plural+\".\"+spec.group"));
    }
    let spec = &obj["spec"];
    match spec["group"].as_str().unwrap_or("") {
        "" => errs.push(FieldError::required("spec.group", "")),
        g => {
            let bad = dns1123_subdomain(g);
            if !bad.is_empty() {
                errs.push(FieldError::invalid("spec.group", g, bad.join(",")));
            } else if !g.contains('.') {
                errs.push(FieldError::invalid("spec.group", g, "should be a domain with at least one dot"));
            }
        }
    }
    match spec["scope"].as_str().unwrap_or("") {
        "" => errs.push(FieldError::required("spec.scope", "")),
        "Cluster" | "Namespaced" => {}
        other => errs.push(FieldError::not_supported("spec.scope", other, &["Cluster", "Namespaced"])),
    }
    let versions_json = spec["versions"].clone();
    let mut storage = 0;
    let mut seen: Vec<&str> = Vec::new();
    let mut unique = true;
    // Versions with one schema between them have it checked once, where kube's internal form
    // holds it (`spec.validation`).
    let shared = def.versions.iter().all(|v| v.schema.is_some() && v.schema == def.versions[0].schema);
    // Rules the stored definition holds are checked as stored expressions, the others as new.
    let preexisting = crate::cel_admit::Preexisting::of(old);
    for (i, v) in def.versions.iter().enumerate() {
        if v.storage {
            storage += 1;
        }
        if seen.contains(&v.name.as_str()) {
            unique = false;
        }
        seen.push(&v.name);
        let bad = dns1035_label(&v.name);
        if !bad.is_empty() {
            errs.push(FieldError::invalid(format!("spec.versions[{i}].name"), v.name.clone(), bad.join(",")));
        }
        let schema_path = match (shared, i) {
            (false, _) => Some(format!("spec.versions[{i}].schema.openAPIV3Schema")),
            (true, 0) => Some("spec.validation.openAPIV3Schema".to_string()),
            (true, _) => None,
        };
        validate_version(v, &format!("spec.versions[{i}]"), schema_path.as_deref(), &preexisting, &mut errs);
    }
    if def.versions.is_empty() {
        errs.push(FieldError::invalid(
            "spec.versions",
            versions_json.clone(),
            "must have exactly one version marked as storage version",
        ));
    } else {
        if !unique {
            errs.push(FieldError::invalid("spec.versions", versions_json.clone(), "must contain unique version names"));
        }
        if storage != 1 {
            errs.push(FieldError::invalid(
                "spec.versions",
                versions_json,
                "must have exactly one version marked as storage version",
            ));
        }
    }
    validate_names(&spec["names"], &def, &mut errs);
    let old_bundle_invalid =
        old.is_some_and(|o| ca_bundle_error(&o["spec"]["conversion"]["webhook"]["clientConfig"]).is_some());
    validate_conversion(&spec["conversion"], !old_bundle_invalid, &mut errs);
    if let Some(old) = old {
        // Names and scope may change only while not yet accepted; kube refuses a scope change.
        if old["spec"]["scope"] != spec["scope"] {
            errs.push(FieldError::invalid("spec.scope", spec["scope"].clone(), "field is immutable"));
        }
    }
    if is_protected(&def.group) {
        let was = old.map(approval);
        let now = approval(obj);
        // An unchanged approval state never fails an update (kube).
        let unchanged = was.as_ref().is_some_and(|w| w.as_ref().map(|e| &e.kind) == now.as_ref().map(|e| &e.kind));
        if !unchanged {
            errs.extend(now);
        }
    }
    // The list-map and list-set rules on items and keys bind a definition only if its stored
    // version already kept them (kube's ratchet): one stored before they were checked can
    // still be updated.
    if let Some(old) = old {
        if !errs.is_empty() && validate(old, None).iter().any(is_list_type_rule) {
            errs.retain(|e| !is_list_type_rule(e));
        }
    }
    errs
}

/// Whether `e` is one of the list-map and list-set rules on a list's items and keys.
fn is_list_type_rule(e: &FieldError) -> bool {
    let text = e.to_string();
    text.contains("x-kubernetes-list-type is map")
        || text.contains("x-kubernetes-list-type is set")
        || text.contains("this property is in x-kubernetes-list-map-keys")
}

fn validate_names(names: &Value, def: &Definition, errs: &mut Vec<FieldError>) {
    let n = &def.names;
    if n.plural.is_empty() {
        errs.push(FieldError::required("spec.names.plural", ""));
    } else {
        let bad = dns1123_label(&n.plural);
        if !bad.is_empty() {
            errs.push(FieldError::invalid("spec.names.plural", n.plural.clone(), bad.join(",")));
        }
    }
    if names["singular"].as_str().is_some_and(|s| !s.is_empty()) {
        let bad = dns1123_label(&n.singular);
        if !bad.is_empty() {
            errs.push(FieldError::invalid("spec.names.singular", n.singular.clone(), bad.join(",")));
        }
    }
    if n.kind.is_empty() {
        errs.push(FieldError::required("spec.names.kind", ""));
    } else {
        let bad = dns1035_label(&n.kind.to_lowercase());
        if !bad.is_empty() {
            errs.push(FieldError::invalid(
                "spec.names.kind",
                n.kind.clone(),
                format!("may have mixed case, but should otherwise match: {}", bad.join(",")),
            ));
        }
    }
    if !n.kind.is_empty() && n.kind == n.list_kind {
        errs.push(FieldError::invalid(
            "spec.names.listKind",
            n.list_kind.clone(),
            "kind and listKind may not be the same",
        ));
    }
    for (i, s) in n.short_names.iter().enumerate() {
        let bad = dns1123_label(s);
        if !bad.is_empty() {
            errs.push(FieldError::invalid(format!("spec.names.shortNames[{i}]"), s.clone(), bad.join(",")));
        }
    }
    for (i, c) in n.categories.iter().enumerate() {
        let bad = dns1123_label(c);
        if !bad.is_empty() {
            errs.push(FieldError::invalid(format!("spec.names.categories[{i}]"), c.clone(), bad.join(",")));
        }
    }
}

/// The `ConversionReview` versions this server sends.
const REVIEW_VERSIONS: [&str; 2] = ["v1", "v1beta1"];

/// kube's checks of `spec.conversion`. Its paths are those of kube's internal type
/// (`webhookClientConfig`, `conversionReviewVersions` directly under `conversion`), as kube
/// reports them for v1 definitions too.
fn validate_conversion(conversion: &Value, check_ca_bundle: bool, errs: &mut Vec<FieldError>) {
    if conversion.is_null() {
        return;
    }
    let path = "spec.conversion";
    let strategy = conversion["strategy"].as_str().unwrap_or("");
    match strategy {
        "" => errs.push(FieldError::required(format!("{path}.strategy"), "")),
        "None" | "Webhook" => {}
        other => errs.push(FieldError::not_supported(format!("{path}.strategy"), other, &["None", "Webhook"])),
    }
    let webhook = &conversion["webhook"];
    let config = webhook.get("clientConfig").filter(|c| !c.is_null());
    let versions: Vec<Value> = webhook["conversionReviewVersions"].as_array().cloned().unwrap_or_default();
    let client_path = format!("{path}.webhookClientConfig");
    if strategy != "Webhook" {
        if config.is_some() {
            errs.push(FieldError::forbidden(client_path, "should not be set when strategy is not set to Webhook"));
        }
        if !versions.is_empty() {
            errs.push(FieldError::forbidden(
                format!("{path}.conversionReviewVersions"),
                "should not be set when strategy is not set to Webhook",
            ));
        }
        return;
    }
    match config {
        None => errs.push(FieldError::required(client_path.clone(), "required when strategy is set to Webhook")),
        Some(cc) => {
            let url = cc["url"].as_str();
            let service = cc.get("service").filter(|s| !s.is_null());
            match (url, service) {
                (Some(url), None) => validate_webhook_url(&format!("{client_path}.url"), url, errs),
                (None, Some(svc)) => validate_webhook_service(&format!("{client_path}.service"), svc, errs),
                _ => errs.push(FieldError::required(client_path.clone(), "exactly one of url or service is required")),
            }
            if check_ca_bundle {
                errs.extend(
                    ca_bundle_error(cc)
                        .map(|(value, e)| FieldError::invalid(format!("{client_path}.caBundle"), value, e)),
                );
            }
        }
    }
    let versions_path = format!("{path}.conversionReviewVersions");
    if versions.is_empty() {
        errs.push(FieldError::required(versions_path, ""));
        return;
    }
    let mut seen: Vec<&str> = Vec::new();
    let mut accepted = false;
    for (i, v) in versions.iter().enumerate() {
        let v = v.as_str().unwrap_or("");
        if seen.contains(&v) {
            errs.push(FieldError::invalid(format!("{versions_path}[{i}]"), v, "duplicate version"));
            continue;
        }
        seen.push(v);
        for e in dns1035_label(v) {
            errs.push(FieldError::invalid(format!("{versions_path}[{i}]"), v, e));
        }
        accepted |= REVIEW_VERSIONS.contains(&v);
    }
    if !accepted {
        errs.push(FieldError::invalid(
            versions_path,
            Value::Array(versions.clone()),
            format!("must include at least one of {}", REVIEW_VERSIONS.join(", ")),
        ));
    }
}

/// A `caBundle` that holds no PEM certificate: its value and kube's complaint.
fn ca_bundle_error(client_config: &Value) -> Option<(String, String)> {
    use base64::Engine as _;
    let encoded = client_config["caBundle"].as_str().filter(|b| !b.is_empty())?;
    let decoded = base64::engine::general_purpose::STANDARD.decode(encoded).unwrap_or_default();
    let has_cert = decoded.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----");
    (!has_cert).then(|| {
        (encoded.to_string(), "unable to load root certificates: unable to parse bytes as PEM block".to_string())
    })
}

/// kube's checks of a webhook URL.
fn validate_webhook_url(path: &str, url: &str, errs: &mut Vec<FieldError>) {
    const FORM: &str = "; desired format: https://host[/path]";
    let uri: http::Uri = match url.parse() {
        Ok(u) => u,
        Err(e) => {
            errs.push(FieldError::required(path, format!("url must be a valid URL: {e}{FORM}")));
            return;
        }
    };
    let scheme = uri.scheme_str().unwrap_or("");
    if scheme != "https" {
        errs.push(FieldError::invalid(path, scheme, format!("'https' is the only allowed URL scheme{FORM}")));
    }
    let authority = uri.authority().map(|a| a.as_str()).unwrap_or("");
    let (user, host) = authority.rsplit_once('@').map_or(("", authority), |(u, h)| (u, h));
    if host.is_empty() {
        errs.push(FieldError::invalid(path, host, format!("host must be specified{FORM}")));
    }
    if !user.is_empty() {
        errs.push(FieldError::invalid(path, user, "user information is not permitted in the URL"));
    }
    if let Some(query) = uri.query().filter(|q| !q.is_empty()) {
        errs.push(FieldError::invalid(path, query, "query parameters are not permitted in the URL"));
    }
}

/// kube's checks of a webhook Service reference.
fn validate_webhook_service(path: &str, svc: &Value, errs: &mut Vec<FieldError>) {
    if svc["name"].as_str().unwrap_or("").is_empty() {
        errs.push(FieldError::required(format!("{path}.name"), ""));
    }
    if svc["namespace"].as_str().unwrap_or("").is_empty() {
        errs.push(FieldError::required(format!("{path}.namespace"), ""));
    }
    if let Some(port) = svc.get("port").filter(|p| !p.is_null()) {
        if !port.as_i64().is_some_and(|p| (1..=65535).contains(&p)) {
            errs.push(FieldError::invalid(
                format!("{path}.port"),
                port.clone(),
                "port is not valid: must be between 1 and 65535, inclusive",
            ));
        }
    }
    let Some(url_path) = svc["path"].as_str() else { return };
    if url_path.is_empty() || url_path == "/" {
        return;
    }
    let field = format!("{path}.path");
    if url_path == "//" {
        errs.push(FieldError::invalid(field, url_path, "segment[0] may not be empty"));
        return;
    }
    if !url_path.starts_with('/') {
        errs.push(FieldError::invalid(field.clone(), url_path, "must start with a '/'"));
    }
    let rest = url_path.get(1..).unwrap_or("");
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    for (i, step) in rest.split('/').enumerate() {
        if step.is_empty() {
            errs.push(FieldError::invalid(field.clone(), url_path, format!("segment[{i}] may not be empty")));
            continue;
        }
        for e in dns1123_subdomain(step) {
            errs.push(FieldError::invalid(field.clone(), url_path, format!("segment[{i}]: {e}")));
        }
    }
}

const COLUMN_TYPES: &str = "boolean,date,integer,number,string";
const COLUMN_FORMATS: &str = "byte,date,date-time,double,float,int32,int64,name,password";

/// Checks version `v` at `path`, and its schema at `schema_path` unless that is checked
/// elsewhere (`None`).
fn validate_version(
    v: &Version,
    path: &str,
    schema_path: Option<&str>,
    preexisting: &crate::cel_admit::Preexisting,
    errs: &mut Vec<FieldError>,
) {
    let Some(schema) = &v.schema else {
        errs.push(FieldError::required(format!("{path}.schema.openAPIV3Schema"), ""));
        return;
    };
    if let Some(schema_path) = schema_path {
        validate_schema(schema, schema_path, preexisting, errs);
    }
    validate_columns(v, path, errs);
}

fn validate_schema(
    schema: &Value,
    schema_path: &str,
    preexisting: &crate::cel_admit::Preexisting,
    errs: &mut Vec<FieldError>,
) {
    let schema_path = schema_path.to_string();
    let before = errs.len();
    if depth(schema) > MAX_SCHEMA_DEPTH {
        errs.push(FieldError::forbidden(
            schema_path,
            format!("must not be nested more than {MAX_SCHEMA_DEPTH} levels deep"),
        ));
        return;
    }
    match schema["type"].as_str() {
        None | Some("") => {
            errs.push(FieldError::required(format!("{schema_path}.type"), "must not be empty at the root"))
        }
        Some("object") => {}
        Some(other) => {
            errs.push(FieldError::invalid(format!("{schema_path}.type"), other, "must be object at the root"))
        }
    }
    if schema["nullable"] == true {
        errs.push(FieldError::forbidden(format!("{schema_path}.nullable"), "nullable cannot be true at the root"));
    }
    if schema.get("additionalProperties").is_some_and(|a| a.is_object() || a == true) {
        errs.push(FieldError::forbidden(format!("{schema_path}.additionalProperties"), "must not be used at the root"));
    }
    object_invariants(schema, &schema_path, true, errs);
    structural(schema, &schema_path, errs);
    if errs.len() == before {
        let root = Around { resource: schema, steps: Vec::new(), inside_meta: false };
        defaults(schema, &schema_path, &root, errs);
    }
    // Rules are compiled against a schema kube accepts as structural, as kube does.
    if errs.len() == before {
        crate::cel_admit::check_schema(schema, &schema_path, preexisting, errs);
    }
}

fn validate_columns(v: &Version, path: &str, errs: &mut Vec<FieldError>) {
    for (i, c) in v.columns.iter().enumerate() {
        let col = format!("{path}.additionalPrinterColumns[{i}]");
        if c.name.is_empty() {
            errs.push(FieldError::required(format!("{col}.name"), ""));
        }
        if c.type_.is_empty() {
            errs.push(FieldError::required(format!("{col}.type"), format!("must be one of {COLUMN_TYPES}")));
        } else if !COLUMN_TYPES.split(',').any(|t| t == c.type_) {
            errs.push(FieldError::invalid(
                format!("{col}.type"),
                c.type_.clone(),
                format!("must be one of {COLUMN_TYPES}"),
            ));
        }
        if !c.format.is_empty() && !COLUMN_FORMATS.split(',').any(|f| f == c.format) {
            errs.push(FieldError::invalid(
                format!("{col}.format"),
                c.format.clone(),
                format!("must be one of {COLUMN_FORMATS}"),
            ));
        }
        if c.json_path.is_empty() {
            errs.push(FieldError::required(format!("{col}.JSONPath"), ""));
        } else if let Err(e) = Path::parse(&c.json_path) {
            errs.push(FieldError::invalid(
                format!("{col}.JSONPath"),
                c.json_path.clone(),
                format!("must be a simple json path: {e}"),
            ));
        }
    }
    for (i, f) in v.selectable_fields.iter().enumerate() {
        let field = format!("{path}.selectableFields[{i}].jsonPath");
        let simple =
            Path::parse(f).ok().and_then(|p| p.fields().map(|f| f.iter().map(|s| s.to_string()).collect::<Vec<_>>()));
        match simple {
            None => errs.push(FieldError::invalid(field, f.clone(), "is an invalid path: must be a simple path")),
            Some(parts) if parts.first().is_some_and(|p| p == "metadata") => {
                errs.push(FieldError::invalid(field, f.clone(), "must not point to fields in metadata"));
            }
            Some(_) => {}
        }
    }
}

/// kube's structural-schema rules that matter most: every specified field and item has a type;
/// arrays have items; list-map keys are item properties.
fn structural(schema: &Value, path: &str, errs: &mut Vec<FieldError>) {
    crate::rules::compile_errors(schema, path, errs);
    if let Some(props) = schema["properties"].as_object() {
        if schema.get("additionalProperties").is_some_and(|a| a.is_object()) {
            errs.push(FieldError::forbidden(
                format!("{path}.additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        for (key, sub) in props {
            let sub_path = format!("{path}.properties[{key}]");
            let untyped = sub["type"].as_str().is_none_or(str::is_empty);
            if untyped
                && sub["x-kubernetes-int-or-string"] != true
                && sub["x-kubernetes-preserve-unknown-fields"] != true
            {
                errs.push(FieldError::required(
                    format!("{sub_path}.type"),
                    "must not be empty for specified object fields",
                ));
            }
            object_invariants(sub, &sub_path, false, errs);
            structural(sub, &sub_path, errs);
        }
    }
    if let Some(additional) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        object_invariants(additional, &format!("{path}.additionalProperties"), false, errs);
        structural(additional, &format!("{path}.additionalProperties"), errs);
    }
    if schema["type"] == "array" {
        match schema.get("items").filter(|i| i.is_object()) {
            None => errs.push(FieldError::required(format!("{path}.items"), "must be specified")),
            Some(items) => {
                let untyped = items["type"].as_str().is_none_or(str::is_empty);
                if untyped
                    && items["x-kubernetes-int-or-string"] != true
                    && items["x-kubernetes-preserve-unknown-fields"] != true
                {
                    errs.push(FieldError::required(
                        format!("{path}.items.type"),
                        "must not be empty for specified array items",
                    ));
                }
                object_invariants(items, &format!("{path}.items"), false, errs);
                structural(items, &format!("{path}.items"), errs);
            }
        }
    }
    match schema["x-kubernetes-list-type"].as_str() {
        None | Some("atomic" | "set") => {}
        Some("map") => {
            let keys = crate::schema::list_map_keys(schema);
            if keys.is_empty() {
                errs.push(FieldError::required(
                    format!("{path}.x-kubernetes-list-map-keys"),
                    "must not be empty if x-kubernetes-list-type is map",
                ));
            }
            let item_props = schema["items"]["properties"].as_object();
            if !keys.iter().all(|k| item_props.is_some_and(|p| p.contains_key(*k))) {
                errs.push(FieldError::invalid(
                    format!("{path}.x-kubernetes-list-map-keys"),
                    schema["x-kubernetes-list-map-keys"].clone(),
                    "entries must all be names of item properties",
                ));
            }
            list_map_items(schema, &keys, path, errs);
        }
        Some(other) => errs.push(FieldError::not_supported(
            format!("{path}.x-kubernetes-list-type"),
            other,
            &["atomic", "set", "map"],
        )),
    }
    const OPENAPI_TYPES: [&str; 6] = ["array", "boolean", "integer", "number", "object", "string"];
    if let Some(t) = schema["type"].as_str().filter(|t| !t.is_empty() && !OPENAPI_TYPES.contains(t)) {
        errs.push(FieldError::not_supported(format!("{path}.type"), t, &OPENAPI_TYPES));
    }
    let map_keys_given = schema["x-kubernetes-list-map-keys"].as_array().is_some_and(|k| !k.is_empty());
    match schema["x-kubernetes-list-type"].as_str() {
        Some("map") => {}
        _ if !map_keys_given => {}
        None => errs.push(FieldError::required(
            format!("{path}.x-kubernetes-list-type"),
            "must be map if x-kubernetes-list-map-keys is non-empty",
        )),
        Some(other) => errs.push(FieldError::invalid(
            format!("{path}.x-kubernetes-list-type"),
            other,
            "must be map if x-kubernetes-list-map-keys is non-empty",
        )),
    }
    if schema["x-kubernetes-list-type"] == "set" && schema["items"]["nullable"] == true {
        errs.push(FieldError::forbidden(
            format!("{path}.items.nullable"),
            "cannot be nullable when x-kubernetes-list-type is set",
        ));
    }
    for (field, text) in [
        ("id", "id is not supported"),
        ("additionalItems", "additionalItems is not supported"),
        ("patternProperties", "patternProperties is not supported"),
        ("definitions", "definitions is not supported"),
    ] {
        let given = schema.get(field).is_some_and(|v| match v {
            Value::String(s) => !s.is_empty(),
            Value::Object(m) => field == "additionalItems" || !m.is_empty(),
            Value::Null => false,
            _ => true,
        });
        if given {
            errs.push(FieldError::forbidden(format!("{path}.{field}"), text));
        }
    }
    if let Some(pattern) = schema["pattern"].as_str() {
        if let Err(e) = regex::Regex::new(pattern) {
            errs.push(FieldError::invalid(
                format!("{path}.pattern"),
                pattern,
                format!("must be a valid regular expression, but isn't: {e}"),
            ));
        }
    }
    // An int-or-string may spell its two types out as `anyOf: [{type: integer}, {type:
    // string}]` (directly or in its first `allOf`), as CRD generators write every quantity:
    // kube lets those types stand.
    let int_or_string = schema["x-kubernetes-int-or-string"] == true;
    if let Some(not) = schema.get("not").filter(|n| n.is_object()) {
        structural_value_validation(not, &format!("{path}.not"), errs);
    }
    for combinator in ["allOf", "anyOf", "oneOf"] {
        for (i, sub) in schema[combinator].as_array().into_iter().flatten().enumerate() {
            let at = format!("{path}.{combinator}[{i}]");
            if int_or_string && combinator == "anyOf" && is_int_or_string_any_of(schema) {
                continue;
            }
            if int_or_string && combinator == "allOf" && i == 0 && is_int_or_string_any_of(sub) {
                let mut rest = sub.clone();
                if let Some(m) = rest.as_object_mut() {
                    m.remove("anyOf");
                }
                structural_value_validation(&rest, &at, errs);
                continue;
            }
            structural_value_validation(sub, &at, errs);
        }
    }
}

/// Whether `schema`'s `anyOf` is exactly `[{type: integer}, {type: string}]`.
fn is_int_or_string_any_of(schema: &Value) -> bool {
    let typed = |s: &Value, t: &str| s.as_object().is_some_and(|m| m.len() == 1) && s["type"] == t;
    schema["anyOf"].as_array().is_some_and(|a| a.len() == 2 && typed(&a[0], "integer") && typed(&a[1], "string"))
}

/// kube's requirements on the items of a list of type map: objects, not nullable, whose key
/// properties are scalars, named once, each required or defaulted and not nullable.
fn list_map_items(schema: &Value, keys: &[&str], path: &str, errs: &mut Vec<FieldError>) {
    let items = &schema["items"];
    if !items.is_object() {
        errs.push(FieldError::required(format!("{path}.items"), "must have a schema if x-kubernetes-list-type is map"));
        return;
    }
    let item_type = items["type"].as_str().unwrap_or("");
    if item_type != "object" {
        errs.push(FieldError::invalid(
            format!("{path}.items.type"),
            item_type,
            "must be object if parent array's x-kubernetes-list-type is map",
        ));
        return;
    }
    if items["nullable"] == true {
        errs.push(FieldError::forbidden(
            format!("{path}.items.nullable"),
            "cannot be nullable when x-kubernetes-list-type is map",
        ));
    }
    let required: Vec<&str> = items["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    for (i, key) in keys.iter().enumerate() {
        let key_path = format!("{path}.items.properties[{key}]");
        if let Some(prop) = items["properties"].get(*key) {
            if matches!(prop["type"].as_str(), Some("array" | "object")) {
                // kube shows the items' type here, not the key's.
                errs.push(FieldError::invalid(
                    format!("{key_path}.type"),
                    item_type,
                    "must be a scalar type if parent array's x-kubernetes-list-type is map",
                ));
            }
            if !required.contains(key) && prop.get("default").is_none_or(Value::is_null) {
                errs.push(FieldError::required(
                    format!("{key_path}.default"),
                    "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
                ));
            }
            if prop["nullable"] == true {
                errs.push(FieldError::forbidden(
                    format!("{key_path}.nullable"),
                    "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                ));
            }
        }
        if keys[..i].contains(key) {
            errs.push(FieldError::invalid(
                format!("{path}.x-kubernetes-list-map-keys"),
                schema["x-kubernetes-list-map-keys"].clone(),
                "must not contain duplicate entries",
            ));
        }
    }
}

/// kube's checks of `default`s in a structural schema: each holds no field the schema would
/// prune, leaves every embedded resource in it with decodable and valid `apiVersion`, `kind`
/// and `metadata`, and is valid against its node. A default inside the metadata (or
/// `apiVersion`, `kind`) of the object or of an embedded resource is checked as what it
/// makes of that resource: plugged into an object of kind `validation/v1` `Validation`
/// whose metadata must then decode and validate, and against its node; such a default is
/// not checked for unknown fields (metadata drops them). `additionalProperties` are not
/// followed, as kube forbids defaults there.
fn defaults(schema: &Value, path: &str, around: &Around<'_>, errs: &mut Vec<FieldError>) {
    let fresh;
    let around = if schema["x-kubernetes-embedded-resource"] == true {
        fresh = Around { resource: schema, steps: Vec::new(), inside_meta: false };
        &fresh
    } else {
        around
    };
    // No steps: this node is the root or an embedded resource (kube counts the root as one).
    let resource_here = around.steps.is_empty();
    if let Some(default) = schema.get("default").filter(|d| !d.is_null()) {
        let at = format!("{path}.default");
        if around.inside_meta {
            let surrounding = around.surround(default.clone());
            let meta = crate::object_meta::errors(around.resource, &surrounding, "", true);
            if meta.is_empty() {
                errs.extend(crate::schema::default_value_errors(schema, default, &at));
            } else {
                let detail = format!("must result in valid metadata: {}", crate::object_meta::aggregate(&meta));
                errs.push(FieldError::invalid(at, default.clone(), detail));
            }
        } else {
            errs.extend(crate::schema::default_unknown_fields(schema, default, &at));
            let meta = crate::object_meta::errors(schema, default, &at, resource_here);
            if meta.is_empty() {
                errs.extend(crate::schema::default_value_errors(schema, default, &at));
            } else {
                errs.extend(meta);
            }
        }
    }
    if let Some(items) = schema.get("items").filter(|i| i.is_object()) {
        defaults(items, &format!("{path}.items"), &around.step(Step::Index, false), errs);
    }
    for (key, sub) in schema["properties"].as_object().into_iter().flatten() {
        let into_meta = resource_here && matches!(key.as_str(), "metadata" | "apiVersion" | "kind");
        defaults(sub, &format!("{path}.properties[{key}]"), &around.step(Step::Child(key), into_meta), errs);
    }
}

/// One step from an embedded resource (or the root) down to a schema node.
#[derive(Debug, Clone, Copy)]
enum Step<'a> {
    Child(&'a str),
    Index,
}

/// Where [`defaults`] is: the nearest embedded resource's schema (the root's at first), the
/// steps from it, and whether they went into its metadata.
#[derive(Debug, Clone)]
struct Around<'a> {
    resource: &'a Value,
    steps: Vec<Step<'a>>,
    inside_meta: bool,
}

impl<'a> Around<'a> {
    fn step(&self, step: Step<'a>, into_meta: bool) -> Around<'a> {
        let mut steps = self.steps.clone();
        steps.push(step);
        Around { resource: self.resource, steps, inside_meta: self.inside_meta || into_meta }
    }

    /// `focus` where the steps lead, in an object of kind `validation/v1` `Validation` (an
    /// item of a list as its only item).
    fn surround(&self, focus: Value) -> Value {
        let mut v = focus;
        for step in self.steps.iter().rev() {
            v = match step {
                Step::Child(k) => serde_json::json!({ *k: v }),
                Step::Index => Value::Array(vec![v]),
            };
        }
        if let Value::Object(m) = &mut v {
            m.insert("kind".into(), "Validation".into());
            m.insert("apiVersion".into(), "validation/v1".into());
        }
        v
    }
}

/// Inside `allOf`/`anyOf`/`oneOf`/`not` only value validations are allowed (kube's
/// `validateNestedValueValidation`): no types, defaults, descriptions or kube extensions, and
/// no reasoning about metadata; nested properties, items and junctors are held to the same.
fn structural_value_validation(schema: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let set = |field: &str| schema.get(field).is_some_and(|v| !v.is_null() && *v != false && *v != "");
    let listed = |field: &str| schema[field].as_array().is_some_and(|a| !a.is_empty());
    for combinator in ["anyOf", "allOf", "oneOf"] {
        for (i, sub) in schema[combinator].as_array().into_iter().flatten().enumerate() {
            structural_value_validation(sub, &format!("{path}.{combinator}[{i}]"), errs);
        }
    }
    if let Some(not) = schema.get("not").filter(|n| n.is_object()) {
        structural_value_validation(not, &format!("{path}.not"), errs);
    }
    if let Some(items) = schema.get("items").filter(|i| i.is_object()) {
        structural_value_validation(items, &format!("{path}.items"), errs);
    }
    for (key, sub) in schema["properties"].as_object().into_iter().flatten() {
        structural_value_validation(sub, &format!("{path}.properties[{key}]"), errs);
    }
    let checks: [(&str, bool, &str); 13] = [
        ("type", set("type"), "must be empty to be structural"),
        ("additionalProperties", schema.get("additionalProperties").is_some(), "must be undefined to be structural"),
        ("default", schema.get("default").is_some(), "must be undefined to be structural"),
        ("title", set("title"), "must be empty to be structural"),
        ("description", set("description"), "must be empty to be structural"),
        ("nullable", schema["nullable"] == true, "must be false to be structural"),
        ("externalDocs", schema.get("externalDocs").is_some(), "must be undefined to be structural"),
        (
            "x-kubernetes-preserve-unknown-fields",
            schema["x-kubernetes-preserve-unknown-fields"] == true,
            "must be false to be structural",
        ),
        (
            "x-kubernetes-embedded-resource",
            schema["x-kubernetes-embedded-resource"] == true,
            "must be false to be structural",
        ),
        ("x-kubernetes-int-or-string", schema["x-kubernetes-int-or-string"] == true, "must be false to be structural"),
        ("x-kubernetes-list-map-keys", listed("x-kubernetes-list-map-keys"), "must be empty to be structural"),
        (
            "x-kubernetes-list-type",
            schema.get("x-kubernetes-list-type").is_some(),
            "must be undefined to be structural",
        ),
        ("x-kubernetes-map-type", schema.get("x-kubernetes-map-type").is_some(), "must be undefined to be structural"),
    ];
    for (field, present, text) in checks {
        if present {
            errs.push(FieldError::forbidden(format!("{path}.{field}"), text));
        }
    }
    if schema["properties"].get("metadata").is_some() {
        errs.push(FieldError::forbidden(
            format!("{path}.properties[metadata]"),
            "must not be specified in a nested context",
        ));
    }
}

/// kube's invariants of one schema node beyond types: the extensions that exclude each other,
/// embedded resources (an object with properties or preserving unknown fields), and, at the
/// root and in embedded resources, `kind`/`apiVersion` as strings and `metadata` as an object
/// that may only say something about `name` and `generateName`.
fn object_invariants(schema: &Value, path: &str, root: bool, errs: &mut Vec<FieldError>) {
    let int_or_string = schema["x-kubernetes-int-or-string"] == true;
    let embedded = schema["x-kubernetes-embedded-resource"] == true;
    let preserve = schema["x-kubernetes-preserve-unknown-fields"] == true;
    if int_or_string && preserve {
        errs.push(FieldError::invalid(
            format!("{path}.x-kubernetes-preserve-unknown-fields"),
            true,
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if int_or_string && embedded {
        errs.push(FieldError::invalid(
            format!("{path}.x-kubernetes-embedded-resource"),
            true,
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    let type_ = schema["type"].as_str().unwrap_or("");
    if embedded && type_ != "object" {
        let text = "must be object if x-kubernetes-embedded-resource is true";
        errs.push(match type_ {
            "" => FieldError::required(format!("{path}.type"), text),
            other => FieldError::invalid(format!("{path}.type"), other, text),
        });
    }
    if embedded && schema.get("additionalProperties").is_some_and(|a| !a.is_null()) {
        errs.push(FieldError::forbidden(
            format!("{path}.additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    let properties = schema["properties"].as_object();
    if embedded && !preserve && properties.is_none_or(|p| p.is_empty()) {
        errs.push(FieldError::required(
            format!("{path}.properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
    let check_metadata = root || embedded;
    let Some(properties) = properties else { return };
    if check_metadata {
        for key in ["kind", "apiVersion"] {
            if let Some(sub) = properties.get(key).filter(|s| s["type"] != "string") {
                let shown = sub["type"].as_str().unwrap_or("");
                errs.push(FieldError::invalid(format!("{path}.properties[{key}].type"), shown, "must be string"));
            }
        }
    }
    let Some(metadata) = properties.get("metadata") else { return };
    let metadata_path = format!("{path}.properties[metadata]");
    if check_metadata && metadata["type"] != "object" {
        let shown = metadata["type"].as_str().unwrap_or("");
        errs.push(FieldError::invalid(format!("{metadata_path}.type"), shown, "must be object"));
    }
    if root {
        let only_names =
            |p: &Value| p.as_object().is_some_and(|m| m.keys().all(|k| k == "name" || k == "generateName"));
        let other = metadata.as_object().into_iter().flatten().any(|(k, v)| match k.as_str() {
            "type" | "default" => false,
            "properties" => !only_names(v),
            _ => true,
        });
        if other {
            errs.push(FieldError::forbidden(
                metadata_path,
                "must not specify anything other than name and generateName, but metadata is implicitly specified",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd() -> Value {
        json!({"metadata": {"name": "widgets.example.com"}, "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {}}}}}}}]}})
    }

    #[test]
    fn reports_every_finding_in_kube_form() {
        let mut bad = crd();
        bad["metadata"]["name"] = "wrong.example.com".into();
        bad["spec"]["scope"] = "Galaxy".into();
        bad["spec"]["versions"][0]["storage"] = false.into();
        let errs: Vec<String> = validate(&bad, None).iter().map(ToString::to_string).collect();
        assert!(
            errs.contains(
                &"metadata.name: Invalid value: \"wrong.example.com\": must be spec.names.plural+\".\"+spec.group"
                    .to_string()
            ),
            "{errs:?}"
        );
        assert!(
            errs.contains(
                &"spec.scope: Unsupported value: \"Galaxy\": supported values: \"Cluster\", \"Namespaced\"".to_string()
            ),
            "{errs:?}"
        );
        assert!(
            errs.iter().any(|e| e.ends_with("must have exactly one version marked as storage version")),
            "{errs:?}"
        );
        assert!(errs.contains(&"spec.validation.openAPIV3Schema.properties[spec].properties[size].type: Required value: must not be empty for specified object fields".to_string()), "{errs:?}");
    }

    #[test]
    fn a_schema_shared_by_versions_is_reported_once_where_kube_holds_it() {
        let mut two = crd();
        let mut v2 = two["spec"]["versions"][0].clone();
        v2["name"] = "v2".into();
        v2["storage"] = false.into();
        if let Some(versions) = two["spec"]["versions"].as_array_mut() {
            versions.push(v2);
        }
        let errs: Vec<String> = validate(&two, None).iter().map(ToString::to_string).collect();
        let size = |at: &str| {
            format!("{at}.properties[spec].properties[size].type: Required value: must not be empty for specified object fields")
        };
        assert_eq!(errs, vec![size("spec.validation.openAPIV3Schema")]);
        // Schemas that differ are each checked at their version.
        two["spec"]["versions"][1]["schema"]["openAPIV3Schema"]["description"] = "v2".into();
        let errs: Vec<String> = validate(&two, None).iter().map(ToString::to_string).collect();
        assert_eq!(
            errs,
            vec![size("spec.versions[0].schema.openAPIV3Schema"), size("spec.versions[1].schema.openAPIV3Schema")]
        );
    }

    fn conversion_errors(conversion: Value) -> Vec<String> {
        let mut c = crd();
        c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["size"] =
            json!({"type": "integer"});
        c["spec"]["conversion"] = conversion;
        validate(&c, None).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn conversion_stanza_as_kube_checks_it() {
        assert_eq!(conversion_errors(json!({"strategy": "None"})), Vec::<String>::new());
        assert_eq!(
            conversion_errors(json!({"strategy": "Webhook"})),
            [
                "spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook",
                "spec.conversion.conversionReviewVersions: Required value",
            ]
        );
        assert_eq!(
            conversion_errors(json!({"strategy": "Webhook", "webhook": {"clientConfig": {"url": "http://h/convert"},
                "conversionReviewVersions": ["v2", "v2"]}})),
            [
                "spec.conversion.webhookClientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
                "spec.conversion.conversionReviewVersions[1]: Invalid value: \"v2\": duplicate version",
                "spec.conversion.conversionReviewVersions: Invalid value: [\"v2\",\"v2\"]: must include at least one of v1, v1beta1",
            ]
        );
        assert_eq!(
            conversion_errors(json!({"strategy": "None", "webhook": {"clientConfig": {"url": "https://h"},
                "conversionReviewVersions": ["v1"]}})),
            [
                "spec.conversion.webhookClientConfig: Forbidden: should not be set when strategy is not set to Webhook",
                "spec.conversion.conversionReviewVersions: Forbidden: should not be set when strategy is not set to Webhook",
            ]
        );
        assert_eq!(
            conversion_errors(json!({"strategy": "Webhook", "webhook": {"clientConfig": {"service": {"namespace": "ns",
                "name": "", "path": "no-slash", "port": 0}, "caBundle": "bm90IGEgY2VydA=="},
                "conversionReviewVersions": ["v1"]}})),
            [
                "spec.conversion.webhookClientConfig.service.name: Required value",
                "spec.conversion.webhookClientConfig.service.port: Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive",
                "spec.conversion.webhookClientConfig.service.path: Invalid value: \"no-slash\": must start with a '/'",
                "spec.conversion.webhookClientConfig.caBundle: Invalid value: \"bm90IGEgY2VydA==\": unable to load root certificates: unable to parse bytes as PEM block",
            ]
        );
    }

    #[test]
    fn protected_groups_need_approval() {
        let mut c = crd();
        c["metadata"]["name"] = "widgets.x.k8s.io".into();
        c["spec"]["group"] = "x.k8s.io".into();
        c["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = json!({"type": "object"});
        let errs: Vec<String> = validate(&c, None).iter().map(ToString::to_string).collect();
        assert_eq!(errs, vec!["metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation \"api-approved.kubernetes.io\", see https://github.com/kubernetes/enhancements/pull/1111"]);
        c["metadata"]["annotations"] = json!({API_APPROVED: "https://github.com/kubernetes/kubernetes/pull/1"});
        assert!(validate(&c, None).is_empty());
    }

    fn schema_errors(schema: Value) -> Vec<String> {
        let mut def = crd();
        def["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = schema;
        validate(&def, None).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn structural_invariants_read_as_kube_words_them() {
        let at = "spec.validation.openAPIV3Schema";
        let cases: Vec<(Value, Vec<String>)> = vec![
            (
                json!({"type": "object", "additionalProperties": {"type": "string"}}),
                vec![format!("{at}.additionalProperties: Forbidden: must not be used at the root")],
            ),
            (
                json!({"type": "object", "properties": {"q": {"x-kubernetes-int-or-string": true,
                    "x-kubernetes-preserve-unknown-fields": true}}}),
                vec![format!("{at}.properties[q].x-kubernetes-preserve-unknown-fields: Invalid value: true: must be false if x-kubernetes-int-or-string is true")],
            ),
            (
                json!({"type": "object", "properties": {"t": {"type": "string", "x-kubernetes-embedded-resource": true}}}),
                vec![
                    format!("{at}.properties[t].type: Invalid value: \"string\": must be object if x-kubernetes-embedded-resource is true"),
                    format!("{at}.properties[t].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"),
                ],
            ),
            (
                json!({"type": "object", "properties": {"t": {"type": "object", "x-kubernetes-embedded-resource": true,
                    "x-kubernetes-preserve-unknown-fields": true,
                    "properties": {"kind": {"type": "integer"}, "metadata": {"type": "string"}}}}}),
                vec![
                    format!("{at}.properties[t].properties[kind].type: Invalid value: \"integer\": must be string"),
                    format!("{at}.properties[t].properties[metadata].type: Invalid value: \"string\": must be object"),
                ],
            ),
            (
                json!({"type": "object", "properties": {"metadata": {"type": "object",
                    "properties": {"name": {"type": "string"}, "labels": {"type": "object"}}}}}),
                vec![format!("{at}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified")],
            ),
            (
                json!({"type": "object", "properties": {"metadata": {"type": "object",
                    "properties": {"name": {"type": "string", "maxLength": 20}}}}}),
                vec![],
            ),
            (
                json!({"type": "object", "properties": {"s": {"type": "string",
                    "not": {"title": "t", "nullable": true, "x-kubernetes-list-type": "set"},
                    "oneOf": [{"properties": {"metadata": {"x-kubernetes-int-or-string": true}}}]}}}),
                vec![
                    format!("{at}.properties[s].not.title: Forbidden: must be empty to be structural"),
                    format!("{at}.properties[s].not.nullable: Forbidden: must be false to be structural"),
                    format!("{at}.properties[s].not.x-kubernetes-list-type: Forbidden: must be undefined to be structural"),
                    format!("{at}.properties[s].oneOf[0].properties[metadata].x-kubernetes-int-or-string: Forbidden: must be false to be structural"),
                    format!("{at}.properties[s].oneOf[0].properties[metadata]: Forbidden: must not be specified in a nested context"),
                ],
            ),
        ];
        for (schema, want) in cases {
            let mut got = schema_errors(schema.clone());
            let mut want = want;
            got.sort();
            want.sort();
            assert_eq!(got, want, "{schema}");
        }
    }

    #[test]
    fn defaults_inside_metadata_must_make_valid_metadata() {
        let at = "spec.validation.openAPIV3Schema";
        let mut errs = schema_errors(json!({"type": "object", "properties": {
            "metadata": {"type": "object", "properties": {
                "name": {"type": "string", "default": "a/b"},
                "generateName": {"type": "string", "default": "fine-"}}},
            "spec": {"type": "object", "properties": {
                "template": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {
                    "kind": {"type": "string", "default": "Pod"},
                    "metadata": {"type": "object", "properties": {
                        "namespace": {"type": "string", "default": "Not_A_Namespace"},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"},
                            "default": {"app": 7}},
                        "finalizers": {"type": "array", "items": {"type": "string"},
                            "default": ["orphan", "foregroundDeletion"]}}}}},
                "pod": {"type": "object", "x-kubernetes-embedded-resource": true,
                    "x-kubernetes-preserve-unknown-fields": true,
                    "default": {"metadata": {"name": "a%b", "generation": -1}}},
                "fine": {"type": "object", "x-kubernetes-embedded-resource": true,
                    "x-kubernetes-preserve-unknown-fields": true,
                    "default": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}}}}}}));
        errs.sort();
        let template = format!("{at}.properties[spec].properties[template].properties");
        let pod = format!("{at}.properties[spec].properties[pod].default");
        let mut want = vec![
            format!("{at}.properties[metadata].properties[name].default: Invalid value: \"a/b\": must result in valid metadata: metadata.name: Invalid value: \"a/b\": may not contain '/'"),
            format!("{template}[metadata].properties[namespace].default: Invalid value: \"Not_A_Namespace\": must result in valid metadata: metadata.namespace: Invalid value: \"Not_A_Namespace\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"),
            format!("{template}[metadata].properties[labels].default: Invalid value: {{\"app\":7}}: must result in valid metadata: metadata: Invalid value: {{\"labels\":{{\"app\":7}}}}: json: cannot unmarshal number into Go struct field ObjectMeta.labels of type string"),
            format!("{template}[metadata].properties[finalizers].default: Invalid value: [\"orphan\",\"foregroundDeletion\"]: must result in valid metadata: metadata.finalizers: Invalid value: [\"orphan\",\"foregroundDeletion\"]: finalizer orphan and foregroundDeletion cannot be both set"),
            format!("{pod}.apiVersion: Required value"),
            format!("{pod}.kind: Required value"),
            format!("{pod}.metadata.name: Invalid value: \"a%b\": may not contain '%'"),
            format!("{pod}.metadata.generation: Invalid value: -1: must be greater than or equal to 0"),
        ];
        want.sort();
        assert_eq!(errs, want);
    }

    #[test]
    fn defaults_must_be_pruned_and_valid() {
        let at = "spec.validation.openAPIV3Schema.properties[spec]";
        let errs = schema_errors(json!({"type": "object", "properties": {"spec": {"type": "object",
            "default": {"replicas": 1, "bogus": true},
            "properties": {
                "replicas": {"type": "integer", "maximum": 10, "default": 20},
                "mode": {"type": "string", "enum": ["a", "b"], "default": "c"},
                "size": {"type": "string", "default": "1cm"}}}}}));
        let mut errs = errs;
        errs.sort();
        assert_eq!(
            errs,
            vec![
                format!("{at}.default: Invalid value: {{\"bogus\":true,\"replicas\":1}}: must not have unknown fields"),
                format!("{at}.properties[mode].default: Unsupported value: \"c\": supported values: \"a\", \"b\""),
                format!("{at}.properties[replicas].default: Invalid value: 20: {at}.properties[replicas].default in body should be less than or equal to 10"),
            ]
        );
    }

    #[test]
    fn list_map_keys_and_unsupported_keywords_read_as_kube_words_them() {
        let at = "spec.validation.openAPIV3Schema.properties[ports]";
        let mut errs = schema_errors(json!({"type": "object", "properties": {
            "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name", "name", "opts"],
                "items": {"type": "object", "nullable": true, "properties": {
                    "name": {"type": "string"}, "opts": {"type": "object", "default": {}}}}},
            "tags": {"type": "array", "x-kubernetes-list-map-keys": ["name"], "items": {"type": "string"}},
            "odd": {"type": "object", "patternProperties": {"^a": {"type": "string"}}},
            "when": {"type": "date"}}}));
        errs.sort();
        let root = "spec.validation.openAPIV3Schema";
        let mut want = vec![
                format!("{at}.items.nullable: Forbidden: cannot be nullable when x-kubernetes-list-type is map"),
                format!("{at}.items.properties[name].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"),
                format!("{at}.items.properties[name].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"),
                format!("{at}.items.properties[opts].type: Invalid value: \"object\": must be a scalar type if parent array's x-kubernetes-list-type is map"),
                format!("{at}.x-kubernetes-list-map-keys: Invalid value: [\"name\",\"name\",\"opts\"]: must not contain duplicate entries"),
                format!("{root}.properties[odd].patternProperties: Forbidden: patternProperties is not supported"),
                format!("{root}.properties[when].type: Unsupported value: \"date\": supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\""),
                format!("{root}.properties[tags].x-kubernetes-list-type: Required value: must be map if x-kubernetes-list-map-keys is non-empty"),
        ];
        want.sort();
        assert_eq!(errs, want);
    }

    #[test]
    fn list_map_rules_bind_an_update_only_if_the_stored_definition_kept_them() {
        let with_ports = |key: Value| {
            let mut def = crd();
            def["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = json!({"type": "object", "properties": {
                "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "properties": {"name": key, "size": {"type": "integer"}}}}}});
            def
        };
        let loose = with_ports(json!({"type": "string"}));
        let kept = with_ports(json!({"type": "string", "default": "a"}));
        let texts = |errs: Vec<FieldError>| errs.iter().map(ToString::to_string).collect::<Vec<_>>();
        let refused = vec!["spec.validation.openAPIV3Schema.properties[ports].items.properties[name].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"];
        // New, or updated from a definition that kept the rules: refused.
        assert_eq!(texts(validate(&loose, None)), refused);
        assert_eq!(texts(validate(&loose, Some(&kept))), refused);
        // Stored before the rules were checked: its updates are admitted, other checks still run.
        assert!(validate(&loose, Some(&loose)).is_empty());
        let mut renamed = loose.clone();
        renamed["spec"]["scope"] = json!("Cluster");
        assert_eq!(
            texts(validate(&renamed, Some(&loose))),
            vec!["spec.scope: Invalid value: \"Cluster\": field is immutable"]
        );
    }
}
