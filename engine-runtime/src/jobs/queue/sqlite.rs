//! The job queue on SQLite: the same table and states as on Postgres, times in milliseconds.
//! One process serves the file, so a claim needs no `SKIP LOCKED` (the writer takes one claim at a
//! time), and new jobs are signalled in the process ([`Wakeups`]) instead of by `NOTIFY`.

use std::sync::Mutex;
use std::time::Duration;

use engine_kernel::JobRequest;
use serde_json::Value;
use sqlx::{SqliteConnection, SqlitePool};

use super::super::{ClaimedJob, JobCounts, JobEnd};
use super::{JobRecord, JobRow, counted};
use crate::error::Result;
use crate::sqlite::now_ms;

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// Enqueue `job` outside any mutation; its id.
pub(crate) async fn insert(conn: &mut SqliteConnection, job: &JobRequest) -> Result<i64> {
    let now = now_ms();
    Ok(sqlx::query_scalar(
        "INSERT INTO _engine_jobs (name, payload, run_at, created_at) VALUES (?, ?, ?, ?) RETURNING id",
    )
    .bind(&job.name)
    .bind(job.payload.to_string())
    .bind(now.saturating_add(millis(job.delay)))
    .bind(now)
    .fetch_one(&mut *conn)
    .await?)
}

/// Lease up to `limit` due jobs named in `names` for `lease`.
pub(crate) async fn claim(
    conn: &mut SqliteConnection,
    names: &[String],
    limit: usize,
    lease: Duration,
) -> Result<Vec<ClaimedJob>> {
    let now = now_ms();
    let rows: Vec<(i64, String, String, i64, Option<String>)> = sqlx::query_as(
        "UPDATE _engine_jobs SET state = 'running', attempts = attempts + 1, leased_until = ?1
         WHERE id IN (
           SELECT id FROM _engine_jobs
           WHERE name IN (SELECT value FROM json_each(?2))
             AND ((state = 'queued' AND run_at <= ?3) OR (state = 'running' AND leased_until < ?3))
           ORDER BY run_at, id LIMIT ?4)
         RETURNING id, name, payload, attempts, user_id",
    )
    .bind(now.saturating_add(millis(lease)))
    .bind(serde_json::to_string(names).expect("strings serialize"))
    .bind(now)
    .bind(i64::try_from(limit).unwrap_or(i64::MAX))
    .fetch_all(&mut *conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(id, name, payload, attempts, user_id)| ClaimedJob {
            id,
            name,
            payload: serde_json::from_str(&payload).unwrap_or(Value::Null),
            attempt: u32::try_from(attempts).unwrap_or(0),
            user_id,
        })
        .collect())
}

/// Record how `job`'s run ended; `false` when its lease was lost.
pub(crate) async fn finish(conn: &mut SqliteConnection, job: &ClaimedJob, end: &JobEnd) -> Result<bool> {
    let now = now_ms();
    let attempt = i64::from(job.attempt);
    // The lease is still the job's while it is running and has had no claim since.
    let query = match end {
        JobEnd::Done => sqlx::query(
            "UPDATE _engine_jobs SET state = 'done', finished_at = ?3, leased_until = NULL, last_error = NULL
             WHERE id = ?1 AND attempts = ?2 AND state = 'running'",
        )
        .bind(job.id)
        .bind(attempt)
        .bind(now),
        JobEnd::Retry { after, error } => sqlx::query(
            "UPDATE _engine_jobs SET state = 'queued', run_at = ?3, leased_until = NULL, last_error = ?4
             WHERE id = ?1 AND attempts = ?2 AND state = 'running'",
        )
        .bind(job.id)
        .bind(attempt)
        .bind(now.saturating_add(millis(*after)))
        .bind(error.clone()),
        JobEnd::Dead { error } => sqlx::query(
            "UPDATE _engine_jobs SET state = 'dead', finished_at = ?3, leased_until = NULL, last_error = ?4
             WHERE id = ?1 AND attempts = ?2 AND state = 'running'",
        )
        .bind(job.id)
        .bind(attempt)
        .bind(now)
        .bind(error.clone()),
    };
    Ok(query.execute(&mut *conn).await?.rows_affected() == 1)
}

/// How many jobs are in each state.
pub(crate) async fn counts(conn: &mut SqliteConnection) -> Result<JobCounts> {
    let rows: Vec<(String, i64)> =
        sqlx::query_as("SELECT state, count(*) FROM _engine_jobs GROUP BY state").fetch_all(&mut *conn).await?;
    counted(rows)
}

/// Up to `limit` jobs, in `state` when given, newest first ([`JobAdmin::list`](super::JobAdmin::list)).
pub(crate) async fn list(pool: &SqlitePool, state: Option<&str>, limit: i64) -> Result<Vec<JobRecord>> {
    let rows: Vec<JobRow<i64>> = sqlx::query_as(
        "SELECT id, name, state, attempts, run_at, finished_at, last_error, user_id FROM _engine_jobs
         WHERE ?1 IS NULL OR state = ?1 ORDER BY id DESC LIMIT ?2",
    )
    .bind(state)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    let time = |ms: i64| chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default();
    Ok(rows.into_iter().map(|row| JobRecord::of(row, time)).collect())
}

/// Queue the dead job `id` to run now, its attempts counted afresh: the rows changed.
pub(crate) async fn retry(pool: &SqlitePool, id: i64) -> Result<u64> {
    let done = sqlx::query(
        "UPDATE _engine_jobs SET state = 'queued', run_at = ?2, attempts = 0, finished_at = NULL
         WHERE id = ?1 AND state = 'dead'",
    )
    .bind(id)
    .bind(now_ms())
    .execute(pool)
    .await?;
    Ok(done.rows_affected())
}

/// The workers of this process waiting for new jobs: each is signalled when jobs may have been
/// enqueued (a wake-up already waiting absorbs the next).
#[derive(Debug, Default)]
pub(crate) struct Wakeups(Mutex<Vec<tokio::sync::mpsc::Sender<()>>>);

impl Wakeups {
    /// A new worker's wake-ups.
    pub(crate) fn subscribe(&self) -> tokio::sync::mpsc::Receiver<()> {
        let (wake, wakeups) = tokio::sync::mpsc::channel(1);
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(wake);
        wakeups
    }

    /// Tell every worker still listening that jobs may have been enqueued.
    pub(crate) fn wake(&self) {
        let mut workers = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        workers.retain(|wake| !wake.is_closed());
        for wake in workers.iter() {
            let _ = wake.try_send(());
        }
    }
}
