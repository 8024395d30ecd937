//! The `extension-apiserver-authentication` ConfigMap in `kube-system`, published at start-up
//! as kube-apiserver publishes it: how an extension server (metrics-server, any server built
//! on kube's apiserver library) should trust this server's clients and its front proxy. Keys:
//! `client-ca-file` (PEM), and when request-header authentication is on
//! `requestheader-client-ca-file` (PEM) and `requestheader-allowed-names`,
//! `-username-headers`, `-uid-headers`, `-group-headers`, `-extra-headers-prefix` (JSON arrays).
//!
//! Several servers share the ConfigMap, so what is there is merged with ours rather than
//! replaced (kube's `combinedClusterAuthenticationInfo`): lists keep their entries and gain
//! ours, CA bundles keep their certificates and gain ours, duplicates dropped.

use serde_json::{json, Map, Value};

use crate::builtin::BuiltinKinds;
use ballast_apiserver::authn::request_header::RequestHeaderConfig;
use ballast_apiserver::error::ApiError;
use ballast_apiserver::registry::{ServedKinds, Store};

/// The ConfigMap's namespace.
pub const NAMESPACE: &str = "kube-system";
/// The ConfigMap's name.
pub const NAME: &str = "extension-apiserver-authentication";
/// How often a write that lost a race with another server's is retried: each retry re-reads
/// and re-merges, so a handful covers servers starting together.
const CONFLICT_RETRIES: usize = 5;

/// What this server publishes.
#[derive(Debug, Clone, Default)]
pub struct AuthenticationInfo {
    /// The client CA bundle (PEM).
    pub client_ca_pem: String,
    /// The request-header settings, when on.
    pub request_header: Option<RequestHeaderConfig>,
}

/// The PEM blocks of a bundle, whitespace-normalised so equal certificates compare equal.
fn pem_blocks(bundle: &str) -> Vec<String> {
    const END: &str = "-----END CERTIFICATE-----";
    let mut blocks = Vec::new();
    let mut rest = bundle;
    while let Some(start) = rest.find("-----BEGIN CERTIFICATE-----") {
        let Some(end) = rest[start..].find(END) else { break };
        let block = &rest[start..start + end + END.len()];
        blocks.push(block.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("\n") + "\n");
        rest = &rest[start + end + END.len()..];
    }
    blocks
}

fn merge_bundles(existing: &str, ours: &str) -> String {
    let mut blocks = pem_blocks(existing);
    for block in pem_blocks(ours) {
        if !blocks.contains(&block) {
            blocks.push(block);
        }
    }
    blocks.concat()
}

fn merge_lists(existing: Option<&str>, ours: &[String]) -> String {
    let mut list: Vec<String> = existing.and_then(|text| serde_json::from_str(text).ok()).unwrap_or_default();
    for item in ours {
        if !list.contains(item) {
            list.push(item.clone());
        }
    }
    Value::from(list).to_string()
}

/// The ConfigMap's data: `existing` merged with `info`.
pub fn merged_data(existing: &Map<String, Value>, info: &AuthenticationInfo) -> Map<String, Value> {
    let old = |key: &str| existing.get(key).and_then(Value::as_str);
    let mut data = Map::new();
    let client_ca = merge_bundles(old("client-ca-file").unwrap_or_default(), &info.client_ca_pem);
    if !client_ca.is_empty() {
        data.insert("client-ca-file".into(), client_ca.into());
    }
    let empty = RequestHeaderConfig::default();
    let ours = info.request_header.as_ref().unwrap_or(&empty);
    let request_header_ca = merge_bundles(old("requestheader-client-ca-file").unwrap_or_default(), &ours.client_ca_pem);
    if request_header_ca.is_empty() {
        return data;
    }
    for (key, list) in [
        ("requestheader-username-headers", &ours.username_headers),
        ("requestheader-uid-headers", &ours.uid_headers),
        ("requestheader-group-headers", &ours.group_headers),
        ("requestheader-extra-headers-prefix", &ours.extra_headers_prefix),
        ("requestheader-allowed-names", &ours.allowed_names),
    ] {
        data.insert(key.into(), merge_lists(old(key), list).into());
    }
    data.insert("requestheader-client-ca-file".into(), request_header_ca.into());
    data
}

/// Creates or updates the ConfigMap; returns whether it changed.
///
/// # Errors
///
/// The store's errors, after [`CONFLICT_RETRIES`] lost races.
pub async fn publish(store: &Store, info: &AuthenticationInfo) -> Result<bool, ApiError> {
    let kind =
        BuiltinKinds.find("", "v1", "configmaps").ok_or_else(|| ApiError::Internal("no configmaps kind".into()))?;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let result = match store.get(kind, NAMESPACE, NAME).await {
            Ok(mut current) => {
                let existing = current.get("data").and_then(Value::as_object).cloned().unwrap_or_default();
                let data = merged_data(&existing, info);
                if data == existing {
                    return Ok(false);
                }
                current.insert("data".into(), Value::Object(data));
                store.update(kind, NAMESPACE, NAME, current, false).await
            }
            Err(ApiError::NotFound { .. }) => {
                let data = merged_data(&Map::new(), info);
                let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": NAME, "namespace": NAMESPACE}, "data": data});
                store.create(kind, NAMESPACE, object.as_object().cloned().unwrap_or_default(), false).await
            }
            Err(e) => return Err(e),
        };
        match result {
            Ok(_) => return Ok(true),
            Err(ApiError::Conflict { .. } | ApiError::AlreadyExists { .. }) if attempt < CONFLICT_RETRIES => continue,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CERT_A: &str = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    const CERT_B: &str = "-----BEGIN CERTIFICATE-----\nBBBB\n-----END CERTIFICATE-----\n";

    #[test]
    fn ours_is_merged_into_what_other_servers_published() {
        let info = AuthenticationInfo {
            client_ca_pem: CERT_A.into(),
            request_header: Some(RequestHeaderConfig {
                client_ca_pem: CERT_B.into(),
                allowed_names: vec!["front-proxy-client".into()],
                username_headers: vec!["X-Remote-User".into()],
                uid_headers: vec![],
                group_headers: vec!["X-Remote-Group".into()],
                extra_headers_prefix: vec!["X-Remote-Extra-".into()],
            }),
        };
        let fresh = merged_data(&Map::new(), &info);
        assert_eq!(fresh["client-ca-file"], CERT_A);
        assert_eq!(fresh["requestheader-client-ca-file"], CERT_B);
        assert_eq!(fresh["requestheader-username-headers"], r#"["X-Remote-User"]"#);
        assert_eq!(fresh["requestheader-uid-headers"], "[]");
        assert_eq!(fresh["requestheader-allowed-names"], r#"["front-proxy-client"]"#);
        // Another server's entries stay, ours are added once.
        let mut other = fresh.clone();
        other.insert("client-ca-file".into(), format!("{CERT_B}\n").into());
        other.insert("requestheader-username-headers".into(), r#"["X-Other-User"]"#.into());
        let merged = merged_data(&other, &info);
        assert_eq!(merged["client-ca-file"], format!("{CERT_B}{CERT_A}"));
        assert_eq!(merged["requestheader-username-headers"], r#"["X-Other-User","X-Remote-User"]"#);
        assert_eq!(merged_data(&merged, &info), merged, "publishing twice changes nothing");
        // Without request-header authentication only the client CA is published.
        let plain =
            merged_data(&Map::new(), &AuthenticationInfo { client_ca_pem: CERT_A.into(), request_header: None });
        assert_eq!(plain.keys().collect::<Vec<_>>(), ["client-ca-file"]);
    }
}
