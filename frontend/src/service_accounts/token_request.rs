//! The TokenRequest subresource (`kubectl create token`): `POST
//! /api/v1/namespaces/<ns>/serviceaccounts/<name>/token` with an `authentication.k8s.io/v1`
//! TokenRequest answers `201` with the request and `status.token`, a JWT for the service
//! account, as kube-apiserver's TokenREST: audiences default to the API audiences,
//! `expirationSeconds` to an hour, between ten minutes and 2^32 seconds (422 otherwise) and cut
//! to `--service-account-max-token-expiration`; a `boundObjectRef` to a Pod (running as this
//! service account) or a Secret ties the token's life to that object. kubelet's pod-bound
//! requests for 3607 s get a year-long token with a `warnafter` claim
//! (`--service-account-extend-token-expiration`).

use http::StatusCode;
use serde_json::{json, Value};

use super::getter::kind;
use crate::reviews::read_object;
use ballast_apimachinery::schema::generated;
use ballast_apiserver::authn::service_account::{username, Claims, KubernetesClaims, ObjectRef, TokenIssuer};
use ballast_apiserver::body::{self, Request, Response};
use ballast_apiserver::error::{ApiError, FieldError};
use ballast_apiserver::request_info::RequestInfo;
use ballast_apiserver::served::VirtualResource;

/// How tokens are issued (kube-apiserver's service-account flags).
#[derive(Debug, Clone)]
pub struct TokenSettings {
    /// Signs tokens as the first `--service-account-issuer`.
    pub issuer: TokenIssuer,
    /// `--api-audiences`: the audiences of a token request that names none.
    pub api_audiences: Vec<String>,
    /// `--service-account-max-token-expiration` in seconds: longer requests are cut to it.
    pub max_expiration_seconds: Option<i64>,
    /// `--service-account-extend-token-expiration`: kubelet's pod-bound token requests get
    /// year-long tokens with a `warnafter` claim.
    pub extend_expiration: bool,
}

/// The shape of the request body, for decoding.
static TOKEN_REQUEST: VirtualResource = VirtualResource {
    group: "authentication.k8s.io",
    version: "v1",
    resource: "tokenrequests",
    singular: "tokenrequest",
    kind: "TokenRequest",
    namespaced: true,
    verbs: &["create"],
};

/// kube's default lifetime of a requested token (the v1 defaulting of `expirationSeconds`).
const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// kube's shortest lifetime: ten minutes.
const MIN_EXPIRATION_SECONDS: i64 = 600;
/// kube's longest lifetime: 2^32 seconds.
const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;
/// The lifetime kubelet asks for its projected pod tokens, which kube extends (its
/// `WarnOnlyBoundTokenExpirationSeconds`): an hour and seven seconds, a value no one else picks.
const WARN_ONLY_EXPIRATION_SECONDS: i64 = 3607;
/// How long an extended token lives: a year (kube's `ExpirationExtensionSeconds`).
const EXTENDED_EXPIRATION_SECONDS: i64 = 365 * 24 * 3600;

fn invalid(name: &str, causes: Vec<FieldError>) -> ApiError {
    ApiError::Invalid { group: "authentication.k8s.io".into(), kind: "TokenRequest".into(), name: name.into(), causes }
}

/// The uid of an object (as stored).
fn uid(obj: &serde_json::Map<String, Value>) -> String {
    obj.get("metadata").and_then(|m| m["uid"].as_str()).unwrap_or_default().to_string()
}

