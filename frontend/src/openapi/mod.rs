//! OpenAPI: the v2 and v3 documents kubectl reads to validate (`create -f`, `apply`, `replace`
//! decide from them whether the server checks fields itself) and to `explain`.
//!
//! * [`schemas`]: definitions from k8s-openapi's schemas, fixed up to match upstream (with the
//!   strategic-merge-patch tags of the generated object schemas), and the schema walk strict
//!   decoding uses
//!   ([`unknown_fields`]) and the check of values' JSON types ([`field_types`]);
//! * [`operations`]: the REST operations of a group version, from the built-in kinds table and
//!   discovery's subresource list, so the documents and discovery never disagree;
//! * [`v3`]: one OpenAPI 3.0 document per group version; [`v2`]: one Swagger 2.0 document over
//!   all of them, with `ballast_apiserver::routes::openapi_v2_proto` its protobuf form (the
//!   only form kubectl asks for; the apiextensions server encodes its additions with it too).
//!
//! The served kinds are fixed at build time, so every document is built once, on first use,
//! and kept as bytes with its hash; requests only copy a reference. Nothing here touches
//! storage or HTTP (that is `ballast_apiserver::routes::openapi`).

pub mod field_types;
pub mod operations;
pub mod schemas;
#[cfg(test)]
mod test_bodies;
pub mod unknown_fields;
pub mod v2;
pub mod v3;

use std::collections::BTreeMap;
use std::sync::OnceLock;

use bytes::Bytes;

use ballast_apiserver::registry::served_kinds::{Document, Documents};

static DOCUMENTS: OnceLock<Documents> = OnceLock::new();

/// Returns the documents, building them on first use (about 0.2 s in a release build, longer
/// in a debug one; async callers use [`built`] first and build on a blocking thread).
pub fn documents() -> &'static Documents {
    DOCUMENTS.get_or_init(build)
}

/// Returns the documents if they have been built.
pub fn built() -> Option<&'static Documents> {
    DOCUMENTS.get()
}

fn to_vec(value: &serde_json::Value) -> Vec<u8> {
    // Serializing a `Value` cannot fail: its keys are strings.
    serde_json::to_vec(value).unwrap_or_default()
}

fn build() -> Documents {
    let started = ballast_apimachinery::clock::monotonic_now();
    let defs = schemas::definitions();
    let mut v3 = BTreeMap::new();
    for (g, v) in schemas::group_versions() {
        v3.insert(operations::index_key(g, v), Document::new(to_vec(&v3::document(g, v, defs))));
    }
    let index: serde_json::Map<String, serde_json::Value> = v3
        .iter()
        .map(|(key, doc)| {
            (key.clone(), serde_json::json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={}", doc.hash)}))
        })
        .collect();
    let v3_index = Document::new(to_vec(&serde_json::json!({ "paths": index })));
    let v2_value = v2::document(defs);
    let v2_protobuf = Bytes::from(ballast_apiserver::routes::openapi_v2_proto::encode(&v2_value));
    let v2 = Document::new(to_vec(&v2_value));
    tracing::info!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        v3_documents = v3.len(),
        v3_bytes = v3.values().map(|d| d.json.len()).sum::<usize>(),
        v2_bytes = v2.json.len(),
        v2_protobuf_bytes = v2_protobuf.len(),
        "built the OpenAPI documents"
    );
    Documents { v3_index, v3, v2, v2_protobuf }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ballast_apiserver::registry::served_kinds::hex_upper;
    use sha2::{Digest, Sha512};

    #[test]
    fn index_lists_every_group_version_with_its_hash() {
        let docs = documents();
        let index: serde_json::Value = serde_json::from_slice(&docs.v3_index.json).expect("json");
        for (g, v) in schemas::group_versions() {
            let key = operations::index_key(g, v);
            let doc = &docs.v3[&key];
            assert_eq!(doc.hash.len(), 128);
            assert_eq!(
                index["paths"][&key]["serverRelativeURL"],
                format!("/openapi/v3/{key}?hash={}", hex_upper(&Sha512::digest(&doc.json)))
            );
        }
    }

    #[test]
    fn v3_core_document_has_field_validation_on_patch() {
        let doc: serde_json::Value = serde_json::from_slice(&documents().v3["api/v1"].json).expect("json");
        assert_eq!(doc["openapi"], "3.0.0");
        let patch = &doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"];
        assert_eq!(patch["x-kubernetes-group-version-kind"]["kind"], "ConfigMap");
        let params: Vec<&str> =
            patch["parameters"].as_array().expect("params").iter().filter_map(|p| p["name"].as_str()).collect();
        assert!(params.contains(&"fieldValidation") && params.contains(&"dryRun"), "{params:?}");
        assert!(doc["components"]["schemas"]["io.k8s.api.core.v1.Pod"].is_object());
        assert!(doc["components"]["schemas"]["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].is_object());
        assert!(doc["components"]["schemas"].get("io.k8s.api.apps.v1.Deployment").is_none());
    }

    /// `kubectl create token` posts a TokenRequest to the account's `/token`; the document shows
    /// it as kube's does, with the TokenRequest schema it refers to.
    #[test]
    fn v3_core_document_has_the_token_subresource() {
        let doc: serde_json::Value = serde_json::from_slice(&documents().v3["api/v1"].json).expect("json");
        let post = &doc["paths"]["/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"]["post"];
        assert_eq!(post["operationId"], "createCoreV1NamespacedServiceAccountToken");
        assert_eq!(
            post["x-kubernetes-group-version-kind"],
            serde_json::json!({"group": "authentication.k8s.io", "kind": "TokenRequest", "version": "v1"})
        );
        assert!(doc["components"]["schemas"]["io.k8s.api.authentication.v1.TokenRequest"].is_object());
    }
}
