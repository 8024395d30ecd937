//! ServiceAccount tokens in the built-in API: the TokenRequest subresource
//! (`POST .../serviceaccounts/<name>/token`, [`token_request`]), OIDC discovery of the issuer
//! and its keys ([`oidc`]), and [`getter::StoreGetter`], through which the token authenticator reads
//! the ServiceAccounts, Pods and Secrets tokens name.
//!
//! [`ServiceAccountServer`] answers the subresource and the discovery documents in the
//! delegation chain, in front of the built-in kinds (whose router serves no `token`
//! subresource).

pub mod getter;
pub mod oidc;
pub mod token_request;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use self::getter::StoreGetter;
use self::token_request::TokenSettings;
use crate::config::ServiceAccountConfig;
use ballast_apiserver::authn::service_account::keys::{public_keys_from_pem, KeyError, SigningKey};
use ballast_apiserver::authn::service_account::{ServiceAccountAuthenticator, TokenIssuer};
use ballast_apiserver::body::Request;
use ballast_apiserver::delegation::Server;
use ballast_apiserver::error::ApiError;
use ballast_apiserver::filters::ResponseFuture;
use ballast_apiserver::registry::Store;
use ballast_apiserver::request_info::RequestInfo;

/// What start-up builds from the service-account flags.
#[derive(Debug)]
pub struct Setup {
    /// The token authenticator.
    pub authenticator: ServiceAccountAuthenticator,
    /// The API audiences.
    pub api_audiences: Vec<String>,
    /// How tokens are issued.
    pub settings: TokenSettings,
    /// The discovery documents, when the issuer is an `https` URL.
    pub discovery: Option<oidc::Discovery>,
}

/// Errors reading the service-account keys.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    /// A key file could not be read or generated.
    #[error("service account key")]
    Certs(#[from] ballast_apiserver::certs::CertError),
    /// A key file could not be read.
    #[error("{path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A key file holds no usable key.
    #[error("{path}")]
    Key {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: KeyError,
    },
    /// No `--service-account-issuer`.
    #[error("service-account-issuer is a required flag")]
    NoIssuer,
}

/// Reads (or generates, into `cert_dir`) the keys and builds the authenticator, issuer and
/// discovery documents; bound objects are read from `store`.
///
/// # Errors
///
/// When a key file cannot be read or holds no usable key, or no issuer is configured.
pub fn setup(config: &ServiceAccountConfig, cert_dir: &Path, store: &Store) -> Result<Setup, SetupError> {
    let issuer = config.issuers.first().ok_or(SetupError::NoIssuer)?;
    let (signing_path, signing_pem) = match &config.signing_key_file {
        Some(path) => {
            let pem = std::fs::read(path).map_err(|source| SetupError::Read { path: path.clone(), source })?;
            (path.clone(), pem)
        }
        None => {
            let pem = ballast_apiserver::certs::ensure_service_account_key(cert_dir)?;
            (cert_dir.join(ballast_apiserver::certs::SERVICE_ACCOUNT_KEY), pem.into_bytes())
        }
    };
    let key_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SetupError::Key { path, source }
    };
    let signing = SigningKey::from_pem(&signing_pem).map_err(key_error(&signing_path))?;
    let mut keys = vec![signing.public().clone()];
    for path in &config.key_files {
        let pem = std::fs::read(path).map_err(|source| SetupError::Read { path: path.clone(), source })?;
        keys.extend(public_keys_from_pem(&pem).map_err(key_error(path))?);
    }
    let api_audiences =
        if config.api_audiences.is_empty() { vec![issuer.clone()] } else { config.api_audiences.clone() };
    let discovery = oidc::Discovery::new(issuer, config.jwks_uri.as_deref(), &keys);
    let getter = Arc::new(StoreGetter::new(store.clone()));
    let authenticator = ServiceAccountAuthenticator::new(config.issuers.clone(), keys, api_audiences.clone(), getter);
    let settings = TokenSettings {
        issuer: TokenIssuer::new(issuer.clone(), signing),
        api_audiences: api_audiences.clone(),
        max_expiration_seconds: config.max_token_expiration.map(|d| d.as_secs() as i64),
        extend_expiration: config.extend_token_expiration,
    };
    Ok(Setup { authenticator, api_audiences, settings, discovery })
}

/// The TokenRequest subresource and the OIDC discovery documents, in front of the kinds.
#[derive(Debug, Clone)]
pub struct ServiceAccountServer {
    store: Store,
    settings: Arc<TokenSettings>,
    discovery: Option<Arc<oidc::Discovery>>,
}

impl ServiceAccountServer {
    /// Issues tokens per `settings` for objects in `store`; serves `discovery` if any (the
    /// issuer is an `https` URL).
    pub fn new(store: Store, settings: TokenSettings, discovery: Option<oidc::Discovery>) -> Self {
        ServiceAccountServer { store, settings: Arc::new(settings), discovery: discovery.map(Arc::new) }
    }
}

/// Whether a request is for the TokenRequest subresource.
fn is_token_request(info: &RequestInfo) -> bool {
    info.is_resource_request
        && info.api_group.is_empty()
        && info.resource == "serviceaccounts"
        && info.subresource == "token"
        && !info.name.is_empty()
}

impl Server for ServiceAccountServer {
    fn serves(&self, req: &Request) -> bool {
        let Some(info) = req.extensions().get::<RequestInfo>() else { return false };
        is_token_request(info) || (self.discovery.is_some() && !info.is_resource_request && oidc::serves(&info.path))
    }

    fn serve(&self, req: Request) -> ResponseFuture {
        let info = req.extensions().get::<RequestInfo>().cloned().unwrap_or_default();
        let server = self.clone();
        Box::pin(async move {
            let answer = match &server.discovery {
                Some(discovery) if !is_token_request(&info) => discovery.answer(&info),
                _ => token_request::create(&server.store, &server.settings, &info, req).await,
            };
            Ok(answer.unwrap_or_else(ApiError::into_response))
        })
    }
}
