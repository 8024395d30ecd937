//! The `ballast` binary: command-line wiring only.
//!
//! * `ballast serve`: the embedded all-in-one default: one engine member and one Kubernetes API
//!   frontend pointed at it, with the admin kubeconfig written into the data directory.
//! * `ballast engine`: one engine member, with etcd's flag names.
//! * `ballast frontend`: one stateless Kubernetes API server, with kube-apiserver's flag names,
//!   pointed at engine members or at stock etcd.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use ballast_apiserver::delegation::NotFound;
use ballast_engine::shard::ShardPlacement;
use ballast_engine::{Engine, EngineConfig};
use ballast_frontend::{Delegation, Frontend, FrontendConfig, RequestHeaderFiles};
use clap::{Args, Parser, Subcommand};

/// jemalloc rather than glibc's malloc for the Rust heap: the frontend's requests build and drop
/// many small JSON maps, where glibc spends a fifth of the CPU (its bin bookkeeping and
/// `malloc_consolidate`); with jemalloc a server-side apply costs about a sixth less CPU and the
/// frontend stays smaller after a load (benches/README.md). Its defaults return freed pages
/// within seconds of activity.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser, Debug)]
#[command(name = "ballast", version, about = "Ballast: a sharded etcd v3 engine and Kubernetes API server")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once at start: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Command {
    /// Run everything in one process with a default data directory (the embedded default).
    Serve(ServeFlags),
    /// Run one engine member.
    Engine(EngineFlags),
    /// Run one Kubernetes API frontend against etcd v3 endpoints.
    Frontend(FrontendFlags),
    /// Work with snapshots taken by `etcdctl snapshot save` (or any Maintenance.Snapshot client).
    #[command(subcommand)]
    Snapshot(SnapshotCommand),
}

#[derive(Subcommand, Debug)]
enum SnapshotCommand {
    /// Unpack a snapshot into a new data directory, as `etcdctl snapshot restore` does for
    /// etcd: the restored member starts as a new cluster with the snapshot's data (new member
    /// and cluster IDs from its own flags) and must be started with the snapshot's `--shards`.
    Restore {
        /// The snapshot file.
        file: PathBuf,
        /// Data directory to create; it must not exist or be empty.
        #[arg(long)]
        data_dir: PathBuf,
    },
}

/// `ballast serve`: the engine's flags plus the frontend's port and authentication.
#[derive(Args, Debug)]
struct ServeFlags {
    #[command(flatten)]
    engine: EngineFlags,
    /// Port of the Kubernetes API (HTTPS).
    #[arg(long, default_value_t = 6443)]
    secure_port: u16,
    /// Address the Kubernetes API listens on.
    #[arg(long, default_value = "127.0.0.1")]
    bind_address: IpAddr,
    /// Static bearer tokens (CSV: token,user,uid,"group1,group2").
    #[arg(long)]
    token_auth_file: Option<PathBuf>,
    #[command(flatten)]
    authn: Box<AuthnFlags>,
    #[command(flatten)]
    chain: ChainFlags,
    #[command(flatten)]
    aggregator: AggregatorFlags,
}

/// kube-apiserver's API aggregation flags, shared by `serve` and `frontend`.
#[derive(Args, Debug)]
struct AggregatorFlags {
    /// Client certificate (PEM) the aggregator presents to extension API servers, which trust
    /// the identity headers of its holder (`ballast serve` generates one).
    #[arg(long)]
    proxy_client_cert_file: Option<PathBuf>,
    /// Private key (PEM) of `--proxy-client-cert-file`.
    #[arg(long)]
    proxy_client_key_file: Option<PathBuf>,
    /// Proxy to an endpoint address of the Service's EndpointSlices instead of its cluster IP.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set)]
    enable_aggregator_routing: bool,
}

impl AggregatorFlags {
    /// The aggregator, with the front-proxy files of the flags or else `generated`.
    fn aggregator(
        &self,
        generated: Option<&ballast_aggregator::front_proxy::FrontProxyFiles>,
    ) -> anyhow::Result<ballast_aggregator::Aggregator> {
        let read = |p: &PathBuf| std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()));
        let (cert, key) = match (&self.proxy_client_cert_file, &self.proxy_client_key_file, generated) {
            (Some(c), Some(k), _) => (Some(read(c)?), Some(read(k)?)),
            (None, None, Some(files)) => (Some(read(&files.client_cert)?), Some(read(&files.client_key)?)),
            (None, None, None) => (None, None),
            _ => bail!("--proxy-client-cert-file and --proxy-client-key-file go together"),
        };
        let config = ballast_aggregator::AggregatorConfig {
            proxy_client_cert_pem: cert,
            proxy_client_key_pem: key,
            enable_aggregator_routing: self.enable_aggregator_routing,
            ..ballast_aggregator::AggregatorConfig::default()
        };
        ballast_aggregator::Aggregator::new(config).context("the front-proxy client certificate")
    }
}

