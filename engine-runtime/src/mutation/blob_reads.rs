//! Who may download a blob: an actor that can read a row whose blob column holds the blob's key
//! and that one of the blob's uploaders wrote there (`docs/design.md` §13). The rows are read
//! through a mutation's scoped reads, which see only the actor's buckets.

use engine_kernel::{Actor, BlobKey, MutatorTx};
use serde_json::Value;

use super::{Conn, ServerTx};
use crate::core::Shared;
use crate::error::Result;

/// Whether the actor can read a row whose blob column holds `key` and that one of
/// `uploaders` wrote there, read on `conn`.
pub(crate) async fn can_read_blob(
    core: &Shared,
    conn: &mut sqlx::PgConnection,
    actor: &Actor,
    key: &BlobKey,
    uploaders: &[String],
) -> Result<bool> {
    if !has_blobs(core) {
        return Ok(false);
    }
    // The rows an uploader wrote the key into; whether the actor can read one of them,
    // and whether it still holds the key, the mutation's scoped reads say.
    let written: Vec<(String, Value, String)> = sqlx::query_as(
        "SELECT table_name, row_key, column_name FROM _engine_blob_refs
         WHERE blob_key = $1 AND writer = ANY($2) LIMIT 1000",
    )
    .bind(key.to_string())
    .bind(uploaders)
    .fetch_all(&mut *conn)
    .await?;
    // It never writes, so no transaction begins.
    readable(core, Conn::Deferred(conn), actor, key, written).await
}

/// [`can_read_blob`] on SQLite, read on a reader's connection.
pub(crate) async fn can_read_blob_on_sqlite(
    core: &Shared,
    conn: &mut sqlx::SqliteConnection,
    actor: &Actor,
    key: &BlobKey,
    uploaders: &[String],
) -> Result<bool> {
    if !has_blobs(core) {
        return Ok(false);
    }
    let written: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT table_name, row_key, column_name FROM _engine_blob_refs
         WHERE blob_key = ? AND writer IN (SELECT value FROM json_each(?)) LIMIT 1000",
    )
    .bind(key.to_string())
    .bind(serde_json::to_string(uploaders).expect("strings serialize"))
    .fetch_all(&mut *conn)
    .await?;
    let written = written
        .into_iter()
        .map(|(table, row_key, column)| (table, serde_json::from_str(&row_key).unwrap_or(Value::Null), column))
        .collect();
    readable(core, Conn::Sqlite(conn), actor, key, written).await
}

fn has_blobs(core: &Shared) -> bool {
    core.app.tables().iter().any(|def| def.meta().columns.iter().any(|c| c.blob))
}

/// Whether the actor can read one of the rows `written` (table, key, blob column) that still
/// holds `key`, through the reads of a mutation, which see only the rows of its buckets.
async fn readable(
    core: &Shared,
    conn: Conn<'_>,
    actor: &Actor,
    key: &BlobKey,
    written: Vec<(String, Value, String)>,
) -> Result<bool> {
    let hlc = core.clock.tick_after(None);
    let mut reads = ServerTx::new(conn, core, actor.clone(), hlc, uuid::Uuid::nil());
    for (table_name, row_key, column_name) in written {
        let Some(table) = core.app.table(&table_name) else { continue };
        let Some(column) = table.column(&column_name).filter(|c| c.blob) else { continue };
        let Value::Object(key_values) = row_key else { continue };
        let mut filter = vec![(column.name, Value::String(key.to_string()))];
        for (name, value) in key_values {
            let Some(key_column) = table.column(&name) else { continue };
            filter.push((key_column.name, value));
        }
        if !reads.select(table, filter, Some(1)).await?.is_empty() {
            return Ok(true);
        }
    }
    Ok(false)
}
