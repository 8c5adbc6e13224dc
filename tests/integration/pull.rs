//! Pull on each backend (`docs/protocol.md#post-syncpull`, `docs/design.md` §1–3).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use engine::server::Storage;
use engine::server::storage::StoreLimits;
use engine::wire::{PullRequest, PullResponse};
use engine::{Actor, BucketKey};
use serde_json::Value;

use crate::support::pulls::pull_pages;
use crate::support::{TestDb, ago, postgres_only};

const CLIENT: uuid::Uuid = uuid::Uuid::from_u128(0x0192_f0e0_0000_7000_8000_0000_0000_0001);

fn actor(user: &str) -> Actor {
    Actor::new(user, user)
}

fn key(text: &str) -> BucketKey {
    BucketKey::parse(text).unwrap()
}

async fn pull(storage: &Arc<dyn Storage>, who: &str, cursor: Option<&str>) -> PullResponse {
    pull_with(storage, who, cursor, None, None).await
}

async fn pull_with(
    storage: &Arc<dyn Storage>,
    who: &str,
    cursor: Option<&str>,
    buckets: Option<Vec<BucketKey>>,
    limit: Option<u32>,
) -> PullResponse {
    let request =
        PullRequest { client_id: CLIENT, cursor: cursor.map(str::to_owned), buckets, limit, ..Default::default() };
    storage.pull(&actor(who), &request).await.unwrap().response().unwrap()
}

/// Pull pages until `hasMore` is false; returns every response.
async fn pull_all(storage: &Arc<dyn Storage>, who: &str, cursor: Option<&str>, limit: u32) -> Vec<PullResponse> {
    pull_pages(&**storage, &actor(who), CLIENT, cursor.map(str::to_owned), limit).await
}

/// `table:id` of every change, with its buckets.
fn changes(page: &PullResponse) -> BTreeMap<String, Vec<String>> {
    page.changes
        .iter()
        .map(|c| {
            let id = c.row.get("id").or_else(|| c.row.get("user_id")).and_then(Value::as_str).unwrap_or_default();
            let id = match c.row.get("list_id") {
                Some(Value::String(list)) if c.table == "list_members" => format!("{list}/{id}"),
                _ => id.to_owned(),
            };
            (format!("{}:{id}", c.table), c.buckets.iter().map(ToString::to_string).collect())
        })
        .collect()
}

fn tombstones(page: &PullResponse) -> BTreeMap<String, Vec<String>> {
    page.tombstones
        .iter()
        .map(|t| {
            let id = t.key.get("id").and_then(Value::as_str).unwrap_or_default();
            (format!("{}:{id}", t.table), t.buckets.iter().map(ToString::to_string).collect())
        })
        .collect()
}

/// Run `sql`, then wait until pulls can see it (the horizon may trail a commit while unrelated
/// transactions of the cluster finish).
async fn exec(db: &TestDb, storage: &Arc<dyn Storage>, sql: &str) {
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned())).execute(&db.pool).await.unwrap();
    db.settle(&**storage).await;
}

/// SQL writing `lists` lists of alice (`l1`, …), her membership of each, and `notes` notes
/// spread over them (`n1`, …).
fn alices_lists(lists: u32, notes: u32) -> String {
    format!(
        "INSERT INTO lists (id, owner_id, title, archived)
           WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {lists})
           SELECT 'l' || i, 'alice', 'list ' || i, false FROM s;
         INSERT INTO list_members (list_id, user_id, owner_id, role, accepted, invited_by, title)
           WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {lists})
           SELECT 'l' || i, 'alice', 'alice', 'owner', true, 'alice', 't' FROM s;
         INSERT INTO notes (id, owner_id, list_id, title, done, position)
           WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {notes})
           SELECT 'n' || i, 'alice', 'l' || (i % {lists} + 1), 'note ' || i, false, i FROM s;"
    )
}

/// alice owns l1; bob owns l2 and shares it with alice; carol owns l3 and shares nothing.
async fn seed(db: &TestDb, storage: &Arc<dyn Storage>) {
    exec(
        db,
        storage,
        "INSERT INTO lists (id, owner_id, title, archived) VALUES ('l1', 'alice', 'alice list', false), ('l2', 'bob', 'bob list', false), ('l3', 'carol', 'carol list', false);
         INSERT INTO list_members (list_id, user_id, owner_id, role, accepted, invited_by, title) VALUES ('l1', 'alice', 'alice', 'owner', true, 'x', 't'), ('l2', 'bob', 'bob', 'owner', true, 'x', 't'),
                                         ('l2', 'alice', 'bob', 'editor', true, 'x', 't'), ('l3', 'carol', 'carol', 'owner', true, 'x', 't');
         INSERT INTO notes (id, owner_id, list_id, title, done, position) VALUES
           ('n1', 'alice', 'l1', 'alice in l1', false, 1),
           ('n2', 'bob', 'l2', 'bob in l2', false, 2),
           ('n3', 'alice', 'l2', 'alice in l2', false, 3),
           ('n4', 'carol', 'l3', 'carol in l3', false, 4);",
    )
    .await;
}

