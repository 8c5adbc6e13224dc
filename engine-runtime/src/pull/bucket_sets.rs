//! The bucket sets cursors name by digest, and the key that signs cursors, both kept in the
//! database so that every instance of a server reads the cursors of the others.
//!
//! A set is stored before the first cursor naming it is handed out and never changes (its name
//! is the digest of its user and content), so an instance caches the sets it has read or
//! stored. Each user's sets are its own, and bounded (`StoreLimits::bucket_set_bytes`): once a
//! user's sets hold more, the ones a cursor named least recently are deleted, never those the
//! cursor just sealed names, so a user who replays old cursors with new subsets fills no more
//! than its bound and costs nobody else anything. Sets unused for longer than the tombstone
//! retention are collected with the tombstones: a cursor that old starts afresh anyway.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use engine_kernel::BucketKey;
use sqlx::PgConnection;

use super::cursor::{CursorKey, SetDigest};

pub(crate) mod sqlite;
use crate::error::{Error, Result};

/// How many bucket keys the cache holds before it starts over.
const CACHE_KEYS: usize = 1_000_000;

/// How often a set a cursor names is marked used again, so that collection spares it.
const REFRESH: Duration = Duration::from_secs(3600);

/// The sets this instance has read or stored, by digest, with when it last marked each used.
#[derive(Debug, Default)]
pub(crate) struct SetCache {
    sets: HashMap<SetDigest, (Arc<Vec<BucketKey>>, Option<Instant>)>,
    keys: usize,
}

impl SetCache {
    fn get(&self, digest: &SetDigest) -> Option<Arc<Vec<BucketKey>>> {
        self.sets.get(digest).map(|(set, _)| Arc::clone(set))
    }

    /// Whether this instance marked the set used within [`REFRESH`].
    fn fresh(&self, digest: &SetDigest) -> bool {
        self.sets.get(digest).and_then(|(_, marked)| *marked).is_some_and(|at| at.elapsed() < REFRESH)
    }

    fn put(&mut self, digest: SetDigest, buckets: Arc<Vec<BucketKey>>, marked: Option<Instant>) {
        if self.keys + buckets.len() > CACHE_KEYS {
            self.sets.clear();
            self.keys = 0;
        }
        self.keys += buckets.len();
        if let Some((old, _)) = self.sets.insert(digest, (buckets, marked)) {
            self.keys -= old.len();
        }
    }

    /// Forget `digest`, deleted from the database.
    fn remove(&mut self, digest: &SetDigest) {
        if let Some((old, _)) = self.sets.remove(digest) {
            self.keys -= old.len();
        }
    }
}

/// Stored sets by digest.
pub(crate) type Sets = HashMap<SetDigest, Arc<Vec<BucketKey>>>;

/// The sets of `digests` that `cache` holds, and the digests of the others.
fn cached(cache: &Mutex<SetCache>, digests: Vec<SetDigest>) -> (Sets, Vec<SetDigest>) {
    let cache = cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut found = HashMap::new();
    let mut missing = Vec::new();
    for digest in digests {
        match cache.get(&digest) {
            Some(set) => {
                found.insert(digest, set);
            }
            None => missing.push(digest),
        }
    }
    (found, missing)
}

/// `user`'s sets `digests` names, from the cache or the database; a set that is not found is
/// absent.
pub(crate) async fn load(
    conn: &mut PgConnection,
    cache: &Mutex<SetCache>,
    user: &str,
    digests: Vec<SetDigest>,
) -> Result<Sets> {
    let (mut found, missing) = cached(cache, digests);
    if missing.is_empty() {
        return Ok(found);
    }
    let rows: Vec<(String, Vec<String>)> =
        sqlx::query_as("SELECT digest, buckets FROM _engine_bucket_sets WHERE digest = ANY($1)")
            .bind(missing.iter().map(SetDigest::as_str).collect::<Vec<_>>())
            .fetch_all(&mut *conn)
            .await?;
    keep_stored(cache, &mut found, user, rows);
    Ok(found)
}