/// kube-apiserver's service-account and request-header authentication flags, shared by `serve`
/// and `frontend`.
#[derive(Args, Debug)]
struct AuthnFlags {
    /// Private key (PEM, RSA or ECDSA) that signs service-account tokens (default: one
    /// generated once into the certificate directory as service-account.key).
    #[arg(long)]
    service_account_signing_key_file: Option<PathBuf>,
    /// Further keys (PEM, public or private) that verify service-account tokens; repeatable.
    #[arg(long)]
    service_account_key_file: Vec<PathBuf>,
    /// Issuer of service-account tokens; repeatable: the first signs, all are accepted.
    #[arg(long, default_value = ballast_frontend::config::DEFAULT_ISSUER)]
    service_account_issuer: Vec<String>,
    /// Audiences a token must be meant for (comma-separated; default: the first issuer).
    #[arg(long, value_delimiter = ',')]
    api_audiences: Vec<String>,
    /// Longest lifetime of a requested token; longer requests are cut to it (Go duration).
    #[arg(long, value_parser = parse_duration)]
    service_account_max_token_expiration: Option<std::time::Duration>,
    /// JWKS URI the OIDC discovery document names (default: /openid/v1/jwks on the issuer's host).
    #[arg(long)]
    service_account_jwks_uri: Option<String>,
    /// Issue kubelet's pod-bound token requests (3607 s) for a year with a warnafter claim at
    /// the requested expiry, as kube-apiserver does by default.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    service_account_extend_token_expiration: bool,
    /// CA bundle that signs front-proxy client certificates; enables request-header authentication.
    #[arg(long)]
    requestheader_client_ca_file: Option<PathBuf>,
    /// Front-proxy certificate common names allowed to name users (comma-separated; empty: any).
    #[arg(long, value_delimiter = ',')]
    requestheader_allowed_names: Vec<String>,
    /// Headers naming the user (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "X-Remote-User")]
    requestheader_username_headers: Vec<String>,
    /// Headers naming the user's uid (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "X-Remote-Uid")]
    requestheader_uid_headers: Vec<String>,
    /// Headers naming the user's groups (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "X-Remote-Group")]
    requestheader_group_headers: Vec<String>,
    /// Prefixes of headers carrying extra user attributes (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "X-Remote-Extra-")]
    requestheader_extra_headers_prefix: Vec<String>,
}

impl AuthnFlags {
    fn apply(&self, config: &mut FrontendConfig) {
        let accounts = &mut config.service_accounts;
        accounts.signing_key_file = self.service_account_signing_key_file.clone();
        accounts.key_files = self.service_account_key_file.clone();
        accounts.issuers = self.service_account_issuer.clone();
        accounts.api_audiences = self.api_audiences.clone();
        accounts.max_token_expiration = self.service_account_max_token_expiration;
        accounts.jwks_uri = self.service_account_jwks_uri.clone();
        accounts.extend_token_expiration = self.service_account_extend_token_expiration;
        config.request_header = self.requestheader_client_ca_file.as_ref().map(|ca| RequestHeaderFiles {
            client_ca_file: ca.clone(),
            allowed_names: self.requestheader_allowed_names.clone(),
            username_headers: self.requestheader_username_headers.clone(),
            uid_headers: self.requestheader_uid_headers.clone(),
            group_headers: self.requestheader_group_headers.clone(),
            extra_headers_prefix: self.requestheader_extra_headers_prefix.clone(),
        });
    }
}

