//! The selection compiler against the Rust evaluation of the same rules (`RuleIndex::row_buckets`),
//! on random rows of the notes app's tables in a real Postgres: the SQL predicate selects
//! exactly the rows whose Rust-side buckets hold the key, the stats query finds exactly their
//! buckets, and the tracking trigger records exactly the buckets the Rust side says a row left.
//! Beside it, the key floors where a walk enters a bucket, against Postgres's own order. The same
//! cases run against SQLite in `sqlite/tests.rs`.

use std::collections::{BTreeMap, BTreeSet};

use engine_kernel::rules::buckets::{RuleIndex, RuleSelection};
use engine_kernel::{App, BucketKey, Row, SqlType, TableMeta};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::Value;
use sqlx::{Executor, PgConnection, PgPool};

use super::{WalkStep, any_bucket, push_selected, push_walk};
use crate::pg::sql::Sql;
use crate::pg::sql::ident;
use crate::pg::test_db::TestDb;
use crate::pg::values::{decode_row, push_value};
use crate::storage::Storage;
use crate::storage::postgres::PostgresStorage;

/// Text values every text column draws from: shared by keys and scope columns so that rows meet
/// in buckets, and chosen to stress bucket keys (a separator, percent signs, non-ASCII, empty).
pub(super) const TEXTS: [&str; 5] = ["alice", "bob", "a/b", "ü %2F", ""];

/// A value for a column of type `sql_type`, from small pools so that rows collide.
fn value(sql_type: SqlType, nullable: bool) -> BoxedStrategy<Value> {
    let value = match sql_type {
        SqlType::Text => proptest::sample::select(TEXTS.to_vec()).prop_map(Value::from).boxed(),
        SqlType::Boolean => any::<bool>().prop_map(Value::from).boxed(),
        SqlType::BigInt | SqlType::Integer | SqlType::SmallInt => (-2i64..3).prop_map(Value::from).boxed(),
        SqlType::Timestamp => Just(Value::from("2026-01-02T03:04:05.000006Z")).boxed(),
        // An empty collaborative document.
        SqlType::CrdtText | SqlType::CrdtMap => Just(Value::from("AAA=")).boxed(),
        other => unreachable!("the notes app has no {other:?} column"),
    };
    if nullable { prop_oneof![Just(Value::Null), value].boxed() } else { value }
}

/// A row of `table`: a value per column.
fn row(table: &'static TableMeta) -> impl Strategy<Value = Row> {
    let columns: Vec<BoxedStrategy<Value>> = table.columns.iter().map(|c| value(c.sql_type, c.nullable)).collect();
    columns.prop_map(move |values| table.columns.iter().map(|c| c.name.to_owned()).zip(values).collect())
}

/// What one case writes: per table, rows to insert and rows whose non-key values then update the
/// inserted row of the same key.
#[derive(Debug, Clone)]
pub(super) struct Case {
    pub(super) inserts: Vec<Vec<Row>>,
    pub(super) updates: Vec<Vec<Row>>,
}

pub(super) fn case(tables: &[&'static TableMeta]) -> impl Strategy<Value = Case> {
    let rows = |tables: &[&'static TableMeta]| -> Vec<_> {
        tables.iter().map(|t| proptest::collection::vec(row(t), 0..7)).collect::<Vec<_>>()
    };
    (rows(tables), rows(tables)).prop_map(|(inserts, updates)| Case { inserts, updates })
}

pub(super) fn key_of(table: &TableMeta, row: &Row) -> Vec<Value> {
    table.primary_key.iter().map(|k| row[*k].clone()).collect()
}

/// The rows of `table` as the database holds them, by key.
async fn stored(conn: &mut PgConnection, table: &TableMeta) -> BTreeMap<String, Row> {
    let columns: Vec<String> = table.columns.iter().map(|c| ident(c.name)).collect();
    let sql = format!("SELECT {} FROM {}", columns.join(", "), ident(table.name));
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql)).fetch_all(&mut *conn).await.unwrap();
    rows.iter()
        .map(|r| decode_row(table, r).unwrap())
        .map(|row| (serde_json::to_string(&key_of(table, &row)).unwrap(), row))
        .collect()
}

