//! `FrontendConfig`: everything the frontend is started with, named after kube-apiserver's
//! flags. Every limit has its default's reason on the field.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

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
    /// Largest request body: kube's 3 MiB.
    pub max_request_body_bytes: usize,
    /// `--etcd-prefix`: kube's `/registry`.
    pub storage_prefix: String,
    /// The watch cache: window size, per-client queue and progress/bookmark interval (reasons
    /// on [`crate::watch_cache::WatchCacheConfig`]).
    pub watch_cache: crate::watch_cache::WatchCacheConfig,
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
            max_request_body_bytes: crate::filters::body_limit::DEFAULT_MAX_BODY_BYTES,
            storage_prefix: "/registry".into(),
            watch_cache: crate::watch_cache::WatchCacheConfig::default(),
        }
    }
}
