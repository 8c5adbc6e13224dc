//! `cargo run --release -p engine-bench -- all` runs every benchmark and prints its tables.
//!
//! Each benchmark does the same work through the engine and directly against Postgres (the
//! baseline), on a fresh database of the server `ENGINE_BENCH_DATABASE_URL` names (default
//! `postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable`), and prints both with their ratio. Wall-clock
//! figures: run on an otherwise idle machine, and read them as ratios.

mod client;
mod db;
mod pull;
mod push;
mod stream;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "engine-bench", about = "Benchmarks of engine against plain Postgres")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Pull: bootstrap of 100,000 rows, and incremental pulls at growing table sizes.
    Pull {
        /// Rows to bootstrap.
        #[arg(long, default_value_t = 100_000)]
        rows: usize,
        /// Table sizes for incremental pulls.
        #[arg(long, value_delimiter = ',', default_value = "10000,100000,1000000")]
        sizes: Vec<usize>,
    },
    /// Push: one-row-insert mutations at growing concurrency.
    Push {
        /// Concurrent clients.
        #[arg(long, value_delimiter = ',', default_value = "1,8,32")]
        clients: Vec<usize>,
        /// Seconds per measurement.
        #[arg(long, default_value_t = 5)]
        seconds: u64,
    },
    /// Realtime: commit-to-ping latency and memory per idle socket with many sockets connected.
    Stream {
        /// Connected sockets.
        #[arg(long, value_delimiter = ',', default_value = "1000,10000")]
        sockets: Vec<usize>,
    },
    /// Client: bootstrap of 100,000 rows into the local store, and local mutate latency.
    Client {
        /// Rows to bootstrap.
        #[arg(long, default_value_t = 100_000)]
        rows: usize,
        /// Mutations to time.
        #[arg(long, default_value_t = 1_000)]
        mutations: usize,
    },
    /// Everything, with the defaults.
    All,
    /// Serve the notes app for the stream benchmark (its server process).
    #[command(hide = true)]
    Serve,
}

#[tokio::main]
async fn main() {
    match Cli::parse().command {
        Command::Pull { rows, sizes } => pull::run(rows, &sizes).await,
        Command::Push { clients, seconds } => push::run(&clients, seconds).await,
        Command::Stream { sockets } => stream::run(&sockets).await,
        Command::Client { rows, mutations } => client::run(rows, mutations).await,
        Command::All => {
            pull::run(100_000, &[10_000, 100_000, 1_000_000]).await;
            push::run(&[1, 8, 32], 5).await;
            stream::run(&[1000, 10_000]).await;
            client::run(100_000, 1_000).await;
        }
        Command::Serve => stream::serve().await,
    }
}
