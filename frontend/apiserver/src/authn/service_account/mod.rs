//! ServiceAccount tokens: the JWT claims kube-apiserver issues ([`Claims`]), the issuer that
//! signs them ([`TokenIssuer`]) and the authenticator that accepts them
//! ([`ServiceAccountAuthenticator`]).
//!
//! Verification follows kube's order and messages: a token whose unverified `iss` is not one
//! of ours is not ours to judge (another authenticator may take it); then the signature (by
//! the key its `kid` names, else every key), the issuer again, the audiences (the token's must
//! meet the ones asked for, the server's API audiences by default), expiry and not-before with
//! kube's one-minute leeway, and last the objects it names: the ServiceAccount must still exist
//! with the uid in the token, and a token bound to a Pod or Secret dies with that object (or
//! its replacement under the same name, whose uid differs). Those reads go to storage through
//! an [`ObjectGetter`], since this crate knows no kinds.

pub mod keys;

use std::sync::Arc;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use self::keys::{KeyError, PublicKey, SigningKey};
use super::user::UserInfo;
use crate::error::ApiError;

/// The group of every service account.
pub const ALL_SERVICE_ACCOUNTS_GROUP: &str = "system:serviceaccounts";
/// Extra key: the name of the pod a token is bound to.
pub const POD_NAME_EXTRA: &str = "authentication.kubernetes.io/pod-name";
/// Extra key: the uid of the pod a token is bound to.
pub const POD_UID_EXTRA: &str = "authentication.kubernetes.io/pod-uid";
/// Extra key: the token's ID (`JTI=<jti>`).
pub const CREDENTIAL_ID_EXTRA: &str = "authentication.kubernetes.io/credential-id";
/// How far past `exp` (and before `nbf`) a token is still accepted, and how long ago a bound
/// object may have been marked deleted before its tokens stop working: kube's (go-jose's)
/// one-minute default, which absorbs clock skew between the servers that issue and check.
pub const LEEWAY_SECONDS: i64 = 60;

/// `system:serviceaccount:<namespace>:<name>`.
pub fn username(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// `system:serviceaccounts:<namespace>`.
pub fn namespace_group(namespace: &str) -> String {
    format!("{ALL_SERVICE_ACCOUNTS_GROUP}:{namespace}")
}

/// A reference to an object in a token (`name`, `uid`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRef {
    /// The object's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The object's uid.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

/// The private `kubernetes.io` claim.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubernetesClaims {
    /// The service account's namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The service account.
    #[serde(default)]
    pub serviceaccount: ObjectRef,
    /// The pod the token is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<ObjectRef>,
    /// The secret the token is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<ObjectRef>,
    /// When an extended pod-bound token (kubelet's projected tokens) should have been
    /// refreshed (Unix seconds): it stays valid until `exp`, a year on, so that clients that
    /// never reread their token file keep working.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warnafter: Option<i64>,
}

/// A service-account token's claims, in the order kube's tokens carry them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// Audiences.
    #[serde(default, deserialize_with = "one_or_many")]
    pub aud: Vec<String>,
    /// Expiry (Unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exp: Option<i64>,
    /// Issued at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iat: Option<i64>,
    /// Issuer.
    #[serde(default)]
    pub iss: String,
    /// Token ID.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub jti: String,
    /// The objects the token names.
    #[serde(rename = "kubernetes.io", default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<KubernetesClaims>,
    /// Not before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<i64>,
    /// Subject (`system:serviceaccount:<ns>:<name>`).
    #[serde(default)]
    pub sub: String,
}

/// JWT `aud` is a string or a list of strings.
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Aud {
        One(String),
        Many(Vec<String>),
    }
    Ok(match Aud::deserialize(d)? {
        Aud::One(a) => vec![a],
        Aud::Many(a) => a,
    })
}

/// The kinds a token names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoundKind {
    /// `serviceaccounts`.
    ServiceAccount,
    /// `pods`.
    Pod,
    /// `secrets`.
    Secret,
}

