//! `ballast-kube-load`: a load tool speaking the Kubernetes API (HTTPS, HTTP/2, the admin
//! kubeconfig's client certificate). It runs one scenario against one frontend and prints one
//! JSON line; `benches/kube-run.sh` runs every scenario against the frontend on the Ballast
//! engine and on stock etcd in the same run and writes the comparison.
//!
//! Scenario ids carry their parameters (`get_c16`: single-object GETs, 16 in flight).

// A load tool measures real elapsed time (latencies, durations).
#![allow(clippy::disallowed_methods)]

mod client;
mod custom;
mod scenario;
mod stats;

use ballast_bench_stats::{print_scenarios, RunArgs};
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
        Command::Run { kubeconfig, run } => {
            let target = client::Target::from_kubeconfig(&kubeconfig)?;
            let result = scenario::run(&target, &run.scenario, run.duration(), run.server_pid).await?;
            println!("{}", result.into_json());
            Ok(())
        }
    }
}
