//! Client benchmarks.
//!
//! Bootstrap: a client with an empty store pulls 100,000 notes from a server on this machine
//! into its local SQLite store (pages of 1,000, each applied in one transaction: base, view and
//! bucket memberships). The baseline does the same work directly: it reads the rows from
//! Postgres with a keyset-paged `SELECT` and inserts them into one plain SQLite table, one
//! multi-row `INSERT` and transaction per 1,000 rows.
//!
//! Mutate: the latency of `client.mutate` of `add_note` (the mutator run on the local view and
//! the outbox append, one SQLite transaction, durable on return), beside one plain single-row
//! SQLite insert transaction in the same kind of store.

use std::time::{Duration, Instant};

use engine::client::{BearerToken, Client, StoreLocation};
use example_notes::mutators::{AddNote, add_note};
use sqlx::{Connection, Row};

use crate::db::{BenchDb, SECRET, notes_server};

/// A notes server on this machine, for `db`.
async fn serve(db: &BenchDb) -> (String, tokio::task::JoinHandle<()>) {
    let (addr, task) = notes_server(engine::storage::postgres("unused").pool(db.pool.clone())).await;
    (format!("http://{addr}"), task)
}

/// Alice's list with `rows` notes, written directly in SQL: what is measured here is the client's
/// local store, not how the rows got to the server.
async fn seed(db: &BenchDb, rows: usize) {
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "INSERT INTO lists VALUES ('l1', 'alice', 'bench', false);
         INSERT INTO list_members VALUES ('l1', 'alice', 'alice', 'owner', true, 'alice', 'l1');
         INSERT INTO notes (id, owner_id, list_id, title, done, position)
           SELECT 'note-' || lpad(i::text, 8, '0'), 'alice', 'l1', 'note number ' || i, i % 3 = 0, i
           FROM generate_series(1, {rows}) AS i;"
    )))
    .execute(&db.pool)
    .await
    .expect("seed");
}

async fn client(url: &str, store: StoreLocation) -> Client {
    let token = engine::auth::issue_bearer_token("alice", "alice", SECRET, Duration::from_secs(3600)).unwrap();
    Client::builder(url)
        .app(example_notes::app())
        .auth(BearerToken::new(token))
        .store(store)
        .background(false)
        .build()
        .await
        .expect("the client builds")
}

