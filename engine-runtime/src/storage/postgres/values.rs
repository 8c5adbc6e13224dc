//! Column values between Postgres and their JSON form: every value is decoded and bound through
//! the column type's [`ColumnType`], so the store produces exactly the wire form of the kernel.

use engine_kernel::column::Timestamp;
use engine_kernel::{ColumnMeta, ColumnType, Error as KernelError, SqlType};
use serde_json::Value;
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::query::Query;
use sqlx::{Postgres, Row};

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
        other => Err(Error::Internal(format!("no decoding for column type {other:?}"))),
    }
}

/// Decode `value` as column `column` of `table`, refusing values of the wrong shape and nulls in
/// non-null columns.
pub(crate) fn typed<T>(table: &str, column: &ColumnMeta, value: &Value) -> Result<Option<T>>
where
    Option<T>: ColumnType,
{
    if value.is_null() && !column.nullable {
        return Err(KernelError::validation(format!("column `{table}.{}` cannot be null", column.name)).into());
    }
    <Option<T>>::from_json(value.clone())
        .map_err(|e| KernelError::validation(format!("column `{table}.{}`: {e}", column.name)).into())
}

/// Check that `value` fits column `column` of `table`, as [`bind`] would.
pub(crate) fn check(table: &str, column: &ColumnMeta, value: &Value) -> Result<()> {
    match column.sql_type {
        SqlType::Text => typed::<String>(table, column, value).map(drop),
        SqlType::SmallInt => typed::<i16>(table, column, value).map(drop),
        SqlType::Integer => typed::<i32>(table, column, value).map(drop),
        SqlType::BigInt => typed::<i64>(table, column, value).map(drop),
        SqlType::Real => typed::<f32>(table, column, value).map(drop),
        SqlType::Double => typed::<f64>(table, column, value).map(drop),
        SqlType::Boolean => typed::<bool>(table, column, value).map(drop),
        SqlType::Uuid => typed::<uuid::Uuid>(table, column, value).map(drop),
        SqlType::Timestamp => typed::<Timestamp>(table, column, value).map(drop),
        SqlType::Json => typed::<Value>(table, column, value).map(drop),
        SqlType::Bytes | SqlType::CrdtText | SqlType::CrdtMap => typed::<Vec<u8>>(table, column, value).map(drop),
        other => Err(Error::Internal(format!("no column type {other:?}"))),
    }
}

/// `query` with `value` bound as column `column` of `table`.
pub(crate) fn bind<'q>(
    query: Query<'q, Postgres, PgArguments>,
    table: &str,
    column: &ColumnMeta,
    value: &Value,
) -> Result<Query<'q, Postgres, PgArguments>> {
    Ok(match column.sql_type {
        SqlType::Text => query.bind(typed::<String>(table, column, value)?),
        SqlType::SmallInt => query.bind(typed::<i16>(table, column, value)?),
        SqlType::Integer => query.bind(typed::<i32>(table, column, value)?),
        SqlType::BigInt => query.bind(typed::<i64>(table, column, value)?),
        SqlType::Real => query.bind(typed::<f32>(table, column, value)?),
        SqlType::Double => query.bind(typed::<f64>(table, column, value)?),
        SqlType::Boolean => query.bind(typed::<bool>(table, column, value)?),
        SqlType::Uuid => query.bind(typed::<uuid::Uuid>(table, column, value)?),
        SqlType::Timestamp => query.bind(typed::<Timestamp>(table, column, value)?),
        SqlType::Json => query.bind(typed::<Value>(table, column, value)?),
        // A collaborative value travels as base64 of its state, like bytes.
        SqlType::Bytes | SqlType::CrdtText | SqlType::CrdtMap => query.bind(typed::<Vec<u8>>(table, column, value)?),
        other => return Err(Error::Internal(format!("no binding for column type {other:?}"))),
    })
}