#[tokio::test]
async fn an_actor_gets_the_rows_of_its_claim_and_membership_buckets_and_nothing_else() {
    let db = TestDb::new().await;
    let storage = db.notes().await;
    seed(&db, &storage).await;
    let page = pull(&storage, "alice", None).await;
    assert!(!page.has_more && !page.reset);
    let got = changes(&page);
    let expected: BTreeMap<String, Vec<String>> = [
        ("lists:l1", vec!["own/alice", "shared/l1"]),
        ("lists:l2", vec!["shared/l2"]),
        ("list_members:l1/alice", vec!["memberships/alice", "own/alice", "shared/l1"]),
        ("list_members:l2/alice", vec!["memberships/alice", "shared/l2"]),
        ("list_members:l2/bob", vec!["shared/l2"]),
        ("notes:n1", vec!["shared/l1"]),
        ("notes:n2", vec!["shared/l2"]),
        ("notes:n3", vec!["shared/l2"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.into_iter().map(str::to_owned).collect()))
    .collect();
    assert_eq!(got, expected, "each row once, with every bucket of the actor that holds it");
    assert_eq!(page.changes.len(), expected.len(), "no row twice");
    let carol = pull(&storage, "carol", None).await;
    assert!(changes(&carol).keys().all(|k| !k.contains("l1") && !k.contains("l2") && k != "notes:n3"));
    let body = page.changes.iter().find(|c| c.table == "notes").unwrap().row["body"].as_str().unwrap().to_owned();
    assert_eq!(body, "AAA=", "a collaborative column travels as base64 of its yrs state");
}

#[tokio::test]
async fn deletes_soft_deletes_and_moves_leave_tombstones_for_the_buckets_left() {
    let db = TestDb::new().await;
    let storage = db.notes().await;
    seed(&db, &storage).await;
    let first = pull(&storage, "alice", None).await;
    exec(
        &db,
        &storage,
        "DELETE FROM notes WHERE id = 'n1';
         UPDATE notes SET deleted_at = '2026-01-01T00:00:00Z' WHERE id = 'n2';
         UPDATE notes SET list_id = 'l1' WHERE id = 'n3';
         UPDATE notes SET title = 'renamed' WHERE id = 'n4';",
    )
    .await;
    let second = pull(&storage, "alice", Some(&first.cursor)).await;
    let expected_tombstones: BTreeMap<String, Vec<String>> =
        [("notes:n1", vec!["shared/l1"]), ("notes:n2", vec!["shared/l2"]), ("notes:n3", vec!["shared/l2"])]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.into_iter().map(str::to_owned).collect()))
            .collect();
    assert_eq!(tombstones(&second), expected_tombstones);
    assert_eq!(
        changes(&second),
        [("notes:n3".to_owned(), vec!["shared/l1".to_owned()])].into_iter().collect(),
        "the moved note arrives in its new bucket; carol's rename is not alice's business"
    );
    assert!(pull(&storage, "alice", Some(&second.cursor)).await.changes.is_empty());
}

#[tokio::test]
async fn pages_cover_many_rows_of_many_tables_written_in_one_transaction_exactly_once() {
    let db = TestDb::new().await;
    let storage = db.notes().await;
    exec(&db, &storage, &format!("BEGIN; {} COMMIT;", alices_lists(400, 2100))).await;
    let pages = pull_all(&storage, "alice", None, 250).await;
    let mut seen = BTreeSet::new();
    for page in &pages {
        assert!(page.changes.len() + page.tombstones.len() <= 250);
        for change in &page.changes {
            let text = |column: &str| change.row.get(column).and_then(Value::as_str).unwrap_or("").to_owned();
            let id = format!("{}:{}:{}:{}", change.table, text("id"), text("list_id"), text("user_id"));
            assert!(seen.insert(id.clone()), "{id} delivered twice");
        }
    }
    let per_table = |t: &str| seen.iter().filter(|id| id.starts_with(&format!("{t}:"))).count();
    let sizes: Vec<usize> = pages.iter().map(|p| p.changes.len()).collect();
    assert_eq!(
        (per_table("lists"), per_table("list_members"), per_table("notes")),
        (400, 400, 2100),
        "page sizes {sizes:?}, resets {:?}",
        pages.iter().map(|p| p.reset).collect::<Vec<_>>()
    );
    assert!(pages.len() >= 2900 / 250, "{} pages", pages.len());
    let last = pages.last().unwrap();
    assert!(!last.has_more);
    // Caught up: nothing more, until something changes.
    assert!(pull(&storage, "alice", Some(&last.cursor)).await.changes.is_empty());
}

