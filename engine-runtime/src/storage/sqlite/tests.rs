//! The SQLite store on files of its own: provisioning, change tracking by its triggers, and the
//! one process that may serve a file.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};
use sqlx::{Connection, SqliteConnection};

use super::*;
use crate::error::Error;

/// A path in a directory of its own, removed with it.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("engine-sqlite-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn file(&self) -> PathBuf {
        self.0.join("notes.db")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn notes(path: &std::path::Path) -> SqliteStorage {
    sqlite(path).connect(Arc::new(example_notes::app())).await.unwrap()
}

/// A connection of another program to the file, as `sqlite3` would open it.
async fn other_program(path: &std::path::Path) -> SqliteConnection {
    SqliteConnection::connect(&format!("sqlite://{}?mode=rwc", path.display())).await.unwrap()
}

async fn seq_of(conn: &mut SqliteConnection, table: &str, id: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT _engine_seq FROM {table} WHERE id = ?")))
        .bind(id)
        .fetch_one(conn)
        .await
        .unwrap()
}

async fn tombstones(conn: &mut SqliteConnection) -> Vec<(i64, String, Value, Value, Option<Value>)> {
    let rows: Vec<(i64, String, String, String, Option<String>)> =
        sqlx::query_as("SELECT seq, table_name, key, old, new FROM _engine_tombstones ORDER BY seq")
            .fetch_all(conn)
            .await
            .unwrap();
    let json = |text: &str| serde_json::from_str::<Value>(text).unwrap();
    rows.into_iter()
        .map(|(seq, table, key, old, new)| (seq, table, json(&key), json(&old), new.as_deref().map(json)))
        .collect()
}

#[tokio::test]
async fn provisioning_creates_the_tables_once_and_plans_nothing_after() {
    let scratch = Scratch::new();
    let store = notes(&scratch.file()).await;
    let plan = store.plan_changes().await.unwrap();
    assert!(plan.contains("+ CREATE TABLE IF NOT EXISTS \"notes\""), "{plan}");
    assert!(!plan.contains("ADD COLUMN \"title\""), "a new table is created with its columns: {plan}");
    let whole: String = sqlite_plan(&example_notes::app())
        .iter()
        .filter(|s| !s.starts_with("INSERT"))
        .map(|s| format!("+ {s}\n"))
        .collect();
    assert_eq!(plan, whole, "the plan of a new file is the whole plan");
    assert!(plan.contains("_engine_notes_tombstone_delete"), "{plan}");
    assert!(matches!(store.verify().await, Err(Error::Provision { .. })), "an empty file does not serve the app");
    store.provision().await.unwrap();
    store.verify().await.unwrap();
    assert_eq!(store.plan_changes().await.unwrap(), "", "a provisioned file needs nothing");
    store.provision().await.unwrap();
    assert_eq!(store.plan_changes().await.unwrap(), "");
}

#[tokio::test]
async fn every_write_of_any_program_is_stamped_in_commit_order() {
    let scratch = Scratch::new();
    let store = notes(&scratch.file()).await;
    store.provision().await.unwrap();
    let mut conn = other_program(&scratch.file()).await;
    sqlx::raw_sql(
        "INSERT INTO lists (id, owner_id, title, archived) VALUES ('l1', 'alice', 'Groceries', 0);
         INSERT INTO notes (id, owner_id, list_id, title, done, position) VALUES ('n1', 'alice', 'l1', 'Milk', 0, 1);
         INSERT INTO notes (id, owner_id, list_id, title, done, position) VALUES ('n2', 'alice', 'l1', 'Eggs', 0, 2);",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    let (l1, n1, n2) = (
        seq_of(&mut conn, "lists", "l1").await,
        seq_of(&mut conn, "notes", "n1").await,
        seq_of(&mut conn, "notes", "n2").await,
    );
    assert!(0 < l1 && l1 < n1 && n1 < n2, "stamped in the order written: {l1} {n1} {n2}");
    sqlx::query("UPDATE notes SET title = 'Oat milk' WHERE id = 'n1'").execute(&mut conn).await.unwrap();
    let again = seq_of(&mut conn, "notes", "n1").await;
    assert!(again > n2, "an update takes a later number: {again} after {n2}");
    assert!(tombstones(&mut conn).await.is_empty(), "a title decides no bucket: no row left one");
    let counter: i64 = sqlx::query_scalar("SELECT seq FROM _engine_seq").fetch_one(&mut conn).await.unwrap();
    assert_eq!(counter, again, "the counter is the last number taken");
}

