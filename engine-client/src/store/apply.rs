//! Pull pages into the local store, atomically, and the rebase that keeps the view equal to the
//! confirmed base with the pending mutations applied on top.
//!
//! A page's changes and tombstones go into the base and, as they are, into the view; then every
//! view row a pending mutation wrote is reset to the base and the pending mutations run again in
//! order (the rebase), so a rejection, a lost merge or a server no-op corrects the view. Rows
//! leave the store only when no bucket it still holds contains them: a tombstone removes the row
//! from the buckets it names, and the buckets the actor no longer holds (`removedBuckets`) keep
//! their rows for the bucket TTL, then those rows go — except rows with pending writes.
//!
//! A bucket the actor left and holds again is filled anew by the server with the rows it holds
//! now, never with the deletes it missed meanwhile; rows of it the client still keeps (for the
//! TTL, or for a pending write) and that the fill does not bring again are gone when the fill's
//! last page is in.
//!
//! A pull from the beginning after a `reset` (or a migration) is a mark and sweep: memberships are
//! cleared, each delivered row marks itself again, and when the last page is in, base rows left
//! unmarked are gone. Until then the old rows stay visible.

use std::collections::BTreeSet;

use engine_kernel::wire::PullResponse;
use engine_kernel::{Actor, App, Hlc, MutatorCtx, Row, TableMeta};
use serde_json::Value;
use sqlx::SqliteConnection;

use super::schema::{local_tables, meta, set_meta};
use super::sql::{Sql, base, ident, push_columns, push_key_match};
use super::tx::LocalTx;
use super::values::{decode_row, key_row, key_text, stored};
use crate::error::Result;

/// Rows per multi-row statement (SQLite allows 32,766 bound values).
const MAX_BINDS: usize = 30_000;

/// What applying a page did.
#[derive(Debug, Default)]
pub(crate) struct Applied {
    /// Tables whose view may have changed.
    pub(crate) tables: BTreeSet<&'static str>,
    /// How many outbox entries the page confirmed.
    pub(crate) confirmed: u64,
    /// How many acknowledged entries the server no longer has, to be pushed again.
    pub(crate) requeued: u64,
}

/// Upsert `rows` of `table` into the table `target` (the view or the base), in multi-row
/// statements.
async fn upsert(conn: &mut SqliteConnection, table: &TableMeta, target: &str, rows: &[&Row]) -> Result<()> {
    let per_statement = (MAX_BINDS / table.columns.len()).max(1);
    for chunk in rows.chunks(per_statement) {
        upsert_sql(table, target, chunk).build().execute(&mut *conn).await?;
    }
    Ok(())
}

/// `INSERT … ON CONFLICT DO UPDATE` of `rows` (at least one) of `table` into `target`.
pub(super) fn upsert_sql(table: &TableMeta, target: &str, rows: &[&Row]) -> Sql {
    let mut sql = Sql::new("INSERT INTO ");
    sql.push(target).push(" (");
    push_columns(&mut sql, table);
    sql.push(") ").push_values(rows, |mut tuple, row| {
        for column in table.columns {
            tuple.push_bind(stored(column, row.get(column.name).unwrap_or(&Value::Null)));
        }
    });
    sql.push(" ON CONFLICT (");
    let mut keys = sql.separated(", ");
    for key in table.primary_key {
        keys.push(ident(key));
    }
    let mut updates = table.columns.iter().filter(|c| !table.is_key(c.name)).peekable();
    if updates.peek().is_none() {
        sql.push(") DO NOTHING");
    } else {
        sql.push(") DO UPDATE SET ");
        let mut sets = sql.separated(", ");
        for column in updates {
            sets.push(format_args!("{0} = excluded.{0}", ident(column.name)));
        }
    }
    sql
}

/// Delete the row of `table` with key `key` from `target`.
async fn delete(conn: &mut SqliteConnection, table: &TableMeta, target: &str, key: &Row) -> Result<()> {
    let mut sql = Sql::new("DELETE FROM ");
    sql.push(target);
    push_key_match(&mut sql, table, key);
    sql.build().execute(&mut *conn).await?;
    Ok(())
}

