//! Column values between Postgres and their JSON form: every value is decoded through
//! the column type's [`ColumnType`], so the store produces exactly the wire form of the kernel.

use engine_kernel::column::Timestamp;
use engine_kernel::{ColumnMeta, ColumnType, SqlType};
use serde_json::Value;
use sqlx::postgres::PgRow;
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
