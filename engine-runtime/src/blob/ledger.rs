//! The record of uploads, `_engine_blobs`, in the app's database whatever the blob store
//! (`docs/design.md` §13): one row per blob and uploader, holding the blob's size, whether the
//! uploader's bytes are stored (`stored`), the upload ticket open for it (`ticket`,
//! `expires_at`), whether a body is being received under that ticket (`receiving_until`), and
//! since when no row names the blob (`unused_since`). Times are milliseconds since the epoch.
//!
//! A row is written when a ticket is handed out, before any byte moves: the quota and the cap on
//! uploads in flight count it from then on (a reservation), and the upload marks it `stored`
//! or it is dropped once its ticket has long expired. The statements are the same on Postgres
//! and SQLite (`$n` placeholders, which sqlx numbers on both); on Postgres a ticket is handed
//! out under a transaction lock on its uploader, on SQLite under the store's one writer. A
//! ticket is one of the server's hot paths: its transaction takes both its locks in one
//! statement and decides and writes the reservation in another, and a statement that stands
//! alone runs without a transaction around it (`at_once!`).
//!
//! The blob's lock ([`key_lock`]) is a transaction lock on Postgres; on SQLite it is a lock of
//! the process (`sqlite::NamedLocks`), taken before the writer and held without it, so that
//! collection deletes a blob's bytes from its store (a network call) under the blob's lock while
//! the store goes on writing.

use std::sync::Arc;

use engine_kernel::BlobKey;
use sqlx::Connection;

use crate::error::Result;
use crate::mutation::key_lock;
use crate::sqlite::{Db, Held};

/// The record of uploads of a store: what a blob store that receives uploads itself is given
/// ([`BlobStore::routes`](super::BlobStore::routes)).
#[derive(Clone)]
pub struct Ledger {
    pub(crate) inner: Inner,
    /// How long a store that receives uploads itself reads one body.
    pub(crate) upload_timeout: std::time::Duration,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger").field("upload_timeout", &self.upload_timeout).finish_non_exhaustive()
    }
}

/// Where `_engine_blobs` is.
#[derive(Clone)]
pub(crate) enum Inner {
    Postgres(sqlx::PgPool),
    Sqlite(Arc<Db>),
}

/// Run `$body` in a transaction on `$conn`, a Postgres or a SQLite connection (the same
/// statements for both).
macro_rules! in_tx {
    ($ledger:expr, |$conn:ident| $body:expr) => {
        match &$ledger.inner {
            Inner::Postgres(pool) => {
                let mut tx = pool.begin().await?;
                let $conn = &mut *tx;
                let out = $body;
                tx.commit().await?;
                out
            }
            Inner::Sqlite(db) => {
                let mut writer = db.writer().await;
                let mut tx = writer.begin().await?;
                let $conn = &mut *tx;
                let out = $body;
                tx.commit().await?;
                out
            }
        }
    };
}

/// Run `$body`, one statement, on `$conn`, a Postgres or a SQLite connection: a statement is a
/// transaction of its own, so it goes without `BEGIN` and `COMMIT` (two round trips to
/// Postgres).
macro_rules! at_once {
    ($ledger:expr, |$conn:ident| $body:expr) => {
        match &$ledger.inner {
            Inner::Postgres(pool) => {
                let mut session = pool.acquire().await?;
                let $conn = &mut *session;
                $body
            }
            Inner::Sqlite(db) => {
                let mut writer = db.writer().await;
                let $conn = &mut *writer;
                $body
            }
        }
    };
}

