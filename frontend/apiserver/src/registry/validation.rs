//! Name, label and key validation with kube-apiserver's rules and messages
//! (`k8s.io/apimachinery/pkg/util/validation`): clients and conformance tests read these.

/// Longest DNS-1123 subdomain.
pub const DNS1123_SUBDOMAIN_MAX: usize = 253;
/// Longest DNS-1123 label.
pub const DNS1123_LABEL_MAX: usize = 63;

use serde_json::{Map, Value};

use crate::error::FieldError;

const LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const SUBDOMAIN_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";

fn is_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// Returns the problems with `s` as a DNS-1123 label (namespace names).
pub fn dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_LABEL_MAX {
        errs.push(format!("must be no more than {DNS1123_LABEL_MAX} characters"));
    }
    if !is_label(s) {
        errs.push(format!(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start \
             and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is \
             '{LABEL_FMT}')"
        ));
    }
    errs
}

/// Returns the problems with `s` as a DNS-1123 subdomain (most object names).
pub fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_SUBDOMAIN_MAX {
        errs.push(format!("must be no more than {DNS1123_SUBDOMAIN_MAX} characters"));
    }
    if s.is_empty() || !s.split('.').all(is_label) {
        errs.push(format!(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and \
             must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is \
             '{SUBDOMAIN_FMT}')"
        ));
    }
    errs
}

/// Returns the problems with `s` as a DNS-1035 label (service names).
pub fn dns1035_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_LABEL_MAX {
        errs.push(format!("must be no more than {DNS1123_LABEL_MAX} characters"));
    }
    if !is_label(s) || !s.as_bytes()[0].is_ascii_lowercase() {
        errs.push(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic \
             character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for \
             validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
                .to_string(),
        );
    }
    errs
}

/// Returns the problems with `s` as a path segment name (kube's `IsValidPathSegmentName`).
pub fn path_segment_name(s: &str) -> Vec<String> {
    if s == "." || s == ".." {
        return vec![format!("may not be '{s}'")];
    }
    let mut errs = Vec::new();
    for bad in ["/", "%"] {
        if s.contains(bad) {
            errs.push(format!("may not contain '{bad}'"));
        }
    }
    errs
}

/// Returns an `Unsupported value` error when `value` (a string, absent counts as "") is not
/// one of `allowed`.
pub fn supported(field: &str, value: Option<&Value>, allowed: &[&str]) -> Option<FieldError> {
    let s = value.and_then(Value::as_str).unwrap_or("");
    (!allowed.contains(&s)).then(|| FieldError::not_supported(field, s, allowed))
}

/// As [`supported`], but an absent or null value is fine (optional enums).
pub fn supported_if_set(field: &str, value: Option<&Value>, allowed: &[&str]) -> Option<FieldError> {
    supported(field, value.filter(|v| !v.is_null()), allowed).filter(|_| value.is_some_and(|v| !v.is_null()))
}

/// Returns an error when `value` is a number below zero.
pub fn non_negative(field: &str, value: Option<&Value>) -> Option<FieldError> {
    let v = value?.as_i64()?;
    (v < 0).then(|| FieldError::invalid(field, v, "must be greater than or equal to 0"))
}

