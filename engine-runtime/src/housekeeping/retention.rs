//! Collection of what is kept only for a while (`docs/design.md` §1, §5, §12): tombstones, bucket
//! sets, mutation records, idle clients, finished jobs. One instance collects at a time, under a
//! session advisory lock on a connection of its own (closed afterwards, so a collection cut short
//! never leaves the lock behind on a pooled session); every step deletes at most a batch of rows
//! in a short transaction of its own. Each statement has the store's deadline for an answer
//! (`pg/deadline.rs`): a lost session ends the collection, and closes.

use std::time::Duration;

use sqlx::{Connection, PgConnection, PgPool};

use crate::error::{Error, Result};
use crate::pg::deadline::within;
use crate::pg::sql;

/// How often a server collects what its [`Retention`] no longer keeps (one instance at a time).
pub const COLLECTION_INTERVAL: Duration = Duration::from_secs(3600);

/// How long a store keeps what it no longer needs for long, and how much one step of collection
/// deletes (`docs/design.md`, retention).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Retention {
    /// Tombstones, and the bucket sets no cursor has named since (default 7 days): a client away
    /// longer starts its buckets afresh.
    pub tombstones: Duration,
    /// The records of mutations, and the rows of clients that have not pushed since (default 30
    /// days). A replay of a mutation whose record is gone is answered `duplicate` without its
    /// outcome, from the client's kept sequence (`docs/protocol.md#post-syncpush`).
    pub mutations: Duration,
    /// Jobs `done` (default 7 days).
    pub jobs: Duration,
    /// Jobs `dead` (default 30 days), kept longer for an operator to look at, retry or discard.
    pub dead_jobs: Duration,
    /// The most rows one step deletes (default 1,000): each step is a short transaction of its
    /// own, so collection never holds many locks or a long snapshot.
    pub batch: usize,
}

impl Default for Retention {
    fn default() -> Self {
        const DAY: u64 = 24 * 3600;
        Retention {
            tombstones: Duration::from_secs(7 * DAY),
            mutations: Duration::from_secs(30 * DAY),
            jobs: Duration::from_secs(7 * DAY),
            dead_jobs: Duration::from_secs(30 * DAY),
            batch: 1_000,
        }
    }
}

impl Retention {
    /// This retention with tombstones kept for `keep`.
    #[must_use]
    pub fn tombstones(mut self, keep: Duration) -> Self {
        self.tombstones = keep;
        self
    }

    /// This retention with mutation records and idle clients kept for `keep`.
    #[must_use]
    pub fn mutations(mut self, keep: Duration) -> Self {
        self.mutations = keep;
        self
    }

    /// This retention with jobs `done` kept for `keep`.
    #[must_use]
    pub fn jobs(mut self, keep: Duration) -> Self {
        self.jobs = keep;
        self
    }

    /// This retention with jobs `dead` kept for `keep`.
    #[must_use]
    pub fn dead_jobs(mut self, keep: Duration) -> Self {
        self.dead_jobs = keep;
        self
    }

    /// This retention deleting at most `rows` per step.
    #[must_use]
    pub fn batch(mut self, rows: usize) -> Self {
        self.batch = rows.max(1);
        self
    }
}

/// What one collection did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Collected {
    /// Another instance was collecting: this one did nothing.
    pub skipped: bool,
    /// Tombstones deleted.
    pub tombstones: u64,
    /// Mutation records deleted.
    pub mutations: u64,
    /// Client rows deleted.
    pub clients: u64,
    /// Jobs deleted (`done` and `dead`).
    pub jobs: u64,
    /// Bucket sets deleted.
    pub bucket_sets: u64,
    /// The steps (short transactions) it took.
    pub steps: u64,
}

/// The advisory lock key of collection (`engine` in ASCII, then 1).
const LOCK: i64 = 0x656e_6769_6e65_0001;

/// `now - keep`, saturating.
fn cutoff(keep: std::time::Duration) -> chrono::DateTime<chrono::Utc> {
    chrono::Utc::now() - chrono::Duration::from_std(keep).unwrap_or(chrono::Duration::MAX)
}

/// Collect what `retention` no longer keeps, unless another instance is collecting.
/// Postgres has `deadline` to answer each statement.
pub(crate) async fn collect(pool: &PgPool, retention: &Retention, deadline: Duration) -> Result<Collected> {
    let mut conn = pool.acquire().await?.detach();
    let locking = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)").bind(LOCK).fetch_one(&mut conn);
    let locked: bool = within(deadline, locking).await??;
    if !locked {
        let _ = within(deadline, conn.close()).await;
        return Ok(Collected { skipped: true, ..Collected::default() });
    }
    let collected = collect_locked(&mut conn, retention, deadline).await;
    // Unlocked before the session closes (its backend releases what it holds only as it exits,
    // after the close is sent); closing releases the lock whatever happened. A session that did
    // not answer is only dropped.
    if !matches!(collected, Err(Error::Unanswered { .. })) {
        let _ = within(deadline, sqlx::query("SELECT pg_advisory_unlock($1)").bind(LOCK).execute(&mut conn)).await;
        let _ = within(deadline, conn.close()).await;
    }
    collected
}