/// Add memberships `(table, key, bucket)`, in multi-row statements.
async fn add_memberships(conn: &mut SqliteConnection, memberships: &[(&str, String, &str)]) -> Result<()> {
    for chunk in memberships.chunks(MAX_BINDS / 3) {
        let mut sql = Sql::new("INSERT OR IGNORE INTO _engine_row_buckets (tbl, key, bucket) ");
        push_memberships(&mut sql, chunk);
        sql.build().execute(&mut *conn).await?;
    }
    Ok(())
}

/// The buckets of `page`'s rows that the client had left: their memberships wait for the fill to
/// deliver them again.
async fn refill_begins(conn: &mut SqliteConnection, page: &PullResponse) -> Result<()> {
    let buckets: BTreeSet<&str> = page.changes.iter().flat_map(|c| c.buckets.iter().map(|b| b.as_str())).collect();
    for bucket in buckets {
        sqlx::query(
            "INSERT OR IGNORE INTO _engine_refill (tbl, key, bucket)
             SELECT rb.tbl, rb.key, rb.bucket FROM _engine_row_buckets rb JOIN _engine_buckets b ON b.bucket = rb.bucket
             WHERE rb.bucket = ? AND b.left_at IS NOT NULL",
        )
        .bind(bucket)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// The memberships a page delivered again no longer wait.
async fn refill_delivered(conn: &mut SqliteConnection, memberships: &[(&str, String, &str)]) -> Result<()> {
    let waiting: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM _engine_refill)").fetch_one(&mut *conn).await?;
    if !waiting {
        return Ok(());
    }
    for chunk in memberships.chunks(MAX_BINDS / 3) {
        let mut sql = Sql::new("DELETE FROM _engine_refill WHERE (tbl, key, bucket) IN (");
        push_memberships(&mut sql, chunk);
        sql.push(")");
        sql.build().execute(&mut *conn).await?;
    }
    Ok(())
}

/// `VALUES (?, ?, ?), …` of `memberships` (at least one) `(table, key, bucket)`.
fn push_memberships(sql: &mut Sql, memberships: &[(&str, String, &str)]) {
    sql.push_values(memberships, |mut tuple, (table, key, bucket)| {
        tuple.push_bind(*table).push_bind(key.as_str()).push_bind(*bucket);
    });
}

/// At the last page of a pull every fill is complete: the memberships still waiting are gone,
/// and so are the rows no other bucket holds. Returns the tables that lost rows.
async fn refill_ends(conn: &mut SqliteConnection, app: &App) -> Result<BTreeSet<&'static str>> {
    let gone: Vec<(String, String, String)> =
        sqlx::query_as("SELECT tbl, key, bucket FROM _engine_refill").fetch_all(&mut *conn).await?;
    let mut tables = BTreeSet::new();
    for (name, key, bucket) in &gone {
        sqlx::query("DELETE FROM _engine_row_buckets WHERE tbl = ? AND key = ? AND bucket = ?")
            .bind(name)
            .bind(key)
            .bind(bucket)
            .execute(&mut *conn)
            .await?;
        let Some(table) = app.table(name) else { continue };
        if drop_if_orphaned(conn, table, key).await? {
            tables.insert(table.name);
        }
    }
    sqlx::query("DELETE FROM _engine_refill").execute(&mut *conn).await?;
    Ok(tables)
}

/// Remove a row from the base and the view when no bucket contains it any more.
async fn drop_if_orphaned(conn: &mut SqliteConnection, table: &TableMeta, key: &str) -> Result<bool> {
    let held: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM _engine_row_buckets WHERE tbl = ? AND key = ?)")
        .bind(table.name)
        .bind(key)
        .fetch_one(&mut *conn)
        .await?;
    if held {
        return Ok(false);
    }
    let row = key_row(table, key);
    delete(conn, table, &base(table.name), &row).await?;
    delete(conn, table, &ident(table.name), &row).await?;
    Ok(true)
}

