//! Rows a mutation requires ([`MutatorCtx::require`](engine_kernel::MutatorCtx::require)): on
//! the push's next path, where the actor's reading of the row can be told from its key, the row
//! is not read but confirmed by the mutation's record statement, in that statement's snapshot,
//! with the mutation's last insert; a row missing there undoes the mutation, which the checked
//! path then runs, reading the row first. Elsewhere the row is read at once.
//!
//! The record's snapshot must not hold a write of the mutation (which could make the row it
//! required), so a statement of its own confirms the rows required so far before the mutation
//! sends a write; when that fails, the next path runs the mutation once more, asking. The last
//! insert, sent with the record, is not in the record statement's snapshot.

use engine_kernel::{Actor, Error as KernelError, Row, TableMeta};

use super::authorize::Assumed;
use super::errors::{ASK_INSTEAD, to_kernel};
use super::{KernelResult, ServerTx, statements};
use crate::pg::sql::Sql;

/// A row the mutation went on without reading: it exists, live, and the actor holds `held`
/// when given (else the row is readable whenever it exists).
#[derive(Debug)]
pub(crate) struct Required {
    table: &'static TableMeta,
    key: Row,
    held: Option<Assumed>,
}

impl Required {
    /// Append the condition that every row of `all` is there as required, `(true AND EXISTS (…)
    /// …)`, evaluated in the snapshot of the statement it is part of.
    pub(crate) fn push_all(all: &[Required], sql: &mut Sql, actor: &Actor) -> crate::error::Result<()> {
        sql.push("(true");
        for required in all {
            sql.push(" AND ");
            statements::push_exists(sql, required.table, &required.key)?;
            if let Some(held) = &required.held {
                sql.push(" AND ");
                held.push(sql, actor)?;
            }
        }
        sql.push(")");
        Ok(())
    }
}

impl Required {
    /// Append the condition that every row of `all` is there as required on SQLite, `(1 AND
    /// EXISTS (…) …)`.
    pub(crate) fn push_all_on_sqlite(
        all: &[Required],
        sql: &mut engine_sqlite::Sql,
        app: &engine_kernel::App,
        actor: &Actor,
    ) -> crate::error::Result<()> {
        sql.push("(1");
        for required in all {
            sql.push(" AND ");
            super::sqlite::push_exists(sql, required.table, &required.key)?;
            if let Some(held) = &required.held {
                sql.push(" AND ");
                held.push_on_sqlite(sql, app, actor)?;
            }
        }
        sql.push(")");
        Ok(())
    }
}

impl ServerTx<'_> {
    /// Whether the row of `table` with key `key` exists and the actor can read it: assumed, for
    /// the record statement to confirm, where that can be; else read.
    pub(super) async fn require_row(&mut self, table: &'static TableMeta, key: Row) -> KernelResult<bool> {
        self.check_usable()?;
        // A row of the table the insert still waiting goes to is read (which sends the insert):
        // the record's snapshot would not hold it.
        let waiting = self.pending.as_ref().is_some_and(|p| p.table.name == table.name);
        if !waiting && let Some(held) = self.readable_by_key(table, &key) {
            self.required.push(Required { table, key, held });
            return Ok(true);
        }
        Ok(self.select_rows(table, Some(key), Vec::new(), Some(1)).await?.into_iter().next().is_some())
    }

    /// Confirm the rows required so far, in one statement, before the mutation sends a write.
    pub(super) async fn confirm_required(&mut self) -> KernelResult<()> {
        if self.required.is_empty() {
            return Ok(());
        }
        if self.conn.is_sqlite() {
            let mut sql = engine_sqlite::Sql::new("SELECT ");
            Required::push_all_on_sqlite(&self.required, &mut sql, &self.core.app, &self.actor).map_err(to_kernel)?;
            let Some(conn) = self.conn.sqlite() else { return Ok(()) };
            let confirmed = sql.build_query_scalar::<bool>().fetch_one(&mut *conn).await;
            if !confirmed.map_err(|e| self.failed_with(e.into()))? {
                return Err(KernelError::forbidden(ASK_INSTEAD));
            }
            self.required.clear();
            return Ok(());
        }
        let mut sql = Sql::new("SELECT ");
        Required::push_all(&self.required, &mut sql, &self.actor).map_err(to_kernel)?;
        let confirmed = sql.build_query_scalar::<bool>().fetch_one(self.conn()?).await;
        if !confirmed.map_err(|e| self.failed(e))? {
            return Err(KernelError::forbidden(ASK_INSTEAD));
        }
        self.required.clear();
        Ok(())
    }

    /// The rows required without reading them, for the record statement to confirm.
    pub(crate) fn take_required(&mut self) -> Vec<Required> {
        std::mem::take(&mut self.required)
    }
}