/// The uploaders of blob `$key` when it is to be deleted ([`Ledger::delete_unused`]): each of
/// its uploads stored and noted unused since `$unused_before` or earlier, and no row naming it in
/// `$columns`; read on `$conn`, a Postgres or a SQLite connection. Evaluates to the uploaders,
/// or `None` when the blob is kept.
macro_rules! unused_uploaders {
    ($conn:ident, $key:expr, $columns:expr, $unused_before:expr) => {
        'decide: {
            let uploads: Vec<(String, bool, Option<i64>)> =
                sqlx::query_as("SELECT uploader, stored, unused_since FROM _engine_blobs WHERE blob_key = $1")
                    .bind($key.as_str())
                    .fetch_all(&mut *$conn)
                    .await?;
            let since = uploads.iter().filter_map(|(_, _, since)| *since).min();
            let all_stored = uploads.iter().all(|(_, stored, _)| *stored);
            if !all_stored || since.is_none_or(|since| since > $unused_before) {
                break 'decide None;
            }
            for (table, column) in $columns {
                let named = sqlx::query(named_sql(table, column)).bind($key.as_str()).fetch_optional(&mut *$conn);
                if named.await?.is_some() {
                    break 'decide None;
                }
            }
            Some(uploads.into_iter().map(|(uploader, _, _)| uploader).collect::<Vec<String>>())
        }
    };
}

/// Every upload of blob `$key` in the ledger, stored or reserved, read on `$conn`, a Postgres or
/// a SQLite connection.
macro_rules! uploads_of {
    ($conn:ident, $key:expr) => {
        sqlx::query_scalar::<_, String>("SELECT uploader FROM _engine_blobs WHERE blob_key = $1")
            .bind($key)
            .fetch_all(&mut *$conn)
            .await?
    };
}

/// Forget blob `$key`'s uploads, on `$conn`, a Postgres or a SQLite connection.
macro_rules! forget {
    ($conn:ident, $key:expr) => {
        sqlx::query("DELETE FROM _engine_blobs WHERE blob_key = $1").bind($key.as_str()).execute(&mut *$conn).await?
    };
}

/// Taking transaction locks, on either backend: on SQLite the one writer holds every lock but
/// the blob's, which is taken before the transaction ([`Ledger::hold_key`]).
pub(crate) trait Locks {
    /// Wait for each of `locks`, a name and whether it is taken shared, until the transaction
    /// ends: in order, in one statement.
    async fn lock(&mut self, locks: &[(&str, bool)]) -> Result<()>;
}

impl Locks for sqlx::PgConnection {
    async fn lock(&mut self, locks: &[(&str, bool)]) -> Result<()> {
        let mut sql = sqlx::QueryBuilder::new("SELECT ");
        let mut each = sql.separated(", ");
        for (name, shared) in locks {
            each.push(match shared {
                true => "pg_advisory_xact_lock_shared(hashtextextended(",
                false => "pg_advisory_xact_lock(hashtextextended(",
            });
            each.push_bind_unseparated(*name).push_unseparated(", 0))");
        }
        sql.build().execute(self).await?;
        Ok(())
    }
}

impl Locks for sqlx::SqliteConnection {
    async fn lock(&mut self, _locks: &[(&str, bool)]) -> Result<()> {
        Ok(())
    }
}

/// What [`Ledger::reserve`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reserved {
    /// The ticket is recorded.
    Done,
    /// The uploader's blobs and reservations take `used` bytes: these do not fit.
    OverQuota { used: u64 },
    /// The uploader has `in_flight` uploads reserved and not stored.
    TooMany { in_flight: u64 },
}

/// An upload reserved and not stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pending {
    pub(crate) key: BlobKey,
    pub(crate) uploader: String,
    pub(crate) size: u64,
}

/// A blob as collection sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub(crate) key: String,
    /// Since when no row names it, once a collection saw that.
    pub(crate) unused_since: Option<i64>,
    /// An upload of it is reserved and not stored: it is left alone.
    pub(crate) pending: bool,
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

impl Ledger {
    pub(crate) fn new(inner: Inner) -> Self {
        Ledger { inner, upload_timeout: std::time::Duration::from_secs(600) }
    }