/// kube-apiserver's request-handling flags, shared by `serve` and `frontend`.
#[derive(Args, Debug)]
struct ChainFlags {
    /// Most read-only requests in flight (0 = no limit); long-running requests are exempt.
    #[arg(long, default_value_t = 400)]
    max_requests_inflight: usize,
    /// Most mutating requests in flight (0 = no limit).
    #[arg(long, default_value_t = 200)]
    max_mutating_requests_inflight: usize,
    /// Longest a non-long-running request may take before it is answered 504 (Go duration).
    #[arg(long, default_value = "1m0s", value_parser = parse_duration)]
    request_timeout: std::time::Duration,
    /// Audit log file (JSON lines); "-" writes to standard output. Unset: no auditing.
    #[arg(long)]
    audit_log_path: Option<PathBuf>,
    /// Audit policy (audit.k8s.io/v1 Policy, YAML or JSON).
    #[arg(long)]
    audit_policy_file: Option<PathBuf>,
    /// Audit events queued for the writer; beyond it events are dropped and counted.
    #[arg(long, default_value_t = 10_000)]
    audit_log_batch_buffer_size: usize,
    /// Most concurrent HTTP/2 streams per client connection (kube-apiserver's default 250).
    #[arg(long, default_value_t = 250)]
    http2_max_streams_per_connection: u32,
    /// How long a client may take to send a request's headers (kube-apiserver's 32s).
    #[arg(long, default_value = "32s", value_parser = parse_duration)]
    http_header_read_timeout: std::time::Duration,
    /// How long a connection with no request in flight stays open (kube-apiserver's 90s).
    #[arg(long, default_value = "1m30s", value_parser = parse_duration)]
    http_idle_timeout: std::time::Duration,
    /// Most client connections open at once; past it new ones wait (and the log says so).
    #[arg(long, default_value_t = 10_000)]
    max_connections: usize,
}

fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    ballast_apiserver::filters::timeout::parse_go_duration(text)
        .ok_or_else(|| format!("invalid duration {text:?} (use Go syntax, e.g. 60s or 1m0s)"))
}

impl ChainFlags {
    fn apply(&self, config: &mut FrontendConfig) {
        config.max_requests_inflight = self.max_requests_inflight;
        config.max_mutating_requests_inflight = self.max_mutating_requests_inflight;
        config.request_timeout = self.request_timeout;
        config.audit_log_path = self.audit_log_path.clone();
        config.audit_policy_file = self.audit_policy_file.clone();
        config.audit_buffer_size = self.audit_log_batch_buffer_size;
        config.connections.http2_max_concurrent_streams = self.http2_max_streams_per_connection;
        config.connections.header_read_timeout = self.http_header_read_timeout;
        config.connections.idle_timeout = self.http_idle_timeout;
        config.connections.max_connections = self.max_connections;
    }
}

/// kube-apiserver's flag names for the frontend.
#[derive(Args, Debug)]
struct FrontendFlags {
    /// Comma-separated etcd v3 endpoints (stock etcd or Ballast engine members).
    #[arg(long, default_value = "http://127.0.0.1:2379")]
    etcd_servers: String,
    /// CA bundle (PEM) that `https://` etcd servers' certificates are checked against.
    #[arg(long)]
    etcd_cafile: Option<PathBuf>,
    /// Client certificate (PEM) presented to `https://` etcd servers.
    #[arg(long)]
    etcd_certfile: Option<PathBuf>,
    /// Private key (PEM) of `--etcd-certfile`.
    #[arg(long)]
    etcd_keyfile: Option<PathBuf>,
    /// Prefix of every key the frontend stores in etcd.
    #[arg(long, default_value = "/registry")]
    etcd_prefix: String,
    /// Port of the Kubernetes API (HTTPS).
    #[arg(long, default_value_t = 6443)]
    secure_port: u16,
    /// Address to listen on (kube-apiserver's default is 0.0.0.0; ours is loopback).
    #[arg(long, default_value = "127.0.0.1")]
    bind_address: IpAddr,
    /// Directory of the generated CA, serving and admin certificates and admin.kubeconfig.
    #[arg(long, default_value = "ballast-frontend.certs")]
    cert_dir: PathBuf,
    /// CA bundle that verifies client certificates (default: the generated CA).
    #[arg(long)]
    client_ca_file: Option<PathBuf>,
    /// Static bearer tokens (CSV: token,user,uid,"group1,group2").
    #[arg(long)]
    token_auth_file: Option<PathBuf>,
    /// Allow requests without credentials as system:anonymous.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    anonymous_auth: bool,
    #[command(flatten)]
    authn: Box<AuthnFlags>,
    #[command(flatten)]
    chain: ChainFlags,
    #[command(flatten)]
    aggregator: AggregatorFlags,
    /// Log format: text or json.
    #[arg(long, default_value = "text")]
    log_format: String,
}

