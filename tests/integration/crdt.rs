//! Collaborative columns over real HTTP: an update that is a well-formed encoding but breaks the
//! CRDT library, or that would make a document past its bound, is rejected `validation_failed`,
//! recorded, and the mutations after it go on.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{TestDb, TestServer};

const CLIENT: &str = "0192f0e0-0000-7000-8000-0000000000cc";

fn mutation(id: u64, name: &str, args: Value) -> Value {
    json!({"mutationId": id, "clientMutationId": format!("0192f0e0-0000-7000-8000-{id:012x}"), "name": name, "args": args})
}

async fn push(server: &TestServer, mutations: &[Value]) -> Vec<Value> {
    let body = json!({"clientId": CLIENT, "mutations": mutations});
    let response = server.post("/sync/push", Some("alice"), body.to_string()).await;
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = response.json().await.unwrap();
    body["results"].as_array().unwrap().clone()
}

#[tokio::test]
async fn an_update_that_breaks_the_crdt_library_is_rejected_and_the_next_goes_on() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let setup = push(
        &server,
        &[
            mutation(1, "create_list", json!({"id": "l1", "title": "t"})),
            mutation(2, "add_note", json!({"id": "n1", "list_id": "l1", "title": "t"})),
        ],
    )
    .await;
    assert!(setup.iter().all(|r| r["status"] == "applied"), "{setup:?}");

    // Items whose parent and origins point at items that are not types: yrs panics on it.
    let breaking = "AwQBDwcAAAsGIQAABwFrBQQBBHRleHQEdGV4dAAEBQACCgQAAgACAAYABQEAAAAHAQADDAEABwAI";
    // A document past the merge's bound of 1 MiB, in an update the body limit still admits.
    let mut big = engine::CrdtText::new();
    let huge = big.insert(0, &"x".repeat(700 * 1024)).unwrap();
    let huge = engine::crdt::update_to_base64(&huge);
    let edits = [
        mutation(3, "edit_note_body", json!({"id": "n1", "update": breaking})),
        mutation(4, "edit_note_body", json!({"id": "n1", "update": huge})),
        mutation(5, "edit_note_body", json!({"id": "n1", "update": huge})),
        mutation(6, "update_note", json!({"id": "n1", "title": "still editable"})),
    ];
    let mut results = Vec::new();
    for edit in &edits {
        results.extend(push(&server, std::slice::from_ref(edit)).await);
    }
    let shown: Vec<String> = results.iter().map(|r| r.to_string().chars().take(300).collect()).collect();
    assert_eq!(results[0]["status"], "rejected", "{shown:?}");
    assert_eq!(results[0]["error"]["code"], "validation_failed", "{shown:?}");
    assert_eq!(results[1]["status"], "applied", "a document within the bound merges: {shown:?}");
    assert_eq!(results[2]["status"], "rejected", "{shown:?}");
    assert_eq!(results[2]["error"]["code"], "validation_failed", "{shown:?}");
    assert!(results[2]["error"]["detail"].as_str().unwrap().contains("at most"), "{shown:?}");
    assert_eq!(results[3]["status"], "applied", "{shown:?}");
    let again = push(&server, &edits[..1]).await;
    assert_eq!(again[0], results[0], "the rejection is replayed the same");
}

