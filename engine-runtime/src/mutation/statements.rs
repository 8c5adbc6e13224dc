//! The statements of a mutation's reads and writes on one row or table, built with bound values.
//! Which rows a bucket holds is not decided here but by the selection compiler: these
//! statements address rows by primary key or by the mutator's own filters, and the mutation
//! authorizes what they return.

use engine_kernel::{ColumnMeta, Row, TableMeta};
use serde_json::Value;

use crate::error::Result;
use crate::pg::sql::Sql;
use crate::pg::sql::{ident, ordered};
use crate::pg::values::push_value;
use crate::rules::selection::{column, live};

/// The columns of `table` as `alias.column, …`.
fn columns(alias: &str, table: &TableMeta) -> String {
    table.columns.iter().map(|c| column(alias, c.name)).collect::<Vec<_>>().join(", ")
}

/// `alias.k1 = $a AND alias.k2 = $b` over the primary key, with the values of `key`.
fn push_key(sql: &mut Sql, alias: &str, table: &TableMeta, key: &Row) -> Result<()> {
    for (i, key_column) in table.key_columns().enumerate() {
        if i > 0 {
            sql.push(" AND ");
        }
        sql.push(format_args!("{} = ", column(alias, key_column.name)));
        push_value(sql, table, key_column, key.get(key_column.name).unwrap_or(&Value::Null))?;
    }
    Ok(())
}

/// `INSERT` of a value per column of `table` (in column order), and of the row's HLC stamps
/// when it keeps them.
pub(super) fn push_insert(sql: &mut Sql, table: &TableMeta, values: &[Value], stamps: Option<&Value>) -> Result<()> {
    let mut names: Vec<String> = table.columns.iter().map(|c| ident(c.name)).collect();
    if stamps.is_some() {
        names.push("_engine_hlc".into());
    }
    sql.push(format_args!("INSERT INTO {} ({}) VALUES (", ident(table.name), names.join(", ")));
    for (i, (column, value)) in table.columns.iter().zip(values).enumerate() {
        if i > 0 {
            sql.push(", ");
        }
        push_value(sql, table, column, value)?;
    }
    if let Some(stamps) = stamps {
        sql.push(", ").push_bind(stamps.clone()).push("::jsonb");
    }
    sql.push(")");
    Ok(())
}

/// The row of `table` with key `key`, with its HLC stamps when `stamped`; only when live if
/// `live_only`; locked for update if `lock`.
pub(super) fn fetch(table: &TableMeta, key: &Row, stamped: bool, live_only: bool, lock: bool) -> Result<Sql> {
    let mut sql = Sql::new(format!("SELECT {}", columns("t", table)));
    if stamped {
        sql.push(", t._engine_hlc");
    }
    sql.push(format_args!(" FROM {} AS t WHERE ", ident(table.name)));
    push_key(&mut sql, "t", table, key)?;
    if live_only && let Some(live) = live("t", table) {
        sql.push(" AND ").push(live);
    }
    if lock {
        sql.push(" FOR UPDATE");
    }
    Ok(sql)
}

/// `EXISTS (…)`: whether a live row of `table` with key `key` exists, as a condition of another
/// statement.
pub(super) fn push_exists(sql: &mut Sql, table: &TableMeta, key: &Row) -> Result<()> {
    sql.push(format_args!("EXISTS (SELECT 1 FROM {} AS t WHERE ", ident(table.name)));
    push_key(sql, "t", table, key)?;
    if let Some(live) = live("t", table) {
        sql.push(" AND ").push(live);
    }
    sql.push(")");
    Ok(())
}

/// `UPDATE` of the `assigned` columns of the row with key `key` to their values in `after`, of
/// its HLC stamps when given, and of its transaction stamp when the table is `synced`. With
/// nothing else to assign, the row is touched, so that pulling clients see it again.
pub(super) fn update(
    table: &TableMeta,
    key: &Row,
    assigned: &[&ColumnMeta],
    after: &Row,
    stamps: Option<Value>,
    synced: bool,
) -> Result<Sql> {
    let mut sql = Sql::new(format!("UPDATE {} AS t SET ", ident(table.name)));
    // The row's stamp, set here: the stamp trigger runs only for a row whose stamp is not the
    // writing transaction's, so it is not called for the engine's own updates.
    let mut first = true;
    if synced {
        sql.push("_engine_xid = pg_current_xact_id()");
        first = false;
    }
    for assigned_column in assigned {
        if !std::mem::take(&mut first) {
            sql.push(", ");
        }
        sql.push(format_args!("{} = ", ident(assigned_column.name)));
        push_value(&mut sql, table, assigned_column, after.get(assigned_column.name).unwrap_or(&Value::Null))?;
    }
    match stamps {
        Some(stamps) => {
            sql.push(if first { "" } else { ", " });
            sql.push("_engine_hlc = ").push_bind(stamps).push("::jsonb");
        }
        None if first => {
            let first = ident(table.primary_key[0]);
            sql.push(format_args!("{first} = {first}"));
        }
        None => {}
    }
    sql.push(" WHERE ");
    push_key(&mut sql, "t", table, key)?;
    Ok(sql)
}

/// `DELETE` of the row with key `key`.
pub(super) fn delete(table: &TableMeta, key: &Row) -> Result<Sql> {
    let mut sql = Sql::new(format!("DELETE FROM {} AS t WHERE ", ident(table.name)));
    push_key(&mut sql, "t", table, key)?;
    Ok(sql)
}

/// The live rows of `table` whose columns equal the given values, in primary-key order.
pub(super) fn select(table: &TableMeta, equalities: &[(&ColumnMeta, Value)]) -> Result<Sql> {
    let mut sql = Sql::new(format!("SELECT {} FROM {} AS t WHERE true", columns("t", table), ident(table.name)));
    for (equal_column, value) in equalities {
        sql.push(format_args!(" AND {} = ", column("t", equal_column.name)));
        push_value(&mut sql, table, equal_column, value)?;
    }
    if let Some(live) = live("t", table) {
        sql.push(" AND ").push(live);
    }
    let order: Vec<String> = table.key_columns().map(|c| ordered("t", c)).collect();
    sql.push(format_args!(" ORDER BY {}", order.join(", ")));
    Ok(sql)
}
