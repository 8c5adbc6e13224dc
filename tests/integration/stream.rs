//! `/sync/stream` over real WebSockets: authentication, pings after commit, bucket-set changes,
//! limits, presence; and several server processes on one Postgres, through `LISTEN`/`NOTIFY` or NATS.

use std::time::Duration;

use engine::server::PresenceSettings;
use engine::server::StreamLimits;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::support::nats::NatsServer;
use crate::support::notes::accept;
use crate::support::partition::Partition;
use crate::support::process::ServerProcess;
use crate::support::ws::{Auth, Ws};
use crate::support::{TestDb, TestServer, postgres_only};

const SECOND: Duration = Duration::from_secs(1);
const CLIENT: &str = "0192f0e0-0000-7000-8000-000000000001";

fn push_body(mutations: &[(u64, &str, Value)]) -> String {
    let mutations: Vec<Value> = mutations
        .iter()
        .map(|(id, name, args)| json!({"mutationId": id, "clientMutationId": uuid::Uuid::new_v4(), "name": name, "args": args}))
        .collect();
    json!({"clientId": CLIENT, "mutations": mutations}).to_string()
}

/// Push as `user` (client `CLIENT`), asserting every mutation applied.
async fn push(base: &str, user: &str, mutations: &[(u64, &str, Value)]) {
    let response = reqwest::Client::new()
        .post(format!("{base}/sync/push"))
        .bearer_auth(TestServer::token(user))
        .body(push_body(mutations))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert!(body["results"].as_array().unwrap().iter().all(|r| r["status"] == "applied"), "{body}");
}

async fn pull(base: &str, user: &str) -> Value {
    reqwest::Client::new()
        .post(format!("{base}/sync/pull"))
        .bearer_auth(TestServer::token(user))
        .body(json!({"clientId": CLIENT}).to_string())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn base(server: &TestServer) -> String {
    server.url("")
}

fn limits() -> StreamLimits {
    let mut limits = StreamLimits::default();
    limits.max_frame_bytes = 1024;
    limits.frames_per_second = 5;
    limits.frame_burst = 5;
    limits.auth_deadline = Duration::from_millis(500);
    limits
}

#[tokio::test]
async fn a_socket_authenticates_by_header_subprotocol_or_first_frame() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b.stream_limits(limits())).await;
    push(&base(&server), "alice", &[(1, "create_list", json!({"id": "l1", "title": "t"}))]).await;
    let token = TestServer::token("alice");
    let mut by_header = Ws::connect(server.addr, Auth::Header(&token)).await.unwrap();
    let mut by_protocol = Ws::connect(server.addr, Auth::Subprotocol(&token)).await.unwrap();
    let mut by_frame = Ws::connect(server.addr, Auth::None).await.unwrap();
    by_frame.send(json!({"type": "auth", "token": token})).await;
    for socket in [&mut by_header, &mut by_protocol, &mut by_frame] {
        let mut buckets: Vec<String> = Vec::new();
        for _ in 0..4 {
            let state = socket.expect("presence_state", SECOND).await;
            buckets.push(state["bucket"].as_str().unwrap().to_owned());
        }
        buckets.sort();
        assert_eq!(
            buckets,
            ["invitations/alice", "memberships/alice", "own/alice", "shared/l1"],
            "presence_state of every bucket after connecting"
        );
    }
    assert_eq!(Ws::connect(server.addr, Auth::Header("bad")).await.err(), Some(401));
    assert_eq!(Ws::connect(server.addr, Auth::Subprotocol("bad")).await.err(), Some(401));
    let mut silent = Ws::connect_silent(server.addr, Auth::None).await.unwrap();
    assert_eq!(
        silent.closed(2 * SECOND).await,
        (Some("unauthenticated".into()), Some(1008)),
        "no auth frame within the deadline"
    );
    let mut wrong = Ws::connect(server.addr, Auth::None).await.unwrap();
    wrong.send(json!({"type": "auth", "token": "bad"})).await;
    assert_eq!(wrong.closed(SECOND).await, (Some("unauthenticated".into()), Some(1008)));
}

#[tokio::test]
async fn pings_follow_commits_coalesced_and_the_pull_they_trigger_sees_the_change() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    push(&base(&server), "alice", &[(1, "create_list", json!({"id": "l1", "title": "t"}))]).await;
    let token = TestServer::token("alice");
    let mut socket = Ws::connect(server.addr, Auth::Header(&token)).await.unwrap();
    socket.drain(Duration::from_millis(300)).await;
    let notes: Vec<(u64, &str, Value)> =
        (2..7).map(|i| (i, "add_note", json!({"id": format!("n{i}"), "list_id": "l1", "title": "x"}))).collect();
    push(&base(&server), "alice", &notes).await;
    let frames = socket.drain(Duration::from_millis(500)).await;
    let mut pinged: Vec<&str> =
        frames.iter().filter(|f| f["type"] == "ping").map(|f| f["bucket"].as_str().unwrap()).collect();
    pinged.sort();
    assert_eq!(pinged, ["shared/l1"], "five commits, one ping per bucket: {frames:?}");
    let pulled = pull(&base(&server), "alice").await;
    assert_eq!(
        pulled["changes"].as_array().unwrap().iter().filter(|c| c["table"] == "notes").count(),
        5,
        "the pinged pull sees the notes"
    );
    // A ping carries only its bucket.
    let ping = frames.iter().find(|f| f["type"] == "ping").unwrap();
    assert_eq!(ping.as_object().unwrap().len(), 2);
}