#[tokio::test]
async fn a_first_sync_tells_how_far_it_has_got_on_every_page_but_its_last() {
    let db = TestDb::new().await;
    let storage = db.notes().await;
    exec(&db, &storage, &alices_lists(40, 200)).await;
    let pages = pull_all(&storage, "alice", None, 20).await;
    let (last, rest) = pages.split_last().unwrap();
    assert!(last.progress.is_none(), "the last page has no more to tell");
    let progress: Vec<_> = rest.iter().map(|p| p.progress.expect("a page with more tells its progress")).collect();
    // `invitations/alice` and `memberships/alice` walk memberships, `own/alice` lists and
    // memberships, each `shared/…` lists, memberships and notes.
    assert!(progress.iter().all(|p| p.total == 1 + 1 + 2 + 40 * 3), "{progress:?}");
    assert!(progress.windows(2).all(|w| w[0].done <= w[1].done), "it never goes back: {progress:?}");
    assert!(progress.iter().any(|p| p.done > 0 && p.done < p.total), "{progress:?}");
    // Caught up, a pull has nothing to tell.
    assert!(pull(&storage, "alice", Some(&last.cursor)).await.progress.is_none());
}

#[tokio::test]
async fn a_transaction_that_commits_late_is_delivered_not_skipped() {
    if postgres_only("commits out of the order of their transaction ids are Postgres'") {
        return;
    }
    let db = TestDb::new().await;
    let storage = db.notes().await;
    seed(&db, &storage).await;
    let start = pull(&storage, "alice", None).await;

    // The earlier transaction takes its id first, then the later one commits before it.
    let mut early = db.pg().begin().await.unwrap();
    sqlx::query("INSERT INTO notes (id, owner_id, list_id, title, done, position) VALUES ('early', 'alice', 'l1', 'early', false, 10)")
        .execute(&mut *early)
        .await
        .unwrap();
    // Not `exec`: it would wait for the horizon, which the open transaction holds back.
    sqlx::query("INSERT INTO notes (id, owner_id, list_id, title, done, position) VALUES ('late', 'alice', 'l1', 'late', false, 11)")
        .execute(&db.pool)
        .await
        .unwrap();
    let during = pull(&storage, "alice", Some(&start.cursor)).await;
    assert!(
        changes(&during).is_empty(),
        "the later commit waits behind the running transaction: {:?}",
        changes(&during)
    );
    early.commit().await.unwrap();
    db.settle(&*storage).await;
    let after = pull(&storage, "alice", Some(&during.cursor)).await;
    let got: Vec<String> = changes(&after).into_keys().collect();
    assert_eq!(got, vec!["notes:early", "notes:late"]);
}

#[tokio::test]
async fn synced_mutation_id_reports_only_mutations_whose_rows_the_pull_holds() {
    use engine::wire::{MutationRequest, PushRequest};
    if postgres_only("a horizon held back by a running transaction is Postgres'") {
        return;
    }
    let db = TestDb::new().await;
    let storage = db.notes().await;
    let alice = actor("alice");
    let push = |id: u64, args: Value| {
        let request = PushRequest {
            client_id: CLIENT,
            mutations: vec![MutationRequest {
                mutation_id: id,
                client_mutation_id: uuid::Uuid::new_v4(),
                name: "create_list".into(),
                args,
                hlc: None,
            }],
        };
        let storage = storage.clone();
        let alice = alice.clone();
        async move { storage.push(&alice, &request).await.unwrap() }
    };
    push(1, serde_json::json!({"id": "first", "title": "first"})).await;
    db.settle(&*storage).await;
    let start = pull(&storage, "alice", None).await;
    assert_eq!((start.last_mutation_id, start.synced_mutation_id), (1, Some(1)));

    // A transaction that took its id earlier holds the horizon below mutation 2's.
    let mut early = db.pg().begin().await.unwrap();
    sqlx::query("SELECT pg_current_xact_id()").execute(&mut *early).await.unwrap();
    let pushed = push(2, serde_json::json!({"id": "second", "title": "second"})).await;
    assert_eq!(pushed.response.last_mutation_id, 2, "the push reports it applied");
    let during = pull(&storage, "alice", Some(&start.cursor)).await;
    assert!(changes(&during).is_empty());
    assert_eq!(during.last_mutation_id, 2, "applied");
    assert_eq!(during.synced_mutation_id, Some(1), "a pull without mutation 2's rows does not report it synced");

    early.commit().await.unwrap();
    db.settle(&*storage).await;
    let after = pull(&storage, "alice", Some(&during.cursor)).await;
    assert!(changes(&after).contains_key("lists:second"));
    assert_eq!((after.last_mutation_id, after.synced_mutation_id), (2, Some(2)));
}

