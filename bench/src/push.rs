//! Push benchmark, over the wire: concurrent clients, each its own user, push one `add_note` per
//! request to a notes server process for a while; the baseline runs single-row
//! `BEGIN; INSERT; COMMIT` transactions over sqlx at the same concurrency, into a table of the
//! same shape without the engine's tracking, and the CPU each side costs the machine per
//! operation (the server's and the database's backends' against the baseline process's and
//! its backends'). Then an outbox draining, 100 mutations a push, beside 100 single-row
//! transactions on one session. Then where one push's time goes: the HTTP round
//! trip of a route that does nothing, verifying its token, and the storage's push called
//! directly, beside the whole push over HTTP.
//!
//! With `--backend sqlite`, the server runs on a SQLite file and the baselines do the same
//! transactions on that file (see [`sqlite`]); the cost of each side is its CPU per operation.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use engine::Actor;
use engine::server::{EngineAuth, Storage};
use engine::wire::{MutationRequest, PushRequest};
use serde_json::json;
use sqlx::Connection;

use crate::db::{Backend, BenchDb, BenchFile, SECRET};
use crate::wire::{BackendsSpent, Cpu, CpuSpent, ServerProcess, WireClient, ms, percentile, token};

pub(crate) async fn run(backend: Backend, concurrency: &[usize], seconds: u64, rounds: usize) {
    match backend {
        Backend::Postgres => {
            postgres(concurrency, seconds, rounds).await;
            batches(seconds, rounds).await;
            breakdown().await;
        }
        Backend::Sqlite => sqlite(concurrency, seconds, rounds).await,
    }
}

/// On Postgres: the engine beside `BEGIN; INSERT; COMMIT` through a pool as the engine's and
/// with a session per client (the strongest: no pool's bookkeeping, the `INSERT` prepared once
/// per session), and what each costs the machine: the CPU of the server process and of the
/// database's Postgres backends per mutation, against this process's and the backends' per
/// transaction of the session baseline.
async fn postgres(concurrency: &[usize], seconds: u64, rounds: usize) {
    println!("\n## Push over HTTP: one `add_note` per request, each client its own user ({seconds} s per figure)\n");
    println!(
        "| clients | engine mutations/s | baseline through a pool as the engine's, transactions/s | ratio | baseline with a session per client, prepared | ratio | CPU per mutation: server + Postgres | CPU per transaction, session baseline: its process + Postgres | CPU ratio | load generator CPU share |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &clients in concurrency {
        let db = plain_notes_db(clients).await;
        let server = ServerProcess::start(&db.url).await;
        let writers = writers(&server, clients).await;
        let mut turns = Turns::default();
        for _ in 0..rounds {
            let backends = BackendsSpent::start(&db.pool).await;
            let engine = engine_pushes(&server, &writers, seconds).await;
            let database = backends.stop(&db.pool).await;
            turns.share.push(engine.cpu.generator_share());
            turns.engine.push(engine.per_second);
            turns.engine_cpu.push((engine.cpu.server / engine.operations as f64, database / engine.operations as f64));
            // The baselines: the same transaction through a pool configured as the engine's (its
            // size, no check of a session when it is lent), and with a session of each client's
            // own.
            let pool = sqlx::postgres::PgPoolOptions::new()
                .max_connections(engine_pool_size())
                .test_before_acquire(false)
                .connect(&db.url)
                .await
                .expect("connect");
            sqlx::raw_sql("TRUNCATE plain_notes").execute(&db.pool).await.unwrap();
            let pooled = measure(clients, seconds, {
                move |c, n| {
                    let pool = pool.clone();
                    async move {
                        insert_transaction::<sqlx::Postgres>(&mut pool.acquire().await.unwrap(), INSERT, c, n).await
                    }
                }
            })
            .await;
            turns.first.push(pooled.per_second);
            sqlx::raw_sql("TRUNCATE plain_notes").execute(&db.pool).await.unwrap();
            // The sessions outlive the measure: a backend that ends takes its CPU time with it.
            let kept = sessions(&db, clients).await;
            let sessions = kept.clone();
            let backends = BackendsSpent::start(&db.pool).await;
            let cpu = CpuSpent::start(std::process::id());
            let own = measure(clients, seconds, {
                move |c, n| {
                    let session = sessions[c].clone();
                    async move { insert_transaction::<sqlx::Postgres>(&mut *session.lock().await, INSERT, c, n).await }
                }
            })
            .await;
            let (process, database) = (cpu.stop().own, backends.stop(&db.pool).await);
            drop(kept);
            turns.second.push(own.per_second);
            turns.baseline_cpu.push((process / own.operations as f64, database / own.operations as f64));
        }
        let (engine_cpu, baseline_cpu) = (pair_median(&turns.engine_cpu), pair_median(&turns.baseline_cpu));
        let (engine, pooled, own, share) = turns.medians();
        println!(
            "| {clients} | {engine:.0} | {pooled:.0} | {:.2} | {own:.0} | **{:.2}** | {:.3} + {:.3} ms | {:.3} + {:.3} ms | {:.1}× | {:.0}% |",
            engine / pooled,
            engine / own,
            engine_cpu.0 * 1000.0,
            engine_cpu.1 * 1000.0,
            baseline_cpu.0 * 1000.0,
            baseline_cpu.1 * 1000.0,
            (engine_cpu.0 + engine_cpu.1) / (baseline_cpu.0 + baseline_cpu.1),
            share * 100.0
        );
        db.drop_database().await;
    }
}

