//! What one account does stays its own, over real HTTP and WebSockets: the bucket sets its
//! pulls store are bounded and spare every other account's, an old cursor tells nothing of a
//! time it did not hold a bucket, and what it writes or announces reaches others' devices only
//! within bounds.

use std::time::Duration;

use engine::limits::StreamLimits;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::actors::{applied, count, device, push};
use crate::support::client::eventually;
use crate::support::notes::accept;
use crate::support::ws::{Auth, Ws};
use crate::support::{Backend, TestDb, TestServer, backend, postgres_only};

/// A server of the notes app whose store has `limits`.
async fn server_with(db: &TestDb, limits: engine::server::storage::StoreLimits) -> TestServer {
    let store = db.store(limits);
    TestServer::start(db, move |b| b.storage(store)).await
}

/// A pull of `user` from `cursor`, of `buckets` when given: the page.
async fn pull(server: &TestServer, user: &str, cursor: Option<&str>, buckets: Option<&[String]>) -> Value {
    let mut body = json!({"clientId": device(user).1});
    if let Some(cursor) = cursor {
        body["cursor"] = cursor.into();
    }
    if let Some(buckets) = buckets {
        body["buckets"] = json!(buckets);
    }
    let response = server.post("/sync/pull", Some(user), body.to_string()).await;
    assert_eq!(response.status(), StatusCode::OK);
    response.json().await.unwrap()
}

/// Every page of `user`'s pull from scratch: the last cursor.
async fn pull_all(server: &TestServer, user: &str) -> String {
    let mut cursor: Option<String> = None;
    loop {
        let page = pull(server, user, cursor.as_deref(), None).await;
        cursor = page["cursor"].as_str().map(str::to_owned);
        if page["hasMore"] != true {
            return cursor.unwrap();
        }
    }
}

/// `lists` lists of bob's with ids long enough that a cursor names their buckets by a stored
/// set, each shared with alice: their ids.
async fn shared_lists(db: &TestDb, lists: usize) -> Vec<String> {
    let ids: Vec<String> = (0..lists).map(|i| format!("a-list-with-a-long-enough-id-{i:03}")).collect();
    let mut sql = String::new();
    for id in &ids {
        sql.push_str(&format!(
            "INSERT INTO lists (id, owner_id, title, archived) VALUES ('{id}', 'bob', 't', false);
             INSERT INTO list_members (list_id, user_id, owner_id, role, accepted, invited_by, title) VALUES ('{id}', 'bob', 'bob', 'owner', true, 'x', 't');
             INSERT INTO list_members (list_id, user_id, owner_id, role, accepted, invited_by, title) VALUES ('{id}', 'alice', 'bob', 'editor', true, 'x', 't');"
        ));
    }
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&db.pool).await.unwrap();
    ids
}

/// A write of carol's, which moves the horizon on, and every commit so far visible to pulls.
async fn move_on(server: &TestServer, id: u64) {
    applied(&push(server, "carol", id, "create_list", json!({"title": "t"})).await);
    server.settle().await;
}

#[tokio::test]
async fn replaying_a_cursor_with_other_subsets_stores_no_bucket_set() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let lists = shared_lists(&db, 40).await;
    let cursor = pull_all(&server, "alice").await;
    let stored = count(&db, "SELECT count(*) FROM _engine_bucket_sets").await;
    assert_eq!(stored, 1, "40 buckets are one stored set");

    // The same cursor, each time with another one-bucket subset, while the horizon moves on:
    // the parked rest names the stored set less one bucket.
    for (i, list) in lists.iter().enumerate().take(20) {
        move_on(&server, i as u64 + 1).await;
        let page = pull(&server, "alice", Some(&cursor), Some(&[format!("shared/{list}")])).await;
        assert_eq!(page["reset"], false);
    }
    let stored = count(&db, "SELECT count(*) FROM _engine_bucket_sets").await;
    assert_eq!(stored, 1, "no set is stored for a parked group");
}