#[tokio::test]
async fn granting_membership_back_fills_the_bucket_and_revoking_it_removes_it() {
    let db = TestDb::new().await;
    let storage = db.notes().await;
    seed(&db, &storage).await;
    let carol = pull(&storage, "carol", None).await;
    assert!(!changes(&carol).contains_key("lists:l1"));
    exec(
        &db,
        &storage,
        "INSERT INTO list_members (list_id, user_id, owner_id, role, accepted, invited_by, title) VALUES ('l1', 'carol', 'alice', 'viewer', true, 'x', 't')",
    )
    .await;
    let granted = pull(&storage, "carol", Some(&carol.cursor)).await;
    let got = changes(&granted);
    for row in ["lists:l1", "notes:n1", "list_members:l1/alice"] {
        assert_eq!(got.get(row), Some(&vec!["shared/l1".to_owned()]), "{row} back-filled in {got:?}");
    }
    let hers = vec!["memberships/carol".to_owned(), "shared/l1".to_owned()];
    assert_eq!(got.get("list_members:l1/carol"), Some(&hers), "her membership, in her index too: {got:?}");
    assert!(!got.contains_key("lists:l3"), "buckets the client already has are not re-sent");
    exec(&db, &storage, "DELETE FROM list_members WHERE list_id = 'l1' AND user_id = 'carol'").await;
    let revoked = pull(&storage, "carol", Some(&granted.cursor)).await;
    assert_eq!(revoked.removed_buckets, vec![key("shared/l1")]);
    assert!(!pull(&storage, "carol", Some(&revoked.cursor)).await.removed_buckets.contains(&key("shared/l1")));
}

#[tokio::test]
async fn a_repeated_pull_returns_the_same_data() {
    let db = TestDb::new().await;
    let storage = db.notes().await;
    seed(&db, &storage).await;
    let first = pull(&storage, "alice", None).await;
    exec(&db, &storage, "UPDATE notes SET title = 'again' WHERE id = 'n1'; INSERT INTO list_members (list_id, user_id, owner_id, role, accepted, invited_by, title) VALUES ('l3', 'alice', 'carol', 'viewer', true, 'x', 't')").await;
    let mut a = pull_with(&storage, "alice", Some(&first.cursor), None, Some(3)).await;
    let mut b = pull_with(&storage, "alice", Some(&first.cursor), None, Some(3)).await;
    assert!(b.server_hlc > a.server_hlc, "the server's clock only moves on");
    (a.server_hlc, b.server_hlc) = (None, None);
    assert!(a.has_more);
    // The cursors may differ only by how far other transactions of the cluster let the horizon
    // move between the two pulls; the data is the same, and so is what follows either cursor.
    let (cursor_a, cursor_b) = (std::mem::take(&mut a.cursor), std::mem::take(&mut b.cursor));
    assert_eq!(a, b, "a lost response loses nothing: the same request gets the same data");
    let rest = |cursor: String| {
        let storage = &storage;
        async move {
            let mut rows = Vec::new();
            let mut cursor = cursor;
            loop {
                let page = pull_with(storage, "alice", Some(&cursor), None, Some(3)).await;
                rows.extend(page.changes.iter().map(|c| (c.table.clone(), c.row.clone(), c.buckets.clone())));
                rows.extend(page.tombstones.iter().map(|t| (t.table.clone(), t.key.clone(), t.buckets.clone())));
                cursor = page.cursor;
                if !page.has_more {
                    return rows;
                }
            }
        }
    };
    assert_eq!(rest(cursor_a).await, rest(cursor_b).await, "either cursor leads to the same rows");
}

