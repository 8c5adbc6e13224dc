//! Pull on SQLite (`docs/design.md` §11): one read transaction on a reader of the file, whose
//! first statement fixes its snapshot. The counter it reads is the horizon: every number below
//! it has committed and no later commit takes one below it, so there is nothing to wait for and
//! the client's last mutation is always in the snapshot. The page is taken as on Postgres
//! ([`take_page`]: the same cursor, plan, groups and page), from this snapshot's tombstones
//! and walk; the bucket sets its cursor names are stored by the writer.

use std::collections::BTreeSet;
use std::sync::Mutex;

use engine_kernel::rules::buckets::RuleIndex;
use engine_kernel::wire::PullRequest;
use engine_kernel::{Actor, App, BucketKey, Row, SqlType, TableMeta};
use serde_json::Value;
use sqlx::{Connection, SqliteConnection};

use super::bucket_sets::{self, SetCache, Sets};
use super::cursor::{Group, SetDigest, TombstonePosition};
use super::page::Page;
use super::{PullStart, PullState, Reading, Snapshot, page_limit, take_page, walk};
use crate::core::{Clock, StoreLimits};
use crate::error::{Error, Result};
use crate::rules::held;
use crate::sqlite::Db;

/// What a pull on SQLite reads besides the request: the file, the app and its rules, the bounds
/// and the clock.
pub(crate) struct Store<'a> {
    pub(crate) db: &'a Db,
    pub(crate) app: &'a App,
    pub(crate) rules: &'a RuleIndex,
    pub(crate) limits: &'a StoreLimits,
    pub(crate) clock: &'a Clock,
}

/// The rows and tombstones of the actor's buckets since the request's cursor.
pub(crate) async fn pull(
    store: &Store<'_>,
    pulls: &PullState,
    actor: &Actor,
    request: &PullRequest,
) -> Result<super::Pulled> {
    let limit = page_limit(request)?;
    let key = pulls
        .cursor_key
        .get_or_try_init(|| async { bucket_sets::sqlite::cursor_key(&mut *store.db.writer().await).await })
        .await?
        .clone();
    let mut conn = store.db.readers.acquire().await?;
    let mut tx = conn.begin().await?;
    let start = read_start(store, &mut tx, actor, request.client_id).await?;
    let reading =
        Reading { rules: store.rules, limits: store.limits, clock: store.clock, key: &key, sets: &pulls.bucket_sets };
    let taken =
        take_page(&mut SqliteSnapshot { rules: store.rules, conn: &mut tx }, &reading, actor, request, limit, &start)
            .await?;
    tx.commit().await?;
    drop(conn);
    let (user, bound) = (&actor.user_id, store.limits.bucket_set_bytes);
    bucket_sets::sqlite::store(store.db, &pulls.bucket_sets, user, &taken.named, taken.new, bound).await?;
    Ok(taken.pulled)
}

/// The start of a pull, read in its snapshot: the counter (the horizon is the next number), the
/// tombstone horizon, the client's sequence and every bucket the actor holds.
async fn read_start(
    store: &Store<'_>,
    conn: &mut SqliteConnection,
    actor: &Actor,
    client: uuid::Uuid,
) -> Result<PullStart> {
    let (counter, gc): (i64, Option<String>) = sqlx::query_as(
        "SELECT (SELECT seq FROM _engine_seq WHERE id = 1), (SELECT value FROM _engine_meta WHERE key = 'tombstone_horizon')",
    )
    .fetch_one(&mut *conn)
    .await?;
    let last: Option<i64> =
        sqlx::query_scalar("SELECT last_mutation_id FROM _engine_clients WHERE user_id = ? AND client_id = ?")
            .bind(&actor.user_id)
            .bind(client.to_string())
            .fetch_optional(&mut *conn)
            .await?;
    let (held, since) = held::sqlite::held_since(conn, store.app, actor).await?;
    let number = |n: i64| u64::try_from(n).unwrap_or(0);
    let last = last.map_or(0, number);
    Ok(PullStart {
        horizon: number(counter) + 1,
        tombstone_horizon: gc.and_then(|v| v.parse().ok()).unwrap_or(0),
        // Every committed mutation is in the snapshot.
        last_mutation_id: last,
        synced_mutation_id: last,
        held,
        since,
    })
}

