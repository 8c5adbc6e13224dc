//! Columns: the SQL types a table may hold and how each value travels as JSON. The typed column
//! handles (`Note::title`) are in [`handle`](crate::handle); the collaborative types implement
//! [`ColumnType`] in [`crdt`](crate::crdt).
//!
//! Every Rust type a table field may have implements [`ColumnType`]. The roles a column can play
//! (primary key, owner, soft delete, collaborative) are marker traits, so a misplaced type is a
//! compile error worded in the domain's terms rather than a runtime surprise.

use base64::Engine as _;
use schemars::{Schema, json_schema};
use serde_json::Value;

/// A UTC timestamp, the type of timestamp columns (`timestamptz` in Postgres).
pub type Timestamp = chrono::DateTime<chrono::Utc>;

/// The SQL type of a column, independent of the store. Not `#[non_exhaustive]`: every `match`
/// on it names each type, so a new type fails to compile wherever it is not handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SqlType {
    /// UTF-8 text (`String`).
    Text,
    /// 16-bit integer (`i16`).
    SmallInt,
    /// 32-bit integer (`i32`).
    Integer,
    /// 64-bit integer (`i64`).
    BigInt,
    /// 32-bit float (`f32`).
    Real,
    /// 64-bit float (`f64`).
    Double,
    /// Boolean (`bool`).
    Boolean,
    /// UUID (`uuid::Uuid`).
    Uuid,
    /// UTC timestamp ([`Timestamp`]).
    Timestamp,
    /// Any JSON value (`serde_json::Value`).
    Json,
    /// Bytes (`Vec<u8>`).
    Bytes,
    /// Collaborative text ([`CrdtText`](crate::CrdtText)).
    CrdtText,
    /// Collaborative map ([`CrdtMap`](crate::CrdtMap)).
    CrdtMap,
}

impl SqlType {
    /// Every type, in declaration order.
    ///
    /// Outside this crate `#[non_exhaustive]` ends every `match` on a `SqlType` in a `_` arm,
    /// which a new type would fall into unnoticed. The workspace's crates that match on it name
    /// every type before that arm and assert the length of `ALL` beside it, so a type added here
    /// fails their build until they handle it.
    pub const ALL: [SqlType; 13] = [
        SqlType::Text,
        SqlType::SmallInt,
        SqlType::Integer,
        SqlType::BigInt,
        SqlType::Real,
        SqlType::Double,
        SqlType::Boolean,
        SqlType::Uuid,
        SqlType::Timestamp,
        SqlType::Json,
        SqlType::Bytes,
        SqlType::CrdtText,
        SqlType::CrdtMap,
    ];

