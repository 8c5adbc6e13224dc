//! Hostile input over real HTTP: whatever a client sends, a deterministic failure is answered
//! `rejected`, recorded and replayed the same, and the mutations after it go on (the outbox is
//! never stuck behind one mutation).

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{Logs, TestDb, TestServer};

const CLIENT: &str = "0192f0e0-0000-7000-8000-0000000000aa";

fn mutation(id: u64, name: &str, args: Value) -> Value {
    json!({
        "mutationId": id,
        "clientMutationId": format!("0192f0e0-0000-7000-8000-{id:012x}"),
        "name": name,
        "args": args,
    })
}

/// Push `mutations` as alice; the response's results.
async fn push(server: &TestServer, mutations: &[Value]) -> Vec<Value> {
    push_as(server, "alice", CLIENT, mutations).await
}

/// Push `mutations` as `user` from client `client`; the response's results.
async fn push_as(server: &TestServer, user: &str, client: &str, mutations: &[Value]) -> Vec<Value> {
    let body = json!({"clientId": client, "mutations": mutations});
    let response = server.post("/sync/push", Some(user), body.to_string()).await;
    assert_eq!(response.status(), StatusCode::OK, "a push of hostile values is answered");
    let body: Value = response.json().await.unwrap();
    body["results"].as_array().unwrap().clone()
}

/// A first pull of `user`'s buckets from client `client`: the response.
async fn pull_as(server: &TestServer, user: &str, client: &str) -> Value {
    let response = server.post("/sync/pull", Some(user), json!({"clientId": client}).to_string()).await;
    assert_eq!(response.status(), StatusCode::OK);
    response.json().await.unwrap()
}

/// The `serverHlc` of a pull response.
fn server_hlc(pulled: &Value) -> engine::hlc::Hlc {
    pulled["serverHlc"].as_str().expect("a pull carries `serverHlc`").parse().unwrap()
}

/// The first mutation is rejected with `code`, the second applied; pushed again, both are
/// answered as before (the rejection word for word).
/// Push `hostile` and a mutation after it: the first is rejected with `code`, the next applies,
/// and the pair sent again is answered the same. The rejection's detail.
async fn rejected_then_next_applies(server: &TestServer, hostile: Value, code: &str) -> String {
    let next = mutation(hostile["mutationId"].as_u64().unwrap() + 1, "create_list", json!({"title": "after"}));
    let first = push(server, &[hostile.clone(), next.clone()]).await;
    let shown = Value::Array(first.clone()).to_string().chars().take(500).collect::<String>();
    assert_eq!(first.len(), 2, "{shown}");
    assert_eq!(first[0]["status"], "rejected", "{shown}");
    assert_eq!(first[0]["error"]["code"], code, "{shown}");
    assert!(!first[0]["error"]["detail"].as_str().unwrap().contains('\0'), "{shown}");
    assert_eq!(first[1]["status"], "applied", "{shown}");
    let again = push(server, &[hostile, next]).await;
    assert_eq!(again[0], first[0], "a rejection is replayed the same");
    assert_eq!(again[1]["status"], "duplicate");
    first[0]["error"]["detail"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_nul_byte_in_an_argument_is_rejected_and_recorded() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let results = push(&server, &[mutation(1, "create_list", json!({"id": "groceries", "title": "G"}))]).await;
    assert_eq!(results[0]["status"], "applied");

    // An enum argument that is not a role: the argument error echoes the value.
    let role = mutation(2, "share_list", json!({"list_id": "groceries", "user_id": "bob", "role": "a\u{0}b"}));
    rejected_then_next_applies(&server, role, "validation_failed").await;
    // A NUL inside a text column.
    let title = mutation(4, "create_list", json!({"id": "nul", "title": "a\u{0}b"}));
    let in_title = rejected_then_next_applies(&server, title, "validation_failed").await;
    assert_eq!(in_title, "validation failed: column `lists.title` holds a NUL character, which no stored text may");
    // A NUL in a key: `create_list` first looks the id up, which finds no row on either store
    // (none holds a NUL), and the insert is refused in the same words as the title.
    let key = mutation(6, "create_list", json!({"id": "a\u{0}b", "title": "t"}));
    let in_key = rejected_then_next_applies(&server, key, "validation_failed").await;
    assert_eq!(in_key, "validation failed: column `lists.id` holds a NUL character, which no stored text may");
    // Looked up by a mutator that changes a row: not found, on either store.
    let rename = mutation(8, "rename_list", json!({"id": "a\u{0}b", "title": "t"}));
    let missing = rejected_then_next_applies(&server, rename, "mutator_failed").await;
    assert_eq!(missing, "no list `a\\u0000b`", "no list holds a NUL in its id");
    // A NUL written into a row by an update: refused in the same words as an insert's.
    let renamed = mutation(10, "rename_list", json!({"id": "groceries", "title": "a\u{0}b"}));
    let in_update = rejected_then_next_applies(&server, renamed, "validation_failed").await;
    assert_eq!(in_update, in_title);
}

#[tokio::test]
async fn a_mutator_name_with_a_control_character_is_rejected_and_recorded() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    // A NUL (which Postgres refuses in text), a newline, and a name past the bound.
    let names = ["create\u{0}list".to_owned(), "create_list\nforged".to_owned(), "m".repeat(129)];
    for (i, name) in names.iter().enumerate() {
        let id = 1 + 2 * i as u64;
        let hostile = mutation(id, name, json!({"title": "t"}));
        rejected_then_next_applies(&server, hostile, "validation_failed").await;
    }
    let recorded: Vec<String> =
        sqlx::query_scalar("SELECT name FROM _engine_mutations WHERE status = 'rejected' ORDER BY mutation_id")
            .fetch_all(&db.pool)
            .await
            .unwrap();
    assert_eq!(recorded, ["create\\u{0}list".to_owned(), "create_list\\u{a}forged".to_owned(), "m".repeat(128)]);
}