/// etcd-compatible member flags.
#[derive(Args, Debug)]
struct EngineFlags {
    /// Human-readable member name.
    #[arg(long, default_value = "default")]
    name: String,
    /// Data directory (default: `<name>.ballast`).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Comma-separated URLs to serve the etcd v3 API on: `http://host:port`, `https://host:port`
    /// (with `--cert-file`), `unix://path`.
    #[arg(long, default_value = "http://127.0.0.1:2379")]
    listen_client_urls: String,
    /// Certificate (PEM) the client port presents on `https://` listen URLs.
    #[arg(long)]
    cert_file: Option<PathBuf>,
    /// Private key (PEM) of `--cert-file`.
    #[arg(long)]
    key_file: Option<PathBuf>,
    /// CA bundle (PEM) client certificates are checked against.
    #[arg(long)]
    trusted_ca_file: Option<PathBuf>,
    /// Clients must present a certificate signed by `--trusted-ca-file`.
    #[arg(long, default_value_t = false)]
    client_cert_auth: bool,
    /// Kind of auth token: `simple`, or
    /// `jwt,pub-key=<file>,priv-key=<file>,sign-method=<RS256|ES256|HS256|...>[,ttl=5m]`.
    #[arg(long, default_value = "simple")]
    auth_token: String,
    /// Seconds a simple token lives after its last use.
    #[arg(long, default_value_t = 300)]
    auth_token_ttl: u64,
    /// bcrypt cost of stored passwords (4 to 31; others fall back to 10, as etcd does).
    #[arg(long, default_value_t = 10)]
    bcrypt_cost: u32,
    /// Comma-separated client URLs advertised to clients (default: the listen URLs).
    #[arg(long)]
    advertise_client_urls: Option<String>,
    /// Comma-separated `http://` URLs that serve only the HTTP endpoints (`/metrics`, `/health`,
    /// ...), as etcd's flag of the same name.
    #[arg(long, default_value = "")]
    listen_metrics_urls: String,
    /// Comma-separated origins whose browsers may call the HTTP endpoints and the JSON gateway
    /// (CORS); `*` (the default) is every origin, as etcd's flag of the same name.
    #[arg(long, default_value = "*")]
    cors: String,
    /// Comma-separated URLs other members reach this one on (bound when the cluster has other
    /// members).
    #[arg(long, default_value = "http://127.0.0.1:2380")]
    listen_peer_urls: String,
    /// The members of a new cluster: `name=peerURL,...` (a name may repeat for several URLs).
    /// Read only when the data directory is new; without it the member starts alone.
    #[arg(long)]
    initial_cluster: Option<String>,
    /// Certificate (PEM) this member presents to its peers; with `https://` peer URLs.
    #[arg(long)]
    peer_cert_file: Option<PathBuf>,
    /// Private key (PEM) of `--peer-cert-file`.
    #[arg(long)]
    peer_key_file: Option<PathBuf>,
    /// CA bundle (PEM) that peers' certificates must chain to.
    #[arg(long)]
    peer_trusted_ca_file: Option<PathBuf>,
    /// Peers must present a certificate signed by `--peer-trusted-ca-file`.
    #[arg(long, default_value_t = false)]
    peer_client_cert_auth: bool,
    /// `new` to bootstrap a cluster; `existing` to join a running one after `member add`.
    #[arg(long, default_value = "new", value_parser = ["new", "existing"])]
    initial_cluster_state: String,
    /// Comma-separated peer URLs advertised to other members (default: the listen peer URLs).
    #[arg(long)]
    initial_advertise_peer_urls: Option<String>,
    /// Token that seeds the member and cluster IDs.
    #[arg(long, default_value = "etcd-cluster")]
    initial_cluster_token: String,
    /// Largest accepted write request in bytes.
    #[arg(long, default_value_t = 1_572_864)]
    max_request_bytes: usize,
    /// Most operations per txn branch.
    #[arg(long, default_value_t = 128)]
    max_txn_ops: usize,
    /// Backend size in bytes that raises the NOSPACE alarm.
    #[arg(long, default_value_t = 2 << 30)]
    quota_backend_bytes: u64,
    /// Shards of the key space, each its own thread and raft group; fixed when the data
    /// directory is created. With more than one, a Txn or DeleteRange must stay within one shard
    /// (one namespace of one resource), as Kubernetes' always do.
    #[arg(long, default_value_t = 1)]
    shards: u32,
    /// Spread the shards' leaders of a new cluster of several members and shards over the
    /// members, ordering writes with the revision allocator on shard 0's leader
    /// (engine/SHARDING.md); `false`: one member leads every shard. Recorded in the data
    /// directory at the member's first start (a joining member takes the cluster's). Unset:
    /// spread; on a member started alone, one member leads until MemberAdd brings the cluster
    /// to three voters, then it switches to spread at run time; given (true) on a member
    /// started alone: spread at once; `false` on a member started alone: one leader for good.
    #[arg(
        long,
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        default_missing_value = "true",
        alias = "experimental-spread-shard-leaders"
    )]
    spread_shard_leaders: Option<bool>,
    /// Where shard threads run: `unbound` (any CPU) or `per-core` (shard n pinned to the n-th
    /// CPU the process may run on, mod their count).
    #[arg(long, default_value = "unbound", value_parser = ["unbound", "per-core"])]
    shard_placement: String,
    /// Applied raft entries each shard keeps for slow followers; a follower further behind is
    /// sent a snapshot (etcd 3.5's flag; its default).
    #[arg(long, default_value_t = 5000)]
    experimental_snapshot_catchup_entries: u64,
    /// Most raft entries a leader keeps beyond that for a follower still catching up from the
    /// log; one further behind is sent a snapshot instead.
    #[arg(long, default_value_t = 1_000_000)]
    raft_log_hold_entries: u64,
    /// Milliseconds one shard round may run before the shard is reported as stalled.
    #[arg(long, default_value_t = 1000)]
    shard_stall_threshold_ms: u64,
    /// Writes a timeline of the shards' rounds to this file (a line per point a round passes,
    /// wall-clock µs; `benches/round-trace.sh` reads three members' together). Off by default.
    #[arg(long)]
    round_trace_file: Option<PathBuf>,
    /// Milliseconds a member whose shard stopped on an error keeps its health endpoints up
    /// (they name the shard and the cause) before it exits non-zero.
    #[arg(long, default_value_t = 2000)]
    shard_error_exit_delay_ms: u64,
    /// Most concurrent HTTP/2 streams per client connection (etcd's default: unlimited).
    #[arg(long, default_value_t = u32::MAX)]
    max_concurrent_streams: u32,
    /// How often the client port pings a quiet connection (Go duration; etcd's 2h).
    #[arg(long, default_value = "2h0m0s", value_parser = parse_duration)]
    grpc_keepalive_interval: std::time::Duration,
    /// How long a ping may go unanswered before the connection is closed (etcd's 20s).
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    grpc_keepalive_timeout: std::time::Duration,
    /// Least time a client must leave between pings; more often gets GOAWAY too_many_pings
    /// (etcd's 5s).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    grpc_keepalive_min_time: std::time::Duration,
    /// Log format: text or json.
    #[arg(long, default_value = "text")]
    log_format: String,
}

