//! The engine mounted in a host app, over real TCP: no span of its own unless asked, request ids
//! either way, a contract that names the prefix, `TCP_NODELAY` on accepted connections, and host
//! routes that authenticate with the engine's auth.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::routing::get;
use engine::Actor;
use engine::auth::{Authenticated, BearerTokenAuth, EngineAuth};
use engine::server::{BoxFuture, Server, ServerBuilder};
use reqwest::StatusCode;
use serde_json::Value;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

use crate::support::server::SECRET;
use crate::support::ws::{Auth, Ws};
use crate::support::{TestDb, TestServer};

const PULL: &str = r#"{"clientId":"0192f0e0-0000-7000-8000-000000000001"}"#;

/// A server of the notes app on `store` (a test's servers share one: on SQLite one store holds
/// the file).
async fn engine(
    store: &Arc<dyn engine::server::Storage>,
    configure: impl FnOnce(ServerBuilder) -> ServerBuilder,
) -> Server {
    let builder =
        Server::builder().app(example_notes::app()).storage_instance(store.clone()).auth(BearerTokenAuth::new(SECRET));
    configure(builder).build().await.expect("the server builds")
}

/// Records the target and name of every span opened while it is the thread's subscriber (the
/// tests run on a current-thread runtime, so the server's tasks run on the test's thread).
#[derive(Clone, Default)]
struct Spans {
    opened: Arc<Mutex<Vec<String>>>,
    next: Arc<AtomicU64>,
}

impl Spans {
    fn named(&self, target: &str, name: &str) -> usize {
        let wanted = format!("{target} {name}");
        self.opened.lock().unwrap().iter().filter(|span| **span == wanted).count()
    }
}

impl Subscriber for Spans {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let metadata = span.metadata();
        self.opened.lock().unwrap().push(format!("{} {}", metadata.target(), metadata.name()));
        Id::from_u64(self.next.fetch_add(1, Ordering::Relaxed) + 1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[tokio::test]
async fn the_router_opens_no_span_of_its_own_unless_asked_and_answers_request_ids_either_way() {
    let db = TestDb::new().await;
    let store = db.notes().await;
    let spans = Spans::default();
    let _subscriber = crate::support::logs::scoped(spans.clone());
    for trace in [false, true] {
        let engine = engine(&store, |b| b.trace_requests(trace)).await;
        let server = TestServer::serve(Router::new().nest("/sync-api", engine.router())).await;
        let before = spans.named("engine_runtime::http", "request");

        let response = server.post("/sync-api/sync/pull", Some("alice"), PULL).await;
        assert_eq!(response.status(), StatusCode::OK);
        let id = response.headers()["x-request-id"].to_str().unwrap();
        assert!(uuid::Uuid::parse_str(id).is_ok(), "a new request id: {id}");
        let response = server
            .http
            .get(server.url("/sync-api/engine/contract"))
            .header("x-request-id", "host-chosen-id")
            .send()
            .await
            .unwrap();
        assert_eq!(response.headers()["x-request-id"], "host-chosen-id", "the request's own id is kept");

        let opened = spans.named("engine_runtime::http", "request") - before;
        assert_eq!(opened, if trace { 2 } else { 0 }, "spans per request with trace_requests({trace})");
    }
}

async fn served(server: &TestServer, path: &str) -> Value {
    let response = server.http.get(server.url(path)).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK, "{path}");
    response.json().await.unwrap()
}

#[tokio::test]
async fn the_served_contract_names_the_prefix_the_router_is_reached_under() {
    let db = TestDb::new().await;
    let store = db.notes().await;
    let committed: Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/notes/contract.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert!(committed.get("servers").is_none(), "at the root the contract names no prefix");

    let nested = engine(&store, |b| b).await;
    let host =
        Router::new().nest("/sync-api", nested.router()).nest("/outer", Router::new().nest("/inner", nested.router()));
    let server = TestServer::serve(host).await;
    let mut contract = served(&server, "/sync-api/engine/contract").await;
    assert_eq!(contract["servers"], serde_json::json!([{"url": "/sync-api"}]));
    contract.as_object_mut().unwrap().remove("servers");
    assert_eq!(contract, committed, "the rest of the document is the app's contract");
    let contract = served(&server, "/outer/inner/engine/contract").await;
    assert_eq!(contract["servers"], serde_json::json!([{"url": "/outer/inner"}]), "nested twice");

    let behind_a_proxy = engine(&store, |b| b.mount_prefix("/public/sync/")).await;
    let server = TestServer::serve(Router::new().nest("/sync-api", behind_a_proxy.router())).await;
    let contract = served(&server, "/sync-api/engine/contract").await;
    assert_eq!(contract["servers"], serde_json::json!([{"url": "/public/sync"}]), "the builder's prefix wins");
}

#[tokio::test]
async fn connections_accepted_through_tcp_nodelay_do_not_wait_to_send_small_frames() {
    use axum::serve::Listener;
    let bind = || async { tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap() };

    let plain = bind().await;
    let addr = plain.local_addr().unwrap();
    let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (accepted, _) = plain.accept().await.unwrap();
    assert!(!accepted.nodelay().unwrap(), "a plain listener leaves Nagle's algorithm on");

    let listener = bind().await;
    let addr = listener.local_addr().unwrap();
    let mut listener = engine::server::tcp_nodelay(listener);
    let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (accepted, _) = listener.accept().await;
    assert!(accepted.nodelay().unwrap(), "tcp_nodelay turns it off");
}

#[tokio::test]
async fn host_routes_authenticate_with_the_engines_auth_and_refuse_as_it_does() {
    let db = TestDb::new().await;
    let store = db.notes().await;
    let engine = engine(&store, |b| b).await;
    async fn me(Authenticated(actor): Authenticated) -> String {
        format!("{} {}", actor.user_id, actor.owner_id)
    }
    let host = Router::new().route("/me", get(me)).with_state(engine.auth()).nest("/sync-api", engine.router());
    let server = TestServer::serve(host).await;

    let response = server.http.get(server.url("/me")).bearer_auth(TestServer::token("alice")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.text().await.unwrap(), "alice alice");

    for token in [None, Some("not-a-token")] {
        let mut host_request = server.http.get(server.url("/me"));
        let mut engine_request = server.http.post(server.url("/sync-api/sync/pull")).body(PULL);
        if let Some(token) = token {
            host_request = host_request.bearer_auth(token);
            engine_request = engine_request.bearer_auth(token);
        }
        let (host, engine) = (host_request.send().await.unwrap(), engine_request.send().await.unwrap());
        assert_eq!((host.status(), engine.status()), (StatusCode::UNAUTHORIZED, StatusCode::UNAUTHORIZED));
        assert_eq!(host.headers()["content-type"], engine.headers()["content-type"]);
        let (host, engine): (Value, Value) = (host.json().await.unwrap(), engine.json().await.unwrap());
        assert_eq!(host["code"], "unauthenticated");
        assert_eq!(host, engine, "the same problem document");
    }
}

/// A host served on the engine's listener: a request to the host's own route that
/// authenticates ends its connection's count as the engine's routes do, so the connection is
/// kept past `Limits::unauthenticated_deadline`.
#[tokio::test]
async fn a_host_route_that_authenticates_keeps_its_connection_past_the_deadline() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let db = TestDb::new().await;
    let store = db.notes().await;
    let deadline = std::time::Duration::from_millis(300);
    let limits = engine::limits::Limits::default().unauthenticated_deadline(deadline);
    let engine = engine(&store, |b| b.limits(limits)).await;
    async fn me(Authenticated(actor): Authenticated) -> String {
        format!("{} {}", actor.user_id, actor.owner_id)
    }
    let host = Router::new().route("/me", get(me)).with_state(engine.auth()).nest("/sync-api", engine.router());
    let listener = engine.connections(tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap());
    let addr = axum::serve::Listener::local_addr(&listener).unwrap();
    let host = host.into_make_service_with_connect_info::<engine::server::Peer>();
    let _serving = tokio::spawn(async move { axum::serve(listener, host).await });