    /// On SQLite, the lock of blob `key` ([`key_lock`]) held in the process, `shared` or alone,
    /// taken before the writer; none on Postgres, whose transaction takes it (`Locks`).
    async fn hold_key(&self, key: &str, shared: bool) -> Option<Held<'_>> {
        match &self.inner {
            Inner::Postgres(_) => None,
            Inner::Sqlite(db) => Some(db.locks.lock(&key_lock(key), shared).await),
        }
    }

    /// Record `ticket` for the upload of `size` bytes of `key` by `uploader`, until `expires_at`:
    /// refused when the uploader's blobs and reservations would take more than `quota`, or when
    /// it has `in_flight` uploads reserved already. Bytes the uploader stored before count once,
    /// and take no new reservation.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn reserve(
        &self,
        key: &BlobKey,
        uploader: &str,
        size: u64,
        ticket: &str,
        expires_at: i64,
        quota: Option<u64>,
        in_flight: usize,
    ) -> Result<Reserved> {
        let key = key.as_str();
        let _shared = self.hold_key(key, true).await;
        let reserved = in_tx!(self, |conn| {
            conn.lock(&[(&format!("_engine_blobs/{uploader}"), false), (&key_lock(key), true)]).await?;
            // One statement decides and writes. Bytes the uploader stored already take a new
            // ticket whatever the quota and keep their size; others are reserved only within
            // the uploads in flight and the quota, counting the uploader's other blobs.
            let written = sqlx::query(
                "INSERT INTO _engine_blobs (blob_key, uploader, size, stored, ticket, expires_at)
                 SELECT $1, $2, $3, FALSE, $4, $5
                 FROM (SELECT COUNT(CASE WHEN stored THEN NULL ELSE 1 END) AS reserved, COALESCE(SUM(size), 0) AS used
                       FROM _engine_blobs WHERE uploader = $2 AND blob_key <> $1) AS others
                 WHERE EXISTS (SELECT 1 FROM _engine_blobs WHERE blob_key = $1 AND uploader = $2 AND stored)
                    OR (others.reserved < $6 AND ($7 IS NULL OR others.used + $3 <= $7))
                 ON CONFLICT (blob_key, uploader) DO UPDATE
                 SET size = CASE WHEN _engine_blobs.stored THEN _engine_blobs.size ELSE EXCLUDED.size END,
                     ticket = EXCLUDED.ticket, expires_at = EXCLUDED.expires_at",
            )
            .bind(key)
            .bind(uploader)
            .bind(to_i64(size))
            .bind(ticket)
            .bind(expires_at)
            .bind(to_i64(in_flight as u64))
            .bind(quota.map(to_i64))
            .execute(&mut *conn)
            .await?
            .rows_affected();
            match written {
                1 => Reserved::Done,
                // Refused: what stood in the way, read under the same locks.
                _ => {
                    let (used, reserved): (i64, i64) = sqlx::query_as(
                        "SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT),
                                CAST(COALESCE(SUM(CASE WHEN stored THEN 0 ELSE 1 END), 0) AS BIGINT)
                         FROM _engine_blobs WHERE uploader = $1 AND blob_key <> $2",
                    )
                    .bind(uploader)
                    .bind(key)
                    .fetch_one(&mut *conn)
                    .await?;
                    match to_u64(reserved) >= in_flight as u64 {
                        true => Reserved::TooMany { in_flight: to_u64(reserved) },
                        false => Reserved::OverQuota { used: to_u64(used) },
                    }
                }
            }
        });
        Ok(reserved)
    }

    /// Take `ticket` for a body that starts arriving `now`, until `until`: false when the ticket
    /// is not the open one of its upload (used, replaced, expired or unknown) or another body is
    /// arriving under it. One ticket receives one body at a time.
    pub(crate) async fn claim(
        &self,
        key: &BlobKey,
        uploader: &str,
        ticket: &str,
        now: i64,
        until: i64,
    ) -> Result<bool> {
        let claimed = at_once!(self, |conn| {
            sqlx::query(
                "UPDATE _engine_blobs SET receiving_until = $5
                 WHERE blob_key = $1 AND uploader = $2 AND ticket = $3 AND expires_at >= $4
                   AND (receiving_until IS NULL OR receiving_until < $4)",
            )
            .bind(key.as_str())
            .bind(uploader)
            .bind(ticket)
            .bind(now)
            .bind(until)
            .execute(&mut *conn)
            .await?
            .rows_affected()
        });
        Ok(claimed == 1)
    }

    /// Give `ticket` back after a body that did not become the blob: the URL works again.
    pub(crate) async fn release(&self, key: &BlobKey, uploader: &str, ticket: &str) -> Result<()> {
        at_once!(self, |conn| {
            sqlx::query(
                "UPDATE _engine_blobs SET receiving_until = NULL WHERE blob_key = $1 AND uploader = $2 AND ticket = $3",
            )
            .bind(key.as_str())
            .bind(uploader)
            .bind(ticket)
            .execute(&mut *conn)
            .await?;
        });
        Ok(())
    }

    /// The uploader's bytes of `key` are stored: its reservation becomes usage, and its ticket
    /// is spent. `told_again`: the store tells that the bytes arrived whenever it is asked (an
    /// object store, asked by a download's ticket or by collection), so that the record need not
    /// reach the disk before the answer: on Postgres it is committed with `synchronous_commit`
    /// off, which a crash of the database may lose, and then the store is asked again. It is
    /// visible to every transaction from its commit on, and the next durable commit flushes it.
    /// Bytes the server received itself are known only to the ledger, and recorded durably.
    pub(crate) async fn mark_stored(&self, key: &BlobKey, uploader: &str, told_again: bool) -> Result<()> {
        let sql = "UPDATE _engine_blobs SET stored = TRUE, ticket = NULL, receiving_until = NULL, unused_since = NULL
                   WHERE blob_key = $1 AND uploader = $2";
        match (&self.inner, told_again) {
            (Inner::Postgres(pool), true) => {
                let mut tx = pool.begin_with("BEGIN; SET LOCAL synchronous_commit = off").await?;
                sqlx::query(sql).bind(key.as_str()).bind(uploader).execute(&mut *tx).await?;
                tx.commit().await?;
                Ok(())
            }
            _ => self.on_upload(sql, key, uploader).await,
        }
    }

    /// Drop the uploader's reservation of `key`, whose bytes never arrived.
    pub(crate) async fn drop_reservation(&self, key: &BlobKey, uploader: &str) -> Result<()> {
        self.on_upload("DELETE FROM _engine_blobs WHERE blob_key = $1 AND uploader = $2 AND NOT stored", key, uploader)
            .await
    }

    /// Run `sql` on the row of `key` (`$1`) and `uploader` (`$2`).
    async fn on_upload(&self, sql: &'static str, key: &BlobKey, uploader: &str) -> Result<()> {
        at_once!(self, |conn| {
            sqlx::query(sql).bind(key.as_str()).bind(uploader).execute(&mut *conn).await?;
        });
        Ok(())
    }

    /// The users with an upload of `key` in the ledger: only those whose bytes are stored, or,
    /// not `stored`, those with the bytes reserved as well.
    pub(crate) async fn uploaders(&self, key: &BlobKey, stored: bool) -> Result<Vec<String>> {
        let uploaders: Vec<String> = at_once!(self, |conn| {
            sqlx::query_scalar(
                "SELECT uploader FROM _engine_blobs WHERE blob_key = $1 AND (stored OR NOT $2) ORDER BY uploader",
            )
            .bind(key.as_str())
            .bind(stored)
            .fetch_all(&mut *conn)
            .await?
        });
        Ok(uploaders)
    }

    /// Uploads of `key` reserved and not stored, at most `limit`.
    pub(crate) async fn pending_of_key(&self, key: &BlobKey, limit: usize) -> Result<Vec<Pending>> {
        let rows: Vec<(String, String, i64)> = at_once!(self, |conn| {
            sqlx::query_as(
                "SELECT blob_key, uploader, size FROM _engine_blobs WHERE blob_key = $1 AND NOT stored
                 ORDER BY uploader LIMIT $2",
            )
            .bind(key.as_str())
            .bind(to_i64(limit as u64))
            .fetch_all(&mut *conn)
            .await?
        });
        Ok(pending(rows))
    }

    /// Uploads reserved and not stored after (`key`, `uploader`) in that order, at most
    /// `limit`; of `uploader` only, when named.
    pub(crate) async fn pending(&self, of: Option<&str>, after: (&str, &str), limit: usize) -> Result<Vec<Pending>> {
        let rows: Vec<(String, String, i64)> = at_once!(self, |conn| {
            sqlx::query_as(
                "SELECT blob_key, uploader, size FROM _engine_blobs
                 WHERE NOT stored AND ($1 IS NULL OR uploader = $1) AND (blob_key > $2 OR (blob_key = $2 AND uploader > $3))
                 ORDER BY blob_key, uploader LIMIT $4",
            )
            .bind(of)
            .bind(after.0)
            .bind(after.1)
            .bind(to_i64(limit as u64))
            .fetch_all(&mut *conn)
            .await?
        });
        Ok(pending(rows))
    }

    /// Uploads reserved and not stored whose tickets expired before `before` and that receive no
    /// body at `now`, at most `limit`; of `uploader` only, when named.
    pub(crate) async fn stale(&self, of: Option<&str>, before: i64, now: i64, limit: usize) -> Result<Vec<Pending>> {
        let rows: Vec<(String, String, i64)> = at_once!(self, |conn| {
            sqlx::query_as(
                "SELECT blob_key, uploader, size FROM _engine_blobs
                 WHERE NOT stored AND ($1 IS NULL OR uploader = $1) AND expires_at < $2
                   AND (receiving_until IS NULL OR receiving_until < $3)
                 ORDER BY blob_key, uploader LIMIT $4",
            )
            .bind(of)
            .bind(before)
            .bind(now)
            .bind(to_i64(limit as u64))
            .fetch_all(&mut *conn)
            .await?
        });
        Ok(pending(rows))
    }

    /// The blobs after `after` in key order, at most `limit`.
    pub(crate) async fn candidates(&self, after: &str, limit: usize) -> Result<Vec<Candidate>> {
        let rows: Vec<(String, Option<i64>, i64)> = at_once!(self, |conn| {
            sqlx::query_as(
                "SELECT blob_key, MIN(unused_since), CAST(MAX(CASE WHEN stored THEN 0 ELSE 1 END) AS BIGINT)
                 FROM _engine_blobs WHERE blob_key > $1 GROUP BY blob_key ORDER BY blob_key LIMIT $2",
            )
            .bind(after)
            .bind(to_i64(limit as u64))
            .fetch_all(&mut *conn)
            .await?
        });
        Ok(rows
            .into_iter()
            .map(|(key, unused_since, pending)| Candidate { key, unused_since, pending: pending > 0 })
            .collect())
    }

    /// Whether a row of `table` holds `key` in its blob column `column`.
    pub(crate) async fn named(&self, table: &str, column: &str, key: &str) -> Result<bool> {
        let found = at_once!(self, |conn| {
            sqlx::query(named_sql(table, column)).bind(key).fetch_optional(&mut *conn).await?.is_some()
        });
        Ok(found)
    }

    /// Note that no row names `key` since `now` (`None`: a row names it again).
    pub(crate) async fn mark_unused(&self, key: &str, now: Option<i64>) -> Result<()> {
        at_once!(self, |conn| {
            match now {
                Some(now) => sqlx::query(
                    "UPDATE _engine_blobs SET unused_since = $2 WHERE blob_key = $1 AND unused_since IS NULL",
                )
                .bind(key)
                .bind(now),
                None => sqlx::query(
                    "UPDATE _engine_blobs SET unused_since = NULL WHERE blob_key = $1 AND unused_since IS NOT NULL",
                )
                .bind(key),
            }
            .execute(&mut *conn)
            .await?;
        });
        Ok(())
    }

    /// Delete blob `key` from `store` and forget its stored uploads, if no row names it still
    /// in any of `columns` (table, column), none has named it since `unused_before` (a write
    /// naming it clears the note) and no upload of it is reserved: whether it did. All of this
    /// is decided and done under the blob's lock ([`key_lock`]), so a write naming the blob or a
    /// ticket for it comes before (and keeps it) or after (and finds it gone, as bytes never
    /// uploaded). The bytes are deleted before the ledger forgets them: a store that fails
    /// leaves both as they were. On SQLite the decision is read on a reader and the ledger
    /// written after the store's delete, the writer free meanwhile: the store's writes are one
    /// at a time, so a write naming the blob comes before the decision's read (and keeps it) or
    /// after it (and names bytes to be uploaded again), and tickets wait for the blob's lock.
    pub(crate) async fn delete_unused(
        &self,
        key: &BlobKey,
        columns: &[(&str, &str)],
        unused_before: i64,
        store: &dyn super::BlobStore,
    ) -> Result<bool> {
        match &self.inner {
            Inner::Postgres(pool) => {
                let mut tx = pool.begin().await?;
                let conn = &mut *tx;
                conn.lock(&[(&key_lock(key.as_str()), false)]).await?;
                let Some(uploaders) = unused_uploaders!(conn, key, columns, unused_before) else {
                    return Ok(false);
                };
                store.delete(key, &uploaders).await?;
                forget!(conn, key);
                tx.commit().await?;
            }
            Inner::Sqlite(db) => {
                let _alone = db.locks.lock(&key_lock(key.as_str()), false).await;
                let mut reader = db.readers.acquire().await?;
                let conn = &mut *reader;
                let Some(uploaders) = unused_uploaders!(conn, key, columns, unused_before) else {
                    return Ok(false);
                };
                drop(reader);
                store.delete(key, &uploaders).await?;
                let mut writer = db.writer().await;
                let conn = &mut *writer;
                forget!(conn, key);
            }
        }
        Ok(true)
    }

    /// Delete `object` from `store` if no upload in the ledger, stored or reserved, accounts
    /// for it: whether it did. Decided under the blob's lock, so no ticket for the object is
    /// handed out meanwhile (on SQLite held without the writer, the ledger read on a reader).
    pub(crate) async fn delete_orphan(
        &self,
        object: &super::StoredObject,
        store: &dyn super::BlobStore,
    ) -> Result<bool> {
        let orphan = |uploaders: Vec<String>| !uploaders.iter().any(|uploader| store.holds(object, uploader));
        let key = object.key.as_str();
        let deleted = match &self.inner {
            Inner::Postgres(pool) => {
                let mut tx = pool.begin().await?;
                let conn = &mut *tx;
                conn.lock(&[(&key_lock(key), false)]).await?;
                let orphan = orphan(uploads_of!(conn, key));
                if orphan {
                    store.delete_object(object).await?;
                }
                tx.commit().await?;
                orphan
            }
            Inner::Sqlite(db) => {
                let _alone = db.locks.lock(&key_lock(key), false).await;
                let mut reader = db.readers.acquire().await?;
                let conn = &mut *reader;
                let orphan = orphan(uploads_of!(conn, key));
                if orphan {
                    store.delete_object(object).await?;
                }
                orphan
            }
        };
        Ok(deleted)
    }
}

