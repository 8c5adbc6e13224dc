//! A fresh database per test, on the backend of the run, dropped when the test ends.
//!
//! `ENGINE_TEST_BACKEND` picks the backend (`scripts/test` runs the suite once on each):
//! - `postgres` (the default): the server `ENGINE_TEST_DATABASE_URL` names (any database on it;
//!   the default is `postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable`: loopback
//!   needs no TLS, which a URL without `sslmode` gets whenever the server offers it). Each
//!   [`TestDb`] creates `engine_test_<uuid>` and drops it, connections and all, on drop.
//! - `sqlite`: a file `engine_test_<uuid>.db` in the temporary directory, removed on drop.
//!
//! A test reads and writes the database behind the engine's back through [`TestDb::pool`], an
//! [`AnyPool`] that speaks to either backend (plain SQL that both accept). A test of a Postgres
//! mechanism (the xid horizon, LISTEN/NOTIFY, row locks, several servers on one database) asks
//! for [`TestDb::pg`] and is skipped on SQLite with its reason by [`postgres_only`].

use std::path::PathBuf;
use std::sync::{Arc, Once};

use engine::App;
use engine::server::Storage;
use engine::server::storage::{OpenStorage, PostgresStorage, StoreLimits};
use sqlx::any::AnyPoolOptions;
use sqlx::postgres::PgPoolOptions;
use sqlx::{AnyPool, Executor, PgPool};

/// The storage backend a run of the suite tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    Postgres,
    Sqlite,
}

/// The backend of this run, from `ENGINE_TEST_BACKEND`.
pub(crate) fn backend() -> Backend {
    match std::env::var("ENGINE_TEST_BACKEND").as_deref() {
        Err(_) | Ok("" | "postgres") => Backend::Postgres,
        Ok("sqlite") => Backend::Sqlite,
        Ok(other) => panic!("ENGINE_TEST_BACKEND is `{other}`: it takes `postgres` or `sqlite`"),
    }
}

/// Whether a test of a Postgres mechanism should stop here: on SQLite it says so, with `why`,
/// and answers true.
pub(crate) fn postgres_only(why: &str) -> bool {
    let skip = backend() == Backend::Sqlite;
    if skip {
        eprintln!("skipped on SQLite: {why}");
    }
    skip
}

/// An SQL expression of the time `interval` (`2 days`, `90 seconds`) ago, as the backend
/// stores the engine's times (SQLite: milliseconds since the epoch).
pub(crate) fn ago(interval: &str) -> String {
    match backend() {
        Backend::Postgres => format!("now() - interval '{interval}'"),
        Backend::Sqlite => format!("CAST(unixepoch('now', '-{interval}', 'subsec') * 1000 AS INTEGER)"),
    }
}

/// The Postgres server tests run against.
pub(crate) fn server_url() -> String {
    std::env::var("ENGINE_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable".into())
}

/// The URL of database `name` on the test server.
pub(crate) fn database_url(name: &str) -> String {
    let server = server_url();
    let (base, query) = match server.split_once('?') {
        Some((b, q)) => (b.to_owned(), format!("?{q}")),
        None => (server.clone(), String::new()),
    };
    let prefix = base.rsplit_once('/').map_or(base.as_str(), |(p, _)| p);
    format!("{prefix}/{name}{query}")
}

/// A database that exists for one test.
pub(crate) struct TestDb {
    pub(crate) name: String,
    /// What a server's `DATABASE_URL` would be: `postgres://…` or `sqlite://…`.
    pub(crate) url: String,
    /// Plain SQL on the database, on either backend.
    pub(crate) pool: AnyPool,
    /// The Postgres pool, on Postgres.
    pg: Option<PgPool>,
    /// The file, on SQLite.
    file: Option<PathBuf>,
}

impl TestDb {
    /// A new, empty database on the run's backend.
    pub(crate) async fn new() -> TestDb {
        Self::new_on(backend()).await
    }

    /// A new, empty database on `backend`.
    pub(crate) async fn new_on(backend: Backend) -> TestDb {
        let name = format!("engine_test_{}", uuid::Uuid::new_v4().simple());
        match backend {
            Backend::Postgres => {
                let mut admin = sqlx::PgConnection::connect_with_url(&server_url()).await;
                admin
                    .execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                    .await
                    .expect("create the test database");
                Self::adopt(&name).await
            }
            Backend::Sqlite => {
                super::logs::keep_call_sites_asking();
                let file = std::env::temp_dir().join(format!("{name}.db"));
                let url = format!("sqlite://{}", file.display());
                let pool = any_pool(&format!("{url}?mode=rwc")).await;
                TestDb { name, url, pool, pg: None, file: Some(file) }
            }
        }
    }

