//! Who may download a blob: an actor that can read a row whose blob column holds the blob's key
//! and that one of the blob's uploaders wrote there (`docs/design.md` §13). The rows are read
//! through a mutation's scoped reads, which see only the actor's buckets.

use engine_kernel::{Actor, BlobKey, MutatorTx};
use serde_json::Value;

use super::{Conn, ServerTx};
use crate::core::Core;
use crate::error::Result;

/// Whether the actor can read a row whose blob column holds `key` and that one of
/// `uploaders` wrote there, read on `conn`.
pub(crate) async fn can_read_blob(
    core: &Core,
    conn: &mut sqlx::PgConnection,
    actor: &Actor,
    key: &BlobKey,
    uploaders: &[String],
) -> Result<bool> {
    let has_blobs = core.app.tables().iter().any(|def| def.meta().columns.iter().any(|c| c.blob));
    if !has_blobs {
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
    let hlc = core.clock.tick_after(None);
    // The reads of a mutation, which see only the rows of the actor's buckets; it
    // never writes, so no transaction begins.
    let mut reads = ServerTx::new(Conn::Deferred(conn), core, actor.clone(), hlc, uuid::Uuid::nil());
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
