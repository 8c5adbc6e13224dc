//! The connection a mutation runs on, and the batching of its last insert.
//!
//! A mutation runs inside a transaction its caller began ([`Conn::Within`]), or on a
//! [`Conn::Deferred`] connection: its reads then run on their own (under READ COMMITTED each
//! statement sees a snapshot of its own either way) and the transaction begins just before its
//! first write. An authorized insert is not sent at once: it waits for the mutation's next
//! operation, or goes with the mutation's record in one statement (on SQLite, one batch of
//! statements), which saves a round trip on the commonest mutation (one insert).

use engine_kernel::{Error as KernelError, TableMeta};
use serde_json::Value;
use sqlx::{PgConnection, SqliteConnection};

use super::ServerTx;
use super::errors::{Failure, map_sql_error, to_kernel};
use super::statements;
use crate::pg::sql::Sql;

type KernelResult<T> = engine_kernel::Result<T>;

/// The connection a mutation runs on.
pub(crate) enum Conn<'t> {
    /// Inside a transaction the caller began and ends.
    Within(&'t mut PgConnection),
    /// Not in a transaction yet: one begins before the first write. A mutation that never
    /// writes before its record leaves the record to be a transaction of its own.
    Deferred(&'t mut PgConnection),
    /// The transaction begun before the first write, committed by [`ServerTx::commit`].
    Begun(sqlx::Transaction<'t, sqlx::Postgres>),
    /// Beginning the transaction failed; the mutation has failed with it.
    Lost,
    /// Inside the SQLite writer's transaction, which the caller began and ends.
    Sqlite(&'t mut SqliteConnection),
}

impl Conn<'_> {
    pub(super) fn conn(&mut self) -> KernelResult<&mut PgConnection> {
        match self {
            Conn::Within(conn) | Conn::Deferred(conn) => Ok(conn),
            Conn::Begun(tx) => Ok(&mut **tx),
            Conn::Lost => Err(KernelError::Transient("the mutation's transaction could not begin".into())),
            Conn::Sqlite(_) => Err(KernelError::Internal("a Postgres statement of a mutation on SQLite".into())),
        }
    }

    /// Whether the mutation runs on SQLite.
    pub(super) fn is_sqlite(&self) -> bool {
        matches!(self, Conn::Sqlite(_))
    }

    /// The SQLite connection, when the mutation runs on SQLite.
    pub(super) fn sqlite(&mut self) -> Option<&mut SqliteConnection> {
        match self {
            Conn::Sqlite(conn) => Some(conn),
            _ => None,
        }
    }
}

/// An authorized insert waiting to be sent.
#[derive(Debug)]
pub(crate) struct PendingInsert {
    pub(super) table: &'static TableMeta,
    /// A value per column, in column order, checked against the column.
    pub(super) values: Vec<Value>,
    /// The row's HLC stamps, on a synced table that merges by field.
    pub(super) stamps: Option<Value>,
}

impl PendingInsert {
    /// Append the insert to `sql` (as a statement, or inside a `WITH`).
    pub(crate) fn push(&self, sql: &mut Sql) -> crate::error::Result<()> {
        statements::push_insert(sql, self.table, &self.values, self.stamps.as_ref())
    }

    /// Append the insert to `sql` on SQLite, as a statement of a batch; with `condition`, the
    /// row is inserted only where that holds.
    pub(crate) fn push_on_sqlite(
        &self,
        sql: &mut engine_sqlite::Sql,
        condition: Option<super::sqlite::Condition<'_>>,
    ) -> crate::error::Result<()> {
        super::sqlite::push_insert(sql, self.table, &self.values, self.stamps.as_ref(), condition)
    }
}

impl<'t> ServerTx<'t> {
    /// The connection, for a read (or the mutation's record).
    pub(crate) fn conn(&mut self) -> KernelResult<&mut PgConnection> {
        self.conn.conn()
    }

    /// The connection, for a write: in the mutation's transaction, begun now if deferred. The
    /// rows required so far are confirmed first, before a write of the mutation could be among
    /// what confirms them.
    pub(super) async fn writing(&mut self) -> KernelResult<&mut PgConnection> {
        self.confirm_required().await?;
        self.conn = match std::mem::replace(&mut self.conn, Conn::Lost) {
            Conn::Deferred(conn) => match sqlx::Connection::begin(conn).await {
                Ok(tx) => Conn::Begun(tx),
                Err(e) => return Err(self.failed(e)),
            },
            other => other,
        };
        self.conn()
    }

    /// Commit the transaction the mutation began; one its caller began, the caller commits.
    pub(crate) async fn commit(self) -> KernelResult<()> {
        match self.conn {
            Conn::Begun(tx) => tx.commit().await.map_err(map_sql_error),
            _ => Ok(()),
        }
    }

    /// Send the insert waiting to be sent, if any.
    pub(crate) async fn flush(&mut self) -> KernelResult<()> {
        let Some(pending) = self.pending.take() else { return Ok(()) };
        if self.conn.is_sqlite() {
            self.confirm_required().await?;
        }
        if let Some(conn) = self.conn.sqlite() {
            let inserted = super::sqlite::insert(conn, pending.table, &pending.values, pending.stamps.as_ref()).await;
            return inserted.map_err(|e| self.failed_with(e));
        }
        let mut sql = Sql::new("");
        pending.push(&mut sql).map_err(to_kernel)?;
        if let Err(e) = sql.build().execute(self.writing().await?).await {
            return Err(self.failed(e));
        }
        Ok(())
    }

    /// The insert still waiting, to be sent with the mutation's record.
    pub(crate) fn take_pending(&mut self) -> Option<PendingInsert> {
        self.pending.take()
    }

    /// Record a failed statement: the transaction is aborted from here on.
    pub(super) fn failed(&mut self, err: sqlx::Error) -> KernelError {
        let mapped = map_sql_error(err);
        if self.failure.is_none() {
            self.failure = Some(Failure::of(&mapped));
        }
        mapped
    }

    /// Record a failed statement of the SQLite store: the mutation fails as it did.
    pub(super) fn failed_with(&mut self, err: crate::error::Error) -> KernelError {
        let mapped = to_kernel(err);
        if self.failure.is_none() {
            self.failure = Some(Failure::of(&mapped));
        }
        mapped
    }

    /// Refuse to go on after a failed statement, as that statement failed.
    pub(super) fn check_usable(&self) -> KernelResult<()> {
        match &self.failure {
            Some(failure) => Err(failure.error()),
            None => Ok(()),
        }
    }
}