#[tokio::test]
async fn a_garbage_cursor_resets_instead_of_failing() {
    let db = TestDb::new().await;
    let storage = db.notes().await;
    seed(&db, &storage).await;
    for garbage in [
        "",
        "not a cursor",
        "eyJ2IjoxfQ",
        "AAAA",
        "eyJ2IjoxLCJnIjpbeyJiIjpbXSwiciI6eyJ4IjowLCJ0IjoiIiwiayI6W119LCJ0Ijp7IngiOjAsImkiOjB9fV19",
    ] {
        let page = pull(&storage, "alice", Some(garbage)).await;
        assert!(page.reset, "{garbage:?} resets");
        assert_eq!(changes(&page).len(), 8, "and the reset page is a fresh start");
    }
}

#[tokio::test]
async fn a_cursor_older_than_tombstone_retention_resets() {
    let db = TestDb::new().await;
    let storage = db.notes().await;
    seed(&db, &storage).await;
    let old = pull(&storage, "alice", None).await;
    exec(&db, &storage, "DELETE FROM notes WHERE id = 'n1'").await;
    let current = pull(&storage, "alice", Some(&old.cursor)).await;
    assert_eq!(current.tombstones.len(), 1);
    exec(&db, &storage, &format!("UPDATE _engine_tombstones SET created_at = {}", ago("30 days"))).await;
    assert_eq!(storage.collect_garbage(&engine::server::Retention::default()).await.unwrap().tombstones, 1);
    let stale = pull(&storage, "alice", Some(&old.cursor)).await;
    assert!(stale.reset, "the old cursor needed a tombstone that is gone");
    assert!(!changes(&stale).contains_key("notes:n1"));
    let fresh = pull(&storage, "alice", Some(&current.cursor)).await;
    assert!(!fresh.reset, "a cursor past the collected tombstones goes on");
}

#[tokio::test]
async fn a_subset_of_held_buckets_can_be_pulled_and_others_are_refused() {
    let db = TestDb::new().await;
    let storage = db.notes().await;
    seed(&db, &storage).await;
    let page = pull_with(&storage, "alice", None, Some(vec![key("shared/l2")]), None).await;
    assert!(changes(&page).values().all(|b| b == &vec!["shared/l2".to_owned()]));
    assert!(changes(&page).contains_key("notes:n3"));
    let request = PullRequest {
        client_id: CLIENT,
        cursor: None,
        buckets: Some(vec![key("shared/l3")]),
        limit: None,
        ..Default::default()
    };
    let err = storage.pull(&actor("alice"), &request).await.unwrap_err();
    assert_eq!(err.code(), engine::ErrorCode::Forbidden);
    let request = PullRequest { client_id: CLIENT, cursor: None, buckets: None, limit: Some(0), ..Default::default() };
    assert_eq!(storage.pull(&actor("alice"), &request).await.unwrap_err().code(), engine::ErrorCode::MalformedRequest);
}

#[tokio::test]
async fn a_transaction_running_in_another_database_does_not_hold_pulls_back() {
    if postgres_only("transactions of other databases of one Postgres server") {
        return;
    }
    let db = TestDb::new().await;
    let other = TestDb::new().await;
    let storage = db.notes().await;
    seed(&db, &storage).await;
    let start = pull(&storage, "alice", None).await;
    let mut elsewhere = other.pool.begin().await.unwrap();
    let xid: String = sqlx::query_scalar("SELECT pg_current_xact_id()::text").fetch_one(&mut *elsewhere).await.unwrap();
    assert!(xid.parse::<u64>().is_ok());
    exec(&db, &storage, "UPDATE notes SET title = 'while another database works' WHERE id = 'n1'").await;
    let page = pull(&storage, "alice", Some(&start.cursor)).await;
    assert_eq!(changes(&page).into_keys().collect::<Vec<_>>(), vec!["notes:n1"]);
    elsewhere.rollback().await.unwrap();
}

/// The payload of a cursor's text form, and its tag.
fn cursor_parts(cursor: &str) -> (Value, &str) {
    use base64::Engine as _;
    let (payload, tag) = cursor.split_once('.').expect("a cursor has a tag");
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).unwrap();
    (serde_json::from_slice(&json).unwrap(), tag)
}