/// The keys of the rows `sql` (a `SELECT` of every column of `table`) returns.
async fn keys_of(conn: &mut PgConnection, table: &TableMeta, mut sql: Sql) -> BTreeSet<String> {
    let rows = sql.build().fetch_all(&mut *conn).await.unwrap();
    rows.iter().map(|r| serde_json::to_string(&key_of(table, &decode_row(table, r).unwrap())).unwrap()).collect()
}

async fn insert(conn: &mut PgConnection, table: &TableMeta, row: &Row) {
    let columns: Vec<String> = table.columns.iter().map(|c| ident(c.name)).collect();
    let mut sql = Sql::new(format!("INSERT INTO {} ({}) VALUES (", ident(table.name), columns.join(", ")));
    for (i, column) in table.columns.iter().enumerate() {
        sql.push(if i == 0 { "" } else { ", " });
        push_value(&mut sql, table, column, &row[column.name]).unwrap();
    }
    sql.push(") ON CONFLICT DO NOTHING");
    sql.build().execute(&mut *conn).await.unwrap();
}

async fn update(conn: &mut PgConnection, table: &TableMeta, row: &Row) {
    let mut sql = Sql::new(format!("UPDATE {} SET ", ident(table.name)));
    for (i, column) in table.columns.iter().filter(|c| !table.is_key(c.name)).enumerate() {
        sql.push(format_args!("{}{} = ", if i == 0 { "" } else { ", " }, ident(column.name)));
        push_value(&mut sql, table, column, &row[column.name]).unwrap();
    }
    for (i, column) in table.key_columns().enumerate() {
        sql.push(format_args!(" {} {} = ", if i == 0 { "WHERE" } else { "AND" }, ident(column.name)));
        push_value(&mut sql, table, column, &row[column.name]).unwrap();
    }
    sql.build().execute(&mut *conn).await.unwrap();
}

/// Every bucket key a rule could form from the text pool.
pub(super) fn candidate_keys(selection: &RuleSelection) -> Vec<BucketKey> {
    let mut keys = vec![Vec::new()];
    for _ in selection.rule.parameters {
        keys = keys
            .into_iter()
            .flat_map(|k: Vec<&str>| TEXTS.iter().map(move |t| [k.clone(), vec![*t]].concat()))
            .collect();
    }
    keys.into_iter().map(|params| BucketKey::new(selection.rule.name, &params)).collect()
}

/// The `SELECT` of every column of the rows of `table` in the bucket `params` of any of
/// `selections`.
fn selected(table: &'static TableMeta, selections: &[&RuleSelection], params: &[String]) -> Sql {
    let columns: Vec<String> = table.columns.iter().map(|c| super::column("t", c.name)).collect();
    let mut sql = Sql::new(format!("SELECT {} FROM {} AS t WHERE false", columns.join(", "), ident(table.name)));
    for selection in selections {
        sql.push(" OR (");
        push_selected(&mut sql, "t", table, selection, params);
        sql.push(")");
    }
    sql
}

/// The keys of the rows a pull's walk over `selection` finds in the buckets `params`, in steps
/// of at most `limit` rows each resumed after the last row of the one before, checking that it
/// gives them bucket after bucket, each in the change stream's order.
async fn walked(
    conn: &mut PgConnection,
    table: &'static TableMeta,
    selection: &RuleSelection,
    params: &[Vec<String>],
    limit: usize,
) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    let mut last: Option<(usize, u64)> = None;
    let mut resume: Option<(usize, u64, Vec<Value>)> = None;
    loop {
        let first = resume.as_ref().map_or(0, |(bucket, _, _)| *bucket);
        let ahead = &params[first..];
        if ahead.is_empty() {
            return keys;
        }
        let step = WalkStep {
            buckets: ahead,
            resume: resume.as_ref().map(|(_, xid, key)| (*xid, key.as_slice())),
            from: 0,
            to: u64::MAX / 2,
            limit,
            stamps: false,
        };
        let mut sql = Sql::new("");
        push_walk(&mut sql, table, selection, &step);
        let rows = sql.build().fetch_all(&mut *conn).await.unwrap();
        for row in &rows {
            let xid: String = sqlx::Row::get(row, table.columns.len());
            let index: i64 = sqlx::Row::get(row, table.columns.len() + 1);
            let bucket = first + usize::try_from(index - 1).unwrap();
            let at = (bucket, xid.parse::<u64>().unwrap());
            assert!(last.is_none_or(|last| last <= at), "the walk goes bucket after bucket, in order");
            last = Some(at);
            let key = key_of(table, &decode_row(table, row).unwrap());
            assert!(keys.insert(serde_json::to_string(&key).unwrap()), "no row comes twice");
            resume = Some((bucket, at.1, key));
        }
        if rows.len() < limit {
            return keys;
        }
    }
}

