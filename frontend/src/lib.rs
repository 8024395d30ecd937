//! Ballast's Kubernetes API server for the built-in API: the kinds kube-apiserver 1.33 serves
//! (their table, strategies, Table printers and OpenAPI documents), put together with the
//! generic server of `ballast-apiserver` into [`Frontend`], which talks to storage only
//! through the etcd v3 API.
//!
//! # Map
//!
//! * [`kinds`]: the table of built-in kinds, one file per API group family: one
//!   `ResourceKind` row per resource with its strategy (defaulting and validation), plus the
//!   group table discovery serves them under.
//! * [`printers`]: each built-in kind's Table columns and cells (what `kubectl get` prints).
//! * [`openapi`]: the OpenAPI v2 and v3 documents of the built-in kinds (from k8s-openapi's
//!   schemas and the kinds table), built once; their schemas also drive strict decoding's
//!   unknown-field check.
//! * [`rbac`]: the RBAC authorizer with kube-apiserver 1.33's bootstrap roles, the chain's
//!   authorizer (it reads roles and bindings from storage, where the kinds are stored).
//! * [`reviews`]: the access reviews (`kubectl auth can-i`, `auth whoami`), answered by the
//!   authorizer without storage, in front of the kinds.
//! * [`builtin`]: [`BuiltinKinds`](builtin::BuiltinKinds), the kinds, printers, OpenAPI
//!   documents and review resources as the generic server's `ServedKinds`.
//! * [`config`]: [`FrontendConfig`], kube-apiserver's flags; [`Frontend::start`] builds the
//!   server from it: certificates, storage, authentication, RBAC, audit, the handler chain,
//!   and the built-in API's place in the delegation chain ([`Delegation`]; the binary puts
//!   the aggregator in front of it and apiextensions behind it).
//!
//! Layering: `builtin` → `openapi` → `reviews` → `rbac`; `kinds`, `printers`; all on
//! `ballast-apiserver` → `ballast-apimachinery`. Nothing here holds authoritative state.
//!
//! Reading order: [`Frontend::start`], then `ballast_apiserver`'s `chain` and `routes`.

pub mod builtin;
pub mod config;
pub mod extension_auth;
pub mod kinds;
pub mod openapi;
pub mod printers;
pub mod rbac;
pub mod reviews;
pub mod service_accounts;

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub use config::{FrontendConfig, RequestHeaderFiles, ServiceAccountConfig};

use crate::rbac::RbacAuthorizer;
use ballast_apiserver::authn::request_header::{RequestHeaderAuthenticator, RequestHeaderConfig};
use ballast_apiserver::authn::token_file::{TokenFile, TokenFileError};
use ballast_apiserver::authn::x509::{X509Authenticator, X509Error};
use ballast_apiserver::authn::Authenticator;
use ballast_apiserver::chain::{build_handler_chain, ChainConfig, ChainService};
use ballast_apiserver::delegation::{in_front_of, Delegate, DelegateContext, Handler, NotFound};
use ballast_apiserver::registry::admission::Admission;
use ballast_apiserver::registry::Store;
use ballast_apiserver::routes::{AppState, Router};
use ballast_apiserver::storage::{Etcd3Storage, SharedStorage, StorageError};
use ballast_apiserver::{audit, certs, error, metrics, server, watch_cache};

