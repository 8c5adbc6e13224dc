//! `GET /sync/poll`, the long-poll beside the stream: its answers between and during polls, its
//! bounds (an actor's polls, a vanished client, no database session while waiting, a forged
//! position), and the Rust client falling back to it behind a proxy that refuses upgrades.

use std::time::Duration;

use engine::client::{Client, StoreLocation};
use engine::server::StreamLimits;
use example_notes::mutators::{AddNote, CreateList, ShareList, ShareRole, add_note, create_list, share_list};
use example_notes::{List, Note};
use serde_json::{Value, json};

use crate::support::client::{eventually, notes_client};
use crate::support::db::TestStore;
use crate::support::no_upgrade::NoUpgradeProxy;
use crate::support::notes::accept;
use crate::support::{Backend, TestDb, TestServer, backend};

const SOON: Duration = Duration::from_secs(10);
const CLIENT: &str = "0192f0e0-0000-7000-8000-000000000002";

/// Push as `user`, asserting every mutation applied.
async fn push(server: &TestServer, user: &str, mutations: &[(u64, &str, Value)]) {
    let mutations: Vec<Value> = mutations
        .iter()
        .map(|(id, name, args)| json!({"mutationId": id, "clientMutationId": uuid::Uuid::new_v4(), "name": name, "args": args}))
        .collect();
    let response = server
        .http
        .post(server.url("/sync/push"))
        .bearer_auth(TestServer::token(user))
        .body(json!({"clientId": CLIENT, "mutations": mutations}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
}

/// The request of a poll of `user` on `server`.
fn poll_request(
    http: &reqwest::Client,
    server: &TestServer,
    user: &str,
    position: Option<&str>,
    wait: u64,
) -> reqwest::RequestBuilder {
    let mut url = reqwest::Url::parse(&server.url("/sync/poll")).unwrap();
    url.query_pairs_mut().append_pair("wait", &wait.to_string());
    if let Some(position) = position {
        url.query_pairs_mut().append_pair("position", position);
    }
    http.get(url).bearer_auth(TestServer::token(user))
}

/// One poll of `user`: its status and body.
async fn poll(server: &TestServer, user: &str, position: Option<&str>, wait: u64) -> (u16, Value) {
    let response = poll_request(&server.http, server, user, position, wait).send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

/// The position of a first poll, and its frames.
async fn first_poll(server: &TestServer, user: &str) -> String {
    let (status, answer) = poll(server, user, None, 0).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["frames"], json!([{"type": "buckets_changed"}]), "a first poll is a reset");
    answer["position"].as_str().unwrap().to_owned()
}

fn pinged(answer: &Value) -> Vec<&str> {
    answer["frames"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["type"] == "ping")
        .map(|f| f["bucket"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn a_poll_brings_the_pings_of_its_actors_buckets_made_between_polls_and_during_one() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    push(&server, "alice", &[(1, "create_list", json!({"id": "l1", "title": "t"}))]).await;
    let alice = first_poll(&server, "alice").await;
    let bob = first_poll(&server, "bob").await;

    // Between two polls: the next poll finds it, however late it comes (with the first push's
    // pings, when they came after the first poll).
    push(&server, "alice", &[(2, "add_note", json!({"id": "n1", "list_id": "l1", "title": "x"}))]).await;
    let (status, answer) = poll(&server, "alice", Some(&alice), 5).await;
    assert_eq!(status, 200);
    assert!(pinged(&answer).contains(&"shared/l1"), "{answer}");
    let alice = answer["position"].as_str().unwrap().to_owned();

    // During a poll: it is answered when the ping comes.
    let waiting = tokio::spawn(poll_request(&server.http, &server, "alice", Some(&alice), 20).send());
    tokio::time::sleep(Duration::from_millis(300)).await;
    push(&server, "alice", &[(3, "add_note", json!({"id": "n2", "list_id": "l1", "title": "y"}))]).await;
    let answer = tokio::time::timeout(SOON, waiting).await.expect("the waiting poll is answered").unwrap().unwrap();
    let answer: Value = answer.json().await.unwrap();
    assert_eq!(pinged(&answer), ["shared/l1"], "{answer}");

    // Nothing of alice's reaches bob.
    let (status, answer) = poll(&server, "bob", Some(&bob), 1).await;
    assert_eq!((status, &answer["frames"]), (200, &json!([])), "{answer}");

    // A membership change reaches the member as `buckets_changed`, and then the bucket's pings.
    let bob = answer["position"].as_str().unwrap().to_owned();
    push(&server, "alice", &[(4, "share_list", json!({"list_id": "l1", "user_id": "bob", "role": "viewer"}))]).await;
    accept(&server.url(""), "bob", "l1").await;
    let (_, answer) = poll(&server, "bob", Some(&bob), 5).await;
    assert_eq!(answer["frames"][0], json!({"type": "buckets_changed"}), "{answer}");
    let bob = answer["position"].as_str().unwrap().to_owned();
    push(&server, "alice", &[(5, "add_note", json!({"id": "n3", "list_id": "l1", "title": "z"}))]).await;
    let (_, answer) = poll(&server, "bob", Some(&bob), 5).await;
    // The invitation's and the accepted memberships' buckets were pinged by the share and its
    // acceptance, maybe late.
    let pings: Vec<_> = pinged(&answer)
        .into_iter()
        .filter(|bucket| *bucket != "invitations/bob" && *bucket != "memberships/bob")
        .collect();
    assert_eq!(pings, ["shared/l1"], "{answer}");
}

#[tokio::test]
async fn a_forged_or_foreign_position_is_reset_and_a_bad_query_refused() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    push(&server, "alice", &[(1, "create_list", json!({"id": "l1", "title": "secret"}))]).await;
    let alice = first_poll(&server, "alice").await;
    push(&server, "alice", &[(2, "add_note", json!({"id": "n1", "list_id": "l1", "title": "x"}))]).await;
    let (epoch, number) = alice.split_once('.').unwrap();
    // Another server's position (on a database of its own: one process serves a SQLite file).
    let other_db = TestDb::new().await;
    let other = TestServer::start(&other_db, |b| b).await;
    let foreign = first_poll(&other, "bob").await;
    let forged = [
        // Alice's own position, or one before it, taken by bob: his buckets only, never hers.
        alice.clone(),
        format!("{epoch}.0"),
        format!("{epoch}.{}", number.parse::<u64>().unwrap() + 1_000_000),
        foreign,
        "0000000000000000.0".to_owned(),
        "nonsense".to_owned(),
    ];
    for position in &forged {
        let (status, answer) = poll(&server, "bob", Some(position), 1).await;
        assert_eq!(status, 200, "{position}: {answer}");
        assert!(pinged(&answer).is_empty(), "{position}: nothing of alice's: {answer}");
    }
    // A position past the end, or of another server, is a reset: `buckets_changed` at once.
    for position in &forged[2..] {
        let (_, answer) = poll(&server, "bob", Some(position), 5).await;
        assert_eq!(answer["frames"], json!([{"type": "buckets_changed"}]), "{position}: {answer}");
    }

    let response =
        server.http.get(server.url("/sync/poll?wait=soon")).bearer_auth(TestServer::token("bob")).send().await.unwrap();
    assert_eq!(response.status(), 400);
    let problem: Value = response.json().await.unwrap();
    assert_eq!(problem["code"], "malformed_request", "{problem}");
    let response = server.http.get(server.url("/sync/poll")).send().await.unwrap();
    assert_eq!(response.status(), 401, "a poll is authenticated");
}

fn two_polls() -> StreamLimits {
    let mut limits = StreamLimits::default();
    limits.polls_per_actor = 2;
    limits
}

#[tokio::test]
async fn an_actors_polls_are_capped_and_a_vanished_clients_poll_gives_its_place_back() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b.stream_limits(two_polls())).await;
    let alice = first_poll(&server, "alice").await;
    // Two polls that wait, each trying again while the probes below hold its place.
    let waiting: Vec<_> = (0..2)
        .map(|_| {
            let request = poll_request(&reqwest::Client::new(), &server, "alice", Some(&alice), 30);
            tokio::spawn(async move {
                loop {
                    let response = request.try_clone().unwrap().send().await.unwrap();
                    if response.status() != 429 {
                        return response.status();
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
        })
        .collect();
    eventually(SOON, "alice's third poll is refused", || async {
        poll(&server, "alice", Some(&alice), 0).await.0 == 429
    })
    .await;
    let (status, _) = poll(&server, "bob", None, 0).await;
    assert_eq!(status, 200, "bob's polls are his own");

    // The clients go away: their polls end, well before their wait.
    for poll in &waiting {
        poll.abort();
    }
    eventually(Duration::from_secs(5), "a vanished client's poll gives its place back", || async {
        poll(&server, "alice", Some(&alice), 0).await.0 == 200
    })
    .await;
}

#[tokio::test]
async fn waiting_polls_hold_no_database_session() {
    let db = TestDb::new().await;
    let store = match backend() {
        Backend::Postgres => TestStore::Postgres(engine::storage::postgres(db.url.clone()).max_connections(2)),
        Backend::Sqlite => db.store(engine::storage::StoreLimits::default()),
    };
    let server = TestServer::start(&db, |b| b.storage(store)).await;
    // Ten polls waiting on a pool of two sessions: of six actors, five of them alice's (more
    // than the four requests in progress an actor may have).
    let users = ["alice", "bob", "carol", "dave", "erin", "frank", "alice", "alice", "alice", "alice"];
    let mut waiting = Vec::new();
    for user in users {
        let position = first_poll(&server, user).await;
        waiting.push(tokio::spawn(poll_request(&server.http, &server, user, Some(&position), 30).send()));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(waiting.iter().all(|poll| !poll.is_finished()), "the polls wait");
    for user in ["alice", "gina"] {
        let response = tokio::time::timeout(
            SOON,
            server
                .http
                .post(server.url("/sync/pull"))
                .bearer_auth(TestServer::token(user))
                .body(json!({"clientId": CLIENT}).to_string())
                .send(),
        )
        .await
        .expect("a pull is served while polls wait")
        .unwrap();
        assert_eq!(response.status(), 200, "{user}'s pull");
    }
    // And the polls are answered when something comes.
    push(&server, "alice", &[(1, "create_list", json!({"id": "l1", "title": "t"}))]).await;
    for (user, poll) in users.into_iter().zip(waiting) {
        match user {
            "alice" => assert_eq!(tokio::time::timeout(SOON, poll).await.unwrap().unwrap().unwrap().status(), 200),
            _ => poll.abort(),
        }
    }
}

async fn behind(proxy: &NoUpgradeProxy, user: &str) -> Client {
    // Pulls come only when realtime asks for them: the interval is out of the test's reach.
    notes_client(&proxy.url(), user, StoreLocation::Memory, |b| b.pull_interval(Duration::from_secs(3600))).await
}

#[tokio::test]
async fn two_clients_behind_a_proxy_that_refuses_upgrades_see_each_others_writes_by_long_poll() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let proxy = NoUpgradeProxy::start(&server.url("")).await;
    let alice = behind(&proxy, "alice").await;
    let bob = behind(&proxy, "bob").await;
    eventually(SOON, "both clients long-poll", || async {
        [&alice, &bob].iter().all(|c| c.status().long_poll && c.status().connected)
    })
    .await;

    alice.mutate::<create_list>(CreateList { id: Some("l1".into()), title: "shared".into() }).await.unwrap();
    let share = ShareList { list_id: "l1".into(), user_id: "bob".into(), role: ShareRole::Editor };
    alice.mutate::<share_list>(share).await.unwrap();
    accept(&server.url(""), "bob", "l1").await;
    eventually(SOON, "bob gets the shared list", || async {
        bob.get::<List>(&"l1".to_owned()).await.unwrap().is_some()
    })
    .await;
    bob.mutate::<add_note>(AddNote { id: Some("n1".into()), list_id: "l1".into(), title: "from bob".into() })
        .await
        .unwrap();
    eventually(SOON, "alice gets bob's note", || async {
        alice.get::<Note>(&"n1".to_owned()).await.unwrap().is_some()
    })
    .await;
}
