//! The outbox: mutations in order, durable from the moment `mutate` returns until a pull shows
//! their effects; and the quarantine, where the server's rejections wait to be retried or
//! discarded.

use engine_kernel::wire::{MutationRequest, MutationResult, MutationStatus, Problem};
use serde_json::Value;
use sqlx::SqliteConnection;

use super::schema::{meta, set_meta};
use crate::error::Result;

/// A mutation in the outbox.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) mutation_id: i64,
    pub(crate) client_mutation_id: String,
    pub(crate) name: String,
    pub(crate) args: String,
    pub(crate) hlc: String,
}

impl Entry {
    /// The entry as the push request carries it.
    pub(crate) fn request(&self) -> MutationRequest {
        MutationRequest {
            mutation_id: u64::try_from(self.mutation_id).unwrap_or(0),
            client_mutation_id: uuid::Uuid::parse_str(&self.client_mutation_id).unwrap_or_default(),
            name: self.name.clone(),
            args: serde_json::from_str(&self.args).unwrap_or(Value::Null),
            hlc: Some(self.hlc.clone()),
        }
    }
}

/// A mutation the server rejected.
#[derive(Debug, Clone, PartialEq)]
pub struct Quarantined {
    /// The id the client gave it.
    pub client_mutation_id: uuid::Uuid,
    /// The mutator.
    pub name: String,
    /// Its arguments.
    pub args: Value,
    /// Why the server rejected it.
    pub error: Problem,
}

/// The next mutation id, taken.
pub(crate) async fn take_mutation_id(conn: &mut SqliteConnection) -> Result<i64> {
    let taken: String = sqlx::query_scalar(
        "INSERT INTO _engine_meta (key, value) VALUES ('last_mutation_id', '1')
         ON CONFLICT (key) DO UPDATE SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) RETURNING value",
    )
    .fetch_one(&mut *conn)
    .await?;
    Ok(taken.parse().unwrap_or(0))
}

pub(crate) async fn append(conn: &mut SqliteConnection, entry: &Entry, now_ms: i64) -> Result<()> {
    sqlx::query(
        "INSERT INTO _engine_outbox (mutation_id, client_mutation_id, name, args, hlc, created_at) VALUES (?, ?, ?, ?, ?, ?)",
    )
    .bind(entry.mutation_id)
    .bind(&entry.client_mutation_id)
    .bind(&entry.name)
    .bind(&entry.args)
    .bind(&entry.hlc)
    .bind(now_ms)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The server's last mutation id as the client last saw it synced (`_engine_meta`).
pub(crate) async fn synced(conn: &mut SqliteConnection) -> Result<i64> {
    Ok(meta(conn, "synced_mutation_id").await?.and_then(|v| v.parse().ok()).unwrap_or(0))
}

/// A pull showed every mutation up to `synced` reflected, and `last` applied: entries the
/// server acknowledged up to there are done. An entry up to `synced` whose answer never came
/// (a lost response) is settled — in the base already, so left out of replays — and stays to be
/// pushed again under its id, so the server says whether it applied or rejected it. New
/// mutations are numbered after `last`. Returns how many entries were done.
pub(crate) async fn confirm(conn: &mut SqliteConnection, synced: u64, last: u64) -> Result<u64> {
    let synced = i64::try_from(synced).unwrap_or(i64::MAX).max(self::synced(conn).await?);
    set_meta(conn, "synced_mutation_id", &synced.to_string()).await?;
    let done = sqlx::query("DELETE FROM _engine_outbox WHERE pushed = 1 AND mutation_id <= ?")
        .bind(synced)
        .execute(&mut *conn)
        .await?
        .rows_affected();
    let last = i64::try_from(last).unwrap_or(i64::MAX);
    sqlx::query(
        "UPDATE _engine_meta SET value = CAST(? AS TEXT) WHERE key = 'last_mutation_id' AND CAST(value AS INTEGER) < ?",
    )
    .bind(last)
    .bind(last)
    .execute(&mut *conn)
    .await?;
    Ok(done)
}

/// Entries the server acknowledged beyond its `last` mutation id (it lost them: restored from a
/// backup, say) go back to be pushed: the server applies them again, or answers `duplicate`
/// when the pull was only older than the push. Returns how many.
pub(crate) async fn requeue_lost(conn: &mut SqliteConnection, last: u64) -> Result<u64> {
    let requeued = sqlx::query("UPDATE _engine_outbox SET pushed = 0 WHERE pushed = 1 AND mutation_id > ?")
        .bind(i64::try_from(last).unwrap_or(i64::MAX))
        .execute(&mut *conn)
        .await?
        .rows_affected();
    Ok(requeued)
}

/// Up to `limit` entries not yet acknowledged by a push, in order.
pub(crate) async fn unpushed(conn: &mut SqliteConnection, limit: u32) -> Result<Vec<Entry>> {
    let rows: Vec<(i64, String, String, String, String)> = sqlx::query_as(
        "SELECT mutation_id, client_mutation_id, name, args, hlc FROM _engine_outbox WHERE pushed = 0 ORDER BY mutation_id LIMIT ?",
    )
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(mutation_id, client_mutation_id, name, args, hlc)| Entry {
            mutation_id,
            client_mutation_id,
            name,
            args,
            hlc,
        })
        .collect())
}

