//! The SQLite store on files of its own: provisioning, change tracking by its triggers, and the
//! one process that may serve a file.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

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
    let (was, moved) = (json!({"deleted_at": null, "list_id": "l1"}), json!({"deleted_at": null, "list_id": "l2"}));
    assert_eq!(
        seen,
        vec![
            ("notes", &json!({"id": "n1"}), &was, Some(&moved)),
            ("notes", &json!({"id": "n2"}), &was, None),
            ("notes", &json!({"id": "n3"}), &was, None),
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
    assert!(
        err.contains("table lists, column title: the app declares TEXT NOT NULL, the database has INTEGER NULL"),
        "{err}"
    );
}

#[tokio::test]
async fn a_file_whose_bucket_sets_have_no_owner_gains_the_columns_and_serves_pulls() {
    let scratch = Scratch::new();
    let store = notes(&scratch.file()).await;
    store.provision().await.unwrap();
    drop(store);
    // The table as a file provisioned before sets were bounded per user has it.
    let mut conn = other_program(&scratch.file()).await;
    sqlx::raw_sql(
        "DROP INDEX _engine_bucket_sets_user; DROP TABLE _engine_bucket_sets;
         CREATE TABLE _engine_bucket_sets (digest TEXT PRIMARY KEY, buckets TEXT NOT NULL, used_at INTEGER NOT NULL);
         INSERT INTO _engine_bucket_sets VALUES ('old', '[]', 0);",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    drop(conn);
    let store = notes(&scratch.file()).await;
    assert!(store.plan_changes().await.unwrap().contains("ADD COLUMN user_id"), "the plan adds the owner");
    store.provision().await.unwrap();
    assert_eq!(store.plan_changes().await.unwrap(), "", "and nothing after");
    // A cursor of more buckets than it writes out names a stored set: one is stored.
    let mut conn = other_program(&scratch.file()).await;
    for i in 0..40 {
        sqlx::query("INSERT INTO lists (id, owner_id, title, archived) VALUES (?, 'bob', 't', 0)")
            .bind(format!("a-list-with-a-long-enough-id-{i:03}"))
            .execute(&mut conn)
            .await
            .unwrap();
        sqlx::query("INSERT INTO list_members (list_id, user_id, owner_id, role, accepted, invited_by, title) VALUES (?, 'alice', 'bob', 'editor', true, 'bob', 't')")
            .bind(format!("a-list-with-a-long-enough-id-{i:03}"))
            .execute(&mut conn)
            .await
            .unwrap();
    }
    pull_all(&store, &alice(), uuid::Uuid::new_v4(), None, 1000).await;
    let owners: Vec<String> = sqlx::query_scalar("SELECT user_id FROM _engine_bucket_sets ORDER BY user_id")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    assert_eq!(owners, ["", "alice"], "the old set keeps no owner, the new one is alice's");
}

#[test]
fn sqlite_urls_name_files() {
    assert_eq!(sqlite_path("sqlite://notes.db"), Some(PathBuf::from("notes.db")));
    assert_eq!(sqlite_path("sqlite:///var/lib/notes.db"), Some(PathBuf::from("/var/lib/notes.db")));
    assert_eq!(sqlite_path("sqlite:notes.db?mode=rwc"), Some(PathBuf::from("notes.db")));
    assert_eq!(sqlite_path("postgres://postgres@127.0.0.1/notes"), None);
    assert_eq!(sqlite_path("sqlite://"), None);
}

/// Alice owns `l1`; Bob owns `l2`, shared with Alice, and `l3`, not shared; each list has
/// notes. Written by another program, as any writer of the file may.
async fn two_users(path: &std::path::Path) -> (SqliteStorage, SqliteConnection) {
    let store = notes(path).await;
    store.provision().await.unwrap();
    let mut conn = other_program(path).await;
    sqlx::raw_sql(
        "INSERT INTO lists (id, owner_id, title, archived) VALUES ('l1', 'alice', 'Groceries', 0), ('l2', 'bob', 'Trip', 0), ('l3', 'bob', 'Secret', 0);
         INSERT INTO list_members (list_id, user_id, owner_id, role, accepted, invited_by, title) VALUES ('l1', 'alice', 'alice', 'owner', true, 'x', 't'), ('l2', 'bob', 'bob', 'owner', true, 'x', 't'), ('l2', 'alice', 'bob', 'viewer', true, 'x', 't'), ('l3', 'bob', 'bob', 'owner', true, 'x', 't');
         INSERT INTO notes (id, owner_id, list_id, title, done, position) VALUES
           ('a1', 'alice', 'l1', 'Milk', 0, 1), ('a2', 'alice', 'l1', 'Eggs', 1, 2),
           ('b1', 'bob', 'l2', 'Tent', 0, 1), ('b2', 'bob', 'l2', 'Map', 0, 2), ('b3', 'bob', 'l2', 'Stove', 0, 3),
           ('s1', 'bob', 'l3', 'Do not show', 0, 1);",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    (store, conn)
}

fn alice() -> engine_kernel::Actor {
    engine_kernel::Actor::new("alice", "alice")
}

/// Pull from `cursor` until the page says nothing more waits: each page's changes (table, id or
/// key) and tombstones, and the last cursor.
async fn pull_all(
    store: &SqliteStorage,
    actor: &engine_kernel::Actor,
    client: uuid::Uuid,
    cursor: Option<String>,
    limit: u32,
) -> (Vec<(String, Value)>, Vec<(String, Value, Vec<String>)>, String) {
    let (mut changes, mut tombstones, mut cursor) = (Vec::new(), Vec::new(), cursor);
    for _ in 0..100 {
        let request = engine_kernel::wire::PullRequest {
            client_id: client,
            cursor: cursor.clone(),
            buckets: None,
            limit: Some(limit),
            ..Default::default()
        };
        let page = store.pull(actor, &request).await.unwrap().response().unwrap();
        assert!(page.changes.len() + page.tombstones.len() <= limit as usize, "a page holds at most its limit");
        changes.extend(page.changes.iter().map(|c| {
            (c.table.clone(), c.row.get("id").cloned().unwrap_or_else(|| json!([c.row["list_id"], c.row["user_id"]])))
        }));
        tombstones.extend(page.tombstones.iter().map(|t| {
            (t.table.clone(), Value::Object(t.key.clone()), t.buckets.iter().map(|b| b.as_str().to_owned()).collect())
        }));
        cursor = Some(page.cursor);
        if !page.has_more {
            return (changes, tombstones, cursor.unwrap());
        }
    }
    panic!("the pull never ended");
}

#[tokio::test]
async fn a_pull_pages_through_the_actors_buckets_only() {
    let scratch = Scratch::new();
    let (store, _conn) = two_users(&scratch.file()).await;
    let (changes, tombstones, _) = pull_all(&store, &alice(), uuid::Uuid::new_v4(), None, 2).await;
    let mut ids: Vec<String> = changes.iter().map(|(table, id)| format!("{table}:{id}")).collect();
    ids.sort();
    assert_eq!(
        ids,
        [
            "list_members:[\"l1\",\"alice\"]",
            "list_members:[\"l2\",\"alice\"]",
            "list_members:[\"l2\",\"bob\"]",
            "lists:\"l1\"",
            "lists:\"l2\"",
            "notes:\"a1\"",
            "notes:\"a2\"",
            "notes:\"b1\"",
            "notes:\"b2\"",
            "notes:\"b3\"",
        ],
        "Alice's own list and the one shared with her, each row once, never Bob's secret"
    );
    assert!(tombstones.is_empty());
}

#[tokio::test]
async fn a_pull_from_a_cursor_brings_what_changed_and_what_left() {
    let scratch = Scratch::new();
    let (store, mut conn) = two_users(&scratch.file()).await;
    let client = uuid::Uuid::new_v4();
    let (_, _, cursor) = pull_all(&store, &alice(), client, None, 1000).await;
    let (nothing, none, cursor) = pull_all(&store, &alice(), client, Some(cursor), 1000).await;
    assert!(nothing.is_empty() && none.is_empty(), "nothing changed: {nothing:?} {none:?}");
    // A title changes, a note moves to the secret list, another is deleted, and Bob shares
    // the secret list with Alice.
    sqlx::raw_sql(
        "UPDATE notes SET title = 'Oat milk' WHERE id = 'a1';
         UPDATE notes SET list_id = 'l3' WHERE id = 'b1';
         DELETE FROM notes WHERE id = 'b2';",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    let (changes, tombstones, cursor) = pull_all(&store, &alice(), client, Some(cursor), 1000).await;
    assert_eq!(changes, vec![("notes".to_owned(), json!("a1"))], "only the row that changed in her buckets");
    assert_eq!(
        tombstones,
        vec![
            ("notes".to_owned(), json!({"id": "b1"}), vec!["shared/l2".to_owned()]),
            ("notes".to_owned(), json!({"id": "b2"}), vec!["shared/l2".to_owned()]),
        ],
        "the rows that left her bucket, and the bucket they left"
    );
    sqlx::raw_sql(
        "INSERT INTO list_members (list_id, user_id, owner_id, role, accepted, invited_by, title) VALUES ('l3', 'alice', 'bob', 'viewer', true, 'x', 't')",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    let (changes, _, _) = pull_all(&store, &alice(), client, Some(cursor), 1000).await;
    let mut ids: Vec<String> = changes.iter().map(|(table, id)| format!("{table}:{id}")).collect();
    ids.sort();
    assert_eq!(
        ids,
        [
            "list_members:[\"l3\",\"alice\"]",
            "list_members:[\"l3\",\"bob\"]",
            "lists:\"l3\"",
            "notes:\"b1\"",
            "notes:\"s1\""
        ],
        "a bucket newly held is filled from its first row"
    );
}

#[tokio::test]
async fn a_forged_cursor_starts_afresh() {
    let scratch = Scratch::new();
    let (store, _conn) = two_users(&scratch.file()).await;
    let request = engine_kernel::wire::PullRequest {
        client_id: uuid::Uuid::new_v4(),
        cursor: Some("AAAA.forged".into()),
        buckets: None,
        limit: None,
        ..Default::default()
    };
    let page = store.pull(&alice(), &request).await.unwrap().response().unwrap();
    assert!(page.reset, "a cursor this file did not sign is not read");
    assert_eq!(page.changes.len(), 10);
}

/// The numbers are the commit order, so a pull that goes on from its cursor while other
/// programs commit and roll back never skips a committed row nor sees a rolled-back one, and
/// needs no horizon to wait for: writers race pullers, and what the pulls delivered, page after
/// page, is exactly what committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pulls_racing_writers_skip_nothing_committed_and_see_nothing_undone() {
    let scratch = Scratch::new();
    let (store, _conn) = two_users(&scratch.file()).await;
    let store = Arc::new(store);
    let client = uuid::Uuid::new_v4();
    let (_, _, cursor) = pull_all(&store, &alice(), client, None, 1000).await;
    let writers: Vec<_> = (0..4)
        .map(|writer| {
            let path = scratch.file();
            tokio::spawn(async move {
                let mut conn = other_program(&path).await;
                let mut committed = Vec::new();
                for batch in 0..25 {
                    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.unwrap();
                    let ids: Vec<String> = (0..3).map(|n| format!("w{writer}-{batch}-{n}")).collect();
                    for id in &ids {
                        sqlx::query("INSERT INTO notes (id, owner_id, list_id, title, done, position) VALUES (?, 'alice', 'l1', 't', 0, 0)")
                            .bind(id)
                            .execute(&mut *tx)
                            .await
                            .unwrap();
                    }
                    if batch % 5 == 4 {
                        tx.rollback().await.unwrap();
                    } else {
                        tx.commit().await.unwrap();
                        committed.extend(ids);
                    }
                    tokio::task::yield_now().await;
                }
                committed
            })
        })
        .collect();
    let puller = {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            let (mut seen, mut cursor) = (Vec::new(), cursor);
            for _ in 0..40 {
                let (changes, _, next) = pull_all(&store, &alice(), client, Some(cursor), 7).await;
                seen.extend(changes.into_iter().map(|(_, id)| id.as_str().unwrap_or_default().to_owned()));
                cursor = next;
                tokio::task::yield_now().await;
            }
            (seen, cursor)
        })
    };
    let mut committed = Vec::new();
    for writer in writers {
        committed.extend(writer.await.unwrap());
    }
    let (mut seen, cursor) = puller.await.unwrap();
    let (last, _, _) = pull_all(&store, &alice(), client, Some(cursor), 7).await;
    seen.extend(last.into_iter().map(|(_, id)| id.as_str().unwrap_or_default().to_owned()));
    let mut delivered = seen.clone();
    delivered.sort();
    delivered.dedup();
    assert_eq!(delivered.len(), seen.len(), "no row was delivered twice");
    committed.sort();
    assert_eq!(delivered, committed, "every committed row, and only those");
}

/// Rules that read another column of a table change what its tombstones must hold: the file's
/// old triggers are dropped and the new ones record it, for rows written before and after.
#[tokio::test]
async fn rules_that_decide_by_another_column_replace_the_triggers() {
    let scratch = Scratch::new();
    let (store, mut conn) = two_users(&scratch.file()).await;
    drop(store);
    // The same app, whose lists of `own` are those not archived.
    let mut doc = engine_kernel::contract(&example_notes::app());
    doc["x-engine"]["syncRules"]["own"]["data"][0]["filters"] = json!([{"column": "archived", "value": false}]);
    let app = Arc::new(engine_kernel::contract::app_from_contract(&doc).unwrap());
    let store = sqlite(scratch.file()).connect(app).await.unwrap();
    let plan = store.plan_changes().await.unwrap();
    assert!(plan.contains("+ DROP TRIGGER IF EXISTS \"_engine_lists_tombstone_update_"), "{plan}");
    store.provision().await.unwrap();
    assert_eq!(store.plan_changes().await.unwrap(), "");
    sqlx::query("UPDATE lists SET archived = 1 WHERE id = 'l1'").execute(&mut conn).await.unwrap();
    let stones = tombstones(&mut conn).await;
    assert_eq!(stones.len(), 1, "archiving takes the list out of its owner's bucket: {stones:?}");
    assert_eq!(stones[0].3["archived"], json!(0), "the value that decides it is recorded");
}

fn mutation(id: u64, name: &str, args: Value) -> engine_kernel::wire::MutationRequest {
    engine_kernel::wire::MutationRequest {
        mutation_id: id,
        client_mutation_id: uuid::Uuid::new_v4(),
        name: name.into(),
        args,
        hlc: None,
    }
}

async fn push(
    store: &SqliteStorage,
    actor: &engine_kernel::Actor,
    client: uuid::Uuid,
    mutations: Vec<engine_kernel::wire::MutationRequest>,
) -> crate::push::Pushed {
    store.push(actor, &engine_kernel::wire::PushRequest { client_id: client, mutations }).await.unwrap()
}

fn statuses(pushed: &crate::push::Pushed) -> Vec<String> {
    pushed
        .response
        .results
        .iter()
        .map(|r| match &r.error {
            Some(error) => format!("{:?} {}", r.status, error.code),
            None => format!("{:?}", r.status),
        })
        .collect()
}

/// The notes app's mutators on SQLite, through the same authorization as on Postgres: Alice
/// creates and shares a list, Bob (a viewer) reads it and may not write it, and the client's
/// sequence answers replays and refuses gaps.
#[tokio::test]
async fn pushes_apply_once_through_the_rules_and_pulls_see_them() {
    let scratch = Scratch::new();
    let store = notes(&scratch.file()).await;
    store.provision().await.unwrap();
    let (alice, bob) = (alice(), engine_kernel::Actor::new("bob", "bob"));
    let (phone, laptop) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
    let create = mutation(1, "create_list", json!({"id": "l1", "title": "Groceries"}));
    let pushed = push(
        &store,
        &alice,
        phone,
        vec![
            create.clone(),
            mutation(2, "add_note", json!({"id": "n1", "list_id": "l1", "title": "Milk"})),
            mutation(3, "share_list", json!({"list_id": "l1", "user_id": "bob", "role": "viewer"})),
        ],
    )
    .await;
    assert_eq!(statuses(&pushed), ["Applied", "Applied", "Applied"]);
    assert_eq!(pushed.response.last_mutation_id, 3);
    assert!(pushed.affected.iter().any(|b| b.as_str() == "shared/l1"), "{:?}", pushed.affected);
    assert!(pushed.membership_changes.contains("user_id=bob"), "{:?}", pushed.membership_changes);

    // A replay is answered from its record; a gap is refused.
    let again = push(&store, &alice, phone, vec![create]).await;
    assert_eq!(statuses(&again), ["Duplicate"]);
    let gap = store
        .push(
            &alice,
            &engine_kernel::wire::PushRequest {
                client_id: phone,
                mutations: vec![mutation(9, "add_note", json!({"list_id": "l1", "title": "x"}))],
            },
        )
        .await
        .unwrap();
    assert!(
        matches!(gap.stopped, Some(Error::MutationOutOfOrder { last_mutation_id: 3, got: 9 })),
        "{:?}",
        gap.stopped
    );

    // Bob accepts the share (from a device of his own), reads the list, and may not write it:
    // the refusal is recorded and moves his sequence on.
    let accept = mutation(1, "accept_list", json!({"list_id": "l1"}));
    assert_eq!(statuses(&push(&store, &bob, uuid::Uuid::new_v4(), vec![accept]).await), ["Applied"]);
    let (changes, _, _) = pull_all(&store, &bob, laptop, None, 1000).await;
    let mut ids: Vec<String> = changes.iter().map(|(table, id)| format!("{table}:{id}")).collect();
    ids.sort();
    assert_eq!(
        ids,
        ["list_members:[\"l1\",\"alice\"]", "list_members:[\"l1\",\"bob\"]", "lists:\"l1\"", "notes:\"n1\""]
    );
    let refused =
        push(&store, &bob, laptop, vec![mutation(1, "add_note", json!({"list_id": "l1", "title": "Beer"}))]).await;
    assert_eq!(statuses(&refused), ["Rejected forbidden"], "{:?}", refused.stopped);
    assert_eq!(refused.response.last_mutation_id, 1);
    let own = push(&store, &bob, laptop, vec![mutation(2, "create_list", json!({"id": "l1", "title": "Mine"}))]).await;
    assert_eq!(statuses(&own), ["Rejected forbidden"], "Bob cannot take Alice's list id over");
    let mut conn = other_program(&scratch.file()).await;
    let notes: i64 = sqlx::query_scalar("SELECT count(*) FROM notes").fetch_one(&mut conn).await.unwrap();
    assert_eq!(notes, 1, "the refused note was not written");
    let records: Vec<(i64, String)> =
        sqlx::query_as("SELECT mutation_id, status FROM _engine_mutations WHERE user_id = 'bob' AND name <> 'accept_list' ORDER BY mutation_id")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    assert_eq!(records, [(1, "rejected".to_owned()), (2, "rejected".to_owned())]);
}

/// Tombstones past their retention are collected, and a cursor that still needed them starts
/// afresh; the counts say what the file holds.
#[tokio::test]
async fn collected_tombstones_reset_the_cursors_that_needed_them() {
    let scratch = Scratch::new();
    let (store, mut conn) = two_users(&scratch.file()).await;
    let client = uuid::Uuid::new_v4();
    let (_, _, cursor) = pull_all(&store, &alice(), client, None, 1000).await;
    sqlx::raw_sql("DELETE FROM notes WHERE id IN ('a1', 'b1')").execute(&mut conn).await.unwrap();
    let stats = Storage::stats(&store).await.unwrap();
    // Each user's `own` and `memberships` buckets, and the three lists' `shared` buckets.
    assert_eq!((stats.tombstones, stats.buckets), (2, 7), "{stats:?}");
    let retention = crate::storage::Retention { tombstones: Duration::ZERO, ..Default::default() };
    let collected = Storage::collect_garbage(&store, &retention).await.unwrap();
    assert_eq!(collected.tombstones, 2, "{collected:?}");
    let request = engine_kernel::wire::PullRequest {
        client_id: client,
        cursor: Some(cursor),
        buckets: None,
        limit: None,
        ..Default::default()
    };
    let page = store.pull(&alice(), &request).await.unwrap().response().unwrap();
    assert!(page.reset, "the cursor needed the collected tombstones");
    assert_eq!(page.changes.len(), 8, "its buckets start afresh");
    assert_eq!(Storage::stats(&store).await.unwrap().tombstones, 0);
}

/// Pushes that wait for the writer together are applied in one transaction, committed once, and
/// a mutation that fails among them is undone alone: its sequence's start and its first insert
/// go, its rejection is recorded, and the other pushes of the group apply.
#[tokio::test]
async fn pushes_that_wait_together_commit_once_and_fail_alone() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let scratch = Scratch::new();
    let store = notes(&scratch.file()).await;
    store.provision().await.unwrap();
    let commits = Arc::new(AtomicUsize::new(0));
    let pushes = {
        let mut writer = store.db.writer().await;
        let counted = commits.clone();
        writer.lock_handle().await.unwrap().set_commit_hook(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            true
        });
        // Alice's laptop creates the list her phone creates just before it, in the same group.
        let pushes: Vec<_> =
            [("alice", "g", "first"), ("alice", "g", "second"), ("bob", "b", "bob's"), ("carol", "c", "carol's")]
                .into_iter()
                .map(|(user, id, title)| {
                    let store = store.clone();
                    let args = json!({"id": id, "title": title});
                    tokio::spawn(async move {
                        let actor = engine_kernel::Actor::new(user, user);
                        push(&store, &actor, uuid::Uuid::new_v4(), vec![mutation(1, "create_list", args)]).await
                    })
                })
                .collect();
        // Each push runs until it waits for the writer this test holds.
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        pushes
    };
    let mut answered = Vec::new();
    for pushed in pushes {
        answered.push(statuses(&pushed.await.unwrap()).join(" "));
    }
    assert_eq!(answered, ["Applied", "Rejected conflict", "Applied", "Applied"]);
    assert_eq!(commits.load(Ordering::SeqCst), 1, "the four pushes are one commit");
    let mut conn = other_program(&scratch.file()).await;
    let lists: Vec<(String, String)> =
        sqlx::query_as("SELECT id, title FROM lists ORDER BY id").fetch_all(&mut conn).await.unwrap();
    assert_eq!(lists, [("b".into(), "bob's".into()), ("c".into(), "carol's".into()), ("g".into(), "first".into())]);
    let records: Vec<(String, String)> =
        sqlx::query_as("SELECT user_id, status FROM _engine_mutations ORDER BY user_id, status")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    let expected = [("alice", "applied"), ("alice", "rejected"), ("bob", "applied"), ("carol", "applied")];
    assert_eq!(records, expected.map(|(u, s)| (u.to_owned(), s.to_owned())));
    let clients: i64 = sqlx::query_scalar("SELECT count(*) FROM _engine_clients").fetch_one(&mut conn).await.unwrap();
    assert_eq!(clients, 4, "the laptop's sequence, undone with its mutation, was started again for its record");
}
