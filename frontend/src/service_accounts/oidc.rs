//! OIDC discovery of the service-account issuer, as kube-apiserver serves it: the provider
//! configuration at `/.well-known/openid-configuration` and the verification keys as a JSON Web
//! Key Set at `/openid/v1/jwks`, so relying parties outside the cluster can verify the tokens
//! pods carry. Served only when the issuer is an `https` URL (as kube), to callers RBAC lets
//! read them (the `system:service-account-issuer-discovery` role, bound to every service
//! account). Both documents are built once: keys change only with a restart.

use http::{HeaderValue, StatusCode};
use serde_json::{json, Value};

use ballast_apiserver::authn::service_account::keys::{algorithm_name, PublicKey};
use ballast_apiserver::body::{self, Response};
use ballast_apiserver::error::ApiError;
use ballast_apiserver::request_info::RequestInfo;

/// The provider configuration's path.
pub const CONFIGURATION_PATH: &str = "/.well-known/openid-configuration";
/// The key set's path.
pub const JWKS_PATH: &str = "/openid/v1/jwks";
/// kube's `Cache-Control` on both documents: keys rotate rarely, and a relying party that
/// caches them for an hour costs the server nothing.
const CACHE_CONTROL: &str = "public, max-age=3600";

/// Whether `path` is one of the documents.
pub fn serves(path: &str) -> bool {
    matches!(path, CONFIGURATION_PATH | JWKS_PATH)
}

/// The two documents.
#[derive(Debug, Clone)]
pub struct Discovery {
    configuration: Value,
    jwks: Value,
}

impl Discovery {
    /// Builds the documents for `issuer` with `keys` (duplicates by key ID dropped), the key
    /// set at `jwks_uri` (`--service-account-jwks-uri`) or else at the issuer's host under
    /// [`JWKS_PATH`]; `None` when the issuer is not an `https` URL.
    pub fn new(issuer: &str, jwks_uri: Option<&str>, keys: &[PublicKey]) -> Option<Discovery> {
        let rest = issuer.strip_prefix("https://")?;
        let host = rest.split(['/', '?', '#']).next().filter(|h| !h.is_empty())?;
        let jwks_uri = jwks_uri.map_or_else(|| format!("https://{host}{JWKS_PATH}"), String::from);
        let mut seen = std::collections::BTreeSet::new();
        let unique: Vec<&PublicKey> = keys.iter().filter(|k| seen.insert(k.kid.clone())).collect();
        let mut algorithms: Vec<&str> = unique.iter().map(|k| algorithm_name(k.algorithm)).collect();
        algorithms.sort_unstable();
        algorithms.dedup();
        let configuration = json!({
            "issuer": issuer,
            "jwks_uri": jwks_uri,
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": algorithms,
        });
        let jwks = json!({"keys": unique.iter().map(|k| k.jwk().clone()).collect::<Vec<_>>()});
        Some(Discovery { configuration, jwks })
    }

    /// Answers a GET of one of the documents.
    ///
    /// # Errors
    ///
    /// 405 for other verbs, `NoRoute` for other paths.
    pub fn answer(&self, info: &RequestInfo) -> Result<Response, ApiError> {
        let (document, content_type) = match info.path.as_str() {
            CONFIGURATION_PATH => (&self.configuration, "application/json"),
            JWKS_PATH => (&self.jwks, "application/jwk-set+json"),
            _ => return Err(ApiError::NoRoute),
        };
        if info.verb != "get" {
            let (group, resource, verb) = (String::new(), info.path.clone(), info.verb.clone());
            return Err(ApiError::MethodNotSupported { group, resource, verb });
        }
        let mut response = body::json_with_type(StatusCode::OK, document, content_type);
        response.headers_mut().insert(http::header::CACHE_CONTROL, HeaderValue::from_static(CACHE_CONTROL));
        Ok(response)
    }
}
