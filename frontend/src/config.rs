//! `FrontendConfig`: everything the frontend is started with, named after kube-apiserver's
//! flags. Every limit has its default's reason on the field.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

/// The frontend's configuration.
#[derive(Debug, Clone)]
pub struct FrontendConfig {
    /// `--etcd-servers`: etcd v3 endpoints (`http://host:port`).
    pub etcd_servers: Vec<String>,
    /// `--bind-address`. Defaults to loopback (kube's default is 0.0.0.0): an all-in-one
    /// development server should not be reachable from the network unless asked.
    pub bind_address: IpAddr,
    /// `--secure-port` (0 = any free port, for tests). kube's default is 6443.
    pub secure_port: u16,
    /// `--cert-dir`: where generated certificates and `admin.kubeconfig` live.
    pub cert_dir: PathBuf,
    /// Where to write the admin kubeconfig; default `<cert_dir>/admin.kubeconfig`.
    pub admin_kubeconfig: Option<PathBuf>,
    /// `--client-ca-file`: CA bundle for client certificates; default: the generated CA.
    pub client_ca_file: Option<PathBuf>,
    /// `--token-auth-file`: static bearer tokens (CSV).
    pub token_auth_file: Option<PathBuf>,
    /// ServiceAccount tokens: signing and verification keys, issuers, audiences, lifetime.
    pub service_accounts: ServiceAccountConfig,
    /// `--requestheader-*`: identities from a front proxy; `None` (no
    /// `--requestheader-client-ca-file`) turns it off, as in kube.
    pub request_header: Option<RequestHeaderFiles>,
    /// `--anonymous-auth`: requests without credentials run as `system:anonymous` (true, as in
    /// kube) or get 401.
    pub anonymous_auth: bool,
    /// `--max-requests-inflight`: kube's default, 400.
    pub max_requests_inflight: usize,
    /// `--max-mutating-requests-inflight`: kube's default, 200.
    pub max_mutating_requests_inflight: usize,
    /// `--request-timeout`: how long a non-long-running request may take before it is answered
    /// 504. kube's default, 60 s: long enough for a large list against a busy store, short
    /// enough that a stuck storage call does not hold a max-in-flight slot for minutes.
    pub request_timeout: Duration,
    /// Largest request body: kube's 3 MiB.
    pub max_request_body_bytes: usize,
    /// `--etcd-prefix`: kube's `/registry`.
    pub storage_prefix: String,
    /// `--etcd-cafile`, `--etcd-certfile`, `--etcd-keyfile`: client TLS to `https://`
    /// `etcd_servers`.
    pub etcd_tls: ballast_apiserver::storage::etcd3::EtcdTls,
    /// `--audit-log-path`: where audit events go as JSON lines (`-` = standard output); `None`
    /// disables auditing, as in kube.
    pub audit_log_path: Option<PathBuf>,
    /// `--audit-policy-file`: the `audit.k8s.io/v1` Policy (YAML or JSON). Without one, kube
    /// logs nothing even with a log path; we do the same.
    pub audit_policy_file: Option<PathBuf>,
    /// `--audit-log-batch-buffer-size`: events queued for the writer before new ones are
    /// dropped (and counted in `apiserver_audit_error_total`). kube's batch default, 10000:
    /// at ~1 KiB per event that is ~10 MiB at most, and it absorbs several seconds of a
    /// thousand requests per second while the disk stalls.
    pub audit_buffer_size: usize,
    /// Whether to write the bootstrap ClusterRoles and ClusterRoleBindings into storage at
    /// start (as kube-apiserver's RBAC post-start hook does), so they can be listed. The
    /// authorizer knows them either way.
    pub write_bootstrap_rbac: bool,
    /// The watch cache: window size, per-client queue and progress/bookmark interval (reasons
    /// on [`ballast_apiserver::watch_cache::WatchCacheConfig`]).
    pub watch_cache: ballast_apiserver::watch_cache::WatchCacheConfig,
    /// Keys read per etcd Range while a LIST walks a collection; the LIST's answer is written
    /// as each such page arrives, so this bounds a LIST's memory whatever the collection's size
    /// (one page of records and decoded objects plus its encoding). Default 1000: about 4 MiB
    /// for typical 4 KiB pods, close to kube's own etcd page size (its reflectors page by 500,
    /// and its storage grows a filtered read's page up to 10000), and few enough Ranges that a
    /// 10k-object LIST costs ten round trips rather than a hundred.
    pub list_page_size: usize,
    /// What one client connection may hold and for how long (header and idle timeouts, HTTP/2
    /// streams and resets, concurrent connections); reasons on
    /// [`ballast_apiserver::connection_limits::ConnectionLimits`].
    pub connections: ballast_apiserver::connection_limits::ConnectionLimits,
    /// The storage engine in this process (`ballast serve`), which the health endpoints check
    /// and name the stopped shard of; `None` for a frontend of a remote store.
    pub engine_probe: Option<ballast_apiserver::routes::state::EngineProbe>,
}

