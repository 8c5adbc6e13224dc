//! What an operator sees and bounds: refusals and rejections in the logs, retention of tombstones,
//! mutation records, clients and jobs, a held-back horizon, and metrics
//! (`docs/design.md`, operations).

use std::sync::Arc;
use std::time::Duration;

use engine::server::storage::PostgresStorage;
use engine::server::{Retention, Storage};
use engine::wire::{MutationRequest, MutationStatus, PushRequest};
use engine::{Actor, ErrorCode};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::server::SECRET;
use crate::support::{Backend, Logs, TestDb, TestServer, ago, backend, postgres_only};

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

fn client(n: u128) -> uuid::Uuid {
    uuid::Uuid::from_u128(0x0192_f0e0_0000_7000_8000_0000_0000_0000 + n)
}

fn mutation(id: u64, name: &str, args: Value) -> MutationRequest {
    MutationRequest { mutation_id: id, client_mutation_id: uuid::Uuid::new_v4(), name: name.into(), args, hlc: None }
}

async fn store(db: &TestDb) -> Arc<dyn Storage> {
    db.notes().await
}

/// Push `mutations` as `user`'s client `n`; every one is answered.
async fn push(storage: &Arc<dyn Storage>, user: &str, n: u128, mutations: Vec<MutationRequest>) -> Vec<MutationStatus> {
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
    let accepted = vec![mutation(1, "accept_list", json!({"list_id": "l1"}))];
    assert_eq!(push(&storage, "bob", 3, accepted).await, [MutationStatus::Applied]);
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

async fn count(db: &TestDb, sql: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM ({sql}) AS q")))
        .fetch_one(&db.pool)
        .await
        .unwrap()
}

async fn exec(db: &TestDb, sql: &str) {
    sqlx::query(sqlx::AssertSqlSafe(sql.to_owned())).execute(&db.pool).await.unwrap();
}

const DAY: Duration = Duration::from_secs(24 * 3600);

#[tokio::test]
async fn collection_goes_in_bounded_steps_and_an_old_replay_is_a_duplicate_without_outcome() {
    let db = TestDb::new().await;
    let storage = store(&db).await;
    let lists: Vec<MutationRequest> =
        (1..=25).map(|i| mutation(i, "create_list", json!({"id": format!("l{i}"), "title": "t"}))).collect();
    assert!(push(&storage, "alice", 1, lists.clone()).await.iter().all(|s| *s == MutationStatus::Applied));
    let tombstones = match backend() {
        Backend::Postgres => {
            "INSERT INTO _engine_tombstones (table_name, key, buckets) SELECT 'notes', jsonb_build_object('id', i::text), ARRAY['x'] FROM generate_series(1, 35) AS i"
        }
        Backend::Sqlite => {
            "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 35) INSERT INTO _engine_tombstones (table_name, key, old, created_at) SELECT 'notes', json_object('id', CAST(i AS TEXT)), '{}', 0 FROM s"
        }
    };
    exec(&db, tombstones).await;
    exec(&db, &format!("UPDATE _engine_tombstones SET created_at = {}", ago("2 days"))).await;
    exec(&db, &format!("UPDATE _engine_mutations SET applied_at = {} WHERE mutation_id <= 20", ago("2 days"))).await;

    let retention = Retention::default().tombstones(DAY).mutations(DAY).batch(10);
    let collected = storage.collect_garbage(&retention).await.unwrap();
    assert!(!collected.skipped);
    assert_eq!((collected.tombstones, collected.mutations, collected.clients), (35, 20, 0), "{collected:?}");
    // 35 tombstones are 4 steps and one that finds nothing; 20 records, 2 and 1.
    assert!(collected.steps >= 5 + 3, "{collected:?}");
    assert_eq!(count(&db, "SELECT 1 FROM _engine_tombstones").await, 0);
    assert_eq!(count(&db, "SELECT 1 FROM _engine_mutations").await, 5);
    let horizon: String = sqlx::query_scalar("SELECT value FROM _engine_meta WHERE key = 'tombstone_horizon'")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert!(horizon.parse::<u64>().unwrap() > 0, "cursors before the collected tombstones reset");

    // A lost response replayed after its record went: a duplicate, applied once, no outcome.
    let alice = Actor::new("alice", "alice");
    let replay = |m: &MutationRequest| PushRequest { client_id: client(1), mutations: vec![m.clone()] };
    let old = storage.push(&alice, &replay(&lists[2])).await.unwrap();
    let result = &old.response.results[0];
    assert_eq!(result.status, MutationStatus::Duplicate, "{result:?}");
    assert_eq!((result.server_id.as_ref(), result.error.as_ref()), (None, None), "{result:?}");
    assert_eq!(old.response.last_mutation_id, 25);
    let kept = storage.push(&alice, &replay(&lists[22])).await.unwrap();
    assert_eq!(kept.response.results[0].status, MutationStatus::Duplicate);
    assert!(kept.response.results[0].server_id.is_some(), "a kept record answers with its outcome");
    assert_eq!(count(&db, "SELECT 1 FROM lists").await, 25, "nothing applied twice");
    let next = vec![mutation(26, "create_list", json!({"id": "l26", "title": "t"}))];
    assert_eq!(push(&storage, "alice", 1, next).await, [MutationStatus::Applied], "the sequence goes on");

    // A client idle past the retention with no record left goes; one with records stays.
    exec(&db, &format!("UPDATE _engine_mutations SET applied_at = {}", ago("2 days"))).await;
    exec(&db, &format!("UPDATE _engine_clients SET updated_at = {}", ago("2 days"))).await;
    push(&storage, "bob", 2, vec![mutation(1, "create_list", json!({"id": "b1", "title": "t"}))]).await;
    let collected = storage.collect_garbage(&retention).await.unwrap();
    assert_eq!((collected.mutations, collected.clients), (6, 1), "{collected:?}");
    assert_eq!(count(&db, "SELECT 1 FROM _engine_clients WHERE user_id = 'bob'").await, 1);
}

#[tokio::test]
async fn two_instances_never_collect_at_once() {
    if postgres_only("several instances on one database, and Postgres' advisory lock") {
        return;
    }
    let db = TestDb::new().await;
    let storage = store(&db).await;
    let other = PostgresStorage::new(db.pg().clone(), Arc::new(example_notes::app()));
    exec(&db, "INSERT INTO _engine_tombstones (table_name, key, buckets, created_at) SELECT 'notes', jsonb_build_object('id', i::text), ARRAY['x'], now() - interval '2 days' FROM generate_series(1, 5) AS i").await;
    // Another instance in the middle of its collection holds the lock.
    let mut collecting = db.pg().acquire().await.unwrap();
    let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock(x'656e67696e650001'::bigint)")
        .fetch_one(&mut *collecting)
        .await
        .unwrap();
    assert!(locked);
    let retention = Retention::default().tombstones(DAY);
    let skipped = storage.collect_garbage(&retention).await.unwrap();
    assert!(skipped.skipped, "{skipped:?}");
    assert_eq!(count(&db, "SELECT 1 FROM _engine_tombstones").await, 5, "nothing collected");
    sqlx::query("SELECT pg_advisory_unlock(x'656e67696e650001'::bigint)").execute(&mut *collecting).await.unwrap();
    // Both at once: one collects and the other skips, or one after the other; never twice.
    let (a, b) = tokio::join!(storage.collect_garbage(&retention), other.collect_garbage(&retention));
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.tombstones + b.tombstones, 5, "{a:?} {b:?}");
    let lock_left: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(lock_left, 0, "the lock is released once collection is over");
}

