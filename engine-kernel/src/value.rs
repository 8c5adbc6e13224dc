//! Typed column values: a row's JSON value read as the Rust type its column's [`SqlType`] names.
//! This is the one place that maps each SQL type to its Rust type on the way in; stores bind a
//! [`ColumnValue`] by matching on it, so every store checks and converts values alike.

use serde_json::Value;

use crate::column::{ColumnType, SqlType, Timestamp};

/// A column's value in the Rust type of its SQL type; `None` is SQL null. Collaborative columns
/// hold their document's state as bytes.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ColumnValue {
    /// [`SqlType::Text`].
    Text(Option<String>),
    /// [`SqlType::SmallInt`].
    SmallInt(Option<i16>),
    /// [`SqlType::Integer`].
    Integer(Option<i32>),
    /// [`SqlType::BigInt`].
    BigInt(Option<i64>),
    /// [`SqlType::Real`].
    Real(Option<f32>),
    /// [`SqlType::Double`].
    Double(Option<f64>),
    /// [`SqlType::Boolean`].
    Boolean(Option<bool>),
    /// [`SqlType::Uuid`].
    Uuid(Option<uuid::Uuid>),
    /// [`SqlType::Timestamp`].
    Timestamp(Option<Timestamp>),
    /// [`SqlType::Json`].
    Json(Option<Value>),
    /// [`SqlType::Bytes`], [`SqlType::CrdtText`] and [`SqlType::CrdtMap`].
    Bytes(Option<Vec<u8>>),
}

impl ColumnValue {
    /// `value`, in its wire form, as a value of type `sql_type`; the error says what was
    /// expected instead.
    ///
    /// ```
    /// use engine_kernel::{ColumnValue, SqlType};
    /// assert_eq!(ColumnValue::from_json(SqlType::BigInt, 7.into()), Ok(ColumnValue::BigInt(Some(7))));
    /// assert_eq!(ColumnValue::from_json(SqlType::Text, serde_json::Value::Null), Ok(ColumnValue::Text(None)));
    /// assert!(ColumnValue::from_json(SqlType::SmallInt, 70_000.into()).is_err());
    /// ```
    pub fn from_json(sql_type: SqlType, value: Value) -> Result<ColumnValue, String> {
        fn typed<T>(value: Value) -> Result<Option<T>, String>
        where
            Option<T>: ColumnType,
        {
            <Option<T>>::from_json(value)
        }
        Ok(match sql_type {
            SqlType::Text => ColumnValue::Text(typed(value)?),
            SqlType::SmallInt => ColumnValue::SmallInt(typed(value)?),
            SqlType::Integer => ColumnValue::Integer(typed(value)?),
            SqlType::BigInt => ColumnValue::BigInt(typed(value)?),
            SqlType::Real => ColumnValue::Real(typed(value)?),
            SqlType::Double => ColumnValue::Double(typed(value)?),
            SqlType::Boolean => ColumnValue::Boolean(typed(value)?),
            SqlType::Uuid => ColumnValue::Uuid(typed(value)?),
            SqlType::Timestamp => ColumnValue::Timestamp(typed(value)?),
            SqlType::Json => ColumnValue::Json(typed(value)?),
            SqlType::Bytes | SqlType::CrdtText | SqlType::CrdtMap => ColumnValue::Bytes(typed(value)?),
        })
    }

    /// The value in its wire form: a value read with [`from_json`](ColumnValue::from_json)
    /// comes back canonical (a timestamp in UTC with microseconds, a UUID hyphenated in
    /// lowercase, bytes in standard base64).
    pub fn to_json(&self) -> Value {
        match self {
            ColumnValue::Text(v) => v.to_json(),
            ColumnValue::SmallInt(v) => v.to_json(),
            ColumnValue::Integer(v) => v.to_json(),
            ColumnValue::BigInt(v) => v.to_json(),
            ColumnValue::Real(v) => v.to_json(),
            ColumnValue::Double(v) => v.to_json(),
            ColumnValue::Boolean(v) => v.to_json(),
            ColumnValue::Uuid(v) => v.to_json(),
            ColumnValue::Timestamp(v) => v.to_json(),
            ColumnValue::Json(v) => v.to_json(),
            ColumnValue::Bytes(v) => v.to_json(),
        }
    }

    /// Whether the value is SQL null.
    pub fn is_null(&self) -> bool {
        match self {
            ColumnValue::Text(v) => v.is_none(),
            ColumnValue::SmallInt(v) => v.is_none(),
            ColumnValue::Integer(v) => v.is_none(),
            ColumnValue::BigInt(v) => v.is_none(),
            ColumnValue::Real(v) => v.is_none(),
            ColumnValue::Double(v) => v.is_none(),
            ColumnValue::Boolean(v) => v.is_none(),
            ColumnValue::Uuid(v) => v.is_none(),
            ColumnValue::Timestamp(v) => v.is_none(),
            ColumnValue::Json(v) => v.is_none(),
            ColumnValue::Bytes(v) => v.is_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_reads_its_wire_form_back_canonical() {
        let cases = [
            (SqlType::Text, Value::from("a")),
            (SqlType::SmallInt, Value::from(-3)),
            (SqlType::Integer, Value::from(70_000)),
            (SqlType::BigInt, Value::from(i64::MAX)),
            (SqlType::Real, Value::from(1.5)),
            (SqlType::Double, Value::from(0.25)),
            (SqlType::Boolean, Value::from(true)),
            (SqlType::Uuid, Value::from("0192f0e0-0000-7000-8000-000000000001")),
            (SqlType::Timestamp, Value::from("2026-01-02T03:04:05.000006Z")),
            (SqlType::Json, serde_json::json!({"a": [1, null]})),
            (SqlType::Bytes, Value::from("AAE=")),
            (SqlType::CrdtText, Value::from("AAA=")),
        ];
        for (sql_type, json) in cases {
            let value = ColumnValue::from_json(sql_type, json.clone()).unwrap();
            assert!(!value.is_null());
            assert_eq!(value.to_json(), json, "{sql_type:?}");
        }
        for sql_type in SqlType::ALL {
            let null = ColumnValue::from_json(sql_type, Value::Null).unwrap();
            assert!(null.is_null(), "{sql_type:?}");
            assert_eq!(null.to_json(), Value::Null);
        }
    }

    #[test]
    fn values_are_made_canonical_or_refused() {
        let upper = ColumnValue::from_json(SqlType::Uuid, "0192F0E0-0000-7000-8000-00000000000A".into()).unwrap();
        assert_eq!(upper.to_json(), Value::from("0192f0e0-0000-7000-8000-00000000000a"));
        let offset = ColumnValue::from_json(SqlType::Timestamp, "2026-01-02T04:04:05+01:00".into()).unwrap();
        assert_eq!(offset.to_json(), Value::from("2026-01-02T03:04:05.000000Z"));
        assert!(ColumnValue::from_json(SqlType::Integer, Value::from(1u64 << 40)).is_err());
        assert!(ColumnValue::from_json(SqlType::Boolean, Value::from("true")).is_err());
        assert!(ColumnValue::from_json(SqlType::Bytes, Value::from("not base64!")).is_err());
    }
}
