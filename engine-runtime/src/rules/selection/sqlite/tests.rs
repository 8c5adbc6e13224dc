//! The SQLite dialect against the Rust evaluation of the same rules, on the cases of the
//! Postgres test (`../tests.rs`) in a SQLite file provisioned for the notes app: the predicate
//! selects exactly the rows whose Rust-side buckets hold the key, the walk finds them bucket by
//! bucket in the change stream's order, and the tracking triggers record values from which
//! exactly the buckets the Rust side says a row left are read.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use engine_kernel::rules::buckets::{RuleIndex, RuleSelection};
use engine_kernel::{App, BucketKey, Row, SqlType, TableMeta};
use engine_sqlite::values::stored as bound;
use engine_sqlite::{Sql, ident};
use proptest::prop_assert_eq;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::Value;
use sqlx::{Connection, SqliteConnection};

use super::super::tests::{Case, Left, candidate_keys, case, key_of, left};
use super::{push_selected, push_walk_one};
use crate::sqlite::decode_row;
use crate::storage::sqlite::sqlite;

/// The rows of `table` as the file holds them, by key.
async fn stored(conn: &mut SqliteConnection, table: &TableMeta) -> BTreeMap<String, Row> {
    let columns: Vec<String> = table.columns.iter().map(|c| ident(c.name)).collect();
    let sql = format!("SELECT {} FROM {}", columns.join(", "), ident(table.name));
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql)).fetch_all(&mut *conn).await.unwrap();
    rows.iter()
        .map(|r| decode_row(table, r).unwrap())
        .map(|row| (serde_json::to_string(&key_of(table, &row)).unwrap(), row))
        .collect()
}

async fn insert(conn: &mut SqliteConnection, table: &TableMeta, row: &Row) {
    let columns: Vec<String> = table.columns.iter().map(|c| ident(c.name)).collect();
    let mut sql = Sql::new(format!("INSERT OR IGNORE INTO {} ({}) VALUES (", ident(table.name), columns.join(", ")));
    let mut values = sql.separated(", ");
    for column in table.columns {
        values.push_bind(bound(column, &row[column.name]));
    }
    sql.push(")");
    sql.build().execute(&mut *conn).await.unwrap();
}

async fn update(conn: &mut SqliteConnection, table: &TableMeta, row: &Row) {
    let mut sql = Sql::new(format!("UPDATE {} SET ", ident(table.name)));
    let mut set = sql.separated(", ");
    for column in table.columns.iter().filter(|c| !table.is_key(c.name)) {
        set.push(format_args!("{} = ", ident(column.name))).push_bind_unseparated(bound(column, &row[column.name]));
    }
    sql.push(" WHERE ");
    let mut key = sql.separated(" AND ");
    for column in table.key_columns() {
        key.push(format_args!("{} = ", ident(column.name))).push_bind_unseparated(bound(column, &row[column.name]));
    }
    sql.build().execute(&mut *conn).await.unwrap();
}

/// The keys of the rows of `table` in the bucket `params` of any of `selections`.
async fn selected(
    conn: &mut SqliteConnection,
    table: &'static TableMeta,
    selections: &[&RuleSelection],
    params: &[String],
) -> BTreeSet<String> {
    let columns: Vec<String> = table.columns.iter().map(|c| format!("t.{}", ident(c.name))).collect();
    let mut sql = Sql::new(format!("SELECT {} FROM {} AS t WHERE 0", columns.join(", "), ident(table.name)));
    for selection in selections {
        sql.push(" OR (");
        push_selected(&mut sql, "t", table, selection, params);
        sql.push(")");
    }
    let rows = sql.build().fetch_all(&mut *conn).await.unwrap();
    rows.iter().map(|r| serde_json::to_string(&key_of(table, &decode_row(table, r).unwrap())).unwrap()).collect()
}

/// The keys of the rows a walk over `selection` finds in the bucket `params`, in steps of at most
/// `limit` rows each resumed after the last row of the one before, checking the stream's order.
async fn walked(
    conn: &mut SqliteConnection,
    table: &'static TableMeta,
    selection: &RuleSelection,
    params: &[String],
    limit: usize,
) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    let mut resume: Option<(u64, Vec<Value>)> = None;
    loop {
        let mut sql = Sql::new("");
        let from = resume.as_ref().map(|(seq, key)| (*seq, key.as_slice()));
        push_walk_one(&mut sql, table, selection, params, (0, u64::MAX / 2), from, limit, (&[], false));
        let rows = sql.build().fetch_all(&mut *conn).await.unwrap();
        for row in &rows {
            let seq: i64 = sqlx::Row::get(row, 1);
            let seq = u64::try_from(seq).unwrap();
            assert!(resume.as_ref().is_none_or(|(last, _)| *last <= seq), "the walk goes in the stream's order");
            let json: &str = sqlx::Row::get(row, 0);
            let key = key_of(table, &serde_json::from_str(json).unwrap());
            assert!(keys.insert(serde_json::to_string(&key).unwrap()), "no row comes twice");
            resume = Some((seq, key));
        }
        if rows.len() < limit {
            return keys;
        }
    }
}

