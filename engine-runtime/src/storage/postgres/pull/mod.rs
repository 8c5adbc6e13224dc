//! Pull: the rows and tombstones of the actor's buckets since the cursor, below the safe horizon
//! (`docs/design.md` §1–3, `docs/protocol.md#post-syncpull`).
//!
//! One pull is one `REPEATABLE READ` transaction. Its horizon is the snapshot's `xmin`: every
//! transaction below it has finished, so a transaction that commits late is delivered by a later
//! pull instead of being skipped. Each group of buckets in the cursor goes on from its own
//! position: first the tombstones up to the target of its walk, then the walk through its rows
//! (`walk.rs`), so a row is never sent before a tombstone that came before it.
//!
//! - `page.rs`: the page as it fills, bounded by entries and bytes.
//! - `walk.rs`: the walk through a group's rows.

mod page;
mod walk;

#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

use engine_kernel::wire::PullRequest;
use engine_kernel::{Actor, BucketKey};
use serde_json::Value;
use sqlx::{PgConnection, Row as _};

use super::{PostgresStorage, bucket_sets};
use crate::cursor::{Cursor, CursorKey, Group, MAX_GROUPS, SetDigest, TombstonePosition, Walk};
use crate::error::{Error, Result};
use crate::storage::Pulled;
use crate::storage::postgres::sql;
use page::Page;

/// The page size when the request names none.
pub const DEFAULT_PULL_LIMIT: u32 = 1_000;
/// The largest page a request may ask for.
pub const MAX_PULL_LIMIT: u32 = 10_000;

/// How often a pull takes a fresh snapshot to include the client's own last mutation.
const OWN_WRITES_RETRIES: u32 = 3;

/// Planner settings of a pull's transaction. A page's plan must not depend on statistics the
/// planner may lack (rows just written are never analyzed): the walk's ordered index range scans
/// are the plan, and these keep the planner off the paths that would read whole buckets. A path
/// they rule out costs 10^10, which would make every such plan worth compiling: no JIT.
pub(super) const PLANNER: &str = "SET LOCAL enable_bitmapscan = off; SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off; SET LOCAL max_parallel_workers_per_gather = 0; SET LOCAL jit = off";

/// The safe horizon of the transaction's snapshot: the oldest transaction still running that may
/// write this database, or the snapshot's `xmax` when there is none. Every transaction below it
/// has finished, so rows below it never appear later.
///
/// The snapshot's `xmin` alone would do, but it counts transactions of every database of the
/// cluster; one proven to belong to another database (its backend is connected there, or it is a
/// transaction prepared there) can never write these tables and does not hold pulls back. One
/// that cannot be placed (its backend already gone, or hidden by privileges) counts.
pub(crate) const HORIZON: &str = "
    WITH snap AS (SELECT pg_current_snapshot() AS s)
    SELECT coalesce(
        (SELECT min(x) FROM snap, pg_snapshot_xip(snap.s) AS x
         WHERE NOT EXISTS (
                 SELECT 1 FROM pg_stat_activity a
                 WHERE a.backend_xid IS NOT NULL AND a.datname IS DISTINCT FROM current_database()
                   AND a.backend_xid::text::bigint = (x::text::numeric % 4294967296)::bigint)
           AND NOT EXISTS (
                 SELECT 1 FROM pg_prepared_xacts p
                 WHERE p.database IS DISTINCT FROM current_database()
                   AND p.transaction::text::bigint = (x::text::numeric % 4294967296)::bigint)),
        (SELECT pg_snapshot_xmax(s) FROM snap))::text";

pub(crate) async fn pull(store: &PostgresStorage, actor: &Actor, request: &PullRequest) -> Result<Pulled> {
    let limit = match request.limit {
        Some(0) => return Err(Error::MalformedRequest("`limit` is at least 1".into())),
        Some(n) => n.min(MAX_PULL_LIMIT),
        None => DEFAULT_PULL_LIMIT,
    } as usize;
    store.on_session(async |conn| pull_on(store, conn, actor, request, limit).await).await
}