    let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request =
        format!("GET /me HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer {}\r\n\r\n", TestServer::token("alice"));
    for turn in ["first", "after the deadline"] {
        socket.write_all(request.as_bytes()).await.unwrap();
        let (mut answer, mut chunk) = (Vec::new(), [0; 4096]);
        while !String::from_utf8_lossy(&answer).ends_with("alice alice") {
            let read = tokio::time::timeout(std::time::Duration::from_secs(20), socket.read(&mut chunk)).await;
            let n = read.expect("an answer").unwrap();
            assert!(n > 0, "the connection was closed ({turn}): {}", String::from_utf8_lossy(&answer));
            answer.extend_from_slice(&chunk[..n]);
        }
        assert!(answer.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&answer));
        tokio::time::sleep(deadline * 3).await;
    }
}

/// A host's auth that knows its users by a session cookie (here the cookie names the user).
struct SessionCookies;

impl EngineAuth for SessionCookies {
    fn resolve<'a>(&'a self, request: &'a axum::http::request::Parts) -> BoxFuture<'a, Option<Actor>> {
        Box::pin(async move {
            let cookies = request.headers.get("cookie")?.to_str().ok()?;
            let user = cookies.split(';').find_map(|c| c.trim().strip_prefix("session="))?;
            Some(Actor::new(user, user))
        })
    }

    fn resolve_token<'a>(&'a self, _token: &'a str) -> BoxFuture<'a, Option<Actor>> {
        Box::pin(async { None })
    }
}

#[tokio::test]
async fn the_stream_knows_a_socket_by_the_hosts_own_credentials() {
    let db = TestDb::new().await;
    let store = db.notes().await;
    let engine = engine(&store, |b| b.auth(SessionCookies)).await;
    let server = TestServer::serve(Router::new().nest("/sync-api", engine.router())).await;
    let mut socket = Ws::connect_at(server.addr, "/sync-api/sync/stream", Auth::Cookie("session=alice"))
        .await
        .expect("the stream upgrades");
    let push = r#"{"clientId":"0192f0e0-0000-7000-8000-000000000001","mutations":[{"mutationId":1,"clientMutationId":"0192f0e0-0000-7000-8000-00000000a001","name":"create_list","args":{"title":"Groceries"}}]}"#;
    let response = server
        .http
        .post(server.url("/sync-api/sync/push"))
        .header("cookie", "session=alice")
        .header("content-type", "application/json")
        .body(push)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    // The socket was alice's from its handshake on: her buckets' pings reach it (the list's
    // owner membership pings `memberships/alice` too).
    while socket.expect("ping", std::time::Duration::from_secs(3)).await["bucket"] != "own/alice" {}
}
