//! The mutator transaction on the local store: the client side of `MutatorCtx`, for the
//! optimistic run of a mutation (and its replays on every rebase).
//!
//! It reads and writes the view tables (what the app sees) inside the caller's SQLite
//! transaction, and notes every row it writes in `_engine_touched`, so a rebase knows which rows
//! to reset to the confirmed base before it replays the pending mutations. There is no
//! authorization here: the local store holds only the actor's buckets, and the server decides.
//! Tables no sync rule covers have no local copy: writes to them are the server's business and
//! do nothing here, and reads find nothing.

use engine_kernel::{Actor, BoxFuture, Error as KernelError, Hlc, MutatorTx, Row, TableMeta};
use serde_json::Value;
use sqlx::SqliteConnection;

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
}

impl<'c> LocalTx<'c> {
    pub(crate) fn new(
        conn: &'c mut SqliteConnection,
        app: &'c engine_kernel::App,
        actor: Actor,
        hlc: Hlc,
        seed: uuid::Uuid,
    ) -> Self {
        LocalTx { conn, app, actor, hlc, seed }
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
        if !self.local(table) {
            return Ok(());
        }
        let mut values = Vec::with_capacity(table.columns.len());
        for column in table.columns {
            let value = table.written(column, None, row.get(column.name).unwrap_or(&Value::Null))?;
            values.push(canonical(table, column, &value)?);
        }
        insert_sql(table, &values).build().execute(&mut *self.conn).await.map_err(store_error)?;
        let stored: Row = table.columns.iter().map(|c| c.name.to_owned()).zip(values).collect();
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
        let Some(mut row) = self.fetch(table, &key).await? else { return Ok(false) };
        for (name, value) in changes {
            let column = table.known_column(name)?;
            let value = table.written(column, row.get(name), &value)?;
            row.insert(name.to_owned(), canonical(table, column, &value)?);
        }
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
