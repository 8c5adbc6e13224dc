//! A fresh database per test on the machine's Postgres, dropped when the test ends.
//!
//! The server is `ENGINE_TEST_DATABASE_URL` (any database on it; the default is
//! `postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable`: loopback needs no TLS, which a
//! URL without `sslmode` gets whenever the server offers it). Each [`TestDb`] creates `engine_test_<uuid>`
//! and drops it, connections and all, on drop.

use std::sync::Arc;

use engine::server::Storage;
use engine::server::storage::PostgresStorage;
use sqlx::postgres::PgPoolOptions;
use sqlx::{Executor, PgPool};

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
    pub(crate) url: String,
    pub(crate) pool: PgPool,
}

impl TestDb {
    /// A new, empty database.
    pub(crate) async fn new() -> TestDb {
        let name = format!("engine_test_{}", uuid::Uuid::new_v4().simple());
        let mut admin = sqlx::PgConnection::connect_with_url(&server_url()).await;
        admin.execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).await.expect("create the test database");
        Self::adopt(&name).await
    }

    /// The database `name`, created by other means, to be dropped like any test database.
    pub(crate) async fn adopt(name: &str) -> TestDb {
        super::logs::keep_call_sites_asking();
        let url = database_url(name);
        let pool = PgPoolOptions::new().max_connections(20).connect(&url).await.expect("connect to the database");
        TestDb { name: name.to_owned(), url, pool }
    }

    /// Wait until every commit so far is visible to pulls of `storage`.
    pub(crate) async fn settle(&self, storage: &PostgresStorage) {
        let target = storage.next_xid().await.unwrap();
        for _ in 0..1000 {
            if storage.horizon().await.unwrap() >= target {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        panic!("the horizon did not pass transaction {target} in 5 s");
    }

    /// The notes app's store on this database, provisioned.
    pub(crate) async fn notes(&self) -> Arc<PostgresStorage> {
        let storage = Arc::new(PostgresStorage::new(self.pool.clone(), Arc::new(example_notes::app())));
        storage.provision().await.expect("provision the notes app");
        storage
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
