//! The local store's schema: two tables per synced table of the app — the view (named like the
//! server's table: what the app reads, the confirmed rows with the pending mutations applied)
//! and the confirmed base (`_engine_base_<table>`: rows as the server last sent them) — and the
//! client's own tables, all under the `_engine_` prefix.
//!
//! Migrations follow the app: a table whose shape is recorded differently is altered when only
//! columns were added (its rows stay), and dropped and created afresh otherwise; either way the
//! store pulls everything again (keeping rows until the server confirms they are gone, see
//! [`super::apply`]) and keeps its outbox.

use engine_kernel::{App, TableMeta};
use serde_json::{Value, json};
use sqlx::SqliteConnection;

use super::sql::{Sql, base, ident};
use super::values::sqlite_type;
use crate::error::{Error, Result};

/// The format of the client's own tables. A store written by a newer client is refused.
pub(crate) const STORE_FORMAT: i64 = 1;

/// Whether `table` has a local copy: whether some sync rule selects from it.
pub(crate) fn is_local(app: &App, table: &TableMeta) -> bool {
    app.is_synced(table.name)
}

/// The synced tables of `app`, in registration order.
pub(crate) fn local_tables(app: &App) -> Vec<&'static TableMeta> {
    app.tables().iter().map(|t| t.meta()).filter(|t| is_local(app, t)).collect()
}

const ENGINE_TABLES: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS _engine_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    // Which buckets each confirmed row is in.
    "CREATE TABLE IF NOT EXISTS _engine_row_buckets (tbl TEXT NOT NULL, key TEXT NOT NULL, bucket TEXT NOT NULL, PRIMARY KEY (tbl, key, bucket)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS _engine_row_buckets_bucket ON _engine_row_buckets (bucket)",
    // Buckets the client has rows of; `left_at` (ms) once the actor no longer holds one.
    "CREATE TABLE IF NOT EXISTS _engine_buckets (bucket TEXT PRIMARY KEY, left_at INTEGER)",
    // Memberships of buckets the actor left and holds again, while the server fills them anew:
    // those no page of the fill delivers again are gone when it ends.
    "CREATE TABLE IF NOT EXISTS _engine_refill (tbl TEXT NOT NULL, key TEXT NOT NULL, bucket TEXT NOT NULL, PRIMARY KEY (tbl, key, bucket)) WITHOUT ROWID",
    // Mutations not yet reflected by a pull, in order.
    "CREATE TABLE IF NOT EXISTS _engine_outbox (mutation_id INTEGER PRIMARY KEY, client_mutation_id TEXT NOT NULL UNIQUE, name TEXT NOT NULL, args TEXT NOT NULL, hlc TEXT NOT NULL, pushed INTEGER NOT NULL DEFAULT 0, server_id TEXT, created_at INTEGER NOT NULL)",
    // Mutations the server rejected, with its error, until retried or discarded.
    "CREATE TABLE IF NOT EXISTS _engine_quarantine (client_mutation_id TEXT PRIMARY KEY, mutation_id INTEGER NOT NULL, name TEXT NOT NULL, args TEXT NOT NULL, hlc TEXT NOT NULL, error TEXT NOT NULL, quarantined_at INTEGER NOT NULL)",
    // View rows the pending mutations wrote: reset to the base before a rebase replays them.
    "CREATE TABLE IF NOT EXISTS _engine_touched (tbl TEXT NOT NULL, key TEXT NOT NULL, PRIMARY KEY (tbl, key)) WITHOUT ROWID",
    // Rows a pull from the beginning has delivered so far (mark and sweep).
    "CREATE TABLE IF NOT EXISTS _engine_seen (tbl TEXT NOT NULL, key TEXT NOT NULL, PRIMARY KEY (tbl, key)) WITHOUT ROWID",
    // Blobs on this device (put here, or downloaded), and their upload queue: `queued_at` (ms)
    // until the bytes are on the server; `failed` when the server refused them for good.
    "CREATE TABLE IF NOT EXISTS _engine_blobs (key TEXT PRIMARY KEY, bytes BLOB NOT NULL, content_type TEXT, queued_at INTEGER, failed TEXT)",
];

/// The recorded shape of a table: what a change of needs a migration.
fn shape(table: &TableMeta) -> Value {
    let columns: Vec<Value> = table.columns.iter().map(|c| json!([c.name, c.sql_type.name()])).collect();
    json!({"columns": columns, "primaryKey": table.primary_key})
}

/// `CREATE TABLE` of the table `name` (quoted) with the columns and key of `table`.
pub(super) fn create_sql(name: &str, table: &TableMeta) -> Sql {
    let mut sql = Sql::new("CREATE TABLE IF NOT EXISTS ");
    sql.push(name).push(" (");
    let mut columns = sql.separated(", ");
    for column in table.columns {
        columns.push(format_args!("{} {}", ident(column.name), sqlite_type(column.sql_type)));
    }
    columns.push("PRIMARY KEY (");
    let mut keys = sql.separated(", ");
    for key in table.primary_key {
        keys.push(ident(key));
    }
    sql.push("))");
    sql
}

/// Run a statement that binds nothing (DDL), unprepared.
async fn exec(conn: &mut SqliteConnection, sql: impl sqlx::SqlSafeStr) -> Result<()> {
    sqlx::raw_sql(sql).execute(&mut *conn).await?;
    Ok(())
}