/// A page of at most `limit` rows, read on `conn`.
async fn pull_on(
    store: &PostgresStorage,
    conn: &mut PgConnection,
    actor: &Actor,
    request: &PullRequest,
    limit: usize,
) -> Result<Pulled> {
    // Read before the pull's transaction begins: the first reading may write it.
    let key = store.cursor_key(conn).await?;
    // Read your writes: when the client's own last mutation is above this snapshot's horizon
    // (a transaction that began before it still runs, or one that cannot be placed in another
    // database has just ended), a fresh snapshot a moment later usually has it.
    let mut attempt = 0;
    let (mut tx, start) = loop {
        let floor = store.horizon_floor();
        // The planner's settings go with `BEGIN`, in one round trip: they take no snapshot.
        let begin = format!("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; {PLANNER}");
        let mut tx = sqlx::Connection::begin_with(&mut *conn, sqlx::AssertSqlSafe(begin)).await?;
        // The first statement that reads fixes the snapshot and reads the horizon from it, with
        // the tombstone horizon and the client's sequence.
        let start = store.read_pull_start(&mut tx, actor, request.client_id, floor).await?;
        if start.synced_mutation_id >= start.last_mutation_id || attempt == OWN_WRITES_RETRIES {
            break (tx, start);
        }
        tx.rollback().await?;
        attempt += 1;
        tokio::time::sleep(std::time::Duration::from_millis(5 * u64::from(attempt))).await;
    };
    let (horizon, gc_horizon) = (start.horizon, start.tombstone_horizon);

    let held = start.held.clone();
    let all_held = held.clone();
    if held.len() > store.limits.buckets_per_actor {
        return Err(Error::TooManyBuckets { held: held.len(), limit: store.limits.buckets_per_actor });
    }
    let requested: BTreeSet<BucketKey> = match &request.buckets {
        None => held,
        Some(subset) => {
            if let Some(missing) = subset.iter().find(|b| !held.contains(b)) {
                return Err(Error::Forbidden(format!("the actor does not hold bucket `{missing}`")));
            }
            subset.iter().cloned().collect()
        }
    };

    let (mut cursor, mut reset) = match request.cursor.as_deref() {
        None => (Cursor::default(), false),
        Some(text) => match open_cursor(store, &mut tx, &key, &actor.user_id, text).await? {
            Some(cursor) => (cursor, false),
            None => (Cursor::default(), true),
        },
    };
    if cursor.groups.iter().any(|g| g.tombstones.xid < gc_horizon) {
        // Tombstones this client still needs were collected: start its buckets afresh.
        cursor = Cursor::default();
        reset = true;
    }

    // The buckets of a rule that selects other rows than when the cursor was written leave it
    // and are reported removed; the next pull back-fills them afresh. The other buckets go on.
    let changed_rules: BTreeSet<&str> = cursor
        .rules
        .iter()
        .filter(|(rule, version)| store.rules.version(rule) != Some(version.as_str()))
        .map(|(rule, _)| rule.as_str())
        .collect();
    let resynced: BTreeSet<BucketKey> =
        cursor.buckets().filter(|b| changed_rules.contains(b.rule()) && all_held.contains(b)).cloned().collect();
    let requested: BTreeSet<BucketKey> = requested.difference(&resynced).cloned().collect();
    let all_held: BTreeSet<BucketKey> = all_held.difference(&resynced).cloned().collect();

    // Buckets the actor lost leave the cursor and are reported; held buckets a subset pull did not
    // ask for stay in the cursor where they were, untouched.
    let known: BTreeSet<BucketKey> = cursor.buckets().cloned().collect();
    let removed_buckets: Vec<BucketKey> = known.difference(&all_held).cloned().collect();
    let mut groups: Vec<Group> = Vec::new();
    let mut parked: Vec<Group> = Vec::new();
    for group in cursor.groups {
        let (asked, other): (Vec<BucketKey>, Vec<BucketKey>) =
            group.buckets.iter().filter(|&b| all_held.contains(b)).cloned().partition(|b| requested.contains(b));
        if !other.is_empty() {
            parked.push(Group { buckets: other, ..group.clone() });
        }
        if !asked.is_empty() {
            groups.push(Group { buckets: asked, ..group });
        }
    }
    let fresh: Vec<BucketKey> = requested.difference(&known).cloned().collect();
    if !fresh.is_empty() {
        groups.push(Group::fresh(fresh, horizon));
    }
    groups.sort_by_key(|g| (g.rows, g.tombstones));

    let mut page = Page::new(&store.rules, &requested, limit, store.limits.page_bytes);
    for group in &mut groups {
        if page.is_full() {
            break;
        }
        scan_group(store, &mut tx, group, horizon, &mut page).await?;
    }
    let has_more = !resynced.is_empty() || groups.iter().any(|g| !g.is_caught_up(horizon) && is_ready(g, horizon));
    groups.extend(parked);
    let groups = bound_groups(merge_groups(groups));

    tx.commit().await?;
    let rules = groups
        .iter()
        .flat_map(|g| g.buckets.iter().map(|b| b.rule()))
        .filter_map(|rule| Some((rule.to_owned(), store.rules.version(rule)?.to_owned())))
        .collect();
    let (cursor, sets) = Cursor::new(groups, rules).seal(&key, &actor.user_id);
    bucket_sets::store(conn, &store.bucket_sets, sets).await?;

    // The server's clock reads past every stamp this page delivers, so the client's next
    // writes order after them, whichever instance stamped them.
    let server_hlc = {
        let mut clock = store.clock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(newest) = page.newest() {
            clock.observe(&newest);
        }
        clock.tick(engine_kernel::hlc::wall_clock_ms())
    };
    let mut pulled = page.finish();
    pulled.removed_buckets = removed_buckets;
    pulled.cursor = cursor;
    pulled.has_more = has_more;
    pulled.reset = reset;
    pulled.last_mutation_id = start.last_mutation_id;
    pulled.synced_mutation_id = Some(start.synced_mutation_id);
    pulled.server_hlc = Some(server_hlc);
    Ok(pulled)
}