#[tokio::test]
async fn an_accounts_stored_bucket_sets_are_bounded_and_spare_everyone_elses() {
    let db = TestDb::new().await;
    let limits = engine::server::storage::StoreLimits::default().bucket_set_bytes(8 * 1024);
    let server = server_with(&db, limits).await;
    let lists = shared_lists(&db, 60).await;
    // Bob holds the same 60 lists (and his own bucket): his cursor names a set of his.
    let bob = pull_all(&server, "bob").await;
    let cursor = pull_all(&server, "alice").await;
    // The keys of the sets that name `user`'s own bucket (a set is the array of its keys).
    let keys = |user: &str| match backend() {
        Backend::Postgres => format!(
            "SELECT coalesce(sum(cardinality(buckets)), 0)::bigint FROM _engine_bucket_sets WHERE buckets @> ARRAY['own/{user}']"
        ),
        Backend::Sqlite => format!(
            "SELECT coalesce(sum(json_array_length(buckets)), 0) FROM _engine_bucket_sets
             WHERE EXISTS (SELECT 1 FROM json_each(buckets) WHERE value = 'own/{user}')"
        ),
    };
    let bobs = count(&db, &keys("bob")).await;
    assert!(bobs > 0, "bob's cursor names a stored set");

    // Alice walks one bucket at a time, each pull from the last one's cursor: the group left
    // behind loses a bucket each time, and past what a cursor writes out is a new set.
    let mut cursor = cursor;
    for (i, list) in lists.iter().enumerate() {
        move_on(&server, i as u64 + 1).await;
        let page = pull(&server, "alice", Some(&cursor), Some(&[format!("shared/{list}")])).await;
        cursor = page["cursor"].as_str().unwrap().to_owned();
    }
    // Her sets hold at most the bound's worth of keys (about 37 bytes each), and the ones her
    // last cursor names.
    let alices = count(&db, &keys("alice")).await;
    assert!(alices <= 2 * 8 * 1024 / 37, "alice's sets hold {alices} keys");
    let page = pull(&server, "alice", Some(&cursor), None).await;
    assert_eq!(page["reset"], false, "her last cursor still opens");
    // Bob's set is his own: whatever alice stored, it is there and his cursor opens.
    assert_eq!(count(&db, &keys("bob")).await, bobs);
    let page = pull(&server, "bob", Some(&bob), None).await;
    assert_eq!(page["reset"], false, "bob's cursor still opens");
}

/// Rows of `list_members` read so far (by scans of the table or of its indexes) and rows of
/// `lists` inserted (rolled back or not), as Postgres' statistics tell: a session sends its
/// counts after its transaction ends, those of one transaction together.
async fn rows_read_and_lists_inserted(db: &TestDb) -> (i64, i64) {
    sqlx::query_as(
        "SELECT (SELECT coalesce(seq_tup_read, 0) FROM pg_stat_user_tables WHERE relname = 'list_members')
              + (SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes WHERE relname = 'list_members')::bigint,
                (SELECT n_tup_ins FROM pg_stat_user_tables WHERE relname = 'lists')",
    )
    .fetch_one(db.pg())
    .await
    .unwrap()
}

/// A membership write reads the holdings it can change, not all the actor's: a list created by
/// an account that holds 2,000 lists reads none of their memberships. Every such write read all
/// of them before, and 100 `create_list` of a large account took a hundred times as long.
#[tokio::test]
async fn a_membership_write_reads_only_the_holdings_it_can_change() {
    if postgres_only("the rows a mutation reads are counted by Postgres' statistics") {
        return;
    }
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    shared_lists(&db, 2000).await;
    let settled = |lists: i64| {
        let db = &db;
        move || async move { rows_read_and_lists_inserted(db).await.1 >= lists }
    };
    eventually(Duration::from_secs(30), "the statistics count the 2,000 lists", settled(2000)).await;
    let (before, _) = rows_read_and_lists_inserted(&db).await;

    applied(&push(&server, "alice", 1, "create_list", json!({"title": "one more"})).await);
    eventually(Duration::from_secs(30), "the statistics count the new list", settled(2001)).await;
    let (after, _) = rows_read_and_lists_inserted(&db).await;
    assert!(after - before < 100, "creating a list read {} membership rows", after - before);
}