fn temp_store(name: &str) -> (std::path::PathBuf, StoreLocation) {
    let dir = std::env::temp_dir().join(format!("engine-bench-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(name);
    (dir, StoreLocation::File(file))
}

/// Open a plain SQLite database like the client's store (WAL, synchronous FULL for a file).
async fn plain_sqlite(store: &StoreLocation) -> sqlx::SqliteConnection {
    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
    let options = match store {
        StoreLocation::File(path) => SqliteConnectOptions::new()
            .filename(path.with_extension("plain.db"))
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full),
        _ => SqliteConnectOptions::new().in_memory(true),
    };
    sqlx::SqliteConnection::connect_with(&options).await.expect("open SQLite")
}

pub(crate) async fn run(rows: usize, mutations: usize) {
    bootstrap(rows).await;
    mutate(mutations).await;
}

async fn bootstrap(rows: usize) {
    println!("\n## Client: bootstrap of {rows} notes into the local store\n");
    println!("| store | engine client rows/s | baseline (SELECT → SQLite INSERT) rows/s | ratio |");
    println!("|---|---:|---:|---:|");
    let db = BenchDb::new(8).await;
    let storage = db.storage(example_notes::app()).await;
    seed(&db, rows).await;
    db.settle(&storage).await;
    let (url, server) = serve(&db).await;
    for kind in ["memory", "file"] {
        let (dir, store) =
            if kind == "file" { temp_store("alice.db") } else { (std::env::temp_dir(), StoreLocation::Memory) };
        let alice = client(&url, store.clone()).await;
        let start = Instant::now();
        alice.pull().await.expect("the bootstrap pulls");
        let engine = start.elapsed();
        let count = alice.collection::<example_notes::Note>().all().await.unwrap().len();
        assert_eq!(count, rows, "the client holds every note");
        drop(alice);

        let mut sqlite = plain_sqlite(&store).await;
        sqlx::raw_sql("CREATE TABLE notes (id TEXT PRIMARY KEY, owner_id TEXT, list_id TEXT, title TEXT, done INTEGER, position INTEGER, body TEXT, deleted_at TEXT)")
            .execute(&mut sqlite)
            .await
            .unwrap();
        let start = Instant::now();
        let mut after = String::new();
        let mut copied = 0;
        loop {
            let page = sqlx::query(
                "SELECT id, owner_id, list_id, title, done, position, encode(body, 'base64'), deleted_at::text FROM notes
                 WHERE owner_id = 'alice' AND id > $1 ORDER BY id LIMIT 1000",
            )
            .bind(&after)
            .fetch_all(&db.pool)
            .await
            .unwrap();
            if page.is_empty() {
                break;
            }
            // One multi-row statement per page, as the client writes them.
            let sql = format!("INSERT INTO notes VALUES {}", vec!["(?, ?, ?, ?, ?, ?, ?, ?)"; page.len()].join(", "));
            let mut insert = sqlx::query(sqlx::AssertSqlSafe(sql));
            for row in &page {
                insert = insert
                    .bind(row.get::<String, _>(0))
                    .bind(row.get::<String, _>(1))
                    .bind(row.get::<String, _>(2))
                    .bind(row.get::<String, _>(3))
                    .bind(row.get::<bool, _>(4))
                    .bind(row.get::<i64, _>(5))
                    .bind(row.get::<String, _>(6))
                    .bind(row.get::<Option<String>, _>(7));
            }
            let mut tx = sqlite.begin().await.unwrap();
            insert.execute(&mut *tx).await.unwrap();
            tx.commit().await.unwrap();
            copied += page.len();
            after = page.last().unwrap().get::<String, _>(0);
        }
        let baseline = start.elapsed();
        assert_eq!(copied, rows);
        let per_second = |d: Duration| rows as f64 / d.as_secs_f64();
        println!(
            "| {kind} | {:.0} | {:.0} | {:.2} |",
            per_second(engine),
            per_second(baseline),
            baseline.as_secs_f64() / engine.as_secs_f64()
        );
        if kind == "file" {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
    server.abort();
    db.drop_database().await;
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[(((sorted.len() - 1) as f64) * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

async fn mutate(count: usize) {
    println!("\n## Client: local `mutate` latency ({count} `add_note`s, durable on return)\n");
    println!("| store | engine p50 | engine p99 | baseline (one SQLite insert transaction) p50 | p99 |");
    println!("|---|---:|---:|---:|---:|");
    let db = BenchDb::new(4).await;
    db.storage(example_notes::app()).await;
    seed(&db, 1).await;
    let (url, server) = serve(&db).await;
    for kind in ["memory", "file"] {
        let (dir, store) =
            if kind == "file" { temp_store("alice.db") } else { (std::env::temp_dir(), StoreLocation::Memory) };
        let alice = client(&url, store.clone()).await;
        alice.pull().await.unwrap();
        let mut engine = Vec::with_capacity(count);
        for i in 0..count {
            let args = AddNote { id: None, list_id: "l1".into(), title: format!("note {i}") };
            let start = Instant::now();
            alice.mutate::<add_note>(args).await.expect("queued");
            engine.push(start.elapsed());
        }
        drop(alice);
        let mut sqlite = plain_sqlite(&store).await;
        sqlx::raw_sql("CREATE TABLE notes (id TEXT PRIMARY KEY, list_id TEXT, title TEXT)")
            .execute(&mut sqlite)
            .await
            .unwrap();
        let mut baseline = Vec::with_capacity(count);
        for i in 0..count {
            let start = Instant::now();
            let mut tx = sqlite.begin().await.unwrap();
            sqlx::query("INSERT INTO notes VALUES (?, 'l1', ?)")
                .bind(uuid::Uuid::now_v7().to_string())
                .bind(format!("note {i}"))
                .execute(&mut *tx)
                .await
                .unwrap();
            tx.commit().await.unwrap();
            baseline.push(start.elapsed());
        }
        engine.sort();
        baseline.sort();
        println!(
            "| {kind} | {} | {} | {} | {} |",
            ms(percentile(&engine, 0.5)),
            ms(percentile(&engine, 0.99)),
            ms(percentile(&baseline, 0.5)),
            ms(percentile(&baseline, 0.99))
        );
        if kind == "file" {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
    server.abort();
    db.drop_database().await;
}