/// A database provisioned for the notes app, with the baselines' plain table beside it.
async fn plain_notes_db(clients: usize) -> BenchDb {
    let db = BenchDb::new(u32::try_from(clients).unwrap() + 4).await;
    db.storage(example_notes::app()).await;
    sqlx::raw_sql(
        "CREATE TABLE plain_notes (id text PRIMARY KEY, owner_id text NOT NULL, list_id text NOT NULL, title text NOT NULL, done boolean NOT NULL, position bigint NOT NULL, body bytea NOT NULL, deleted_at timestamptz)",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    db
}

/// A session of each of `clients` clients' own.
async fn sessions(db: &BenchDb, clients: usize) -> Vec<Arc<tokio::sync::Mutex<sqlx::PgConnection>>> {
    let mut sessions = Vec::new();
    for _ in 0..clients {
        let session = sqlx::PgConnection::connect(&db.url).await.expect("connect");
        sessions.push(Arc::new(tokio::sync::Mutex::new(session)));
    }
    sessions
}

/// Mutations in one push of [`batches`]: what a client's outbox sends at once.
const BATCH: usize = 100;

/// An outbox draining: one client pushes [`BATCH`] `add_note`s per request, beside one session
/// running [`BATCH`] single-row transactions in a row (each mutation of the push is its own
/// transaction too); mutations per second and the CPU of each, turn about.
async fn batches(seconds: u64, rounds: usize) {
    println!(
        "\n## Push of {BATCH} mutations per request, one client, beside {BATCH} single-row transactions on one session ({seconds} s per figure)\n"
    );
    println!(
        "| engine mutations/s | baseline transactions/s | ratio | CPU per mutation: server + Postgres | CPU per transaction: baseline's process + Postgres |"
    );
    println!("|---:|---:|---:|---:|---:|");
    let db = plain_notes_db(1).await;
    let server = ServerProcess::start(&db.url).await;
    let writers = writers(&server, 1).await;
    let mut turns = Turns::default();
    for _ in 0..rounds {
        let backends = BackendsSpent::start(&db.pool).await;
        let cpu = CpuSpent::start(server.pid);
        let writers = writers.clone();
        let engine = measure(1, seconds, move |c, n| {
            let writer = writers[c].clone();
            async move {
                let args: Vec<(&str, serde_json::Value)> = (0..BATCH)
                    .map(|i| ("add_note", json!({"list_id": format!("list-{c}"), "title": format!("note {n}.{i}")})))
                    .collect();
                let answer = writer.lock().await.push(&args).await;
                assert_eq!(answer.results.len(), BATCH, "every mutation of the batch is answered");
            }
        })
        .await;
        let (server_cpu, database) = (cpu.stop().server, backends.stop(&db.pool).await);
        let mutations = (engine.operations as usize * BATCH) as f64;
        turns.engine.push(engine.per_second * BATCH as f64);
        turns.engine_cpu.push((server_cpu / mutations, database / mutations));
        let kept = sessions(&db, 1).await;
        let sessions = kept.clone();
        let backends = BackendsSpent::start(&db.pool).await;
        let cpu = CpuSpent::start(std::process::id());
        let baseline = measure(1, seconds, move |c, n| {
            let session = sessions[c].clone();
            async move {
                let mut session = session.lock().await;
                for i in 0..BATCH as u64 {
                    insert_transaction::<sqlx::Postgres>(&mut session, INSERT, c, n * BATCH as u64 + i).await;
                }
            }
        })
        .await;
        let (process, database) = (cpu.stop().own, backends.stop(&db.pool).await);
        drop(kept);
        let transactions = (baseline.operations as usize * BATCH) as f64;
        turns.second.push(baseline.per_second * BATCH as f64);
        turns.baseline_cpu.push((process / transactions, database / transactions));
        sqlx::raw_sql("TRUNCATE plain_notes").execute(&db.pool).await.unwrap();
    }
    let (engine_cpu, baseline_cpu) = (pair_median(&turns.engine_cpu), pair_median(&turns.baseline_cpu));
    let (engine, baseline) = (median(turns.engine), median(turns.second));
    println!(
        "| {engine:.0} | {baseline:.0} | **{:.2}** | {:.3} + {:.3} ms | {:.3} + {:.3} ms |",
        engine / baseline,
        engine_cpu.0 * 1000.0,
        engine_cpu.1 * 1000.0,
        baseline_cpu.0 * 1000.0,
        baseline_cpu.1 * 1000.0,
    );
    db.drop_database().await;
}

/// On SQLite: the engine beside `BEGIN; INSERT; COMMIT` on the same file, opened as the store
/// opens it (WAL, `synchronous = FULL`), by a connection of each client's own and by one
/// connection the clients queue for. SQLite lets one transaction write at a time: connections
/// of their own wait for the file's write lock in SQLite's busy handler, which sleeps between
/// tries; the queue hands the one connection from client to client at once, as the store's
/// writer does. The ratio is to the faster of the two. The CPU of each side: the server
/// process's per mutation (SQLite runs in it), and this process's per baseline transaction.
async fn sqlite(concurrency: &[usize], seconds: u64, rounds: usize) {
    println!(
        "\n## Push over HTTP on SQLite: one `add_note` per request, each client its own user ({seconds} s per figure, medians of {rounds})\n"
    );
    println!(
        "| clients | engine mutations/s | baseline, one connection the clients queue for, transactions/s | baseline, a connection per client | ratio to the faster | server CPU per mutation | baseline CPU per transaction | load generator CPU share |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &clients in concurrency {
        let file = BenchFile::new();
        let server = ServerProcess::start(&file.url).await;
        let mut plain = file.connect().await;
        sqlx::raw_sql(
            "CREATE TABLE plain_notes (id TEXT PRIMARY KEY, owner_id TEXT NOT NULL, list_id TEXT NOT NULL, title TEXT NOT NULL, done INTEGER NOT NULL, position INTEGER NOT NULL, body TEXT NOT NULL, deleted_at TEXT)",
        )
        .execute(&mut plain)
        .await
        .unwrap();
        let writers = writers(&server, clients).await;
        let mut turns = Turns::default();
        let (mut engine_cpu, mut baseline_cpu) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let engine = engine_pushes(&server, &writers, seconds).await;
            turns.share.push(engine.cpu.generator_share());
            turns.engine.push(engine.per_second);
            engine_cpu.push(engine.cpu.server / engine.operations as f64);
            sqlx::raw_sql("DELETE FROM plain_notes").execute(&mut plain).await.unwrap();
            // One connection the clients queue for, then one of each client's own.
            let queue = Arc::new(tokio::sync::Mutex::new(file.connect().await));
            let queued = sqlite_baseline(&server, vec![queue; clients], seconds).await;
            turns.first.push(queued.per_second);
            sqlx::raw_sql("DELETE FROM plain_notes").execute(&mut plain).await.unwrap();
            let mut connections = Vec::new();
            for _ in 0..clients {
                connections.push(Arc::new(tokio::sync::Mutex::new(file.connect().await)));
            }
            let own = sqlite_baseline(&server, connections, seconds).await;
            turns.second.push(own.per_second);
            let faster = if queued.per_second >= own.per_second { &queued } else { &own };
            baseline_cpu.push(faster.cpu.own / faster.operations as f64);
        }
        let (engine, queued, own, share) = turns.medians();
        println!(
            "| {clients} | {engine:.0} | {queued:.0} | {own:.0} | **{:.2}** | {:.3} ms | {:.3} ms | {:.0}% |",
            engine / queued.max(own),
            median(engine_cpu) * 1000.0,
            median(baseline_cpu) * 1000.0,
            share * 100.0
        );
        drop(server);
        file.remove();
    }
}

