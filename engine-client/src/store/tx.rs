//! The mutator transaction on the local store: the client side of `MutatorCtx`, for the
//! optimistic run of a mutation (and its replays on every rebase).
//!
//! It reads and writes the view tables (what the app sees) inside the caller's SQLite
//! transaction, and notes every row it writes in `_engine_touched`, so a rebase knows which rows
//! to reset to the confirmed base before it replays the pending mutations. Tables no sync rule
//! covers have no local copy: writes to them do nothing here, and reads find nothing.
//!
//! A mutation's first run ([`LocalTx::checked`]) holds each write to the write rules, evaluated
//! offline ([`crate::authorize`]) against the holdings the store has when the mutation first
//! writes: a write the server would certainly refuse fails as `forbidden`, and the refusal
//! sticks, as on the server. Replays on a rebase are not checked: the server decides them.

use engine_kernel::rules::buckets::RuleIndex;
use engine_kernel::{Actor, BoxFuture, Error as KernelError, Hlc, MutatorTx, Row, TableMeta};
use serde_json::Value;
use sqlx::SqliteConnection;

use crate::authorize::{Verdict, WriteContext};

use super::schema::is_local;
use super::sql::{Sql, ident, push_columns, push_key_match, select_live};
use super::values::{canonical, decode_row, key_text, looked_up, stored};

type KernelResult<T> = engine_kernel::Result<T>;

/// A mutation's view of the local store.
pub(crate) struct LocalTx<'c> {
    conn: &'c mut SqliteConnection,
    app: &'c engine_kernel::App,
    actor: Actor,
    hlc: Hlc,
    seed: uuid::Uuid,
    /// The write rules the run is held to, when it is a mutation's first.
    checks: Option<Checks<'c>>,
}

/// The write rules a mutation's first run is held to.
struct Checks<'c> {
    index: &'c RuleIndex,
    actor: &'c Actor,
    /// The context writes are evaluated in, read at the first write.
    context: Option<WriteContext<'c>>,
    /// The first refusal: it fails the mutation whatever the mutator made of it.
    refusal: Option<String>,
}

impl<'c> LocalTx<'c> {
    pub(crate) fn new(
        conn: &'c mut SqliteConnection,
        app: &'c engine_kernel::App,
        actor: Actor,
        hlc: Hlc,
        seed: uuid::Uuid,
    ) -> Self {
        LocalTx { conn, app, actor, hlc, seed, checks: None }
    }

    /// This transaction with each write held to the write rules of `index`, for `actor`.
    pub(crate) fn checked(mut self, index: &'c RuleIndex, actor: &'c Actor) -> Self {
        self.checks = Some(Checks { index, actor, context: None, refusal: None });
        self
    }

    /// The refusal of a write of the run, which fails the mutation (`docs/design.md` §4): a
    /// mutator that went on past it would be queued, and the server refuses it anyway.
    pub(crate) fn refusal(&self) -> Option<KernelError> {
        self.checks.as_ref()?.refusal.as_ref().map(KernelError::forbidden)
    }

    /// Refuse a write of `table` from `before` to `after` that the server would certainly
    /// refuse.
    async fn check(
        &mut self,
        table: &'static TableMeta,
        before: Option<&Row>,
        after: Option<&Row>,
    ) -> KernelResult<()> {
        let Some(checks) = self.checks.as_mut() else { return Ok(()) };
        if checks.context.is_none() {
            let holdings =
                super::holdings::read(self.conn, checks.index, checks.actor).await.map_err(KernelError::internal)?;
            checks.context = Some(WriteContext::new(checks.index, checks.actor, holdings));
        }
        let context = checks.context.as_mut().expect("read above");
        match context.authorize(table, before, after) {
            Verdict::Refused(KernelError::Forbidden(message)) => {
                let refused = KernelError::forbidden(&message);
                checks.refusal.get_or_insert(message);
                Err(refused)
            }
            Verdict::Refused(other) => Err(other),
            Verdict::Allowed | Verdict::Unknown => Ok(()),
        }
    }