#[tokio::test]
async fn a_key_too_long_for_the_index_is_rejected_and_recorded() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    // Past the btree's limit on an index row (about 2.7 kB once compressed), whatever the
    // engine's own bounds: letters that do not repeat in a pattern, so they do not compress.
    let mut state = 0x2545_f491_u32;
    let id: String = (0..8000)
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            char::from(b'a' + (state >> 24) as u8 % 26)
        })
        .collect();
    let long = mutation(1, "create_list", json!({"id": id, "title": "long"}));
    rejected_then_next_applies(&server, long, "validation_failed").await;
}

#[tokio::test]
async fn an_endless_detail_is_cut_before_it_is_stored() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    // An unknown role of 100,000 characters, echoed by the argument error.
    let role: String = "x".repeat(100_000);
    let hostile = mutation(1, "share_list", json!({"list_id": "l", "user_id": "bob", "role": role}));
    rejected_then_next_applies(&server, hostile.clone(), "validation_failed").await;
    let results = push(&server, &[hostile]).await;
    let detail = results[0]["error"]["detail"].as_str().unwrap();
    assert!(detail.len() <= engine::wire::Problem::MAX_DETAIL, "{}", detail.len());
}

/// A server of the notes app whose store has `limits`.
async fn server_with(db: &TestDb, limits: engine::server::storage::StoreLimits) -> TestServer {
    let store = db.store(limits);
    TestServer::start(db, move |b| b.storage(store)).await
}

#[tokio::test]
async fn a_push_of_too_many_mutations_is_refused_whole() {
    let db = TestDb::new().await;
    let limits = engine::server::storage::StoreLimits::default().mutations_per_push(3);
    let server = server_with(&db, limits).await;
    let four: Vec<Value> = (1..=4).map(|i| mutation(i, "create_list", json!({"title": "t"}))).collect();
    let body = json!({"clientId": CLIENT, "mutations": four});
    let response = server.post("/sync/push", Some("alice"), body.to_string()).await;
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let problem: Value = response.json().await.unwrap();
    assert_eq!(problem["code"], "too_many_mutations");
    assert!(problem["detail"].as_str().unwrap().contains('3'), "{problem}");
    // Nothing was applied: the first three go through in a push of their own.
    let results = push(&server, &four[..3]).await;
    assert!(results.iter().all(|r| r["status"] == "applied"), "{results:?}");
}

