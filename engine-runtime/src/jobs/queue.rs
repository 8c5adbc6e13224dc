//! The job queue on Postgres: the `_engine_jobs` table, leased with `FOR UPDATE SKIP LOCKED`,
//! with `attempts` as the fencing token of a lease, and `_engine_jobs` notifications (sent by a
//! statement trigger when a transaction that enqueued commits) to wake workers.

use std::time::Duration;

use engine_kernel::{BoxFuture, JobRequest};
use sqlx::PgConnection;

use super::{ClaimedJob, JobCounts, JobEnd, JobQueue};
use crate::core::Core;
use crate::error::{Error, Result};
use crate::pg::listener;

/// The channel the trigger on `_engine_jobs` notifies.
const CHANNEL: &str = "_engine_jobs";

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Insert `job` on `conn` (a mutation's transaction, or a transaction of its own); returns its id.
pub(crate) async fn insert(conn: &mut PgConnection, job: &JobRequest, user_id: Option<&str>) -> sqlx::Result<i64> {
    sqlx::query_scalar(
        "INSERT INTO _engine_jobs (name, payload, run_at, user_id)
         VALUES ($1, $2, now() + $3 * interval '1 millisecond', $4) RETURNING id",
    )
    .bind(&job.name)
    .bind(&job.payload)
    .bind(millis(job.delay))
    .bind(user_id)
    .fetch_one(conn)
    .await
}

impl JobQueue for Core {
    fn enqueue_job(&self, job: JobRequest) -> BoxFuture<'_, Result<i64>> {
        Box::pin(async move { self.on_session(async |conn| insert(conn, &job, None).await).await })
    }

    fn claim_jobs<'a>(
        &'a self,
        names: &'a [String],
        limit: usize,
        lease: Duration,
    ) -> BoxFuture<'a, Result<Vec<ClaimedJob>>> {
        Box::pin(async move {
            let claiming = sqlx::query_as(
                "UPDATE _engine_jobs AS j
                 SET state = 'running', attempts = j.attempts + 1,
                     leased_until = now() + $3 * interval '1 millisecond'
                 WHERE j.id IN (
                   SELECT id FROM _engine_jobs
                   WHERE name = ANY($1)
                     AND ((state = 'queued' AND run_at <= now()) OR (state = 'running' AND leased_until < now()))
                   ORDER BY run_at, id
                   LIMIT $2
                   FOR UPDATE SKIP LOCKED)
                 RETURNING j.id, j.name, j.payload, j.attempts, j.user_id",
            )
            .bind(names)
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .bind(millis(lease));
            let rows: Vec<(i64, String, serde_json::Value, i32, Option<String>)> =
                self.on_session(async |conn| claiming.fetch_all(conn).await).await?;
            Ok(rows
                .into_iter()
                .map(|(id, name, payload, attempts, user_id)| ClaimedJob {
                    id,
                    name,
                    payload,
                    attempt: u32::try_from(attempts).unwrap_or(0),
                    user_id,
                })
                .collect())
        })
    }

    fn finish_job<'a>(&'a self, job: &'a ClaimedJob, end: JobEnd) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            let attempt = i32::try_from(job.attempt).unwrap_or(i32::MAX);
            // The lease is still the job's while it is running and has had no claim since.
            let sql = match &end {
                JobEnd::Done => {
                    "UPDATE _engine_jobs SET state = 'done', finished_at = now(), leased_until = NULL, last_error = NULL
                     WHERE id = $1 AND attempts = $2 AND state = 'running'"
                }
                JobEnd::Retry { .. } => {
                    "UPDATE _engine_jobs
                     SET state = 'queued', run_at = now() + $3 * interval '1 millisecond', leased_until = NULL, last_error = $4
                     WHERE id = $1 AND attempts = $2 AND state = 'running'"
                }
                JobEnd::Dead { .. } => {
                    "UPDATE _engine_jobs SET state = 'dead', finished_at = now(), leased_until = NULL, last_error = $3
                     WHERE id = $1 AND attempts = $2 AND state = 'running'"
                }
            };
            let mut query = sqlx::query(sql).bind(job.id).bind(attempt);
            match &end {
                JobEnd::Done => {}
                JobEnd::Retry { after, error } => query = query.bind(millis(*after)).bind(error),
                JobEnd::Dead { error } => query = query.bind(error),
            }
            Ok(self.on_session(async |conn| query.execute(conn).await).await?.rows_affected() == 1)
        })
    }

    fn job_wakeups(&self) -> BoxFuture<'_, Result<tokio::sync::mpsc::Receiver<()>>> {
        Box::pin(async move {
            let (wake, wakeups) = tokio::sync::mpsc::channel(1);
            let watching = wake.clone();
            // A session of its own, not one of the pool's: it listens for as long as the server
            // runs.
            let options = (*self.pool.connect_options()).clone();
            let listening = listener::listen(options, CHANNEL, self.lost_after, move |_| {
                // A notification, or a new session after a lost one (which may have missed
                // some): look either way. Full means a wake-up is already waiting: this one is
                // coalesced.
                let _ = wake.try_send(());
            })
            .await?;
            // The listener ends once nobody takes the wake-ups.
            tokio::spawn(async move {
                watching.closed().await;
                listening.abort();
            });
            Ok(wakeups)
        })
    }

    fn job_counts(&self) -> BoxFuture<'_, Result<JobCounts>> {
        Box::pin(async move { self.on_session(async |conn| counts(conn).await).await })
    }
}