    /// The Postgres database `name`, created by other means, to be dropped like any test
    /// database.
    pub(crate) async fn adopt(name: &str) -> TestDb {
        super::logs::keep_call_sites_asking();
        let url = database_url(name);
        let pg = PgPoolOptions::new().max_connections(20).connect(&url).await.expect("connect to the database");
        let pool = any_pool(&url).await;
        TestDb { name: name.to_owned(), url, pool, pg: Some(pg), file: None }
    }

    /// The Postgres pool: for a test of a Postgres mechanism, which [`postgres_only`] skips on
    /// SQLite.
    pub(crate) fn pg(&self) -> &PgPool {
        self.pg.as_ref().expect("a test of a Postgres mechanism runs on Postgres only: skip it with `postgres_only`")
    }

    /// The backend's store of this database for a server builder, with `limits`.
    pub(crate) fn store(&self, limits: StoreLimits) -> TestStore {
        match (&self.pg, &self.file) {
            (Some(pool), _) => {
                TestStore::Postgres(engine::storage::postgres("unused").pool(pool.clone()).limits(limits))
            }
            (None, Some(file)) => TestStore::Sqlite(engine::storage::sqlite(file).limits(limits)),
            (None, None) => unreachable!("a test database is on one backend"),
        }
    }

    /// A store of `app` on this database, provisioned. On SQLite one store at a time may hold
    /// the file: drop it before a server opens it.
    pub(crate) async fn open(&self, app: App) -> Arc<dyn Storage> {
        self.open_with(app, StoreLimits::default()).await
    }

    /// A store of `app` with `limits` on this database, provisioned (one at a time on SQLite).
    pub(crate) async fn open_with(&self, app: App, limits: StoreLimits) -> Arc<dyn Storage> {
        let storage = self.connect(app, limits).await;
        storage.provision().await.expect("provision the app");
        storage
    }

    /// A store of `app` with `limits` on this database, as it is (one at a time on SQLite).
    pub(crate) async fn connect(&self, app: App, limits: StoreLimits) -> Arc<dyn Storage> {
        Box::new(self.store(limits)).open(Arc::new(app)).await.expect("open the store")
    }

    /// The notes app's store on this database, provisioned.
    pub(crate) async fn notes(&self) -> Arc<dyn Storage> {
        self.open(example_notes::app()).await
    }

    /// The notes app's store on this Postgres database, provisioned: for a test of a Postgres
    /// mechanism.
    pub(crate) async fn notes_pg(&self) -> Arc<PostgresStorage> {
        let storage = Arc::new(PostgresStorage::new(self.pg().clone(), Arc::new(example_notes::app())));
        storage.provision().await.expect("provision the notes app");
        storage
    }

    /// The stored state of note `id`'s body (SQLite keeps it as base64 text).
    pub(crate) async fn note_body(&self, id: &str) -> Vec<u8> {
        use base64::Engine;
        match backend() {
            Backend::Postgres => {
                sqlx::query_scalar("SELECT body FROM notes WHERE id = $1").bind(id).fetch_one(&self.pool).await.unwrap()
            }
            Backend::Sqlite => {
                let text: String = sqlx::query_scalar("SELECT body FROM notes WHERE id = $1")
                    .bind(id)
                    .fetch_one(&self.pool)
                    .await
                    .unwrap();
                base64::engine::general_purpose::STANDARD.decode(text).expect("a body in base64")
            }
        }
    }

