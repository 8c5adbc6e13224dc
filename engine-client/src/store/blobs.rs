//! Blobs on this device (`_engine_blobs`): the bytes put here, with their upload queue, and
//! the bytes downloaded. Each operation is one SQLite statement.

use engine_kernel::BlobKey;

use super::sql::{Sql, ident};
use super::{Store, now_ms};
use crate::error::Result;

/// A blob whose upload is queued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedBlob {
    /// The blob's key.
    pub key: BlobKey,
    /// Its size in bytes.
    pub size: u64,
    /// The media type it was put with.
    pub content_type: Option<String>,
}

impl Store {
    /// Keep `bytes` as blob `key`, its upload queued (unless it is queued or uploaded already).
    pub(crate) async fn put_blob(&self, key: &BlobKey, bytes: &[u8], content_type: Option<&str>) -> Result<()> {
        sqlx::query(
            "INSERT INTO _engine_blobs (key, bytes, content_type, queued_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (key) DO UPDATE SET content_type = coalesce(excluded.content_type, content_type),
               failed = NULL, queued_at = CASE WHEN failed IS NOT NULL THEN excluded.queued_at ELSE queued_at END",
        )
        .bind(key.as_str())
        .bind(bytes)
        .bind(content_type)
        .bind(now_ms())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Keep the downloaded `bytes` of blob `key`.
    pub(crate) async fn keep_blob(&self, key: &BlobKey, bytes: &[u8]) -> Result<()> {
        sqlx::query("INSERT INTO _engine_blobs (key, bytes) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING")
            .bind(key.as_str())
            .bind(bytes)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The bytes of blob `key` on this device.
    pub(crate) async fn blob(&self, key: &BlobKey) -> Result<Option<Vec<u8>>> {
        Ok(sqlx::query_scalar("SELECT bytes FROM _engine_blobs WHERE key = $1")
            .bind(key.as_str())
            .fetch_optional(&self.pool)
            .await?)
    }

    /// The queued uploads, oldest first.
    pub(crate) async fn queued_blobs(&self) -> Result<Vec<QueuedBlob>> {
        let rows: Vec<(String, i64, Option<String>)> = sqlx::query_as(
            "SELECT key, length(bytes), content_type FROM _engine_blobs WHERE queued_at IS NOT NULL
             ORDER BY queued_at, key",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .filter_map(|(key, size, content_type)| {
                Some(QueuedBlob { key: key.parse().ok()?, size: u64::try_from(size).ok()?, content_type })
            })
            .collect())
    }

    /// Take blob `key` off the upload queue: uploaded, or refused for good (`failed`, why).
    pub(crate) async fn dequeue_blob(&self, key: &BlobKey, failed: Option<&str>) -> Result<()> {
        sqlx::query("UPDATE _engine_blobs SET queued_at = NULL, failed = $2 WHERE key = $1")
            .bind(key.as_str())
            .bind(failed)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Where blob `key` stands on this device: queued for upload, refused for good, or kept;
    /// `None` when its bytes are not here.
    pub(crate) async fn blob_state(&self, key: &BlobKey) -> Result<Option<BlobState>> {
        let row: Option<(bool, bool)> =
            sqlx::query_as("SELECT queued_at IS NOT NULL, failed IS NOT NULL FROM _engine_blobs WHERE key = $1")
                .bind(key.as_str())
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.map(|(queued, failed)| match (queued, failed) {
            (true, _) => BlobState::Queued,
            (false, true) => BlobState::Failed,
            (false, false) => BlobState::Cached,
        }))
    }

    /// The blob columns of the synced tables, as (table, column).
    fn blob_columns(&self) -> Vec<(&'static str, &'static str)> {
        super::schema::local_tables(self.app())
            .into_iter()
            .flat_map(|table| table.columns.iter().filter(|c| c.blob).map(move |c| (table.name, c.name)))
            .collect()
    }

    /// Whether a row of the view names blob `key`.
    pub(crate) async fn blob_named(&self, key: &BlobKey) -> Result<bool> {
        for (table, column) in self.blob_columns() {
            let mut sql = Sql::new("SELECT 1 FROM ");
            sql.push(ident(table)).push(" WHERE ").push(ident(column)).push(" = ").push_bind(key.as_str());
            sql.push(" LIMIT 1");
            if sql.build().fetch_optional(&self.pool).await?.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Delete the bytes of the blobs that no row of the view names and that are not queued for
    /// upload: the keys deleted.
    pub(crate) async fn prune_blobs(&self) -> Result<Vec<BlobKey>> {
        let columns = self.blob_columns();
        if columns.is_empty() {
            return Ok(Vec::new());
        }
        let mut sql = Sql::new("DELETE FROM _engine_blobs WHERE queued_at IS NULL AND key NOT IN (");
        let mut named = sql.separated(" UNION ALL ");
        for (table, column) in columns {
            named.push(format_args!(
                "SELECT {column} FROM {table} WHERE {column} IS NOT NULL",
                column = ident(column),
                table = ident(table)
            ));
        }
        sql.push(") RETURNING key");
        let keys: Vec<(String,)> = sql.build_query_as().fetch_all(&self.pool).await?;
        Ok(keys.into_iter().filter_map(|(key,)| key.parse().ok()).collect())
    }
}

/// Where a blob stands, as this client knows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum BlobState {
    /// Not on this device, and not asked of the server since (or since its bytes were pruned).
    #[default]
    Unknown,
    /// On this device, its upload queued: not on the server yet.
    Queued,
    /// On this device, and on the server (uploaded from here, or downloaded).
    Cached,
    /// Its upload was refused for good; the bytes stay on this device.
    Failed,
    /// Not on this device, and the server does not give it yet, while a row here names it: its
    /// writer's upload is under way.
    Uploading,
    /// Not on this device, and the server does not give it to this actor: no row here names it
    /// (or it was never uploaded).
    Missing,
}