fn split(urls: &str) -> Vec<String> {
    urls.split(',').map(str::trim).filter(|u| !u.is_empty()).map(String::from).collect()
}

fn listen_addr(url: &str) -> anyhow::Result<SocketAddr> {
    listen_addr_of(url, false)
}

/// The address of a listen URL; `https://` only where TLS is set up (`--cert-file` on the
/// client port, `--peer-cert-file` on the peer port).
fn listen_addr_of(url: &str, tls: bool) -> anyhow::Result<SocketAddr> {
    let rest = match url.split_once("://") {
        Some(("http", rest)) => rest,
        Some(("https", rest)) if tls => rest,
        Some(("https", _)) => {
            bail!("{url}: https needs --cert-file and --key-file (--peer-cert-file on the peer port)")
        }
        Some((scheme, _)) => bail!("{url}: unsupported scheme {scheme}"),
        None => url,
    };
    let hostport = rest.trim_end_matches('/');
    hostport
        .to_socket_addrs()
        .with_context(|| format!("bad URL {url}"))?
        .next()
        .with_context(|| format!("{url} resolves to nothing"))
}

fn config(flags: &EngineFlags) -> anyhow::Result<EngineConfig> {
    let listen_urls = split(&flags.listen_client_urls);
    let client_tls = tls_material(
        flags.cert_file.as_ref(),
        flags.key_file.as_ref(),
        flags.trusted_ca_file.as_ref(),
        flags.client_cert_auth,
        "",
    )?;
    let (mut listen_client, mut listen_client_tls, mut listen_client_unix) = (Vec::new(), Vec::new(), Vec::new());
    let mut listen_client_unix_tls = Vec::new();
    for url in &listen_urls {
        match url.split_once("://") {
            Some(("unix", path)) => listen_client_unix.push(PathBuf::from(path)),
            Some(("unixs", path)) => {
                if client_tls.is_none() {
                    bail!("{url}: unixs:// needs --cert-file and --key-file");
                }
                listen_client_unix_tls.push(PathBuf::from(path));
            }
            Some(("https", _)) => listen_client_tls.push(listen_addr_of(url, client_tls.is_some())?),
            _ => listen_client.push(listen_addr(url)?),
        }
    }
    let peer_tls = peer_tls(flags)?;
    let listen_peer = split(&flags.listen_peer_urls)
        .iter()
        .map(|u| listen_addr_of(u, peer_tls.is_some()))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut cfg = EngineConfig {
        name: flags.name.clone(),
        initial_cluster: flags.initial_cluster.clone(),
        join_existing: flags.initial_cluster_state == "existing",
        listen_peer,
        data_dir: flags.data_dir.clone().unwrap_or_else(|| PathBuf::from(format!("{}.ballast", flags.name))),
        listen_client,
        listen_client_tls,
        listen_client_unix,
        listen_client_unix_tls,
        client_tls,
        listen_metrics: split(&flags.listen_metrics_urls)
            .iter()
            .map(|u| listen_addr(u))
            .collect::<anyhow::Result<Vec<_>>>()?,
        advertise_client_urls: flags.advertise_client_urls.as_deref().map_or(listen_urls, split),
        advertise_peer_urls: split(flags.initial_advertise_peer_urls.as_deref().unwrap_or(&flags.listen_peer_urls)),
        cluster_token: flags.initial_cluster_token.clone(),
        max_request_bytes: flags.max_request_bytes,
        max_txn_ops: flags.max_txn_ops,
        cors: split(&flags.cors),
        request_timeout: Duration::from_secs(7),
        shards: flags.shards,
        fatal_exit_delay: Duration::from_millis(flags.shard_error_exit_delay_ms),
        grpc_limits: ballast_engine::api::GrpcLimits {
            max_concurrent_streams: flags.max_concurrent_streams,
            keepalive_interval: flags.grpc_keepalive_interval,
            keepalive_timeout: flags.grpc_keepalive_timeout,
            keepalive_min_time: flags.grpc_keepalive_min_time,
            ..ballast_engine::api::GrpcLimits::default()
        },
        ..EngineConfig::default()
    };
    cfg.cluster.tls = peer_tls;
    cfg.auth = ballast_engine::auth::AuthConfig {
        token: ballast_engine::auth::token::parse_token_option(&flags.auth_token)?,
        simple_ttl: Duration::from_secs(flags.auth_token_ttl),
        bcrypt_cost: if (4..=31).contains(&flags.bcrypt_cost) {
            flags.bcrypt_cost
        } else {
            ballast_engine::auth::DEFAULT_BCRYPT_COST
        },
    };
    cfg.cluster.spread_leaders = flags.spread_shard_leaders.unwrap_or(true);
    cfg.cluster.spread_alone = flags.spread_shard_leaders == Some(true);
    cfg.shard.quota_backend_bytes = flags.quota_backend_bytes;
    cfg.shard.placement =
        if flags.shard_placement == "per-core" { ShardPlacement::PerCore } else { ShardPlacement::Unbound };
    cfg.shard.stall_threshold = Duration::from_millis(flags.shard_stall_threshold_ms);
    cfg.round_trace_file = flags.round_trace_file.clone();
    cfg.shard.raft_log_retain = flags.experimental_snapshot_catchup_entries.max(1);
    cfg.shard.raft_log_hold_max = flags.raft_log_hold_entries;
    Ok(cfg)
}