/// The SQLite baseline's figure: client `c` runs its transactions on `connections[c]` for
/// `seconds`.
async fn sqlite_baseline(
    server: &ServerProcess,
    connections: Vec<Arc<tokio::sync::Mutex<sqlx::SqliteConnection>>>,
    seconds: u64,
) -> Measured {
    let cpu = CpuSpent::start(server.pid);
    let measured = measure(connections.len(), seconds, move |c, n| {
        let connection = connections[c].clone();
        async move { insert_transaction::<sqlx::Sqlite>(&mut *connection.lock().await, SQLITE_INSERT, c, n).await }
    })
    .await;
    Measured { cpu: cpu.stop(), ..measured }
}

/// The figures of each turn of one concurrency: the engine's rate, its two baselines' and the
/// load generator's share of the CPU while the engine ran.
#[derive(Default)]
struct Turns {
    engine: Vec<f64>,
    first: Vec<f64>,
    second: Vec<f64>,
    share: Vec<f64>,
    /// CPU seconds per operation: the engine's server and Postgres; the session baseline's
    /// process and Postgres.
    engine_cpu: Vec<(f64, f64)>,
    baseline_cpu: Vec<(f64, f64)>,
}

impl Turns {
    /// The median of each, in the fields' order.
    fn medians(self) -> (f64, f64, f64, f64) {
        (median(self.engine), median(self.first), median(self.second), median(self.share))
    }
}

