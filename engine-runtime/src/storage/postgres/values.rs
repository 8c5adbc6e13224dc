//! Column values between Postgres and their JSON form: every value is decoded through the column
//! type's [`ColumnType`], and bound as the kernel's [`ColumnValue`], so the store reads and
//! writes exactly the wire form of the kernel.

use engine_kernel::column::Timestamp;
use engine_kernel::{ColumnMeta, ColumnType, ColumnValue, SqlType, TableMeta};
use serde_json::Value;
use sqlx::postgres::PgRow;
use sqlx::{Postgres, Row};

use super::selection::Sql;
use crate::error::{Error, Result};

/// The JSON value of column `column` at `index` of `row`.
pub(crate) fn decode(row: &PgRow, index: usize, column: &ColumnMeta) -> Result<Value> {
    fn get<T>(row: &PgRow, index: usize) -> Result<Value>
    where
        T: for<'r> sqlx::Decode<'r, Postgres> + sqlx::Type<Postgres> + ColumnType,
        Option<T>: ColumnType,
    {
        let value: Option<T> = row.try_get(index).map_err(Error::Database)?;
        Ok(value.to_json())
    }
    match column.sql_type {
        SqlType::Text => get::<String>(row, index),
        SqlType::SmallInt => get::<i16>(row, index),
        SqlType::Integer => get::<i32>(row, index),
        SqlType::BigInt => get::<i64>(row, index),
        SqlType::Real => get::<f32>(row, index),
        SqlType::Double => get::<f64>(row, index),
        SqlType::Boolean => get::<bool>(row, index),
        SqlType::Uuid => get::<uuid::Uuid>(row, index),
        SqlType::Timestamp => get::<Timestamp>(row, index),
        SqlType::Json => get::<Value>(row, index),
        SqlType::Bytes | SqlType::CrdtText | SqlType::CrdtMap => get::<Vec<u8>>(row, index),
        other => Err(Error::internal(format!("no decoding for column type {other:?}"))),
    }
}

/// A row of `table` read from the first columns of `row`, in column order.
pub(crate) fn decode_row(table: &TableMeta, row: &PgRow) -> Result<engine_kernel::Row> {
    let mut out = engine_kernel::Row::new();
    for (i, column) in table.columns.iter().enumerate() {
        out.insert(column.name.to_owned(), decode(row, i, column)?);
    }
    Ok(out)
}

/// The key of a row of `table` read from the first columns of `row`, in key order.
pub(crate) fn decode_key(table: &TableMeta, row: &PgRow) -> Result<Vec<Value>> {
    table
        .primary_key
        .iter()
        .map(|key| {
            let index = table.columns.iter().position(|c| c.name == *key);
            let index = index.ok_or_else(|| Error::internal(format!("key column `{key}` is not a column")))?;
            decode(row, index, &table.columns[index])
        })
        .collect()
}

/// Bind `value` as column `column` of `table`, refusing a value of the wrong shape and a null in a
/// non-null column (the kernel's rules for every store).
pub(crate) fn push_value(sql: &mut Sql, table: &TableMeta, column: &ColumnMeta, value: &Value) -> Result<()> {
    match table.value(column, value)? {
        ColumnValue::Text(v) => sql.push_bind(v),
        ColumnValue::SmallInt(v) => sql.push_bind(v),
        ColumnValue::Integer(v) => sql.push_bind(v),
        ColumnValue::BigInt(v) => sql.push_bind(v),
        ColumnValue::Real(v) => sql.push_bind(v),
        ColumnValue::Double(v) => sql.push_bind(v),
        ColumnValue::Boolean(v) => sql.push_bind(v),
        ColumnValue::Uuid(v) => sql.push_bind(v),
        ColumnValue::Timestamp(v) => sql.push_bind(v),
        ColumnValue::Json(v) => sql.push_bind(v),
        ColumnValue::Bytes(v) => sql.push_bind(v),
        other => return Err(Error::internal(format!("no binding for a value {other:?}"))),
    };
    Ok(())
}
