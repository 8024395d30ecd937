//! Conversion of custom resources between a definition's versions ([`ServedForm`], the
//! generic server's `VersionConverter` of a served version).
//!
//! Strategy `None` rewrites `apiVersion` only. Strategy `Webhook` sends the object in a
//! `ConversionReview` (`apiextensions.k8s.io/v1`, or `v1beta1` when the definition prefers it)
//! to the definition's webhook and takes the converted object from the answer, with kube's
//! checks of it (same kind, name, namespace and uid; metadata other than labels and
//! annotations restored from the original; changed labels and annotations validated as kube
//! validates them) and kube's error texts; fields the wanted version's schema does not know
//! are pruned from it, as kube's codec prunes a converted object. An object already in the
//! wanted version is not sent.
//!
//! The generic store converts synchronously (inside its update closures too), so a webhook
//! call blocks its caller: on a multi-threaded runtime the worker hands its other tasks over
//! first ([`crate::blocking`]); elsewhere the call runs on a thread of its own.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use ballast_apiserver::error::ApiError;
use ballast_apiserver::registry::strategy::Object;
use ballast_apiserver::registry::validation;
use ballast_apiserver::registry::VersionConverter;

use crate::definition::WebhookConversion;
use crate::schema;
use crate::webhook_client::{self, Services};

/// The served form of a stored custom resource: converted between the served version and the
/// storage version, and the served version's defaults applied on read, as kube defaults on
/// read. Objects read from storage unchanged by that are remembered ([`Verdicts`]); only reads
/// of stored bytes count, never a write's answer (a dry run's object was never stored).
#[derive(Debug)]
pub struct ServedForm {
    /// `group/storage-version`.
    pub stored: String,
    /// `group/served-version`.
    pub served: String,
    /// The served version's schema, when it sets defaults.
    pub defaults: Option<Value>,
    /// The webhook, for strategy `Webhook`.
    pub webhook: Option<Arc<Webhook>>,
    /// The objects (namespace, name, revision) read before and served unchanged: a LIST hands
    /// out their stored bytes instead of decoding, defaulting and encoding them again.
    pub unchanged: Verdicts,
}

/// The most verdicts a served version keeps. One LIST of this many objects, the largest the
/// benchmarks list, is served from stored bytes after its first time; beyond it the set starts
/// over, so memory stays bounded (about 100 bytes an entry) whatever the number of objects.
pub const MAX_VERDICTS: usize = 20_000;

/// A bounded set of (namespace, name, revision) read unchanged, by revision (a revision is
/// one write, so it names one object but for writes of several in one transaction): a LIST
/// looks each item up without allocating, under a read lock.
#[derive(Debug, Default)]
pub struct Verdicts(std::sync::RwLock<std::collections::HashMap<i64, Vec<(String, String)>>>);

impl Verdicts {
    /// Forgets every verdict: for a served version no definition serves any more.
    pub fn clear(&self) {
        self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
    }

    fn contains(&self, namespace: &str, name: &str, revision: i64) -> bool {
        let map = self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        map.get(&revision).is_some_and(|objects| objects.iter().any(|(ns, n)| ns == namespace && n == name))
    }

    fn insert(&self, obj: &Object, revision: i64) {
        let meta = obj.get("metadata");
        let field = |f: &str| meta.and_then(|m| m.get(f)).and_then(Value::as_str).unwrap_or("").to_string();
        let key = (field("namespace"), field("name"));
        let mut map = self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if map.len() >= MAX_VERDICTS {
            map.clear();
        }
        let objects = map.entry(revision).or_default();
        if !objects.contains(&key) {
            objects.push(key);
        }
    }
}

impl ServedForm {
    /// Converts a stored object to the served form; returns whether that changed nothing.
    fn served_form(&self, obj: &mut Object) -> Result<bool, ApiError> {
        let same_version = self.is_served(obj);
        self.convert(obj, &self.served)?;
        Ok(self.default_served(obj, same_version))
    }

    fn is_served(&self, obj: &Object) -> bool {
        obj.get("apiVersion").and_then(Value::as_str) == Some(self.served.as_str())
    }