/// The median of each side of `pairs`.
fn pair_median(pairs: &[(f64, f64)]) -> (f64, f64) {
    (median(pairs.iter().map(|p| p.0).collect()), median(pairs.iter().map(|p| p.1).collect()))
}

/// The median of `values`.
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// `clients` writers of `server`, each its own user with a list of its own (`list-<c>`).
async fn writers(server: &ServerProcess, clients: usize) -> Vec<Arc<tokio::sync::Mutex<WireClient>>> {
    let mut writers = Vec::new();
    for c in 0..clients {
        let mut client = WireClient::new(server, &format!("user-{c}"));
        client.push(&[("create_list", json!({"id": format!("list-{c}"), "title": "bench"}))]).await;
        writers.push(Arc::new(tokio::sync::Mutex::new(client)));
    }
    writers
}

/// The engine's figure: each of `writers` pushes one `add_note` per request for `seconds`.
async fn engine_pushes(
    server: &ServerProcess,
    writers: &[Arc<tokio::sync::Mutex<WireClient>>],
    seconds: u64,
) -> Measured {
    let cpu = CpuSpent::start(server.pid);
    let writers = writers.to_vec();
    let measured = measure(writers.len(), seconds, move |c, n| {
        let writer = writers[c].clone();
        async move {
            let args = json!({"list_id": format!("list-{c}"), "title": format!("note {n}")});
            writer.lock().await.push(&[("add_note", args)]).await;
        }
    })
    .await;
    Measured { cpu: cpu.stop(), ..measured }
}

/// The size of the pool the engine's server opens on this machine (4 sessions per CPU, 8 to 32).
fn engine_pool_size() -> u32 {
    let cpus = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
    u32::try_from(cpus * 4).unwrap_or(u32::MAX).clamp(8, 32)
}