/// Apply one pull page, then confirm and rebase, in the caller's transaction.
pub(crate) async fn apply_page(
    conn: &mut SqliteConnection,
    app: &App,
    actor: &Actor,
    page: &PullResponse,
    now_ms: i64,
    bucket_ttl_ms: i64,
) -> Result<Applied> {
    let mut applied = Applied::default();
    if page.reset {
        // Start afresh: every row must be delivered again to stay.
        sqlx::query("DELETE FROM _engine_row_buckets").execute(&mut *conn).await?;
        sqlx::query("DELETE FROM _engine_refill").execute(&mut *conn).await?;
        set_meta(conn, "sweep", "1").await?;
    }
    let sweeping = meta(conn, "sweep").await?.as_deref() == Some("1");

    for bucket in &page.removed_buckets {
        sqlx::query("INSERT INTO _engine_buckets (bucket, left_at) VALUES (?, ?) ON CONFLICT (bucket) DO UPDATE SET left_at = coalesce(_engine_buckets.left_at, excluded.left_at)")
            .bind(bucket.as_str())
            .bind(now_ms)
            .execute(&mut *conn)
            .await?;
    }

    for tombstone in &page.tombstones {
        let Some(table) = app.table(&tombstone.table).filter(|t| app.is_synced(t.name)) else { continue };
        let key = key_text(table, &tombstone.key);
        for bucket in &tombstone.buckets {
            sqlx::query("DELETE FROM _engine_row_buckets WHERE tbl = ? AND key = ? AND bucket = ?")
                .bind(table.name)
                .bind(&key)
                .bind(bucket.as_str())
                .execute(&mut *conn)
                .await?;
        }
        if drop_if_orphaned(conn, table, &key).await? {
            applied.tables.insert(table.name);
        }
    }

    if !sweeping {
        refill_begins(conn, page).await?;
    }
    let mut buckets: BTreeSet<&str> = BTreeSet::new();
    let mut memberships: Vec<(&str, String, &str)> = Vec::new();
    for table in local_tables(app) {
        let rows: Vec<&Row> = page.changes.iter().filter(|c| c.table == table.name).map(|c| &c.row).collect();
        if rows.is_empty() {
            continue;
        }
        upsert(conn, table, &base(table.name), &rows).await?;
        if page.has_more {
            // Rows pending mutations wrote wait for the last page's rebase: replayed now, on a
            // base that may already hold their effect, they would show it twice.
            let touched = touched_keys(conn, table).await?;
            let untouched: Vec<&Row> =
                rows.iter().copied().filter(|r| !touched.contains(&key_text(table, r))).collect();
            upsert(conn, table, &ident(table.name), &untouched).await?;
        } else {
            upsert(conn, table, &ident(table.name), &rows).await?;
        }
        applied.tables.insert(table.name);
        for change in page.changes.iter().filter(|c| c.table == table.name) {
            let key = key_text(table, &change.row);
            for bucket in &change.buckets {
                buckets.insert(bucket.as_str());
                memberships.push((table.name, key.clone(), bucket.as_str()));
            }
        }
    }
    add_memberships(conn, &memberships).await?;
    refill_delivered(conn, &memberships).await?;
    if !page.has_more {
        applied.tables.extend(refill_ends(conn, app).await?);
    }
    for bucket in buckets {
        sqlx::query("INSERT INTO _engine_buckets (bucket, left_at) VALUES (?, NULL) ON CONFLICT (bucket) DO UPDATE SET left_at = NULL")
            .bind(bucket)
            .execute(&mut *conn)
            .await?;
    }

    if sweeping && !page.has_more {
        for table in local_tables(app) {
            if sweep(conn, table).await? {
                applied.tables.insert(table.name);
            }
        }
        // Buckets no page brought again are held no more.
        sqlx::query(
            "DELETE FROM _engine_buckets WHERE NOT EXISTS (SELECT 1 FROM _engine_row_buckets rb WHERE rb.bucket = _engine_buckets.bucket)",
        )
        .execute(&mut *conn)
        .await?;
        set_meta(conn, "sweep", "0").await?;
    }
    if !sweeping {
        applied.tables.extend(evict(conn, app, now_ms - bucket_ttl_ms).await?);
    }

    // Only the last page of a pull vouches that every row below its horizon has arrived: earlier
    // pages may report a mutation synced whose rows a later page brings.
    if page.has_more {
        if !applied.tables.is_empty() {
            set_meta(conn, "rebase_due", "1").await?;
        }
    } else {
        let synced = page.synced_mutation_id.unwrap_or(page.last_mutation_id);
        applied.confirmed = super::outbox::confirm(conn, synced, page.last_mutation_id).await?;
        applied.requeued = super::outbox::requeue_lost(conn, page.last_mutation_id).await?;
        let due = meta(conn, "rebase_due").await?.as_deref() == Some("1");
        if due || !applied.tables.is_empty() || applied.confirmed > 0 {
            applied.tables.extend(rebase(conn, app, actor).await?);
            set_meta(conn, "rebase_due", "0").await?;
        }
    }
    set_meta(conn, "cursor", &page.cursor).await?;
    Ok(applied)
}

