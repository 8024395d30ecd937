//! Label and field selectors (`labelSelector=`, `fieldSelector=`): never a panic, for parsing
//! or matching; and what an accepted equality requirement names matches the labels it names.
//!
//! Input: a selector, or (after a NUL) a key and a value joined into `key=value`.
#![no_main]

use std::collections::BTreeMap;

use ballast_apiserver::registry::selectors::{FieldSelector, LabelSelector};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

/// The field selector names a Pod allows, as the registry passes them.
const POD_FIELDS: [(&str, &str); 4] = [
    ("metadata.name", "metadata.name"),
    ("metadata.namespace", "metadata.namespace"),
    ("spec.nodeName", "spec.nodeName"),
    ("status.phase", "status.phase"),
];

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Some((key, value)) = text.split_once('\0') {
        // `key=value` that parses is matched by exactly those labels, and `!key` is not.
        // `key==v` is `key` equal to `v`, so a value starting with `=` names another one.
        if value.contains(',') || value.trim_start().starts_with('=') || key.contains([',', '!', '=', '(']) {
            return;
        }
        if let Ok(sel) = LabelSelector::parse(&format!("{key}={value}")) {
            let labels: BTreeMap<String, String> = [(key.trim().to_string(), value.trim().to_string())].into();
            assert!(sel.matches(&labels), "{key}={value} does not match its own labels");
            if let Ok(not) = LabelSelector::parse(&format!("!{key}")) {
                assert!(!not.matches(&labels), "!{key} matches labels holding {key}");
            }
        }
        return;
    }
    let labels: BTreeMap<String, String> = [("app".into(), "web".into()), ("n".into(), "3".into())].into();
    if let Ok(sel) = LabelSelector::parse(text) {
        let matched = sel.matches(&labels);
        let _ = sel.matches(&BTreeMap::new());
        assert!(!sel.is_empty() || matched, "an empty selector does not match everything");
    }
    if let Ok(sel) = FieldSelector::parse(text, &POD_FIELDS) {
        let pod = json!({"metadata": {"name": "web", "namespace": "default"}, "spec": {"nodeName": 3},
                         "status": {"phase": true}});
        let _ = sel.matches(&pod);
        let _ = sel.only_metadata_names();
    }
});
