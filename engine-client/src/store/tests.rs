//! The statements of the local store: their text, as `QueryBuilder` writes it, and their values,
//! through a SQLite database in memory.

use std::error::Error as _;

use engine_kernel::{ColumnMeta, MergePolicy, SqlType, TableMeta};
use serde_json::{Value, json};
use sqlx::{Connection as _, SqliteConnection};

use super::apply::upsert_sql;
use super::schema::create_sql;
use super::sql::{Sql, base, ident, push_key_match, select_live};
use super::values::stored;
use crate::Error;
use engine_sqlite::values::Stored;

const fn column(name: &'static str, sql_type: SqlType, nullable: bool) -> ColumnMeta {
    ColumnMeta { name, field: name, sql_type, nullable, blob: false, description: "" }
}

static COLUMNS: [ColumnMeta; 5] = [
    column("list_id", SqlType::Text, false),
    column("id", SqlType::Text, false),
    column("n", SqlType::Integer, false),
    column("done", SqlType::Boolean, false),
    column("deleted_at", SqlType::Timestamp, true),
];

/// Two key columns and a soft-delete column: every separator and clause is written.
static NOTES: TableMeta = TableMeta {
    name: "notes",
    struct_name: "Note",
    description: "",
    columns: &COLUMNS,
    primary_key: &["list_id", "id"],
    owner: None,
    soft_delete: Some("deleted_at"),
    merge: MergePolicy::Lww,
};

fn row(value: Value) -> engine_kernel::Row {
    value.as_object().cloned().expect("an object")
}

#[test]
fn statements_read_as_before() {
    assert_eq!(
        create_sql(&ident(NOTES.name), &NOTES).sql().as_str(),
        "CREATE TABLE IF NOT EXISTS \"notes\" (\"list_id\" TEXT, \"id\" TEXT, \"n\" INTEGER, \"done\" INTEGER, \
         \"deleted_at\" TEXT, PRIMARY KEY (\"list_id\", \"id\"))"
    );
    let (a, b) = (row(json!({"list_id": "l", "id": "a"})), row(json!({"list_id": "l", "id": "b"})));
    assert_eq!(
        upsert_sql(&NOTES, &base(NOTES.name), &[&a, &b]).sql().as_str(),
        "INSERT INTO \"_engine_base_notes\" (\"list_id\", \"id\", \"n\", \"done\", \"deleted_at\") \
         VALUES (?, ?, ?, ?, ?), (?, ?, ?, ?, ?) ON CONFLICT (\"list_id\", \"id\") \
         DO UPDATE SET \"n\" = excluded.\"n\", \"done\" = excluded.\"done\", \"deleted_at\" = excluded.\"deleted_at\""
    );
    let mut delete = Sql::new("DELETE FROM ");
    delete.push(ident(NOTES.name));
    push_key_match(&mut delete, &NOTES, &a);
    assert_eq!(delete.sql().as_str(), "DELETE FROM \"notes\" WHERE \"list_id\" = ? AND \"id\" = ?");
    let n = &COLUMNS[2];
    assert_eq!(
        select_live(&NOTES, &[(n, &json!(3))], Some(5)).sql().as_str(),
        "SELECT \"list_id\", \"id\", \"n\", \"done\", \"deleted_at\" FROM \"notes\" \
         WHERE \"n\" = ? AND \"deleted_at\" IS NULL ORDER BY \"list_id\", \"id\" LIMIT ?"
    );
}

#[test]
fn names_are_quoted_whatever_they_hold() {
    assert_eq!(ident("a\"b"), "\"a\"\"b\"");
    assert_eq!(base("x\"y"), "\"_engine_base_x\"\"y\"");
}

#[test]
fn values_bind_in_the_type_that_stores_them() {
    let [_, id, n, done, deleted_at] = &COLUMNS;
    let cases = [
        (id, json!(null), Stored::Text(None)),
        (id, json!("a"), Stored::Text(Some("a".into()))),
        (n, json!(7), Stored::Integer(Some(7))),
        // A value of the wrong shape is bound as its text: it then matches nothing.
        (n, json!(2.5), Stored::Integer(None)),
        (n, json!("7"), Stored::Text(Some("7".into()))),
        (done, json!(true), Stored::Integer(Some(1))),
        (deleted_at, json!("2026-01-01T00:00:00Z"), Stored::Text(Some("2026-01-01T00:00:00Z".into()))),
    ];
    for (column, value, expected) in cases {
        assert_eq!(stored(column, &value), expected, "{} {value}", column.name);
    }
    let doc = column("doc", SqlType::Json, true);
    assert_eq!(stored(&doc, &json!("text")), Stored::Text(Some("\"text\"".into())));
    let score = column("score", SqlType::Double, false);
    assert_eq!(stored(&score, &json!(1.5)), Stored::Real(Some(1.5)));
}

/// Rows written by the upsert come back through the `SELECT` of live rows, each value where
/// its placeholder stands.
#[tokio::test]
async fn rows_round_trip_through_sqlite() {
    let mut conn = SqliteConnection::connect("sqlite::memory:").await.expect("SQLite in memory");
    sqlx::raw_sql(create_sql(&ident(NOTES.name), &NOTES).into_sql()).execute(&mut conn).await.expect("create");
    let live = row(json!({"list_id": "l", "id": "a", "n": 1, "done": true, "deleted_at": null}));
    let other = row(json!({"list_id": "l", "id": "b", "n": 2, "done": false, "deleted_at": null}));
    let gone = row(json!({"list_id": "l", "id": "c", "n": 1, "done": false, "deleted_at": "2026-01-01T00:00:00Z"}));
    upsert_sql(&NOTES, &ident(NOTES.name), &[&live, &other, &gone]).build().execute(&mut conn).await.expect("upsert");
    let n = &COLUMNS[2];
    let found = super::rows(&mut conn, &NOTES, &[(n.name, json!(1))], None).await.expect("the rows");
    assert_eq!(found, std::slice::from_ref(&live));
    let first = super::rows(&mut conn, &NOTES, &[], Some(1)).await.expect("the rows");
    assert_eq!(first, [live]);
}

/// A value SQLite gives back in another type than its column's is [`Error::Decode`], naming the
/// table and keeping the driver's error as its source.
#[tokio::test]
async fn a_row_that_cannot_be_read_is_a_decode_error() {
    let mut conn = SqliteConnection::connect("sqlite::memory:").await.expect("SQLite in memory");
    sqlx::raw_sql(create_sql(&ident(NOTES.name), &NOTES).into_sql()).execute(&mut conn).await.expect("create");
    sqlx::query("INSERT INTO notes (list_id, id, n, done) VALUES ('l', 'a', 'many', 0)")
        .execute(&mut conn)
        .await
        .expect("SQLite keeps text in an INTEGER column");
    let err = super::rows(&mut conn, &NOTES, &[], None).await.expect_err("`n` is not an integer");
    assert!(matches!(err, Error::Decode { table: "notes", .. }), "{err:?}");
    assert!(err.source().and_then(|s| s.downcast_ref::<sqlx::Error>()).is_some(), "{err:?}");
}
