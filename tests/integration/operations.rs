//! What an operator sees and bounds: refusals and rejections in the logs, retention of tombstones,
//! mutation records, clients and jobs, a held-back horizon, and metrics
//! (`docs/design.md`, operations).

use std::sync::Arc;

use engine::server::Storage;
use engine::server::storage::PostgresStorage;
use engine::wire::{MutationRequest, MutationStatus, PushRequest};
use engine::{Actor, ErrorCode};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::server::SECRET;
use crate::support::{Logs, TestDb, TestServer};

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

fn client(n: u128) -> uuid::Uuid {
    uuid::Uuid::from_u128(0x0192_f0e0_0000_7000_8000_0000_0000_0000 + n)
}

fn mutation(id: u64, name: &str, args: Value) -> MutationRequest {
    MutationRequest { mutation_id: id, client_mutation_id: uuid::Uuid::new_v4(), name: name.into(), args, hlc: None }
}

async fn store(db: &TestDb) -> Arc<PostgresStorage> {
    let storage = Arc::new(PostgresStorage::new(db.pool.clone(), Arc::new(example_notes::app())));
    storage.provision().await.unwrap();
    storage
}

/// Push `mutations` as `user`'s client `n`; every one is answered.
async fn push(storage: &PostgresStorage, user: &str, n: u128, mutations: Vec<MutationRequest>) -> Vec<MutationStatus> {
    let pushed = storage.push(&Actor::new(user, user), &PushRequest { client_id: client(n), mutations }).await.unwrap();
    assert!(pushed.stopped.is_none(), "{:?}", pushed.stopped);
    pushed.response.results.into_iter().map(|r| r.status).collect()
}

#[tokio::test]
async fn a_refused_token_says_whether_it_expired_was_malformed_or_badly_signed() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let sign = |claims: &Value, secret: &str| {
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), claims, &EncodingKey::from_secret(secret.as_bytes()))
            .unwrap()
    };
    let fresh = json!({"sub": "alice", "ownerId": "alice", "iat": now(), "exp": now() + 600});
    let stale = json!({"sub": "alice", "ownerId": "alice", "iat": now() - 7200, "exp": now() - 3600});
    let cases = [
        ("expired", sign(&stale, SECRET), "expired"),
        ("bad signature", sign(&fresh, "another-secret"), "bad signature"),
        ("not a JWT", "not-a-token".to_owned(), "malformed"),
        ("two parts", "eyJhbGciOiJIUzI1NiJ9.e30".to_owned(), "malformed"),
    ];
    for (case, token, says) in cases {
        let response = server
            .http
            .post(server.url("/sync/pull"))
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .body(json!({"clientId": client(1), "cursor": null}).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{case}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["code"], "unauthenticated", "{case}: {body}");
        let detail = body["detail"].as_str().unwrap();
        assert!(detail.contains(says), "{case}: the detail says `{says}`: {detail}");
        assert!(!body.to_string().contains(&token), "{case}: the token is not echoed: {body}");
    }
    let (status, body) = {
        let response = server.http.post(server.url("/sync/pull")).body("{}").send().await.unwrap();
        (response.status(), response.json::<Value>().await.unwrap())
    };
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(body["detail"].as_str().unwrap().contains("Authorization: Bearer"), "{body}");
}

#[tokio::test]
async fn rejected_and_forbidden_mutations_are_logged_with_actor_mutator_and_code() {
    let db = TestDb::new().await;
    let storage = store(&db).await;
    let (logs, _guard) = Logs::capture();
    let setup = vec![
        mutation(1, "create_list", json!({"id": "l1", "title": "groceries"})),
        mutation(2, "share_list", json!({"list_id": "l1", "user_id": "bob", "role": "editor"})),
        mutation(3, "add_note", json!({"list_id": "nowhere", "title": "secret-title-xyz"})),
    ];
    let statuses = push(&storage, "alice", 1, setup).await;
    assert_eq!(statuses, [MutationStatus::Applied, MutationStatus::Applied, MutationStatus::Rejected]);
    let sneaky = vec![mutation(1, "share_list", json!({"list_id": "l1", "user_id": "mallory", "role": "editor"}))];
    assert_eq!(push(&storage, "bob", 2, sneaky).await, [MutationStatus::Rejected]);

    let rejected = logs.lines_with(&["mutation rejected", "user=\"alice\"", "mutator=\"add_note\""]);
    assert_eq!(rejected.len(), 1, "{}", logs.text());
    assert!(rejected[0].contains(&ErrorCode::MutatorFailed.to_string()), "the code: {}", rejected[0]);
    assert!(rejected[0].contains("no list"), "the detail: {}", rejected[0]);
    let forbidden = logs.lines_with(&["mutation forbidden", "user=\"bob\"", "mutator=\"share_list\""]);
    assert_eq!(forbidden.len(), 1, "{}", logs.text());
    assert!(forbidden[0].contains("WARN"), "{}", forbidden[0]);
    assert!(forbidden[0].contains("forbidden"), "{}", forbidden[0]);
    assert!(!logs.text().contains("secret-title-xyz"), "arguments are never logged: {}", logs.text());
    assert!(!logs.text().contains("mallory"), "arguments are never logged: {}", logs.text());
}
