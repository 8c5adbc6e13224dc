//! Pull: the rows and tombstones of the actor's buckets since the cursor, below the safe horizon
//! (DESIGN.md decisions 1–3, PROTOCOL.md `POST /sync/pull`).
//!
//! One pull is one `REPEATABLE READ` transaction. Its horizon is the snapshot's `xmin`: every
//! transaction below it has finished, so a transaction that commits late is delivered by a later
//! pull instead of being skipped. Each group of buckets in the cursor is scanned from its own
//! position, in SQL with `LIMIT`; a page never holds the same row for the same bucket both as a
//! change and as a tombstone, so clients may apply its two lists in any order.

use std::collections::{BTreeMap, BTreeSet};

use engine_kernel::wire::{Change, PullRequest, PullResponse, Tombstone};
use engine_kernel::{Actor, BucketKey, Row, TableMeta};
use serde_json::Value;
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row as _};

use super::selection::{self, Buckets, Sql};
use super::sql::ident;
use super::values::decode_row;
use super::{PostgresStorage, bucket_sets, held};
use crate::buckets::RuleSelection;
use crate::cursor::{Cursor, CursorKey, Group, MAX_GROUPS, RowPosition, SetDigest, TombstonePosition};
use crate::error::{Error, Result};

/// The page size when the request names none.
pub const DEFAULT_PULL_LIMIT: u32 = 1_000;
/// The largest page a request may ask for.
pub const MAX_PULL_LIMIT: u32 = 10_000;

/// How often a pull takes a fresh snapshot to include the client's own last mutation.
const OWN_WRITES_RETRIES: u32 = 3;

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

