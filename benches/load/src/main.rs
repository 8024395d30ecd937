//! `ballast-load`: a load tool speaking the etcd v3 protocol. It runs one scenario against one
//! endpoint and prints one JSON line of results; `benches/run.sh` runs every scenario against
//! Ballast and stock etcd in the same run and writes the comparison.
//!
//! Scenario ids carry their parameters (`put_c16_v256`: puts, 16 in flight, 256-byte values).

mod conn;
mod scenario;
mod stats;

use std::time::Duration;

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
        /// Scenario id (see `list`).
        #[arg(long)]
        scenario: String,
        /// How long the timed part runs, in seconds.
        #[arg(long, default_value_t = 10)]
        duration: u64,
        /// Seed for key choice.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// The server's process id, to report its CPU time over the timed part (same machine).
        #[arg(long)]
        server_pid: Option<u32>,
    },
    /// Lists scenario ids.
    List,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::List => {
            for s in scenario::ALL {
                println!("{s}");
            }
            Ok(())
        }
        Command::Run { endpoint, scenario, duration, seed, server_pid } => {
            if let Some(pid) = server_pid {
                let _ = stats::SERVER_PID.set(pid);
            }
            let result = scenario::run(&endpoint, &scenario, Duration::from_secs(duration), seed).await?;
            println!("{}", result.into_json());
            Ok(())
        }
    }
}