    /// The type named `name` in the contract.
    ///
    /// ```
    /// use engine_kernel::SqlType;
    /// assert_eq!(SqlType::from_name("crdt_text"), Some(SqlType::CrdtText));
    /// assert!(SqlType::ALL.iter().all(|t| SqlType::from_name(t.name()) == Some(*t)));
    /// assert_eq!(SqlType::from_name("varchar"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<SqlType> {
        SqlType::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The name of the type in the contract (`x-engine.tables.*.columns[].type`).
    pub const fn name(self) -> &'static str {
        match self {
            SqlType::Text => "text",
            SqlType::SmallInt => "int2",
            SqlType::Integer => "int4",
            SqlType::BigInt => "int8",
            SqlType::Real => "float4",
            SqlType::Double => "float8",
            SqlType::Boolean => "bool",
            SqlType::Uuid => "uuid",
            SqlType::Timestamp => "timestamptz",
            SqlType::Json => "jsonb",
            SqlType::Bytes => "bytea",
            SqlType::CrdtText => "crdt_text",
            SqlType::CrdtMap => "crdt_map",
        }
    }

    /// The Postgres type that stores the column (CRDT columns store their yrs state as `bytea`).
    pub const fn postgres(self) -> &'static str {
        match self {
            SqlType::CrdtText | SqlType::CrdtMap => "bytea",
            SqlType::Text
            | SqlType::SmallInt
            | SqlType::Integer
            | SqlType::BigInt
            | SqlType::Real
            | SqlType::Double
            | SqlType::Boolean
            | SqlType::Uuid
            | SqlType::Timestamp
            | SqlType::Json
            | SqlType::Bytes => self.name(),
        }
    }

    /// Whether the column is collaborative (merged structurally, never replaced).
    pub const fn is_crdt(self) -> bool {
        match self {
            SqlType::CrdtText | SqlType::CrdtMap => true,
            SqlType::Text
            | SqlType::SmallInt
            | SqlType::Integer
            | SqlType::BigInt
            | SqlType::Real
            | SqlType::Double
            | SqlType::Boolean
            | SqlType::Uuid
            | SqlType::Timestamp
            | SqlType::Json
            | SqlType::Bytes => false,
        }
    }

    /// The JSON Schema of a value of this type on the wire.
    pub fn json_schema(self, nullable: bool) -> Schema {
        let mut schema = match self {
            SqlType::Text => json_schema!({"type": "string"}),
            SqlType::SmallInt => {
                json_schema!({"type": "integer", "format": "int16", "minimum": i16::MIN, "maximum": i16::MAX})
            }
            SqlType::Integer => json_schema!({"type": "integer", "format": "int32"}),
            SqlType::BigInt => json_schema!({"type": "integer", "format": "int64"}),
            SqlType::Real => json_schema!({"type": "number", "format": "float"}),
            SqlType::Double => json_schema!({"type": "number", "format": "double"}),
            SqlType::Boolean => json_schema!({"type": "boolean"}),
            SqlType::Uuid => json_schema!({"type": "string", "format": "uuid"}),
            SqlType::Timestamp => json_schema!({"type": "string", "format": "date-time"}),
            SqlType::Json => json_schema!({}),
            SqlType::Bytes => json_schema!({"type": "string", "contentEncoding": "base64"}),
            SqlType::CrdtText => json_schema!({
                "type": "string",
                "contentEncoding": "base64",
                "description": "yrs v1 update encoding of the whole document; the text is the root text `text`"
            }),
            SqlType::CrdtMap => json_schema!({
                "type": "string",
                "contentEncoding": "base64",
                "description": "yrs v1 update encoding of the whole document; the map is the root map `map`"
            }),
        };
        if nullable && let Some(Value::String(ty)) = schema.get("type").cloned() {
            schema.insert("type".into(), serde_json::json!([ty, "null"]));
        }
        schema
    }
}

/// What the metadata knows of one column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnMeta {
    /// The SQL column name (also its key in a row's JSON).
    pub name: &'static str,
    /// The Rust field that holds it.
    pub field: &'static str,
    /// Its SQL type.
    pub sql_type: SqlType,
    /// Whether it may be null (`Option<T>`).
    pub nullable: bool,
    /// Whether it holds blob keys ([`BlobKey`](crate::BlobKey)): who can read the row may
    /// download the blob.
    pub blob: bool,
    /// The field's doc comment.
    pub description: &'static str,
}

/// A Rust type that can be the type of a table column, and how its values travel as JSON.
///
/// Implemented for `String`, `i16`, `i32`, `i64`, `f32`, `f64`, `bool`, `uuid::Uuid`,
/// [`Timestamp`], `serde_json::Value`, `Vec<u8>`, [`BlobKey`](crate::BlobKey), [`CrdtText`](crate::CrdtText),
/// [`CrdtMap`](crate::CrdtMap) and `Option<T>` of the scalar ones.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the type of a table column",
    label = "not a column type",
    note = "columns are `String`, `i16`, `i32`, `i64`, `f32`, `f64`, `bool`, `uuid::Uuid`, `engine::Timestamp`, `serde_json::Value`, `Vec<u8>`, `engine::BlobKey`, `engine::CrdtText`, `engine::CrdtMap`, or `Option<T>` of the scalar ones"
)]
pub trait ColumnType: Sized + Send + Sync + 'static {
    /// The SQL type of the column.
    const SQL_TYPE: SqlType;
    /// Whether the column may be null.
    const NULLABLE: bool = false;
    /// Whether the column holds blob keys.
    const BLOB: bool = false;
    /// The value as it travels in a row's JSON.
    fn to_json(&self) -> Value;
    /// The value from a row's JSON; the error says what was expected.
    fn from_json(value: Value) -> Result<Self, String>;
}

