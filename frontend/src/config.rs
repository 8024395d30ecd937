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
        }
    }
}
