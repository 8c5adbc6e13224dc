//! The statements of a mutation on SQLite: the same reads and writes as `statements.rs`, on
//! values stored in the form they travel in. A mutation on SQLite runs inside the writer's
//! `BEGIN IMMEDIATE` transaction, which no other writes, so no row needs locking.

use engine_kernel::{ColumnMeta, JobRequest, Row, TableMeta};
use engine_sqlite::values::stored;
use engine_sqlite::{Sql, ident};
use serde_json::Value;
use sqlx::SqliteConnection;

use super::merge::Stamps;
use crate::error::{Error, Result};
use crate::sqlite::{decode_row, now_ms};

/// `value` as `column` of `table` stores it, checked as Postgres checks it.
fn bound(table: &TableMeta, column: &ColumnMeta, value: &Value) -> Result<engine_sqlite::values::Stored> {
    Ok(stored(column, &table.value(column, value)?.to_json()))
}

/// `t.k1 = ? AND t.k2 = ?` over the primary key, with the values of `key`.
fn push_key(sql: &mut Sql, table: &TableMeta, key: &Row) -> Result<()> {
    for (i, column) in table.key_columns().enumerate() {
        if i > 0 {
            sql.push(" AND ");
        }
        sql.push(format_args!("t.{} = ", ident(column.name)));
        sql.push_bind(bound(table, column, key.get(column.name).unwrap_or(&Value::Null))?);
    }
    Ok(())
}

fn columns(table: &TableMeta) -> String {
    table.columns.iter().map(|c| format!("t.{}", ident(c.name))).collect::<Vec<_>>().join(", ")
}

fn live(table: &TableMeta) -> Option<String> {
    table.soft_delete.map(|deleted| format!("t.{} IS NULL", ident(deleted)))
}

/// The row of `table` with key `key` and its HLC stamps when `stamped`; only when live if
/// `live_only`.
pub(super) async fn fetch(
    conn: &mut SqliteConnection,
    table: &'static TableMeta,
    key: &Row,
    stamped: bool,
    live_only: bool,
) -> Result<Option<(Row, Stamps)>> {
    let mut sql = Sql::new(format!("SELECT {}", columns(table)));
    if stamped {
        sql.push(", t._engine_hlc");
    }
    sql.push(format_args!(" FROM {} AS t WHERE ", ident(table.name)));
    push_key(&mut sql, table, key)?;
    if live_only && let Some(live) = live(table) {
        sql.push(" AND ").push(live);
    }
    let Some(row) = sql.build().fetch_optional(&mut *conn).await? else { return Ok(None) };
    let decoded = decode_row(table, &row)?;
    let stamps = match stamped.then(|| sqlx::Row::try_get::<String, _>(&row, table.columns.len())) {
        Some(Ok(text)) => match serde_json::from_str(&text) {
            Ok(Value::Object(map)) => map,
            _ => Stamps::new(),
        },
        _ => Stamps::new(),
    };
    Ok(Some((decoded, stamps)))
}

/// `EXISTS (…)`: a live row of `table` has key `key`.
pub(super) fn push_exists(sql: &mut Sql, table: &TableMeta, key: &Row) -> Result<()> {
    sql.push(format_args!("EXISTS (SELECT 1 FROM {} AS t WHERE ", ident(table.name)));
    push_key(sql, table, key)?;
    if let Some(live) = live(table) {
        sql.push(" AND ").push(live);
    }
    sql.push(")");
    Ok(())
}

/// `INSERT` of a value per column of `table` (in column order), and of the row's stamps when it
/// keeps them.
pub(super) async fn insert(
    conn: &mut SqliteConnection,
    table: &TableMeta,
    values: &[Value],
    stamps: Option<&Value>,
) -> Result<()> {
    let mut sql = Sql::new("");
    push_insert(&mut sql, table, values, stamps, None)?;
    sql.build().execute(&mut *conn).await?;
    Ok(())
}

/// A condition appended to a statement (`EXISTS (…) AND …`).
pub(crate) type Condition<'a> = &'a dyn Fn(&mut Sql) -> Result<()>;

/// Append the `INSERT` of [`insert`] to `sql`, as a statement of it; with `condition`, the row
/// is inserted only where that holds.
pub(super) fn push_insert(
    sql: &mut Sql,
    table: &TableMeta,
    values: &[Value],
    stamps: Option<&Value>,
    condition: Option<Condition<'_>>,
) -> Result<()> {
    let mut names: Vec<String> = table.columns.iter().map(|c| ident(c.name)).collect();
    if stamps.is_some() {
        names.push("_engine_hlc".into());
    }
    let values_or_select = if condition.is_some() { "SELECT " } else { "VALUES (" };
    sql.push(format_args!("INSERT INTO {} ({}) {values_or_select}", ident(table.name), names.join(", ")));
    for (i, (column, value)) in table.columns.iter().zip(values).enumerate() {
        if i > 0 {
            sql.push(", ");
        }
        sql.push_bind(bound(table, column, value)?);
    }
    if let Some(stamps) = stamps {
        sql.push(", ").push_bind(stamps.to_string());
    }
    match condition {
        Some(condition) => {
            sql.push(" WHERE ");
            condition(sql)?;
        }
        None => {
            sql.push(")");
        }
    }
    Ok(())
}