/// The cursor `text`, opened and its stored bucket sets looked up; `None` when it is not a
/// cursor of this database for this user, or names a set that is gone.
async fn open_cursor(
    store: &PostgresStorage,
    conn: &mut PgConnection,
    key: &CursorKey,
    user: &str,
    text: &str,
) -> Result<Option<Cursor>> {
    let Ok(opened) = Cursor::open(text, key, user) else { return Ok(None) };
    let digests: Vec<SetDigest> = opened.stored_sets().cloned().collect();
    let sets = if digests.is_empty() {
        Default::default()
    } else {
        bucket_sets::load(conn, &store.bucket_sets, digests).await?
    };
    Ok(opened.resolve(|digest| sets.get(digest).map(|set| set.as_ref().clone())).ok())
}

/// At most [`MAX_GROUPS`] groups: beyond that, the two groups whose row positions are closest
/// become one at the earlier of their positions (rows and tombstones between the two are sent
/// again, which clients apply as they did the first time).
fn bound_groups(mut groups: Vec<Group>) -> Vec<Group> {
    while groups.len() > MAX_GROUPS {
        groups.sort_by_key(|g| (g.rows, g.tombstones));
        let closest =
            (1..groups.len()).min_by_key(|&i| groups[i].rows - groups[i - 1].rows).expect("two groups or more");
        let later = groups.remove(closest);
        let earlier = &mut groups[closest - 1];
        earlier.buckets.extend(later.buckets);
        earlier.buckets.sort();
        earlier.buckets.dedup();
        earlier.tombstones = earlier.tombstones.min(later.tombstones);
        // A walk's position is its buckets' own: the merged group walks again from its start.
        earlier.walk = None;
    }
    groups
}