fn pending(rows: Vec<(String, String, i64)>) -> Vec<Pending> {
    rows.into_iter()
        .filter_map(|(key, uploader, size)| Some(Pending { key: key.parse().ok()?, uploader, size: to_u64(size) }))
        .collect()
}

/// The query whether a row of `table` holds a key (`$1`) in its blob column `column`.
fn named_sql(table: &str, column: &str) -> sqlx::AssertSqlSafe<String> {
    let quote = |name: &str| format!("\"{}\"", name.replace('"', "\"\""));
    sqlx::AssertSqlSafe(format!("SELECT 1 FROM {} WHERE {} = $1 LIMIT 1", quote(table), quote(column)))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use engine_kernel::{BlobKey, Timestamp};
    use futures_util::FutureExt;
    use futures_util::future::BoxFuture;
    use tokio::sync::Notify;

    use super::{Inner, Ledger, Reserved};
    use engine_kernel::wire::BlobTicket;

    use crate::blob::{BlobStore, Upload};
    use crate::error::{Error, Result};
    use crate::sqlite::{Db, Durability, exec};

    /// An object store whose deletes wait until let go: a network call that takes its time.
    #[derive(Default)]
    struct SlowDeletes {
        deleting: Notify,
        go: Notify,
    }

    impl BlobStore for SlowDeletes {
        fn upload_url(&self, _: &Upload, _: Timestamp) -> Result<BlobTicket> {
            Err(Error::internal("no uploads here"))
        }

        fn download_url(&self, _: &BlobKey, _: &str, _: Timestamp) -> Result<BlobTicket> {
            Err(Error::internal("no downloads here"))
        }

        fn arrived<'a>(&'a self, _: &'a Upload) -> BoxFuture<'a, Result<Option<bool>>> {
            Box::pin(async { Ok(None) })
        }

        fn delete<'a>(&'a self, _: &'a BlobKey, _: &'a [String]) -> BoxFuture<'a, Result<()>> {
            Box::pin(async {
                self.deleting.notify_one();
                self.go.notified().await;
                Ok(())
            })
        }
    }

    /// On SQLite collection deletes a blob's bytes under the blob's lock without the writer:
    /// the store writes meanwhile, and a ticket for the blob waits until the delete is done.
    #[tokio::test]
    async fn a_blob_s_delete_holds_its_lock_and_not_the_writer() {
        let dir = std::env::temp_dir().join(format!("engine-ledger-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let db =
            Arc::new(Db::open(&dir.join("blobs.db"), Durability::Process, 2, Duration::from_secs(5)).await.unwrap());
        let key = BlobKey::for_bytes(b"unused");
        exec(
            &mut *db.writer().await,
            &format!(
                "CREATE TABLE _engine_blobs (blob_key TEXT NOT NULL, uploader TEXT NOT NULL, size INTEGER NOT NULL, stored INTEGER NOT NULL DEFAULT 0, ticket TEXT, expires_at INTEGER NOT NULL DEFAULT 0, receiving_until INTEGER, unused_since INTEGER, PRIMARY KEY (blob_key, uploader));
                 INSERT INTO _engine_blobs (blob_key, uploader, size, stored, unused_since) VALUES ('{key}', 'alice', 6, 1, 0)"
            ),
        )
        .await
        .unwrap();
        let ledger = Ledger::new(Inner::Sqlite(db.clone()));
        let store = Arc::new(SlowDeletes::default());
        let deleting = tokio::spawn({
            let (ledger, store, key) = (ledger.clone(), store.clone(), key.clone());
            async move { ledger.delete_unused(&key, &[], 1, &*store).await }
        });
        store.deleting.notified().await;
        let writer = tokio::time::timeout(Duration::from_secs(10), db.writer()).await;
        let mut writer = writer.expect("the writer is free while the store deletes");
        exec(&mut writer, "INSERT INTO _engine_blobs (blob_key, uploader, size) VALUES ('other', 'bob', 1)")
            .await
            .unwrap();
        drop(writer);
        let mut ticket = Box::pin(ledger.reserve(&key, "bob", 6, "ticket", i64::MAX, None, 8));
        assert!(ticket.as_mut().now_or_never().is_none(), "a ticket for the blob waits for its lock");
        store.go.notify_one();
        assert!(deleting.await.unwrap().unwrap(), "deleted");
        assert_eq!(ticket.await.unwrap(), Reserved::Done, "the ticket comes after, as for bytes never uploaded");
        let left: Vec<String> =
            sqlx::query_scalar("SELECT uploader FROM _engine_blobs WHERE blob_key = ? ORDER BY uploader")
                .bind(key.as_str())
                .fetch_all(&db.readers)
                .await
                .unwrap();
        assert_eq!(left, ["bob"], "alice's upload is forgotten, bob's reserved");
        std::fs::remove_dir_all(&dir).ok();
    }
}
