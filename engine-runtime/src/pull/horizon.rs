//! The safe horizon (`docs/design.md` §1): every transaction below it that could write this
//! database has finished, so a pull sees every commit below it, and a commit is visible to pulls
//! once the horizon has passed its transaction id. Each process keeps a [`Floor`] under the
//! horizons it reads, so they never step back.

use std::sync::atomic::{AtomicU64, Ordering};

use sqlx::PgConnection;

use crate::core::Core;
use crate::error::Result;
use crate::pg::sql;

/// The safe horizon of the transaction's snapshot: the oldest transaction still running that may
/// write this database, or the snapshot's `xmax` when there is none. Every transaction below it
/// has finished, so rows below it never appear later.
///
/// The snapshot's `xmin` alone would do, but it counts transactions of every database of the
/// cluster; one proven to belong to another database (its backend is connected there, or it is a
/// transaction prepared there) can never write these tables and does not hold pulls back. One
/// that cannot be placed (its backend already gone, or hidden by privileges) counts.
pub(crate) const HORIZON: &str = "
    WITH snap AS (SELECT pg_current_snapshot() AS s)
    SELECT coalesce(
        (SELECT min(x) FROM snap, pg_snapshot_xip(snap.s) AS x
         WHERE NOT EXISTS (
                 SELECT 1 FROM pg_stat_activity a
                 WHERE a.backend_xid IS NOT NULL AND a.datname IS DISTINCT FROM current_database()
                   AND a.backend_xid::text::bigint = (x::text::numeric % 4294967296)::bigint)
           AND NOT EXISTS (
                 SELECT 1 FROM pg_prepared_xacts p
                 WHERE p.database IS DISTINCT FROM current_database()
                   AND p.transaction::text::bigint = (x::text::numeric % 4294967296)::bigint)),
        (SELECT pg_snapshot_xmax(s) FROM snap))::text";

/// The highest horizon this process has read.
#[derive(Debug, Default)]
pub(crate) struct Floor(AtomicU64);

impl Floor {
    /// A horizon a transaction begun after this call may use even if its own reading is lower:
    /// the highest this process has read so far. Read it *before* the transaction's first
    /// statement.
    ///
    /// Why that is safe: the floor came from a snapshot taken before the new one. A transaction
    /// below the floor was, in that snapshot, finished (so it is finished in the new one too) or
    /// proven to belong to another database (so it cannot hide rows of this one). A reading can
    /// be lower than the floor when a transaction of another database can no longer be placed;
    /// without the floor, horizons would step back and a commit a client was told about could
    /// vanish from its next pull. A value read *after* the first statement would not be safe: it
    /// may come from a later snapshot, and this one would not see the transactions in between.
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    /// Raise the floor to `horizon`, a reading just taken.
    pub(crate) fn raise(&self, horizon: u64) {
        self.0.fetch_max(horizon, Ordering::AcqRel);
    }
}

/// The safe horizon now, read by a statement of its own: outside a transaction block a statement
/// is its own transaction, and takes its snapshot as the first statement of one does, in one
/// round trip where `BEGIN`, the reading and `COMMIT` took three (the hub reads it before each
/// ping goes out).
pub(crate) async fn horizon(core: &Core, floor: &Floor) -> Result<u64> {
    let at_least = floor.get();
    core.on_session(async |conn| read_horizon(conn, floor, at_least).await).await
}

/// The horizon (at least `at_least`, read from `floor` before the transaction began) for a transaction whose snapshot this statement fixes (its
/// first).
pub(crate) async fn read_horizon(conn: &mut PgConnection, floor: &Floor, at_least: u64) -> Result<u64> {
    let text: String = sqlx::query_scalar(HORIZON).fetch_one(conn).await?;
    let read: u64 = sql::xid(&text)?;
    let horizon = read.max(at_least);
    floor.raise(horizon);
    Ok(horizon)
}

/// The next transaction id to be assigned: once the horizon reaches it, everything committed
/// before this call is visible to pulls.
pub(crate) async fn next_xid(core: &Core) -> Result<u64> {
    let next: String = core
        .on_session(async |conn| {
            sqlx::query_scalar("SELECT pg_snapshot_xmax(pg_current_snapshot())::text").fetch_one(conn).await
        })
        .await?;
    sql::xid(&next)
}