#[tokio::test]
async fn membership_granted_and_revoked_while_connected_moves_the_bucket_set() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    push(&base(&server), "alice", &[(1, "create_list", json!({"id": "l1", "title": "t"}))]).await;
    let carol_token = TestServer::token("carol");
    let mut carol = Ws::connect(server.addr, Auth::Header(&carol_token)).await.unwrap();
    carol.drain(Duration::from_millis(300)).await;
    push(&base(&server), "alice", &[(2, "share_list", json!({"list_id": "l1", "user_id": "carol", "role": "viewer"}))])
        .await;
    accept(&base(&server), "carol", "l1").await;
    carol.expect("buckets_changed", 2 * SECOND).await;
    let state = carol.expect("presence_state", SECOND).await;
    assert_eq!(state["bucket"], "shared/l1", "the new bucket's presence");
    push(&base(&server), "alice", &[(3, "add_note", json!({"id": "n1", "list_id": "l1", "title": "for carol"}))]).await;
    // Past the pings of `invitations/carol`, which the share and its acceptance changed.
    while carol.expect("ping", 2 * SECOND).await["bucket"] != "shared/l1" {}
    push(&base(&server), "alice", &[(4, "unshare_list", json!({"list_id": "l1", "user_id": "carol"}))]).await;
    carol.expect("buckets_changed", 2 * SECOND).await;
    push(&base(&server), "alice", &[(5, "add_note", json!({"id": "n2", "list_id": "l1", "title": "not for carol"}))])
        .await;
    let frames = carol.drain(Duration::from_millis(500)).await;
    assert!(
        !frames.iter().any(|f| f["type"] == "ping" && f["bucket"] == "shared/l1"),
        "no more pings after revocation: {frames:?}"
    );
}

/// Pull as `user` from `cursor`: the rows of `table` it carries, and the next cursor.
async fn pull_rows(base: &str, user: &str, cursor: Option<&str>, table: &str) -> (Vec<Value>, String) {
    let body: Value = reqwest::Client::new()
        .post(format!("{base}/sync/pull"))
        .bearer_auth(TestServer::token(user))
        .body(json!({"clientId": CLIENT, "cursor": cursor}).to_string())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rows =
        body["changes"].as_array().unwrap().iter().filter(|c| c["table"] == table).map(|c| c["row"].clone()).collect();
    (rows, body["cursor"].as_str().unwrap().to_owned())
}

#[tokio::test]
async fn a_new_member_gets_the_rows_of_the_share_without_a_later_write() {
    if postgres_only("a horizon held back by a running transaction is Postgres'") {
        return;
    }
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    push(&base(&server), "alice", &[(1, "create_list", json!({"id": "l1", "title": "t"}))]).await;
    let carol_token = TestServer::token("carol");
    let mut carol = Ws::connect(server.addr, Auth::Header(&carol_token)).await.unwrap();
    carol.drain(Duration::from_millis(300)).await;
    // A transaction of the same database holds the horizon below the share while it runs.
    let mut blocker = db.pg().begin().await.unwrap();
    sqlx::query("SELECT pg_current_xact_id()").execute(&mut *blocker).await.unwrap();
    push(&base(&server), "alice", &[(2, "share_list", json!({"list_id": "l1", "user_id": "carol", "role": "viewer"}))])
        .await;
    accept(&base(&server), "carol", "l1").await;
    carol.expect("buckets_changed", 2 * SECOND).await;
    let (lists, cursor) = pull_rows(&base(&server), "carol", None, "lists").await;
    assert_eq!(lists.len(), 1, "the list, written before the horizon, is back-filled: {lists:?}");
    let (members, _) = pull_rows(&base(&server), "carol", None, "list_members").await;
    assert!(
        !members.iter().any(|m| m["user_id"] == "carol"),
        "the share's own row is above the horizon while the other transaction runs: {members:?}"
    );
    blocker.commit().await.unwrap();
    // No later write: the ping held for the acceptance's transaction reaches the new member
    // (past those of `invitations/carol`, which the share and the acceptance changed).
    while carol.expect("ping", 5 * SECOND).await["bucket"] != "shared/l1" {}
    let (members, _) = pull_rows(&base(&server), "carol", Some(&cursor), "list_members").await;
    assert!(members.iter().any(|m| m["user_id"] == "carol"), "the share's own row arrives: {members:?}");
}

#[tokio::test]
async fn subscribing_to_a_bucket_the_actor_does_not_hold_is_refused() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    push(&base(&server), "alice", &[(1, "create_list", json!({"id": "l1", "title": "t"}))]).await;
    let bob_token = TestServer::token("bob");
    let mut bob = Ws::connect(server.addr, Auth::Header(&bob_token)).await.unwrap();
    bob.send(json!({"type": "subscribe", "buckets": ["shared/l1"]})).await;
    assert_eq!(bob.closed(SECOND).await, (Some("forbidden".into()), Some(1008)));
    let alice_token = TestServer::token("alice");
    let mut alice = Ws::connect(server.addr, Auth::Header(&alice_token)).await.unwrap();
    alice.send(json!({"type": "subscribe", "buckets": ["shared/l1"]})).await;
    push(&base(&server), "alice", &[(2, "add_note", json!({"id": "n", "list_id": "l1", "title": "x"}))]).await;
    let pings: Vec<Value> =
        alice.drain(Duration::from_millis(500)).await.into_iter().filter(|f| f["type"] == "ping").collect();
    assert_eq!(pings, vec![json!({"type": "ping", "bucket": "shared/l1"})], "only the subscribed bucket");
}