/// Reads the `--peer-*` TLS files; None without `--peer-cert-file`.
fn peer_tls(flags: &EngineFlags) -> anyhow::Result<Option<ballast_engine::cluster::PeerTls>> {
    tls_material(
        flags.peer_cert_file.as_ref(),
        flags.peer_key_file.as_ref(),
        flags.peer_trusted_ca_file.as_ref(),
        flags.peer_client_cert_auth,
        "peer-",
    )
}

/// Reads the TLS flags `--<prefix>cert-file`, `key-file`, `trusted-ca-file` and
/// `client-cert-auth` (the client port's with no prefix, the peer port's with `peer-`).
fn tls_material(
    cert: Option<&PathBuf>,
    key: Option<&PathBuf>,
    ca: Option<&PathBuf>,
    client_cert_auth: bool,
    prefix: &str,
) -> anyhow::Result<Option<ballast_engine::cluster::PeerTls>> {
    let Some(cert) = cert else {
        if key.is_some() || client_cert_auth {
            bail!("--{prefix}key-file and --{prefix}client-cert-auth need --{prefix}cert-file");
        }
        return Ok(None);
    };
    let key = key.with_context(|| format!("--{prefix}cert-file needs --{prefix}key-file"))?;
    let read = |p: &PathBuf| std::fs::read(p).with_context(|| format!("reading {}", p.display()));
    let ca_pem = ca.map(read).transpose()?;
    if client_cert_auth && ca_pem.is_none() {
        bail!("--{prefix}client-cert-auth needs --{prefix}trusted-ca-file");
    }
    Ok(Some(ballast_engine::cluster::PeerTls { cert_pem: read(cert)?, key_pem: read(key)?, ca_pem, client_cert_auth }))
}