#[tokio::test]
async fn dead_jobs_are_kept_longer_and_the_cli_lists_retries_and_discards_them() {
    let db = TestDb::new().await;
    let storage = store(&db).await;
    let (past, now) = (ago("2 days"), ago("0 days"));
    exec(
        &db,
        &format!(
            "INSERT INTO _engine_jobs (name, payload, state, attempts, last_error, finished_at, run_at, created_at) VALUES
            ('mail', '{{}}', 'dead', 5, 'smtp refused', {past}, {now}, {now}),
            ('mail', '{{}}', 'dead', 5, 'smtp refused again', {past}, {now}, {now}),
            ('mail', '{{}}', 'done', 1, NULL, {past}, {now}, {now}),
            ('mail', '{{}}', 'running', 1, NULL, NULL, {now}, {now})"
        ),
    )
    .await;
    let collected = storage.collect_garbage(&Retention::default().jobs(DAY)).await.unwrap();
    assert_eq!(collected.jobs, 1, "the done job goes, the dead ones stay: {collected:?}");

    let listed = engine_cli(&["jobs", "list", "--state", "dead", "--database-url", &db.url]).await.unwrap();
    assert_eq!(listed.lines().count(), 2, "{listed}");
    assert!(listed.contains("smtp refused again") && listed.contains("dead"), "{listed}");
    let ids: Vec<i64> = sqlx::query_scalar("SELECT id FROM _engine_jobs WHERE state = 'dead' ORDER BY id")
        .fetch_all(&db.pool)
        .await
        .unwrap();
    let running: i64 =
        sqlx::query_scalar("SELECT id FROM _engine_jobs WHERE state = 'running'").fetch_one(&db.pool).await.unwrap();
    let retried = engine_cli(&["jobs", "retry", &ids[0].to_string(), "--database-url", &db.url]).await.unwrap();
    assert!(retried.contains("queued to run again"), "{retried}");
    let discarded =
        engine_cli(&["jobs", "discard", &ids[1].to_string(), &running.to_string(), "--database-url", &db.url])
            .await
            .unwrap();
    assert!(discarded.contains(&format!("job {} discarded", ids[1])), "{discarded}");
    assert!(discarded.contains(&format!("job {running} is running")), "a running job stays: {discarded}");
    let states: Vec<(String, i32)> =
        sqlx::query_as("SELECT state, attempts FROM _engine_jobs ORDER BY id").fetch_all(&db.pool).await.unwrap();
    assert_eq!(states, [("queued".to_owned(), 0), ("running".to_owned(), 1)]);
    let err = engine_cli(&["jobs", "list", "--state", "zombie", "--database-url", &db.url]).await.unwrap_err();
    assert!(err.to_string().contains("zombie"), "{err}");

    // Dead jobs past their own retention go too.
    exec(&db, &format!("UPDATE _engine_jobs SET state = 'dead', finished_at = {past}")).await;
    let collected = storage.collect_garbage(&Retention::default().dead_jobs(DAY)).await.unwrap();
    assert_eq!(collected.jobs, 2, "{collected:?}");
}