/// How many entries wait for a pull to show them.
pub(crate) async fn pending_count(conn: &mut SqliteConnection) -> Result<u64> {
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM _engine_outbox").fetch_one(&mut *conn).await?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Record the server's results: applied and duplicate entries wait for a pull; rejected ones go
/// to the quarantine. Returns how many were quarantined.
pub(crate) async fn record(conn: &mut SqliteConnection, results: &[MutationResult], now_ms: i64) -> Result<usize> {
    let mut quarantined = 0;
    for result in results {
        let cmid = result.client_mutation_id.to_string();
        match result.status {
            MutationStatus::Applied | MutationStatus::Duplicate => {
                sqlx::query("UPDATE _engine_outbox SET pushed = 1, server_id = ? WHERE client_mutation_id = ?")
                    .bind(&result.server_id)
                    .bind(&cmid)
                    .execute(&mut *conn)
                    .await?;
                // Settled before its answer came: a pull has shown it already.
                let synced = synced(conn).await?;
                sqlx::query("DELETE FROM _engine_outbox WHERE client_mutation_id = ? AND mutation_id <= ?")
                    .bind(&cmid)
                    .bind(synced)
                    .execute(&mut *conn)
                    .await?;
            }
            MutationStatus::Rejected => {
                let error = result.error.clone().unwrap_or_else(|| {
                    Problem::new(engine_kernel::ErrorCode::MutatorFailed, "rejected without a reason")
                });
                let moved = sqlx::query(
                    "INSERT OR REPLACE INTO _engine_quarantine (client_mutation_id, mutation_id, name, args, hlc, error, quarantined_at)
                     SELECT client_mutation_id, mutation_id, name, args, hlc, ?, ? FROM _engine_outbox WHERE client_mutation_id = ?",
                )
                .bind(serde_json::to_string(&error).expect("problems serialize"))
                .bind(now_ms)
                .bind(&cmid)
                .execute(&mut *conn)
                .await?
                .rows_affected();
                sqlx::query("DELETE FROM _engine_outbox WHERE client_mutation_id = ?")
                    .bind(&cmid)
                    .execute(&mut *conn)
                    .await?;
                quarantined += usize::try_from(moved).unwrap_or(0);
            }
        }
    }
    Ok(quarantined)
}

/// The server's sequence for this client is at `last` while the outbox goes further (the
/// server lost mutations, or the store was copied): entries it acknowledged up to `last` stay;
/// every other entry is numbered on from `last`, in order, to be pushed again.
pub(crate) async fn renumber(conn: &mut SqliteConnection, last: u64) -> Result<()> {
    let last = i64::try_from(last).unwrap_or(i64::MAX);
    let moving: Vec<i64> = sqlx::query_scalar(
        "SELECT mutation_id FROM _engine_outbox WHERE NOT (pushed = 1 AND mutation_id <= ?) ORDER BY mutation_id",
    )
    .bind(last)
    .fetch_all(&mut *conn)
    .await?;
    // Out of the way first, so no new id meets an old one.
    sqlx::query("UPDATE _engine_outbox SET mutation_id = -mutation_id WHERE NOT (pushed = 1 AND mutation_id <= ?)")
        .bind(last)
        .execute(&mut *conn)
        .await?;
    let mut next = last;
    for id in moving {
        next += 1;
        sqlx::query("UPDATE _engine_outbox SET mutation_id = ?, pushed = 0 WHERE mutation_id = ?")
            .bind(next)
            .bind(-id)
            .execute(&mut *conn)
            .await?;
    }
    set_meta(conn, "last_mutation_id", &next.to_string()).await?;
    // What the server now holds of this client is what it says.
    let synced = last.min(synced(conn).await?);
    set_meta(conn, "synced_mutation_id", &synced.to_string()).await?;
    Ok(())
}

/// Every quarantined mutation, oldest first.
pub(crate) async fn quarantined(conn: &mut SqliteConnection) -> Result<Vec<Quarantined>> {
    let rows: Vec<(String, String, String, String)> = sqlx::query_as(
        "SELECT client_mutation_id, name, args, error FROM _engine_quarantine ORDER BY quarantined_at, mutation_id",
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(cmid, name, args, error)| Quarantined {
            client_mutation_id: uuid::Uuid::parse_str(&cmid).unwrap_or_default(),
            name,
            args: serde_json::from_str(&args).unwrap_or(Value::Null),
            error: serde_json::from_str(&error)
                .unwrap_or_else(|_| Problem::new(engine_kernel::ErrorCode::Internal, "unreadable error")),
        })
        .collect())
}

/// Take a quarantined mutation out: its name, arguments and clock, if it was there.
pub(crate) async fn unquarantine(
    conn: &mut SqliteConnection,
    client_mutation_id: uuid::Uuid,
) -> Result<Option<(String, String)>> {
    let cmid = client_mutation_id.to_string();
    let entry: Option<(String, String)> =
        sqlx::query_as("SELECT name, args FROM _engine_quarantine WHERE client_mutation_id = ?")
            .bind(&cmid)
            .fetch_optional(&mut *conn)
            .await?;
    sqlx::query("DELETE FROM _engine_quarantine WHERE client_mutation_id = ?").bind(&cmid).execute(&mut *conn).await?;
    Ok(entry)
}