async fn check(app: &App, rules: &RuleIndex, pool: &PgPool, case: &Case) -> Result<(), TestCaseError> {
    let conn: &mut PgConnection = &mut pool.acquire().await.unwrap();
    let tables: Vec<&'static TableMeta> = app.tables().iter().map(|def| def.meta()).collect();
    let names: Vec<String> = tables.iter().map(|t| ident(t.name)).collect();
    let truncate = format!("TRUNCATE {}, _engine_tombstones", names.join(", "));
    conn.execute(sqlx::AssertSqlSafe(truncate)).await.unwrap();
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
            // One bucket at a time.
            let keys = candidate_keys(selections[0]);
            for key in &keys {
                let params = key.params();
                let sql = keys_of(conn, table, selected(table, selections, &params)).await;
                let rust: BTreeSet<String> =
                    buckets.iter().filter(|(_, b)| b.contains(key)).map(|(k, _)| (*k).clone()).collect();
                prop_assert_eq!(&sql, &rust, "rows of `{}` in bucket `{}`", table.name, key);
                // The bucket walked alone, two rows a step.
                let mut walk = BTreeSet::new();
                for selection in selections {
                    walk.extend(walked(conn, table, selection, std::slice::from_ref(&params), 2).await);
                }
                prop_assert_eq!(&walk, &rust, "rows of `{}` in bucket `{}` walked alone", table.name, key);
            }
            // Every other key at once, as a pull walks them.
            let some: Vec<&BucketKey> = keys.iter().step_by(2).collect();
            let params: Vec<Vec<String>> = some.iter().map(|k| k.params()).collect();
            let mut sql = BTreeSet::new();
            for selection in selections {
                sql.extend(walked(conn, table, selection, &params, 10_000).await);
                prop_assert_eq!(
                    walked(conn, table, selection, &params, 3).await,
                    walked(conn, table, selection, &params, 10_000).await
                );
            }
            let rust: BTreeSet<String> = buckets
                .iter()
                .filter(|(_, b)| some.iter().any(|k| b.contains(*k)))
                .map(|(k, _)| (*k).clone())
                .collect();
            prop_assert_eq!(&sql, &rust, "rows of `{}` in buckets {:?}", table.name, some);
        }
        // The buckets that hold any row, as stats counts them.
        for selection in rules.selections(table.name) {
            let (parameters, conditions) = any_bucket("t", table, selection);
            let sql = format!("SELECT DISTINCT {parameters} FROM {} AS t WHERE {conditions}", ident(table.name));
            let found: Vec<sqlx::postgres::PgRow> =
                sqlx::query(sqlx::AssertSqlSafe(sql)).fetch_all(&mut *conn).await.unwrap();
            let sql: BTreeSet<BucketKey> = found
                .iter()
                .map(|r| {
                    let params: Vec<String> =
                        (0..selection.rule.parameters.len()).map(|i| sqlx::Row::get(r, i)).collect();
                    BucketKey::new(selection.rule.name, &params)
                })
                .collect();
            let rust: BTreeSet<BucketKey> =
                rows.values().filter(|row| table.is_live(row)).filter_map(|row| selection.bucket_of(row)).collect();
            prop_assert_eq!(sql, rust, "buckets of `{}` under rule `{}`", table.name, selection.rule.name);
        }
    }

    // The trigger records what each update and delete takes a row out of.
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
        conn.execute(sqlx::AssertSqlSafe(format!("DELETE FROM {}", ident(table.name)))).await.unwrap();
    }
    let recorded: Vec<(String, Value, Vec<String>)> =
        sqlx::query_as("SELECT table_name, key, buckets FROM _engine_tombstones").fetch_all(&mut *conn).await.unwrap();
    let mut recorded: Vec<(String, String, Vec<String>)> =
        recorded.into_iter().map(|(table, key, buckets)| (table, key.to_string(), buckets)).collect();
    recorded.sort();
    expected.sort();
    prop_assert_eq!(recorded, expected, "the tombstones of the case");
    Ok(())
}