fn init_logs(format: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
}

async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot listen for SIGTERM");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("shutting down");
}

fn frontend_config(flags: &FrontendFlags) -> anyhow::Result<FrontendConfig> {
    let read = |p: &Option<PathBuf>| -> anyhow::Result<Option<Vec<u8>>> {
        p.as_ref().map(|p| std::fs::read(p).with_context(|| format!("reading {}", p.display()))).transpose()
    };
    let etcd_tls = ballast_apiserver::storage::etcd3::EtcdTls {
        ca_pem: read(&flags.etcd_cafile)?,
        cert_pem: read(&flags.etcd_certfile)?,
        key_pem: read(&flags.etcd_keyfile)?,
    };
    if etcd_tls.cert_pem.is_some() != etcd_tls.key_pem.is_some() {
        bail!("--etcd-certfile and --etcd-keyfile go together");
    }
    let mut config = FrontendConfig {
        etcd_servers: split(&flags.etcd_servers),
        etcd_tls,
        storage_prefix: flags.etcd_prefix.clone(),
        bind_address: flags.bind_address,
        secure_port: flags.secure_port,
        cert_dir: flags.cert_dir.clone(),
        client_ca_file: flags.client_ca_file.clone(),
        token_auth_file: flags.token_auth_file.clone(),
        anonymous_auth: flags.anonymous_auth,
        ..FrontendConfig::default()
    };
    flags.authn.apply(&mut config);
    flags.chain.apply(&mut config);
    Ok(config)
}

/// Runs one engine member until a signal.
async fn run_engine(cfg: EngineConfig) -> anyhow::Result<()> {
    let engine = Engine::start(&cfg).with_context(|| format!("opening {}", cfg.data_dir.display()))?;
    engine.serve(shutdown_signal()).await?;
    tracing::info!("stopped");
    Ok(())
}

/// The Kubernetes API servers as kube-apiserver chains them: the aggregator in front of the
/// built-in API, apiextensions behind it, then the 404.
fn server_chain(aggregator: ballast_aggregator::Aggregator) -> Delegation {
    Delegation {
        in_front: Box::new(|context, builtin| aggregator.server(context, builtin)),
        in_front_admission: ballast_aggregator::admission(),
        behind: Box::new(|context| ballast_apiextensions::server(context, NotFound::handler())),
    }
}

/// Runs one frontend until a signal.
async fn run_frontend(cfg: FrontendConfig, aggregator: ballast_aggregator::Aggregator) -> anyhow::Result<()> {
    let frontend = Frontend::start_in_chain(cfg, server_chain(aggregator))
        .await
        .context("starting the Kubernetes API frontend")?;
    println!("admin kubeconfig: {}", frontend.admin_kubeconfig().display());
    frontend.serve(shutdown_signal()).await;
    tracing::info!("stopped");
    Ok(())
}