/// Start-up failures.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrontendError {
    /// Certificates could not be made or read.
    #[error("certificates")]
    Certs(#[from] certs::CertError),
    /// Storage could not be reached.
    #[error("connecting to etcd")]
    Storage(#[from] StorageError),
    /// The system namespaces could not be created.
    #[error("creating system namespaces: {0}")]
    Bootstrap(#[source] error::ApiError),
    /// The token file is unreadable or malformed.
    #[error("token auth file")]
    TokenFile(#[from] TokenFileError),
    /// The client CA bundle (or the request-header CA bundle) is unusable.
    #[error("client CA")]
    ClientCa(#[from] X509Error),
    /// The service-account keys are unusable.
    #[error("service accounts")]
    ServiceAccounts(#[from] service_accounts::SetupError),
    /// A file could not be read.
    #[error("{path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The secure port could not be bound.
    #[error("binding {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Auditing could not start (policy or log file).
    #[error("audit")]
    Audit(#[from] audit::AuditError),
    /// The TLS configuration was rejected.
    #[error("TLS configuration")]
    Tls(#[from] rustls::Error),
}

/// Where the built-in API sits in the delegation chain (kube-apiserver's `CreateServerChain`):
/// the servers in front of it and the server it hands the requests it does not serve.
/// [`Delegation::default`] is the built-in API alone, in front of a 404.
pub struct Delegation {
    /// Builds the servers in front of the built-in API around it (the aggregator), on the
    /// built-in API's storage and settings.
    pub in_front: Box<dyn FnOnce(DelegateContext, Handler) -> Handler + Send>,
    /// Admission plugins the servers in front add to the built-in API's writes (the
    /// aggregator's APIService checks).
    pub in_front_admission: Vec<Arc<dyn Admission>>,
    /// Builds the server behind the built-in API (apiextensions, in front of the 404) on the
    /// built-in API's storage and settings.
    pub behind: Box<dyn FnOnce(DelegateContext) -> Delegate + Send>,
}

impl std::fmt::Debug for Delegation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delegation").finish_non_exhaustive()
    }
}

impl Default for Delegation {
    fn default() -> Self {
        Delegation {
            in_front: Box::new(|_, builtin| builtin),
            in_front_admission: Vec::new(),
            behind: Box::new(|_| Delegate::plain(NotFound::handler())),
        }
    }
}

/// A started frontend: port bound, certificates and kubeconfig written, storage reachable.
#[derive(Debug)]
pub struct Frontend {
    listener: tokio::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    chain: ChainService,
    local_addr: SocketAddr,
    kubeconfig: PathBuf,
    connections: ballast_apiserver::connection_limits::ConnectionLimits,
}

/// How long start-up keeps retrying storage (the engine of `ballast serve` may still be
/// opening).
const STORAGE_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// Connects to `config.etcd_servers` (or takes `storage` when given) and creates the system
/// namespaces, retrying until [`STORAGE_STARTUP_TIMEOUT`].
async fn connect_and_bootstrap(
    config: &FrontendConfig,
    storage: Option<&SharedStorage>,
) -> Result<Store, FrontendError> {
    let deadline = tokio::time::Instant::now() + STORAGE_STARTUP_TIMEOUT;
    loop {
        let attempt = async {
            let storage: SharedStorage = match storage {
                Some(storage) => storage.clone(),
                None => Arc::new(Etcd3Storage::connect(&config.etcd_servers, &config.etcd_tls).await?),
            };
            let store = Store::new(storage, &config.storage_prefix, Arc::new(builtin::BuiltinKinds))
                .with_list_page_size(config.list_page_size);
            store.ensure_system_namespaces().await.map_err(FrontendError::Bootstrap)?;
            Ok::<_, FrontendError>(store)
        };
        match attempt.await {
            Ok(store) => return Ok(store),
            Err(e) if tokio::time::Instant::now() < deadline => {
                tracing::info!(error = %e, "storage not ready; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

fn read(path: &Path) -> Result<String, FrontendError> {
    std::fs::read_to_string(path).map_err(|source| FrontendError::Read { path: path.to_path_buf(), source })
}

impl Frontend {
    /// Prepares certificates, connects to storage (creating the system namespaces), binds the
    /// secure port and writes `admin.kubeconfig` into the cert directory.
    ///
    /// # Errors
    ///
    /// Returns the first failing step.
    pub async fn start(config: FrontendConfig) -> Result<Frontend, FrontendError> {
        Self::start_with(config, None, Delegation::default()).await
    }

    /// As [`Frontend::start`], with the built-in API placed in a delegation chain: the servers
    /// of `delegation.in_front` before it, `delegation.behind` after it.
    ///
    /// # Errors
    ///
    /// As [`Frontend::start`].
    pub async fn start_in_chain(config: FrontendConfig, delegation: Delegation) -> Result<Frontend, FrontendError> {
        Self::start_with(config, None, delegation).await
    }

    /// As [`Frontend::start`], on `storage` instead of `config.etcd_servers` (the in-memory
    /// twin, for tests).
    ///
    /// # Errors
    ///
    /// As [`Frontend::start`].
    pub async fn start_on_storage(config: FrontendConfig, storage: SharedStorage) -> Result<Frontend, FrontendError> {
        Self::start_with(config, Some(storage), Delegation::default()).await
    }

    /// As [`Frontend::start_in_chain`], on `storage` when given (the in-memory twin, for
    /// tests) instead of `config.etcd_servers`.
    ///
    /// # Errors
    ///
    /// As [`Frontend::start`].
    pub async fn start_in_chain_on(
        config: FrontendConfig,
        storage: Option<SharedStorage>,
        delegation: Delegation,
    ) -> Result<Frontend, FrontendError> {
        Self::start_with(config, storage, delegation).await
    }

    async fn start_with(
        config: FrontendConfig,
        storage: Option<SharedStorage>,
        delegation: Delegation,
    ) -> Result<Frontend, FrontendError> {
        let certs = certs::ensure(&config.cert_dir)?;
        let store = connect_and_bootstrap(&config, storage.as_ref()).await?;
        let client_ca = match &config.client_ca_file {
            Some(path) => read(path)?,
            None => certs.ca_cert_pem.clone(),
        };
        let x509 = X509Authenticator::from_pem(&client_ca)?;
        let tokens = config.token_auth_file.as_deref().map(TokenFile::load).transpose()?;
        let request_header = match &config.request_header {
            Some(flags) => Some(RequestHeaderAuthenticator::new(RequestHeaderConfig {
                client_ca_pem: read(&flags.client_ca_file)?,
                allowed_names: flags.allowed_names.clone(),
                username_headers: flags.username_headers.clone(),
                uid_headers: flags.uid_headers.clone(),
                group_headers: flags.group_headers.clone(),
                extra_headers_prefix: flags.extra_headers_prefix.clone(),
            })?),
            None => None,
        };
        let hints: Vec<&X509Authenticator> = request_header.iter().map(RequestHeaderAuthenticator::ca).collect();
        let tls = server::tls_config(
            &certs.serving_cert_pem,
            &certs.serving_key_pem,
            x509.tls_verifier_also_hinting(&hints),
        )?;
        let accounts = service_accounts::setup(&config.service_accounts, &config.cert_dir, &store)?;
        let published = extension_auth::AuthenticationInfo {
            client_ca_pem: client_ca.clone(),
            request_header: request_header.as_ref().map(|r| r.config().clone()),
        };
        let mut authenticator = Authenticator::new(Some(x509), tokens, config.anonymous_auth)
            .with_service_accounts(accounts.authenticator, accounts.api_audiences);
        if let Some(request_header) = request_header {
            authenticator = authenticator.with_request_header(request_header);
        }
        let authenticator = Arc::new(authenticator);
        let authorizer = Arc::new(RbacAuthorizer::new(store.storage().clone(), &config.storage_prefix));
        if config.write_bootstrap_rbac {
            // Authorization does not depend on these objects (the built-in policy is compiled
            // in), so a failure here is logged, not fatal.
            match authorizer.write_bootstrap_policy().await {
                Ok(created) => tracing::debug!(created, "bootstrap RBAC policy in storage"),
                Err(e) => tracing::warn!(error = %e, "writing the bootstrap RBAC policy"),
            }
            // As kube's post-start hook: extension servers read it to trust this server's
            // clients and front proxy; serving does not depend on it, so a failure is logged.
            if let Err(e) = extension_auth::publish(&store, &published).await {
                tracing::warn!(error = %e, "publishing the extension-apiserver-authentication ConfigMap");
            }
        }
        let metrics = Arc::new(metrics::Metrics::default());
        let auditor = audit::Auditor::start(
            config.audit_log_path.as_ref(),
            config.audit_policy_file.as_ref(),
            config.audit_buffer_size,
            metrics.clone(),
        )
        .await?;

        let addr = SocketAddr::new(config.bind_address, config.secure_port);
        let listener =
            tokio::net::TcpListener::bind(addr).await.map_err(|source| FrontendError::Bind { addr, source })?;
        let local_addr = listener.local_addr().map_err(|source| FrontendError::Bind { addr, source })?;
        let kubeconfig = certs.write_admin_kubeconfig(local_addr, config.admin_kubeconfig.as_deref())?;

        let store_for_tokens = store.clone();
        let context = DelegateContext {
            store: store.clone(),
            metrics: metrics.clone(),
            watch_cache: config.watch_cache,
            version: kinds::KUBERNETES_VERSION,
            advertise_address: local_addr.to_string(),
        };
        let behind = (delegation.behind)(context.clone());
        let store = behind
            .admission
            .iter()
            .chain(&delegation.in_front_admission)
            .fold(store, |store, plugin| store.with_admission(plugin.clone()));
        let store = match behind.apis.as_ref().and_then(|apis| apis.namespaced_kinds()) {
            Some(kinds) => store.with_namespaced_elsewhere(kinds),
            None => store,
        };
        let watch_cache = watch_cache::WatchCaches::new(store.storage().clone(), config.watch_cache);
        let state = Arc::new(AppState {
            store,
            version: kinds::KUBERNETES_VERSION,
            advertise_address: local_addr.to_string(),
            metrics: metrics.clone(),
            watch_cache,
            delegated: behind.apis,
            engine_probe: config.engine_probe.clone(),
        });
        let kinds = in_front_of(Router::new(state), behind.handler);
        let tokens =
            service_accounts::ServiceAccountServer::new(store_for_tokens, accounts.settings, accounts.discovery);
        let kinds = in_front_of(tokens, kinds);
        let builtin = in_front_of(reviews::ReviewServer::new(authorizer.clone(), authenticator.clone()), kinds);
        let chain = build_handler_chain(
            (delegation.in_front)(context, builtin),
            ChainConfig {
                authenticator,
                authorizer,
                auditor,
                metrics,
                max_requests_inflight: config.max_requests_inflight,
                max_mutating_requests_inflight: config.max_mutating_requests_inflight,
                request_timeout: config.request_timeout,
                max_request_body_bytes: config.max_request_body_bytes,
            },
        );
        let connections = config.connections;
        Ok(Frontend { listener, tls: Arc::new(tls), chain, local_addr, kubeconfig, connections })
    }

    /// Returns the bound address of the secure port.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Returns the path of the admin kubeconfig.
    pub fn admin_kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// Returns the handler chain (for in-process callers and tests).
    pub fn chain(&self) -> ChainService {
        self.chain.clone()
    }

    /// Serves until `shutdown` resolves.
    pub async fn serve(self, shutdown: impl Future<Output = ()>) {
        tracing::info!(addr = %self.local_addr, kubeconfig = %self.kubeconfig.display(), "serving the Kubernetes API");
        server::serve(self.listener, self.tls, self.chain, self.connections, shutdown).await;
    }
}