/// One entry of a page, in the change stream's order.
enum Entry {
    Row { xid: u64, table: &'static TableMeta, seq: usize, row: Row },
    Tombstone { xid: u64, id: i64, table: String, key: Row, buckets: Vec<BucketKey> },
}

impl Entry {
    /// A total order consistent with each stream's own SQL order.
    fn order(&self) -> (u64, u8, &str, usize, i64) {
        match self {
            Entry::Tombstone { xid, id, .. } => (*xid, 0, "", 0, *id),
            Entry::Row { xid, table, seq, .. } => (*xid, 1, table.name, *seq, 0),
        }
    }
}

pub(crate) async fn pull(store: &PostgresStorage, actor: &Actor, request: &PullRequest) -> Result<PullResponse> {
    let limit = match request.limit {
        Some(0) => return Err(Error::MalformedRequest("`limit` is at least 1".into())),
        Some(n) => n.min(MAX_PULL_LIMIT),
        None => DEFAULT_PULL_LIMIT,
    } as usize;
    // Read your writes: when the client's own last mutation is above this snapshot's horizon
    // (a transaction that began before it still runs, or one that cannot be placed in another
    // database has just ended), a fresh snapshot a moment later usually has it.
    let mut attempt = 0;
    let (mut tx, start) = loop {
        let floor = store.horizon_floor();
        let mut tx = store.pool.begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").await?;
        // The first statement fixes the snapshot and reads the horizon from it, with the
        // tombstone horizon and the client's sequence.
        let start = store.read_pull_start(&mut tx, &actor.user_id, request.client_id, floor).await?;
        if start.synced_mutation_id >= start.last_mutation_id || attempt == OWN_WRITES_RETRIES {
            break (tx, start);
        }
        tx.rollback().await?;
        attempt += 1;
        tokio::time::sleep(std::time::Duration::from_millis(5 * u64::from(attempt))).await;
    };
    let (horizon, gc_horizon) = (start.horizon, start.tombstone_horizon);

    let held = held::held_buckets(&mut tx, &store.app, &store.memberships, actor).await?;
    let requested: BTreeSet<BucketKey> = match &request.buckets {
        None => held,
        Some(subset) => {
            if let Some(missing) = subset.iter().find(|b| !held.contains(b)) {
                return Err(Error::Forbidden(format!("the actor does not hold bucket `{missing}`")));
            }
            subset.iter().cloned().collect()
        }
    };

    let key = store.cursor_key().await?;
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

    let known: BTreeSet<BucketKey> = cursor.buckets().cloned().collect();
    let removed_buckets: Vec<BucketKey> = known.difference(&requested).cloned().collect();
    let mut groups: Vec<Group> = cursor
        .groups
        .into_iter()
        .filter_map(|mut g| {
            g.buckets.retain(|b| requested.contains(b));
            (!g.buckets.is_empty()).then_some(g)
        })
        .collect();
    let fresh: Vec<BucketKey> = requested.difference(&known).cloned().collect();
    if !fresh.is_empty() {
        groups.push(Group::fresh(fresh, horizon));
    }
    groups.sort_by(|a, b| (a.rows.xid, &a.rows.table).cmp(&(b.rows.xid, &b.rows.table)));

    let mut remaining = limit;
    let mut changes: Vec<(Change, &'static TableMeta)> = Vec::new();
    let mut tombstones: Vec<Tombstone> = Vec::new();
    let mut groups_scanned = 0;
    for group in &mut groups {
        if remaining == 0 {
            break;
        }
        if group.is_caught_up(horizon) {
            continue; // its cursor came from a server that had seen a higher horizon
        }
        groups_scanned += 1;
        let taken =
            scan_group(store, &mut tx, group, horizon, remaining, &requested, &mut changes, &mut tombstones).await?;
        remaining -= taken;
    }
    let has_more = groups.iter().any(|g| !g.is_caught_up(horizon));
    let groups = bound_groups(merge_groups(groups));

    tx.commit().await?;
    let (cursor, sets) = Cursor::new(groups).seal(&key, &actor.user_id);
    bucket_sets::store(&store.pool, &store.bucket_sets, sets).await?;

    let (changes, tombstones) = normalize(changes, tombstones, groups_scanned > 1);
    Ok(PullResponse {
        changes,
        tombstones,
        removed_buckets,
        cursor,
        has_more,
        reset,
        last_mutation_id: start.last_mutation_id,
        synced_mutation_id: Some(start.synced_mutation_id),
    })
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
        groups.sort_by_key(|g| (g.rows.xid, g.tombstones.xid));
        let closest =
            (1..groups.len()).min_by_key(|&i| groups[i].rows.xid - groups[i - 1].rows.xid).expect("two groups or more");
        let later = groups.remove(closest);
        let earlier = &mut groups[closest - 1];
        earlier.buckets.extend(later.buckets);
        earlier.buckets.sort();
        earlier.buckets.dedup();
        if (later.tombstones.xid, later.tombstones.id) < (earlier.tombstones.xid, earlier.tombstones.id) {
            earlier.tombstones = later.tombstones;
        }
    }
    groups
}

/// Groups that reached the same position become one.
fn merge_groups(groups: Vec<Group>) -> Vec<Group> {
    let mut merged: Vec<Group> = Vec::new();
    for group in groups {
        match merged.iter_mut().find(|g| g.rows == group.rows && g.tombstones == group.tombstones) {
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

/// Scan one group from its position up to `horizon`, at most `limit` entries; advance its
/// positions over what was taken. Returns how many entries were taken.
#[allow(clippy::too_many_arguments)]
async fn scan_group(
    store: &PostgresStorage,
    conn: &mut PgConnection,
    group: &mut Group,
    horizon: u64,
    limit: usize,
    requested: &BTreeSet<BucketKey>,
    changes: &mut Vec<(Change, &'static TableMeta)>,
    tombstones: &mut Vec<Tombstone>,
) -> Result<usize> {
    let keys: BTreeSet<&BucketKey> = group.buckets.iter().collect();
    let mut entries: Vec<Entry> = Vec::new();
    // Whether a source returned all it had below the horizon (fewer rows than the limit).
    let mut exhausted: Vec<(Option<&'static str>, bool)> = Vec::new();

    for table in store.rules.synced_tables() {
        let selections: Vec<(&RuleSelection, Vec<Vec<String>>)> = store
            .rules
            .selections(table.name)
            .iter()
            .filter_map(|s| {
                let params: Vec<Vec<String>> =
                    keys.iter().filter(|k| k.rule() == s.rule.name).map(|k| k.params()).collect();
                (!params.is_empty()).then_some((s, params))
            })
            .collect();
        if selections.is_empty() {
            continue;
        }
        let rows = scan_table(conn, table, &selections, &group.rows, horizon, limit).await?;
        exhausted.push((Some(table.name), rows.len() < limit));
        for (seq, (xid, row)) in rows.into_iter().enumerate() {
            entries.push(Entry::Row { xid, table, seq, row });
        }
    }

    let bucket_texts: Vec<String> = group.buckets.iter().map(|b| b.as_str().to_owned()).collect();
    let rows = sqlx::query(
        "SELECT id, xid::text, table_name, key, buckets FROM _engine_tombstones
         WHERE (xid, id) > ($1::text::xid8, $2) AND xid < $3::text::xid8 AND buckets && $4::text[]
         ORDER BY xid, id LIMIT $5",
    )
    .bind(group.tombstones.xid.to_string())
    .bind(group.tombstones.id)
    .bind(horizon.to_string())
    .bind(&bucket_texts)
    .bind(i64::try_from(limit).unwrap_or(i64::MAX))
    .fetch_all(&mut *conn)
    .await?;
    exhausted.push((None, rows.len() < limit));
    for row in rows {
        let id: i64 = row.try_get(0).map_err(Error::Database)?;
        let xid: String = row.try_get(1).map_err(Error::Database)?;
        let table: String = row.try_get(2).map_err(Error::Database)?;
        let key: Value = row.try_get(3).map_err(Error::Database)?;
        let buckets: Vec<String> = row.try_get(4).map_err(Error::Database)?;
        let buckets = buckets.iter().filter_map(|b| BucketKey::parse(b).ok()).filter(|b| keys.contains(b)).collect();
        let Value::Object(key) = key else { continue };
        entries.push(Entry::Tombstone { xid: parse_xid(&xid)?, id, table, key, buckets });
    }

    entries.sort_by(|a, b| a.order().cmp(&b.order()));
    let fetched_rows = entries.iter().filter(|e| matches!(e, Entry::Row { .. })).count();
    let fetched_tombstones = entries.len() - fetched_rows;
    entries.truncate(limit);
    let taken = entries.len();
    let (mut taken_rows, mut taken_tombstones) = (0, 0);
    let mut last_row = None;
    let mut last_tombstone = None;
    let mut memo = BucketMemo::default();
    for entry in entries {
        match entry {
            Entry::Row { xid, table, row, .. } => {
                taken_rows += 1;
                let buckets = memo.buckets(store, table, &row, requested);
                last_row = Some((xid, table, changes.len()));
                changes.push((Change { table: table.name.to_owned(), row, buckets }, table));
            }
            Entry::Tombstone { xid, id, table, key, buckets } => {
                taken_tombstones += 1;
                last_tombstone = Some(TombstonePosition { xid, id });
                if !buckets.is_empty() {
                    tombstones.push(Tombstone { table, key, buckets });
                }
            }
        }
    }
    // A stream is complete below the horizon when every source of it returned all it had and
    // everything returned made the page.
    let rows_exhausted = exhausted.iter().filter(|(t, _)| t.is_some()).all(|(_, done)| *done);
    let tombstones_exhausted = exhausted.iter().filter(|(t, _)| t.is_none()).all(|(_, done)| *done);
    if rows_exhausted && taken_rows == fetched_rows {
        group.rows.advance_to(RowPosition::at(horizon));
    } else if let Some((xid, table, index)) = last_row {
        let key = key_values(table, &changes[index].0.row);
        group.rows.advance_to(RowPosition { xid, table: table.name.to_owned(), key });
    }
    if tombstones_exhausted && taken_tombstones == fetched_tombstones {
        group.tombstones.advance_to(TombstonePosition::at(horizon));
    } else if let Some(position) = last_tombstone {
        group.tombstones.advance_to(position);
    }
    Ok(taken)
}

/// The buckets of the rows of a page, among those requested. Consecutive rows that agree on
/// every column deciding their buckets (most rows of a bootstrap do) share one computation.
#[derive(Default)]
struct BucketMemo {
    table: &'static str,
    columns: Vec<&'static str>,
    values: Vec<Value>,
    buckets: Vec<BucketKey>,
}

impl BucketMemo {
    fn buckets(
        &mut self,
        store: &PostgresStorage,
        table: &'static TableMeta,
        row: &Row,
        requested: &BTreeSet<BucketKey>,
    ) -> Vec<BucketKey> {
        let value = |column: &str| row.get(column).unwrap_or(&Value::Null);
        let same = self.table == table.name && self.columns.iter().zip(&self.values).all(|(c, v)| value(c) == v);
        if !same {
            self.table = table.name;
            self.columns = store.rules.deciding_columns(table);
            self.values = self.columns.iter().map(|c| value(c).clone()).collect();
            self.buckets = store.rules.row_buckets(table, row).into_iter().filter(|b| requested.contains(b)).collect();
        }
        self.buckets.clone()
    }
}

/// The primary key values of `row`, in key order.
fn key_values(table: &TableMeta, row: &Row) -> Vec<Value> {
    table.primary_key.iter().map(|k| row.get(*k).cloned().unwrap_or(Value::Null)).collect()
}

fn parse_xid(text: &str) -> Result<u64> {
    text.parse().map_err(|_| Error::Internal(format!("unreadable transaction id {text}")))
}

/// The rows of `table` in the buckets of `selections`, after `position` and below `horizon`, in
/// stream order, at most `limit`: `(transaction id, row)`.
async fn scan_table(
    conn: &mut PgConnection,
    table: &'static TableMeta,
    selections: &[(&RuleSelection, Vec<Vec<String>>)],
    position: &RowPosition,
    horizon: u64,
    limit: usize,
) -> Result<Vec<(u64, Row)>> {
    let columns: Vec<String> = table.columns.iter().map(|c| selection::column("t", c.name)).collect();
    let mut sql =
        Sql::new(format!("SELECT {}, t._engine_xid::text FROM {} AS t WHERE ", columns.join(", "), ident(table.name)));
    selection::push_after(&mut sql, "t", table, position, horizon);
    sql.push(" AND (");
    for (i, (rule_selection, params)) in selections.iter().enumerate() {
        sql.push(if i == 0 { "(" } else { " OR (" });
        selection::push_selected(&mut sql, "t", table, rule_selection, Buckets::Many(params));
        sql.push(")");
    }
    sql.push(format_args!(") ORDER BY {} LIMIT ", selection::stream_order("t", table)));
    sql.push_bind(i64::try_from(limit).unwrap_or(i64::MAX));
    let rows = sql.build().fetch_all(&mut *conn).await?;
    rows.iter().map(|r| read_row(table, r)).collect()
}

/// A scanned row: its transaction id and JSON row.
fn read_row(table: &TableMeta, row: &PgRow) -> Result<(u64, Row)> {
    let xid: String = row.try_get(table.columns.len()).map_err(Error::Database)?;
    Ok((parse_xid(&xid)?, decode_row(table, row)?))
}

/// One entry per row: changes of a row merged across groups with the union of their buckets;
/// tombstones merged likewise, minus every bucket a change of the same row is in. One group's
/// scan never yields a row twice, so with one group and no tombstones there is nothing to do.
fn normalize(
    changes: Vec<(Change, &'static TableMeta)>,
    tombstones: Vec<Tombstone>,
    several_groups: bool,
) -> (Vec<Change>, Vec<Tombstone>) {
    if !several_groups && tombstones.is_empty() {
        return (changes.into_iter().map(|(change, _)| change).collect(), tombstones);
    }
    fn identity<'a>(table: &str, key: impl Iterator<Item = (&'a str, &'a Value)>) -> String {
        // Sorted, so a key read back from jsonb (which orders its keys its own way) matches.
        let sorted: BTreeMap<&str, &Value> = key.collect();
        format!("{table}\u{0}{}", serde_json::to_string(&sorted).unwrap_or_default())
    }
    let mut change_index: BTreeMap<String, usize> = BTreeMap::new();
    let mut merged_changes: Vec<Change> = Vec::new();
    for (change, table) in changes {
        let key = table.primary_key.iter().map(|k| (*k, change.row.get(*k).unwrap_or(&Value::Null)));
        let id = identity(&change.table, key);
        match change_index.get(&id) {
            Some(&i) => {
                let existing = &mut merged_changes[i];
                existing.buckets.extend(change.buckets);
                existing.buckets.sort();
                existing.buckets.dedup();
            }
            None => {
                change_index.insert(id, merged_changes.len());
                merged_changes.push(change);
            }
        }
    }
    let mut tombstone_index: BTreeMap<String, usize> = BTreeMap::new();
    let mut merged_tombstones: Vec<Tombstone> = Vec::new();
    for tombstone in tombstones {
        let id = identity(&tombstone.table, tombstone.key.iter().map(|(k, v)| (k.as_str(), v)));
        let live: &[BucketKey] = change_index.get(&id).map_or(&[], |&i| merged_changes[i].buckets.as_slice());
        let buckets: Vec<BucketKey> = tombstone.buckets.into_iter().filter(|b| !live.contains(b)).collect();
        if buckets.is_empty() {
            continue;
        }
        match tombstone_index.get(&id) {
            Some(&i) => {
                let existing = &mut merged_tombstones[i];
                existing.buckets.extend(buckets);
                existing.buckets.sort();
                existing.buckets.dedup();
            }
            None => {
                tombstone_index.insert(id, merged_tombstones.len());
                merged_tombstones.push(Tombstone { table: tombstone.table, key: tombstone.key, buckets });
            }
        }
    }
    (merged_changes, merged_tombstones)
}
