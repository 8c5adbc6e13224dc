//! A database of its own for a test of the store, on the Postgres server
//! `ENGINE_TEST_DATABASE_URL` names (default: the machine's), dropped at the end.

use sqlx::{Connection, Executor, PgConnection, PgPool};

pub(crate) struct TestDb {
    server: String,
    name: String,
    /// The database's URL.
    pub(crate) url: String,
    pub(crate) pool: PgPool,
}

impl TestDb {
    pub(crate) async fn new() -> TestDb {
        let server = std::env::var("ENGINE_TEST_DATABASE_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable".into());
        let name = format!("engine_test_{}", uuid::Uuid::new_v4().simple());
        let mut admin = PgConnection::connect(&server).await.expect("connect to the test server");
        admin.execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).await.expect("create the database");
        let (base, query) = server.split_once('?').map_or((server.as_str(), ""), |(b, q)| (b, q));
        let url = format!("{}/{name}?{query}", base.rsplit_once('/').map_or(base, |(prefix, _)| prefix));
        let pool = PgPool::connect(&url).await.expect("connect to the test database");
        TestDb { server, name, url, pool }
    }

    pub(crate) async fn drop(self) {
        self.pool.close().await;
        let mut admin = PgConnection::connect(&self.server).await.expect("connect to the test server");
        let drop = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        admin.execute(sqlx::AssertSqlSafe(drop)).await.expect("drop the database");
    }
}