fn with_payload(payload: &Value, tag: &str) -> String {
    use base64::Engine as _;
    format!("{}.{tag}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(payload.to_string()))
}

#[tokio::test]
async fn a_cursor_the_client_changed_or_another_user_sends_starts_afresh() {
    let db = TestDb::new().await;
    let storage = db.notes().await;
    seed(&db, &storage).await;
    let first = pull(&storage, "alice", None).await;
    exec(&db, &storage, "DELETE FROM notes WHERE id = 'n3'; UPDATE notes SET title = 'later' WHERE id = 'n1'").await;
    assert!(!pull(&storage, "alice", Some(&first.cursor)).await.reset, "the cursor as written goes on");

    // Positions moved back, to receive tombstones again; or forward, to skip rows.
    let (payload, tag) = cursor_parts(&first.cursor);
    let mut back = payload.clone();
    back["g"][0]["t"]["x"] = Value::from(1);
    back["g"][0]["r"] = Value::from(1);
    let mut ahead = payload.clone();
    ahead["g"][0]["r"] = Value::from(u64::MAX);
    // A bucket added to a group at the cursor's position: its old tombstones would follow.
    let mut added = payload.clone();
    added["g"][0]["b"].as_array_mut().unwrap().push(Value::from("shared/l3"));
    for forged in [back, ahead, added] {
        let page = pull(&storage, "alice", Some(&with_payload(&forged, tag))).await;
        assert!(page.reset, "a changed cursor starts afresh: {forged}");
        assert!(page.tombstones.is_empty(), "and sends no tombstone of before");
        assert!(changes(&page).contains_key("notes:n1"));
    }
    // The same cursor, sent by bob (who holds shared/l2 too).
    let page = pull(&storage, "bob", Some(&first.cursor)).await;
    assert!(page.reset, "a cursor is its user's");
    assert!(page.tombstones.is_empty());
    // Shapes and values a cursor never has, signed or not.
    for crafted in [
        with_payload(
            &serde_json::json!({"v": 3, "g": [{"b": ["own/alice"], "r": 1, "t": {"x": 0, "i": 0}, "w": {"o": 9, "p": {"b": "own/alice", "x": 1, "k": ["\u{0}"]}}}]}),
            tag,
        ),
        with_payload(&serde_json::json!({"v": 3, "g": [{"b": "own/alice", "r": [], "t": null}]}), tag),
        with_payload(&serde_json::json!([1, 2, 3]), tag),
        format!("{}.", first.cursor.split_once('.').unwrap().0),
        format!("{}.{}", first.cursor, tag),
        "\u{0}.\u{0}".to_owned(),
    ] {
        let page = pull(&storage, "alice", Some(&crafted)).await;
        assert!(page.reset, "{crafted:?} resets");
    }
}

#[tokio::test]
async fn a_cursor_stays_small_however_many_buckets_and_every_instance_reads_it() {
    let db = TestDb::new().await;
    let storage = db.notes().await;
    // 300 lists with long ids shared with alice, a note in each.
    let long = "x".repeat(200);
    let mut sql = String::new();
    for i in 0..300 {
        let list = format!("{long}-{i:03}");
        sql.push_str(&format!(
            "INSERT INTO lists (id, owner_id, title, archived) VALUES ('{list}', 'bob', 't', false);
             INSERT INTO list_members (list_id, user_id, owner_id, role, accepted, invited_by, title) VALUES ('{list}', 'alice', 'bob', 'editor', true, 'x', 't');
             INSERT INTO notes (id, owner_id, list_id, title, done, position) VALUES ('n{i}', 'bob', '{list}', 't', false, {i});"
        ));
    }
    exec(&db, &storage, &sql).await;
    let pages = pull_all(&storage, "alice", None, 100).await;
    let rows: usize = pages.iter().map(|p| p.changes.len()).sum();
    assert_eq!(rows, 900, "every list, membership and note, once");
    for page in &pages {
        assert!(page.cursor.len() <= 8 * 1024, "a cursor of {} bytes", page.cursor.len());
    }
    let last = pages.last().unwrap().cursor.clone();
    let (payload, _) = cursor_parts(&last);
    assert!(payload["g"][0]["s"].is_string(), "300 buckets are named by their stored set: {payload}");

    // Another instance on the same database (on SQLite, the next server process on the file):
    // it knows the key and finds the set.
    exec(&db, &storage, "UPDATE notes SET title = 'changed' WHERE id = 'n7'").await;
    drop(storage);
    let other = db.notes().await;
    db.settle(&*other).await;
    let page = pull(&other, "alice", Some(&last)).await;
    assert!(!page.reset, "another instance opens the cursor");
    assert_eq!(changes(&page).into_keys().collect::<Vec<_>>(), vec!["notes:n7"]);

    // A set collected (its cursor unused past the retention) makes the old cursor start afresh.
    exec(&db, &other, &format!("UPDATE _engine_bucket_sets SET used_at = {}", ago("30 days"))).await;
    other.collect_garbage(&engine::server::Retention::default()).await.unwrap();
    drop(other);
    let fresh = db.notes().await;
    db.settle(&*fresh).await;
    let page = pull(&fresh, "alice", Some(&last)).await;
    assert!(page.reset, "a cursor naming a collected set starts afresh");
}

#[tokio::test]
async fn a_page_ends_early_when_its_rows_fill_the_byte_budget() {
    let db = TestDb::new().await;
    let storage = db.notes().await;
    let big = "x".repeat(2_000);
    exec(
        &db,
        &storage,
        &format!(
            "INSERT INTO lists (id, owner_id, title, archived) VALUES ('l1', 'alice', 'l', false);
             INSERT INTO list_members (list_id, user_id, owner_id, role, accepted, invited_by, title) VALUES ('l1', 'alice', 'alice', 'owner', true, 'x', 't');
             INSERT INTO notes (id, owner_id, list_id, title, done, position) VALUES {}",
            (1..=60).map(|i| format!("('n{i:03}', 'alice', 'l1', '{big}', false, {i})")).collect::<Vec<_>>().join(", ")
        ),
    )
    .await;
    drop(storage);
    let small = db.open_with(example_notes::app(), StoreLimits::default().page_bytes(10_000)).await;
    db.settle(&*small).await;
    let pages = pull_all(&small, "alice", None, 1_000).await;
    let mut seen = BTreeSet::new();
    let notes = |page: &engine::wire::PullResponse| page.changes.iter().filter(|c| c.table == "notes").count();
    for page in &pages[..pages.len() - 1] {
        assert!(page.has_more);
        assert!((1..=5).contains(&notes(page)), "a page of {} notes of 2 kB", notes(page));
    }
    for page in &pages {
        for change in page.changes.iter().filter(|c| c.table == "notes") {
            assert!(seen.insert(change.row["id"].to_string()), "{} twice", change.row["id"]);
        }
    }
    assert_eq!(seen.len(), 60, "every note, once, in {} pages", pages.len());
    // A row larger than the budget still goes, alone.
    drop(small);
    let tiny = db.open_with(example_notes::app(), StoreLimits::default().page_bytes(10)).await;
    db.settle(&*tiny).await;
    let page = pull_with(&tiny, "alice", None, None, Some(1_000)).await;
    assert_eq!(page.changes.len(), 1);
    assert!(page.has_more);
}

#[tokio::test]
async fn a_subset_pull_leaves_the_buckets_it_did_not_ask_for_where_they_were() {
    let db = TestDb::new().await;
    let storage = db.notes().await;
    seed(&db, &storage).await;
    let all = pull(&storage, "alice", None).await;
    // n1 is alice's, in l1; n2 is bob's, in l2.
    exec(&db, &storage, "UPDATE notes SET title = 'changed' WHERE id IN ('n1', 'n2')").await;

    let subset = pull_with(&storage, "alice", Some(&all.cursor), Some(vec![key("shared/l2")]), None).await;
    assert!(subset.removed_buckets.is_empty(), "held buckets are not removed: {:?}", subset.removed_buckets);
    assert_eq!(changes(&subset).into_keys().collect::<Vec<_>>(), vec!["notes:n2"]);

    let rest = pull(&storage, "alice", Some(&subset.cursor)).await;
    assert!(!rest.reset && rest.removed_buckets.is_empty());
    assert_eq!(
        changes(&rest),
        BTreeMap::from([("notes:n1".to_owned(), vec!["shared/l1".to_owned()])]),
        "the buckets the subset left alone go on from where they were; l2's change is not sent again"
    );

    // A bucket the actor lost is still reported, subset or not.
    exec(&db, &storage, "DELETE FROM list_members WHERE list_id = 'l2' AND user_id = 'alice'").await;
    let after = pull_with(&storage, "alice", Some(&rest.cursor), Some(vec![key("shared/l1")]), None).await;
    assert_eq!(after.removed_buckets, vec![key("shared/l2")]);
}

/// The notes app's tables under rules of two versions: `own` selects every note of its owner
/// (v1), then only those not done (v2); `shared` is the same in both.
mod rule_change {
    use example_notes::{List, ListMember, Note};

    macro_rules! rules {
        ($module:ident, $($own_notes:tt)+) => {
            #[engine::sync_rules]
            pub(crate) mod $module {
                use super::{List, ListMember, Note};

                /// What the actor owns.
                #[bucket(name = "own", data(List::owner_id == bucket.owner_id, $($own_notes)+, ListMember::owner_id == bucket.owner_id), write(List, Note, ListMember))]
                #[derive(Debug)]
                pub(crate) struct Own {
                    #[param(actor.owner_id)]
                    pub(crate) owner_id: String,
                }

                /// The lists the actor is a member of.
                #[bucket(name = "shared", membership(ListMember::user_id == actor.user_id), data(List::id == bucket.list_id, Note::list_id == bucket.list_id, ListMember::list_id == bucket.list_id), write(List, Note, ListMember))]
                #[derive(Debug)]
                pub(crate) struct Shared {
                    #[param(ListMember::list_id)]
                    pub(crate) list_id: String,
                }
            }
        };
    }
    rules!(v1_rules, Note::owner_id == bucket.owner_id);
    rules!(v2_rules, Note::owner_id == bucket.owner_id && Note::done == false);

    pub(crate) fn v1() -> engine::App {
        engine::app! { tables: [List, ListMember, Note], mutators: [], sync_rules: v1_rules }
    }

    pub(crate) fn v2() -> engine::App {
        engine::app! { tables: [List, ListMember, Note], mutators: [], sync_rules: v2_rules }
    }
}

/// What a client holds after applying `pages` to `replica`: each row's buckets.
fn apply(replica: &mut BTreeMap<String, BTreeSet<String>>, pages: &[PullResponse]) {
    for page in pages {
        if page.reset {
            replica.clear();
        }
        for bucket in &page.removed_buckets {
            replica.values_mut().for_each(|buckets| {
                buckets.remove(bucket.as_str());
            });
        }
        for (id, buckets) in changes(page) {
            replica.insert(id, buckets.into_iter().collect());
        }
        for (id, buckets) in tombstones(page) {
            if let Some(held) = replica.get_mut(&id) {
                buckets.iter().for_each(|b| {
                    held.remove(b);
                });
            }
        }
        replica.retain(|_, buckets| !buckets.is_empty());
    }
}

#[tokio::test]
async fn a_changed_rule_resyncs_its_buckets_and_leaves_the_others() {
    let db = TestDb::new().await;
    let v1 = db.open(rule_change::v1()).await;
    exec(
        &db,
        &v1,
        "INSERT INTO lists (id, owner_id, title, archived) VALUES ('l1', 'alice', 'alice list', false), ('l2', 'bob', 'bob list', false);
         INSERT INTO list_members (list_id, user_id, owner_id, role, accepted, invited_by, title) VALUES ('l2', 'bob', 'bob', 'owner', true, 'x', 't'), ('l2', 'alice', 'bob', 'editor', true, 'x', 't');
         INSERT INTO notes (id, owner_id, list_id, title, done, position) VALUES
           ('n1', 'alice', 'l1', 'open', false, 1), ('n2', 'alice', 'l1', 'done', true, 2),
           ('n3', 'bob', 'l2', 'bob''s', false, 3), ('n4', 'alice', 'l2', 'done in l2', true, 4);",
    )
    .await;
    let mut replica = BTreeMap::new();
    let before = pull_all(&v1, "alice", None, 1_000).await;
    apply(&mut replica, &before);
    assert!(replica.contains_key("notes:n2"), "v1 syncs alice's done notes");

    // The next version of the server, on the same database.
    drop(v1);
    let v2 = db.open(rule_change::v2()).await;
    db.settle(&*v2).await;
    let first = pull(&v2, "alice", Some(&before.last().unwrap().cursor)).await;
    assert_eq!(first.removed_buckets, vec![key("own/alice")], "the changed rule's bucket is resynced");
    assert!(first.has_more && first.changes.is_empty(), "and nothing of shared/l2 is sent again");
    let mut after = vec![first.clone()];
    after.extend(pull_all(&v2, "alice", Some(&first.cursor), 1_000).await);
    apply(&mut replica, &after);
    let sent_again: BTreeSet<String> = after.iter().flat_map(|p| changes(p).into_keys()).collect();
    assert!(
        sent_again.iter().all(|id| !id.contains("n3")),
        "rows only shared/l2 holds are not sent again: {sent_again:?}"
    );

    let mut fresh = BTreeMap::new();
    apply(&mut fresh, &pull_all(&v2, "alice", None, 1_000).await);
    assert_eq!(replica, fresh, "the replica equals a fresh one");
    assert!(!replica.contains_key("notes:n2"), "a done note alice's own bucket no longer selects is gone");
    assert_eq!(replica["notes:n4"], BTreeSet::from(["shared/l2".to_owned()]));
}
