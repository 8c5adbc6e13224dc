//! Column values between their JSON (wire) form and SQLite. Every value is stored in the form it
//! travels in: text, numbers and booleans natively, timestamps as their RFC 3339 text, bytes and
//! collaborative state as base64 text, JSON documents as JSON text. Reading a value back gives
//! the wire form unchanged.

use engine_kernel::{ColumnMeta, SqlType};
use serde_json::Value;
use sqlx::encode::{Encode, IsNull};
use sqlx::error::BoxDynError;
use sqlx::sqlite::{SqliteArgumentsBuffer, SqliteRow, SqliteTypeInfo};
use sqlx::{Row as _, Sqlite, Type};

/// The SQLite type that stores a column.
pub fn sqlite_type(sql_type: SqlType) -> &'static str {
    match sql_type {
        SqlType::SmallInt | SqlType::Integer | SqlType::BigInt | SqlType::Boolean => "INTEGER",
        SqlType::Real | SqlType::Double => "REAL",
        SqlType::Text
        | SqlType::Uuid
        | SqlType::Timestamp
        | SqlType::Json
        | SqlType::Bytes
        | SqlType::CrdtText
        | SqlType::CrdtMap => "TEXT",
    }
}

/// Whether a column of `sql_type` holds floats: SQLite's JSON writes them with 15 significant
/// digits, which loses bits, so they are written to JSON by the reader.
pub fn is_float(sql_type: SqlType) -> bool {
    matches!(sql_type, SqlType::Real | SqlType::Double)
}

/// A column value as a statement binds it (`QueryBuilder::push_bind`), in the SQLite type that
/// stores it; `None` binds `NULL`.
#[derive(Debug, Clone, PartialEq)]
pub enum Stored {
    /// An integer: integer columns, and booleans as 0 or 1.
    Integer(Option<i64>),
    /// A float.
    Real(Option<f64>),
    /// Text: every other value, and a value of the wrong JSON shape for its column.
    Text(Option<String>),
}

/// `value` as column `column` binds it. A value of another JSON shape than its column's is bound
/// as its text, which no stored value equals.
pub fn stored(column: &ColumnMeta, value: &Value) -> Stored {
    if value.is_null() {
        return Stored::Text(None);
    }
    match column.sql_type {
        SqlType::Boolean => match value {
            Value::Bool(b) => Stored::Integer(Some(i64::from(*b))),
            other => as_text(other),
        },
        SqlType::Real | SqlType::Double => match value {
            Value::Number(n) => Stored::Real(n.as_f64()),
            other => as_text(other),
        },
        SqlType::SmallInt | SqlType::Integer | SqlType::BigInt => match value {
            Value::Number(n) => Stored::Integer(n.as_i64()),
            other => as_text(other),
        },
        SqlType::Json => Stored::Text(Some(value.to_string())),
        SqlType::Text | SqlType::Uuid | SqlType::Timestamp | SqlType::Bytes | SqlType::CrdtText | SqlType::CrdtMap => {
            as_text(value)
        }
    }
}

/// A string as it is, any other JSON value as its text.
fn as_text(value: &Value) -> Stored {
    match value {
        Value::String(s) => Stored::Text(Some(s.clone())),
        other => Stored::Text(Some(other.to_string())),
    }
}

/// Each value encodes as the `i64`, `f64` or `String` it holds, exactly as binding that type.
impl Encode<'_, Sqlite> for Stored {
    fn encode(self, buf: &mut SqliteArgumentsBuffer) -> Result<IsNull, BoxDynError> {
        match self {
            Stored::Integer(v) => Encode::<Sqlite>::encode(v, buf),
            Stored::Real(v) => Encode::<Sqlite>::encode(v, buf),
            Stored::Text(v) => Encode::<Sqlite>::encode(v, buf),
        }
    }

    fn encode_by_ref(&self, buf: &mut SqliteArgumentsBuffer) -> Result<IsNull, BoxDynError> {
        match self {
            Stored::Integer(v) => Encode::<Sqlite>::encode_by_ref(v, buf),
            Stored::Real(v) => Encode::<Sqlite>::encode_by_ref(v, buf),
            Stored::Text(v) => Encode::<Sqlite>::encode_by_ref(v, buf),
        }
    }

    fn produces(&self) -> Option<SqliteTypeInfo> {
        match self {
            Stored::Integer(v) => Encode::<Sqlite>::produces(v),
            Stored::Real(v) => Encode::<Sqlite>::produces(v),
            Stored::Text(v) => Encode::<Sqlite>::produces(v),
        }
    }
}

/// The declared type is text's; [`Encode::produces`] gives each value's own.
impl Type<Sqlite> for Stored {
    fn type_info() -> SqliteTypeInfo {
        <String as Type<Sqlite>>::type_info()
    }
}

/// The JSON value of column `column` at `index` of `row`.
pub fn decode(row: &SqliteRow, index: usize, column: &ColumnMeta) -> sqlx::Result<Value> {
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
        SqlType::Text | SqlType::Uuid | SqlType::Timestamp | SqlType::Bytes | SqlType::CrdtText | SqlType::CrdtMap => {
            row.try_get::<Option<String>, _>(index)?.map_or(Value::Null, Value::String)
        }
    })
}