/// A row that left buckets: its table, its key as JSON text, the buckets.
pub(super) type Left = (String, String, Vec<String>);

/// What a tombstone of the row `row` of `table` says it left, from the buckets it was in
/// `before` and is in `after`: nothing when it left none.
pub(super) fn left(
    table: &TableMeta,
    row: &Row,
    before: BTreeSet<BucketKey>,
    after: BTreeSet<BucketKey>,
) -> Option<Left> {
    let gone: Vec<String> = before.difference(&after).map(|b| b.as_str().to_owned()).collect();
    let key: serde_json::Map<String, Value> =
        table.primary_key.iter().map(|k| ((*k).to_owned(), row[*k].clone())).collect();
    (!gone.is_empty()).then(|| (table.name.to_owned(), Value::Object(key).to_string(), gone))
}

#[test]
fn sql_and_rust_agree_on_which_rows_a_bucket_holds() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let app = example_notes::app();
    let rules = app.rule_index();
    let tables: Vec<&'static TableMeta> = app.tables().iter().map(|def| def.meta()).collect();
    let db = runtime.block_on(TestDb::new());
    let storage = PostgresStorage::new(db.pool.clone(), std::sync::Arc::new(example_notes::app()));
    runtime.block_on(storage.provision()).expect("provision the notes app");
    let mut runner = TestRunner::new(Config { cases: 48, failure_persistence: None, ..Config::default() });
    let result = runner.run(&case(&tables), |case| runtime.block_on(check(&app, &rules, &db.pool, &case)));
    runtime.block_on(db.drop());
    result.unwrap();
}

/// A walk enters a bucket at the step's first transaction and the floor of each key column: the
/// floor, read as the walk reads a key, must come at or before every key of its type, or a row
/// written in that transaction with a least key (a negative number, `-Infinity`) is skipped.
#[test]
fn a_key_floor_comes_before_every_key_of_its_type() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let db = TestDb::new().await;
        let least: [(SqlType, &[&str]); 10] = [
            (SqlType::Text, &["", "\u{1}", "a"]),
            (SqlType::Bytes, &["", "AA=="]),
            (SqlType::Uuid, &["00000000-0000-0000-0000-000000000000", "00000000-0000-0000-0000-000000000001"]),
            (SqlType::Timestamp, &["-infinity", "4713-01-01 00:00:00+00 BC"]),
            (SqlType::Boolean, &["false", "true"]),
            (SqlType::SmallInt, &["-32768", "-1"]),
            (SqlType::Integer, &["-2147483648", "-1"]),
            (SqlType::BigInt, &["-9223372036854775808", "-1"]),
            (SqlType::Real, &["-Infinity", "-3.4e38", "NaN"]),
            (SqlType::Double, &["-Infinity", "-1.7e308", "NaN"]),
        ];
        for (sql_type, keys) in least {
            let floor = super::floor(sql_type);
            for key in keys {
                let sql = format!("SELECT {} <= {}", super::text_as("$1", sql_type), super::text_as("$2", sql_type));
                let before: bool = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                    .bind(floor)
                    .bind(*key)
                    .fetch_one(&db.pool)
                    .await
                    .unwrap();
                assert!(before, "the floor {floor:?} of {sql_type:?} comes before the key {key:?}");
            }
        }
        db.drop().await;
    });
}
