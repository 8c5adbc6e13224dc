//! The examples, run over real TCP: the embedded host app with the engine under its prefix, and
//! the README's client session against a notes server.

use std::time::Duration;

use engine::client::StoreLocation;
use example_embedded::{ApiKeys, SYNC_PREFIX};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::ws::{Auth, Ws};
use crate::support::{TestDb, TestServer};

const ALICE: &str = "alice-key";
const BOB: &str = "bob-key";

#[tokio::test]
async fn the_embedded_host_serves_its_routes_and_the_engine_under_its_prefix_with_its_own_users() {
    let db = TestDb::new().await;
    let engine = example_embedded::engine(&db.url, ApiKeys::new([(ALICE, "alice"), (BOB, "bob")])).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let serving = tokio::spawn(example_embedded::serve(&engine, listener, example_embedded::host_app(&engine)));
    let http = reqwest::Client::new();
    let url = |path: &str| format!("http://{addr}{path}");

    assert_eq!(http.get(url("/health")).send().await.unwrap().text().await.unwrap(), "ok");
    let me: Value = http.get(url("/me")).bearer_auth(ALICE).send().await.unwrap().json().await.unwrap();
    assert_eq!((me["userId"].as_str(), me["ownerId"].as_str()), (Some("alice"), Some("alice")));
    let refused = http.get(url("/me")).bearer_auth("a-key-nobody-issued").send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(refused.headers()["content-type"], "application/problem+json");

    // The engine knows the host's users, at the handshake of its stream too.
    let mut alice_socket = Ws::connect_at(addr, &format!("{SYNC_PREFIX}/sync/stream"), Auth::Subprotocol(ALICE))
        .await
        .expect("the stream under the prefix takes the host's key");
    let push = json!({"clientId": "0192f0e0-0000-7000-8000-000000000001", "mutations": [{
        "mutationId": 1, "clientMutationId": "0192f0e0-0000-7000-8000-00000000a001",
        "name": "create_list", "args": {"id": "groceries", "title": "Groceries"}
    }]});
    let pushed: Value = http
        .post(url(&format!("{SYNC_PREFIX}/sync/push")))
        .bearer_auth(ALICE)
        .json(&push)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(pushed["results"][0]["status"], "applied", "{pushed}");
    // The list pings `own/alice` (and its owner's membership `memberships/alice`).
    while alice_socket.expect("ping", Duration::from_secs(5)).await["bucket"] != "own/alice" {}

    let pull = |key: &'static str| {
        http.post(url(&format!("{SYNC_PREFIX}/sync/pull")))
            .bearer_auth(key)
            .json(&json!({"clientId": "0192f0e0-0000-7000-8000-000000000002"}))
            .send()
    };
    let alice: Value = pull(ALICE).await.unwrap().json().await.unwrap();
    let lists = |pulled: &Value| pulled["changes"].as_array().unwrap().iter().filter(|c| c["table"] == "lists").count();
    assert_eq!(lists(&alice), 1, "alice sees her list: {alice}");
    let bob: Value = pull(BOB).await.unwrap().json().await.unwrap();
    assert_eq!(lists(&bob), 0, "bob does not: {bob}");

    let contract: Value =
        http.get(url(&format!("{SYNC_PREFIX}/engine/contract"))).send().await.unwrap().json().await.unwrap();
    assert_eq!(contract["servers"], json!([{"url": SYNC_PREFIX}]));
    serving.abort();
}

#[tokio::test]
async fn the_client_example_writes_offline_first_and_the_server_confirms() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let store = std::env::temp_dir().join(format!("engine-example-client-{}.db", uuid::Uuid::new_v4().simple()));
    let location = || StoreLocation::File(store.clone());
    let titles = |notes: &[example_notes::Note]| notes.iter().map(|n| n.title.clone()).collect::<Vec<_>>();

    let first = example_client::add_to_groceries(&server.url(""), TestServer::token("alice"), location(), "Oat milk")
        .await
        .expect("the first session");
    assert_eq!(titles(&first.shown_at_once), ["Oat milk"], "the note shows before the server has it");
    assert_eq!(titles(&first.confirmed), ["Oat milk"]);
    assert_eq!((first.status.pending, first.status.quarantined.len()), (0, 0), "{:?}", first.status);

    // A second session starts from the store the first one left, and finds the list there.
    let second = example_client::add_to_groceries(&server.url(""), TestServer::token("alice"), location(), "Bread")
        .await
        .expect("the second session");
    assert_eq!(titles(&second.confirmed), ["Oat milk", "Bread"]);
    assert_eq!(second.status.pending, 0);

    let on_the_server: Vec<String> = sqlx::query_scalar(
        "SELECT title FROM notes WHERE list_id = 'groceries' AND owner_id = 'alice' ORDER BY position",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(on_the_server, ["Oat milk", "Bread"]);
    let lists: i64 = sqlx::query_scalar("SELECT count(*) FROM lists").fetch_one(&db.pool).await.unwrap();
    assert_eq!(lists, 1, "the second session did not create the list again");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", store.display()));
    }
}
