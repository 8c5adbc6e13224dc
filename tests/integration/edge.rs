//! The sync server's side of the edge relay (`realtime::edge`): the pings the hub releases after
//! commit are posted, signed, to the relay's `/publish` (here a listener that records what it
//! is sent), and `GET /sync/edge-tickets` issues tickets for the buckets held now, none for a
//! bucket whose membership was revoked. The relay itself runs in the Workers runtime in
//! `clients/typescript/packages/notes/test/edge.test.ts`.

use std::time::Duration;

use axum::http::HeaderMap;
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use tokio::sync::mpsc;

use crate::support::{TestDb, TestServer};

const SOON: Duration = Duration::from_secs(10);
const RELAY_SECRET: &str = "the relay's secret, 16 bytes at least";
const CLIENT: &str = "0192f0e0-0000-7000-8000-00000000e0e0";

/// Hex HMAC-SHA256 of `<kind>\n<message>` under the relay's secret.
fn signature(kind: &str, message: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(RELAY_SECRET.as_bytes()).unwrap();
    mac.update(format!("{kind}\n{message}").as_bytes());
    mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
}

/// A stand-in for the relay's `/publish` that records each publish: its signature and body.
async fn publish_listener() -> (String, mpsc::UnboundedReceiver<(String, String)>) {
    let (sent, received) = mpsc::unbounded_channel();
    let router = axum::Router::new().route(
        "/publish",
        axum::routing::post(move |headers: HeaderMap, body: String| async move {
            let signature = headers.get("x-engine-signature").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
            let _ = sent.send((signature, body));
            axum::http::StatusCode::NO_CONTENT
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (url, received)
}

async fn push(server: &TestServer, user: &str, id: u64, name: &str, args: Value) {
    let mutation = json!({"mutationId": id, "clientMutationId": uuid::Uuid::new_v4(), "name": name, "args": args});
    let response = server
        .http
        .post(server.url("/sync/push"))
        .bearer_auth(TestServer::token(user))
        .body(json!({"clientId": CLIENT, "mutations": [mutation]}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
}

/// `user`'s tickets: the answer, and the buckets it names.
async fn tickets(server: &TestServer, user: &str) -> (Value, Vec<String>) {
    let response =
        server.http.get(server.url("/sync/edge-tickets")).bearer_auth(TestServer::token(user)).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    let buckets =
        answer["tickets"].as_array().unwrap().iter().map(|t| t["bucket"].as_str().unwrap().to_owned()).collect();
    (answer, buckets)
}

#[tokio::test]
async fn released_pings_are_published_signed_and_tickets_follow_memberships() {
    let (relay, mut published) = publish_listener().await;
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b.realtime(engine::realtime::edge(&relay, RELAY_SECRET))).await;

    // A push's pings reach the relay after commit, signed, expiring, each with a nonce.
    push(&server, "alice", 1, "create_list", json!({"id": "l1", "title": "t"})).await;
    let mut relayed = Vec::new();
    while !relayed.contains(&json!("shared/l1")) {
        let (signed, body) = tokio::time::timeout(SOON, published.recv()).await.expect("a publish comes").unwrap();
        assert_eq!(signed, signature("publish", &body), "signed with the relay's secret");
        let publish: Value = serde_json::from_str(&body).unwrap();
        let now_ms = chrono::Utc::now().timestamp_millis();
        assert!(publish["expires"].as_i64().unwrap() > now_ms, "{publish}");
        assert!(!publish["nonce"].as_str().unwrap().is_empty(), "{publish}");
        relayed.extend(publish["buckets"].as_array().unwrap().iter().cloned());
    }

    // Tickets name the buckets held, each signed for its bucket and the answer's expiry.
    let (answer, bob) = tickets(&server, "bob").await;
    assert_eq!(answer["url"], relay);
    assert!(!bob.contains(&"shared/l1".to_owned()), "{answer}");
    push(&server, "alice", 2, "share_list", json!({"list_id": "l1", "user_id": "bob", "role": "viewer"})).await;
    crate::support::notes::accept(&server.url(""), "bob", "l1").await;
    let (answer, bob) = tickets(&server, "bob").await;
    assert!(bob.contains(&"shared/l1".to_owned()), "{answer}");
    let expires_at = chrono::DateTime::parse_from_rfc3339(answer["expiresAt"].as_str().unwrap()).unwrap().timestamp();
    for ticket in answer["tickets"].as_array().unwrap() {
        let bucket = ticket["bucket"].as_str().unwrap();
        let (expires, signed) = ticket["ticket"].as_str().unwrap().split_once('.').unwrap();
        assert_eq!(expires, expires_at.to_string());
        assert_eq!(signed, signature("ticket", &format!("{bucket}\n{expires}")), "{ticket}");
    }

    // Revoked: the bucket's ticket is no longer issued.
    push(&server, "alice", 3, "unshare_list", json!({"list_id": "l1", "user_id": "bob"})).await;
    let (answer, bob) = tickets(&server, "bob").await;
    assert!(!bob.contains(&"shared/l1".to_owned()), "{answer}");
    assert!(bob.contains(&"own/bob".to_owned()), "{answer}");
}

/// A relay's `/publish` that cannot take the first publishes: the first connection is closed as
/// soon as the request is read (no answer), the second is answered `503`, the rest `204`, each
/// of those bodies recorded.
async fn failing_then_taking_listener() -> (String, mpsc::UnboundedReceiver<String>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (sent, received) = mpsc::unbounded_channel();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        for seen in 0.. {
            let (mut socket, _) = listener.accept().await.unwrap();
            let sent = sent.clone();
            tokio::spawn(async move {
                // One request a connection: its head, then as many bytes as its length says.
                let mut read = Vec::new();
                let mut chunk = [0u8; 4096];
                let body = loop {
                    let n = socket.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    read.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&read).into_owned();
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let length = head
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_owned())
                            })
                            .and_then(|v| v.parse::<usize>().ok())
                            .unwrap_or(0);
                        if body.len() >= length {
                            break body.to_owned();
                        }
                    }
                };
                let answer = match seen {
                    0 => return,
                    1 => "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                    _ => {
                        let _ = sent.send(body);
                        "HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n"
                    }
                };
                let _ = socket.write_all(answer.as_bytes()).await;
            });
        }
    });
    (url, received)
}

#[tokio::test]
async fn a_publish_the_relay_could_not_take_is_sent_again() {
    let (relay, mut taken) = failing_then_taking_listener().await;
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b.realtime(engine::realtime::edge(&relay, RELAY_SECRET))).await;

    push(&server, "alice", 1, "create_list", json!({"id": "l1", "title": "t"})).await;
    let mut relayed = Vec::new();
    while !relayed.contains(&json!("shared/l1")) {
        let body = tokio::time::timeout(SOON, taken.recv()).await.expect("a publish is taken in the end").unwrap();
        let publish: Value = serde_json::from_str(&body).unwrap();
        relayed.extend(publish["buckets"].as_array().unwrap().iter().cloned());
    }
}

#[tokio::test]
async fn a_server_without_an_edge_relay_issues_no_tickets() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let response =
        server.http.get(server.url("/sync/edge-tickets")).bearer_auth(TestServer::token("alice")).send().await.unwrap();
    assert_eq!(response.status(), 404);
    let problem: Value = response.json().await.unwrap();
    assert_eq!(problem["code"], "not_found", "{problem}");
    let response = server.http.get(server.url("/sync/edge-tickets")).send().await.unwrap();
    assert_eq!(response.status(), 401, "credentials come first");
}
