//! The pool a store opens, and creating a database that is missing.

use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use super::deadline;
use super::sql;
use super::timeouts::Timeouts;
use crate::error::{Error, Result};

/// The pool's default size: 4 connections per CPU the process may use, 8 at least and 32 at
/// most. More sessions than Postgres has cores to run them only queue inside Postgres, where
/// they contend for its locks: on the push benchmark's two cores, 8 connections served 7-10%
/// more pushes a second than 16.
pub(crate) fn default_pool_size() -> u32 {
    let cpus = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
    u32::try_from(cpus.saturating_mul(4)).unwrap_or(u32::MAX).clamp(8, 32)
}

/// How long a pooled session may sit idle before it is checked with a round trip before it is
/// lent: a session in steady use is not (a push of one mutation is two statements, and a check
/// would be a third round trip).
pub(crate) const CHECK_AFTER_IDLE: Duration = Duration::from_secs(5);

/// How long that check may take: a quarter of the pool's 10 s to lend a session. A session that
/// does not answer in time is closed and the pool opens a new one for the request, which is
/// served; each session cut while idle costs the request that finds it this long.
const IDLE_CHECK: Duration = Duration::from_millis(2500);

/// A pool of at most `max_connections` sessions on `url`, each under `timeouts`.
pub(crate) async fn open_pool(url: &str, max_connections: u32, timeouts: &Timeouts) -> Result<PgPool> {
    let options: PgConnectOptions = url.parse().map_err(|e| Error::config_from("not a Postgres URL", e))?;
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(10))
        // sqlx checks a session with a round trip each time it lends it; a session that served a
        // request a moment ago is checked by its next statement (a lost one fails that request as
        // transient and is not lent again).
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move { Ok(meta.idle_for <= CHECK_AFTER_IDLE || deadline::answers(conn, IDLE_CHECK).await) })
        })
        .connect_with(timeouts.apply(options.clone()))
        .await
        .map_err(|e| unreachable(&options, e))
}

/// The oldest Postgres the engine runs on (`CREATE OR REPLACE TRIGGER`, `xid8`).
pub(crate) const MINIMUM_VERSION: u32 = 14;

/// `postgres://user@host:port/database`, without the password: the server `options` name, as an
/// error may show it.
pub(crate) fn describe(options: &PgConnectOptions) -> String {
    let database = options.get_database().map(|d| format!("/{d}")).unwrap_or_default();
    format!("postgres://{}@{}:{}{database}", options.get_username(), options.get_host(), options.get_port())
}

/// The error of a server that cannot be reached: where it was looked for, the version needed and
/// how to get one, with the driver's error as its cause.
pub(crate) fn unreachable(options: &PgConnectOptions, cause: sqlx::Error) -> Error {
    Error::config_from(
        format!(
            "cannot connect to Postgres at {} (the engine needs Postgres {MINIMUM_VERSION} or later; \
             to run one: `sudo apt install postgresql`, or `docker run -d -p 5432:5432 \
             -e POSTGRES_HOST_AUTH_METHOD=trust postgres:17`)",
            describe(options)
        ),
        cause,
    )
}

/// Create the database `url` names when it does not exist (connecting to the server's
/// `postgres` database to do so). Returns whether it was created.
pub async fn create_database_if_missing(url: &str) -> Result<bool> {
    use sqlx::ConnectOptions;
    let options: PgConnectOptions = url.parse().map_err(|e| Error::config_from("not a Postgres URL", e))?;
    let Some(name) = options.get_database().map(str::to_owned) else { return Ok(false) };
    let mut admin = options.clone().database("postgres").connect().await.map_err(|e| unreachable(&options, e))?;
    let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
        .bind(&name)
        .fetch_one(&mut admin)
        .await?;
    if exists {
        return Ok(false);
    }
    let create = format!("CREATE DATABASE {}", sql::ident(&name));
    match sqlx::query(sqlx::AssertSqlSafe(create)).execute(&mut admin).await {
        Ok(_) => Ok(true),
        // Another process created it meanwhile.
        Err(sqlx::Error::Database(db)) if db.code().as_deref() == Some("42P04") => Ok(false),
        Err(e) => Err(Error::config_from(format!("cannot create database `{name}`"), e)),
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn a_server_is_described_without_its_password() {
        let options: PgConnectOptions = "postgres://app:s3cret@db.example:6543/notes".parse().unwrap();
        assert_eq!(describe(&options), "postgres://app@db.example:6543/notes");
    }

    #[tokio::test]
    async fn an_unreachable_database_says_why() {
        let err = create_database_if_missing("postgres://postgres@127.0.0.1:1/none").await.unwrap_err();
        assert!(matches!(err, Error::Config { .. }), "{err}");
        let text = err.to_string();
        assert!(text.contains("postgres://postgres@127.0.0.1:1/none"), "names the server it tried: {text}");
        assert!(text.contains("Postgres 14 or later") && text.contains("apt install postgresql"), "{text}");
        assert!(
            err.source().and_then(|s| s.downcast_ref::<sqlx::Error>()).is_some(),
            "the driver's error is kept: {err:?}"
        );
    }
}