#[tokio::test]
async fn a_misbehaving_socket_is_closed_and_the_others_go_on() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b.stream_limits(limits())).await;
    push(&base(&server), "alice", &[(1, "create_list", json!({"id": "l1", "title": "t"}))]).await;
    let token = TestServer::token("alice");
    let mut good = Ws::connect(server.addr, Auth::Header(&token)).await.unwrap();
    good.drain(Duration::from_millis(200)).await;
    let cases: Vec<(Message, &str, u16)> = vec![
        (Message::Text("not json".into()), "malformed_request", 1008),
        (Message::Text(r#"{"type":"track"}"#.into()), "malformed_request", 1008),
        (Message::Text(r#"{"type":"teleport"}"#.into()), "unknown_frame", 1003),
        (Message::Binary(vec![1, 2, 3].into()), "unknown_frame", 1003),
        (
            Message::Text(format!(r#"{{"type":"heartbeat","pad":"{}"}}"#, "x".repeat(4096)).into()),
            "frame_too_large",
            1009,
        ),
    ];
    for (message, code, close) in cases {
        let mut bad = Ws::connect(server.addr, Auth::Header(&token)).await.unwrap();
        bad.send_raw(message).await;
        assert_eq!(bad.closed(SECOND).await, (Some(code.into()), Some(close)), "{code}");
    }
    let mut flooding = Ws::connect(server.addr, Auth::Header(&token)).await.unwrap();
    for _ in 0..20 {
        flooding.send_raw(Message::Text(r#"{"type":"heartbeat"}"#.into())).await;
    }
    assert_eq!(flooding.closed(SECOND).await, (Some("rate_limited".into()), Some(1008)));
    push(&base(&server), "alice", &[(2, "add_note", json!({"id": "n", "list_id": "l1", "title": "x"}))]).await;
    assert_eq!(good.expect("ping", 2 * SECOND).await["type"], "ping", "the well-behaved socket still gets pings");
}

/// A server that allows 800 ms of silence, and a token of alice's that expires one to two
/// seconds from now (a token's expiry is in whole seconds).
async fn short_silence_and_token(db: &TestDb) -> (TestServer, String) {
    let mut presence = PresenceSettings::default();
    presence.heartbeat_timeout = Duration::from_millis(800);
    let server = TestServer::start(db, |b| b.presence(presence)).await;
    (server, token_for("alice", 2))
}

fn token_for(user: &str, seconds: u64) -> String {
    engine::auth::issue_bearer_token(user, user, crate::support::server::SECRET, Duration::from_secs(seconds)).unwrap()
}

#[tokio::test]
async fn an_expired_token_or_silence_closes_the_socket() {
    let db = TestDb::new().await;
    let (server, short) = short_silence_and_token(&db).await;
    // It heartbeats, so silence is not what closes it.
    let mut expiring = Ws::connect(server.addr, Auth::Header(&short)).await.unwrap();
    assert_eq!(expiring.closed(4 * SECOND).await, (Some("unauthenticated".into()), Some(1008)));
    // Silent as a client whose network is gone: it reads nothing, so it answers no ping either.
    let token = TestServer::token("alice");
    let mut silent = Ws::connect_silent(server.addr, Auth::Header(&token)).await.unwrap();
    tokio::time::sleep(2 * SECOND).await;
    assert_eq!(silent.closed(SECOND).await, (Some("heartbeat_timeout".into()), Some(1001)));
}

/// A client that sends nothing of its own stays as long as its WebSocket answers the pings the
/// server sends after a third of the allowed silence: a browser's hidden tab, whose timers run
/// late, keeps its presence.
#[tokio::test]
async fn a_socket_that_answers_the_servers_pings_stays_open() {
    let db = TestDb::new().await;
    let (server, _) = short_silence_and_token(&db).await;
    let mut quiet = Ws::connect_silent(server.addr, Auth::Header(&TestServer::token("alice"))).await.unwrap();
    // Reading answers the pings (tungstenite sends the pong).
    let open = quiet.closed(Duration::from_millis(2500)).await;
    assert_eq!(open, (None, None), "open for three times the allowed silence");
}

/// The socket's timers are moved, not made afresh at every frame: a fresh token moves the
/// expiry to its own, and heartbeats keep a socket open for many times the silence it is
/// allowed.
#[tokio::test]
async fn a_fresh_token_moves_the_expiry_and_heartbeats_keep_the_socket_open() {
    let db = TestDb::new().await;
    let (server, short) = short_silence_and_token(&db).await;
    let mut socket = Ws::connect(server.addr, Auth::Header(&short)).await.unwrap();
    socket.send(json!({"type": "auth", "token": token_for("alice", 4)})).await;
    let open = socket.closed(Duration::from_millis(2500)).await;
    assert_eq!(open, (None, None), "open past the first token's expiry and three times the allowed silence");
    push(&base(&server), "alice", &[(1, "create_list", json!({"id": "l1", "title": "t"}))]).await;
    // The list's row pings `own/alice`; its owner's membership, `memberships/alice` too.
    while socket.expect("ping", 2 * SECOND).await["bucket"] != "own/alice" {}
    let closed = socket.closed(3 * SECOND).await;
    assert_eq!(closed, (Some("unauthenticated".into()), Some(1008)), "closed at the fresh token's expiry");
}

#[tokio::test]
async fn presence_state_and_diffs_carry_one_meta_per_connection() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    push(
        &base(&server),
        "alice",
        &[
            (1, "create_list", json!({"id": "l1", "title": "t"})),
            (2, "share_list", json!({"list_id": "l1", "user_id": "bob", "role": "editor"})),
        ],
    )
    .await;
    accept(&base(&server), "bob", "l1").await;
    let (alice_token, bob_token) = (TestServer::token("alice"), TestServer::token("bob"));
    let mut alice_a = Ws::connect(server.addr, Auth::Header(&alice_token)).await.unwrap();
    let mut alice_b = Ws::connect(server.addr, Auth::Header(&alice_token)).await.unwrap();
    let mut bob = Ws::connect(server.addr, Auth::Header(&bob_token)).await.unwrap();
    bob.drain(Duration::from_millis(300)).await;
    alice_a.send(json!({"type": "track", "bucket": "shared/l1", "meta": {"device": "phone"}})).await;
    alice_b.send(json!({"type": "track", "bucket": "shared/l1", "meta": {"device": "laptop"}})).await;
    let mut metas = Vec::new();
    for _ in 0..2 {
        let diff = bob.expect("presence_diff", 2 * SECOND).await;
        assert_eq!(diff["bucket"], "shared/l1");
        metas.push(diff["joins"]["alice"][0].clone());
    }
    assert!(metas.iter().all(|m| m["presenceRef"].as_str().is_some_and(|r| !r.is_empty())));
    let mut devices: Vec<&str> = metas.iter().map(|m| m["device"].as_str().unwrap()).collect();
    devices.sort();
    assert_eq!(devices, ["laptop", "phone"]);
    let mut late = Ws::connect(server.addr, Auth::Header(&bob_token)).await.unwrap();
    let state = loop {
        let state = late.expect("presence_state", SECOND).await;
        if state["bucket"] == "shared/l1" {
            break state;
        }
    };
    assert_eq!(state["state"]["alice"].as_array().unwrap().len(), 2, "several metas under one key: {state}");
    alice_a.send(json!({"type": "untrack", "bucket": "shared/l1"})).await;
    let leave = bob.expect("presence_diff", 2 * SECOND).await;
    assert_eq!(leave["leaves"]["alice"][0]["device"], "phone");
    drop(alice_b);
    let leave = bob.expect("presence_diff", 2 * SECOND).await;
    assert_eq!(leave["leaves"]["alice"][0]["device"], "laptop", "a closed connection leaves");
    let mut intruder = Ws::connect(server.addr, Auth::Header(&TestServer::token("eve"))).await.unwrap();
    intruder.send(json!({"type": "track", "bucket": "shared/l1", "meta": {}})).await;
    assert_eq!(intruder.closed(SECOND).await, (Some("forbidden".into()), Some(1008)));
}

/// What is left of three server processes on one database after [`three_then_one_killed`]: B and
/// C, and a socket on C of Bob, a member of the list `l1`.
struct Survivors {
    b: ServerProcess,
    c: ServerProcess,
    on_c: Ws,
}

/// The heartbeat timeout of the processes of [`three_then_one_killed`].
const HEARTBEAT: Duration = Duration::from_millis(1200);

fn process_url(process: &ServerProcess) -> String {
    format!("http://{}", process.addr)
}

/// Three server processes A, B and C on `db`, started with `env`: a push on A pings a subscriber
/// on C, presence tracked on A appears on B, on C and for a new socket on C, and once A is killed
/// its presences leave B and C after the heartbeat timeout.
async fn three_then_one_killed(db: &TestDb, env: &[(&str, String)]) -> Survivors {
    let mut a = ServerProcess::start_with(&db.url, HEARTBEAT, 0, env).await;
    let b = ServerProcess::start_with(&db.url, HEARTBEAT, 0, env).await;
    let c = ServerProcess::start_with(&db.url, HEARTBEAT, 0, env).await;
    push(
        &process_url(&a),
        "alice",
        &[
            (1, "create_list", json!({"id": "l1", "title": "t"})),
            (2, "share_list", json!({"list_id": "l1", "user_id": "bob", "role": "editor"})),
        ],
    )
    .await;
    accept(&process_url(&a), "bob", "l1").await;
    let (alice, bob) = (TestServer::token("alice"), TestServer::token("bob"));
    let mut on_c = Ws::connect(c.addr, Auth::Header(&bob)).await.unwrap();
    let mut on_b = Ws::connect(b.addr, Auth::Header(&bob)).await.unwrap();
    on_c.drain(Duration::from_millis(300)).await;
    on_b.drain(Duration::from_millis(100)).await;

    // A push on A pings a subscriber on C.
    push(&process_url(&a), "alice", &[(3, "add_note", json!({"id": "n1", "list_id": "l1", "title": "x"}))]).await;
    assert_eq!(on_c.expect("ping", 3 * SECOND).await["bucket"], "shared/l1");

    // Presence tracked on A appears on B and C.
    let mut on_a = Ws::connect(a.addr, Auth::Header(&alice)).await.unwrap();
    on_a.send(json!({"type": "track", "bucket": "shared/l1", "meta": {"where": "a"}})).await;
    for socket in [&mut on_b, &mut on_c] {
        let diff = socket.expect("presence_diff", 3 * SECOND).await;
        assert_eq!(diff["joins"]["alice"][0]["where"], "a");
    }
    let mut late = Ws::connect(c.addr, Auth::Header(&bob)).await.unwrap();
    let state = loop {
        let state = late.expect("presence_state", 2 * SECOND).await;
        if state["bucket"] == "shared/l1" {
            break state;
        }
    };
    assert_eq!(state["state"]["alice"][0]["where"], "a", "a new socket on C sees presence kept on A");

    // A dies without a word: its presences leave, on B and on C, after the timeout.
    a.kill().await;
    for socket in [&mut on_b, &mut on_c] {
        let diff = socket.expect("presence_diff", 5 * SECOND).await;
        assert_eq!(diff["leaves"]["alice"][0]["where"], "a", "{diff}");
    }
    Survivors { b, c, on_c }
}

#[tokio::test]
async fn three_server_processes_share_pings_and_presence_through_postgres() {
    if postgres_only("LISTEN/NOTIFY across server processes") {
        return;
    }
    let db = TestDb::new().await;
    let Survivors { b, c: _c, mut on_c } = three_then_one_killed(&db, &[]).await;

    // The listeners' sessions are cut: a push made meanwhile still reaches C.
    let cut: i64 = sqlx::query_scalar(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'engine-listener' AND datname = $1",
    )
    .bind(&db.name)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert!(cut >= 2, "the listeners of B and C were cut ({cut})");
    push(&process_url(&b), "alice", &[(4, "add_note", json!({"id": "n2", "list_id": "l1", "title": "y"}))]).await;
    let frames = on_c.drain(5 * SECOND).await;
    assert!(frames.iter().any(|f| f["type"] == "ping" && f["bucket"] == "shared/l1"), "no ping lost: {frames:?}");
}

/// Issue 37: a membership signal that went unanswered (the pushing process's realtime sessions
/// cut, and no new one answering for a while) made that process's sockets recompute, but another
/// process's sockets kept the revoked bucket's presence diffs until their next signal. The
/// signal is published again in the background until it goes through.
#[tokio::test]
async fn a_membership_signal_that_went_unanswered_reaches_the_other_processes() {
    if postgres_only("LISTEN/NOTIFY across server processes") {
        return;
    }
    let db = TestDb::new().await;
    let partition = Partition::start(&db.url).await;
    let realtime = engine::realtime::listen_notify(partition.url()).lost_after(SECOND);
    let a = TestServer::start(&db, |b| b.realtime(realtime)).await;
    let b = ServerProcess::start(&db.url, 30 * SECOND).await;
    share_with_carol(&a).await;
    let (alice, carol) = (TestServer::token("alice"), TestServer::token("carol"));
    let mut carol_on_b = Ws::connect(b.addr, Auth::Header(&carol)).await.unwrap();
    let mut alice_on_b = Ws::connect(b.addr, Auth::Header(&alice)).await.unwrap();
    let frames = carol_on_b.drain(Duration::from_millis(300)).await;
    assert!(frames.iter().any(|f| f["bucket"] == "shared/l1"), "Carol follows the list: {frames:?}");
    alice_on_b.drain(Duration::from_millis(100)).await;

    // A's realtime sessions are cut, and new ones too for a while: its notification of the
    // revocation goes unanswered.
    partition.hold();
    let revoke = [(3, "unshare_list", json!({"list_id": "l1", "user_id": "carol"}))];
    tokio::time::timeout(30 * SECOND, push(&base(&a), "alice", &revoke)).await.expect("the push is answered");
    let frames = carol_on_b.drain(2 * SECOND).await;
    assert!(!frames.iter().any(|f| f["type"] == "buckets_changed"), "the signal went unanswered: {frames:?}");
    partition.release();
    // Carol's socket on B is told once the signal goes through, and hears no more of the list.
    until(&mut carol_on_b, 20 * SECOND, |f| f["type"] == "buckets_changed").await;
    alice_on_b.send(json!({"type": "track", "bucket": "shared/l1", "meta": {"where": "b"}})).await;
    assert_eq!(alice_on_b.expect("presence_diff", 3 * SECOND).await["bucket"], "shared/l1");
    let frames = carol_on_b.drain(SECOND).await;
    assert!(!frames.iter().any(|f| f["bucket"] == "shared/l1"), "{frames:?}");
}

/// Issue 37, finding 7: a client that syncs only some of its buckets was sent the presence of
/// every bucket its actor held on each connection before its `subscribe` narrowed it (300 lists
/// shared by another account: 5.1 MB). Connected with `follow=subscription`, a socket follows
/// nothing, and is sent no presence, until its `subscribe`; then the state of what it follows.
#[tokio::test]
async fn a_socket_that_follows_its_subscription_gets_presence_only_of_what_it_subscribes() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let lists = [
        (1, "create_list", json!({"id": "l1", "title": "t"})),
        (2, "create_list", json!({"id": "l2", "title": "t"})),
        (3, "create_list", json!({"id": "l3", "title": "t"})),
    ];
    push(&base(&server), "alice", &lists).await;
    let token = TestServer::token("alice");
    let mut plain = Ws::connect(server.addr, Auth::Header(&token)).await.unwrap();
    let told = plain.drain(Duration::from_millis(300)).await;
    let states = told.iter().filter(|f| f["type"] == "presence_state").count();
    assert!(states >= 4, "every bucket held: {told:?}");

    let mut narrow =
        Ws::connect_at(server.addr, "/sync/stream?follow=subscription", Auth::Header(&token)).await.unwrap();
    let told = narrow.drain(Duration::from_millis(300)).await;
    assert!(told.is_empty(), "nothing before the subscription: {told:?}");
    // Nothing is followed yet: a change of a list pings no one here.
    push(&base(&server), "alice", &[(4, "add_note", json!({"id": "n1", "list_id": "l1", "title": "x"}))]).await;
    let told = narrow.drain(Duration::from_millis(300)).await;
    assert!(told.is_empty(), "{told:?}");
    narrow.send(json!({"type": "subscribe", "buckets": ["shared/l1"]})).await;
    let told = narrow.drain(Duration::from_millis(300)).await;
    let states: Vec<&Value> = told.iter().filter(|f| f["type"] == "presence_state").map(|f| &f["bucket"]).collect();
    assert_eq!(states, ["shared/l1"], "{told:?}");
    push(&base(&server), "alice", &[(5, "add_note", json!({"id": "n2", "list_id": "l1", "title": "y"}))]).await;
    assert_eq!(narrow.expect("ping", 2 * SECOND).await["bucket"], "shared/l1");
}

/// The first frame of `socket` within `wait` that `wanted` takes, and every frame before it.
async fn until(socket: &mut Ws, wait: Duration, wanted: impl Fn(&Value) -> bool) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + wait;
    let mut frames = Vec::new();
    while let Some(frame) = socket.next(deadline.saturating_duration_since(tokio::time::Instant::now())).await {
        let done = wanted(&frame);
        frames.push(frame);
        if done {
            return frames;
        }
    }
    panic!("no frame wanted within {wait:?}: {frames:?}");
}

/// The same three processes through a NATS server of the test's own; then NATS is killed, B takes
/// a push meanwhile and is killed too, with the push's ping still in its client's buffer, and
/// NATS is started again: C pings its socket once it is back (every socket resyncs), and a new
/// instance's presence reaches C.
#[tokio::test]
async fn three_server_processes_share_pings_and_presence_through_nats() {
    if postgres_only("several server processes cannot share one SQLite file") {
        return;
    }
    let db = TestDb::new().await;
    let mut nats = NatsServer::start().await;
    let env = [("NATS_URL", nats.url())];
    let Survivors { mut b, c, mut on_c } = three_then_one_killed(&db, &env).await;

    nats.stop().await;
    let add = [(4, "add_note", json!({"id": "n2", "list_id": "l1", "title": "y"}))];
    tokio::time::timeout(30 * SECOND, push(&process_url(&b), "alice", &add)).await.expect("the push is answered");
    b.kill().await;
    nats.restart().await;
    until(&mut on_c, 15 * SECOND, |f| f["type"] == "ping" && f["bucket"] == "shared/l1").await;

    let d = ServerProcess::start_with(&db.url, HEARTBEAT, 0, &env).await;
    let bob = TestServer::token("bob");
    let mut on_d = Ws::connect(d.addr, Auth::Header(&bob)).await.unwrap();
    on_d.send(json!({"type": "track", "bucket": "shared/l1", "meta": {"where": "d"}})).await;
    until(&mut on_c, 10 * SECOND, |f| f["type"] == "presence_diff" && f["joins"]["bob"][0]["where"] == "d").await;
    drop(c);
}

/// NATS realtime needs no particular store: one server on either backend pings and shares
/// presence through it (`listen_notify` is refused on SQLite).
#[tokio::test]
async fn nats_realtime_serves_a_server_on_either_store() {
    let db = TestDb::new().await;
    let nats = NatsServer::start().await;
    let url = nats.url();
    let server = TestServer::start(&db, |b| b.realtime(engine::realtime::nats(url).prefix("either"))).await;
    let create = [
        (1, "create_list", json!({"id": "l1", "title": "t"})),
        (2, "share_list", json!({"list_id": "l1", "user_id": "bob", "role": "editor"})),
    ];
    push(&base(&server), "alice", &create).await;
    accept(&base(&server), "bob", "l1").await;
    let (alice, bob) = (TestServer::token("alice"), TestServer::token("bob"));
    let mut on_bob = Ws::connect(server.addr, Auth::Header(&bob)).await.unwrap();
    on_bob.drain(Duration::from_millis(300)).await;
    push(&base(&server), "alice", &[(3, "add_note", json!({"id": "n1", "list_id": "l1", "title": "x"}))]).await;
    assert_eq!(on_bob.expect("ping", 3 * SECOND).await["bucket"], "shared/l1");
    let mut on_alice = Ws::connect(server.addr, Auth::Header(&alice)).await.unwrap();
    on_alice.send(json!({"type": "track", "bucket": "shared/l1", "meta": {"where": "here"}})).await;
    let diff = on_bob.expect("presence_diff", 3 * SECOND).await;
    assert_eq!(diff["joins"]["alice"][0]["where"], "here");
}

/// A socket of `user` that sends `frames` while reading everything the server sends, until a
/// frame carrying `marker` comes back (the last frame's meta: by then the server has handled
/// every frame before it). It goes on reading, in the background, until dropped.
struct Flood {
    sink: futures_util::stream::SplitSink<
        tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
        Message,
    >,
    seen: tokio::sync::mpsc::UnboundedReceiver<String>,
    reader: tokio::task::JoinHandle<()>,
}

impl Flood {
    async fn connect(addr: std::net::SocketAddr, user: &str) -> Flood {
        use futures_util::StreamExt;
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let mut request = format!("ws://{addr}/sync/stream").into_client_request().unwrap();
        let headers = request.headers_mut();
        headers.insert("authorization", format!("Bearer {}", TestServer::token(user)).parse().unwrap());
        headers.insert("sec-websocket-protocol", "engine.v1".parse().unwrap());
        let (socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
        let (sink, mut stream) = socket.split();
        let (seen_tx, seen) = tokio::sync::mpsc::unbounded_channel();
        let reader = tokio::spawn(async move {
            while let Some(Ok(message)) = stream.next().await {
                if let Message::Text(text) = message {
                    let _ = seen_tx.send(text.to_string());
                }
            }
        });
        Flood { sink, seen, reader }
    }

    /// Send `frames`, then wait until a frame holding `marker` comes back.
    async fn send_until_echoed(&mut self, frames: impl IntoIterator<Item = Value>, marker: &str) {
        use futures_util::SinkExt;
        for frame in frames {
            self.sink.send(Message::Text(frame.to_string().into())).await.unwrap();
        }
        let deadline = tokio::time::Instant::now() + 20 * SECOND;
        loop {
            let text =
                tokio::time::timeout_at(deadline, self.seen.recv()).await.expect("the marker comes back").unwrap();
            if text.contains(marker) {
                return;
            }
        }
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Every frame until the socket has been quiet for a second.
async fn read_until_quiet(socket: &mut Ws) -> Vec<Value> {
    let mut frames = Vec::new();
    while let Some(frame) = socket.next(SECOND).await {
        frames.push(frame);
    }
    frames
}

/// Alice's list `l1`, shared with Carol as a viewer.
async fn share_with_carol(server: &TestServer) {
    let mutations = [
        (1, "create_list", json!({"id": "l1", "title": "t"})),
        (2, "share_list", json!({"list_id": "l1", "user_id": "carol", "role": "viewer"})),
    ];
    push(&base(server), "alice", &mutations).await;
    accept(&base(server), "carol", "l1").await;
}

fn flood_limits() -> StreamLimits {
    let mut limits = StreamLimits::default();
    limits.frames_per_second = 100_000;
    limits.frame_burst = 100_000;
    limits
}

#[tokio::test]
async fn a_socket_that_fell_behind_learns_of_a_revocation_before_anything_else() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b.stream_limits(flood_limits())).await;
    share_with_carol(&server).await;
    let carol_token = TestServer::token("carol");
    let mut carol = Ws::connect_small_buffer(server.addr, Auth::Header(&carol_token)).await.unwrap();
    carol.expect("presence_state", SECOND).await;
    carol.expect("presence_state", SECOND).await;

    // Carol stops reading while presence in her shared list changes thousands of times: her
    // socket's buffers fill, then its queue overflows.
    let pad = "x".repeat(900);
    let mut flooders = Vec::new();
    for n in 0..3 {
        let mut flooder = Flood::connect(server.addr, "alice").await;
        let frames = (0..800)
            .map(|i| json!({"type": "track", "bucket": "shared/l1", "meta": {"phase": "before", "i": i, "pad": pad}}))
            .chain(std::iter::once(
                json!({"type": "track", "bucket": "shared/l1", "meta": {"phase": format!("flooded-{n}")}}),
            ));
        flooder.send_until_echoed(frames, &format!("flooded-{n}")).await;
        flooders.push(flooder);
    }

    // Meanwhile Carol loses the list, which goes on changing.
    push(&base(&server), "alice", &[(3, "unshare_list", json!({"list_id": "l1", "user_id": "carol"}))]).await;
    push(&base(&server), "alice", &[(4, "add_note", json!({"id": "n1", "list_id": "l1", "title": "secret"}))]).await;
    let after = json!({"type": "track", "bucket": "shared/l1", "meta": {"phase": "after"}});
    flooders[0].send_until_echoed([after], "\"after\"").await;

    // What she reads: what was sent before the loss (the flood, and the resyncs her overflowing
    // queue owed, pings of the list included), then `buckets_changed`, then nothing of the list.
    let frames = read_until_quiet(&mut carol).await;
    let lost = |f: &&Value| f["bucket"] == "shared/l1";
    let changed = frames.iter().position(|f| f["type"] == "buckets_changed");
    let changed = changed.unwrap_or_else(|| panic!("buckets_changed after the revocation ({} frames)", frames.len()));
    assert!(frames[..changed].iter().any(|f| lost(&f)), "the flood reached her before the loss");
    let late: Vec<&Value> = frames[changed..].iter().filter(lost).collect();
    assert!(late.is_empty(), "nothing of the lost bucket after buckets_changed: {late:?}");
    let after: Vec<&Value> = frames.iter().filter(|f| f.to_string().contains("\"after\"")).collect();
    assert!(after.is_empty(), "no presence from after the loss: {after:?}");
}

#[tokio::test]
async fn a_reconnected_realtime_link_recomputes_every_socket_s_buckets() {
    if postgres_only("LISTEN/NOTIFY") {
        return;
    }
    let db = TestDb::new().await;
    let url = db.url.clone();
    let server = TestServer::start(&db, |b| b.realtime(engine::realtime::listen_notify(url))).await;
    share_with_carol(&server).await;
    let carol_token = TestServer::token("carol");
    let mut carol = Ws::connect(server.addr, Auth::Header(&carol_token)).await.unwrap();
    carol.drain(Duration::from_millis(300)).await;
    // Another program revokes Carol: no push, so no signal says so.
    sqlx::query("DELETE FROM list_members WHERE user_id = 'carol'").execute(&db.pool).await.unwrap();
    assert!(carol.drain(Duration::from_millis(300)).await.is_empty());
    // The link's session is cut: signals may have been lost while it was away.
    sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'engine-listener' AND datname = $1",
    )
    .bind(&db.name)
    .execute(&db.pool)
    .await
    .unwrap();
    let frames = carol.drain(5 * SECOND).await;
    let changed = frames.iter().position(|f| f["type"] == "buckets_changed").expect("buckets_changed");
    assert!(!frames[..changed].iter().any(|f| f["bucket"] == "shared/l1"), "{frames:?}");
    assert!(!frames[changed..].iter().any(|f| f["bucket"] == "shared/l1"), "{frames:?}");
    assert!(frames.iter().any(|f| f["type"] == "ping" && f["bucket"] == "own/carol"), "a resync pings: {frames:?}");
}

/// The realtime link's sessions cut without a close: a push whose ping goes out on one is still
/// answered, once the deadline for the notification has passed; the listening session, silent,
/// is asked, does not answer, and another listens in its place; every socket resyncs, and the
/// next push's ping is heard. Without the deadlines the push waited for good and the link stayed
/// deaf.
#[tokio::test]
async fn a_realtime_link_cut_without_a_close_is_given_up_and_listened_to_again() {
    if postgres_only("LISTEN/NOTIFY") {
        return;
    }
    let db = TestDb::new().await;
    let partition = Partition::start(&db.url).await;
    let realtime = engine::realtime::listen_notify(partition.url()).lost_after(SECOND);
    let server = TestServer::start(&db, |b| b.realtime(realtime)).await;
    let token = TestServer::token("alice");
    let mut alice = Ws::connect(server.addr, Auth::Header(&token)).await.unwrap();
    alice.drain(Duration::from_millis(300)).await;
    partition.cut();
    let create = [(1, "create_list", json!({"id": "l1", "title": "t"}))];
    tokio::time::timeout(30 * SECOND, push(&base(&server), "alice", &create)).await.expect("the push is answered");
    let frames = alice.drain(10 * SECOND).await;
    assert!(frames.iter().any(|f| f["type"] == "ping" && f["bucket"] == "own/alice"), "a resync pings: {frames:?}");
    let add = [(2, "add_note", json!({"id": "n1", "list_id": "l1", "title": "u"}))];
    tokio::time::timeout(30 * SECOND, push(&base(&server), "alice", &add)).await.expect("the push is answered");
    let ping = alice.expect("ping", 5 * SECOND).await;
    assert!(ping["bucket"] == "own/alice" || ping["bucket"] == "shared/l1", "{ping}");
}

#[tokio::test]
async fn a_fresh_token_with_other_claims_moves_the_subscription() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let token = TestServer::token("alice");
    let mut socket = Ws::connect(server.addr, Auth::Header(&token)).await.unwrap();
    // Past `invitations/alice`, a bucket of the same user id.
    while socket.expect("presence_state", SECOND).await["bucket"] != "own/alice" {}
    let other_owner =
        engine::auth::issue_bearer_token("alice", "acme", crate::support::server::SECRET, Duration::from_secs(600))
            .unwrap();
    socket.send(json!({"type": "auth", "token": other_owner})).await;
    socket.expect("buckets_changed", 2 * SECOND).await;
    assert_eq!(socket.expect("presence_state", SECOND).await["bucket"], "own/acme");
    push(&base(&server), "alice", &[(1, "create_list", json!({"id": "l1", "title": "t"}))]).await;
    let frames = socket.drain(Duration::from_millis(500)).await;
    assert!(!frames.iter().any(|f| f["bucket"] == "own/alice"), "the old owner's bucket is left: {frames:?}");
}

#[tokio::test]
async fn sockets_waiting_to_authenticate_are_few_per_address_and_read_little() {
    let db = TestDb::new().await;
    let mut limits = limits();
    limits.auth_deadline = Duration::from_secs(5);
    limits.unauthenticated_per_address = 2;
    limits.first_frame_bytes = 4096;
    let server = TestServer::start(&db, |b| b.stream_limits(limits)).await;
    let mut first = Ws::connect_silent(server.addr, Auth::None).await.unwrap();
    let mut second = Ws::connect_silent(server.addr, Auth::None).await.unwrap();
    // A third takes the place of the oldest, which is told to connect again: an attacker holding
    // an address's places does not keep out a client behind the same address (a NAT).
    let mut third = Ws::connect_silent(server.addr, Auth::None).await.expect("a newer socket gets in");
    assert_eq!(first.closed(SECOND).await, (Some("retry_later".into()), Some(1013)));
    let token = TestServer::token("alice");
    let mut with_token = Ws::connect(server.addr, Auth::Header(&token)).await.unwrap();
    with_token.expect("presence_state", SECOND).await;
    second.send(json!({"type": "auth", "token": token})).await;
    second.expect("presence_state", SECOND).await;
    // Authenticated, a socket leaves its place: the next waits beside the third, evicting none.
    let mut fourth = Ws::connect_silent(server.addr, Auth::None).await.unwrap();
    fourth.send(json!({"type": "auth", "token": token})).await;
    fourth.expect("presence_state", SECOND).await;
    // A first frame past the budget is not read: the connection is dropped, unauthenticated.
    third.send_raw(Message::Text(format!(r#"{{"type":"auth","token":"{}"}}"#, "x".repeat(8192)).into())).await;
    let frames = third.drain(SECOND).await;
    assert!(!frames.iter().any(|f| f["type"] == "presence_state"), "{frames:?}");
}

#[tokio::test]
async fn stream_connections_count_against_the_request_rate() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b.limits(engine::limits::Limits::default().rate(1, 2))).await;
    let token = TestServer::token("alice");
    let _a = Ws::connect(server.addr, Auth::Header(&token)).await.unwrap();
    let _b = Ws::connect(server.addr, Auth::Subprotocol(&token)).await.unwrap();
    assert_eq!(Ws::connect(server.addr, Auth::Header(&token)).await.err(), Some(429));
    let mut by_frame = Ws::connect(server.addr, Auth::None).await.unwrap();
    by_frame.send(json!({"type": "auth", "token": token})).await;
    assert_eq!(by_frame.closed(SECOND).await, (Some("rate_limited".into()), Some(1008)));
}

/// A ping window past the longest allowed is refused when the server is built, in the setting's
/// words, before anything is opened.
#[tokio::test]
async fn a_ping_window_past_a_second_is_refused_at_build() {
    let mut limits = StreamLimits::default();
    limits.ping_window = engine::limits::MAX_PING_WINDOW + Duration::from_millis(1);
    let refused = engine::Server::builder().app(example_notes::app()).stream_limits(limits).build().await;
    let Err(refused) = refused else { panic!("a ping window of 1,001 ms was accepted") };
    let message = refused.to_string();
    assert!(message.contains("ping window is at most 1000 ms, not 1001 ms"), "{message}");
}

/// A token whose `exp` lies past any deadline the server keeps (an identity provider's, signed
/// with the right key) serves a socket as any other: its expiry is taken as far off.
#[tokio::test]
async fn a_token_expiring_in_a_distant_future_serves_a_socket() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let distant = token_for("alice", 1 << 63);
    let mut socket = Ws::connect(server.addr, Auth::Header(&distant)).await.unwrap();
    while socket.expect("presence_state", 2 * SECOND).await["bucket"] != "own/alice" {}
    push(&base(&server), "alice", &[(1, "create_list", json!({"id": "l1", "title": "t"}))]).await;
    // The list's row pings `own/alice`; its owner's membership, `memberships/alice` too.
    while socket.expect("ping", 2 * SECOND).await["bucket"] != "own/alice" {}
}