#[tokio::test]
async fn keys_parameters_rows_and_arguments_past_their_bounds_are_rejected_by_name() {
    let db = TestDb::new().await;
    let limits = engine::server::storage::StoreLimits::default().row_bytes(4_000);
    let server = server_with(&db, limits).await;
    let results = push(&server, &[mutation(1, "create_list", json!({"id": "groceries", "title": "G"}))]).await;
    assert_eq!(results[0]["status"], "applied");
    let long = "k".repeat(513);
    let cases = [
        (mutation(2, "create_list", json!({"id": long, "title": "t"})), "at most 512"),
        (mutation(4, "add_note", json!({"list_id": "groceries", "title": "t".repeat(5_000)})), "at most 4000"),
        (
            mutation(6, "create_list", json!({"title": "t", "extra": (0..100).fold(json!(0), |v, _| json!([v]))})),
            "at most 64",
        ),
    ];
    for (hostile, bound) in cases {
        let results = push(&server, std::slice::from_ref(&hostile)).await;
        assert_eq!(results[0]["status"], "rejected", "{hostile}");
        assert_eq!(results[0]["error"]["code"], "validation_failed");
        let detail = results[0]["error"]["detail"].as_str().unwrap();
        assert!(detail.contains(bound), "{detail}");
        let next = mutation(hostile["mutationId"].as_u64().unwrap() + 1, "create_list", json!({"title": "after"}));
        assert_eq!(push(&server, &[next]).await[0]["status"], "applied", "the outbox goes on");
    }
}

/// Alice's pull with `extra` fields, once every commit is visible: its answer's JSON.
async fn pull_with(server: &TestServer, extra: Value) -> (StatusCode, Value) {
    server.settle().await;
    let mut body = json!({"clientId": CLIENT});
    body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    let response = server.post("/sync/pull", Some("alice"), body.to_string()).await;
    (response.status(), response.json().await.unwrap())
}