/// The pages of `user`'s pull from `cursor` until `hasMore` is false: every tombstone's key and
/// every change's row id, the buckets removed, and the last cursor.
async fn pull_on(server: &TestServer, user: &str, cursor: &str) -> (Vec<Value>, Vec<Value>, Vec<Value>, String) {
    let (mut tombstones, mut rows, mut removed) = (Vec::new(), Vec::new(), Vec::new());
    let mut cursor = cursor.to_owned();
    loop {
        let page = pull(server, user, Some(&cursor), None).await;
        assert_eq!(page["reset"], false);
        tombstones.extend(page["tombstones"].as_array().unwrap().iter().map(|t| t["key"]["id"].clone()));
        rows.extend(page["changes"].as_array().unwrap().iter().map(|c| c["row"]["id"].clone()));
        removed.extend(page["removedBuckets"].as_array().unwrap().iter().cloned());
        cursor = page["cursor"].as_str().unwrap().to_owned();
        if page["hasMore"] != true {
            return (tombstones, rows, removed, cursor);
        }
    }
}

#[tokio::test]
async fn an_old_cursor_of_a_bucket_granted_again_tells_nothing_deleted_meanwhile() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    applied(&push(&server, "bob", 1, "create_list", json!({"title": "trip"})).await);
    let list: String =
        sqlx::query_scalar("SELECT id FROM lists WHERE title = 'trip'").fetch_one(&db.pool).await.unwrap();
    let share = json!({"list_id": list, "user_id": "alice", "role": "editor"});
    applied(&push(&server, "bob", 2, "share_list", share.clone()).await);
    accept(&server.url(""), "alice", &list).await;
    applied(&push(&server, "bob", 3, "add_note", json!({"list_id": list, "title": "seen"})).await);
    server.settle().await;
    let old = pull_all(&server, "alice").await;

    // Alice is out of the list while bob writes a note and deletes it, then shared it again.
    applied(&push(&server, "bob", 4, "unshare_list", json!({"list_id": list, "user_id": "alice"})).await);
    applied(&push(&server, "bob", 5, "add_note", json!({"list_id": list, "title": "secret"})).await);
    let secret: String =
        sqlx::query_scalar("SELECT id FROM notes WHERE title = 'secret'").fetch_one(&db.pool).await.unwrap();
    applied(&push(&server, "bob", 6, "delete_note", json!({"id": secret})).await);
    applied(&push(&server, "bob", 7, "share_list", share).await);
    accept(&server.url(""), "alice", &list).await;
    server.settle().await;

    // Her cursor from before she was out: the list starts afresh, and no tombstone names the
    // note she never could read.
    let (tombstones, rows, removed, _) = pull_on(&server, "alice", &old).await;
    assert!(!tombstones.contains(&Value::from(secret.clone())), "the deleted note's key: {tombstones:?}");
    assert_eq!(removed, vec![Value::from(format!("shared/{list}"))], "the list is resynced");
    let seen: String =
        sqlx::query_scalar("SELECT id FROM notes WHERE title = 'seen'").fetch_one(&db.pool).await.unwrap();
    assert!(rows.contains(&Value::from(seen)), "and sent again from its start: {rows:?}");
}

#[tokio::test]
async fn the_notes_app_bounds_what_one_member_puts_into_every_members_sync() {
    let db = TestDb::new().await;
    let server = server_with(&db, example_notes::store_limits()).await;
    applied(&push(&server, "bob", 1, "create_list", json!({"title": "trip"})).await);
    let list: String =
        sqlx::query_scalar("SELECT id FROM lists WHERE title = 'trip'").fetch_one(&db.pool).await.unwrap();
    applied(
        &push(&server, "bob", 2, "share_list", json!({"list_id": list, "user_id": "alice", "role": "editor"})).await,
    );
    accept(&server.url(""), "alice", &list).await;
    applied(&push(&server, "bob", 3, "add_note", json!({"list_id": list, "title": "a note"})).await);

    // A title of 100 kB, in a new note and in one that exists, and a list's title of 10 kB.
    let long = "x".repeat(100_000);
    let refused = [
        push(&server, "bob", 4, "add_note", json!({"list_id": list, "title": long})).await,
        push(&server, "bob", 5, "create_list", json!({"title": "y".repeat(10_000)})).await,
    ];
    for result in refused {
        assert_eq!(result["status"], "rejected", "{result}");
        assert_eq!(result["error"]["code"], "validation_failed", "{result}");
        assert!(result["error"]["detail"].as_str().unwrap().contains("at most"), "names the bound: {result}");
    }
    let note: String = sqlx::query_scalar("SELECT id FROM notes").fetch_one(&db.pool).await.unwrap();
    let update = push(&server, "bob", 6, "update_note", json!({"id": note, "title": long})).await;
    assert_eq!(update["error"]["code"], "validation_failed", "{update}");
    // What alice's first sync carries stays small.
    server.settle().await;
    let page = pull(&server, "alice", None, None).await;
    assert!(page.to_string().len() < 8 * 1024, "a first sync of {} bytes", page.to_string().len());
}