/// A pull's snapshot on SQLite: its read transaction.
struct SqliteSnapshot<'c> {
    rules: &'c RuleIndex,
    conn: &'c mut SqliteConnection,
}

impl Snapshot for SqliteSnapshot<'_> {
    async fn load_sets(&mut self, cache: &Mutex<SetCache>, user: &str, digests: Vec<SetDigest>) -> Result<Sets> {
        bucket_sets::sqlite::load(self.conn, cache, user, digests).await
    }

    async fn tombstones(&mut self, group: &mut Group, to: u64, page: &mut Page<'_>) -> Result<bool> {
        scan_tombstones(self.rules, self.conn, group, to, page).await
    }

    async fn walk(&mut self, group: &mut Group, page: &mut Page<'_>) -> Result<bool> {
        walk::sqlite::walk(self.rules, self.conn, group, page).await
    }
}

/// Take the tombstones numbered below `to` after the group's position into `page`, each with
/// the group's buckets its row left (read from the values it had and has); whether all were
/// taken. Every tombstone read takes an entry of the page, whichever buckets it left, so a page
/// reads at most its size of them.
///
/// A position `(n, 0)` is before tombstone `n`, `(n, 1)` after it.
async fn scan_tombstones(
    rules: &RuleIndex,
    conn: &mut SqliteConnection,
    group: &mut Group,
    to: u64,
    page: &mut Page<'_>,
) -> Result<bool> {
    let limit = page.entries_left();
    if limit == 0 {
        return Ok(false);
    }
    let first = group.tombstones.xid + u64::from(group.tombstones.id > 0);
    let number = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let rows: Vec<(i64, String, String, String, Option<String>)> = sqlx::query_as(
        "SELECT seq, table_name, key, old, new FROM _engine_tombstones WHERE seq >= ? AND seq < ? ORDER BY seq LIMIT ?",
    )
    .bind(number(first))
    .bind(number(to))
    .bind(i64::try_from(limit).unwrap_or(i64::MAX))
    .fetch_all(&mut *conn)
    .await?;
    let taken = rows.len();
    for (seq, table_name, key, old, new) in rows {
        group.tombstones = TombstonePosition { xid: u64::try_from(seq).unwrap_or(0), id: 1 };
        let Some(table) = rules.table(&table_name) else {
            page.add_tombstone(table_name, Row::new(), Vec::new());
            continue;
        };
        let before = rules.row_buckets(table, &wire_row(table, &old)?);
        let after = match new {
            Some(new) => rules.row_buckets(table, &wire_row(table, &new)?),
            None => BTreeSet::new(),
        };
        let left: Vec<BucketKey> =
            before.difference(&after).filter(|b| group.buckets.binary_search(b).is_ok()).cloned().collect();
        page.add_tombstone(table_name, wire_row(table, &key)?, left);
    }
    if taken == limit {
        return Ok(false);
    }
    group.tombstones = group.tombstones.max(TombstonePosition::at(to));
    Ok(true)
}

/// The columns of `table` in `json` (an object of stored values a trigger wrote), in their wire
/// form: a boolean column's 0 or 1 as `false` or `true`.
fn wire_row(table: &TableMeta, json: &str) -> Result<Row> {
    let Ok(Value::Object(stored)) = serde_json::from_str::<Value>(json) else {
        return Err(Error::internal(format!("a tombstone of `{}` holds no object", table.name)));
    };
    Ok(stored
        .into_iter()
        .map(|(name, value)| {
            let boolean = table.column(&name).is_some_and(|c| c.sql_type == SqlType::Boolean);
            let value = match value {
                Value::Number(n) if boolean => Value::Bool(n.as_i64() != Some(0)),
                other => other,
            };
            (name, value)
        })
        .collect())
}
