use engine::{ColumnType, CrdtMap, CrdtText, SqlType, Table, Timestamp};

/// Every column type, nullable and not.
#[engine::table(name = "samples", merge = "field")]
pub struct Sample {
    #[engine(primary_key)]
    pub id: uuid::Uuid,
    #[engine(owner)]
    pub owner_id: String,
    pub small: i16,
    pub medium: i32,
    pub large: i64,
    pub single: f32,
    pub double: f64,
    pub flag: bool,
    pub at: Timestamp,
    pub doc: serde_json::Value,
    pub bytes: Vec<u8>,
    pub text: CrdtText,
    pub map: CrdtMap,
    pub maybe_text: Option<String>,
    pub maybe_small: Option<i16>,
    pub maybe_large: Option<i64>,
    pub maybe_double: Option<f64>,
    pub maybe_flag: Option<bool>,
    pub maybe_id: Option<uuid::Uuid>,
    pub maybe_doc: Option<serde_json::Value>,
    pub maybe_bytes: Option<Vec<u8>>,
    #[engine(soft_delete)]
    pub deleted_at: Option<Timestamp>,
}

fn main() {
    let meta = Sample::META;
    assert_eq!(meta.columns.len(), 22);
    let types: Vec<SqlType> = meta.columns.iter().map(|c| c.sql_type).collect();
    assert_eq!(types[..13], [
        SqlType::Uuid, SqlType::Text, SqlType::SmallInt, SqlType::Integer, SqlType::BigInt, SqlType::Real,
        SqlType::Double, SqlType::Boolean, SqlType::Timestamp, SqlType::Json, SqlType::Bytes, SqlType::CrdtText,
        SqlType::CrdtMap,
    ]);
    assert!(meta.columns[13..].iter().all(|c| c.nullable));
    assert!(meta.columns[..13].iter().all(|c| !c.nullable));
    assert_eq!(<Option<Vec<u8>> as ColumnType>::SQL_TYPE, SqlType::Bytes);
    assert_eq!(meta.crdt_columns().map(|c| c.name).collect::<Vec<_>>(), ["text", "map"]);
}