/// The metas of every `presence_state` a new socket of `user` gets on connecting.
async fn presence_on_connect(server: &TestServer, user: &str) -> usize {
    let token = TestServer::token(user);
    let mut socket = Ws::connect(server.addr, Auth::Header(&token)).await.unwrap();
    let frames = socket.drain(Duration::from_millis(500)).await;
    frames
        .iter()
        .filter(|f| f["type"] == "presence_state")
        .flat_map(|f| f["state"].as_object().unwrap().values())
        .map(|metas| metas.as_array().unwrap().len())
        .sum()
}

#[tokio::test]
async fn presence_is_bounded_per_actor_and_per_bucket() {
    let db = TestDb::new().await;
    let mut limits = StreamLimits::default();
    limits.presences_per_actor = 4;
    limits.presences_per_bucket = 3;
    let server = TestServer::start(&db, |b| b.stream_limits(limits)).await;
    // Mallory's lists, shared with alice and with mallory's other accounts.
    let mut sql = String::new();
    for i in 0..6 {
        sql.push_str(&format!(
            "INSERT INTO lists (id, owner_id, title, archived) VALUES ('m{i}', 'mallory', 't', false);"
        ));
        for user in ["mallory", "alice", "m1", "m2", "m3"] {
            sql.push_str(&format!("INSERT INTO list_members (list_id, user_id, owner_id, role, accepted, invited_by, title) VALUES ('m{i}', '{user}', 'mallory', 'editor', true, 'x', 't');"));
        }
    }
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&db.pool).await.unwrap();
    let meta = json!({"padding": "x".repeat(900)});

    // One account present in every list it holds: past its bound, its socket closes.
    let token = TestServer::token("mallory");
    let mut mallory = Ws::connect(server.addr, Auth::Header(&token)).await.unwrap();
    mallory.drain(Duration::from_millis(300)).await;
    for i in 0..5 {
        mallory.send(json!({"type": "track", "bucket": format!("shared/m{i}"), "meta": meta})).await;
    }
    let (code, close) = mallory.closed(Duration::from_secs(2)).await;
    assert_eq!((code.as_deref(), close), (Some("too_many_presences"), Some(1008)));

    // Other accounts fill one list: a presence past its bound is not announced, and the socket
    // that asked stays open (alice's own included).
    let mut others = Vec::new();
    for user in ["m1", "m2", "m3", "alice"] {
        let token = TestServer::token(user);
        let mut socket = Ws::connect(server.addr, Auth::Header(&token)).await.unwrap();
        socket.drain(Duration::from_millis(200)).await;
        socket.send(json!({"type": "track", "bucket": "shared/m5", "meta": meta})).await;
        others.push(socket);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let present = presence_on_connect(&server, "alice").await;
    assert!(present <= 3, "alice's new socket is told of {present} presences");
    let alice = others.last_mut().unwrap();
    alice.send(json!({"type": "heartbeat"})).await;
    alice.drain(Duration::from_millis(200)).await;
    alice.send(json!({"type": "untrack", "bucket": "shared/m5"})).await;
    let (code, _) = alice.closed(Duration::from_millis(300)).await;
    assert_eq!(code, None, "alice's socket stays open");
}
