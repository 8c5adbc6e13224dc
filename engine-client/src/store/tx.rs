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

use super::schema::{ident, is_local};
use super::values::{bind, canonical, decode_row, key_text};

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
        let sql = format!("SELECT {} FROM {} WHERE {}", columns(table), ident(table.name), key_predicate(table));
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for column in key_columns(table) {
            query = bind(query, column, &looked_up(table, column, key.get(column.name).unwrap_or(&Value::Null)));
        }
        let row = query.fetch_optional(&mut *self.conn).await.map_err(store_error)?;
        row.map(|r| decode_row(table, &r).map_err(store_error)).transpose()
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
        let placeholders = vec!["?"; table.columns.len()].join(", ");
        let sql = format!("INSERT INTO {} ({}) VALUES ({placeholders})", ident(table.name), columns(table));
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (column, value) in table.columns.iter().zip(&values) {
            query = bind(query, column, value);
        }
        query.execute(&mut *self.conn).await.map_err(store_error)?;
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
        let sets: Vec<String> = table.columns.iter().map(|c| format!("{} = ?", ident(c.name))).collect();
        let sql = format!("UPDATE {} SET {} WHERE {}", ident(table.name), sets.join(", "), key_predicate(table));
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for column in table.columns {
            query = bind(query, column, row.get(column.name).unwrap_or(&Value::Null));
        }
        for column in key_columns(table) {
            query = bind(query, column, &looked_up(table, column, key.get(column.name).unwrap_or(&Value::Null)));
        }
        query.execute(&mut *self.conn).await.map_err(store_error)?;
        self.touch(table, &row).await?;
        Ok(true)
    }

    async fn purge_row(&mut self, table: &'static TableMeta, key: Row) -> KernelResult<bool> {
        if !self.local(table) {
            return Ok(true);
        }
        let sql = format!("DELETE FROM {} WHERE {}", ident(table.name), key_predicate(table));
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for column in key_columns(table) {
            query = bind(query, column, &looked_up(table, column, key.get(column.name).unwrap_or(&Value::Null)));
        }
        let deleted = query.execute(&mut *self.conn).await.map_err(store_error)?.rows_affected() > 0;
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
        let mut conditions = Vec::new();
        let mut binds = Vec::new();
        for (name, value) in filter {
            let column = table.filter_column(&name)?;
            conditions.push(format!("{} = ?", ident(column.name)));
            binds.push((column, value));
        }
        if !self.local(table) {
            return Ok(Vec::new());
        }
        let sql = select_sql(table, &conditions, limit);
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (column, value) in &binds {
            query = bind(query, column, &looked_up(table, column, value));
        }
        let rows = query.fetch_all(&mut *self.conn).await.map_err(store_error)?;
        rows.iter().map(|r| decode_row(table, r).map_err(store_error)).collect()
    }
}

/// A value to compare a column with, in the form the store holds (as given when it cannot be
/// one: it then matches nothing).
pub(crate) fn looked_up(table: &TableMeta, column: &engine_kernel::ColumnMeta, value: &Value) -> Value {
    canonical(table, column, value).unwrap_or_else(|_| value.clone())
}

/// `SELECT` of the live rows of the view of `table` matching `conditions` (`col = ?` each), in
/// primary-key order.
pub(crate) fn select_sql(table: &TableMeta, conditions: &[String], limit: Option<u32>) -> String {
    let mut conditions = conditions.to_vec();
    if let Some(deleted) = table.soft_delete {
        conditions.push(format!("{} IS NULL", ident(deleted)));
    }
    let order: Vec<String> = table.primary_key.iter().map(|k| ident(k)).collect();
    format!(
        "SELECT {} FROM {}{}{} ORDER BY {}{}",
        columns(table),
        ident(table.name),
        if conditions.is_empty() { "" } else { " WHERE " },
        conditions.join(" AND "),
        order.join(", "),
        limit.map(|l| format!(" LIMIT {l}")).unwrap_or_default()
    )
}

/// Every column of `table`, quoted, in order.
pub(crate) fn columns(table: &TableMeta) -> String {
    table.columns.iter().map(|c| ident(c.name)).collect::<Vec<_>>().join(", ")
}

/// `k1 = ? AND k2 = ?` over the primary key.
pub(crate) fn key_predicate(table: &TableMeta) -> String {
    table.primary_key.iter().map(|k| format!("{} = ?", ident(k))).collect::<Vec<_>>().join(" AND ")
}

/// The primary key columns, in key order.
pub(crate) fn key_columns(table: &TableMeta) -> impl Iterator<Item = &'static engine_kernel::ColumnMeta> + '_ {
    table.primary_key.iter().map(|k| table.column(k).expect("key columns exist"))
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