#[tokio::test]
async fn a_row_leaving_its_buckets_leaves_its_key_and_deciding_values() {
    let scratch = Scratch::new();
    let store = notes(&scratch.file()).await;
    store.provision().await.unwrap();
    let mut conn = other_program(&scratch.file()).await;
    sqlx::raw_sql(
        "INSERT INTO notes (id, owner_id, list_id, title, done, position) VALUES ('n1', 'alice', 'l1', 'Milk', 0, 1);
         INSERT INTO notes (id, owner_id, list_id, title, done, position) VALUES ('n2', 'alice', 'l1', 'Eggs', 0, 2);
         INSERT INTO notes (id, owner_id, list_id, title, done, position) VALUES ('n3', 'alice', 'l1', 'Tea', 0, 3);",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    // Moved to another list, soft-deleted, deleted for good.
    sqlx::raw_sql(
        "UPDATE notes SET list_id = 'l2' WHERE id = 'n1';
         UPDATE notes SET deleted_at = '2026-11-27T12:00:00Z' WHERE id = 'n2';
         DELETE FROM notes WHERE id = 'n3';
         DELETE FROM notes WHERE id = 'n2';",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    let stones = tombstones(&mut conn).await;
    let seen: Vec<(&str, &Value, &Value, Option<&Value>)> =
        stones.iter().map(|(_, table, key, old, new)| (table.as_str(), key, old, new.as_ref())).collect();
    // Deciding columns in name order: deleted_at, list_id.
    assert_eq!(
        seen,
        vec![
            ("notes", &json!(["n1"]), &json!([null, "l1"]), Some(&json!([null, "l2"]))),
            ("notes", &json!(["n2"]), &json!([null, "l1"]), None),
            ("notes", &json!(["n3"]), &json!([null, "l1"]), None),
        ],
        "a deleted row that was already soft-deleted left nothing more"
    );
    let counter: i64 = sqlx::query_scalar("SELECT seq FROM _engine_seq").fetch_one(&mut conn).await.unwrap();
    assert!(stones.windows(2).all(|w| w[0].0 < w[1].0), "tombstones take numbers in the order written");
    assert!(stones.iter().all(|s| s.0 <= counter), "from the counter rows take theirs from");
}

#[tokio::test]
async fn one_process_serves_a_file() {
    let scratch = Scratch::new();
    let first = notes(&scratch.file()).await;
    let second = sqlite(scratch.file()).connect(Arc::new(example_notes::app())).await.unwrap_err();
    let text = second.to_string();
    assert!(matches!(second, Error::Config { .. }) && text.contains("another server process serves"), "{text}");
    drop(first);
    notes(&scratch.file()).await.provision().await.unwrap();
}

#[tokio::test]
async fn a_column_that_differs_from_the_app_is_refused() {
    let scratch = Scratch::new();
    let mut conn = other_program(&scratch.file()).await;
    sqlx::raw_sql(
        "CREATE TABLE lists (id TEXT PRIMARY KEY, owner_id TEXT NOT NULL, title INTEGER, archived INTEGER NOT NULL)",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    let store = notes(&scratch.file()).await;
    let err = store.provision().await.unwrap_err().to_string();
    assert!(err.contains("`lists`.`title` is INTEGER in the database, the app declares TEXT NOT NULL"), "{err}");
}

#[test]
fn sqlite_urls_name_files() {
    assert_eq!(sqlite_path("sqlite://notes.db"), Some(PathBuf::from("notes.db")));
    assert_eq!(sqlite_path("sqlite:///var/lib/notes.db"), Some(PathBuf::from("/var/lib/notes.db")));
    assert_eq!(sqlite_path("sqlite:notes.db?mode=rwc"), Some(PathBuf::from("notes.db")));
    assert_eq!(sqlite_path("postgres://postgres@127.0.0.1/notes"), None);
    assert_eq!(sqlite_path("sqlite://"), None);
}
