//! A row's JSON object as a pull's page carries it, written straight from a backend's row: the
//! object's frame and each column's name here, each value by the backend (which knows how its
//! database keeps it).

use engine_kernel::{ColumnMeta, TableMeta};

use crate::error::{Error, Result};

/// Write to `out` the JSON object of a row of `table`, in column order, each value written by
/// `value` (given the column's index and the buffer).
pub(crate) fn write_object(
    table: &TableMeta,
    out: &mut Vec<u8>,
    mut value: impl FnMut(usize, &ColumnMeta, &mut Vec<u8>) -> Result<()>,
) -> Result<()> {
    out.push(b'{');
    for (i, column) in table.columns.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_json(out, column.name)?;
        out.push(b':');
        value(i, column, out)?;
    }
    out.push(b'}');
    Ok(())
}

/// Append `value` as JSON to `out`.
pub(crate) fn write_json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result<()> {
    serde_json::to_writer(out, value).map_err(|err| Error::internal(format!("writing a row: {err}")))
}

/// A table with a column of every type a walk reads, with names JSON must escape: what the
/// backends' row writers are tested on.
#[cfg(test)]
pub(crate) mod every_type {
    use engine_kernel::{ColumnMeta, MergePolicy, Row, SqlType, TableMeta};
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestCaseError, TestRunner};
    use serde_json::Value;

    const fn column(name: &'static str, sql_type: SqlType) -> ColumnMeta {
        ColumnMeta { name, field: name, sql_type, nullable: true, blob: false, description: "" }
    }

    static COLUMNS: [ColumnMeta; 12] = [
        column("text", SqlType::Text),
        column("small \"int\"", SqlType::SmallInt),
        column("integer", SqlType::Integer),
        column("big\\int", SqlType::BigInt),
        column("real", SqlType::Real),
        column("double", SqlType::Double),
        column("flag", SqlType::Boolean),
        column("bytes", SqlType::Bytes),
        column("uuid", SqlType::Uuid),
        column("at", SqlType::Timestamp),
        column("doc", SqlType::Json),
        column("doc\u{e9}", SqlType::CrdtText),
    ];

    pub(crate) static TABLE: TableMeta = TableMeta {
        name: "every",
        struct_name: "Every",
        description: "",
        columns: &COLUMNS,
        primary_key: &["text"],
        owner: None,
        soft_delete: None,
        merge: MergePolicy::Lww,
    };

    /// Text of any characters but NUL (which Postgres text cannot hold), escapes and controls
    /// among them.
    pub(crate) fn text() -> impl Strategy<Value = String> {
        prop_oneof!["[^\u{0}]{0,40}", "[\"\\\\\u{1}-\u{1f}\u{7f}\u{2028}<>/a-z]{0,20}"]
    }

    /// Floats with the values JSON has no form for.
    pub(crate) fn float() -> impl Strategy<Value = f64> {
        prop_oneof![any::<f64>(), Just(f64::NAN), Just(f64::INFINITY), Just(-0.0), Just(f64::MIN_POSITIVE)]
    }

    /// The runner of the row writers' properties: 256 cases, none kept.
    pub(crate) fn runner() -> TestRunner {
        TestRunner::new(Config { cases: 256, failure_persistence: None, ..Config::default() })
    }

    /// That `written` is JSON, and the object of `decoded`.
    pub(crate) fn is_decoded(written: &[u8], decoded: Row) -> Result<(), TestCaseError> {
        let read: Value = serde_json::from_slice(written)
            .map_err(|err| TestCaseError::fail(format!("not JSON: {err}: {}", String::from_utf8_lossy(written))))?;
        prop_assert_eq!(read, Value::Object(decoded));
        Ok(())
    }
}