/// Returns the `matchLabels`/`matchExpressions` selector as the string form (`a=b,c in (d)`),
/// as `status.selector` of scalable kinds carries it.
pub fn selector_string(selector: &Value) -> String {
    let mut parts = Vec::new();
    let Some(sel) = selector.as_object() else { return String::new() };
    // A selector without either field is a plain map (ReplicationController `spec.selector`).
    let plain = !sel.contains_key("matchLabels") && !sel.contains_key("matchExpressions");
    let labels = if plain { Some(sel) } else { sel.get("matchLabels").and_then(Value::as_object) };
    for (k, v) in labels.into_iter().flatten() {
        parts.push(format!("{k}={}", v.as_str().unwrap_or("")));
    }
    for e in sel.get("matchExpressions").and_then(Value::as_array).into_iter().flatten() {
        let key = e["key"].as_str().unwrap_or("");
        let values: Vec<&str> = e["values"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        match e["operator"].as_str().unwrap_or("") {
            "In" => parts.push(format!("{key} in ({})", values.join(","))),
            "NotIn" => parts.push(format!("{key} notin ({})", values.join(","))),
            "Exists" => parts.push(key.to_string()),
            "DoesNotExist" => parts.push(format!("!{key}")),
            _ => {}
        }
    }
    parts.sort();
    parts.join(",")
}

/// Returns whether a `LabelSelector` (or a plain map) matches `labels`.
pub fn selector_matches(selector: &Value, labels: &Map<String, Value>) -> bool {
    let Some(sel) = selector.as_object() else { return false };
    let plain = !sel.contains_key("matchLabels") && !sel.contains_key("matchExpressions");
    let match_labels = if plain { Some(sel) } else { sel.get("matchLabels").and_then(Value::as_object) };
    let labels_ok = match_labels.into_iter().flatten().all(|(k, v)| labels.get(k) == Some(v));
    let exprs_ok = sel.get("matchExpressions").and_then(Value::as_array).into_iter().flatten().all(|e| {
        let key = e["key"].as_str().unwrap_or("");
        let values = e["values"].as_array();
        let has = |v: &Value| values.is_some_and(|vals| vals.contains(v));
        match (e["operator"].as_str().unwrap_or(""), labels.get(key)) {
            ("In", Some(v)) => has(v),
            ("NotIn", Some(v)) => !has(v),
            ("NotIn", None) | ("Exists", Some(_)) | ("DoesNotExist", None) => true,
            _ => false,
        }
    });
    labels_ok && exprs_ok
}

/// Returns the problems with a ConfigMap or Secret data key (`IsConfigMapKey`).
pub fn config_map_key(key: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if key.len() > DNS1123_SUBDOMAIN_MAX {
        errs.push(format!("must be no more than {DNS1123_SUBDOMAIN_MAX} characters"));
    }
    if key.is_empty() || !key.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.')) {
        errs.push(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or \
             'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
                .to_string(),
        );
    }
    if key == "." {
        errs.push("must not be '.'".into());
    } else if key == ".." {
        errs.push("must not be '..'".into());
    } else if key.starts_with("..") {
        errs.push("must not start with '..'".into());
    }
    errs
}

fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

/// Returns the problems with a label or annotation key (`IsQualifiedName`).
pub fn qualified_name(key: &str) -> Vec<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let mut errs = Vec::new();
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            errs.push("prefix part must be non-empty".to_string());
        } else {
            errs.extend(dns1123_subdomain(prefix).into_iter().map(|e| format!("prefix part {e}")));
        }
    }
    if !is_qualified_name_part(name) || name.contains('/') {
        errs.push(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an \
             alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is \
             '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
                .to_string(),
        );
    }
    errs
}

/// Returns the problems with a label value (`IsValidLabelValue`); empty is allowed.
pub fn label_value(value: &str) -> Vec<String> {
    if value.is_empty() || is_qualified_name_part(value) {
        return Vec::new();
    }
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    errs.push(
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must \
         start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for \
         validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
            .to_string(),
    );
    errs
}

/// kube's bound on the total size of an object's annotations (keys and values): 256 KiB.
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// Validates labels as kube does: qualified-name keys, label values, under `path`.
pub fn labels(labels: &Map<String, Value>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (k, v) in labels {
        for p in qualified_name(k) {
            errs.push(FieldError::invalid(path, k.as_str(), p));
        }
        match v.as_str() {
            Some(v) => {
                for p in label_value(v) {
                    errs.push(FieldError::invalid(format!("{path}[{k}]"), v, p));
                }
            }
            None => errs.push(FieldError::invalid(format!("{path}[{k}]"), v.clone(), "must be a string")),
        }
    }
    errs
}

/// Validates annotations as kube does: qualified-name keys (lower-cased) and the total size,
/// under `path`.
pub fn annotations(annotations: &Map<String, Value>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for k in annotations.keys() {
        for p in qualified_name(&k.to_ascii_lowercase()) {
            errs.push(FieldError::invalid(path, k.as_str(), p));
        }
    }
    let size: usize = annotations.iter().map(|(k, v)| k.len() + v.as_str().map_or(0, str::len)).sum();
    if size > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError::too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT));
    }
    errs
}