/// Run the `engine` command with `args`.
async fn engine_cli(args: &[&str]) -> engine_cli::Result<String> {
    use clap::Parser;
    let cli = engine_cli::Cli::try_parse_from(std::iter::once("engine").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{e}"));
    cli.run().await
}

#[tokio::test]
async fn a_held_back_horizon_is_named_in_a_warning_and_shown_in_stats() {
    use sqlx::Connection;
    if postgres_only("the transaction-id horizon is Postgres'") {
        return;
    }
    let db = TestDb::new().await;
    let (logs, _guard) = Logs::capture();
    let server = TestServer::start(&db, |b| b.horizon_warning(Duration::from_millis(200))).await;
    // A forgotten session: a write transaction left open.
    let mut forgotten = sqlx::PgConnection::connect(&db.url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut forgotten).await.unwrap();
    let (_, pid): (String, i32) =
        sqlx::query_as("SELECT pg_current_xact_id()::text, pg_backend_pid()").fetch_one(&mut forgotten).await.unwrap();
    // A push whose ping now waits for the horizon.
    let push = PushRequest {
        client_id: client(1),
        mutations: vec![mutation(1, "create_list", json!({"id": "l1", "title": "t"}))],
    };
    let response = server.post("/sync/push", Some("alice"), serde_json::to_string(&push).unwrap()).await;
    assert_eq!(response.status(), StatusCode::OK);
    let named = format!("pid={pid}");
    let mut warning = Vec::new();
    for _ in 0..200 {
        warning = logs.lines_with(&["the horizon is held back", &named]);
        if !warning.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(warning.len(), 1, "one warning names the blocking backend: {}", logs.text());
    assert!(
        warning[0].contains("WARN") && warning[0].contains("query_start=") && warning[0].contains("age_ms="),
        "{}",
        warning[0]
    );
    let stats = server.stats().await;
    assert_eq!(stats["horizonBlockerPid"], pid, "{stats}");
    assert!(stats["horizonLagMs"].as_u64().unwrap() > 0, "{stats}");

    sqlx::query("COMMIT").execute(&mut forgotten).await.unwrap();
    let stats = server.stats().await;
    assert_eq!(stats["horizonLagMs"], 0, "nothing holds the horizon back now: {stats}");
    assert!(stats["horizonBlockerPid"].is_null(), "{stats}");
}

/// The value of the sample `name` (with its labels, as Prometheus writes them) in `text`.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

#[tokio::test]
async fn metrics_count_what_the_server_did_and_are_for_admins() {
    use crate::support::process::ServerProcess;
    use crate::support::ws::{Auth, Ws};

    let db = TestDb::new().await;
    store(&db).await;
    let server = ServerProcess::start(&db.url, Duration::from_secs(30)).await;
    let base = format!("http://{}", server.addr);
    let http = reqwest::Client::new();
    let alice = TestServer::token("alice");
    // A socket of alice's, to be pinged.
    let mut socket = Ws::connect(server.addr, Auth::Header(&alice)).await.unwrap();
    let push = |mutations: Value| {
        let request = http
            .post(format!("{base}/sync/push"))
            .bearer_auth(&alice)
            .json(&json!({"clientId": client(1).to_string(), "mutations": mutations}));
        async move { request.send().await.unwrap() }
    };
    let create = json!({"mutationId": 1, "clientMutationId": uuid::Uuid::new_v4(), "name": "create_list", "args": {"id": "l1", "title": "t"}});
    let add = json!({"mutationId": 2, "clientMutationId": uuid::Uuid::new_v4(), "name": "add_note", "args": {"list_id": "l1", "title": "n"}});
    let missing = json!({"mutationId": 3, "clientMutationId": uuid::Uuid::new_v4(), "name": "add_note", "args": {"list_id": "nowhere", "title": "n"}});
    assert_eq!(push(json!([create, add])).await.status(), StatusCode::OK);
    socket.expect("ping", Duration::from_secs(10)).await;
    assert_eq!(push(json!([add, missing])).await.status(), StatusCode::OK, "a duplicate, then a rejection");
    let gap = json!({"mutationId": 9, "clientMutationId": uuid::Uuid::new_v4(), "name": "create_list", "args": {"title": "t"}});
    assert_eq!(push(json!([gap])).await.status(), StatusCode::CONFLICT);
    let pull =
        http.post(format!("{base}/sync/pull")).bearer_auth(&alice).json(&json!({"clientId": client(1).to_string()}));
    assert_eq!(pull.send().await.unwrap().status(), StatusCode::OK);

    let metrics = format!("{base}/engine/metrics");
    assert_eq!(http.get(&metrics).send().await.unwrap().status(), StatusCode::UNAUTHORIZED);
    assert_eq!(http.get(&metrics).bearer_auth(&alice).send().await.unwrap().status(), StatusCode::FORBIDDEN);
    let answer = http.get(&metrics).bearer_auth(TestServer::admin_token()).send().await.unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    assert!(answer.headers()["content-type"].to_str().unwrap().starts_with("text/plain"));
    let text = answer.text().await.unwrap();
    // The pool's default size: on Postgres 4 connections per CPU, 8 at least and 32 at most;
    // SQLite's readers, one per CPU, 2 at least and 8 at most.
    let cpus = std::thread::available_parallelism().unwrap().get();
    let default_pool = match backend() {
        Backend::Postgres => (4 * cpus).clamp(8, 32),
        Backend::Sqlite => cpus.clamp(2, 8),
    };
    let expected = [
        ("engine_mutations_total{status=\"applied\"}", 2.0),
        ("engine_mutations_total{status=\"duplicate\"}", 1.0),
        ("engine_mutations_total{status=\"rejected\"}", 1.0),
        ("engine_rejections_total{code=\"mutator_failed\"}", 1.0),
        ("engine_request_errors_total{route=\"push\",code=\"mutation_out_of_order\"}", 1.0),
        ("engine_push_duration_seconds_count", 3.0),
        ("engine_pull_duration_seconds_count", 1.0),
        ("engine_sockets", 1.0),
        ("engine_jobs{state=\"dead\"}", 0.0),
        ("engine_pool_connections{state=\"max\"}", default_pool as f64),
    ];
    for (name, value) in expected {
        assert_eq!(sample(&text, name), Some(value), "{name} in\n{text}");
    }
    assert!(sample(&text, "engine_pings_sent_total").is_some_and(|n| n >= 1.0), "{text}");
    assert!(sample(&text, "engine_horizon_lag_seconds").is_some(), "{text}");
    assert!(text.contains("engine_push_duration_seconds_bucket{le=\"0.005\"}"), "a histogram: {text}");
    assert!(!text.contains("alice") && !text.contains("nowhere"), "no actor or argument in a label: {text}");
}

#[tokio::test]
async fn a_request_s_span_carries_its_id_actor_and_mutator_names_but_no_arguments() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b.trace_requests(true)).await;
    let (logs, _guard) = Logs::capture();
    let body = json!({"clientId": client(1).to_string(), "mutations": [
        {"mutationId": 1, "clientMutationId": uuid::Uuid::new_v4(), "name": "create_list", "args": {"id": "l1", "title": "t"}},
        {"mutationId": 2, "clientMutationId": uuid::Uuid::new_v4(), "name": "add_note", "args": {"list_id": "nowhere", "title": "secret-title-xyz"}},
    ]});
    let answer = server
        .http
        .post(server.url("/sync/push"))
        .bearer_auth(TestServer::token("alice"))
        .header("x-request-id", "req-0192f0e0")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(answer.headers()["x-request-id"], "req-0192f0e0", "the id comes back");
    let rejected = logs.lines_with(&["mutation rejected", "request_id=req-0192f0e0", "actor=\"alice\""]);
    assert_eq!(rejected.len(), 1, "{}", logs.text());
    assert!(rejected[0].contains("mutators=\"add_note,create_list\""), "{}", rejected[0]);
    assert!(!logs.text().contains("secret-title-xyz"), "arguments are never logged: {}", logs.text());
}
