//! `cargo run --release -p engine-bench -- all` runs every benchmark and prints its tables.
//!
//! Each benchmark does the same work through the engine and directly against Postgres (the
//! baseline), on a fresh database of the server `ENGINE_BENCH_DATABASE_URL` names (default
//! `postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable`), and prints both with their ratio.
//! `push` and `pull` take `--backend sqlite`: the server on a fresh SQLite file, against the same
//! work done directly on SQLite. Wall-clock
//! figures: run on an otherwise idle machine, and read them as ratios. With `ENGINE_BENCH_KEEP`
//! set, the databases stay afterwards for inspection.

mod blobs;
mod client;
mod db;
mod hostile;
mod plain;
mod pull;
mod push;
mod soak;
mod stream;
mod wire;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "engine-bench", about = "Benchmarks of engine against plain Postgres and SQLite")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Pull over HTTP: alice's notes grow through the sizes (with other users' beside them);
    /// incremental pulls at each size, bootstraps from 100,000; then an actor with many buckets.
    Pull {
        /// The store: on `sqlite`, the bootstraps only (beside keyset paging on the same file).
        #[arg(long, value_enum, default_value = "postgres")]
        backend: db::Backend,
        /// Alice's notes at each step.
        #[arg(long, value_delimiter = ',', default_value = "10000,100000,1000000")]
        sizes: Vec<usize>,
        /// Lists shared with the many-bucket actor (10 notes each).
        #[arg(long, default_value_t = 10_000)]
        lists: usize,
    },
    /// Push over HTTP: one `add_note` per request at growing concurrency, and where a push's time
    /// goes.
    Push {
        /// The store.
        #[arg(long, value_enum, default_value = "postgres")]
        backend: db::Backend,
        /// Concurrent clients.
        #[arg(long, value_delimiter = ',', default_value = "1,8,32")]
        clients: Vec<usize>,
        /// Seconds per measurement.
        #[arg(long, default_value_t = 5)]
        seconds: u64,
        /// Turns of the engine and its baselines at each concurrency; each figure is the median.
        #[arg(long, default_value_t = 1)]
        rounds: usize,
    },
    /// Push across server instances on one database, with LISTEN/NOTIFY realtime and then
    /// through NATS (not part of `all`: it needs a NATS server with JetStream).
    Instances {
        /// Concurrent clients, spread over the instances.
        #[arg(long, default_value_t = 32)]
        clients: usize,
        /// Server instances.
        #[arg(long, default_value_t = 3)]
        instances: usize,
        /// Seconds per measurement.
        #[arg(long, default_value_t = 5)]
        seconds: u64,
        /// The NATS server.
        #[arg(long, default_value = "nats://127.0.0.1:4222")]
        nats: String,
    },
    /// Fan-out: commit-to-ping latency with many sockets in one shared list, and memory per idle
    /// socket, beside a plain tokio-tungstenite broadcaster measured the same way.
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
    /// Soak: clients writing through a faulty network to instances killed at random; checks
    /// that nothing is lost, doubled or stuck and every replica converges (not part of `all`).
    Soak {
        /// How long the clients work, in minutes.
        #[arg(long, default_value_t = 10.0)]
        minutes: f64,
        /// Users (each with its own list, shared with the next user).
        #[arg(long, default_value_t = 10)]
        users: usize,
        /// Devices (clients) per user.
        #[arg(long, default_value_t = 2)]
        devices: usize,
        /// Server instances on the one database.
        #[arg(long, default_value_t = 3)]
        instances: usize,
        /// The share of answers cut (half) or slowed (half); as large a share of connections is
        /// refused, answered 503 by the proxy or duplicated to a second instance (a third each).
        #[arg(long, default_value_t = 0.05)]
        fault_rate: f64,
        /// The seed of every random choice.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Hostile accounts beside an honest user: its pull, bootstrap and push p50/p99 unattacked,
    /// under each attack alone (bucket floods, CRDT bombs, pool hogs, slow bodies) and under all
    /// at once, on a server with the notes app's own settings (not part of `all`).
    Hostile {
        /// The store.
        #[arg(long, value_enum, default_value = "postgres")]
        backend: db::Backend,
        /// Seconds the honest user is measured in each phase.
        #[arg(long, default_value_t = 30)]
        seconds: u64,
        /// The honest user's notes, which each of her bootstraps pulls.
        #[arg(long, default_value_t = 300)]
        notes: usize,
        /// Connections of the slow-bodies attack.
        #[arg(long, default_value_t = 600)]
        slow: usize,
        /// The attacked phases to run, by name (`bucket floods`, `CRDT bombs`, `pool hogs`,
        /// `slow bodies`, `all at once`); all of them when not given.
        #[arg(long, value_delimiter = ',')]
        phases: Vec<String>,
    },
    /// Blobs through presigned URLs against direct transfers to the same S3 server (`s3s-fs`,
    /// `ENGINE_S3S_FS` or on the `PATH`).
    Blobs {
        /// Blob sizes, in MiB.
        #[arg(long, value_delimiter = ',', default_values_t = [1, 100])]
        sizes: Vec<usize>,
        /// Rounds per size (after a warm-up round).
        #[arg(long, default_value_t = 7)]
        rounds: usize,
    },
    /// Everything, with the defaults.
    All,
    /// Serve the notes app for the stream benchmark (its server process).
    #[command(hide = true)]
    Serve,
    /// One instance of the soak (its server process).
    #[command(hide = true)]
    SoakServe,
    /// The plain broadcaster of the stream benchmark (its server process).
    #[command(hide = true)]
    PlainServe,
}

#[tokio::main]
async fn main() {
    match Cli::parse().command {
        Command::Pull { backend, sizes, lists } => pull::run(backend, &sizes, lists).await,
        Command::Push { backend, clients, seconds, rounds } => push::run(backend, &clients, seconds, rounds).await,
        Command::Instances { clients, instances, seconds, nats } => {
            push::across_instances(clients, instances, seconds, &nats).await;
        }
        Command::Stream { sockets } => stream::run(&sockets).await,
        Command::Client { rows, mutations } => client::run(rows, mutations).await,
        Command::Hostile { backend, seconds, notes, slow, phases } => {
            hostile::run(hostile::Settings { backend, seconds, notes, slow, phases }).await;
        }
        Command::Blobs { sizes, rounds } => blobs::run(&sizes, rounds).await,
        Command::All => {
            pull::run(db::Backend::Postgres, &[10_000, 100_000, 1_000_000], 10_000).await;
            push::run(db::Backend::Postgres, &[1, 8, 32], 5, 1).await;
            stream::run(&[1000, 10_000]).await;
            client::run(100_000, 1_000).await;
        }
        Command::Serve => stream::serve().await,
        Command::SoakServe => soak::serve().await,
        Command::PlainServe => plain::serve().await,
        Command::Soak { minutes, users, devices, instances, fault_rate, seed } => {
            soak::run(soak::Settings { minutes, users, devices, instances, fault_rate, seed }).await;
        }
    }
}
