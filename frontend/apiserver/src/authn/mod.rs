//! Authentication: who is asking.
//!
//! * [`request_header`]: identities named in `X-Remote-*` headers by a front proxy whose client
//!   certificate the request-header CA signed (`--requestheader-*`).
//! * [`x509`]: client certificates verified against the client CA (CN = user, O = groups), and
//!   the TLS-level verifier that only *requests* a certificate, so a bad one becomes a 401 here
//!   instead of a failed handshake (kube-apiserver's `RequestClientCert` behaviour).
//! * [`token_file`]: static bearer tokens from a CSV file (`--token-auth-file`).
//! * [`service_account`]: ServiceAccount JWTs (issued by the TokenRequest subresource), their
//!   keys and claims.
//! * [`user`]: [`UserInfo`], the identity every method produces, and kube's well-known names.
//!
//! [`Authenticator::authenticate`] follows kube-apiserver's union, in its order (request
//! header, client certificate, bearer token: token file, then service-account tokens): the
//! first method that succeeds wins; if presented credentials fail and none succeeds, the answer
//! is 401; with no credentials at all the user is `system:anonymous` (group
//! `system:unauthenticated`) when anonymous auth is on, and 401 otherwise. Authenticated users
//! also get `system:authenticated`. [`Authenticator::authenticate_token`] runs the token
//! methods alone for TokenReview.

pub mod der;
pub mod request_header;
pub mod service_account;
pub mod token_file;
pub mod user;
pub mod x509;

pub use user::{UserInfo, ANONYMOUS_USER, AUTHENTICATED_GROUP, MASTERS_GROUP, UNAUTHENTICATED_GROUP};

use std::sync::Arc;

use http::HeaderMap;
use rustls_pki_types::CertificateDer;

use self::request_header::{HeaderOutcome, RequestHeaderAuthenticator};
use self::service_account::{aggregate, intersect, ServiceAccountAuthenticator, TokenOutcome};
use crate::error::ApiError;

/// The TLS peer's certificate chain, end-entity first, as the connection handed it over.
#[derive(Debug, Clone, Default)]
pub struct PeerCertificates(pub Option<Arc<Vec<CertificateDer<'static>>>>);

/// The configured authentication methods.
#[derive(Debug, Clone)]
pub struct Authenticator {
    request_header: Option<RequestHeaderAuthenticator>,
    x509: Option<x509::X509Authenticator>,
    tokens: Option<token_file::TokenFile>,
    service_accounts: Option<ServiceAccountAuthenticator>,
    api_audiences: Vec<String>,
    anonymous: bool,
}

/// What the token methods make of one token (a TokenReview's status).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TokenAnswer {
    /// The user, when a method accepted the token.
    pub user: Option<UserInfo>,
    /// The audiences the token is good for.
    pub audiences: Vec<String>,
    /// Why the methods refused it, as kube words it.
    pub error: Option<String>,
}

impl Authenticator {
    /// Builds an authenticator from its parts; `None` disables a method.
    pub fn new(x509: Option<x509::X509Authenticator>, tokens: Option<token_file::TokenFile>, anonymous: bool) -> Self {
        Authenticator {
            request_header: None,
            x509,
            tokens,
            service_accounts: None,
            api_audiences: Vec::new(),
            anonymous,
        }
    }

    /// Adds request-header authentication (tried first, as in kube).
    pub fn with_request_header(mut self, request_header: RequestHeaderAuthenticator) -> Self {
        self.request_header = Some(request_header);
        self
    }

    /// Adds service-account tokens, and the API audiences (`--api-audiences`) tokens are
    /// checked against when a request does not name others.
    pub fn with_service_accounts(mut self, accounts: ServiceAccountAuthenticator, api_audiences: Vec<String>) -> Self {
        self.service_accounts = Some(accounts);
        self.api_audiences = api_audiences;
        self
    }

    /// The request-header method, if configured.
    pub fn request_header(&self) -> Option<&RequestHeaderAuthenticator> {
        self.request_header.as_ref()
    }

    /// The service-account method, if configured.
    pub fn service_accounts(&self) -> Option<&ServiceAccountAuthenticator> {
        self.service_accounts.as_ref()
    }

    /// The API audiences.
    pub fn api_audiences(&self) -> &[String] {
        &self.api_audiences
    }