/// Validates `metadata.ownerReferences` as kube does: each names its owner completely
/// (apiVersion with a version, kind, name, uid), no Event owns anything, and at most one is the
/// controller. kube reports these at `metadata.ownerReferences` without the element's index.
pub fn owner_references(refs: &Value) -> Vec<FieldError> {
    const PATH: &str = "metadata.ownerReferences";
    let mut errs = Vec::new();
    let mut controller: Option<String> = None;
    for r in refs.as_array().into_iter().flatten() {
        let text = |f: &str| r.get(f).and_then(Value::as_str).unwrap_or("");
        let (api_version, kind, name) = (text("apiVersion"), text("kind"), text("name"));
        // kube's FromAPIVersionAndKind: "v1" is the core group, "g/v" a group; more slashes
        // leave no version.
        let version = match api_version.split('/').collect::<Vec<_>>().as_slice() {
            [v] => *v,
            [_, v] => *v,
            _ => "",
        };
        let group = api_version.split_once('/').map_or("", |(g, _)| g);
        if version.is_empty() {
            errs.push(FieldError::invalid(format!("{PATH}.apiVersion"), api_version, "version must not be empty"));
        }
        if kind.is_empty() {
            errs.push(FieldError::invalid(format!("{PATH}.kind"), kind, "must not be empty"));
        }
        if name.is_empty() {
            errs.push(FieldError::invalid(format!("{PATH}.name"), name, "must not be empty"));
        }
        if text("uid").is_empty() {
            errs.push(FieldError::invalid(format!("{PATH}.uid"), text("uid"), "must not be empty"));
        }
        if group.is_empty() && version == "v1" && kind == "Event" {
            errs.push(FieldError::invalid(PATH, r.clone(), "/v1, Kind=Event is disallowed from being an owner"));
        }
        if r.get("controller") == Some(&Value::Bool(true)) {
            let this = format!("{kind}/{name}");
            match &controller {
                Some(first) => errs.push(FieldError::invalid(
                    PATH,
                    refs.clone(),
                    format!("Only one reference can have Controller set to true. Found \"true\" in references for {first} and {this}"),
                )),
                None => controller = Some(this),
            }
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(dns1123_label("kube-system").is_empty());
        assert!(!dns1123_label("a.b").is_empty());
        assert!(dns1123_subdomain("a.b-c").is_empty());
        assert!(!dns1123_subdomain("Bad_Name").is_empty());
        assert!(!dns1123_subdomain("-a").is_empty());
        assert!(!dns1123_subdomain("").is_empty());
    }

    #[test]
    fn dns1035_and_path_segments() {
        assert!(dns1035_label("web-1").is_empty());
        assert!(!dns1035_label("1web").is_empty());
        assert!(path_segment_name("system:controller:x").is_empty());
        assert_eq!(path_segment_name("a/b"), vec!["may not contain '/'"]);
        assert_eq!(path_segment_name(".."), vec!["may not be '..'"]);
    }

    #[test]
    fn selectors_render_and_match() {
        let sel = serde_json::json!({"matchLabels": {"app": "x"}, "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["a", "b"]}]});
        assert_eq!(selector_string(&sel), "app=x,tier in (a,b)");
        let labels = serde_json::json!({"app": "x", "tier": "a"});
        assert!(selector_matches(&sel, labels.as_object().expect("map")));
        let other = serde_json::json!({"app": "y", "tier": "a"});
        assert!(!selector_matches(&sel, other.as_object().expect("map")));
        assert_eq!(selector_string(&serde_json::json!({"app": "x"})), "app=x");
    }

    #[test]
    fn owner_references_must_be_complete() {
        let errs = owner_references(&serde_json::json!([{"apiVersion": "", "kind": "", "name": "", "uid": ""}]));
        let text: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            vec![
                r#"metadata.ownerReferences.apiVersion: Invalid value: "": version must not be empty"#,
                r#"metadata.ownerReferences.kind: Invalid value: "": must not be empty"#,
                r#"metadata.ownerReferences.name: Invalid value: "": must not be empty"#,
                r#"metadata.ownerReferences.uid: Invalid value: "": must not be empty"#,
            ]
        );
        let ok = serde_json::json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "uid": "u", "controller": true}]);
        assert!(owner_references(&ok).is_empty());
        let two = serde_json::json!([
            {"apiVersion": "v1", "kind": "A", "name": "a", "uid": "1", "controller": true},
            {"apiVersion": "v1", "kind": "B", "name": "b", "uid": "2", "controller": true},
        ]);
        let errs = owner_references(&two);
        assert_eq!(errs.len(), 1);
        assert!(errs[0].to_string().ends_with(r#"Found "true" in references for A/a and B/b"#), "{}", errs[0]);
    }

    #[test]
    fn keys_and_labels() {
        assert!(config_map_key("KEY_name.1").is_empty());
        assert!(!config_map_key("").is_empty());
        assert!(!config_map_key("..a").is_empty());
        assert!(!config_map_key("a b").is_empty());
        assert!(qualified_name("app.kubernetes.io/name").is_empty());
        assert!(!qualified_name("/x").is_empty());
        assert!(label_value("").is_empty());
        assert!(!label_value("-x").is_empty());
    }
}