/// Groups that reached the same position become one.
fn merge_groups(groups: Vec<Group>) -> Vec<Group> {
    let mut merged: Vec<Group> = Vec::new();
    for group in groups {
        let same = |g: &Group| g.rows == group.rows && g.tombstones == group.tombstones;
        match merged.iter_mut().find(|g| g.walk.is_none() && group.walk.is_none() && same(g)) {
            Some(existing) => {
                existing.buckets.extend(group.buckets);
                existing.buckets.sort();
                existing.buckets.dedup();
            }
            None => merged.push(group),
        }
    }
    merged
}

/// Whether `group` can go on in a snapshot of `horizon`: a walk begun by a server that had seen
/// a later horizon waits until this one has too.
fn is_ready(group: &Group, horizon: u64) -> bool {
    group.walk.as_ref().is_none_or(|w| w.to <= horizon)
}

/// Take what `group` has below `horizon` into `page`, as far as it has room: tombstones up to
/// the walk's target, then the walk; a finished walk starts the next, up to `horizon`.
async fn scan_group(
    store: &PostgresStorage,
    conn: &mut PgConnection,
    group: &mut Group,
    horizon: u64,
    page: &mut Page<'_>,
) -> Result<()> {
    while !page.is_full() && !group.is_caught_up(horizon) && is_ready(group, horizon) {
        let to = group.walk.get_or_insert(Walk { to: horizon.max(group.rows), lane: None, point: None }).to;
        if group.tombstones < TombstonePosition::at(to) && !scan_tombstones(conn, group, to, page).await? {
            return Ok(());
        }
        if to > group.rows && !walk::walk(store, conn, group, page).await? {
            return Ok(());
        }
        group.rows = to;
        group.walk = None;
    }
    Ok(())
}

/// Take the tombstones of `group` below `to` into `page`; whether all were taken.
async fn scan_tombstones(conn: &mut PgConnection, group: &mut Group, to: u64, page: &mut Page<'_>) -> Result<bool> {
    let limit = page.entries_left();
    if limit == 0 {
        return Ok(false);
    }
    let keys: Vec<&str> = group.buckets.iter().map(BucketKey::as_str).collect();
    let rows = sqlx::query(
        // Ordered by the column, not by the text the select list names `xid` as: text would sort
        // transaction 100 before 99, and a page cut there would skip tombstones.
        "SELECT t.id, t.xid::text, t.table_name, t.key, t.buckets FROM _engine_tombstones AS t
         WHERE (t.xid, t.id) > ($1::text::xid8, $2) AND t.xid < $3::text::xid8 AND t.buckets && $4::text[]
         ORDER BY t.xid, t.id LIMIT $5",
    )
    .bind(group.tombstones.xid.to_string())
    .bind(group.tombstones.id)
    .bind(to.to_string())
    .bind(&keys)
    .bind(i64::try_from(limit).unwrap_or(i64::MAX))
    .fetch_all(&mut *conn)
    .await?;
    let taken = rows.len();
    for row in rows {
        let id: i64 = row.try_get(0).map_err(Error::Database)?;
        let xid: String = row.try_get(1).map_err(Error::Database)?;
        let table: String = row.try_get(2).map_err(Error::Database)?;
        let key: Value = row.try_get(3).map_err(Error::Database)?;
        let buckets: Vec<String> = row.try_get(4).map_err(Error::Database)?;
        let buckets =
            buckets.iter().filter_map(|b| BucketKey::parse(b).ok()).filter(|b| group.buckets.contains(b)).collect();
        let xid = sql::xid(&xid)?;
        group.tombstones = TombstonePosition { xid, id };
        if let Value::Object(key) = key {
            page.add_tombstone(table, key, buckets);
        }
    }
    if taken == limit {
        return Ok(false);
    }
    group.tombstones = group.tombstones.max(TombstonePosition::at(to));
    Ok(true)
}
