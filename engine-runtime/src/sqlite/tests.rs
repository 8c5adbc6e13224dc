use engine_sqlite::ident;
use engine_sqlite::values::sqlite_type;
use proptest::prelude::*;
use sqlx::Connection;

use super::{decode_row, write_row};
use crate::row_json::every_type::{TABLE, float, is_decoded, runner, text};
use crate::rules::selection::sqlite::json_object;

type Case = (
    Option<String>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<f64>,
    Option<f64>,
    Option<bool>,
    Option<String>,
    bool,
);

/// A row's JSON as SQLite writes it for the walk is the object its decoded values make, for
/// every column type, null or not.
#[test]
fn a_row_written_as_json_is_the_row_decoded() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let case = (
        proptest::option::of(text()),
        proptest::option::of(any::<i64>()),
        proptest::option::of(any::<i64>()),
        proptest::option::of(any::<i64>()),
        proptest::option::of(float()),
        proptest::option::of(float()),
        proptest::option::of(any::<bool>()),
        proptest::option::of(text()),
        any::<bool>(),
    );
    let check = |(text, small, integer, big, real, double, flag, bytes, others): Case| {
        runtime.block_on(async {
            // The other types' values as the file keeps them (a JSON document as its text, one
            // of them not JSON), or nulls.
            let others = if others {
                "'6f1c7a2e-93b4-4c1e-9a57-0d2b8c4e1f30', '2026-11-26T08:48:03.123456Z', \
                 '{\"a\": [1, \"\\u00e9\\n\", null], \"b\": {\"c\": 1.5e300}}', 'AAH/'"
            } else {
                "NULL, NULL, 'not JSON', NULL"
            };
            let mut conn = sqlx::SqliteConnection::connect("sqlite::memory:").await.unwrap();
            // The values in a table of the table's columns, as the file keeps them.
            let columns: Vec<String> =
                TABLE.columns.iter().map(|c| format!("{} {}", ident(c.name), sqlite_type(c.sql_type))).collect();
            let create = format!("CREATE TABLE t ({})", columns.join(", "));
            sqlx::raw_sql(sqlx::AssertSqlSafe(create)).execute(&mut conn).await.unwrap();
            sqlx::query(sqlx::AssertSqlSafe(format!("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?, ?, {others})")))
                .bind(text)
                .bind(small)
                .bind(integer)
                .bind(big)
                .bind(real)
                .bind(double)
                .bind(flag)
                .bind(bytes)
                .execute(&mut conn)
                .await
                .unwrap();
            // The row's JSON as SQLite writes it, then every column as the floats are read.
            let select = format!("SELECT *, {} FROM t", json_object("t", &TABLE));
            let row = sqlx::query(sqlx::AssertSqlSafe(select)).fetch_one(&mut conn).await.unwrap();
            let sql_json: &str = sqlx::Row::get(&row, TABLE.columns.len());
            let mut written = Vec::new();
            write_row(&TABLE, sql_json, &row, |i| i, &mut written).unwrap();
            is_decoded(&written, decode_row(&TABLE, &row).unwrap())
        })
    };
    runner().run(&case, check).unwrap();
}
