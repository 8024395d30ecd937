//! REST handlers for the served kinds: decode the request (query options, body), call the
//! `Store`, encode the answer. Verbs a kind does not list are 405. Subresources: `/status`
//! and `/scale` (get, update, patch), `/binding` (create) and `/finalize` (update) where the
//! kind has them; others are 404.

// #[PerformanceCriticalPath]

use bytes::Bytes;
use http::{HeaderValue, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;

use super::list;
use super::negotiation::{negotiate, Output};
use super::state::AppState;
use super::watch;
use crate::body::{self, Request, Response};
use crate::error::{ApiError, FieldError};
use crate::filters::body_limit::BodyLimitBytes;
use crate::patch::PatchType;
use crate::registry::deletion::DeleteOptions;
use crate::registry::managed;
use crate::registry::object::{self, FieldValidation};
use crate::registry::patch::{PatchRequest, PatchTarget};
use crate::registry::selectors::{FieldSelector, LabelSelector};
use crate::registry::store::{parse_resource_version, ListOptions};
use crate::registry::table::{self, IncludeObject, Printer, TableOptions};
use crate::registry::ResourceKind;
use crate::request_info::{query_pairs, query_param, RequestInfo};
use crate::watch::WatchOptions;

/// The parsed query of a resource request.
#[derive(Debug)]
struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    fn get(&self, key: &str) -> Option<&str> {
        query_param(&self.pairs, key).filter(|v| !v.is_empty())
    }

    /// A boolean parameter as kube converts it: present and not `false` or `0` (any case) is
    /// true, whatever else it says.
    fn flag(&self, key: &str) -> bool {
        query_param(&self.pairs, key).is_some_and(|v| !matches!(v.to_ascii_lowercase().as_str(), "false" | "0"))
    }

    /// `timeoutSeconds`, refused (400) when it is not a number.
    fn timeout_seconds(&self) -> Result<Option<u64>, ApiError> {
        self.get("timeoutSeconds")
            .map(|t| {
                t.parse::<i64>()
                    .map(|t| t.max(0) as u64)
                    .map_err(|_| ApiError::BadRequest(format!("strconv.ParseInt: parsing {t:?}: invalid syntax")))
            })
            .transpose()
    }

    fn dry_run(&self) -> Result<bool, ApiError> {
        match self.get("dryRun") {
            None => Ok(false),
            Some("All") => Ok(true),
            Some(other) => {
                Err(ApiError::BadRequest(format!("dryRun: Unsupported value: \"{other}\": supported values: \"All\"")))
            }
        }
    }

    /// The request's manager (`fieldManager`, else from the User-Agent), checked as kube
    /// checks `fieldManager` on `options` (`CreateOptions`, `UpdateOptions`).
    fn manager(&self, options: &str, headers: &http::HeaderMap) -> Result<String, ApiError> {
        let field_manager = self.get("fieldManager").unwrap_or("");
        managed::validate_field_manager(options, field_manager, Vec::new())?;
        let user_agent = headers.get(http::header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or("");
        Ok(managed::manager_or_user_agent(field_manager, user_agent))
    }

    fn selectors(&self, kind: &ResourceKind) -> Result<(LabelSelector, FieldSelector), ApiError> {
        Ok((
            LabelSelector::parse(self.get("labelSelector").unwrap_or(""))?,
            FieldSelector::parse(self.get("fieldSelector").unwrap_or(""), kind.field_selectors)?,
        ))
    }

    fn list_options(&self, kind: &ResourceKind) -> Result<ListOptions, ApiError> {
        let (labels, fields) = self.selectors(kind)?;
        let limit = match self.get("limit") {
            None => 0,
            Some(l) => l.parse::<i64>().map_err(|_| ApiError::BadRequest(format!("invalid limit: {l}")))?.max(0),
        };
        if self.get("sendInitialEvents").is_some() {
            return Err(invalid_list_options("sendInitialEvents", "sendInitialEvents is forbidden for list"));
        }
        let resource_version_match = self.get("resourceVersionMatch").unwrap_or("").to_string();
        let resource_version = self.get("resourceVersion").unwrap_or("").to_string();
        if !resource_version.is_empty() {
            parse_resource_version(&resource_version)?;
        }
        if !matches!(resource_version_match.as_str(), "" | "Exact" | "NotOlderThan") {
            return Err(list_options_cause(crate::error::FieldError::not_supported(
                "resourceVersionMatch",
                resource_version_match.as_str(),
                &["Exact", "NotOlderThan", ""],
            )));
        }
        if !resource_version_match.is_empty() && resource_version.is_empty() {
            return Err(invalid_list_options(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if resource_version_match == "Exact" && resource_version == "0" {
            return Err(invalid_list_options(
                "resourceVersionMatch",
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
        Ok(ListOptions {
            labels,
            fields,
            limit,
            continue_token: self.get("continue").map(String::from),
            resource_version,
            resource_version_match,
        })
    }
}

fn invalid_list_options(field: &str, detail: &str) -> ApiError {
    list_options_cause(crate::error::FieldError::forbidden(field, detail))
}

/// A 422 on `ListOptions.meta.k8s.io` with one cause.
fn list_options_cause(cause: crate::error::FieldError) -> ApiError {
    ApiError::Invalid {
        group: "meta.k8s.io".into(),
        kind: "ListOptions".into(),
        name: String::new(),
        causes: vec![cause],
    }
}

/// Reads the whole body, mapping an overrun of the body limit to 413.
async fn read_body(req: Request) -> Result<(http::request::Parts, Bytes), ApiError> {
    let (parts, body) = req.into_parts();
    let limit = parts.extensions.get::<BodyLimitBytes>().map(|l| l.0);
    match body.collect().await {
        Ok(collected) => Ok((parts, collected.to_bytes())),
        Err(e) if e.0.is::<http_body_util::LengthLimitError>() => {
            Err(ApiError::RequestEntityTooLarge { limit: limit.unwrap_or_default() })
        }
        Err(e) => Err(ApiError::BadRequest(format!("error reading request body: {e}"))),
    }
}

fn content_type(parts: &http::request::Parts) -> String {
    content_type_of(&parts.headers)
}

fn content_type_of(headers: &http::HeaderMap) -> String {
    headers.get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string()
}

/// Turns a YAML body into JSON so the one decoder (`object::decode`) handles both; other
/// bodies pass through. Returns the content type and bytes to decode. The parse runs on the
/// blocking pool so a large document never holds up the I/O threads' other requests.
///
/// # Errors
///
/// As [`yaml_body_to_json`].
async fn yaml_to_json(content_type: String, bytes: Bytes) -> Result<(String, Bytes), ApiError> {
    let media = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    if media != "application/yaml" {
        return Ok((content_type, bytes));
    }
    let parse = move || Ok(("application/json".into(), Bytes::from(yaml_body_to_json(&bytes)?)));
    tokio::task::spawn_blocking(parse).await.map_err(|e| ApiError::Internal(format!("decoding YAML: {e}")))?
}

/// Converts a YAML request body to JSON text.
///
/// # Errors
///
/// Returns `BadRequest` with the parser's complaint for malformed YAML, as kube does. A
/// document nested past kube's limit is refused by a linear scan before the parser (whose cost
/// grows with the square of the nesting) sees it.
pub fn yaml_body_to_json(bytes: &[u8]) -> Result<Vec<u8>, ApiError> {
    use ballast_apimachinery::yaml_depth;
    if let Err(deep) = yaml_depth::check(bytes, yaml_depth::MAX_DEPTH) {
        return Err(ApiError::BadRequest(format!(
            "error converting YAML to JSON: yaml: line {}: exceeded max depth of {}",
            deep.line,
            yaml_depth::MAX_DEPTH
        )));
    }
    let value: Value = serde_yaml_ng::from_slice(bytes)
        .map_err(|e| ApiError::BadRequest(format!("error converting YAML to JSON: yaml: {e}")))?;
    serde_json::to_vec(&value).map_err(|e| ApiError::BadRequest(format!("error converting YAML to JSON: {e}")))
}

/// How one request's answers are encoded (`Accept` and `includeObject`).
#[derive(Debug, Clone, Copy)]
struct Encoding {
    output: Output,
    include_object: IncludeObject,
    /// The kind's Table printer.
    printer: &'static Printer,
}

impl Encoding {
    /// Encodes an object or list answer; `Status` answers (and anything that is not a kind's
    /// object) are never turned into Tables or metadata.
    fn respond(&self, status: StatusCode, value: &Value, warnings: &[String]) -> Response {
        let is_list = value.get("items").is_some() && value["kind"].as_str().is_some_and(|k| k.ends_with("List"));
        let is_status = value["kind"] == "Status";
        let table_opts =
            |api_version| TableOptions { api_version, include_object: self.include_object, no_headers: false };
        let converted = match self.output {
            _ if is_status => None,
            Output::Table(v) if is_list => {
                Some(table::from_list(self.printer, value, table_opts(v), crate::clock::unix_now()))
            }
            Output::Table(v) => Some(table::from_object(self.printer, value, table_opts(v), crate::clock::unix_now())),
            Output::Metadata(v) if is_list => Some(table::partial_metadata_list(value, v)),
            Output::Metadata(v) => Some(table::partial_metadata(value, v)),
            Output::Json | Output::Yaml => None,
        };
        let value = converted.as_ref().unwrap_or(value);
        let mut resp = if self.output == Output::Yaml {
            let text = serde_yaml_ng::to_string(value).unwrap_or_default();
            let mut r = http::Response::new(body::full(text));
            *r.status_mut() = status;
            r.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/yaml"));
            r.headers_mut().insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
            r
        } else {
            body::json(status, value)
        };
        add_warnings(&mut resp, warnings);
        resp
    }
}

fn add_warnings(resp: &mut Response, warnings: &[String]) {
    for w in warnings {
        let text = format!("299 - \"{}\"", w.replace('\\', "\\\\").replace('"', "\\\""));
        if let Ok(v) = HeaderValue::from_str(&text) {
            resp.headers_mut().append(http::header::WARNING, v);
        }
    }
}

/// Parses a DeleteOptions body (JSON, possibly empty).
fn delete_options(body: &[u8], query: &Query) -> Result<DeleteOptions, ApiError> {
    let mut opts = DeleteOptions { dry_run: query.dry_run()?, ..DeleteOptions::default() };
    if let Some(g) = query.get("gracePeriodSeconds") {
        opts.grace_period_seconds =
            Some(g.parse().map_err(|_| ApiError::BadRequest(format!("invalid gracePeriodSeconds: {g}")))?);
    }
    opts.propagation_policy = query.get("propagationPolicy").map(String::from);
    opts.orphan_dependents = query.get("orphanDependents").map(|o| o == "true");
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(opts);
    }
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::BadRequest(format!("couldn't get version/kind; json parse error: {e}")))?;
    let pre = &value["preconditions"];
    opts.uid = pre["uid"].as_str().map(String::from);
    opts.resource_version = pre["resourceVersion"].as_str().map(String::from);
    if let Some(g) = value.get("gracePeriodSeconds").filter(|g| !g.is_null()) {
        opts.grace_period_seconds =
            Some(g.as_i64().ok_or_else(|| ApiError::BadRequest("gracePeriodSeconds must be an integer".into()))?);
    }
    if let Some(p) = value["propagationPolicy"].as_str() {
        opts.propagation_policy = Some(p.to_string());
    }
    opts.orphan_dependents = value["orphanDependents"].as_bool();
    if let Some(dry) = value["dryRun"].as_array() {
        for d in dry {
            if d != "All" {
                return Err(ApiError::BadRequest(format!("dryRun: Unsupported value: {d}: supported values: \"All\"")));
            }
            opts.dry_run = true;
        }
    }
    Ok(opts)
}

/// Serves one resource request.
///
/// # Errors
///
/// Every refusal, as an `ApiError`.
pub async fn handle(state: &AppState, info: RequestInfo, req: Request) -> Result<Response, ApiError> {
    let kind = state.store.kinds().find(&info.api_group, &info.api_version, &info.resource).ok_or(ApiError::NoRoute)?;
    if !info.subresource.is_empty() {
        return handle_subresource(state, kind, info, req).await;
    }
    if info.parts.len() > 2 {
        return Err(ApiError::NoRoute);
    }
    // A namespaced kind's single objects exist only under /namespaces/<ns>/; a cluster-scoped
    // kind has no namespace (the namespace parsed from /namespaces/<name> is the object's name).
    let namespace = if kind.namespaced { info.namespace.as_str() } else { "" };
    let name_in_url = info.parts.get(1).cloned().unwrap_or_default();
    if kind.namespaced && namespace.is_empty() && (!name_in_url.is_empty() || info.verb == "create") {
        return Err(ApiError::NoRoute);
    }
    let method_not_supported = || ApiError::MethodNotSupported {
        group: kind.group.into(),
        resource: kind.resource.into(),
        verb: info.verb.clone(),
    };
    if !kind.verbs.allows(&info.verb) {
        return Err(method_not_supported());
    }
    let query = Query { pairs: query_pairs(req.uri().query()) };
    let enc = Encoding {
        output: negotiate(req.headers(), info.verb == "watch")?,
        include_object: IncludeObject::parse(query.get("includeObject"))?,
        printer: state.store.kinds().printer(kind),
    };
    let respond = |status, value: &Value, warnings: &[String]| enc.respond(status, value, warnings);
    let store = &state.store;
    match info.verb.as_str() {
        "get" if !name_in_url.is_empty() => {
            let obj = store.get(kind, namespace, &name_in_url).await?;
            Ok(respond(StatusCode::OK, &Value::Object(obj), &[]))
        }
        // A GET on the collection whose field selector pins a name parses as list with a name.
        // Streamed as storage is read (`list`).
        "get" | "list" => {
            let opts = query.list_options(kind)?;
            // "0" (any revision) and no resourceVersion never wait.
            let revision =
                if opts.resource_version.is_empty() { 0 } else { parse_resource_version(&opts.resource_version)? };
            if opts.continue_token.is_none() && revision > 0 {
                wait_for_revision(store, revision, state.watch_cache.config().fresh_wait).await?;
            }
            list::serve(store, kind, namespace, &opts, enc.output, enc.include_object).await
        }
        "watch" => {
            let (labels, mut fields) = query.selectors(kind)?;
            if !name_in_url.is_empty() {
                // `GET .../configmaps/x?watch=true` watches one object.
                fields = FieldSelector::parse(&format!("metadata.name={name_in_url}"), kind.field_selectors)?;
            }
            let send_initial_events = query.flag("sendInitialEvents");
            if send_initial_events && query.get("resourceVersionMatch") != Some("NotOlderThan") {
                return Err(ApiError::Invalid {
                    group: "meta.k8s.io".into(),
                    kind: "ListOptions".into(),
                    name: String::new(),
                    causes: vec![crate::error::FieldError::forbidden(
                        "resourceVersionMatch",
                        "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                    )],
                });
            }
            let opts = WatchOptions {
                labels,
                fields,
                resource_version: query.get("resourceVersion").unwrap_or("").to_string(),
                send_initial_events,
                allow_bookmarks: query.flag("allowWatchBookmarks"),
            };
            let timeout = query.timeout_seconds()?;
            watch::serve(state, kind, namespace, opts, timeout, enc.output, enc.include_object).await
        }
        "create" if kind.create_binds => {
            let dry_run = query.dry_run()?;
            let (_, bytes) = read_body(req).await?;
            let binding = decode_binding(&bytes)?;
            Ok(respond(StatusCode::CREATED, &store.bind(kind, namespace, None, &binding, dry_run).await?, &[]))
        }
        "create" => {
            let dry_run = query.dry_run()?;
            let validation = FieldValidation::parse(query.get("fieldValidation"))?;
            let manager = query.manager("CreateOptions", req.headers())?;
            let (parts, bytes) = read_body(req).await?;
            let (media, bytes) = yaml_to_json(content_type(&parts), bytes).await?;
            let (obj, warnings) = object::decode(&**state.store.kinds(), kind, &media, &bytes, validation)?;
            let created = store.create_by(kind, namespace, obj, dry_run, &manager).await?;
            Ok(respond(StatusCode::CREATED, &Value::Object(created), &warnings))
        }
        "update" => {
            let dry_run = query.dry_run()?;
            let validation = FieldValidation::parse(query.get("fieldValidation"))?;
            let manager = query.manager("UpdateOptions", req.headers())?;
            let (parts, bytes) = read_body(req).await?;
            let (media, bytes) = yaml_to_json(content_type(&parts), bytes).await?;
            let (obj, warnings) = object::decode(&**state.store.kinds(), kind, &media, &bytes, validation)?;
            let updated = store.update_by(kind, namespace, &name_in_url, obj, dry_run, &manager).await?;
            Ok(respond(StatusCode::OK, &Value::Object(updated), &warnings))
        }
        "patch" => {
            let (answer, warnings, created) =
                patch(store, kind, namespace, &name_in_url, PatchTarget::Object, &query, req).await?;
            let status = if created { StatusCode::CREATED } else { StatusCode::OK };
            Ok(respond(status, &answer, &warnings))
        }
        "delete" => {
            let (_, bytes) = read_body(req).await?;
            let opts = delete_options(&bytes, &query)?;
            let answer = store.delete(kind, namespace, &name_in_url, &opts).await?;
            Ok(respond(StatusCode::OK, &answer, &[]))
        }
        "deletecollection" => {
            let list_opts = query.list_options(kind)?;
            let (_, bytes) = read_body(req).await?;
            let opts = delete_options(&bytes, &query)?;
            let answer = store.delete_collection(kind, namespace, &list_opts, &opts).await?;
            Ok(respond(StatusCode::OK, &answer, &[]))
        }
        _ => Err(method_not_supported()),
    }
}

/// Waits, up to `wait`, until the store has reached `revision` (a LIST's resourceVersion);
/// answers 504 "Too large resource version" if it does not, as kube's cacher does.
async fn wait_for_revision(
    store: &crate::registry::Store,
    revision: i64,
    wait: std::time::Duration,
) -> Result<(), ApiError> {
    // How often the store's revision is read while waiting: a tenth of the wait.
    let every = (wait / 10).max(std::time::Duration::from_millis(10));
    let mut waited = std::time::Duration::ZERO;
    loop {
        let (_, current) = store.storage().get(b"/registry/health").await?;
        if revision <= current {
            return Ok(());
        }
        if waited >= wait {
            return Err(ApiError::TooLargeResourceVersion { requested: revision, current });
        }
        tokio::time::sleep(every).await;
        waited += every;
    }
}

/// Parses a `Binding` body (JSON).
fn decode_binding(bytes: &[u8]) -> Result<crate::registry::strategy::Object, ApiError> {
    match serde_json::from_slice(bytes) {
        Ok(Value::Object(obj)) => Ok(obj),
        Ok(_) => Err(ApiError::BadRequest("couldn't get version/kind; json parse error: not an object".into())),
        Err(e) => Err(ApiError::BadRequest(format!("couldn't get version/kind; json parse error: {e}"))),
    }
}

/// Runs a PATCH on `target` of the named object; returns the answer, the warnings and
/// whether an apply created the object.
async fn patch(
    store: &crate::registry::Store,
    kind: &ResourceKind,
    namespace: &str,
    name: &str,
    target: PatchTarget,
    query: &Query,
    req: Request,
) -> Result<(Value, Vec<String>, bool), ApiError> {
    // Kinds without strategic merge (custom resources) list the other three, as kube does;
    // `application/apply-patch+cbor` is one of the unknown types (kube takes it only behind
    // its CBOR feature gate, off by default).
    let accepted =
        if kind.strategic_merge { crate::patch::SUPPORTED } else { crate::registry::patch::NON_STRATEGIC_PATCH_TYPES };
    let patch_type = PatchType::from_content_type(&content_type_of(req.headers()))
        .ok_or_else(|| ApiError::UnsupportedMediaType(accepted.into()))?;
    let field_manager = query.get("fieldManager").unwrap_or("");
    let force = query.get("force");
    let mut causes = Vec::new();
    if patch_type == PatchType::Apply {
        if field_manager.is_empty() {
            causes.push(FieldError::required("fieldManager", "is required for apply patch"));
        }
    } else if force.is_some() {
        causes.push(FieldError::forbidden("force", "may not be specified for non-apply patch"));
    }
    managed::validate_field_manager("PatchOptions", field_manager, causes)?;
    let manager = query.manager("PatchOptions", req.headers())?;
    let dry_run = query.dry_run()?;
    let validation = FieldValidation::parse(query.get("fieldValidation"))?;
    let (_, bytes) = read_body(req).await?;
    let request = PatchRequest {
        target,
        patch_type,
        body: &bytes,
        validation,
        dry_run,
        manager: &manager,
        force: force == Some("true"),
    };
    if patch_type == PatchType::Apply {
        return store.apply(kind, namespace, name, request).await;
    }
    let (answer, warnings) = store.patch(kind, namespace, name, request).await?;
    Ok((answer, warnings, false))
}

/// Serves `/status`, `/scale` (get, update, patch), `/binding` and `/finalize` where the kind
/// has them.
async fn handle_subresource(
    state: &AppState,
    kind: &'static ResourceKind,
    info: RequestInfo,
    req: Request,
) -> Result<Response, ApiError> {
    let served = match info.subresource.as_str() {
        "status" => kind.has_status(),
        "scale" => kind.has_scale(),
        "binding" => kind.binder.is_some(),
        "finalize" => kind.has_finalize(),
        _ => false,
    };
    let name = info.parts.get(1).cloned().unwrap_or_default();
    if !served || info.parts.len() != 3 || name.is_empty() || (kind.namespaced && info.namespace.is_empty()) {
        return Err(ApiError::NoRoute);
    }
    let namespace = if kind.namespaced { info.namespace.as_str() } else { "" };
    let query = Query { pairs: query_pairs(req.uri().query()) };
    let enc = Encoding {
        output: negotiate(req.headers(), false)?,
        include_object: IncludeObject::parse(query.get("includeObject"))?,
        printer: state.store.kinds().printer(kind),
    };
    let respond = |status, value: &Value, warnings: &[String]| enc.respond(status, value, warnings);
    let store = &state.store;
    match (info.subresource.as_str(), info.verb.as_str()) {
        ("status", "get") => Ok(respond(StatusCode::OK, &Value::Object(store.get(kind, namespace, &name).await?), &[])),
        ("status", "update") => {
            let dry_run = query.dry_run()?;
            let validation = FieldValidation::parse(query.get("fieldValidation"))?;
            let manager = query.manager("UpdateOptions", req.headers())?;
            let (parts, bytes) = read_body(req).await?;
            let (obj, warnings) =
                object::decode(&**state.store.kinds(), kind, &content_type(&parts), &bytes, validation)?;
            let updated = store.update_status_by(kind, namespace, &name, obj, dry_run, &manager).await?;
            Ok(respond(StatusCode::OK, &Value::Object(updated), &warnings))
        }
        ("finalize", "update") => {
            let dry_run = query.dry_run()?;
            let validation = FieldValidation::parse(query.get("fieldValidation"))?;
            let (parts, bytes) = read_body(req).await?;
            let (obj, warnings) =
                object::decode(&**state.store.kinds(), kind, &content_type(&parts), &bytes, validation)?;
            let updated = store.finalize_namespace(&name, obj, dry_run).await?;
            Ok(respond(StatusCode::OK, &Value::Object(updated), &warnings))
        }
        ("binding", "create") => {
            let dry_run = query.dry_run()?;
            let (_, bytes) = read_body(req).await?;
            let binding = decode_binding(&bytes)?;
            let answer = store.bind(kind, namespace, Some(&name), &binding, dry_run).await?;
            Ok(respond(StatusCode::CREATED, &answer, &[]))
        }
        ("status", "patch") => {
            let (answer, warnings, _) = patch(store, kind, namespace, &name, PatchTarget::Status, &query, req).await?;
            Ok(respond(StatusCode::OK, &answer, &warnings))
        }
        ("scale", "patch") => {
            let (answer, warnings, _) = patch(store, kind, namespace, &name, PatchTarget::Scale, &query, req).await?;
            Ok(respond(StatusCode::OK, &answer, &warnings))
        }
        ("scale", "get") => Ok(respond(StatusCode::OK, &store.get_scale(kind, namespace, &name).await?, &[])),
        ("scale", "update") => {
            let dry_run = query.dry_run()?;
            let manager = query.manager("UpdateOptions", req.headers())?;
            let (parts, bytes) = read_body(req).await?;
            let media = content_type(&parts);
            if !matches!(media.split(';').next().unwrap_or("").trim(), "" | "application/json") {
                return Err(ApiError::UnsupportedMediaType("application/json".into()));
            }
            let body: Value = serde_json::from_slice(&bytes)
                .map_err(|e| ApiError::BadRequest(format!("couldn't get version/kind; json parse error: {e}")))?;
            let Value::Object(body) = body else {
                return Err(ApiError::BadRequest("couldn't get version/kind; json parse error: not an object".into()));
            };
            Ok(respond(
                StatusCode::OK,
                &store.update_scale(kind, namespace, &name, &body, dry_run, &manager).await?,
                &[],
            ))
        }
        _ => Err(ApiError::MethodNotSupported {
            group: kind.group.into(),
            resource: format!("{}/{}", kind.resource, info.subresource),
            verb: info.verb.clone(),
        }),
    }
}
