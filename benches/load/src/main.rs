//! `ballast-load`: a load tool speaking the etcd v3 protocol. It runs one scenario against one
//! endpoint and prints one JSON line of results; `benches/run.sh` runs every scenario against
//! Ballast and stock etcd in the same run and writes the comparison.
//!
//! Scenario ids carry their parameters (`put_c16_v256`: puts, 16 in flight, 256-byte values).

// A load tool measures real elapsed time (latencies, durations).
#![allow(clippy::disallowed_methods)]

mod bare;
mod conn;
mod failover;
mod grpc;
mod scenario;
mod stats;

use ballast_bench_stats::{print_scenarios, RunArgs};
use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "ballast-load", about = "etcd v3 protocol load scenarios")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Runs one scenario and prints a JSON line.
    Run {
        /// Server URL, e.g. http://127.0.0.1:2379.
        #[arg(long)]
        endpoint: String,
        /// Seed for key choice.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[command(flatten)]
        run: RunArgs,
        /// Several server processes (e.g. every member of a cluster), comma-separated: their
        /// CPU times are summed in the result instead of `--server-pid`'s alone.
        #[arg(long, value_delimiter = ',')]
        server_pids: Vec<u32>,
        /// CA certificate (PEM) an `https://` endpoint's certificate is checked against.
        #[arg(long)]
        cacert: Option<std::path::PathBuf>,
    },
    /// Leader failover: puts in a loop through every endpoint, kills `--kill-pid` with SIGKILL
    /// once writes flow, and prints one JSON line with the time from the kill to the first
    /// acknowledged put sent after it.
    Failover {
        /// Every member's URL, comma-separated.
        #[arg(long, value_delimiter = ',', required = true)]
        endpoints: Vec<String>,
        /// The process to kill (the leader).
        #[arg(long)]
        kill_pid: u32,
        /// Milliseconds of writes before the kill.
        #[arg(long, default_value_t = 2000)]
        after_ms: u64,
        /// Timeout of each put, in milliseconds; a put that times out is sent again.
        #[arg(long, default_value_t = 100)]
        timeout_ms: u64,
        /// Writers per endpoint.
        #[arg(long, default_value_t = 8)]
        workers: usize,
        /// Seconds after the kill before giving up (failover_ms is then -1).
        #[arg(long, default_value_t = 30)]
        deadline: u64,
    },
    /// One member of the bare-chain probe (`bare.rs`): the least a replicated, synced put at
    /// one in flight costs on this machine. A follower with `--listen` alone; the leader with
    /// `--followers`, serving KV.Put on `--listen`. Runs until killed.
    BareMember {
        /// The follower's replication port, or the leader's gRPC port.
        #[arg(long)]
        listen: std::net::SocketAddr,
        /// The followers' replication ports (makes this member the leader).
        #[arg(long, value_delimiter = ',')]
        followers: Vec<std::net::SocketAddr>,
        /// Directory for the member's log file.
        #[arg(long)]
        dir: std::path::PathBuf,
    },
    /// Lists scenario ids.
    List,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::List => {
            print_scenarios(scenario::ALL);
            Ok(())
        }
        Command::Run { endpoint, seed, run, server_pids, cacert } => {
            if let Some(ca) = cacert {
                let _ = grpc::CA_FILE.set(ca);
            }
            if let Some(pid) = run.server_pid {
                let _ = stats::SERVER_PID.set(pid);
            }
            let _ = stats::SERVER_PIDS.set(server_pids);
            let result = scenario::run(&endpoint, &run.scenario, run.duration(), seed).await?;
            println!("{}", result.into_json());
            Ok(())
        }
        Command::BareMember { listen, followers, dir } => {
            std::fs::create_dir_all(&dir)?;
            if followers.is_empty() {
                let listener = std::net::TcpListener::bind(listen)?;
                tokio::task::spawn_blocking(move || bare::follower(&listener, &dir)).await?
            } else {
                bare::leader(tokio::net::TcpListener::bind(listen).await?, &followers, dir).await
            }
        }
        Command::Failover { endpoints, kill_pid, after_ms, timeout_ms, workers, deadline } => {
            let line = failover::run(
                &endpoints,
                kill_pid,
                std::time::Duration::from_millis(after_ms),
                std::time::Duration::from_millis(timeout_ms),
                workers,
                std::time::Duration::from_secs(deadline),
            )
            .await?;
            println!("{line}");
            Ok(())
        }
    }
}
