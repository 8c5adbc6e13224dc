//! Column values between their JSON (wire) form and SQLite. Every value is stored in the form it
//! travels in: text, numbers and booleans natively, timestamps as their RFC 3339 text, bytes and
//! collaborative state as base64 text, JSON documents as JSON text. Reading a value back gives
//! the wire form unchanged.

use engine_kernel::{ColumnMeta, Row, SqlType, TableMeta};
use serde_json::Value;
use sqlx::sqlite::{SqliteArguments, SqliteRow};
use sqlx::{Row as _, Sqlite};

type Query<'q> = sqlx::query::Query<'q, Sqlite, SqliteArguments>;

/// The SQLite type that stores a column.
pub(crate) fn sqlite_type(sql_type: SqlType) -> &'static str {
    match sql_type {
        SqlType::SmallInt | SqlType::Integer | SqlType::BigInt | SqlType::Boolean => "INTEGER",
        SqlType::Real | SqlType::Double => "REAL",
        _ => "TEXT",
    }
}

/// `query` with `value` bound as column `column`.
pub(crate) fn bind<'q>(query: Query<'q>, column: &ColumnMeta, value: &Value) -> Query<'q> {
    match (column.sql_type, value) {
        (_, Value::Null) => query.bind(None::<String>),
        (SqlType::Boolean, Value::Bool(b)) => query.bind(i64::from(*b)),
        (SqlType::Real | SqlType::Double, Value::Number(n)) => query.bind(n.as_f64()),
        (SqlType::SmallInt | SqlType::Integer | SqlType::BigInt, Value::Number(n)) => query.bind(n.as_i64()),
        (SqlType::Json, other) => query.bind(other.to_string()),
        (_, Value::String(s)) => query.bind(s.clone()),
        (_, other) => query.bind(other.to_string()),
    }
}

/// The JSON value of column `column` at `index` of `row`.
pub(crate) fn decode(row: &SqliteRow, index: usize, column: &ColumnMeta) -> sqlx::Result<Value> {
    Ok(match column.sql_type {
        SqlType::Boolean => row.try_get::<Option<i64>, _>(index)?.map_or(Value::Null, |v| Value::Bool(v != 0)),
        SqlType::SmallInt | SqlType::Integer | SqlType::BigInt => {
            row.try_get::<Option<i64>, _>(index)?.map_or(Value::Null, Value::from)
        }
        SqlType::Real | SqlType::Double => row.try_get::<Option<f64>, _>(index)?.map_or(Value::Null, Value::from),
        SqlType::Json => match row.try_get::<Option<String>, _>(index)? {
            Some(text) => serde_json::from_str(&text).unwrap_or(Value::Null),
            None => Value::Null,
        },
        _ => row.try_get::<Option<String>, _>(index)?.map_or(Value::Null, Value::String),
    })
}

/// A row of `table` read from the first columns of `row`, in column order.
pub(crate) fn decode_row(table: &TableMeta, row: &SqliteRow) -> sqlx::Result<Row> {
    let mut out = Row::new();
    for (i, column) in table.columns.iter().enumerate() {
        out.insert(column.name.to_owned(), decode(row, i, column)?);
    }
    Ok(out)
}

/// `value` as column `column` of `table` holds it: checked as the server checks it, and in its
/// canonical wire form (a timestamp in UTC, a UUID in lowercase…), so local filters and keys
/// match what the server will send back.
pub(crate) fn canonical(table: &TableMeta, column: &ColumnMeta, value: &Value) -> engine_kernel::Result<Value> {
    table.value(column, value).map(|typed| typed.to_json())
}

/// The identity of a row within its table: its primary key values as a JSON array.
pub(crate) fn key_text(table: &TableMeta, row: &Row) -> String {
    let values: Vec<&Value> = table.primary_key.iter().map(|k| row.get(*k).unwrap_or(&Value::Null)).collect();
    serde_json::to_string(&values).expect("JSON values serialize")
}

/// The primary key columns of `table` with their values from a [`key_text`].
pub(crate) fn key_row(table: &TableMeta, key: &str) -> Row {
    let values: Vec<Value> = serde_json::from_str(key).unwrap_or_default();
    table.primary_key.iter().zip(values).map(|(k, v)| ((*k).to_owned(), v)).collect()
}
