//! Who wrote each blob key into a row (`_engine_blob_refs`): a mutation that sets a blob column
//! records its actor as the writer of that key in that row, in the mutation's transaction, so a
//! download can ask for a row that an uploader of the bytes wrote (`docs/design.md` §13).

use engine_kernel::column::ColumnMeta;
use engine_kernel::{Row, TableMeta};
use serde_json::Value;

use super::ServerTx;
use crate::pg::sql::Sql;

type KernelResult<T> = engine_kernel::Result<T>;

/// The name of the lock on blob `key` (a transaction lock on Postgres, one of the process on
/// SQLite, `blob/ledger.rs`): a ticket for it and a write naming it take it shared (on SQLite,
/// where writes are one at a time, a ticket only), and collection deleting it takes it alone, so
/// that none of them happens between collection finding no row naming the blob and its bytes
/// being deleted.
pub(crate) fn key_lock(key: &str) -> String {
    format!("_engine_blobs/key:{key}")
}

/// The primary key of `row` as `_engine_blob_refs` keeps it: an object of the key columns.
fn row_key(table: &TableMeta, row: &Row) -> Value {
    Value::Object(
        table.primary_key.iter().map(|k| ((*k).to_owned(), row.get(*k).cloned().unwrap_or(Value::Null))).collect(),
    )
}

impl ServerTx<'_> {
    /// Record the actor as the writer of the blob keys that `columns` of `row` hold, for those
    /// of them the write changed (`before` is the row before it; none for an insert). A column
    /// whose value a write did not change keeps the writer it had.
    pub(super) async fn note_blob_refs(
        &mut self,
        table: &'static TableMeta,
        before: Option<&Row>,
        row: &Row,
        columns: &[&'static ColumnMeta],
    ) -> KernelResult<()> {
        let written: Vec<(&'static str, String)> = columns
            .iter()
            .filter(|c| c.blob)
            .filter(|c| before.is_none_or(|before| before.get(c.name) != row.get(c.name)))
            .filter_map(|c| row.get(c.name).and_then(Value::as_str).map(|key| (c.name, key.to_owned())))
            .collect();
        if written.is_empty() {
            return Ok(());
        }
        let (key, writer) = (row_key(table, row), self.actor.user_id.clone());
        if self.conn.is_sqlite() {
            self.confirm_required().await?;
        }
        // The blobs named are in use again: each one's note of disuse is cleared, under its lock
        // (`blob/ledger.rs`), so collection either deletes it before this write (which then
        // names bytes to be uploaded, as an offline client's row does) or sees this row and
        // keeps it.
        let mut keys: Vec<String> = written.iter().map(|(_, key)| key.clone()).collect();
        keys.sort();
        keys.dedup();
        if let Some(conn) = self.conn.sqlite() {
            let mut noted = super::sqlite::note_blob_refs(conn, table, &key, written, &writer).await;
            if noted.is_ok() {
                noted = super::sqlite::clear_unused(conn, &keys).await;
            }
            return noted.map_err(|e| self.failed_with(e));
        }
        for blob in &keys {
            let lock = sqlx::query("SELECT pg_advisory_xact_lock_shared(hashtextextended($1, 0))")
                .bind(key_lock(blob))
                .execute(self.writing().await?)
                .await;
            if let Err(e) = lock {
                return Err(self.failed(e));
            }
        }
        let cleared = sqlx::query(
            "UPDATE _engine_blobs SET unused_since = NULL WHERE blob_key = ANY($1) AND unused_since IS NOT NULL",
        )
        .bind(&keys)
        .execute(self.writing().await?)
        .await;
        if let Err(e) = cleared {
            return Err(self.failed(e));
        }
        let mut sql = Sql::new("INSERT INTO _engine_blob_refs (table_name, row_key, column_name, blob_key, writer) ");
        sql.push_values(written, |mut values, (column, blob)| {
            values
                .push_bind(table.name)
                .push_bind(key.clone())
                .push_bind(column)
                .push_bind(blob)
                .push_bind(writer.clone());
        });
        sql.push(
            " ON CONFLICT (table_name, row_key, column_name) DO UPDATE SET blob_key = EXCLUDED.blob_key, writer = EXCLUDED.writer",
        );
        if let Err(e) = sql.build().execute(self.writing().await?).await {
            return Err(self.failed(e));
        }
        Ok(())
    }
}