/// Column types other than `Option` and the collaborative ones: the ones `Option<T>` can wrap.
#[diagnostic::on_unimplemented(
    message = "`Option<{Self}>` cannot be the type of a table column",
    label = "not a column type",
    note = "`Option<T>` makes a nullable column of a scalar column type (`String`, `i16`, `i32`, `i64`, `f32`, `f64`, `bool`, `uuid::Uuid`, `engine::Timestamp`, `serde_json::Value`, `Vec<u8>`, `engine::BlobKey`); collaborative columns are never null: an empty document is `CrdtText::new()` / `CrdtMap::new()`"
)]
pub trait NonNullColumn: ColumnType {}

fn expected(what: &str, got: &Value) -> String {
    let kind = match got {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    format!("expected {what}, found {kind}")
}

impl ColumnType for String {
    const SQL_TYPE: SqlType = SqlType::Text;
    fn to_json(&self) -> Value {
        Value::String(self.clone())
    }
    fn from_json(value: Value) -> Result<Self, String> {
        match value {
            Value::String(s) => Ok(s),
            other => Err(expected("a string", &other)),
        }
    }
}

macro_rules! integer_column {
    ($($ty:ty => $sql:ident),*) => {$(
        impl ColumnType for $ty {
            const SQL_TYPE: SqlType = SqlType::$sql;
            fn to_json(&self) -> Value {
                Value::from(*self)
            }
            fn from_json(value: Value) -> Result<Self, String> {
                let what = concat!("an integer that fits `", stringify!($ty), "`");
                match &value {
                    Value::Number(n) => n
                        .as_i64()
                        .and_then(|n| <$ty>::try_from(n).ok())
                        .ok_or_else(|| expected(what, &value)),
                    _ => Err(expected(what, &value)),
                }
            }
        }
        impl NonNullColumn for $ty {}
    )*};
}
integer_column!(i16 => SmallInt, i32 => Integer, i64 => BigInt);

macro_rules! float_column {
    ($($ty:ty => $sql:ident),*) => {$(
        impl ColumnType for $ty {
            const SQL_TYPE: SqlType = SqlType::$sql;
            /// Non-finite values have no JSON form and travel as `null`, which a non-null column refuses.
            fn to_json(&self) -> Value {
                serde_json::Number::from_f64(f64::from(*self)).map_or(Value::Null, Value::Number)
            }
            #[allow(clippy::cast_possible_truncation)]
            fn from_json(value: Value) -> Result<Self, String> {
                match &value {
                    Value::Number(n) => n.as_f64().map(|f| f as $ty).ok_or_else(|| expected("a number", &value)),
                    _ => Err(expected("a number", &value)),
                }
            }
        }
        impl NonNullColumn for $ty {}
    )*};
}
float_column!(f32 => Real, f64 => Double);

impl ColumnType for bool {
    const SQL_TYPE: SqlType = SqlType::Boolean;
    fn to_json(&self) -> Value {
        Value::Bool(*self)
    }
    fn from_json(value: Value) -> Result<Self, String> {
        value.as_bool().ok_or_else(|| expected("a boolean", &value))
    }
}

impl ColumnType for uuid::Uuid {
    const SQL_TYPE: SqlType = SqlType::Uuid;
    fn to_json(&self) -> Value {
        Value::String(self.hyphenated().to_string())
    }
    fn from_json(value: Value) -> Result<Self, String> {
        match &value {
            Value::String(s) => uuid::Uuid::try_parse(s).map_err(|_| format!("expected a UUID, found {s:?}")),
            _ => Err(expected("a UUID string", &value)),
        }
    }
}

impl ColumnType for Timestamp {
    const SQL_TYPE: SqlType = SqlType::Timestamp;
    /// RFC 3339 in UTC with microseconds, the precision every store keeps.
    fn to_json(&self) -> Value {
        Value::String(self.to_rfc3339_opts(chrono::SecondsFormat::Micros, true))
    }
    fn from_json(value: Value) -> Result<Self, String> {
        match &value {
            Value::String(s) => chrono::DateTime::parse_from_rfc3339(s)
                .map(|t| t.with_timezone(&chrono::Utc))
                .map_err(|_| format!("expected an RFC 3339 timestamp, found {s:?}")),
            _ => Err(expected("an RFC 3339 timestamp string", &value)),
        }
    }
}

impl ColumnType for Value {
    const SQL_TYPE: SqlType = SqlType::Json;
    fn to_json(&self) -> Value {
        self.clone()
    }
    fn from_json(value: Value) -> Result<Self, String> {
        Ok(value)
    }
}

impl ColumnType for Vec<u8> {
    const SQL_TYPE: SqlType = SqlType::Bytes;
    fn to_json(&self) -> Value {
        Value::String(base64::engine::general_purpose::STANDARD.encode(self))
    }
    fn from_json(value: Value) -> Result<Self, String> {
        decode_base64(&value)
    }
}

pub(crate) fn decode_base64(value: &Value) -> Result<Vec<u8>, String> {
    match value {
        Value::String(s) => {
            base64::engine::general_purpose::STANDARD.decode(s).map_err(|e| format!("expected base64, {e}"))
        }
        other => Err(expected("a base64 string", other)),
    }
}

impl NonNullColumn for String {}
impl NonNullColumn for bool {}
impl NonNullColumn for uuid::Uuid {}
impl NonNullColumn for Timestamp {}
impl NonNullColumn for Value {}
impl NonNullColumn for Vec<u8> {}

impl<T: NonNullColumn> ColumnType for Option<T> {
    const SQL_TYPE: SqlType = T::SQL_TYPE;
    const NULLABLE: bool = true;
    const BLOB: bool = T::BLOB;
    fn to_json(&self) -> Value {
        self.as_ref().map_or(Value::Null, T::to_json)
    }
    fn from_json(value: Value) -> Result<Self, String> {
        match value {
            Value::Null => Ok(None),
            other => T::from_json(other).map(Some),
        }
    }
}

/// Types that can be a primary-key column: values with one exact wire form. Floats are not (a
/// value has several decimal forms, and NaN none), nor JSON, collaborative or nullable columns.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a primary key column",
    label = "not a key type",
    note = "primary keys are `String`, `i16`, `i32`, `i64`, `uuid::Uuid`, `engine::Timestamp` or `Vec<u8>`, never `Option`, a float, JSON or a collaborative column"
)]
pub trait KeyColumn: ColumnType + Clone + Eq {}
impl KeyColumn for String {}
impl KeyColumn for i16 {}
impl KeyColumn for i32 {}
impl KeyColumn for i64 {}
impl KeyColumn for uuid::Uuid {}
impl KeyColumn for Timestamp {}
impl KeyColumn for Vec<u8> {}

