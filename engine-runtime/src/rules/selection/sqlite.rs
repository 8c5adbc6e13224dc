//! The selection compiler's SQLite dialect: which rows a bucket holds, as SQLite reads them from
//! the values `engine_sqlite::values` stores. The same conditions as Postgres' (scope, ties,
//! constant filters, live), compared in the stored form, so the `(scope, _engine_seq, key)`
//! index serves them.

use engine_kernel::rules::ConstValue;
use engine_kernel::rules::buckets::RuleSelection;
use engine_kernel::{ColumnMeta, SqlType, TableMeta};
use engine_sqlite::values::{is_float, stored};
use engine_sqlite::{Sql, ident};
use serde_json::Value;

use crate::pg::sql::literal;

/// `alias.column`, quoted.
fn column(alias: &str, name: &str) -> String {
    format!("{alias}.{}", ident(name))
}

/// A constant of a rule as SQLite holds it (a boolean as 0 or 1).
pub(crate) fn constant(value: ConstValue) -> String {
    match value {
        ConstValue::Bool(b) => i64::from(b).to_string(),
        ConstValue::Int(i) => i.to_string(),
        ConstValue::Text(t) => literal(t),
    }
}

/// A parameter's text form (a bucket key's) as the value of `column` it names.
pub(crate) fn param_value(column: &ColumnMeta, text: &str) -> Value {
    match column.sql_type {
        SqlType::SmallInt | SqlType::Integer | SqlType::BigInt => {
            text.parse::<i64>().map_or_else(|_| Value::String(text.to_owned()), Value::from)
        }
        SqlType::Boolean => match text {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            other => Value::String(other.to_owned()),
        },
        SqlType::Real | SqlType::Double => text
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or_else(|| Value::String(text.to_owned()), Value::Number),
        SqlType::Text
        | SqlType::Uuid
        | SqlType::Timestamp
        | SqlType::Json
        | SqlType::Bytes
        | SqlType::CrdtText
        | SqlType::CrdtMap => Value::String(text.to_owned()),
    }
}

/// The conditions of a selection that bind nothing, then liveness: its constant filters, its
/// ties, and the soft-delete column's `IS NULL`.
fn fixed_conditions(alias: &str, table: &TableMeta, selection: &RuleSelection) -> Vec<String> {
    let filters =
        selection.selection.filters.iter().map(|f| format!("{} = {}", column(alias, f.column), constant(f.value)));
    let ties = selection.ties().iter().map(|(c, first)| format!("{} = {}", column(alias, c), column(alias, first)));
    let live = table.soft_delete.map(|deleted| format!("{} IS NULL", column(alias, deleted)));
    filters.chain(ties).chain(live).collect()
}

/// The rows of `table` (as `alias`) in the bucket of `selection` whose parameters are `params`
/// (in parameter order): scope, ties, filters, live.
pub(crate) fn push_selected(
    sql: &mut Sql,
    alias: &str,
    table: &TableMeta,
    selection: &RuleSelection,
    params: &[String],
) {
    for (i, (name, value)) in selection.scope_columns().iter().zip(params).enumerate() {
        if i > 0 {
            sql.push(" AND ");
        }
        let scoped = table.column(name).expect("scope columns are columns");
        sql.push(format_args!("{} = ", column(alias, name))).push_bind(stored(scoped, &param_value(scoped, value)));
    }
    for condition in fixed_conditions(alias, table, selection) {
        sql.push(" AND ").push(condition);
    }
}

/// `SELECT DISTINCT` of the scope values (parameter order) of the live rows of `table` in any
/// bucket of `selection`: which of its buckets hold a row, as stats counts them.
pub(crate) fn push_any_bucket(sql: &mut Sql, table: &TableMeta, selection: &RuleSelection) {
    let scope = selection.scope_columns();
    let columns: Vec<String> = scope.iter().map(|c| column("t", c)).collect();
    sql.push(format_args!("SELECT DISTINCT {} FROM {} AS t WHERE ", columns.join(", "), ident(table.name)));
    sql.push(scope.iter().map(|c| format!("{} IS NOT NULL", column("t", c))).collect::<Vec<_>>().join(" AND "));
    for condition in fixed_conditions("t", table, selection) {
        sql.push(" AND ").push(condition);
    }
}