/// Add the stored sets `rows` (a digest and its bucket keys) to `found` and to `cache`, each
/// only when it is `user`'s and its content has its digest.
fn keep_stored(
    cache: &Mutex<SetCache>,
    found: &mut Sets,
    user: &str,
    rows: impl IntoIterator<Item = (String, Vec<String>)>,
) {
    let mut cache = cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    for (stored, buckets) in rows {
        let Ok(buckets) = buckets.iter().map(|b| BucketKey::parse(b)).collect::<Result<Vec<_>, _>>() else { continue };
        // The name is the digest of the user and the content: a set that does not match its
        // name is no set (nor another user's). One stored before sets were each user's is
        // named by its content alone.
        let digest =
            [SetDigest::of(user, &buckets), SetDigest::shared(&buckets)].into_iter().find(|d| d.as_str() == stored);
        let Some(digest) = digest else { continue };
        let buckets = Arc::new(buckets);
        cache.put(digest.clone(), Arc::clone(&buckets), None);
        found.insert(digest, buckets);
    }
}

/// Store `new`, `user`'s sets a sealed cursor names that were not stored yet, and mark every
/// set it names used (one this instance marked within the last hour is left as it is), before
/// the cursor is handed out. Once `user`'s sets hold more than `bound` bytes of keys, the ones
/// marked least recently go, except those `named`.
pub(crate) async fn store(
    conn: &mut PgConnection,
    cache: &Mutex<SetCache>,
    user: &str,
    named: &[SetDigest],
    new: Vec<(SetDigest, Vec<BucketKey>)>,
    bound: usize,
) -> Result<()> {
    let lock = || cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut stored = false;
    for (digest, buckets) in new {
        if lock().fresh(&digest) {
            continue;
        }
        let keys: Vec<&str> = buckets.iter().map(BucketKey::as_str).collect();
        let bytes: usize = keys.iter().map(|k| k.len()).sum();
        sqlx::query(
            "INSERT INTO _engine_bucket_sets (digest, user_id, buckets, bytes) VALUES ($1, $2, $3, $4)
             ON CONFLICT (digest) DO UPDATE SET used_at = now()",
        )
        .bind(digest.as_str())
        .bind(user)
        .bind(&keys)
        .bind(i32::try_from(bytes).unwrap_or(i32::MAX))
        .execute(&mut *conn)
        .await?;
        lock().put(digest, Arc::new(buckets), Some(Instant::now()));
        stored = true;
    }
    for digest in named {
        let Some(set) = ({
            let cache = lock();
            if cache.fresh(digest) { None } else { Some(cache.get(digest)) }
        }) else {
            continue;
        };
        sqlx::query("UPDATE _engine_bucket_sets SET used_at = now() WHERE digest = $1")
            .bind(digest.as_str())
            .execute(&mut *conn)
            .await?;
        if let Some(set) = set {
            lock().put(digest.clone(), set, Some(Instant::now()));
        }
    }
    if stored {
        let named: Vec<&str> = named.iter().map(SetDigest::as_str).collect();
        let evicted: Vec<String> = sqlx::query_scalar(
            "DELETE FROM _engine_bucket_sets WHERE digest IN (
               SELECT digest FROM (
                 SELECT digest, sum(bytes) OVER (ORDER BY used_at DESC, digest) AS kept
                 FROM _engine_bucket_sets WHERE user_id = $1) AS s
               WHERE kept > $2 AND digest <> ALL($3))
             RETURNING digest",
        )
        .bind(user)
        .bind(i64::try_from(bound).unwrap_or(i64::MAX))
        .bind(&named)
        .fetch_all(&mut *conn)
        .await?;
        let mut cache = lock();
        for digest in evicted {
            cache.remove(&SetDigest::from_stored(digest));
        }
    }
    Ok(())
}

/// The database's cursor key, made the first time a server asks for it.
pub(crate) async fn cursor_key(conn: &mut PgConnection) -> Result<CursorKey> {
    for _ in 0..2 {
        let made = format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
        sqlx::query("INSERT INTO _engine_meta (key, value) VALUES ('cursor_key', $1) ON CONFLICT (key) DO NOTHING")
            .bind(made)
            .execute(&mut *conn)
            .await?;
        // Made by this call or another: the row is there once either committed.
        let key: Option<String> = sqlx::query_scalar("SELECT value FROM _engine_meta WHERE key = 'cursor_key'")
            .fetch_optional(&mut *conn)
            .await?;
        if let Some(key) = key {
            return if key.len() >= 32 {
                Ok(CursorKey::new(key.as_bytes()))
            } else {
                Err(Error::internal("the database's cursor key is too short"))
            };
        }
    }
    Err(Error::internal("the database's cursor key could not be made"))
}