pub(crate) async fn meta(conn: &mut SqliteConnection, key: &str) -> Result<Option<String>> {
    Ok(sqlx::query_scalar("SELECT value FROM _engine_meta WHERE key = ?").bind(key).fetch_optional(&mut *conn).await?)
}

pub(crate) async fn set_meta(conn: &mut SqliteConnection, key: &str, value: &str) -> Result<()> {
    sqlx::query(
        "INSERT INTO _engine_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    )
    .bind(key)
    .bind(value)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

async fn create_table(conn: &mut SqliteConnection, app: &App, table: &TableMeta) -> Result<()> {
    exec(conn, create_sql(&ident(table.name), table).into_sql()).await?;
    exec(conn, create_sql(&base(table.name), table).into_sql()).await?;
    // The columns sync rules scope by are the columns apps filter by.
    let mut scoped: Vec<&str> = Vec::new();
    for rule in app.sync_rules().rules {
        for selection in rule.data.iter().filter(|s| s.table == table.name) {
            for scope in selection.scope {
                if !scoped.contains(&scope.column) && !table.is_key(scope.column) {
                    scoped.push(scope.column);
                }
            }
        }
    }
    for column in scoped {
        let mut sql = Sql::new("CREATE INDEX IF NOT EXISTS ");
        sql.push(ident(&format!("_engine_{}_{}", table.name, column)));
        sql.push(" ON ").push(ident(table.name)).push(" (").push(ident(column)).push(")");
        exec(conn, sql.into_sql()).await?;
    }
    Ok(())
}

async fn drop_table(conn: &mut SqliteConnection, name: &str) -> Result<()> {
    for table in [ident(name), base(name)] {
        let mut sql = Sql::new("DROP TABLE IF EXISTS ");
        sql.push(table);
        exec(conn, sql.into_sql()).await?;
    }
    for forget in [
        "DELETE FROM _engine_row_buckets WHERE tbl = ?",
        "DELETE FROM _engine_refill WHERE tbl = ?",
        "DELETE FROM _engine_touched WHERE tbl = ?",
        "DELETE FROM _engine_seen WHERE tbl = ?",
    ] {
        sqlx::query(forget).bind(name).execute(&mut *conn).await?;
    }
    Ok(())
}

/// Create or migrate the store for `app`, in the caller's transaction. Returns whether the
/// store must pull everything again.
pub(crate) async fn migrate(conn: &mut SqliteConnection, app: &App) -> Result<bool> {
    for statement in ENGINE_TABLES {
        exec(conn, *statement).await?;
    }
    match meta(conn, "format").await? {
        Some(format) if format.parse::<i64>().unwrap_or(i64::MAX) > STORE_FORMAT => {
            return Err(Error::StoreMismatch(format!(
                "the store was written by a newer client (format {format}; this client knows {STORE_FORMAT})"
            )));
        }
        _ => set_meta(conn, "format", &STORE_FORMAT.to_string()).await?,
    }
    let synced_before = meta(conn, "cursor").await?.is_some();
    let mut resync = false;
    let tables = local_tables(app);
    for table in &tables {
        let key = format!("table:{}", table.name);
        let want = shape(table);
        let recorded: Option<Value> = meta(conn, &key).await?.and_then(|t| serde_json::from_str(&t).ok());
        match recorded {
            Some(have) if have == want => continue,
            None => {
                create_table(conn, app, table).await?;
                resync |= synced_before;
            }
            Some(have) => {
                if only_added(&have, &want) {
                    let known: Vec<String> = have["columns"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|c| c[0].as_str().map(str::to_owned))
                        .collect();
                    for column in table.columns.iter().filter(|c| !known.iter().any(|k| k == c.name)) {
                        for name in [ident(table.name), base(table.name)] {
                            let mut add = Sql::new("ALTER TABLE ");
                            add.push(name).push(" ADD COLUMN ").push(ident(column.name));
                            add.push(" ").push(sqlite_type(column.sql_type));
                            exec(conn, add.into_sql()).await?;
                        }
                    }
                } else {
                    drop_table(conn, table.name).await?;
                    create_table(conn, app, table).await?;
                }
                resync = true;
            }
        }
        set_meta(conn, &key, &want.to_string()).await?;
    }
    let recorded: Vec<String> = sqlx::query_scalar("SELECT substr(key, 7) FROM _engine_meta WHERE key LIKE 'table:%'")
        .fetch_all(&mut *conn)
        .await?;
    for name in recorded {
        if !tables.iter().any(|t| t.name == name) {
            drop_table(conn, &name).await?;
            sqlx::query("DELETE FROM _engine_meta WHERE key = ?")
                .bind(format!("table:{name}"))
                .execute(&mut *conn)
                .await?;
        }
    }
    Ok(resync)
}

/// Whether shape `want` only adds columns to shape `have` (same key, same types).
fn only_added(have: &Value, want: &Value) -> bool {
    if have["primaryKey"] != want["primaryKey"] {
        return false;
    }
    let wanted = want["columns"].as_array().cloned().unwrap_or_default();
    have["columns"].as_array().into_iter().flatten().all(|column| wanted.contains(column))
}