    /// Applies the served version's defaults to an object converted to it; returns whether
    /// the object is as stored (`same_version`: it was stored in the served version).
    fn default_served(&self, obj: &mut Object, same_version: bool) -> bool {
        let mut defaulted = false;
        if let Some(schema) = &self.defaults {
            let mut v = Value::Object(std::mem::take(obj));
            defaulted = schema::apply_defaults(schema, &mut v);
            if let Value::Object(m) = v {
                *obj = m;
            }
        }
        same_version && !defaulted
    }

    fn convert(&self, obj: &mut Object, to: &str) -> Result<(), ApiError> {
        match &self.webhook {
            Some(w) if obj.get("apiVersion").and_then(Value::as_str) != Some(to) => w.convert(obj, to),
            _ => {
                obj.insert("apiVersion".into(), to.into());
                Ok(())
            }
        }
    }
}

impl VersionConverter for ServedForm {
    fn to_stored(&self, obj: &mut Object) -> Result<(), ApiError> {
        self.convert(obj, &self.stored)
    }

    fn to_served(&self, obj: &mut Object) -> Result<(), ApiError> {
        self.served_form(obj).map(|_| ())
    }

    fn to_served_from_storage(&self, obj: &mut Object, revision: i64) -> Result<(), ApiError> {
        if self.served_form(obj)? {
            self.unchanged.insert(obj, revision);
        }
        Ok(())
    }

    /// Objects of other versions go to the webhook in one review; the rest are not sent.
    fn to_served_from_storage_all(&self, objs: &mut [(Object, i64)]) -> Result<(), ApiError> {
        let same: Vec<bool> = objs.iter().map(|(obj, _)| self.is_served(obj)).collect();
        match &self.webhook {
            Some(w) => {
                let mut pending: Vec<&mut Object> =
                    objs.iter_mut().zip(&same).filter(|(_, same)| !**same).map(|((obj, _), _)| obj).collect();
                w.convert_all(&mut pending, &self.served)?;
            }
            None => {
                for (obj, _) in objs.iter_mut() {
                    obj.insert("apiVersion".into(), self.served.clone().into());
                }
            }
        }
        for ((obj, revision), same_version) in objs.iter_mut().zip(same) {
            if self.default_served(obj, same_version) {
                self.unchanged.insert(obj, *revision);
            }
        }
        Ok(())
    }

    fn served_as_stored(&self, namespace: &str, name: &str, revision: i64) -> bool {
        self.unchanged.contains(namespace, name, revision)
    }

    /// A webhook converts between any two versions in one call.
    fn to_version(&self, obj: &mut Object, api_version: &str) -> Option<Result<(), ApiError>> {
        self.webhook.as_ref().map(|w| match obj.get("apiVersion").and_then(Value::as_str) == Some(api_version) {
            true => Ok(()),
            false => w.convert(obj, api_version),
        })
    }

    /// Each version has its own schema, defaults and rules, which see objects in that version.
    fn prepares_served(&self) -> bool {
        true
    }
}

/// One definition's conversion webhook.
#[derive(Debug)]
pub struct Webhook {
    /// Where it is and which reviews it takes.
    pub spec: WebhookConversion,
    /// How Services are resolved (`None` where there is no store: unit tests).
    pub services: Option<Services>,
    /// The definition's schemas by `group/version`: an object the webhook converted loses
    /// the fields its new version's schema does not know, as kube's codec prunes it.
    pub schemas: BTreeMap<String, Arc<Value>>,
}

/// `group/version, Kind=kind` (kube's `GroupVersionKind.String()`).
fn gvk(obj: &Object) -> String {
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    format!("{group}/{version}, Kind={kind}")
}

fn meta_str<'a>(obj: &'a Object, field: &str) -> &'a str {
    obj.get("metadata").and_then(|m| m.get(field)).and_then(Value::as_str).unwrap_or("")
}