/// How many jobs are in each state.
pub(crate) async fn counts(conn: &mut PgConnection) -> Result<JobCounts> {
    let rows: Vec<(String, i64)> =
        sqlx::query_as("SELECT state, count(*) FROM _engine_jobs GROUP BY state").fetch_all(conn).await?;
    counted(rows)
}

/// The counts of `rows`, each a state and how many jobs are in it.
fn counted(rows: Vec<(String, i64)>) -> Result<JobCounts> {
    let mut counts = JobCounts::default();
    for (state, n) in rows {
        let n = u64::try_from(n).unwrap_or(0);
        match state.as_str() {
            "queued" => counts.queued = n,
            "running" => counts.running = n,
            "done" => counts.done = n,
            "dead" => counts.dead = n,
            other => return Err(Error::internal(format!("a job in the unknown state `{other}`"))),
        }
    }
    Ok(counts)
}

/// A job as an operator sees it ([`JobAdmin::list`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobRecord {
    /// The job's id.
    pub id: i64,
    /// The job's name.
    pub name: String,
    /// `queued`, `running`, `done` or `dead`.
    pub state: String,
    /// The runs it has had.
    pub attempts: i32,
    /// When it is due (queued), or was last due.
    pub run_at: chrono::DateTime<chrono::Utc>,
    /// When it ended (`done` or `dead`).
    pub finished_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Why its last run failed.
    pub last_error: Option<String>,
    /// The user whose mutation enqueued it.
    pub user_id: Option<String>,
}

/// A row of `_engine_jobs` as an operator reads it (id, name, state, attempts, due, finished,
/// last error, user), its times of type `T`.
pub(crate) type JobRow<T> = (i64, String, String, i32, T, Option<T>, Option<String>, Option<String>);

impl JobRecord {
    /// The record of `row`, its times read by `time`.
    pub(crate) fn of<T>(row: JobRow<T>, time: impl Fn(T) -> chrono::DateTime<chrono::Utc>) -> Self {
        let (id, name, state, attempts, run_at, finished_at, last_error, user_id) = row;
        JobRecord {
            id,
            name,
            state,
            attempts,
            run_at: time(run_at),
            finished_at: finished_at.map(&time),
            last_error,
            user_id,
        }
    }
}

/// An operator's hands on the job queue of a database (`engine jobs`): list the jobs, run a
/// dead one again, discard one that is not running. On SQLite it works beside a running server:
/// each change is one statement, which SQLite's locks order with the server's writes.
#[derive(Debug, Clone)]
pub struct JobAdmin {
    queue: AdminQueue,
}