/// What the authenticator needs of a live object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveObject {
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.deletionTimestamp` in Unix seconds, when set.
    pub deletion_timestamp: Option<i64>,
}

/// Reads the objects tokens name (the built-in API implements it on its store).
pub trait ObjectGetter: Send + Sync + std::fmt::Debug {
    /// Returns the object, `None` when it does not exist.
    fn get<'a>(
        &'a self,
        kind: BoundKind,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<LiveObject>, ApiError>>;
}

/// Signs tokens for one issuer with one key.
#[derive(Debug, Clone)]
pub struct TokenIssuer {
    issuer: String,
    key: SigningKey,
}

impl TokenIssuer {
    /// An issuer named `issuer` (the first `--service-account-issuer`) signing with `key`.
    pub fn new(issuer: impl Into<String>, key: SigningKey) -> Self {
        TokenIssuer { issuer: issuer.into(), key }
    }

    /// The issuer name.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// Signs `claims` with `iss` set to this issuer.
    ///
    /// # Errors
    ///
    /// When the signature library fails.
    pub fn sign(&self, mut claims: Claims) -> Result<String, KeyError> {
        claims.iss = self.issuer.clone();
        self.key.sign(&claims)
    }
}

/// The answer of one token authenticator (kube's `(response, ok, err)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenOutcome {
    /// Not a token this authenticator judges.
    NotMine,
    /// Authenticated, for these audiences.
    Authenticated {
        /// The user.
        user: UserInfo,
        /// The audiences the token is good for among those asked for.
        audiences: Vec<String>,
    },
    /// The token is this authenticator's but invalid, with kube's reason.
    Failed(String),
}

/// Go's `%q` of a string slice: `["a" "b"]`.
fn go_quoted(list: &[String]) -> String {
    let items: Vec<String> = list.iter().map(|s| serde_json::Value::from(s.as_str()).to_string()).collect();
    format!("[{}]", items.join(" "))
}

/// The entries of `a` also in `b`, in `a`'s order (kube's `Audiences.Intersect`).
pub fn intersect(a: &[String], b: &[String]) -> Vec<String> {
    a.iter().filter(|x| b.contains(x)).cloned().collect()
}

/// Accepts tokens signed by one of the verification keys for one of the issuers.
#[derive(Debug, Clone)]
pub struct ServiceAccountAuthenticator {
    issuers: Vec<String>,
    keys: Vec<PublicKey>,
    api_audiences: Vec<String>,
    getter: Arc<dyn ObjectGetter>,
}

impl ServiceAccountAuthenticator {
    /// Accepts tokens of `issuers` (`--service-account-issuer`, all of them) signed by one of
    /// `keys`, meant for `api_audiences` (`--api-audiences`) unless a review asks for others;
    /// bound objects are read through `getter`.
    pub fn new(
        issuers: Vec<String>,
        keys: Vec<PublicKey>,
        api_audiences: Vec<String>,
        getter: Arc<dyn ObjectGetter>,
    ) -> Self {
        ServiceAccountAuthenticator { issuers, keys, api_audiences, getter }
    }

    /// The verification keys (for the JWKS document).
    pub fn keys(&self) -> &[PublicKey] {
        &self.keys
    }

    /// The unverified `iss` of a compact JWT, if it is one of ours.
    fn has_our_issuer(&self, token: &str) -> bool {
        if token.trim_start().starts_with('{') {
            return false;
        }
        let parts: Vec<&str> = token.split('.').collect();
        let [_, payload, _] = parts.as_slice() else { return false };
        let Ok(payload) = URL_SAFE_NO_PAD.decode(payload) else { return false };
        #[derive(Deserialize)]
        struct Issuer {
            #[serde(default)]
            iss: String,
        }
        serde_json::from_slice::<Issuer>(&payload).is_ok_and(|c| self.issuers.contains(&c.iss))
    }

    /// Verifies the signature with the key the header names (every key without a `kid`).
    fn verify(&self, token: &str) -> Result<Option<Claims>, String> {
        let Ok(header) = jsonwebtoken::decode_header(token) else { return Ok(None) };
        let keys: Vec<&PublicKey> =
            self.keys.iter().filter(|k| header.kid.as_ref().is_none_or(|kid| *kid == k.kid)).collect();
        if keys.is_empty() {
            return Err("invalid signature, no keys found".into());
        }
        let mut errors = Vec::new();
        for key in keys {
            // Only the signature here: the claims are checked below in kube's order.
            let mut validation = jsonwebtoken::Validation::new(key.algorithm);
            validation.required_spec_claims.clear();
            validation.validate_exp = false;
            validation.validate_aud = false;
            match jsonwebtoken::decode::<Claims>(token, key.decoding(), &validation) {
                Ok(data) => return Ok(Some(data.claims)),
                Err(e) => errors.push(match e.kind() {
                    jsonwebtoken::errors::ErrorKind::InvalidSignature => {
                        "go-jose/go-jose: error in cryptographic primitive".to_string()
                    }
                    jsonwebtoken::errors::ErrorKind::InvalidAlgorithm => {
                        "go-jose/go-jose: unexpected signature algorithm in JWS header".to_string()
                    }
                    _ => e.to_string(),
                }),
            }
        }
        Err(aggregate(&errors))
    }