/// The keys of the rows of `table` that pending mutations wrote.
async fn touched_keys(conn: &mut SqliteConnection, table: &TableMeta) -> Result<BTreeSet<String>> {
    let keys: Vec<String> = sqlx::query_scalar("SELECT key FROM _engine_touched WHERE tbl = ?")
        .bind(table.name)
        .fetch_all(&mut *conn)
        .await?;
    Ok(keys.into_iter().collect())
}

/// The keys of the base rows of `table`.
async fn base_keys(conn: &mut SqliteConnection, table: &TableMeta) -> Result<Vec<String>> {
    let mut sql = Sql::new("SELECT ");
    push_columns(&mut sql, table);
    sql.push(" FROM ").push(base(table.name));
    let rows = sql.build().fetch_all(&mut *conn).await?;
    rows.iter().map(|r| Ok(key_text(table, &decode_row(table, r)?))).collect()
}

/// After a pull from the beginning: drop the base rows no page delivered.
async fn sweep(conn: &mut SqliteConnection, table: &'static TableMeta) -> Result<bool> {
    let mut dropped = false;
    for key in base_keys(conn, table).await? {
        dropped |= drop_if_orphaned(conn, table, &key).await?;
    }
    Ok(dropped)
}

/// Evict rows whose every bucket the actor left before `left_before` (ms), except rows with
/// pending writes; forget those buckets' memberships. Returns the tables that lost rows.
async fn evict(conn: &mut SqliteConnection, app: &App, left_before: i64) -> Result<BTreeSet<&'static str>> {
    let expired_buckets: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM _engine_buckets WHERE left_at IS NOT NULL AND left_at <= ?)")
            .bind(left_before)
            .fetch_one(&mut *conn)
            .await?;
    if !expired_buckets {
        return Ok(BTreeSet::new());
    }
    let expired: Vec<(String, String)> = sqlx::query_as(
        "SELECT DISTINCT rb.tbl, rb.key FROM _engine_row_buckets rb JOIN _engine_buckets b ON b.bucket = rb.bucket
         WHERE b.left_at IS NOT NULL AND b.left_at <= ?1
           AND NOT EXISTS (SELECT 1 FROM _engine_row_buckets r2 LEFT JOIN _engine_buckets b2 ON b2.bucket = r2.bucket
                           WHERE r2.tbl = rb.tbl AND r2.key = rb.key AND (b2.left_at IS NULL OR b2.left_at > ?1))
           AND NOT EXISTS (SELECT 1 FROM _engine_touched t WHERE t.tbl = rb.tbl AND t.key = rb.key)",
    )
    .bind(left_before)
    .fetch_all(&mut *conn)
    .await?;
    let mut tables = BTreeSet::new();
    for (name, key) in expired {
        let Some(table) = app.table(&name) else { continue };
        sqlx::query("DELETE FROM _engine_row_buckets WHERE tbl = ? AND key = ?")
            .bind(&name)
            .bind(&key)
            .execute(&mut *conn)
            .await?;
        if drop_if_orphaned(conn, table, &key).await? {
            tables.insert(table.name);
        }
    }
    // Rows still held through another bucket keep only their live memberships.
    sqlx::query(
        "DELETE FROM _engine_row_buckets WHERE bucket IN (SELECT bucket FROM _engine_buckets WHERE left_at IS NOT NULL AND left_at <= ?)
           AND NOT EXISTS (SELECT 1 FROM _engine_touched t WHERE t.tbl = _engine_row_buckets.tbl AND t.key = _engine_row_buckets.key)",
    )
    .bind(left_before)
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "DELETE FROM _engine_buckets WHERE left_at IS NOT NULL AND left_at <= ?
           AND NOT EXISTS (SELECT 1 FROM _engine_row_buckets rb WHERE rb.bucket = _engine_buckets.bucket)",
    )
    .bind(left_before)
    .execute(&mut *conn)
    .await?;
    Ok(tables)
}