/// Runs `fut` to completion from synchronous code inside or outside a runtime.
fn block_on<F>(fut: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    use tokio::runtime::Builder;
    if let Some(handle) = crate::blocking::multi_threaded() {
        return tokio::task::block_in_place(|| handle.block_on(fut));
    }
    std::thread::scope(|scope| {
        scope
            .spawn(|| match Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt.block_on(fut),
                Err(e) => panic!("a runtime for the conversion webhook call: {e}"),
            })
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

/// Where an object sits in a review, for kube's texts about it: the one object of a single
/// conversion, or the `index`th object sent with others (kube's list conversion, whose texts
/// number the objects after the failing one for most checks).
#[derive(Debug, Clone, Copy)]
struct Place {
    list: bool,
    index: usize,
}

impl Place {
    /// Prefix of a groupVersion or kind finding.
    fn object(self) -> String {
        match self.list {
            false => "returned invalid object at index 0".into(),
            true => format!("returned invalid converted object at index {}", self.index + 1),
        }
    }

    /// Prefix of an identity finding (name, namespace, uid).
    fn identity(self) -> String {
        match self.list {
            false => "returned invalid object".into(),
            true => self.object(),
        }
    }

    /// Prefix of a metadata finding.
    fn metadata(self) -> String {
        match self.list {
            false => "returned invalid metadata".into(),
            true => format!("returned invalid metadata in object at index {}", self.index + 1),
        }
    }

    /// The finding of an answer that is not an object.
    fn not_an_object(self) -> String {
        match self.list {
            false => "returned invalid object at index 0: not an object".into(),
            true => format!("returned invalid converted object at index {}: not an object", self.index),
        }
    }
}

impl Webhook {
    /// Converts `obj` to `to` (`group/version`) through the webhook.
    fn convert(&self, obj: &mut Object, to: &str) -> Result<(), ApiError> {
        // kube's converter answers an empty object (apiVersion and kind only) itself.
        if obj.len() == 2 && obj.contains_key("kind") && obj.contains_key("apiVersion") {
            obj.insert("apiVersion".into(), to.into());
            return Ok(());
        }
        self.convert_all(&mut [obj], to)
    }

    /// Converts `objs` (none of them at `to`) to `to` in one ConversionReview; nothing is
    /// sent when there are none. Several objects are reported on as kube reports on a list
    /// (`<group>/<version>, Kind=<Kind>List`, objects by index).
    fn convert_all(&self, objs: &mut [&mut Object], to: &str) -> Result<(), ApiError> {
        let Some(first) = objs.first() else { return Ok(()) };
        let list = objs.len() > 1;
        let gvk = if list { format!("{}List", gvk(first)) } else { gvk(first) };
        let review_version = self
            .spec
            .review_versions
            .iter()
            .find(|v| *v == "v1" || *v == "v1beta1")
            .ok_or_else(|| ApiError::Failed("no supported conversion review versions".into()))?;
        let uid = ballast_apimachinery::uid::new_uid();
        let sent: Vec<Value> = objs.iter().map(|obj| Value::Object((**obj).clone())).collect();
        let review = json!({
            "apiVersion": format!("apiextensions.k8s.io/{review_version}"),
            "kind": "ConversionReview",
            "request": {"uid": uid, "desiredAPIVersion": to, "objects": sent},
        });
        let body = serde_json::to_vec(&review).unwrap_or_default();
        let failed = |e: String| ApiError::Failed(format!("conversion webhook for {gvk} failed: {e}"));
        let answer = block_on(webhook_client::post(&self.spec.client, self.services.as_ref(), body)).map_err(failed)?;
        let answer: Value = serde_json::from_slice(&answer).map_err(|e| failed(e.to_string()))?;
        let converted = converted_objects(review_version, &uid, &answer).map_err(failed)?;
        if converted.len() != objs.len() {
            return Err(ApiError::Failed(format!(
                "conversion webhook for {gvk} returned {} objects, expected {}",
                converted.len(),
                objs.len()
            )));
        }
        let invalid = |what: String| ApiError::Failed(format!("conversion webhook for {gvk} {what}"));
        for (index, (obj, out)) in objs.iter_mut().zip(converted).enumerate() {
            let place = Place { list, index };
            let Value::Object(mut out) = out else { return Err(invalid(place.not_an_object())) };
            check_converted(obj, &mut out, to, place).map_err(invalid)?;
            if let Some(schema) = self.schemas.get(to) {
                schema::prune_root(schema, &mut out);
            }
            **obj = out;
        }
        Ok(())
    }
}

/// kube's checks of one converted object against the `original` sent: the wanted version, the
/// same kind and identity; then the original's metadata restored into it.
fn check_converted(original: &Object, out: &mut Object, to: &str, place: Place) -> Result<(), String> {
    let got_version = out.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if got_version != to {
        return Err(format!("{}: invalid groupVersion (expected {to}, received {got_version})", place.object()));
    }
    let kind = |o: &Object| o.get("kind").and_then(Value::as_str).unwrap_or("").to_string();
    let (want_kind, got_kind) = (kind(original), kind(out));
    if want_kind != got_kind {
        return Err(format!("{}: invalid kind (expected {want_kind}, received {got_kind})", place.object()));
    }
    for field in ["name", "namespace", "uid"] {
        let (want, got) = (meta_str(original, field), meta_str(out, field));
        if want != got {
            let label = if field == "uid" { "UID".to_string() } else { field.to_string() };
            return Err(format!("{}: must have the same {label}: {want} != {got}", place.identity()));
        }
    }
    restore_metadata(original, out).map_err(|e| format!("{}: {e}", place.metadata()))
}

/// The converted objects of a webhook's answer, with kube's checks of the review.
fn converted_objects(review_version: &str, uid: &str, answer: &Value) -> Result<Vec<Value>, String> {
    if review_version == "v1" {
        let (api_version, kind) = (answer["apiVersion"].as_str().unwrap_or(""), answer["kind"].as_str().unwrap_or(""));
        if api_version != "apiextensions.k8s.io/v1" || kind != "ConversionReview" {
            let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
            return Err(format!(
                "expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got {group}/{version}, Kind={kind}"
            ));
        }
    }
    let response = answer.get("response").filter(|r| r.is_object()).ok_or("no response provided")?;
    // v1beta1 reviews were never checked for their uid; kube keeps it so.
    let got_uid = response["uid"].as_str().unwrap_or("");
    if review_version == "v1" && got_uid != uid {
        return Err(format!("expected response.uid={uid:?}, got {got_uid:?}"));
    }
    let result = &response["result"];
    let status = result["status"].as_str().unwrap_or("");
    if status != "Success" {
        return Err(match result["message"].as_str().filter(|m| !m.is_empty()) {
            Some(m) => m.to_string(),
            None => format!("response.result.status was '{status}', not 'Success'"),
        });
    }
    Ok(response["convertedObjects"].as_array().cloned().unwrap_or_default())
}

/// Puts the original's metadata back into `converted`, keeping the webhook's labels and
/// annotations (which must be string maps): a webhook converts content, not identity.
fn restore_metadata(original: &Object, converted: &mut Object) -> Result<(), String> {
    let answered = match converted.get("metadata") {
        None => return Err("missing metadata in converted object".into()),
        Some(Value::Object(m)) => m.clone(),
        Some(other) => return Err(format!("invalid metadata of type {} in converted object", type_name(other))),
    };
    let mut meta: Map<String, Value> = match original.get("metadata") {
        Some(Value::Object(m)) => m.clone(),
        _ => Map::new(),
    };
    for field in ["labels", "annotations"] {
        match answered.get(field) {
            None | Some(Value::Null) => {
                meta.remove(field);
            }
            Some(Value::Object(m)) => {
                if let Some((k, v)) = m.iter().find(|(_, v)| !v.is_string()) {
                    return Err(format!(
                        "metadata.{field}[{k}] must be a string, but is {} in converted object",
                        type_name(v)
                    ));
                }
                if meta.get(field).and_then(Value::as_object) != Some(m) {
                    // kube's path for annotations here is `metadata.annotation`.
                    let errs = if field == "labels" {
                        validation::labels(m, "metadata.labels")
                    } else {
                        validation::annotations(m, "metadata.annotation")
                    };
                    if !errs.is_empty() {
                        return Err(crate::object_meta::aggregate(&errs));
                    }
                }
                meta.insert(field.into(), Value::Object(m.clone()));
            }
            Some(other) => {
                return Err(format!("invalid metadata.{field} of type {} in converted object", type_name(other)))
            }
        }
    }
    converted.insert("metadata".into(), Value::Object(meta));
    Ok(())
}

/// The Go type a decoded JSON value has, as kube's messages name it.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Object {
        match v {
            Value::Object(m) => m,
            other => panic!("not an object: {other}"),
        }
    }

    #[test]
    fn review_answers_are_checked_as_kube_checks_them() {
        let ok = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": "u1", "result": {"status": "Success"}, "convertedObjects": [{"a": 1}]}});
        assert_eq!(converted_objects("v1", "u1", &ok), Ok(vec![json!({"a": 1})]));
        assert_eq!(converted_objects("v1", "u2", &ok), Err("expected response.uid=\"u2\", got \"u1\"".to_string()));
        let wrong = json!({"apiVersion": "v1", "kind": "Status"});
        assert_eq!(
            converted_objects("v1", "u1", &wrong),
            Err("expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got /v1, Kind=Status"
                .into())
        );
        let failed = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": "u1", "result": {"status": "Failure", "message": "cannot convert"}}});
        assert_eq!(converted_objects("v1", "u1", &failed), Err("cannot convert".into()));
        let bare = json!({"response": {"result": {"status": "Failure"}}});
        assert_eq!(
            converted_objects("v1beta1", "u1", &bare),
            Err("response.result.status was 'Failure', not 'Success'".into())
        );
        assert_eq!(converted_objects("v1beta1", "u1", &json!({})), Err("no response provided".into()));
    }

    #[test]
    fn metadata_comes_from_the_original_but_labels_from_the_webhook() {
        let original = obj(json!({"metadata": {"name": "a", "resourceVersion": "7", "labels": {"x": "1"}}}));
        let mut converted = obj(json!({"metadata": {"name": "a", "labels": {"y": "2"}, "generation": 9}}));
        restore_metadata(&original, &mut converted).expect("restores");
        assert_eq!(converted["metadata"], json!({"name": "a", "resourceVersion": "7", "labels": {"y": "2"}}));
        let mut renamed = obj(json!({"metadata": {"name": "a", "labels": {"bad key!": "1"}}}));
        assert_eq!(
            restore_metadata(&original, &mut renamed),
            Err("metadata.labels: Invalid value: \"bad key!\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".into())
        );
        let mut annotated = obj(json!({"metadata": {"name": "a", "annotations": {"/x": "1", "ok": "2"}}}));
        let err = restore_metadata(&original, &mut annotated).expect_err("refused");
        assert!(err.starts_with("metadata.annotation: Invalid value: \"/x\""), "{err}");
        let mut bad = obj(json!({"metadata": {"labels": {"y": 2}}}));
        assert_eq!(
            restore_metadata(&original, &mut bad),
            Err("metadata.labels[y] must be a string, but is int64 in converted object".into())
        );
    }

    #[test]
    fn objects_of_a_list_are_reported_by_index_as_kube_reports_them() {
        let original = obj(json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "a", "uid": "u1"}}));
        let mut wrong_version = original.clone();
        let one = Place { list: false, index: 0 };
        let third = Place { list: true, index: 2 };
        assert_eq!(
            check_converted(&original, &mut wrong_version, "example.com/v2", third),
            Err("returned invalid converted object at index 3: invalid groupVersion (expected example.com/v2, received example.com/v1)".into())
        );
        let mut renamed = obj(json!({"apiVersion": "example.com/v2", "kind": "Widget",
            "metadata": {"name": "b", "uid": "u1"}}));
        assert_eq!(
            check_converted(&original, &mut renamed, "example.com/v2", one),
            Err("returned invalid object: must have the same name: a != b".into())
        );
        assert_eq!(
            check_converted(&original, &mut renamed, "example.com/v2", third),
            Err("returned invalid converted object at index 3: must have the same name: a != b".into())
        );
        let mut bare = obj(json!({"apiVersion": "example.com/v2", "kind": "Widget"}));
        assert_eq!(
            check_converted(&original, &mut bare, "example.com/v2", third),
            Err("returned invalid converted object at index 3: must have the same name: a != ".into())
        );
        let mut fine = obj(json!({"apiVersion": "example.com/v2", "kind": "Widget",
            "metadata": {"name": "a", "uid": "u1", "labels": {"x": "y"}}, "spec": {}}));
        check_converted(&original, &mut fine, "example.com/v2", third).expect("valid");
        assert_eq!(fine["metadata"], json!({"name": "a", "uid": "u1", "labels": {"x": "y"}}));
        assert_eq!(third.not_an_object(), "returned invalid converted object at index 2: not an object");
    }

    #[test]
    fn objects_read_unchanged_are_remembered_by_revision() {
        let form = ServedForm {
            stored: "example.com/v1".into(),
            served: "example.com/v1".into(),
            defaults: Some(json!({"type": "object", "properties": {"spec": {"type": "object",
                "properties": {"size": {"type": "integer", "default": 1}}}}})),
            webhook: None,
            unchanged: Verdicts::default(),
        };
        let read = |spec: Value, rv: i64| {
            let mut o = obj(json!({"apiVersion": "example.com/v1", "kind": "W",
                "metadata": {"namespace": "ns", "name": "a", "resourceVersion": rv.to_string()}, "spec": spec}));
            form.to_served_from_storage(&mut o, rv).expect("converts");
            o
        };
        assert_eq!(read(json!({}), 5)["spec"], json!({"size": 1}));
        assert!(!form.served_as_stored("ns", "a", 5), "defaulted: not as stored");
        read(json!({"size": 2}), 6);
        assert!(form.served_as_stored("ns", "a", 6));
        // Objects converted on other paths (a write's answer) are not remembered.
        let mut answer = obj(json!({"apiVersion": "example.com/v1", "kind": "W",
            "metadata": {"namespace": "ns", "name": "a", "resourceVersion": "8"}, "spec": {"size": 2}}));
        form.to_served(&mut answer).expect("converts");
        assert!(!form.served_as_stored("ns", "a", 8));
        assert!(!form.served_as_stored("ns", "a", 7) && !form.served_as_stored("other", "a", 6));
        // A page read together is remembered alike.
        let stored = |spec: Value, rv: i64| {
            (
                obj(json!({"apiVersion": "example.com/v1", "kind": "W",
                "metadata": {"namespace": "ns", "name": "p", "resourceVersion": rv.to_string()}, "spec": spec})),
                rv,
            )
        };
        let mut page = vec![stored(json!({}), 10), stored(json!({"size": 3}), 11)];
        form.to_served_from_storage_all(&mut page).expect("converts");
        assert_eq!(page[0].0["spec"], json!({"size": 1}));
        assert!(!form.served_as_stored("ns", "p", 10) && form.served_as_stored("ns", "p", 11));
    }

    #[test]
    fn an_unreachable_webhook_fails_the_conversion_in_kube_words() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        drop(listener);
        let webhook = Webhook {
            spec: WebhookConversion {
                client: crate::definition::WebhookClientConfig {
                    url: Some(format!("https://127.0.0.1:{port}/convert")),
                    service: None,
                    ca_bundle: Vec::new(),
                },
                review_versions: vec!["v1".into()],
            },
            services: None,
            schemas: BTreeMap::new(),
        };
        let form = ServedForm {
            stored: "example.com/v1".into(),
            served: "example.com/v2".into(),
            defaults: None,
            webhook: Some(Arc::new(webhook)),
            unchanged: Verdicts::default(),
        };
        let mut o = obj(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "a"}}));
        let err = form.to_served(&mut o).expect_err("nothing listens");
        assert_eq!(
            err.to_string(),
            format!(
                "conversion webhook for example.com/v1, Kind=Widget failed: Post \"https://127.0.0.1:{port}/convert?timeout=30s\": dial tcp 127.0.0.1:{port}: connect: connection refused"
            )
        );
        assert_eq!(err.status()["code"], 500);
        assert!(err.status().get("reason").is_none());
        // Already in the wanted version: no call.
        let mut stored = o.clone();
        form.to_stored(&mut stored).expect("no conversion needed");
    }
}