/// `n` as yrs writes a variable-length integer.
fn var(mut n: u64, out: &mut Vec<u8>) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// A yrs v1 update of `items` one-character items of replica `client`, each placed after the
/// one before it, but every `every`th after the one before that: well formed and fitting an
/// empty document, but written item by item where a replica's own encoding joins them into one
/// (a few bytes an item).
fn items_one_by_one(client: u8, items: u64, every: u64) -> Vec<u8> {
    let mut bytes = vec![1];
    var(items, &mut bytes);
    bytes.extend_from_slice(&[client, 0, 4, 1, 4, b't', b'e', b'x', b't', 1, b'x']);
    for clock in 1..items {
        bytes.extend_from_slice(&[0x84, client]);
        var(if clock % every == 0 && clock >= 2 { clock - 2 } else { clock - 1 }, &mut bytes);
        bytes.extend_from_slice(&[1, b'x']);
    }
    bytes.push(0);
    bytes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_update_of_small_items_holds_no_one_elses_sync() {
    use std::time::{Duration, Instant};
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let setup = push(
        &server,
        &[
            mutation(1, "create_list", json!({"id": "l1", "title": "t"})),
            mutation(2, "add_note", json!({"id": "n1", "list_id": "l1", "title": "t"})),
        ],
    )
    .await;
    assert!(setup.iter().all(|r| r["status"] == "applied"), "{setup:?}");

    // About 560 KB of one-character items (750 KB of base64), within the body limit: once as
    // one run of items each continuing the one before (refused: yrs would join them at a cost
    // quadratic in the run), once broken every 100 items (merged).
    let update = items_one_by_one(1, 85_000, 100);
    let bytes = update.len();
    let run = engine::crdt::update_to_base64(&items_one_by_one(2, 85_000, u64::MAX));
    let bombs = [
        mutation(3, "edit_note_body", json!({"id": "n1", "update": run})),
        mutation(4, "edit_note_body", json!({"id": "n1", "update": engine::crdt::update_to_base64(&update)})),
    ];
    let started = Instant::now();
    let attack = {
        let (http, url) = (server.http.clone(), server.url("/sync/push"));
        tokio::spawn(async move {
            let mut results = Vec::new();
            for bomb in bombs {
                let body = json!({"clientId": CLIENT, "mutations": [bomb]}).to_string();
                let response = http.post(&url).bearer_auth(TestServer::token("alice")).body(body).send().await.unwrap();
                let status = response.status();
                let answer = response.json::<Value>().await.unwrap();
                results.push((status, answer));
            }
            (results, started.elapsed())
        })
    };

    // Meanwhile bob writes lists of his own and pulls until he sees each: how long his sync
    // takes to show his own write while the update is checked and merged.
    const BOB: &str = "0192f0e0-0000-7000-8000-0000000000b0";
    let pull = |cursor: Option<String>| {
        let body = json!({"clientId": BOB, "cursor": cursor}).to_string();
        server.post("/sync/pull", Some("bob"), body)
    };
    let first: Value = pull(None).await.json().await.unwrap();
    let mut cursor = first["cursor"].as_str().map(str::to_owned);
    let (mut rounds, mut slowest) = (0u64, Duration::ZERO);
    while !attack.is_finished() || rounds == 0 {
        rounds += 1;
        let write = json!({"clientId": BOB, "mutations": [
            mutation(rounds, "create_list", json!({"id": format!("b{rounds}"), "title": "b"}))
        ]});
        let written = Instant::now();
        let response = server.post("/sync/push", Some("bob"), write.to_string()).await;
        assert_eq!(response.status(), StatusCode::OK);
        loop {
            let page: Value = pull(cursor.clone()).await.json().await.unwrap();
            cursor = page["cursor"].as_str().map(str::to_owned);
            let seen = page["changes"].as_array().unwrap().iter().any(|c| c["row"]["id"] == format!("b{rounds}"));
            if seen {
                break;
            }
            assert!(written.elapsed() < Duration::from_secs(60), "bob's write never reached his pull");
        }
        slowest = slowest.max(written.elapsed());
    }
    let (results, answered) = attack.await.unwrap();
    let statuses: Vec<String> =
        results.iter().map(|(status, answer)| format!("{status} {}", answer["results"][0]["status"])).collect();
    eprintln!(
        "two updates of {bytes} bytes answered {statuses:?} in {answered:?}; bob's write reached his pull within {slowest:?} at worst, over {rounds} rounds"
    );
    assert_eq!(statuses, ["200 OK \"rejected\"", "200 OK \"applied\""], "{results:?}");
    let detail = results[0].1["results"][0]["error"]["detail"].as_str().unwrap();
    assert!(detail.contains("more than 256 items"), "{detail}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_merges_take_turns_at_the_gate_and_each_actor_is_served() {
    let db = TestDb::new().await;
    let limits = engine::limits::Limits::default().rate(0, 0).large_merges(1);
    let server = TestServer::start(&db, |b| b.limits(limits)).await;
    let actors = ["alice", "bob"];
    let client = |n: usize| format!("0192f0e0-0000-7000-8000-{:012x}", 0x100 + n);
    let post = |actor: &'static str, client: String, mutations: Vec<Value>| {
        let body = json!({"clientId": client, "mutations": mutations}).to_string();
        let (http, url) = (server.http.clone(), server.url("/sync/push"));
        async move {
            let response = http.post(&url).bearer_auth(TestServer::token(actor)).body(body).send().await.unwrap();
            let status = response.status();
            let body = response.json::<Value>().await.unwrap();
            assert_eq!(status, StatusCode::OK, "{body}");
            body["results"].as_array().unwrap().clone()
        }
    };
    for (index, actor) in actors.into_iter().enumerate() {
        let mut setup = vec![mutation(1, "create_list", json!({"id": format!("{actor}-l"), "title": "t"}))];
        setup.extend((0..4).map(|n| {
            mutation(
                2 + n,
                "add_note",
                json!({"id": format!("{actor}-{n}"), "list_id": format!("{actor}-l"), "title": "t"}),
            )
        }));
        let applied = post(actor, client(index * 16), setup).await;
        assert!(applied.iter().all(|r| r["status"] == "applied"), "{applied:?}");
    }

    // Each actor pushes four large updates at once, from a client each, into a note each, each
    // past the gate's size.
    let mut pushes = Vec::new();
    for (index, actor) in actors.into_iter().enumerate() {
        for n in 0..4u8 {
            let update = engine::crdt::update_to_base64(&items_one_by_one(10 + index as u8 * 4 + n, 20_000, 100));
            assert!(update.len() > engine::limits::LARGE_MERGE_BYTES);
            let edit = mutation(1, "edit_note_body", json!({"id": format!("{actor}-{n}"), "update": update}));
            pushes.push(tokio::spawn(post(actor, client(index * 16 + 1 + usize::from(n)), vec![edit])));
        }
    }
    for push in pushes {
        let results = push.await.unwrap();
        assert_eq!(results[0]["status"], "applied", "every actor's merges are served: {results:?}");
    }
    let stats = server.stats().await;
    let gate = &stats["largeMerges"];
    assert_eq!(gate["places"], 1, "{stats}");
    assert_eq!(gate["mostAtOnce"], 1, "the eight merges ran one at a time: {stats}");
    assert_eq!(gate["running"], 0, "{stats}");
    // A push waits for its turn at the gate before it takes one of the store's places: the
    // merges waiting their turn held none another actor's push could have had.
    assert_eq!(stats["places"]["mostAtOnce"], 1, "one place at a time, the merging push's: {stats}");
}