/// Serves one request to the subresource.
///
/// # Errors
///
/// 405 for verbs other than create; 400 for bodies that do not decode or bind to something
/// other than a Pod or Secret; 422 for lifetimes out of bounds; 404 for a missing service
/// account or bound object; 409 when the bound object's uid differs from the reference's.
pub async fn create(
    store: &ballast_apiserver::registry::Store,
    settings: &TokenSettings,
    info: &RequestInfo,
    req: Request,
) -> Result<Response, ApiError> {
    if info.verb != "create" {
        let verb = info.verb.clone();
        return Err(ApiError::MethodNotSupported {
            group: String::new(),
            resource: "serviceaccounts/token".into(),
            verb,
        });
    }
    let mut request = read_object(req, &TOKEN_REQUEST, &generated::API_AUTHENTICATION_V1_TOKENREQUEST).await?;
    let (ns, name) = (info.namespace.as_str(), info.name.as_str());
    let spec = request["spec"].clone();
    let mut audiences: Vec<String> =
        spec["audiences"].as_array().into_iter().flatten().filter_map(|a| a.as_str().map(String::from)).collect();
    if audiences.is_empty() {
        audiences.clone_from(&settings.api_audiences);
    }
    let mut expiration = spec["expirationSeconds"].as_i64().unwrap_or(DEFAULT_EXPIRATION_SECONDS);
    let request_name = request["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let field = "spec.expirationSeconds";
    if expiration < MIN_EXPIRATION_SECONDS {
        let cause = FieldError::invalid(field, expiration, "may not specify a duration less than 10 minutes");
        return Err(invalid(&request_name, vec![cause]));
    }
    if expiration > MAX_EXPIRATION_SECONDS {
        let cause = FieldError::invalid(field, expiration, "may not specify a duration larger than 2^32 seconds");
        return Err(invalid(&request_name, vec![cause]));
    }
    let account = store.get(kind("serviceaccounts")?, ns, name).await?;
    let mut private = KubernetesClaims {
        namespace: ns.into(),
        serviceaccount: ObjectRef { name: name.into(), uid: uid(&account) },
        ..KubernetesClaims::default()
    };
    if let Some(bound) = spec.get("boundObjectRef").filter(|b| b.is_object()) {
        let s = |key: &str| bound[key].as_str().unwrap_or_default().to_string();
        let (api_version, bound_kind, bound_name) = (s("apiVersion"), s("kind"), s("name"));
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
        let object = match (group, bound_kind.as_str()) {
            ("", "Pod") => {
                let pod = store.get(kind("pods")?, ns, &bound_name).await?;
                let runs_as = pod.get("spec").and_then(|s| s["serviceAccountName"].as_str()).unwrap_or_default();
                if runs_as != name {
                    return Err(ApiError::BadRequest(format!(
                        "cannot bind token for serviceaccount {name:?} to pod running with serviceaccount {runs_as:?}"
                    )));
                }
                private.pod = Some(ObjectRef { name: bound_name.clone(), uid: uid(&pod) });
                pod
            }
            ("", "Secret") => {
                let secret = store.get(kind("secrets")?, ns, &bound_name).await?;
                private.secret = Some(ObjectRef { name: bound_name.clone(), uid: uid(&secret) });
                secret
            }
            _ => {
                return Err(ApiError::BadRequest(format!(
                    "cannot bind token to object of type {group}/{version}, Kind={bound_kind}"
                )))
            }
        };
        let (wanted, found) = (s("uid"), uid(&object));
        if !wanted.is_empty() && wanted != found {
            return Err(ApiError::Conflict {
                group: String::new(),
                resource: bound_kind,
                name: bound_name,
                reason: format!(
                    "the UID in the bound object reference ({wanted}) does not match the UID in record ({found}). \
                     The object might have been deleted and then recreated"
                ),
            });
        }
    }
    if let Some(max) = settings.max_expiration_seconds.filter(|max| expiration > *max) {
        expiration = max;
    }
    let now = ballast_apimachinery::clock::unix_now();
    // kubelet's request for a pod's projected token, for this server's audiences only: valid
    // for a year, with the hour it asked for as `warnafter` (the reply still says the hour).
    let extended = settings.extend_expiration
        && private.pod.is_some()
        && expiration == WARN_ONLY_EXPIRATION_SECONDS
        && audiences.iter().all(|a| settings.api_audiences.contains(a));
    let lifetime = if extended {
        private.warnafter = Some(now + expiration);
        settings.max_expiration_seconds.map_or(EXTENDED_EXPIRATION_SECONDS, |m| m.min(EXTENDED_EXPIRATION_SECONDS))
    } else {
        expiration
    };
    let claims = Claims {
        aud: audiences.clone(),
        exp: Some(now + lifetime),
        iat: Some(now),
        nbf: Some(now),
        jti: ballast_apimachinery::uid::new_uid(),
        sub: username(ns, name),
        kubernetes: Some(private),
        ..Claims::default()
    };
    let token =
        settings.issuer.sign(claims).map_err(|e| ApiError::Internal(format!("failed to generate token: {e}")))?;
    request["metadata"]["name"] = name.into();
    request["metadata"]["namespace"] = ns.into();
    request["metadata"]["creationTimestamp"] = ballast_apimachinery::clock::format_rfc3339(now).into();
    request["spec"]["audiences"] = json!(audiences);
    request["spec"]["expirationSeconds"] = expiration.into();
    if request["spec"].get("boundObjectRef").is_none() {
        request["spec"]["boundObjectRef"] = Value::Null;
    }
    request["status"] = json!({
        "token": token,
        "expirationTimestamp": ballast_apimachinery::clock::format_rfc3339(now + expiration),
    });
    Ok(body::json(StatusCode::CREATED, &request))
}
