//! `ballast-load`: a load tool speaking the etcd v3 protocol. It runs one scenario against one
//! endpoint and prints one JSON line of results; `benches/run.sh` runs every scenario against
//! Ballast and stock etcd in the same run and writes the comparison.
//!
//! Scenario ids carry their parameters (`put_c16_v256`: puts, 16 in flight, 256-byte values).

// A load tool measures real elapsed time (latencies, durations).
#![allow(clippy::disallowed_methods)]

mod conn;
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
        Command::Run { endpoint, seed, run } => {
            if let Some(pid) = run.server_pid {
                let _ = stats::SERVER_PID.set(pid);
            }
            let result = scenario::run(&endpoint, &run.scenario, run.duration(), seed).await?;
            println!("{}", result.into_json());
            Ok(())
        }
    }
}
