//! Column values of the local store: stored as `engine_sqlite::values` stores them (in the form
//! they travel in), looked up and keyed in their canonical wire form.

use engine_kernel::{ColumnMeta, Row, TableMeta};
pub(crate) use engine_sqlite::values::{decode, sqlite_type, stored};
use serde_json::Value;
use sqlx::sqlite::SqliteRow;

/// A row of `table` read from the first columns of `row`, in column order.
pub(crate) fn decode_row(table: &TableMeta, row: &SqliteRow) -> crate::Result<Row> {
    let mut out = Row::new();
    for (i, column) in table.columns.iter().enumerate() {
        let value = decode(row, i, column).map_err(|e| crate::Error::decode(table.name, e))?;
        out.insert(column.name.to_owned(), value);
    }
    Ok(out)
}

/// `value` as column `column` of `table` holds it: checked as the server checks it, and in its
/// canonical wire form (a timestamp in UTC, a UUID in lowercase…), so local filters and keys
/// match what the server will send back.
pub(crate) fn canonical(table: &TableMeta, column: &ColumnMeta, value: &Value) -> engine_kernel::Result<Value> {
    table.value(column, value).map(|typed| typed.to_json())
}

/// A value to compare a column with, in the form the store holds (as given when it cannot be
/// one: it then matches nothing).
pub(crate) fn looked_up(table: &TableMeta, column: &ColumnMeta, value: &Value) -> Value {
    canonical(table, column, value).unwrap_or_else(|_| value.clone())
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