/// `UPDATE` of the `assigned` columns of the row with key `key` to their values in `after`, and of
/// its stamps when given; with nothing to assign, the row is touched (stamped again).
pub(super) async fn update(
    conn: &mut SqliteConnection,
    table: &TableMeta,
    key: &Row,
    assigned: &[&ColumnMeta],
    after: &Row,
    stamps: Option<Value>,
) -> Result<()> {
    let mut sql = Sql::new(format!("UPDATE {} AS t SET ", ident(table.name)));
    let mut set = Vec::new();
    for column in assigned {
        set.push((column.name, bound(table, column, after.get(column.name).unwrap_or(&Value::Null))?));
    }
    if set.is_empty() {
        // A column set to itself is a write the stamp trigger sees; a key column's would leave a
        // tombstone of nothing.
        let touched = table.columns.iter().find(|c| !table.is_key(c.name)).unwrap_or(&table.columns[0]);
        sql.push(format_args!("{name} = {name}", name = ident(touched.name)));
    }
    for (i, (name, value)) in set.into_iter().enumerate() {
        sql.push(if i == 0 { "" } else { ", " }).push(format_args!("{} = ", ident(name))).push_bind(value);
    }
    if let Some(stamps) = stamps {
        sql.push(", _engine_hlc = ").push_bind(stamps.to_string());
    }
    sql.push(" WHERE ");
    push_key(&mut sql, table, key)?;
    sql.build().execute(&mut *conn).await?;
    Ok(())
}

/// `DELETE` of the row with key `key`.
pub(super) async fn delete(conn: &mut SqliteConnection, table: &TableMeta, key: &Row) -> Result<()> {
    let mut sql = Sql::new(format!("DELETE FROM {} AS t WHERE ", ident(table.name)));
    push_key(&mut sql, table, key)?;
    sql.build().execute(&mut *conn).await?;
    Ok(())
}

/// The live rows of `table` whose columns equal the given values, in primary-key order.
pub(super) async fn select(
    conn: &mut SqliteConnection,
    table: &'static TableMeta,
    equalities: &[(&ColumnMeta, Value)],
) -> Result<Vec<Row>> {
    let mut sql = Sql::new(format!("SELECT {} FROM {} AS t WHERE 1", columns(table), ident(table.name)));
    for (column, value) in equalities {
        sql.push(format_args!(" AND t.{} = ", ident(column.name)));
        // A value the column cannot hold matches no row.
        match bound(table, column, value) {
            Ok(value) => sql.push_bind(value),
            Err(_) => sql.push("NULL"),
        };
    }
    if let Some(live) = live(table) {
        sql.push(" AND ").push(live);
    }
    let order: Vec<String> = table.key_columns().map(|c| format!("t.{}", ident(c.name))).collect();
    sql.push(format_args!(" ORDER BY {}", order.join(", ")));
    let rows = sql.build().fetch_all(&mut *conn).await?;
    rows.iter().map(|row| decode_row(table, row)).collect()
}

/// Enqueue `job` for `user`, in the mutation's transaction.
pub(super) async fn enqueue(conn: &mut SqliteConnection, job: &JobRequest, user: Option<&str>) -> Result<()> {
    let now = now_ms();
    let delay = i64::try_from(job.delay.as_millis()).unwrap_or(i64::MAX);
    sqlx::query("INSERT INTO _engine_jobs (name, payload, run_at, user_id, created_at) VALUES (?, ?, ?, ?, ?)")
        .bind(&job.name)
        .bind(job.payload.to_string())
        .bind(now.saturating_add(delay))
        .bind(user)
        .bind(now)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Record `writer` as who wrote each of `written` (a blob column and the key it holds) into the
/// row of `table` whose key is `key`.
pub(super) async fn note_blob_refs(
    conn: &mut SqliteConnection,
    table: &TableMeta,
    key: &Value,
    written: Vec<(&'static str, String)>,
    writer: &str,
) -> Result<()> {
    let mut sql = Sql::new("INSERT INTO _engine_blob_refs (table_name, row_key, column_name, blob_key, writer) ");
    sql.push_values(written, |mut values, (column, blob)| {
        values
            .push_bind(table.name)
            .push_bind(key.to_string())
            .push_bind(column)
            .push_bind(blob)
            .push_bind(writer.to_owned());
    });
    sql.push(
        " ON CONFLICT (table_name, row_key, column_name) DO UPDATE SET blob_key = excluded.blob_key, writer = excluded.writer",
    );
    sql.build().execute(&mut *conn).await.map_err(Error::from)?;
    Ok(())
}

/// Clear the note of disuse of the blobs `keys` (`_engine_blobs.unused_since`): a row names them.
pub(super) async fn clear_unused(conn: &mut SqliteConnection, keys: &[String]) -> Result<()> {
    for key in keys {
        sqlx::query("UPDATE _engine_blobs SET unused_since = NULL WHERE blob_key = $1 AND unused_since IS NOT NULL")
            .bind(key)
            .execute(&mut *conn)
            .await
            .map_err(Error::from)?;
    }
    Ok(())
}
