//! Authentication: who is asking.
//!
//! * [`x509`]: client certificates verified against the client CA (CN = user, O = groups), and
//!   the TLS-level verifier that only *requests* a certificate, so a bad one becomes a 401 here
//!   instead of a failed handshake (kube-apiserver's `RequestClientCert` behaviour).
//! * [`token_file`]: static bearer tokens from a CSV file (`--token-auth-file`).
//! * [`user`]: [`UserInfo`], the identity every method produces, and kube's well-known names.
//!
//! [`Authenticator::authenticate`] follows kube-apiserver's union: the first method that
//! succeeds wins; if presented credentials fail and none succeeds, the answer is 401; with no
//! credentials at all the user is `system:anonymous` (group `system:unauthenticated`) when
//! anonymous auth is on, and 401 otherwise. Authenticated users also get `system:authenticated`.

pub mod token_file;
pub mod user;
pub mod x509;

pub use user::{UserInfo, ANONYMOUS_USER, AUTHENTICATED_GROUP, MASTERS_GROUP, UNAUTHENTICATED_GROUP};

use std::sync::Arc;

use http::HeaderMap;
use rustls_pki_types::CertificateDer;

use crate::error::ApiError;

/// The TLS peer's certificate chain, end-entity first, as the connection handed it over.
#[derive(Debug, Clone, Default)]
pub struct PeerCertificates(pub Option<Arc<Vec<CertificateDer<'static>>>>);

/// The configured authentication methods.
#[derive(Debug, Clone)]
pub struct Authenticator {
    x509: Option<x509::X509Authenticator>,
    tokens: Option<token_file::TokenFile>,
    anonymous: bool,
}

impl Authenticator {
    /// Builds an authenticator from its parts; `None` disables a method.
    pub fn new(x509: Option<x509::X509Authenticator>, tokens: Option<token_file::TokenFile>, anonymous: bool) -> Self {
        Authenticator { x509, tokens, anonymous }
    }

    /// Authenticates one request from its TLS peer certificates and headers.
    ///
    /// # Errors
    ///
    /// Returns `Unauthorized` when presented credentials fail and none succeed, or when there
    /// are none and anonymous auth is off.
    pub fn authenticate(&self, peer: &PeerCertificates, headers: &HeaderMap) -> Result<UserInfo, ApiError> {
        let mut failed = false;
        if let (Some(x509), Some(chain)) = (&self.x509, &peer.0) {
            match x509.authenticate(chain) {
                Some(user) => return Ok(with_authenticated_group(user)),
                None => failed = true,
            }
        }
        if let Some(token) = bearer_token(headers) {
            match self.tokens.as_ref().and_then(|t| t.lookup(token)) {
                Some(user) => return Ok(with_authenticated_group(user.clone())),
                None => failed = true,
            }
        }
        if failed || !self.anonymous {
            return Err(ApiError::Unauthorized);
        }
        Ok(UserInfo::anonymous())
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

    #[test]
    fn token_users_get_the_authenticated_group() {
        let authn = Authenticator::new(None, Some(tokens()), true);
        let user = authn.authenticate(&PeerCertificates::default(), &headers("Bearer secret")).expect("known token");
        assert_eq!(user.name, "alice");
        assert_eq!(user.groups, vec!["dev", "ops", AUTHENTICATED_GROUP]);
    }

    #[test]
    fn bad_token_is_unauthorized_even_with_anonymous_on() {
        let authn = Authenticator::new(None, Some(tokens()), true);
        let err = authn.authenticate(&PeerCertificates::default(), &headers("Bearer nope")).expect_err("bad token");
        assert!(matches!(err, ApiError::Unauthorized));
    }

    #[test]
    fn no_credentials_is_anonymous_or_unauthorized() {
        let on = Authenticator::new(None, Some(tokens()), true);
        assert_eq!(
            on.authenticate(&PeerCertificates::default(), &HeaderMap::new()).expect("anon"),
            UserInfo::anonymous()
        );
        let off = Authenticator::new(None, Some(tokens()), false);
        assert!(off.authenticate(&PeerCertificates::default(), &HeaderMap::new()).is_err());
    }
}
