//! Provisioning's lock waits, bounded and watched: each statement runs with `lock_timeout` set to
//! [`ProvisionLocks::wait`] and is tried [`ProvisionLocks::attempts`] times; while it waits, a
//! second session reads who blocks it (`pg_blocking_pids`), so the error of a wait that gives up
//! names the blocking query.

use std::time::Duration;

use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection};

use super::Step;
use crate::error::{Error, Result};

/// How long provisioning waits for a table lock, and how many times it tries, before it gives up
/// with an error naming what holds the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProvisionLocks {
    /// The longest one attempt waits for a lock (default 2 s).
    pub wait: Duration,
    /// How many attempts (default 5), a little apart.
    pub attempts: u32,
}

impl Default for ProvisionLocks {
    fn default() -> Self {
        ProvisionLocks { wait: Duration::from_secs(2), attempts: 5 }
    }
}

impl ProvisionLocks {
    /// Wait at most `wait` per attempt, `attempts` times.
    pub fn new(wait: Duration, attempts: u32) -> Self {
        ProvisionLocks { wait: wait.max(Duration::from_millis(1)), attempts: attempts.max(1) }
    }
}

/// `CREATE [UNIQUE] INDEX CONCURRENTLY IF NOT EXISTS …`.
pub(super) fn concurrently(sql: &str) -> String {
    sql.replacen("INDEX IF NOT EXISTS", "INDEX CONCURRENTLY IF NOT EXISTS", 1)
}

pub(super) fn first_line(sql: &str) -> &str {
    sql.lines().next().unwrap_or_default()
}

/// How a statement's lock waits are bounded and watched.
pub(super) struct Watch<'a> {
    pub(super) options: &'a PgConnectOptions,
    /// The provisioning session's backend.
    pub(super) pid: i32,
    pub(super) locks: ProvisionLocks,
}

/// Why a statement failed.
pub(super) enum StepFailure {
    /// Its lock wait gave up; who held the lock, as seen while it waited.
    Lock {
        statement: String,
        blockers: Vec<String>,
    },
    Other(Error),
}

impl From<sqlx::Error> for StepFailure {
    fn from(e: sqlx::Error) -> Self {
        StepFailure::Other(e.into())
    }
}

/// After attempt `tries` failed: `Ok` when it is to be tried again (after a pause), the error to
/// return otherwise.
pub(super) async fn again(watch: &Watch<'_>, tries: u32, failure: StepFailure) -> Result<()> {
    let (statement, blockers) = match failure {
        StepFailure::Other(e) => return Err(e),
        StepFailure::Lock { statement, blockers } => (statement, blockers),
    };
    if tries < watch.locks.attempts {
        tracing::warn!(
            statement = first_line(&statement),
            blockers = blockers.join("; "),
            "provisioning: a lock wait gave up; trying again"
        );
        tokio::time::sleep(Duration::from_millis(100 * u64::from(tries))).await;
        return Ok(());
    }
    let blockers = if blockers.is_empty() {
        "another session (gone by the time it was looked up)".to_owned()
    } else {
        blockers.join("; ")
    };
    Err(Error::provision(format!(
        "`{}` waited {tries} times {:?} for a lock and gave up; it was blocked by {blockers}: end that transaction, or provision when it is done",
        first_line(&statement),
        watch.locks.wait
    )))
}

pub(super) async fn run_transaction(
    conn: &mut PgConnection,
    watch: &Watch<'_>,
    steps: &[&Step],
) -> std::result::Result<(), StepFailure> {
    let mut tx = conn.begin().await?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("SET LOCAL lock_timeout = '{}ms'", watch.locks.wait.as_millis())))
        .execute(&mut *tx)
        .await?;
    for step in steps {
        watched(&mut tx, watch, &step.sql).await?;
    }
    tx.commit().await?;
    Ok(())
}

pub(super) async fn run_outside(
    conn: &mut PgConnection,
    watch: &Watch<'_>,
    statements: &[&str],
) -> std::result::Result<(), StepFailure> {
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("SET lock_timeout = '{}ms'", watch.locks.wait.as_millis())))
        .execute(&mut *conn)
        .await?;
    let mut result = Ok(());
    for statement in statements {
        result = watched(&mut *conn, watch, statement).await;
        if result.is_err() {
            break;
        }
    }
    sqlx::raw_sql("SET lock_timeout = 0").execute(&mut *conn).await?;
    result
}

/// Run one statement; if it is still waiting halfway through its lock timeout, read from another
/// session who blocks it.
async fn watched(conn: &mut PgConnection, watch: &Watch<'_>, sql: &str) -> std::result::Result<(), StepFailure> {
    let run = sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(conn);
    tokio::pin!(run);
    let mut blockers = Vec::new();
    let result = tokio::select! {
        result = &mut run => result,
        () = tokio::time::sleep(watch.locks.wait / 2) => {
            blockers = blocking(watch).await;
            run.await
        }
    };
    match result {
        Ok(_) => Ok(()),
        // A lock wait that gave up, or a deadlock this statement lost (an app's transaction
        // taking two tables' locks in the other order): tried again.
        Err(sqlx::Error::Database(db)) if matches!(db.code().as_deref(), Some("55P03" | "40P01")) => {
            Err(StepFailure::Lock { statement: sql.to_owned(), blockers })
        }
        Err(e) => Err(StepFailure::Other(Error::provision_from(format!("`{}…` failed", first_line(sql)), e))),
    }
}

/// The sessions that block the provisioning session now, with what they run.
async fn blocking(watch: &Watch<'_>) -> Vec<String> {
    let read = async {
        let mut conn = PgConnection::connect_with(watch.options).await?;
        let rows: Vec<(i32, String, String, f64)> = sqlx::query_as(
            "SELECT pid, coalesce(state, ''), coalesce(query, ''), coalesce(extract(epoch FROM now() - xact_start)::float8, 0)
             FROM pg_stat_activity WHERE pid = ANY(pg_blocking_pids($1)) ORDER BY pid",
        )
        .bind(watch.pid)
        .fetch_all(&mut conn)
        .await?;
        let _ = conn.close().await;
        Ok::<_, sqlx::Error>(rows)
    };
    match read.await {
        Ok(rows) => rows
            .into_iter()
            .map(|(pid, state, query, age)| {
                let query: String = query.split_whitespace().collect::<Vec<_>>().join(" ");
                let query: String = query.chars().take(200).collect();
                format!("pid {pid} ({state}, in a transaction for {age:.0} s) running `{query}`")
            })
            .collect(),
        Err(e) => vec![format!("a session that could not be looked up ({e})")],
    }
}