/// Types that can be the owner column: the actor's owner id, a `String`.
#[diagnostic::on_unimplemented(
    message = "the owner column holds the actor's owner id, so it is a `String`, not `{Self}`",
    label = "make this `String`"
)]
pub trait OwnerColumn: ColumnType {}
impl OwnerColumn for String {}

/// Types that can be the soft-delete column: `Option<Timestamp>`.
#[diagnostic::on_unimplemented(
    message = "a soft-delete column is `Option<engine::Timestamp>`, not `{Self}`",
    label = "a non-null timestamp here marks the row deleted",
    note = "write the field as `Option<engine::Timestamp>`"
)]
pub trait SoftDeleteColumn: ColumnType {}
impl SoftDeleteColumn for Option<Timestamp> {}

/// How one column's values travel, with the column type's trait methods as plain function
/// pointers: generated code builds one per column (the only place that requires
/// `V: ColumnType`, so a type that is not a column is reported once) and converts rows through it.
#[derive(Clone, Copy)]
pub struct ColumnCodec<V> {
    /// The column's SQL type.
    pub sql_type: SqlType,
    /// Whether the column may be null.
    pub nullable: bool,
    /// Whether the column holds blob keys.
    pub blob: bool,
    to_json: fn(&V) -> Value,
    from_json: fn(Value) -> Result<V, String>,
}

impl<V: ColumnType> ColumnCodec<V> {
    /// The codec of column type `V`.
    pub const fn new() -> Self {
        ColumnCodec {
            sql_type: V::SQL_TYPE,
            nullable: V::NULLABLE,
            blob: V::BLOB,
            to_json: V::to_json,
            from_json: V::from_json,
        }
    }
}

impl<V: ColumnType> Default for ColumnCodec<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V> ColumnCodec<V> {
    /// The value as it travels in a row's JSON.
    pub fn to_json(&self, value: &V) -> Value {
        (self.to_json)(value)
    }

    /// The value from a row's JSON.
    pub fn from_json(&self, value: Value) -> Result<V, String> {
        (self.from_json)(value)
    }
}

impl<V> std::fmt::Debug for ColumnCodec<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ColumnCodec").field("sql_type", &self.sql_type).field("nullable", &self.nullable).finish()
    }
}