    /// Change table `table` of this SQLite file as an operator changes what SQLite's
    /// `ALTER TABLE` cannot (`lang_altertable.html#otheralter`): a new table made by `edit` of
    /// its definition (the part from its first parenthesis), the rows copied, the old table
    /// dropped and the new one renamed, then its indexes and triggers made again.
    pub(crate) async fn rebuild_sqlite_table(&self, table: &str, edit: impl FnOnce(&str) -> String) {
        use sqlx::Connection;
        let file = self.file.as_ref().expect("a SQLite test database");
        let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", file.display())).await.unwrap();
        let mut tx = conn.begin().await.unwrap();
        let definition: String = sqlx::query_scalar("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?")
            .bind(table)
            .fetch_one(&mut *tx)
            .await
            .unwrap();
        let others: Vec<String> = sqlx::query_scalar(
            "SELECT sql FROM sqlite_schema WHERE tbl_name = ? AND type IN ('index', 'trigger') AND sql IS NOT NULL",
        )
        .bind(table)
        .fetch_all(&mut *tx)
        .await
        .unwrap();
        let columns: Vec<String> = sqlx::query_scalar("SELECT '\"' || name || '\"' FROM pragma_table_info(?)")
            .bind(table)
            .fetch_all(&mut *tx)
            .await
            .unwrap();
        let columns = columns.join(", ");
        let body = &definition[definition.find('(').expect("a table definition has columns")..];
        let statements = [
            format!("CREATE TABLE \"_rebuilt\" {}", edit(body)),
            format!("INSERT INTO \"_rebuilt\" ({columns}) SELECT {columns} FROM \"{table}\""),
            format!("DROP TABLE \"{table}\""),
            format!("ALTER TABLE \"_rebuilt\" RENAME TO \"{table}\""),
        ];
        for sql in statements.into_iter().chain(others) {
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut *tx).await.unwrap();
        }
        tx.commit().await.unwrap();
        conn.close().await.unwrap();
    }

    /// Wait until no server holds this database: on SQLite, until its file's lock (one process
    /// serves a file) is free, so that another server may open it. A server's store lets go of
    /// the file once its last request and background task have ended.
    pub(crate) async fn released(&self) {
        let Some(file) = &self.file else { return };
        for _ in 0..1000 {
            let handle = std::fs::File::open(file).expect("the test database's file");
            if handle.try_lock().is_ok() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("a server still holds {} after 10 s", file.display());
    }

    /// Wait until every commit so far is visible to pulls of `storage`. On SQLite every
    /// committed change is (docs/design.md §11): nothing is waited for.
    pub(crate) async fn settle(&self, storage: &dyn Storage) {
        if self.pg.is_some() {
            settle(self.pg(), storage).await;
        }
    }
}

/// Wait until the horizon of `storage` passes the next transaction id of `pool`.
pub(crate) async fn settle(pool: &PgPool, storage: &dyn Storage) {
    let target: i64 = sqlx::query_scalar("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint")
        .fetch_one(pool)
        .await
        .expect("read the next transaction id");
    let target = u64::try_from(target).unwrap_or_default();
    for _ in 0..1000 {
        if storage.horizon().await.unwrap() >= target {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    panic!("the horizon did not pass transaction {target} in 5 s");
}

/// A pool of plain SQL on `url`.
async fn any_pool(url: &str) -> AnyPool {
    static DRIVERS: Once = Once::new();
    DRIVERS.call_once(sqlx::any::install_default_drivers);
    AnyPoolOptions::new().max_connections(4).connect(url).await.expect("connect to the test database")
}

/// The store of a test database, on its backend: what `ServerBuilder::storage` takes.
pub(crate) enum TestStore {
    Postgres(engine::storage::Postgres),
    Sqlite(engine::storage::Sqlite),
}

impl TestStore {
    /// With `n` readers on SQLite (the store's places are its readers and its writer); as it is
    /// on Postgres.
    pub(crate) fn readers(self, n: u32) -> TestStore {
        match self {
            TestStore::Sqlite(store) => TestStore::Sqlite(store.readers(n)),
            postgres => postgres,
        }
    }
}

impl OpenStorage for TestStore {
    fn open(
        self: Box<Self>,
        app: Arc<App>,
    ) -> futures_util::future::BoxFuture<'static, engine::server::Result<Arc<dyn Storage>>> {
        match *self {
            TestStore::Postgres(store) => Box::new(store).open(app),
            TestStore::Sqlite(store) => Box::new(store).open(app),
        }
    }
}

trait ConnectWithUrl {
    async fn connect_with_url(url: &str) -> sqlx::PgConnection;
}

impl ConnectWithUrl for sqlx::PgConnection {
    async fn connect_with_url(url: &str) -> sqlx::PgConnection {
        use sqlx::Connection;
        sqlx::PgConnection::connect(url).await.unwrap_or_else(|e| panic!("connect to the test server {url}: {e}"))
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some(file) = &self.file {
            for suffix in ["", "-wal", "-shm"] {
                let mut path = file.clone().into_os_string();
                path.push(suffix);
                let _ = std::fs::remove_file(path);
            }
            return;
        }
        let name = self.name.clone();
        // Async work cannot run in `drop`; a short-lived runtime on its own thread can.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
            runtime.block_on(async move {
                let mut admin = sqlx::PgConnection::connect_with_url(&server_url()).await;
                let _ =
                    admin.execute(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))).await;
            });
        })
        .join();
    }
}