    fn local(&self, table: &TableMeta) -> bool {
        is_local(self.app, table)
    }

    /// The view's row of `table` with key `key`, soft-deleted or not.
    async fn fetch(&mut self, table: &'static TableMeta, key: &Row) -> KernelResult<Option<Row>> {
        let mut sql = Sql::new("SELECT ");
        push_columns(&mut sql, table);
        sql.push(" FROM ").push(ident(table.name));
        push_key_match(&mut sql, table, &looked_up_key(table, key));
        let row = sql.build().fetch_optional(&mut *self.conn).await.map_err(store_error)?;
        row.map(|r| decode_row(table, &r).map_err(KernelError::internal)).transpose()
    }

    async fn touch(&mut self, table: &TableMeta, row: &Row) -> KernelResult<()> {
        sqlx::query("INSERT OR IGNORE INTO _engine_touched (tbl, key) VALUES (?, ?)")
            .bind(table.name)
            .bind(key_text(table, row))
            .execute(&mut *self.conn)
            .await
            .map_err(store_error)?;
        Ok(())
    }

    async fn insert_row(&mut self, table: &'static TableMeta, row: Row) -> KernelResult<()> {
        table.check_insert(&row)?;
        let mut values = Vec::with_capacity(table.columns.len());
        for column in table.columns {
            let value = table.written(column, None, row.get(column.name).unwrap_or(&Value::Null))?;
            values.push(canonical(table, column, &value)?);
        }
        let stored: Row = table.columns.iter().map(|c| c.name.to_owned()).zip(values.iter().cloned()).collect();
        self.check(table, None, Some(&stored)).await?;
        if !self.local(table) {
            return Ok(());
        }
        insert_sql(table, &values).build().execute(&mut *self.conn).await.map_err(store_error)?;
        self.touch(table, &stored).await
    }

    async fn update_row(
        &mut self,
        table: &'static TableMeta,
        key: Row,
        changes: Vec<(&'static str, Value)>,
    ) -> KernelResult<bool> {
        table.check_update(&changes)?;
        if !self.local(table) {
            return Ok(true);
        }
        let Some(before) = self.fetch(table, &key).await? else { return Ok(false) };
        let mut row = before.clone();
        for (name, value) in changes {
            let column = table.known_column(name)?;
            let value = table.written(column, row.get(name), &value)?;
            row.insert(name.to_owned(), canonical(table, column, &value)?);
        }
        self.check(table, Some(&before), Some(&row)).await?;
        let mut sql = Sql::new("UPDATE ");
        sql.push(ident(table.name)).push(" SET ");
        let mut sets = sql.separated(", ");
        for column in table.columns {
            let value = stored(column, row.get(column.name).unwrap_or(&Value::Null));
            sets.push(ident(column.name)).push_unseparated(" = ").push_bind_unseparated(value);
        }
        push_key_match(&mut sql, table, &looked_up_key(table, &key));
        sql.build().execute(&mut *self.conn).await.map_err(store_error)?;
        self.touch(table, &row).await?;
        Ok(true)
    }

    async fn purge_row(&mut self, table: &'static TableMeta, key: Row) -> KernelResult<bool> {
        if !self.local(table) {
            return Ok(true);
        }
        let Some(before) = self.fetch(table, &key).await? else { return Ok(false) };
        self.check(table, Some(&before), None).await?;
        let mut sql = Sql::new("DELETE FROM ");
        sql.push(ident(table.name));
        push_key_match(&mut sql, table, &looked_up_key(table, &key));
        let deleted = sql.build().execute(&mut *self.conn).await.map_err(store_error)?.rows_affected() > 0;
        self.touch(table, &key).await?;
        Ok(deleted)
    }

    async fn delete_row(&mut self, table: &'static TableMeta, key: Row) -> KernelResult<bool> {
        let Some(deletion) = table.deletion() else { return self.purge_row(table, key).await };
        if !self.local(table) {
            return Ok(true);
        }
        match self.fetch(table, &key).await? {
            Some(row) if table.is_live(&row) => self.update_row(table, key, vec![deletion]).await,
            // Deleting a row already deleted finds nothing.
            _ => Ok(false),
        }
    }

    async fn select_rows(
        &mut self,
        table: &'static TableMeta,
        filter: Vec<(String, Value)>,
        limit: Option<u32>,
    ) -> KernelResult<Vec<Row>> {
        let mut columns = Vec::new();
        for (name, value) in &filter {
            columns.push((table.filter_column(name)?, value));
        }
        if !self.local(table) {
            return Ok(Vec::new());
        }
        let rows = select_live(table, &columns, limit).build().fetch_all(&mut *self.conn).await.map_err(store_error)?;
        rows.iter().map(|r| decode_row(table, r).map_err(KernelError::internal)).collect()
    }
}

/// `INSERT` into the view of `table` of one row, `values` in column order.
fn insert_sql(table: &TableMeta, values: &[Value]) -> Sql {
    let mut sql = Sql::new("INSERT INTO ");
    sql.push(ident(table.name)).push(" (");
    push_columns(&mut sql, table);
    sql.push(") ").push_values([values], |mut tuple, values| {
        for (column, value) in table.columns.iter().zip(values) {
            tuple.push_bind(stored(column, value));
        }
    });
    sql
}

/// The primary key of `key`, each value in the form the store holds ([`looked_up`]).
fn looked_up_key(table: &TableMeta, key: &Row) -> Row {
    table
        .key_columns()
        .map(|c| (c.name.to_owned(), looked_up(table, c, key.get(c.name).unwrap_or(&Value::Null))))
        .collect()
}

/// A local store failure as a mutation failure: a uniqueness violation is a conflict, as on the
/// server; anything else is a fault of the store.
pub(crate) fn store_error(err: sqlx::Error) -> KernelError {
    if let sqlx::Error::Database(db) = &err
        && db.is_unique_violation()
    {
        return KernelError::conflict("a row with this key already exists");
    }
    KernelError::Internal(err.into())
}

impl MutatorTx for LocalTx<'_> {
    fn actor(&self) -> &Actor {
        &self.actor
    }