/// One step of a pull's walk through one bucket of `selection`: its rows written from `from`
/// (on) to `to` (below), after `resume` (the last row delivered: number and key) when given, in
/// the change stream's order (number, then key), at most `limit`. Each row as its JSON object's
/// text ([`json_object`]), then its columns `columns` (indexes into the table's columns), then
/// its number, then (with `stamps`) its clock stamps. One range scan of the `(scope,
/// _engine_seq, key)` index under the `LIMIT`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn push_walk_one(
    sql: &mut Sql,
    table: &TableMeta,
    selection: &RuleSelection,
    params: &[String],
    (from, to): (u64, u64),
    resume: Option<(u64, &[Value])>,
    limit: usize,
    (columns, stamps): (&[usize], bool),
) {
    let columns: String = columns.iter().map(|&i| format!(", {}", column("t", table.columns[i].name))).collect();
    let stamps = if stamps { ", t._engine_hlc" } else { "" };
    sql.push(format_args!(
        "SELECT {}{columns}, t._engine_seq{stamps} FROM {} AS t WHERE ",
        json_object("t", table),
        ident(table.name)
    ));
    push_selected(sql, "t", table, selection, params);
    let number = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let resume = resume.filter(|(seq, _)| *seq >= from);
    // The scan starts at the lower bound on `_engine_seq`, not at the row value after it: a
    // resumed step bounded by `from` alone read the bucket from its first row at every page.
    let lower = resume.map_or(from, |(seq, _)| seq);
    sql.push(" AND t._engine_seq >= ").push_bind(number(lower)).push(" AND t._engine_seq < ").push_bind(number(to));
    let keys: Vec<&ColumnMeta> = table.key_columns().collect();
    if let Some((seq, values)) = resume {
        let left: Vec<String> = keys.iter().map(|k| column("t", k.name)).collect();
        sql.push(format_args!(" AND (t._engine_seq, {}) > (", left.join(", "))).push_bind(number(seq));
        for (key, value) in keys.iter().zip(values) {
            sql.push(", ").push_bind(stored(key, value));
        }
        sql.push(")");
    }
    let order: Vec<String> = keys.iter().map(|k| column("t", k.name)).collect();
    sql.push(format_args!(" ORDER BY t._engine_seq, {} LIMIT ", order.join(", ")));
    sql.push_bind(i64::try_from(limit).unwrap_or(i64::MAX));
}

/// The JSON object of the row of `table` as `alias`, written by SQLite: every column but its
/// floats in column order, in the wire form `engine_sqlite::values::decode` gives. The file
/// keeps most values in that form already; a boolean's 0 or 1 is written `false` or `true`, and
/// a JSON document that is not JSON as null. Floats are left to the reader
/// (`sqlite::write_row`): SQLite's JSON writes 15 significant digits, and its `printf` gets a
/// 17th wrong. A row is then one value handed out of the file, where it was a value a column
/// (each one copied out, then freed).
pub(crate) fn json_object(alias: &str, table: &TableMeta) -> String {
    let fields: Vec<String> = table
        .columns
        .iter()
        .filter(|c| !is_float(c.sql_type))
        .map(|c| {
            let value = column(alias, c.name);
            let value = match c.sql_type {
                SqlType::Boolean => {
                    format!("json(CASE WHEN {value} IS NULL THEN 'null' WHEN {value} THEN 'true' ELSE 'false' END)")
                }
                SqlType::Json => format!("json(CASE WHEN json_valid({value}) THEN {value} ELSE 'null' END)"),
                SqlType::Real
                | SqlType::Double
                | SqlType::SmallInt
                | SqlType::Integer
                | SqlType::BigInt
                | SqlType::Text
                | SqlType::Uuid
                | SqlType::Timestamp
                | SqlType::Bytes
                | SqlType::CrdtText
                | SqlType::CrdtMap => value,
            };
            format!("{}, {value}", literal(c.name))
        })
        .collect();
    format!("json_object({})", fields.join(", "))
}

#[cfg(test)]
mod tests;
