//! Column values between Postgres and their JSON form: every value is decoded through the column
//! type's [`ColumnType`], and bound as the kernel's [`ColumnValue`], so the store reads and
//! writes exactly the wire form of the kernel.

use engine_kernel::column::Timestamp;
use engine_kernel::{ColumnMeta, ColumnType, ColumnValue, SqlType, TableMeta};
use serde_json::Value;
use sqlx::postgres::PgRow;
use sqlx::{Postgres, Row};

use super::sql::Sql;
use crate::error::{Error, Result};
use crate::row_json::{write_json as write, write_object};

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

/// Write to `out` the JSON object of the row of `table` in the first columns of `row`: the object
/// [`decode_row`] gives, written without making it (text, numbers, booleans and bytes go
/// straight from Postgres' bytes to JSON; other types through their JSON value).
pub(crate) fn write_row(table: &TableMeta, row: &PgRow, out: &mut Vec<u8>) -> Result<()> {
    fn get<'r, T: sqlx::Decode<'r, Postgres> + sqlx::Type<Postgres>>(
        row: &'r PgRow,
        index: usize,
    ) -> Result<Option<T>> {
        row.try_get(index).map_err(Error::Database)
    }
    write_object(table, out, |i, column, out| {
        match column.sql_type {
            SqlType::Text => write(out, &get::<&str>(row, i)?)?,
            SqlType::SmallInt => write(out, &get::<i16>(row, i)?)?,
            SqlType::Integer => write(out, &get::<i32>(row, i)?)?,
            SqlType::BigInt => write(out, &get::<i64>(row, i)?)?,
            SqlType::Boolean => write(out, &get::<bool>(row, i)?)?,
            // A number JSON has no form for travels as null, as in the column's JSON value.
            SqlType::Real => write(out, &get::<f32>(row, i)?.map(f64::from).filter(|f| f.is_finite()))?,
            SqlType::Double => write(out, &get::<f64>(row, i)?.filter(|f| f.is_finite()))?,
            SqlType::Bytes | SqlType::CrdtText | SqlType::CrdtMap => match get::<&[u8]>(row, i)? {
                // Base64's alphabet needs no escape in a JSON string.
                Some(bytes) => {
                    use base64::Engine as _;
                    out.push(b'"');
                    let at = out.len();
                    out.resize(at + base64::encoded_len(bytes.len(), true).unwrap_or_default(), 0);
                    let written = base64::engine::general_purpose::STANDARD
                        .encode_slice(bytes, &mut out[at..])
                        .map_err(|err| Error::internal(format!("writing bytes: {err}")))?;
                    out.truncate(at + written);
                    out.push(b'"');
                }
                None => out.extend_from_slice(b"null"),
            },
            SqlType::Uuid | SqlType::Timestamp | SqlType::Json => write(out, &decode(row, i, column)?)?,
        }
        Ok(())
    })
}

/// The columns `columns` (indexes into `table.columns`) of the row of `table` in the first
/// columns of `row`.
pub(crate) fn decode_columns(table: &TableMeta, row: &PgRow, columns: &[usize]) -> Result<engine_kernel::Row> {
    let mut out = engine_kernel::Row::new();
    for &i in columns {
        let column = &table.columns[i];
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{decode_row, write_row};
    use crate::pg::test_db::TestDb;

    use crate::row_json::every_type::{TABLE, float, is_decoded, runner, text};

    type Case = (
        Option<String>,
        Option<i16>,
        Option<i32>,
        Option<i64>,
        Option<f32>,
        Option<f64>,
        Option<bool>,
        Option<Vec<u8>>,
        bool,
    );

    /// A row's JSON as the walk writes it is the object its decoded values make, for every
    /// column type, null or not.
    #[test]
    fn a_row_written_as_json_is_the_row_decoded() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let db = runtime.block_on(TestDb::new());
        let case = (
            proptest::option::of(text()),
            proptest::option::of(any::<i16>()),
            proptest::option::of(any::<i32>()),
            proptest::option::of(any::<i64>()),
            proptest::option::of(float().prop_map(|f| f as f32)),
            proptest::option::of(float()),
            proptest::option::of(any::<bool>()),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)),
            any::<bool>(),
        );
        let check = |(text, small, integer, big, real, double, flag, bytes, others): Case| {
            runtime.block_on(async {
                // The other types' values, or nulls.
                let others = if others {
                    "'6f1c7a2e-93b4-4c1e-9a57-0d2b8c4e1f30'::uuid, '2026-11-26 08:48:03.123456+00'::timestamptz, \
                     '{\"a\": [1, \"\\u00e9\\n\", null], \"b\": {\"c\": 1.5e300}}'::jsonb, '\\x0001ff'::bytea"
                } else {
                    "NULL::uuid, NULL::timestamptz, NULL::jsonb, NULL::bytea"
                };
                let sql = format!(
                    "SELECT $1::text, $2::int2, $3::int4, $4::int8, $5::float4, $6::float8, $7::bool, $8::bytea, {others}"
                );
                let row = sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(text)
                    .bind(small)
                    .bind(integer)
                    .bind(big)
                    .bind(real)
                    .bind(double)
                    .bind(flag)
                    .bind(bytes)
                    .fetch_one(&db.pool)
                    .await
                    .unwrap();
                let mut written = Vec::new();
                write_row(&TABLE, &row, &mut written).unwrap();
                is_decoded(&written, decode_row(&TABLE, &row).unwrap())
            })
        };
        let result = runner().run(&case, check);
        runtime.block_on(db.drop());
        result.unwrap();
    }
}
