//! The `ballast` binary: command-line wiring only.
//!
//! * `ballast serve`: the embedded all-in-one default (today: one engine member; the Kubernetes
//!   frontend joins it when it lands).
//! * `ballast engine`: one engine member, with etcd's flag names.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use ballast_engine::{Engine, EngineConfig};
use clap::{Args, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "ballast", version, about = "Ballast: a sharded etcd v3 engine (and, soon, Kubernetes API server)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run everything in one process with a default data directory (the embedded default).
    Serve(EngineFlags),
    /// Run one engine member.
    Engine(EngineFlags),
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
    /// Comma-separated URLs to serve the etcd v3 API on.
    #[arg(long, default_value = "http://127.0.0.1:2379")]
    listen_client_urls: String,
    /// Comma-separated client URLs advertised to clients (default: the listen URLs).
    #[arg(long)]
    advertise_client_urls: Option<String>,
    /// Comma-separated URLs for peer traffic (recorded; multi-member clusters are not built yet).
    #[arg(long, default_value = "http://127.0.0.1:2380")]
    listen_peer_urls: String,
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
    /// Log format: text or json.
    #[arg(long, default_value = "text")]
    log_format: String,
}

fn split(urls: &str) -> Vec<String> {
    urls.split(',').map(str::trim).filter(|u| !u.is_empty()).map(String::from).collect()
}

fn listen_addr(url: &str) -> anyhow::Result<SocketAddr> {
    let rest = match url.split_once("://") {
        Some(("http", rest)) => rest,
        Some(("https", _)) => bail!("{url}: TLS on the engine's client port is not built yet; use http://"),
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
    let listen_client = listen_urls.iter().map(|u| listen_addr(u)).collect::<anyhow::Result<Vec<_>>>()?;
    let mut cfg = EngineConfig {
        name: flags.name.clone(),
        data_dir: flags.data_dir.clone().unwrap_or_else(|| PathBuf::from(format!("{}.ballast", flags.name))),
        listen_client,
        advertise_client_urls: flags.advertise_client_urls.as_deref().map_or(listen_urls, split),
        advertise_peer_urls: split(flags.initial_advertise_peer_urls.as_deref().unwrap_or(&flags.listen_peer_urls)),
        cluster_token: flags.initial_cluster_token.clone(),
        max_request_bytes: flags.max_request_bytes,
        max_txn_ops: flags.max_txn_ops,
        request_timeout: Duration::from_secs(7),
        ..EngineConfig::default()
    };
    cfg.shard.quota_backend_bytes = flags.quota_backend_bytes;
    Ok(cfg)
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

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let (Command::Serve(flags) | Command::Engine(flags)) = &cli.command;
    init_logs(&flags.log_format);
    let cfg = config(flags)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().thread_name("ballast-net").build()?;
    runtime.block_on(async move {
        let engine = Engine::start(&cfg).with_context(|| format!("opening {}", cfg.data_dir.display()))?;
        engine.serve(shutdown_signal()).await?;
        tracing::info!("stopped");
        Ok(())
    })
}