/// The ids of the rows of `table` in a pull's answer.
fn ids(page: &Value, table: &str) -> Vec<String> {
    let changes = page["changes"].as_array().unwrap().iter().filter(|c| c["table"] == table);
    changes.map(|c| c["row"]["id"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn an_actor_past_the_bucket_bound_syncs_its_most_recent_buckets() {
    use crate::support::ws::{Auth, Ws};
    use std::time::Duration;
    let db = TestDb::new().await;
    let limits = engine::server::storage::StoreLimits::default().buckets_per_actor(5);
    let server = server_with(&db, limits).await;
    // Alice holds her own three buckets (`invitations`, `memberships`, `own`) and three lists'
    // (6); each list has a note.
    let mut mutations = Vec::new();
    for i in 1..=3_u64 {
        mutations.push(mutation(2 * i - 1, "create_list", json!({"id": format!("l{i}"), "title": "t"})));
        mutations.push(mutation(
            2 * i,
            "add_note",
            json!({"id": format!("n{i}"), "list_id": format!("l{i}"), "title": "n"}),
        ));
    }
    for mutation in mutations {
        assert_eq!(push(&server, &[mutation]).await[0]["status"], "applied");
    }

    // A full pull serves her own buckets and the two lists granted last, and says so.
    let (status, page) = pull_with(&server, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["bounded"], json!({"held": 6, "served": 5}), "{page}");
    let mut notes = ids(&page, "notes");
    notes.sort();
    assert_eq!(notes, ["n2", "n3"], "the most recently granted lists: {page}");

    // A pull of chosen buckets, at most the bound, is served them whatever else she holds.
    let (status, chosen) = pull_with(&server, json!({"buckets": ["shared/l1"]})).await;
    assert_eq!(status, StatusCode::OK, "{chosen}");
    assert_eq!(ids(&chosen, "notes"), ["n1"]);
    assert!(chosen.get("bounded").is_none(), "{chosen}");
    // More than the bound is still too many.
    let all = json!({"buckets": ["shared/l1", "shared/l2", "shared/l3", "shared/l4", "shared/l5", "shared/l6"]});
    let (status, problem) = pull_with(&server, all).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{problem}");
    assert!(problem["detail"].as_str().unwrap().contains("asks for 6 buckets"), "{problem}");

    // The stream follows the part served: it stays open and pings it.
    let token = TestServer::token("alice");
    let mut socket = Ws::connect(server.addr, Auth::Header(&token)).await.unwrap();
    while socket.expect("presence_state", Duration::from_secs(5)).await["bucket"] != "shared/l3" {}
    let note = mutation(7, "add_note", json!({"id": "n3b", "list_id": "l3", "title": "n"}));
    assert_eq!(push(&server, &[note]).await[0]["status"], "applied");
    while socket.expect("ping", Duration::from_secs(5)).await["bucket"] != "shared/l3" {}

    // A newer list moves the part served: the list that falls out of it is removed.
    let list = mutation(8, "create_list", json!({"id": "l4", "title": "t"}));
    assert_eq!(push(&server, &[list]).await[0]["status"], "applied");
    let mut cursor = page["cursor"].clone();
    let mut removed = Vec::new();
    loop {
        let (status, next) = pull_with(&server, json!({"cursor": cursor})).await;
        assert_eq!(status, StatusCode::OK, "{next}");
        assert_eq!(next["bounded"], json!({"held": 7, "served": 5}), "{next}");
        removed.extend(next["removedBuckets"].as_array().unwrap().iter().cloned());
        cursor = next["cursor"].clone();
        if next["hasMore"] != true {
            break;
        }
    }
    assert_eq!(removed, [json!("shared/l2")]);
}

/// What `user` syncs of its lists and notes from scratch, and whether its pull is bounded.
async fn lists_and_notes(server: &TestServer, user: &str) -> (Vec<String>, bool) {
    use crate::support::actors::{device, pulled};
    let mut ids: Vec<String> = pulled(server, user)
        .await
        .into_iter()
        .filter(|(table, _)| table == "lists" || table == "notes")
        .map(|(table, row)| format!("{table}:{}", row["id"].as_str().unwrap()))
        .collect();
    ids.sort();
    let response = server.post("/sync/pull", Some(user), json!({"clientId": device(user).1}).to_string()).await;
    let page: Value = response.json().await.unwrap();
    (ids, page.get("bounded").is_some())
}

#[tokio::test]
async fn a_flood_of_shares_from_strangers_changes_nothing_the_victim_syncs() {
    use crate::support::actors::{applied, forbidden, pulled, push};
    use example_notes::PENDING_INVITATIONS;
    let db = TestDb::new().await;
    // The notes app's limits, with room for the victim's own three buckets and two lists.
    let server = server_with(&db, example_notes::store_limits().buckets_per_actor(5)).await;
    applied(&push(&server, "victim", 1, "create_list", json!({"id": "mine", "title": "mine"})).await);
    applied(&push(&server, "victim", 2, "add_note", json!({"id": "n-mine", "list_id": "mine", "title": "n"})).await);
    applied(&push(&server, "friend", 1, "create_list", json!({"id": "theirs", "title": "theirs"})).await);
    applied(
        &push(&server, "friend", 2, "add_note", json!({"id": "n-theirs", "list_id": "theirs", "title": "n"})).await,
    );
    let share = json!({"list_id": "theirs", "user_id": "victim", "role": "editor"});
    applied(&push(&server, "friend", 3, "share_list", share).await);
    applied(&push(&server, "victim", 3, "accept_list", json!({"list_id": "theirs"})).await);
    let before = lists_and_notes(&server, "victim").await;
    assert_eq!(before.0, ["lists:mine", "lists:theirs", "notes:n-mine", "notes:n-theirs"]);
    assert!(!before.1, "within the bound");

    // Strangers share a list each with the victim, as many as it may have pending.
    for i in 0..=PENDING_INVITATIONS {
        let stranger = format!("stranger{i}");
        applied(&push(&server, &stranger, 1, "create_list", json!({"id": format!("spam{i}"), "title": "spam"})).await);
        let note = json!({"id": format!("n-spam{i}"), "list_id": format!("spam{i}"), "title": "spam"});
        applied(&push(&server, &stranger, 2, "add_note", note).await);
        let share = json!({"list_id": format!("spam{i}"), "user_id": "victim", "role": "editor"});
        let shared = push(&server, &stranger, 3, "share_list", share).await;
        if i < PENDING_INVITATIONS {
            applied(&shared);
        } else {
            // One more is refused, in words that say why.
            let detail = forbidden(&shared, &[]);
            assert!(detail.contains("pending invitations"), "{detail}");
        }
    }

    // The victim syncs what it did, and sees the invitations to answer.
    assert_eq!(lists_and_notes(&server, "victim").await, before);
    let pending = pulled(&server, "victim").await;
    let pending = pending.iter().filter(|(t, row)| t == "list_members" && row["accepted"] == false).count();
    assert_eq!(pending, PENDING_INVITATIONS);
}

#[tokio::test]
async fn a_clock_far_ahead_moves_no_other_clock() {
    use engine::hlc::{HlcClock, wall_clock_ms};
    const ALICE: &str = "0192f0e0-0000-7000-8000-0000000000a1";
    const BOB: &str = "0192f0e0-0000-7000-8000-0000000000b1";
    const MALLORY: &str = "0192f0e0-0000-7000-8000-0000000000c1";
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let shared = [
        mutation(1, "create_list", json!({"id": "shared", "title": "S"})),
        mutation(2, "share_list", json!({"list_id": "shared", "user_id": "bob", "role": "editor"})),
        mutation(3, "add_note", json!({"id": "n", "list_id": "shared", "title": "first"})),
    ];
    let results = push_as(&server, "alice", ALICE, &shared).await;
    assert!(results.iter().all(|r| r["status"] == "applied"), "{results:?}");
    crate::support::notes::accept(&server.url(""), "bob", "shared").await;

    // Mallory writes a note of her own with the largest reading the wire form can carry.
    let mut far = mutation(2, "add_note", json!({"id": "m", "list_id": "mallory", "title": "from the future"}));
    far["hlc"] = json!("9999999999999-ffff-mallory");
    let own = mutation(1, "create_list", json!({"id": "mallory", "title": "M"}));
    let results = push_as(&server, "mallory", MALLORY, &[own, far]).await;
    assert!(
        results.iter().all(|r| r["status"] == "applied"),
        "a fast clock is pulled back, never refused: {results:?}"
    );
    let stamp = server_hlc(&pull_as(&server, "mallory", MALLORY).await);
    assert!(
        stamp.physical_ms() <= wall_clock_ms() + engine::server::storage::postgres::MAX_CLOCK_LEAD_MS + 1,
        "mallory's own pull reads past her stamp, which is at most the lead ahead: {stamp}"
    );

    // Bob's pull does not deliver Mallory's row: its `serverHlc` is the server's own reading,
    // not ahead of the wall clock (50 ms of slack for the clock's adjustments).
    let pulled = pull_as(&server, "bob", BOB).await;
    let read = server_hlc(&pulled);
    let wall = wall_clock_ms();
    assert!(read.physical_ms() <= wall + 50, "bob's serverHlc {read} runs ahead of the wall clock {wall}");

    // Bob writes the shared note with a clock that observed his pull; Alice, who has not
    // pulled since, writes it a moment later with her honest clock: hers is the later write.
    let mut bob_clock = HlcClock::new("bob");
    bob_clock.observe(&read);
    let mut by_bob = mutation(1, "update_note", json!({"id": "n", "title": "from bob"}));
    by_bob["hlc"] = json!(bob_clock.now().to_string());
    let results = push_as(&server, "bob", BOB, &[by_bob]).await;
    assert_eq!((results[0]["status"].clone(), results[0].get("superseded")), (json!("applied"), None), "{results:?}");
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let mut by_alice = mutation(4, "update_note", json!({"id": "n", "title": "from alice"}));
    by_alice["hlc"] = json!(HlcClock::new("alice").now().to_string());
    let results = push_as(&server, "alice", ALICE, &[by_alice]).await;
    assert_eq!(
        (results[0]["status"].clone(), results[0].get("superseded")),
        (json!("applied"), None),
        "an honest write after bob's is not superseded: {results:?}"
    );
    let title: String = sqlx::query_scalar("SELECT title FROM notes WHERE id = 'n'").fetch_one(&db.pool).await.unwrap();
    assert_eq!(title, "from alice");
}

#[tokio::test]
async fn ids_holding_a_newline_forge_no_log_line() {
    let (logs, _guard) = Logs::capture();
    let db = TestDb::new().await;
    let jobs = example_notes::jobs::jobs().poll_interval(std::time::Duration::from_millis(50));
    let server = TestServer::start(&db, |b| b.jobs(jobs)).await;
    let forged = "\n2099-01-01T00:00:00.000000Z  WARN forged: a line no one logged";
    let list = format!("l{forged}");
    let mutations = [
        mutation(1, "create_list", json!({"id": list, "title": "L"})),
        // The `list_shared` job logs the list, the member and who shared.
        mutation(2, "share_list", json!({"list_id": list, "user_id": format!("bob{forged}"), "role": "editor"})),
        // A rejection whose detail echoes an argument, and one of a mutator's name.
        mutation(3, "share_list", json!({"list_id": list, "user_id": "carol", "role": format!("x{forged}")})),
        mutation(4, &format!("nope{forged}"), json!({})),
    ];
    let user = format!("alice{forged}");
    let results = push_as(&server, &user, CLIENT, &mutations).await;
    let statuses: Vec<&Value> = results.iter().map(|r| &r["status"]).collect();
    assert_eq!(statuses, ["applied", "applied", "rejected", "rejected"], "{results:?}");
    for _ in 0..200 {
        let open: i64 = sqlx::query_scalar("SELECT count(*) FROM _engine_jobs WHERE state <> 'done'")
            .fetch_one(&db.pool)
            .await
            .unwrap();
        if open == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let text = logs.text();
    // Every line the subscriber wrote opens with its timestamp; a forged one opens with the id's.
    for line in text.lines() {
        assert!(!line.contains("2099-01-01") || line.contains("\\n2099-01-01"), "a forged line:\n{text}");
        assert!(line.starts_with(|c: char| c.is_ascii_digit()), "a line that is not an event's:\n{text}");
    }
    let shared = logs.lines_with(&["a list was shared"]);
    assert_eq!(shared.len(), 1, "the job ran and logged once:\n{text}");
    assert!(shared[0].contains(r#"user_id="bob\n2099-01-01"#), "the id is quoted: {}", shared[0]);
    let rejected = logs.lines_with(&["mutation rejected"]);
    assert_eq!(rejected.len(), 2, "{text}");
    assert!(rejected.iter().all(|l| l.contains(r#"user="alice\n2099"#)), "{rejected:?}");
}

/// A token whose user id holds a NUL was a server error on every pull and push (no Postgres
/// text holds a NUL, so each statement binding it failed, and the client retried for good): it
/// is refused as unauthenticated before anything reads the database.
#[tokio::test]
async fn a_token_whose_claims_hold_a_nul_is_unauthenticated() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let token = TestServer::token("mal\u{0}lory");
    for (path, body) in [
        ("/sync/pull", json!({"clientId": "0192f0e0-0000-7000-8000-000000000001"})),
        ("/sync/push", json!({"clientId": "0192f0e0-0000-7000-8000-000000000001", "mutations": []})),
    ] {
        let response = reqwest::Client::new()
            .post(server.url(path))
            .header("content-type", "application/json")
            .bearer_auth(&token)
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{path}");
    }
}

/// Issue 37, finding 6: bodies held connections and memory. A request without a token is
/// answered from its headers, its body never read; a body sent slowly is given up after the
/// body read timeout with `retry_later`, not waited for.
#[tokio::test]
async fn a_body_is_read_only_after_authentication_and_within_its_timeout() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let db = TestDb::new().await;
    let limits = engine::limits::Limits::default().body_read_timeout(std::time::Duration::from_millis(300));
    let server = TestServer::start(&db, move |b| b.limits(limits)).await;
    // The response to `head` followed by `sent` bytes of a body that never completes.
    let answer = |head: String, sent: &'static [u8]| {
        let addr = server.addr;
        async move {
            let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
            socket.write_all(head.as_bytes()).await.unwrap();
            socket.write_all(sent).await.unwrap();
            // The answer closes the connection (the body was not read to its end).
            let mut response = Vec::new();
            let read = tokio::time::timeout(std::time::Duration::from_secs(20), socket.read_to_end(&mut response));
            read.await.expect("the server answers without the rest of the body").unwrap();
            String::from_utf8_lossy(&response).into_owned()
        }
    };
    let head = |auth: &str| {
        format!(
            "POST /sync/push HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n{auth}content-length: 1000000\r\n\r\n"
        )
    };
    let anonymous = answer(head(""), b"{\"clientId\":").await;
    assert!(anonymous.starts_with("HTTP/1.1 401"), "{anonymous}");
    let token = TestServer::token("alice");
    let slow = answer(head(&format!("authorization: Bearer {token}\r\n")), b"{\"clientId\":").await;
    assert!(slow.starts_with("HTTP/1.1 503"), "{slow}");
    assert!(slow.contains("retry_later") && slow.contains("connection: close"), "{slow}");
}

/// Issue 37: a refusal of the database was logged twice, once where it was classified (without
/// the mutation) and once with the rejection (without the database's fields). It is logged once,
/// with the rejection, the SQLSTATE, table and constraint as quoted fields, and its cause.
#[tokio::test]
async fn a_refusal_of_the_database_is_logged_once_with_its_fields() {
    let (logs, _guard) = Logs::capture();
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let twice = [
        mutation(1, "create_list", json!({"id": "twice", "title": "first"})),
        mutation(2, "create_list", json!({"id": "twice", "title": "second"})),
    ];
    let results = push(&server, &twice).await;
    assert_eq!(results[1]["status"], "rejected", "{results:?}");
    assert_eq!(results[1]["error"]["code"], "conflict", "{results:?}");
    assert_eq!(results[1]["error"]["detail"], "conflict: a row with this key already exists", "{results:?}");
    let text = logs.text();
    let told = logs.lines_with(&["23505"]);
    assert_eq!(told.len(), 1, "the refusal is logged once:\n{text}");
    let line = &told[0];
    assert!(line.contains("mutation rejected") && line.contains(r#"mutator="create_list""#), "{line}");
    assert!(line.contains(r#"sqlstate="23505""#) && line.contains("cause="), "{line}");
    if crate::support::backend() == crate::support::Backend::Postgres {
        assert!(line.contains(r#"table="lists""#) && line.contains(r#"constraint="lists_pkey""#), "{line}");
    }
}

/// Issue 37, finding 6: one address held hundreds of connections that never authenticated
/// (headers sent slowly, or answered 401 and kept open). Each connection counts against its
/// address until a request on it authenticates; past the limit a new one takes the place of the
/// address's oldest unauthenticated connection, which is closed. So an honest client behind the
/// same address as the attacker (a shared NAT) still gets in, which a refusal at the limit kept
/// out.
#[tokio::test]
async fn an_address_holds_only_so_many_unauthenticated_connections() {
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpStream;

    let db = TestDb::new().await;
    let limits = engine::limits::Limits::default().rate(0, 0).unauthenticated_per_address(3);
    let server = TestServer::start(&db, move |b| b.limits(limits)).await;
    let connect = || TcpStream::connect(server.addr);
    let contract = "GET /engine/contract HTTP/1.1\r\nhost: localhost\r\n\r\n".to_owned();
    let body = json!({"clientId": CLIENT}).to_string();
    let authenticated_rest = format!(
        "authorization: Bearer {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        TestServer::token("alice"),
        body.len()
    );

    // Three connections whose headers are still arriving hold the address's places.
    let mut slow = std::collections::VecDeque::new();
    for _ in 0..3 {
        let mut socket = connect().await.unwrap();
        socket.write_all(b"POST /sync/pull HTTP/1.1\r\nhost: localhost\r\n").await.unwrap();
        slow.push_back(socket);
    }
    // An honest client's connection gets in, and its request is served; the oldest of the slow
    // ones is closed for it, before its headers were done.
    let pull = format!("POST /sync/pull HTTP/1.1\r\nhost: localhost\r\n{authenticated_rest}");
    let (_honest, pulled) = answer(connect().await.unwrap(), pull).await;
    assert!(pulled.starts_with("HTTP/1.1 200"), "{pulled}");
    assert!(closed(slow.pop_front().unwrap()).await, "the oldest slow connection is closed");

    // One of the others authenticates its request: it no longer counts, and goes on.
    let (_kept, pulled) = answer(slow.pop_back().unwrap(), authenticated_rest).await;
    assert!(pulled.starts_with("HTTP/1.1 200"), "{pulled}");
    // A request that needs no token is answered, and its connection, kept open, holds a place
    // until newer connections of the address have taken every place after it.
    let (opened, answered) = answer(connect().await.unwrap(), contract.clone()).await;
    assert!(answered.starts_with("HTTP/1.1 200"), "{answered}");
    let mut held = vec![slow.pop_front().unwrap(), opened];
    for _ in 0..3 {
        let (socket, answered) = answer(connect().await.unwrap(), contract.clone()).await;
        assert!(answered.starts_with("HTTP/1.1 200"), "{answered}");
        held.push(socket);
    }
    // Of the five unauthenticated connections opened, the address holds the three newest.
    for older in held.drain(..2) {
        assert!(closed(older).await, "an older connection was closed for a newer one");
    }
    for newer in held {
        let (_, after) = answer(newer, contract.clone()).await;
        assert!(after.starts_with("HTTP/1.1 200"), "{after}");
    }
}

/// Whether the server closes `socket` rather than send anything on it.
async fn closed(mut socket: tokio::net::TcpStream) -> bool {
    use tokio::io::AsyncReadExt;
    let mut chunk = [0; 1024];
    let read = tokio::time::timeout(std::time::Duration::from_secs(20), socket.read(&mut chunk)).await;
    matches!(read.expect("the server closes the connection or sends on it"), Ok(0) | Err(_))
}

/// The answer on `socket` to `request`, read to the first response's end or the close.
async fn answer(mut socket: tokio::net::TcpStream, request: String) -> (tokio::net::TcpStream, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    socket.write_all(request.as_bytes()).await.unwrap();
    let (mut response, mut chunk) = (Vec::new(), vec![0; 16 * 1024]);
    let wait = std::time::Duration::from_secs(20);
    loop {
        let n = tokio::time::timeout(wait, socket.read(&mut chunk)).await.expect("an answer").unwrap();
        response.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&response).into_owned();
        if n == 0 || text.contains("\r\n\r\n{") && text.ends_with('}') {
            return (socket, text);
        }
    }
}

/// Whether the server closes `socket` while it sends a header line every 100 ms, up to 40 of
/// them, without ever finishing its headers: within hyper's bound on a request's headers (100),
/// so only a deadline of the server's closes it.
async fn closed_while_trickling(mut socket: tokio::net::TcpStream) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut sink = [0; 1024];
    for _ in 0..40 {
        if socket.write_all(b"x-slow: a\r\n").await.is_err() {
            return true;
        }
        let read = tokio::time::timeout(std::time::Duration::from_millis(100), socket.read(&mut sink)).await;
        if let Ok(Ok(0) | Err(_)) = read {
            return true;
        }
    }
    false
}

/// Issue 37, finding 6: the count per address bounds one address, not many: headers sent a line
/// at a time held a connection for as long as the client liked. A connection none of whose
/// requests has authenticated within `Limits::unauthenticated_deadline` reads as closed; one
/// that has authenticated, or whose signed blob URL held, is kept.
#[tokio::test]
async fn a_connection_that_never_authenticates_is_closed_at_its_deadline() {
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpStream;

    let db = TestDb::new().await;
    let deadline = std::time::Duration::from_millis(500);
    let limits = engine::limits::Limits::default().rate(0, 0).unauthenticated_deadline(deadline);
    let server = TestServer::start(&db, move |b| b.limits(limits)).await;

    // Headers a line at a time, from an address under its count.
    let mut slow = TcpStream::connect(server.addr).await.unwrap();
    slow.write_all(b"POST /sync/pull HTTP/1.1\r\nhost: localhost\r\n").await.unwrap();
    assert!(closed_while_trickling(slow).await, "a connection trickling its headers is closed");

    // Answered without a token and kept open, then a next request trickled: closed once past
    // the deadline.
    let contract = "GET /engine/contract HTTP/1.1\r\nhost: localhost\r\n\r\n".to_owned();
    let (mut open, answered) = answer(TcpStream::connect(server.addr).await.unwrap(), contract.clone()).await;
    assert!(answered.starts_with("HTTP/1.1 200"), "{answered}");
    open.write_all(b"GET /engine/contract HTTP/1.1\r\n").await.unwrap();
    assert!(closed_while_trickling(open).await, "an unauthenticated connection is closed past its deadline");

    // A connection that authenticated a request stays, past the deadline, for its next one.
    let body = json!({"clientId": CLIENT}).to_string();
    let pull = format!(
        "POST /sync/pull HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer {}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        TestServer::token("alice"),
        body.len()
    );
    let (kept, pulled) = answer(TcpStream::connect(server.addr).await.unwrap(), pull.clone()).await;
    assert!(pulled.starts_with("HTTP/1.1 200"), "{pulled}");
    tokio::time::sleep(deadline * 3).await;
    let (_, again) = answer(kept, pull).await;
    assert!(again.starts_with("HTTP/1.1 200"), "the authenticated connection is kept: {again}");
}