    fn hlc(&self) -> &Hlc {
        &self.hlc
    }

    fn mutation_seed(&self) -> Option<uuid::Uuid> {
        Some(self.seed)
    }

    fn insert<'a>(&'a mut self, table: &'static TableMeta, row: Row) -> BoxFuture<'a, KernelResult<()>> {
        Box::pin(self.insert_row(table, row))
    }

    fn update<'a>(
        &'a mut self,
        table: &'static TableMeta,
        key: Row,
        changes: Vec<(&'static str, Value)>,
    ) -> BoxFuture<'a, KernelResult<bool>> {
        Box::pin(self.update_row(table, key, changes))
    }

    fn delete<'a>(&'a mut self, table: &'static TableMeta, key: Row) -> BoxFuture<'a, KernelResult<bool>> {
        Box::pin(self.delete_row(table, key))
    }

    fn purge<'a>(&'a mut self, table: &'static TableMeta, key: Row) -> BoxFuture<'a, KernelResult<bool>> {
        Box::pin(self.purge_row(table, key))
    }

    fn get<'a>(&'a mut self, table: &'static TableMeta, key: Row) -> BoxFuture<'a, KernelResult<Option<Row>>> {
        Box::pin(
            async move { Ok(self.select_rows(table, key.into_iter().collect(), Some(1)).await?.into_iter().next()) },
        )
    }

    fn select<'a>(
        &'a mut self,
        table: &'static TableMeta,
        filter: Vec<(&'static str, Value)>,
        limit: Option<u32>,
    ) -> BoxFuture<'a, KernelResult<Vec<Row>>> {
        let filter = filter.into_iter().map(|(c, v)| (c.to_owned(), v)).collect();
        Box::pin(self.select_rows(table, filter, limit))
    }

    /// Jobs run on the server once it applies the mutation: the optimistic run has none.
    fn enqueue<'a>(&'a mut self, _job: engine_kernel::JobRequest) -> BoxFuture<'a, KernelResult<()>> {
        Box::pin(async { Ok(()) })
    }
}