/// `json`, a tombstone's object of stored values, in the wire form the rules read.
fn wire(table: &TableMeta, json: &str) -> Row {
    let Value::Object(values) = serde_json::from_str(json).unwrap() else { panic!("{json} is no object") };
    values
        .into_iter()
        .map(|(name, value)| match (table.column(&name).map(|c| c.sql_type), value) {
            (Some(SqlType::Boolean), Value::Number(n)) => (name, Value::Bool(n.as_i64() != Some(0))),
            (_, value) => (name, value),
        })
        .collect()
}

async fn check(app: &App, rules: &RuleIndex, conn: &mut SqliteConnection, case: &Case) -> Result<(), TestCaseError> {
    let tables: Vec<&'static TableMeta> = app.tables().iter().map(|def| def.meta()).collect();
    for table in &tables {
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DELETE FROM {}", ident(table.name))))
            .execute(&mut *conn)
            .await
            .unwrap();
    }
    sqlx::raw_sql("DELETE FROM _engine_tombstones").execute(&mut *conn).await.unwrap();
    for (table, rows) in tables.iter().zip(&case.inserts) {
        for row in rows {
            insert(conn, table, row).await;
        }
    }
    for table in &tables {
        let rows = stored(conn, table).await;
        let buckets: BTreeMap<&String, BTreeSet<BucketKey>> =
            rows.iter().map(|(key, row)| (key, rules.row_buckets(table, row))).collect();
        let mut by_rule: BTreeMap<&str, Vec<&RuleSelection>> = BTreeMap::new();
        for selection in rules.selections(table.name) {
            by_rule.entry(selection.rule.name).or_default().push(selection);
        }
        for selections in by_rule.values() {
            for key in candidate_keys(selections[0]) {
                let params = key.params();
                let rust: BTreeSet<String> =
                    buckets.iter().filter(|(_, b)| b.contains(&key)).map(|(k, _)| (*k).clone()).collect();
                let sql = selected(conn, table, selections, &params).await;
                prop_assert_eq!(&sql, &rust, "rows of `{}` in bucket `{}`", table.name, key);
                let mut walk = BTreeSet::new();
                for selection in selections {
                    walk.extend(walked(conn, table, selection, &params, 2).await);
                }
                prop_assert_eq!(&walk, &rust, "rows of `{}` in bucket `{}` walked", table.name, key);
            }
        }
    }

    // The triggers record values from which the buckets each update and delete took a row out
    // of are read.
    let mut expected: Vec<Left> = Vec::new();
    let mut left = |table: &TableMeta, row: &Row, before, after| expected.extend(left(table, row, before, after));
    for (table, rows) in tables.iter().zip(&case.updates) {
        for row in rows {
            let key = serde_json::to_string(&key_of(table, row)).unwrap();
            let Some(before) = stored(conn, table).await.remove(&key) else { continue };
            update(conn, table, row).await;
            let after = stored(conn, table).await.remove(&key).expect("an update keeps the row");
            left(table, &before, rules.row_buckets(table, &before), rules.row_buckets(table, &after));
        }
    }
    for table in &tables {
        for row in stored(conn, table).await.values() {
            left(table, row, rules.row_buckets(table, row), BTreeSet::new());
        }
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DELETE FROM {}", ident(table.name))))
            .execute(&mut *conn)
            .await
            .unwrap();
    }
    let stones: Vec<(String, String, String, Option<String>)> =
        sqlx::query_as("SELECT table_name, key, old, new FROM _engine_tombstones").fetch_all(&mut *conn).await.unwrap();
    let mut recorded = Vec::new();
    for (name, key, old, new) in stones {
        let table = tables.iter().find(|t| t.name == name).unwrap();
        let before = rules.row_buckets(table, &wire(table, &old));
        let after = new.map(|new| rules.row_buckets(table, &wire(table, &new))).unwrap_or_default();
        recorded.extend(super::super::tests::left(table, &wire(table, &key), before, after));
    }
    recorded.sort();
    expected.sort();
    prop_assert_eq!(recorded, expected, "the buckets the tombstones of the case say rows left");
    Ok(())
}

#[test]
fn sqlite_and_rust_agree_on_which_rows_a_bucket_holds() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let app = example_notes::app();
    let rules = app.rule_index();
    let tables: Vec<&'static TableMeta> = app.tables().iter().map(|def| def.meta()).collect();
    let dir = std::env::temp_dir().join(format!("engine-selection-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("notes.db");
    let conn = runtime.block_on(async {
        let store = sqlite(&file).connect(Arc::new(example_notes::app())).await.unwrap();
        store.provision().await.expect("provision the notes app");
        drop(store);
        SqliteConnection::connect(&format!("sqlite://{}", file.display())).await.unwrap()
    });
    let conn = std::cell::RefCell::new(conn);
    let mut runner = TestRunner::new(Config { cases: 48, failure_persistence: None, ..Config::default() });
    let result =
        runner.run(&case(&tables), |case| runtime.block_on(check(&app, &rules, &mut conn.borrow_mut(), &case)));
    std::fs::remove_dir_all(&dir).unwrap();
    result.unwrap();
}
