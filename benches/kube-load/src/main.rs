//! `ballast-kube-load`: a load tool speaking the Kubernetes API (HTTPS, HTTP/2, the admin
//! kubeconfig's client certificate). It runs one scenario against one frontend and prints one
//! JSON line; `benches/kube-run.sh` runs every scenario against the frontend on the Ballast
//! engine and on stock etcd in the same run and writes the comparison.
//!
//! Scenario ids carry their parameters (`get_c16`: single-object GETs, 16 in flight).

mod client;
mod scenario;
mod stats;

use std::time::Duration;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "ballast-kube-load", about = "Kubernetes API load scenarios")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Runs one scenario and prints a JSON line.
    Run {
        /// The admin kubeconfig the frontend wrote (embedded certificate data).
        #[arg(long)]
        kubeconfig: String,
        /// Scenario id (see `list`).
        #[arg(long)]
        scenario: String,
        /// How long the timed part runs, in seconds.
        #[arg(long, default_value_t = 10)]
        duration: u64,
        /// The frontend's process id: its memory and CPU are reported (same machine).
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
        Command::Run { kubeconfig, scenario, duration, server_pid } => {
            let target = client::Target::from_kubeconfig(&kubeconfig)?;
            let result = scenario::run(&target, &scenario, Duration::from_secs(duration), server_pid).await?;
            println!("{}", result.into_json());
            Ok(())
        }
    }
}