/// Reset every view row the pending mutations wrote to the base, and run the pending mutations
/// again on top, each in a savepoint (one that fails now has no effect). Returns the tables whose
/// view rows were reset or written.
pub(crate) async fn rebase(conn: &mut SqliteConnection, app: &App, actor: &Actor) -> Result<BTreeSet<&'static str>> {
    let mut tables = BTreeSet::new();
    let touched: Vec<(String, String)> =
        sqlx::query_as("SELECT tbl, key FROM _engine_touched").fetch_all(&mut *conn).await?;
    for (name, key) in touched {
        let Some(table) = app.table(&name) else { continue };
        let row = key_row(table, &key);
        delete(conn, table, &ident(table.name), &row).await?;
        let mut sql = Sql::new("INSERT INTO ");
        sql.push(ident(table.name)).push(" (");
        push_columns(&mut sql, table);
        sql.push(") SELECT ");
        push_columns(&mut sql, table);
        sql.push(" FROM ").push(base(table.name));
        push_key_match(&mut sql, table, &row);
        sql.build().execute(&mut *conn).await?;
        tables.insert(table.name);
    }
    sqlx::query("DELETE FROM _engine_touched").execute(&mut *conn).await?;

    // Entries the server has already reflected (settled, waiting only for their answer) are in
    // the base: replaying them would apply them twice.
    let pending: Vec<(String, String, String, String)> = sqlx::query_as(
        "SELECT client_mutation_id, name, args, hlc FROM _engine_outbox
         WHERE mutation_id > coalesce((SELECT CAST(value AS INTEGER) FROM _engine_meta WHERE key = 'synced_mutation_id'), 0)
         ORDER BY mutation_id",
    )
    .fetch_all(&mut *conn)
    .await?;
    for (client_mutation_id, name, args, hlc) in pending {
        let (Some(def), Ok(seed), Ok(hlc), Ok(args)) = (
            app.mutator(&name),
            uuid::Uuid::parse_str(&client_mutation_id),
            hlc.parse::<Hlc>(),
            serde_json::from_str::<Value>(&args),
        ) else {
            continue;
        };
        sqlx::query("SAVEPOINT replay").execute(&mut *conn).await?;
        let outcome = {
            let mut tx = LocalTx::new(conn, app, actor.clone(), hlc, seed);
            let mut ctx = MutatorCtx::new(&mut tx);
            def.run(&mut ctx, args).await
        };
        let end = if outcome.is_ok() { "RELEASE replay" } else { "ROLLBACK TO replay; RELEASE replay" };
        sqlx::raw_sql(end).execute(&mut *conn).await?;
    }
    let written: Vec<String> =
        sqlx::query_scalar("SELECT DISTINCT tbl FROM _engine_touched").fetch_all(&mut *conn).await?;
    tables.extend(written.iter().filter_map(|name| app.table(name)).map(|t| t.name));
    Ok(tables)
}