    /// Authenticates `token` for `requested` audiences (empty: the API audiences).
    pub async fn authenticate(&self, token: &str, requested: &[String]) -> TokenOutcome {
        if !self.has_our_issuer(token) {
            return TokenOutcome::NotMine;
        }
        let claims = match self.verify(token) {
            Ok(Some(claims)) => claims,
            Ok(None) => return TokenOutcome::NotMine,
            Err(e) => return TokenOutcome::Failed(e),
        };
        if !self.issuers.contains(&claims.iss) {
            return TokenOutcome::Failed(format!("token issuer {:?} is invalid", claims.iss));
        }
        let token_audiences = if claims.aud.is_empty() { self.api_audiences.clone() } else { claims.aud.clone() };
        let requested = if requested.is_empty() { &self.api_audiences[..] } else { requested };
        let audiences = intersect(&token_audiences, requested);
        if audiences.is_empty() && !self.api_audiences.is_empty() {
            return TokenOutcome::Failed(format!(
                "token audiences {} is invalid for the target audiences {}",
                go_quoted(&token_audiences),
                go_quoted(requested)
            ));
        }
        match self.validate(&claims).await {
            Ok(user) => TokenOutcome::Authenticated { user, audiences },
            Err(e) => TokenOutcome::Failed(e),
        }
    }

    /// Times, then the objects the token names (kube's service-account validator).
    async fn validate(&self, claims: &Claims) -> Result<UserInfo, String> {
        let now = crate::clock::unix_now();
        if claims.exp.is_some_and(|exp| now >= exp + LEEWAY_SECONDS) {
            return Err("service account token has expired".into());
        }
        if claims.nbf.is_some_and(|nbf| now + LEEWAY_SECONDS < nbf) {
            return Err("service account token is not valid yet".into());
        }
        if claims.iat.is_some_and(|iat| now + LEEWAY_SECONDS < iat) {
            return Err("service account token claims could not be validated due to unexpected validation error".into());
        }
        let Some(k) = &claims.kubernetes else {
            return Err("service account token claims could not be validated due to unexpected private claim".into());
        };
        let ns = k.namespace.as_str();
        let deleted_long_ago = |o: &LiveObject| o.deletion_timestamp.is_some_and(|t| t < now - LEEWAY_SECONDS);
        let sa_name = k.serviceaccount.name.as_str();
        let sa = match self.getter.get(BoundKind::ServiceAccount, ns, sa_name).await {
            Ok(Some(sa)) => sa,
            Ok(None) => return Err(format!("serviceaccounts {sa_name:?} not found")),
            Err(e) => return Err(e.to_string()),
        };
        if deleted_long_ago(&sa) {
            return Err(format!("service account {ns}/{sa_name} has been deleted"));
        }
        if sa.uid != k.serviceaccount.uid {
            return Err(format!("service account UID ({}) does not match claim ({})", sa.uid, k.serviceaccount.uid));
        }
        if let Some(secret_ref) = &k.secret {
            self.check_bound(BoundKind::Secret, ns, secret_ref, now).await?;
        }
        let mut user =
            UserInfo::new(username(ns, sa_name), sa.uid, vec![ALL_SERVICE_ACCOUNTS_GROUP.into(), namespace_group(ns)]);
        if let Some(pod_ref) = &k.pod {
            self.check_bound(BoundKind::Pod, ns, pod_ref, now).await?;
            user.extra.insert(POD_NAME_EXTRA.into(), vec![pod_ref.name.clone()]);
            user.extra.insert(POD_UID_EXTRA.into(), vec![pod_ref.uid.clone()]);
        }
        if !claims.jti.is_empty() {
            user.extra.insert(CREDENTIAL_ID_EXTRA.into(), vec![format!("JTI={}", claims.jti)]);
        }
        Ok(user)
    }

    /// A token bound to a pod or secret is good while that very object (same uid) exists.
    async fn check_bound(&self, kind: BoundKind, ns: &str, claim: &ObjectRef, now: i64) -> Result<(), String> {
        let what = if kind == BoundKind::Pod { "pod" } else { "secret" };
        match self.getter.get(kind, ns, &claim.name).await {
            Ok(Some(o)) if o.deletion_timestamp.is_some_and(|t| t < now - LEEWAY_SECONDS) => {
                Err("service account token has been invalidated".into())
            }
            Ok(Some(o)) if o.uid != claim.uid => {
                Err(format!("{what} UID ({}) does not match service account {what} ref claim ({})", o.uid, claim.uid))
            }
            Ok(Some(_)) => Ok(()),
            _ => Err("service account token has been invalidated".into()),
        }
    }
}

/// kube's error aggregate text: one error as itself, several as `[a, b]`.
pub fn aggregate(errors: &[String]) -> String {
    match errors {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

#[cfg(test)]
mod tests;
