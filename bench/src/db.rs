//! A fresh database per benchmark, dropped afterwards: a Postgres database ([`BenchDb`]) or a
//! SQLite file ([`BenchFile`]).

use std::path::PathBuf;
use std::sync::Arc;

use engine::server::Storage;
use engine::server::storage::PostgresStorage;
use sqlx::postgres::PgPoolOptions;
use sqlx::{Connection, Executor, PgPool};

/// The store a benchmark's server runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Backend {
    /// A database of the Postgres server `ENGINE_BENCH_DATABASE_URL` names.
    Postgres,
    /// A SQLite file (WAL, `synchronous = FULL`) under `ENGINE_BENCH_DIR`.
    Sqlite,
}

/// The Postgres server benchmarks run on. Over loopback without TLS by default: a URL without
/// `sslmode` gets TLS whenever the server offers it, and its cost is not the engine's.
fn server_url() -> String {
    std::env::var("ENGINE_BENCH_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable".into())
}

pub(crate) struct BenchDb {
    name: String,
    pub(crate) url: String,
    pub(crate) pool: PgPool,
}

impl BenchDb {
    pub(crate) async fn new(connections: u32) -> BenchDb {
        let name = format!("engine_bench_{}", uuid::Uuid::new_v4().simple());
        let mut admin = sqlx::PgConnection::connect(&server_url()).await.expect("connect to Postgres");
        admin.execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).await.expect("create the database");
        let server = server_url();
        let (base, query) =
            server.split_once('?').map_or((server.as_str(), String::new()), |(b, q)| (b, format!("?{q}")));
        let url = match base.rsplit_once('/') {
            Some((prefix, _)) => format!("{prefix}/{name}{query}"),
            None => panic!("the server URL names a database"),
        };
        let pool = PgPoolOptions::new().max_connections(connections).connect(&url).await.expect("connect");
        BenchDb { name, url, pool }
    }

    pub(crate) async fn storage(&self, app: engine::App) -> Arc<PostgresStorage> {
        let storage = Arc::new(PostgresStorage::new(self.pool.clone(), Arc::new(app)));
        storage.provision().await.expect("provision");
        storage
    }

    /// Wait until pulls see every commit so far.
    pub(crate) async fn settle(&self, storage: &PostgresStorage) {
        let target = storage.next_xid().await.unwrap();
        while storage.horizon().await.unwrap() < target {
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    }

    /// Drop the database, unless `ENGINE_BENCH_KEEP` is set: then it stays for inspection
    /// (`EXPLAIN` on the data as the benchmark wrote it) and its name is printed.
    pub(crate) async fn drop_database(self) {
        self.pool.close().await;
        if std::env::var_os("ENGINE_BENCH_KEEP").is_some() {
            eprintln!("(kept the database {})", self.name);
            return;
        }
        let mut admin = sqlx::PgConnection::connect(&server_url()).await.expect("connect to Postgres");
        admin.execute(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name))).await.ok();
    }
}

/// A fresh SQLite file in a directory of its own (under `ENGINE_BENCH_DIR`, default the
/// system's temporary directory), removed afterwards unless `ENGINE_BENCH_KEEP` is set.
pub(crate) struct BenchFile {
    dir: PathBuf,
    pub(crate) path: PathBuf,
    /// The `sqlite://` URL of the file, as `DATABASE_URL` names it to the server process.
    pub(crate) url: String,
}

impl BenchFile {
    pub(crate) fn new() -> BenchFile {
        let parent = std::env::var_os("ENGINE_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
        let dir = parent.join(format!("engine_bench_{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("create the benchmark's directory");
        let path = dir.join("notes.db");
        let url = format!("sqlite://{}", path.display());
        BenchFile { dir, path, url }
    }

    /// A connection of this process to the file, opened as the server's store opens it: WAL,
    /// `synchronous = FULL` (the store's default durability), the same wait on a busy lock, and
    /// rows handed from the connection's thread a page at a time (the store's readers do so).
    pub(crate) async fn connect(&self) -> sqlx::SqliteConnection {
        use sqlx::ConnectOptions;
        use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
        SqliteConnectOptions::new()
            .filename(&self.path)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(std::time::Duration::from_secs(10))
            .row_buffer_size(1000)
            .connect()
            .await
            .expect("open the SQLite file")
    }

    /// Remove the file, unless `ENGINE_BENCH_KEEP` is set: then its path is printed.
    pub(crate) fn remove(self) {
        if std::env::var_os("ENGINE_BENCH_KEEP").is_some() {
            eprintln!("(kept the SQLite file {})", self.path.display());
            return;
        }
        std::fs::remove_dir_all(&self.dir).ok();
    }
}

/// The signing secret of the benchmarks' servers.
pub(crate) const SECRET: &str = "the benchmarks' HS256 secret, 32 bytes";

/// A notes server with `storage`, no rate limit, served on an ephemeral port of this machine:
/// its address and a handle on the task serving it.
pub(crate) async fn notes_server(
    storage: impl engine::storage::OpenStorage,
) -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    notes_server_with(storage, |builder| builder).await
}

/// [`notes_server`], its builder finished by `configure` (a realtime adapter, say).
pub(crate) async fn notes_server_with(
    storage: impl engine::storage::OpenStorage,
    configure: impl FnOnce(engine::server::ServerBuilder) -> engine::server::ServerBuilder,
) -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    let builder = engine::Server::builder()
        .app(example_notes::app())
        .storage(storage)
        .auth(engine::auth::BearerTokenAuth::new(SECRET))
        .limits(engine::limits::Limits::default().rate(0, 0));
    let server = configure(builder).build().await.expect("the server builds");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("an address");
    (addr, tokio::spawn(async move { server.serve(listener).await.expect("serve") }))
}