    /// Authenticates one request from its TLS peer certificates and headers.
    ///
    /// # Errors
    ///
    /// Returns `Unauthorized` when presented credentials fail and none succeed, or when there
    /// are none and anonymous auth is off.
    pub async fn authenticate(&self, peer: &PeerCertificates, headers: &HeaderMap) -> Result<UserInfo, ApiError> {
        let mut failed = false;
        if let (Some(request_header), Some(chain)) = (&self.request_header, &peer.0) {
            match request_header.authenticate(chain, headers) {
                HeaderOutcome::Authenticated(user) => return Ok(with_authenticated_group(user)),
                HeaderOutcome::Failed(_) => failed = true,
                HeaderOutcome::NotMine => {}
            }
        }
        if let (Some(x509), Some(chain)) = (&self.x509, &peer.0) {
            match x509.authenticate(chain) {
                Some(user) => return Ok(with_authenticated_group(user)),
                None => failed = true,
            }
        }
        if let Some(token) = bearer_token(headers) {
            match self.authenticate_token(token, &[]).await {
                TokenAnswer { user: Some(user), .. } => return Ok(user),
                _ => failed = true,
            }
        }
        if failed || !self.anonymous {
            return Err(ApiError::Unauthorized);
        }
        Ok(UserInfo::anonymous())
    }

    /// Runs the token methods on `token` for `audiences` (empty: the API audiences), as
    /// kube's TokenReview does: the first method that accepts it wins; otherwise the methods'
    /// errors, or `invalid bearer token` when none recognised it.
    pub async fn authenticate_token(&self, token: &str, audiences: &[String]) -> TokenAnswer {
        let requested = if audiences.is_empty() { &self.api_audiences[..] } else { audiences };
        let mut errors = Vec::new();
        if let Some(user) = self.tokens.as_ref().and_then(|t| t.lookup(token)) {
            // Static tokens carry no audience: they are good for the API audiences only
            // (kube's audience-agnostic wrapper).
            let audiences = intersect(&self.api_audiences, requested);
            if self.api_audiences.is_empty() || !audiences.is_empty() {
                let user = with_authenticated_group(user.clone());
                return TokenAnswer { user: Some(user), audiences, error: None };
            }
        }
        if let Some(accounts) = &self.service_accounts {
            match accounts.authenticate(token, requested).await {
                TokenOutcome::Authenticated { user, audiences } => {
                    return TokenAnswer { user: Some(with_authenticated_group(user)), audiences, error: None };
                }
                TokenOutcome::Failed(e) => errors.push(e),
                TokenOutcome::NotMine => {}
            }
        }
        let error = if errors.is_empty() { "invalid bearer token".to_string() } else { aggregate(&errors) };
        TokenAnswer { user: None, audiences: Vec::new(), error: Some(error) }
    }
}

/// Returns the token of an `Authorization: Bearer <token>` header, if non-empty.
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Adds `system:authenticated` unless the user already has it or is anonymous (kube's
/// `AuthenticatedGroupAdder`).
pub(crate) fn with_authenticated_group(mut user: UserInfo) -> UserInfo {
    if !user.in_group(AUTHENTICATED_GROUP) && !user.in_group(UNAUTHENTICATED_GROUP) && user.name != ANONYMOUS_USER {
        user.groups.push(AUTHENTICATED_GROUP.into());
    }
    user
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens() -> token_file::TokenFile {
        token_file::TokenFile::parse("secret,alice,1001,\"dev,ops\"\n").expect("parse")
    }

    fn headers(auth: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(http::header::AUTHORIZATION, auth.parse().expect("header"));
        h
    }

    #[tokio::test]
    async fn token_users_get_the_authenticated_group() {
        let authn = Authenticator::new(None, Some(tokens()), true);
        let user =
            authn.authenticate(&PeerCertificates::default(), &headers("Bearer secret")).await.expect("known token");
        assert_eq!(user.name, "alice");
        assert_eq!(user.groups, vec!["dev", "ops", AUTHENTICATED_GROUP]);
    }

    #[tokio::test]
    async fn bad_token_is_unauthorized_even_with_anonymous_on() {
        let authn = Authenticator::new(None, Some(tokens()), true);
        let err =
            authn.authenticate(&PeerCertificates::default(), &headers("Bearer nope")).await.expect_err("bad token");
        assert!(matches!(err, ApiError::Unauthorized));
    }

    #[tokio::test]
    async fn no_credentials_is_anonymous_or_unauthorized() {
        let on = Authenticator::new(None, Some(tokens()), true);
        assert_eq!(
            on.authenticate(&PeerCertificates::default(), &HeaderMap::new()).await.expect("anon"),
            UserInfo::anonymous()
        );
        let off = Authenticator::new(None, Some(tokens()), false);
        assert!(off.authenticate(&PeerCertificates::default(), &HeaderMap::new()).await.is_err());
    }
}