/// The database a [`JobAdmin`] reaches.
#[derive(Debug, Clone)]
enum AdminQueue {
    Postgres(sqlx::PgPool),
    Sqlite(sqlx::SqlitePool),
}

/// The job states there are.
const STATES: [&str; 4] = ["queued", "running", "done", "dead"];

impl JobAdmin {
    /// The queue of the database at `url`: Postgres, or a SQLite file (`sqlite://path`).
    pub async fn connect(url: &str) -> Result<Self> {
        if let Some(path) = crate::sqlite::sqlite_path(url) {
            if !path.exists() {
                return Err(Error::config(format!("no SQLite database at {}", path.display())));
            }
            let options =
                sqlx::sqlite::SqliteConnectOptions::new().filename(&path).busy_timeout(Duration::from_secs(10));
            let pool =
                sqlx::sqlite::SqlitePoolOptions::new().max_connections(1).connect_with(options).await.map_err(|e| {
                    Error::config_from(format!("cannot open the SQLite database {}", path.display()), e)
                })?;
            return Ok(JobAdmin { queue: AdminQueue::Sqlite(pool) });
        }
        let options: sqlx::postgres::PgConnectOptions =
            url.parse().map_err(|e| Error::config_from("not a Postgres URL", e))?;
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await
            .map_err(|e| Error::config_from("cannot connect to Postgres", e))?;
        Ok(JobAdmin { queue: AdminQueue::Postgres(pool) })
    }

    /// The queue of the database `pool` reaches.
    pub fn new(pool: sqlx::PgPool) -> Self {
        JobAdmin { queue: AdminQueue::Postgres(pool) }
    }

    /// Up to `limit` jobs, in `state` when given, newest first.
    pub async fn list(&self, state: Option<&str>, limit: usize) -> Result<Vec<JobRecord>> {
        if let Some(state) = state.filter(|s| !STATES.contains(s)) {
            return Err(Error::config(format!("no job state `{state}`: queued, running, done or dead")));
        }
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let pool = match &self.queue {
            AdminQueue::Postgres(pool) => pool,
            AdminQueue::Sqlite(pool) => return sqlite::list(pool, state, limit).await,
        };
        let rows: Vec<JobRow<chrono::DateTime<chrono::Utc>>> = sqlx::query_as(
            "SELECT id, name, state, attempts, run_at, finished_at, last_error, user_id FROM _engine_jobs
             WHERE $1::text IS NULL OR state = $1 ORDER BY id DESC LIMIT $2",
        )
        .bind(state)
        .bind(limit)
        .fetch_all(pool)
        .await?;
        Ok(rows.into_iter().map(|row| JobRecord::of(row, |at| at)).collect())
    }

    /// Queue the `dead` job `id` to run again now, with its attempts counted afresh; `false`
    /// when there is no such dead job.
    pub async fn retry(&self, id: i64) -> Result<bool> {
        let done = match &self.queue {
            AdminQueue::Postgres(pool) => sqlx::query(
                "UPDATE _engine_jobs SET state = 'queued', run_at = now(), attempts = 0, finished_at = NULL
                     WHERE id = $1 AND state = 'dead'",
            )
            .bind(id)
            .execute(pool)
            .await?
            .rows_affected(),
            AdminQueue::Sqlite(pool) => sqlite::retry(pool, id).await?,
        };
        Ok(done == 1)
    }

    /// Delete job `id` unless a worker is running it; `false` when there is no such job or it is
    /// running.
    pub async fn discard(&self, id: i64) -> Result<bool> {
        let sql = "DELETE FROM _engine_jobs WHERE id = $1 AND state <> 'running'";
        let done = match &self.queue {
            AdminQueue::Postgres(pool) => sqlx::query(sql).bind(id).execute(pool).await?.rows_affected(),
            AdminQueue::Sqlite(pool) => sqlx::query(sql).bind(id).execute(pool).await?.rows_affected(),
        };
        Ok(done == 1)
    }
}

pub(crate) mod sqlite;