async fn collect_locked(conn: &mut PgConnection, retention: &Retention, deadline: Duration) -> Result<Collected> {
    let batch = i64::try_from(retention.batch.max(1)).unwrap_or(i64::MAX);
    let mut done = Collected::default();
    // Tombstones: first raise the tombstone horizon past the newest to go (a cursor below it
    // starts afresh), then delete up to it, so a pull never misses a tombstone it needed.
    let tombstone_cutoff = cutoff(retention.tombstones);
    let newest = sqlx::query_scalar("SELECT max(xid)::text FROM _engine_tombstones WHERE created_at < $1")
        .bind(tombstone_cutoff)
        .fetch_one(&mut *conn);
    let newest: Option<String> = within(deadline, newest).await??;
    if let Some(newest) = newest {
        let horizon = sql::xid(&newest)? + 1;
        let raise = sqlx::query(
            "INSERT INTO _engine_meta (key, value) VALUES ('tombstone_horizon', $1)
             ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value
             WHERE _engine_meta.value::numeric < EXCLUDED.value::numeric",
        )
        .bind(horizon.to_string())
        .execute(&mut *conn);
        within(deadline, raise).await??;
        done.tombstones = steps(conn, deadline, &mut done.steps, || {
            sqlx::query(
                "DELETE FROM _engine_tombstones WHERE id IN (
                   SELECT id FROM _engine_tombstones WHERE xid <= $1::text::xid8 LIMIT $2)",
            )
            .bind(newest.clone())
            .bind(batch)
        })
        .await?;
    }
    done.bucket_sets = steps(conn, deadline, &mut done.steps, || {
        sqlx::query(
            "DELETE FROM _engine_bucket_sets WHERE digest IN (
               SELECT digest FROM _engine_bucket_sets WHERE used_at < $1 LIMIT $2)",
        )
        .bind(tombstone_cutoff)
        .bind(batch)
    })
    .await?;
    // Mutation records: a replay of one of them is answered from the client's sequence. A
    // client's records are stamped in the order of their ids and go oldest first, and the client
    // notes how far they went: a replay below it was collected, one above it with no record
    // had its number used by another mutation.
    let mutation_cutoff = cutoff(retention.mutations);
    // The records to go are locked as they are chosen (one a push moves meanwhile is not chosen),
    // and exactly those are noted and deleted.
    done.mutations = steps(conn, deadline, &mut done.steps, || {
        sqlx::query(
            "WITH doomed AS (
               SELECT user_id, client_id, mutation_id FROM _engine_mutations WHERE applied_at < $1
               ORDER BY applied_at, mutation_id LIMIT $2 FOR UPDATE),
             noted AS (
               UPDATE _engine_clients c SET collected_to = greatest(c.collected_to, d.upto)
               FROM (SELECT user_id, client_id, max(mutation_id) AS upto FROM doomed GROUP BY user_id, client_id) AS d
               WHERE c.user_id = d.user_id AND c.client_id = d.client_id)
             DELETE FROM _engine_mutations m USING doomed d
             WHERE m.user_id = d.user_id AND m.client_id = d.client_id AND m.mutation_id = d.mutation_id",
        )
        .bind(mutation_cutoff)
        .bind(batch)
    })
    .await?;
    // Clients that have not pushed since, with no record left: such a client that comes back
    // starts its sequence again from 0 (its next push is told so and renumbers).
    done.clients = steps(conn, deadline, &mut done.steps, || {
        sqlx::query(
            "DELETE FROM _engine_clients WHERE (user_id, client_id) IN (
               SELECT c.user_id, c.client_id FROM _engine_clients c
               WHERE c.updated_at < $1 AND NOT EXISTS (
                 SELECT 1 FROM _engine_mutations m WHERE m.user_id = c.user_id AND m.client_id = c.client_id)
               LIMIT $2)",
        )
        .bind(mutation_cutoff)
        .bind(batch)
    })
    .await?;
    let (jobs, dead_jobs) = (cutoff(retention.jobs), cutoff(retention.dead_jobs));
    done.jobs = steps(conn, deadline, &mut done.steps, || {
        sqlx::query(
            "DELETE FROM _engine_jobs WHERE id IN (
               SELECT id FROM _engine_jobs
               WHERE (state = 'done' AND finished_at < $1) OR (state = 'dead' AND finished_at < $2)
               LIMIT $3)",
        )
        .bind(jobs)
        .bind(dead_jobs)
        .bind(batch)
    })
    .await?;
    Ok(done)
}

/// Run the batch `step` until it deletes nothing, each run a transaction of its own; returns the
/// rows deleted, counting the runs in `count`.
async fn steps<'q, F>(conn: &mut PgConnection, deadline: Duration, count: &mut u64, step: F) -> Result<u64>
where
    F: Fn() -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
{
    let mut deleted = 0;
    loop {
        let n = within(deadline, step().execute(&mut *conn)).await??.rows_affected();
        *count += 1;
        deleted += n;
        if n == 0 {
            return Ok(deleted);
        }
    }
}