/// The Postgres baseline's statement: one row of the notes' shape.
const INSERT: &str = "INSERT INTO plain_notes VALUES ($1, $2, $3, 'bench', false, 0, '\\x0000', NULL)";
/// The same on SQLite, where the row keeps its values as the engine's file does.
const SQLITE_INSERT: &str = "INSERT INTO plain_notes VALUES (?, ?, ?, 'bench', 0, 0, '', NULL)";

/// The baseline's work: `BEGIN; INSERT; COMMIT` of one row by `insert` (its database's
/// statement), prepared once per connection (sqlx keeps it).
async fn insert_transaction<DB>(connection: &mut DB::Connection, insert: &'static str, client: usize, n: u64)
where
    DB: sqlx::Database,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    String: for<'q> sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    DB::Arguments: sqlx::IntoArguments<DB>,
{
    let mut tx = connection.begin().await.unwrap();
    sqlx::query::<DB>(insert)
        .bind(format!("n-{client}-{n}"))
        .bind(format!("user-{client}"))
        .bind(format!("list-{client}"))
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
}

/// Where one push's time goes, one client at a time (medians of 500).
async fn breakdown() {
    const ROUNDS: usize = 500;
    let db = BenchDb::new(4).await;
    db.storage(example_notes::app()).await;
    // The storage called directly lends its sessions as the server's does: unchecked.
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(4)
        .test_before_acquire(false)
        .connect(&db.url)
        .await
        .expect("connect");
    let storage = engine::server::storage::PostgresStorage::new(pool, Arc::new(example_notes::app()));
    let server = ServerProcess::start(&db.url).await;
    let http = reqwest::Client::new();
    let bob = token("bob");

    // The HTTP round trip of a route that does nothing but answer.
    let mut round_trip = Vec::new();
    for _ in 0..ROUNDS {
        let start = Instant::now();
        let answer = http.get(server.url("/no-such-route")).bearer_auth(&bob).send().await.unwrap();
        std::hint::black_box(answer.bytes().await.unwrap());
        round_trip.push(start.elapsed());
    }
    // Verifying the token, in this process.
    let auth = engine::auth::BearerTokenAuth::new(SECRET);
    let mut verify = Vec::new();
    for _ in 0..ROUNDS {
        let start = Instant::now();
        std::hint::black_box(auth.check_token(&bob).await.unwrap());
        verify.push(start.elapsed());
    }
    // The storage's push, called directly: sequence, the mutator's reads and writes, the
    // trigger, the record, the commit.
    let actor = Actor::new("bob", "bob");
    let client_id = uuid::Uuid::new_v4();
    let mutation = |id: u64, name: &str, args: serde_json::Value| MutationRequest {
        mutation_id: id,
        client_mutation_id: uuid::Uuid::new_v4(),
        name: name.into(),
        args,
        hlc: None,
    };
    let create = mutation(1, "create_list", json!({"id": "bob-list", "title": "bench"}));
    storage.push(&actor, &PushRequest { client_id, mutations: vec![create] }).await.unwrap();
    let mut direct = Vec::new();
    for n in 0..ROUNDS as u64 {
        let add = mutation(n + 2, "add_note", json!({"list_id": "bob-list", "title": "direct"}));
        let start = Instant::now();
        let pushed = storage.push(&actor, &PushRequest { client_id, mutations: vec![add] }).await.unwrap();
        direct.push(start.elapsed());
        assert!(pushed.stopped.is_none());
    }
    // The whole push over HTTP.
    let mut client = WireClient::new(&server, "bob");
    let mut wire = Vec::new();
    for _ in 0..ROUNDS {
        let start = Instant::now();
        client.push(&[("add_note", json!({"list_id": "bob-list", "title": "wire"}))]).await;
        wire.push(start.elapsed());
    }
    // A plain insert transaction.
    let mut plain = Vec::new();
    sqlx::raw_sql("CREATE TABLE plain_notes (id text PRIMARY KEY, list_id text NOT NULL, title text NOT NULL)")
        .execute(&db.pool)
        .await
        .unwrap();
    let mut session = sqlx::PgConnection::connect(&db.url).await.expect("connect");
    for n in 0..ROUNDS {
        let start = Instant::now();
        let mut tx = session.begin().await.unwrap();
        sqlx::query("INSERT INTO plain_notes VALUES ($1, 'bob-list', 'plain')")
            .bind(format!("n-{n}"))
            .execute(&mut *tx)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        plain.push(start.elapsed());
    }
    for samples in [&mut round_trip, &mut verify, &mut direct, &mut wire, &mut plain] {
        samples.sort();
    }
    let median = |s: &[Duration]| percentile(s, 0.5);
    let rest = median(&wire).saturating_sub(median(&round_trip) + median(&direct));
    println!("\n## Push: where one `add_note` push goes, one client (medians of {ROUNDS})\n");
    println!("| part | time |");
    println!("|---|---:|");
    println!("| whole push over HTTP | {:.3} ms |", ms(median(&wire)));
    println!("| HTTP round trip of a route that answers at once (with auth) | {:.3} ms |", ms(median(&round_trip)));
    println!("| of it, verifying the token | {:.3} ms |", ms(median(&verify)));
    println!("| the storage's push called directly | {:.3} ms |", ms(median(&direct)));
    println!("| the rest: JSON of the request and answer, the ping's publication | {:.3} ms |", ms(rest));
    println!("| baseline: `BEGIN; INSERT; COMMIT` | {:.3} ms |", ms(median(&plain)));
    db.drop_database().await;
}

/// What one figure's run did: operations a second, how many, and the CPU seconds its processes
/// used (zero where the run did not watch them).
struct Measured {
    per_second: f64,
    operations: u64,
    cpu: Cpu,
}

/// `clients` tasks each running `op(client, sequence)` in a loop for `seconds`.
async fn measure<F, Fut>(clients: usize, seconds: u64, op: F) -> Measured
where
    F: Fn(usize, u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (op, stop, done) = (op.clone(), stop.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                op(c, n).await;
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let start = Instant::now();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let count = done.load(Ordering::Relaxed);
    let elapsed = start.elapsed();
    for task in tasks {
        task.await.unwrap();
    }
    Measured { per_second: count as f64 / elapsed.as_secs_f64(), operations: count.max(1), cpu: Cpu::default() }
}

/// Push across server instances: `clients` writers, each its own user, spread over `instances`
/// server processes on one Postgres database, once with LISTEN/NOTIFY realtime and once through
/// the NATS server at `nats_url` (under a prefix of the run's own): what carrying each push's
/// pings between the instances costs the push.
pub(crate) async fn across_instances(clients: usize, instances: usize, seconds: u64, nats_url: &str) {
    println!(
        "\n## Push across {instances} server instances on one database: one `add_note` per request, {clients} clients, each its own user ({seconds} s per figure)\n"
    );
    println!("| realtime | engine mutations/s |");
    println!("|---|---:|");
    let prefix = format!("bench-{}", uuid::Uuid::now_v7().simple());
    for (adapter, realtime) in [("LISTEN/NOTIFY", "listen_notify".to_owned()), ("NATS", nats_url.to_owned())] {
        let db = BenchDb::new(u32::try_from(clients).unwrap() + 4).await;
        db.storage(example_notes::app()).await;
        let env = [("ENGINE_REALTIME", realtime), ("NATS_PREFIX", prefix.clone())];
        let mut servers = Vec::new();
        for _ in 0..instances.max(1) {
            servers.push(ServerProcess::start_with(&db.url, &env).await);
        }
        let mut writers = Vec::new();
        for c in 0..clients {
            let mut client = WireClient::new(&servers[c % servers.len()], &format!("user-{c}"));
            client.push(&[("create_list", json!({"id": format!("list-{c}"), "title": "bench"}))]).await;
            writers.push(Arc::new(tokio::sync::Mutex::new(client)));
        }
        let measured = measure(clients, seconds, move |c, n| {
            let writer = writers[c].clone();
            async move {
                let args = json!({"list_id": format!("list-{c}"), "title": format!("note {n}")});
                writer.lock().await.push(&[("add_note", args)]).await;
            }
        })
        .await;
        println!("| {adapter} | {:.0} |", measured.per_second);
        drop(servers);
        db.drop_database().await;
    }
}
