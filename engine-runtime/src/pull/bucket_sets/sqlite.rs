//! The bucket sets and the cursor key on SQLite, as on Postgres: a set is stored under its
//! digest before the first cursor naming it is handed out, and cached once read or stored.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use engine_kernel::BucketKey;
use engine_sqlite::Sql;
use sqlx::SqliteConnection;

use crate::sqlite::Db;

use super::{CursorKey, SetCache, SetDigest, Sets, cached, keep_stored};
use crate::error::{Error, Result};

/// `user`'s sets `digests` names, from the cache or the file; a set that is not found is
/// absent.
pub(crate) async fn load(
    conn: &mut SqliteConnection,
    cache: &Mutex<SetCache>,
    user: &str,
    digests: Vec<SetDigest>,
) -> Result<Sets> {
    let (mut found, missing) = cached(cache, digests);
    if missing.is_empty() {
        return Ok(found);
    }
    let mut sql = Sql::new("SELECT digest, buckets FROM _engine_bucket_sets WHERE digest IN (");
    let mut list = sql.separated(", ");
    for digest in &missing {
        list.push_bind(digest.as_str());
    }
    sql.push(")");
    let rows: Vec<(String, String)> = sql.build_query_as().fetch_all(&mut *conn).await?;
    // Each set is stored as the JSON array of its keys.
    let rows = rows.into_iter().filter_map(|(digest, keys)| Some((digest, serde_json::from_str(&keys).ok()?)));
    keep_stored(cache, &mut found, user, rows);
    Ok(found)
}

/// Store `new`, `user`'s sets a sealed cursor names that were not stored yet, and mark every
/// set it names used (a set this process marked within the last hour is left as it is). Once
/// `user`'s sets hold more than `bound` bytes of keys, the ones marked least recently go,
/// except those `named` (as on Postgres). The writer is taken only when there is something to
/// write, so that a pull does not queue behind pushes for nothing.
pub(crate) async fn store(
    db: &Db,
    cache: &Mutex<SetCache>,
    user: &str,
    named: &[SetDigest],
    new: Vec<(SetDigest, Vec<BucketKey>)>,
    bound: usize,
) -> Result<()> {
    let lock = || cache.lock().unwrap_or_else(PoisonError::into_inner);
    let new: Vec<_> = new.into_iter().filter(|(digest, _)| !lock().fresh(digest)).collect();
    let unmarked: Vec<&SetDigest> = named.iter().filter(|digest| !lock().fresh(digest)).collect();
    if new.is_empty() && unmarked.is_empty() {
        return Ok(());
    }
    let mut conn = db.writer().await;
    let conn = &mut *conn;
    let mut stored = false;
    for (digest, buckets) in new {
        let keys: Vec<&str> = buckets.iter().map(BucketKey::as_str).collect();
        let bytes: usize = keys.iter().map(|k| k.len()).sum();
        sqlx::query(
            "INSERT INTO _engine_bucket_sets (digest, buckets, used_at, user_id, bytes) VALUES (?, ?, ?, ?, ?)
             ON CONFLICT (digest) DO UPDATE SET used_at = excluded.used_at",
        )
        .bind(digest.as_str())
        .bind(serde_json::to_string(&keys).expect("strings serialize"))
        .bind(crate::sqlite::now_ms())
        .bind(user)
        .bind(i64::try_from(bytes).unwrap_or(i64::MAX))
        .execute(&mut *conn)
        .await?;
        lock().put(digest, Arc::new(buckets), Some(Instant::now()));
        stored = true;
    }
    for digest in unmarked {
        let set = lock().get(digest);
        sqlx::query("UPDATE _engine_bucket_sets SET used_at = ? WHERE digest = ?")
            .bind(crate::sqlite::now_ms())
            .bind(digest.as_str())
            .execute(&mut *conn)
            .await?;
        if let Some(set) = set {
            lock().put(digest.clone(), set, Some(Instant::now()));
        }
    }
    if stored {
        let mut sql = Sql::new(
            "DELETE FROM _engine_bucket_sets WHERE digest IN (
               SELECT digest FROM (
                 SELECT digest, sum(bytes) OVER (ORDER BY used_at DESC, digest) AS kept
                 FROM _engine_bucket_sets WHERE user_id = ",
        );
        sql.push_bind(user).push(") WHERE kept > ").push_bind(i64::try_from(bound).unwrap_or(i64::MAX));
        sql.push(" AND digest NOT IN (");
        let mut list = sql.separated(", ");
        for digest in named {
            list.push_bind(digest.as_str());
        }
        // `NOT IN ()` is SQLite's too: no set is spared when the cursor names none.
        sql.push(")) RETURNING digest");
        let evicted: Vec<String> = sql.build_query_scalar().fetch_all(&mut *conn).await?;
        let mut cache = lock();
        for digest in evicted {
            cache.remove(&SetDigest::from_stored(digest));
        }
    }
    Ok(())
}

/// The file's cursor key, made the first time it is asked for.
pub(crate) async fn cursor_key(conn: &mut SqliteConnection) -> Result<CursorKey> {
    let made = format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
    sqlx::query("INSERT INTO _engine_meta (key, value) VALUES ('cursor_key', ?) ON CONFLICT (key) DO NOTHING")
        .bind(made)
        .execute(&mut *conn)
        .await?;
    let key: String =
        sqlx::query_scalar("SELECT value FROM _engine_meta WHERE key = 'cursor_key'").fetch_one(&mut *conn).await?;
    if key.len() >= 32 {
        Ok(CursorKey::new(key.as_bytes()))
    } else {
        Err(Error::internal("the database's cursor key is too short"))
    }
}