/// Runs the engine and a frontend pointed at it; one signal stops both.
async fn run_all_in_one(engine_cfg: EngineConfig, flags: &ServeFlags) -> anyhow::Result<()> {
    let engine = Engine::start(&engine_cfg).with_context(|| format!("opening {}", engine_cfg.data_dir.display()))?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    let engine_probe = ballast_apiserver::routes::state::EngineProbe(std::sync::Arc::new(engine.stopped_shard_probe()));
    let mut engine_task = tokio::spawn(engine.serve(stopped(stop_rx.clone())));
    let client = engine_cfg.listen_client.first().context("no client URL to point the frontend at")?;
    let endpoint = if client.ip().is_unspecified() {
        format!("http://127.0.0.1:{}", client.port())
    } else {
        format!("http://{client}")
    };
    let mut frontend_cfg = FrontendConfig {
        etcd_servers: vec![endpoint],
        bind_address: flags.bind_address,
        secure_port: flags.secure_port,
        cert_dir: engine_cfg.data_dir.join("pki"),
        admin_kubeconfig: Some(engine_cfg.data_dir.join("admin.kubeconfig")),
        token_auth_file: flags.token_auth_file.clone(),
        engine_probe: Some(engine_probe),
        ..FrontendConfig::default()
    };
    flags.authn.apply(&mut frontend_cfg);
    flags.chain.apply(&mut frontend_cfg);
    // The front-proxy CA and client certificate, next to the cluster's: the CA is what
    // extension servers are given to check the aggregator's client certificate.
    let front_proxy = ballast_aggregator::front_proxy::ensure(&frontend_cfg.cert_dir)?;
    let aggregator = flags.aggregator.aggregator(Some(&front_proxy))?;
    // As a kubeadm cluster: the frontend trusts its own front proxy's X-Remote-* headers, and
    // publishes that CA in the extension-apiserver-authentication ConfigMap, where extension
    // servers look for it. `--requestheader-client-ca-file` names another CA instead.
    if frontend_cfg.request_header.is_none() {
        frontend_cfg.request_header = Some(RequestHeaderFiles {
            allowed_names: vec![ballast_aggregator::front_proxy::FRONT_PROXY_CLIENT_CN.into()],
            ..RequestHeaderFiles::new(front_proxy.front_proxy_ca.clone())
        });
    }
    let frontend = tokio::select! {
        started = Frontend::start_in_chain(frontend_cfg, server_chain(aggregator)) => started.context("starting the Kubernetes API frontend")?,
        ended = &mut engine_task => bail!("the engine stopped before the frontend started: {:?}", ended),
    };
    let kubeconfig =
        std::fs::canonicalize(frontend.admin_kubeconfig()).unwrap_or_else(|_| frontend.admin_kubeconfig().into());
    println!(
        "Kubernetes API on https://{}; run: kubectl --kubeconfig {} get ns",
        frontend.local_addr(),
        kubeconfig.display()
    );
    println!("front-proxy CA (for extension API servers): {}", front_proxy.front_proxy_ca.display());
    let frontend_task = tokio::spawn(frontend.serve(stopped(stop_rx)));
    // The engine ends by itself when a shard stops on an error: the whole process then exits
    // with that error, as a member alone would, rather than serve 500s until a signal.
    let ended = tokio::select! {
        () = shutdown_signal() => None,
        ended = &mut engine_task => Some(ended),
    };
    let _ = stop_tx.send(true);
    let _ = frontend_task.await;
    match ended {
        Some(ended) => ended.context("engine task")?.context("the engine stopped")?,
        None => engine_task.await.context("engine task")??,
    }
    tracing::info!("stopped");
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let log_format = match &cli.command {
        Command::Serve(flags) => &flags.engine.log_format,
        Command::Engine(flags) => &flags.log_format,
        Command::Frontend(flags) => &flags.log_format,
        Command::Snapshot(SnapshotCommand::Restore { file, data_dir }) => {
            let restored = ballast_engine::snapshot::restore(file, data_dir)?;
            println!(
                "restored {} ({} files, {} bytes) into {}; start it with --data-dir {} --shards {}",
                file.display(),
                restored.files,
                restored.bytes,
                data_dir.display(),
                data_dir.display(),
                restored.shards
            );
            return Ok(());
        }
    };
    init_logs(log_format);
    if let Err(e) = ballast_engine::fd_limit::raise_nofile() {
        tracing::warn!(error = %e, "cannot read the open-file limit");
    }
    // Custom resources' CEL rules recurse; on threads this large they run on the thread's own
    // stack instead of a segment mapped per object.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("ballast-net")
        .thread_stack_size(ballast_apiextensions::RULES_THREAD_STACK)
        .build()?;
    match &cli.command {
        Command::Engine(flags) => {
            let cfg = config(flags)?;
            runtime.block_on(run_engine(cfg))
        }
        Command::Frontend(flags) => {
            runtime.block_on(run_frontend(frontend_config(flags)?, flags.aggregator.aggregator(None)?))
        }
        Command::Serve(flags) => {
            let cfg = config(&flags.engine)?;
            runtime.block_on(run_all_in_one(cfg, flags))
        }
        Command::Snapshot(_) => Ok(()), // answered above, before any runtime work
    }
}
