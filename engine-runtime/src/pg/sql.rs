//! Writing SQL: quoting identifiers and literals, byte-ordered text, and the names of the engine's
//! own objects. A selection's SQL is built by the selection compiler (`selection.rs`).

use engine_kernel::rules::ConstValue;
use engine_kernel::{ColumnMeta, SqlType};

/// A statement being built, with its bound values.
pub(crate) type Sql = sqlx::QueryBuilder<sqlx::Postgres>;

/// A quoted identifier.
pub(crate) fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The key of a row's clock stamps (`_engine_hlc`) that holds the newest of them, so that a pull
/// reads one value per row instead of the whole object. No column has an empty name (Postgres
/// refuses one). Stamps in their text form order as the clocks do.
pub(crate) const NEWEST_STAMP: &str = "";

/// A quoted string literal (standard-conforming strings, so only `'` needs doubling).
pub(crate) fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// A constant of a rule as SQL.
pub(crate) fn constant(value: ConstValue) -> String {
    match value {
        ConstValue::Bool(b) => b.to_string(),
        ConstValue::Int(i) => i.to_string(),
        ConstValue::Text(t) => literal(t),
    }
}

/// `column` qualified by `alias`, compared byte-wise when it is text (`docs/design.md` §1).
pub(crate) fn ordered(alias: &str, column: &ColumnMeta) -> String {
    collated(format!("{alias}.{}", ident(column.name)), column.sql_type)
}

/// `expression`, of `sql_type`, with `COLLATE "C"` when it is text, so it sorts byte-wise.
pub(crate) fn collated(expression: String, sql_type: SqlType) -> String {
    match sql_type {
        SqlType::Text => format!("{expression} COLLATE \"C\""),
        SqlType::SmallInt
        | SqlType::Integer
        | SqlType::BigInt
        | SqlType::Real
        | SqlType::Double
        | SqlType::Boolean
        | SqlType::Uuid
        | SqlType::Timestamp
        | SqlType::Json
        | SqlType::Bytes
        | SqlType::CrdtText
        | SqlType::CrdtMap => expression,
    }
}

/// `record.column` (a trigger's `OLD`, say) as the JSON value it travels as on the wire, so a
/// key written by SQL matches the same key read back by the store: a timestamp in UTC with
/// microseconds and a `Z`, bytes in standard base64, a float widened to double precision.
pub(crate) fn wire_json(record: &str, column: &ColumnMeta) -> String {
    let value = format!("{record}.{}", ident(column.name));
    match column.sql_type {
        SqlType::Timestamp => {
            format!("to_jsonb(to_char({value} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'))")
        }
        SqlType::Bytes | SqlType::CrdtText | SqlType::CrdtMap => {
            format!("to_jsonb(translate(encode({value}, 'base64'), E'\\n', ''))")
        }
        SqlType::Real => format!("to_jsonb({value}::float8)"),
        SqlType::Text
        | SqlType::SmallInt
        | SqlType::Integer
        | SqlType::BigInt
        | SqlType::Double
        | SqlType::Boolean
        | SqlType::Uuid
        | SqlType::Json => value,
    }
}

/// A transaction id Postgres wrote as text.
pub(crate) fn xid(text: &str) -> crate::error::Result<u64> {
    text.parse().map_err(|_| crate::error::Error::internal(format!("unreadable transaction id {text}")))
}

/// The name of the tracking trigger function of `table`.
pub(crate) fn trigger_function(table: &str) -> String {
    format!("_engine_track_{table}")
}

/// A stable name for an index of the engine's on `table` over `columns` (at most 63 bytes).
pub(crate) fn index_name(table: &str, purpose: &str, columns: &[&str]) -> String {
    let name = match columns {
        [] => format!("_engine_{table}_{purpose}"),
        _ => format!("_engine_{table}_{purpose}_{}", columns.join("_")),
    };
    if name.len() <= 63 {
        return name;
    }
    // FNV-1a keeps long names unique and stable across runs.
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    let short: String = format!("_engine_{table}_{purpose}").chars().take(46).collect();
    format!("{short}_{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(ident("order"), "\"order\"");
        assert_eq!(ident("a\"b"), "\"a\"\"b\"");
        assert_eq!(literal("it's"), "'it''s'");
        assert_eq!(constant(ConstValue::Text("o'k")), "'o''k'");
    }

    #[test]
    fn index_names_fit_postgres() {
        let long = index_name("a_table_with_a_really_long_name", "scope", &["first_column", "second_column", "third"]);
        assert!(long.len() <= 63, "{long}");
        assert_eq!(
            long,
            index_name("a_table_with_a_really_long_name", "scope", &["first_column", "second_column", "third"])
        );
        assert_eq!(index_name("notes", "xid", &[]), "_engine_notes_xid");
    }
}