impl Default for FrontendConfig {
    fn default() -> Self {
        FrontendConfig {
            etcd_servers: vec!["http://127.0.0.1:2379".into()],
            bind_address: IpAddr::V4(Ipv4Addr::LOCALHOST),
            secure_port: 6443,
            cert_dir: PathBuf::from("frontend.certs"),
            admin_kubeconfig: None,
            client_ca_file: None,
            token_auth_file: None,
            service_accounts: ServiceAccountConfig::default(),
            request_header: None,
            anonymous_auth: true,
            max_requests_inflight: 400,
            max_mutating_requests_inflight: 200,
            request_timeout: Duration::from_secs(60),
            max_request_body_bytes: ballast_apiserver::filters::body_limit::DEFAULT_MAX_BODY_BYTES,
            storage_prefix: "/registry".into(),
            etcd_tls: ballast_apiserver::storage::etcd3::EtcdTls::default(),
            audit_log_path: None,
            audit_policy_file: None,
            audit_buffer_size: 10_000,
            write_bootstrap_rbac: true,
            watch_cache: ballast_apiserver::watch_cache::WatchCacheConfig::default(),
            list_page_size: ballast_apiserver::registry::store::DEFAULT_LIST_PAGE_SIZE,
            connections: ballast_apiserver::connection_limits::ConnectionLimits::default(),
            engine_probe: None,
        }
    }
}

/// kube-apiserver's service-account flags.
#[derive(Debug, Clone)]
pub struct ServiceAccountConfig {
    /// `--service-account-signing-key-file`: the private key tokens are signed with. Unset: a
    /// key generated once into `<cert_dir>/service-account.key` (kube-apiserver requires the
    /// flag; generating it keeps a development server one command, and persisting it keeps
    /// tokens valid across restarts). Frontends sharing one store must share the key.
    pub signing_key_file: Option<PathBuf>,
    /// `--service-account-key-file`: further verification keys (public or private, PEM), for
    /// tokens signed by other servers or by a key being rotated out.
    pub key_files: Vec<PathBuf>,
    /// `--service-account-issuer`: the first names the tokens this server issues; tokens of
    /// any are accepted. Default: kubeadm's `https://kubernetes.default.svc.cluster.local`, an
    /// `https` URL so OIDC discovery is served.
    pub issuers: Vec<String>,
    /// `--api-audiences`: the audiences a token must be meant for to authenticate to this
    /// server, and the audiences of a token request that names none. Default: the first
    /// issuer, as kube-apiserver.
    pub api_audiences: Vec<String>,
    /// `--service-account-max-token-expiration`: longer token requests are cut to it. None:
    /// no cap, as kube's default.
    pub max_token_expiration: Option<Duration>,
    /// `--service-account-jwks-uri`: where the discovery document says the keys are. Default:
    /// `/openid/v1/jwks` on the issuer's host.
    pub jwks_uri: Option<String>,
    /// `--service-account-extend-token-expiration`: a pod-bound token requested for 3607 s
    /// (what kubelet asks for its projected tokens) is issued for a year (or the max token
    /// expiration, if shorter) with a `warnafter` claim at the requested expiry, as kube does
    /// by default, so workloads whose clients never reread the token keep working while the
    /// stale use is visible.
    pub extend_token_expiration: bool,
}

/// The default issuer.
pub const DEFAULT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

impl Default for ServiceAccountConfig {
    fn default() -> Self {
        ServiceAccountConfig {
            signing_key_file: None,
            key_files: Vec::new(),
            issuers: vec![DEFAULT_ISSUER.into()],
            api_audiences: Vec::new(),
            max_token_expiration: None,
            jwks_uri: None,
            extend_token_expiration: true,
        }
    }
}

/// kube-apiserver's `--requestheader-*` flags. kube-apiserver has no default header names;
/// the ones of [`RequestHeaderFiles::new`] are those kube's aggregator sends and kubeadm sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHeaderFiles {
    /// `--requestheader-client-ca-file`: the CA that signs front-proxy client certificates.
    pub client_ca_file: PathBuf,
    /// `--requestheader-allowed-names`: the proxies' CommonNames (empty: any the CA signed).
    pub allowed_names: Vec<String>,
    /// `--requestheader-username-headers`.
    pub username_headers: Vec<String>,
    /// `--requestheader-uid-headers`.
    pub uid_headers: Vec<String>,
    /// `--requestheader-group-headers`.
    pub group_headers: Vec<String>,
    /// `--requestheader-extra-headers-prefix`.
    pub extra_headers_prefix: Vec<String>,
}

impl RequestHeaderFiles {
    /// Request-header authentication with `client_ca_file`, any CommonName and the standard
    /// `X-Remote-User`, `X-Remote-Uid`, `X-Remote-Group` and `X-Remote-Extra-` headers.
    pub fn new(client_ca_file: PathBuf) -> Self {
        RequestHeaderFiles {
            client_ca_file,
            allowed_names: Vec::new(),
            username_headers: vec!["X-Remote-User".into()],
            uid_headers: vec!["X-Remote-Uid".into()],
            group_headers: vec!["X-Remote-Group".into()],
            extra_headers_prefix: vec!["X-Remote-Extra-".into()],
        }
    }
}
