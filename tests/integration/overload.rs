//! Overload over real HTTP: one actor cannot take the database from the others, the store's
//! sessions run under their timeouts, and every request gets an answer, refusals included.

use std::time::Duration;

use engine::limits::Limits;
use engine::storage::postgres::Timeouts;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::db::TestStore;
use crate::support::partition::Partition;
use crate::support::{Backend, TestDb, TestServer, backend, postgres_only};

fn mutations(first: u64, count: u64) -> Vec<Value> {
    (first..first + count)
        .map(|id| {
            json!({"mutationId": id, "clientMutationId": uuid::Uuid::new_v4(), "name": "create_list",
                   "args": {"title": format!("list {id}")}})
        })
        .collect()
}

fn push_body(client: uuid::Uuid, mutations: Vec<Value>) -> String {
    json!({"clientId": client, "mutations": mutations}).to_string()
}

#[tokio::test]
async fn one_actor_pushing_at_once_twenty_times_leaves_room_for_the_others() {
    let db = TestDb::new().await;
    let store = match backend() {
        Backend::Postgres => TestStore::Postgres(engine::storage::postgres(db.url.clone()).max_connections(8)),
        Backend::Sqlite => db.store(engine::storage::StoreLimits::default()),
    };
    let server = TestServer::start(&db, |b| b.storage(store).limits(Limits::default().rate(0, 0))).await;
    let base = server.url("");

    // Mallory: twenty pushes of a thousand mutations each, all at once, each of its own client.
    let (answered, mut first_answers) = tokio::sync::mpsc::channel(20);
    let pushes: Vec<_> = (0..20)
        .map(|_| {
            let (http, base, answered) = (server.http.clone(), base.clone(), answered.clone());
            tokio::spawn(async move {
                let body = push_body(uuid::Uuid::new_v4(), mutations(1, 1000));
                let response = http
                    .post(format!("{base}/sync/push"))
                    .bearer_auth(TestServer::token("mallory"))
                    .body(body)
                    .send()
                    .await
                    .expect("every push is answered");
                let status = response.status();
                let retry_after = response.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
                let body: Value = response.json().await.unwrap();
                let _ = answered.send(status).await;
                (status, retry_after, body)
            })
        })
        .collect();

    // Once Mallory has been refused, the pushes that were let in are under way: Alice is served
    // meanwhile, from the sessions Mallory may not take.
    loop {
        let status = first_answers.recv().await.expect("a push is answered");
        if status == StatusCode::TOO_MANY_REQUESTS {
            break;
        }
    }
    let alice = uuid::Uuid::new_v4();
    let response = server.post("/sync/push", Some("alice"), push_body(alice, mutations(1, 1))).await;
    assert_eq!(response.status(), StatusCode::OK);
    let pushed: Value = response.json().await.unwrap();
    assert_eq!(pushed["results"][0]["status"], "applied", "{pushed}");
    let response = server.post("/sync/pull", Some("alice"), json!({"clientId": alice}).to_string()).await;
    assert_eq!(response.status(), StatusCode::OK);
    let pulled: Value = response.json().await.unwrap();
    assert_eq!(pulled["lastMutationId"], 1, "{pulled}");

    let (mut applied, mut refused) = (0, 0);
    for push in pushes {
        let (status, retry_after, body) = push.await.unwrap();
        match status {
            StatusCode::OK => {
                assert_eq!(body["lastMutationId"], 1000, "a push let in runs to its end");
                applied += 1;
            }
            StatusCode::TOO_MANY_REQUESTS => {
                assert_eq!(body["code"], "rate_limited", "{body}");
                assert_eq!(retry_after.as_deref(), Some("1"));
                refused += 1;
            }
            other => panic!("a push answered {other}: {body}"),
        }
    }
    assert!(applied >= 1 && refused >= 1, "{applied} applied, {refused} refused");
    assert!(applied < 20, "the concurrent-work limit refused some of the twenty");
}

#[tokio::test]
async fn a_write_stuck_behind_a_lock_gives_up_after_the_lock_timeout() {
    if postgres_only("Postgres' row locks and lock timeout") {
        return;
    }
    let db = TestDb::new().await;
    let storage = engine::storage::postgres("unused")
        .pool(db.pg().clone())
        .timeouts(Timeouts::default().lock(Duration::from_millis(200)))
        .connect(std::sync::Arc::new(example_notes::app()))
        .await
        .unwrap();
    let settings: (String, String, String) =
        sqlx::query_as("SELECT current_setting('statement_timeout'), current_setting('lock_timeout'), current_setting('idle_in_transaction_session_timeout')")
            .fetch_one(storage.pool())
            .await
            .unwrap();
    assert_eq!(settings, ("30s".into(), "200ms".into(), "1min".into()), "a pool the store was given gets the timeouts");

    let storage: std::sync::Arc<dyn engine::server::Storage> = std::sync::Arc::new(storage);
    let server = TestServer::start(&db, |b| b.storage_instance(storage)).await;
    let alice = uuid::Uuid::new_v4();
    let create = vec![
        json!({"mutationId": 1, "clientMutationId": uuid::Uuid::new_v4(), "name": "create_list",
               "args": {"id": "l1", "title": "t"}}),
        json!({"mutationId": 2, "clientMutationId": uuid::Uuid::new_v4(), "name": "add_note",
               "args": {"id": "n1", "list_id": "l1", "title": "t"}}),
    ];
    let response = server.post("/sync/push", Some("alice"), push_body(alice, create)).await;
    let pushed: Value = response.json().await.unwrap();
    assert_eq!(pushed["results"][1]["status"], "applied", "{pushed}");

    // Another program holds the note's row.
    use sqlx::Connection;
    let mut other = sqlx::PgConnection::connect(&db.url).await.unwrap();
    let mut holding = other.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM notes WHERE id = 'n1' FOR UPDATE").execute(&mut *holding).await.unwrap();
    let update = json!({"mutationId": 3, "clientMutationId": uuid::Uuid::new_v4(), "name": "update_note",
                        "args": {"id": "n1", "title": "renamed"}});
    let response = server.post("/sync/push", Some("alice"), push_body(alice, vec![update.clone()])).await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE, "the lock wait is given up");
    let problem: Value = response.json().await.unwrap();
    assert_eq!(problem["code"], "retry_later", "{problem}");
    holding.rollback().await.unwrap();
    let response = server.post("/sync/push", Some("alice"), push_body(alice, vec![update])).await;
    let pushed: Value = response.json().await.unwrap();
    assert_eq!(pushed["results"][0]["status"], "applied", "nothing was recorded of the first try: {pushed}");
}

#[tokio::test]
async fn keep_alive_clients_bursting_past_the_limits_get_an_answer_to_every_request() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b.limits(Limits::default().rate(20, 20).body_bytes(64 * 1024))).await;
    let base = server.url("");
    let clients: Vec<_> = (0..16)
        .map(|c| {
            let base = base.clone();
            tokio::spawn(async move {
                // A client of its own: its connections are kept alive between requests.
                let http = reqwest::Client::new();
                let token = TestServer::token("alice");
                let mut statuses = Vec::new();
                for i in 0..60 {
                    let body = match (c + i) % 10 {
                        // Now and then a body over the limit.
                        0 => "x".repeat(100 * 1024),
                        _ => json!({"clientId": uuid::Uuid::new_v4()}).to_string(),
                    };
                    let sent = http.post(format!("{base}/sync/pull")).bearer_auth(&token).body(body).send().await;
                    let response = sent.unwrap_or_else(|e| panic!("request {i} of client {c} got no answer: {e}"));
                    statuses.push(response.status());
                    response.bytes().await.unwrap();
                }
                statuses
            })
        })
        .collect();
    let mut seen = std::collections::BTreeMap::new();
    for client in clients {
        for status in client.await.unwrap() {
            *seen.entry(status.as_u16()).or_insert(0) += 1;
        }
    }
    assert_eq!(seen.values().sum::<i32>(), 16 * 60);
    assert!(seen.keys().all(|s| [200, 413, 429].contains(s)), "{seen:?}");
    assert!(seen.contains_key(&200) && seen.contains_key(&413) && seen.contains_key(&429), "{seen:?}");
}

/// The notes app's database, provisioned, behind a [`Partition`]; and a store through it with a
/// pool of two, whose sessions are given up after 5.5 s without an answer (the 1 s asked is
/// raised to the statement timeout and 5 s).
async fn behind_a_partition(db: &TestDb) -> (Partition, engine::storage::postgres::Postgres) {
    db.notes().await;
    let partition = Partition::start(&db.url).await;
    let timeouts = Timeouts::default().statement(Duration::from_millis(500)).lost_after(Duration::from_secs(1));
    let storage = engine::storage::postgres(partition.url()).max_connections(2).timeouts(timeouts);
    (partition, storage)
}

/// Sessions whose database stops answering without closing them (a partition, a vanished host)
/// fail the requests on them as transient once the store's deadline for an answer passes, and
/// are closed rather than given back to the pool: the server opens new sessions and serves
/// again, partition after partition. Without the deadline these requests waited for good; with
/// the deadline but the sessions given back, the pool's check of each waited for good and held
/// its place, and after two partitions the pool of two had none left.
#[tokio::test]
async fn sessions_the_database_stopped_answering_are_given_up_and_the_server_serves_again() {
    if postgres_only("a database server behind a network partition") {
        return;
    }
    let db = TestDb::new().await;
    let (partition, storage) = behind_a_partition(&db).await;
    let server = TestServer::start(&db, |b| b.storage(storage)).await;
    // Every request is answered well within this, or the test fails rather than hangs.
    let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    let (phone, laptop) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
    let send = |path: &str, body: Value| {
        let request = http
            .post(server.url(path))
            .bearer_auth(TestServer::token("alice"))
            .header("content-type", "application/json")
            .body(body.to_string());
        async move {
            let response = request.send().await.expect("every request is answered");
            let status = response.status();
            (status, response.json::<Value>().await.unwrap())
        }
    };
    // Send until served (at most ten tries), counting the transient refusals.
    let until_served = |path: &'static str, body: Value| {
        let send = &send;
        async move {
            for refused in 0..10 {
                match send(path, body.clone()).await {
                    (StatusCode::OK, answer) => return (answer, refused),
                    (StatusCode::SERVICE_UNAVAILABLE, problem) => {
                        assert_eq!(problem["code"], "retry_later", "{problem}");
                    }
                    (status, answer) => panic!("{path} answered {status}: {answer}"),
                }
            }
            panic!("{path} was refused ten times: the server does not serve again");
        }
    };
    let mut refused = 0;
    for round in 1..=3u64 {
        // Two pushes at once: the pool opens its sessions, one kept for the next push.
        let pushes = tokio::join!(
            until_served("/sync/push", json!({"clientId": phone, "mutations": mutations(round * 2 - 1, 1)})),
            until_served("/sync/push", json!({"clientId": laptop, "mutations": mutations(round, 1)})),
        );
        refused += pushes.0.1 + pushes.1.1;
        // The pool's check of a session given back, which has no deadline of ours, is over.
        tokio::time::sleep(Duration::from_millis(200)).await;
        partition.cut();
        let (pulled, pull_refused) = until_served("/sync/pull", json!({"clientId": phone})).await;
        let lists = pulled["changes"].as_array().unwrap().iter().filter(|c| c["table"] == "lists").count();
        assert_eq!(lists, usize::try_from(3 * round - 1).unwrap(), "every list pushed so far: {pulled}");
        let (pushed, push_refused) =
            until_served("/sync/push", json!({"clientId": phone, "mutations": mutations(round * 2, 1)})).await;
        assert_eq!(pushed["results"][0]["status"], "applied", "{pushed}");
        refused += pull_refused + push_refused;
    }
    assert!(refused >= 1, "a request met a session cut by a partition");
}

/// A session the push lane kept, cut while it sat idle: the lane sends it back to the pool
/// once it has sat too long, after a check of its own that goes unanswered, so it is closed and
/// its place in the pool freed. Given back unchecked, the pool's own check waited for good and
/// held the place.
#[tokio::test]
async fn a_kept_session_cut_while_idle_is_closed_and_its_place_freed() {
    if postgres_only("a database server behind a network partition") {
        return;
    }
    let db = TestDb::new().await;
    let (partition, storage) = behind_a_partition(&db).await;
    let storage = storage.connect(std::sync::Arc::new(example_notes::app())).await.unwrap();
    let create =
        serde_json::from_value(json!({"clientId": uuid::Uuid::new_v4(), "mutations": mutations(1, 1)})).unwrap();
    let pushed = engine::server::Storage::push(&storage, &engine::Actor::new("alice", "alice"), &create).await.unwrap();
    assert!(pushed.stopped.is_none(), "{:?}", pushed.stopped);
    assert_eq!(storage.pool().size(), 1, "the push's session, kept by the lane");
    partition.cut();
    // Within 5 s it counts as idle too long, the lane's tending looks every 5 s, and the check
    // has 5 s: the place is freed well within 30 s.
    for _ in 0..300 {
        if storage.pool().size() == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the cut session still holds its place in the pool");
}

/// Sessions cut while they sat idle in the pool: the pool checks a session idle for more than
/// 5 s before it lends it, and that check has 2.5 s, so the next pull has them closed and gets a
/// new session within the pool's 10 s to lend one. With the check unbounded, the first cut
/// session held the pull until the pool gave up, and it was refused.
#[tokio::test]
async fn sessions_cut_while_idle_in_the_pool_are_replaced_within_one_request() {
    if postgres_only("a database server behind a network partition") {
        return;
    }
    let db = TestDb::new().await;
    let (partition, storage) = behind_a_partition(&db).await;
    let storage = storage.connect(std::sync::Arc::new(example_notes::app())).await.unwrap();
    let alice = engine::Actor::new("alice", "alice");
    let pull: engine::wire::PullRequest = serde_json::from_value(json!({"clientId": uuid::Uuid::new_v4()})).unwrap();
    let pull = || engine::server::Storage::pull(&storage, &alice, &pull);
    let (first, second) = tokio::join!(pull(), pull());
    first.unwrap();
    second.unwrap();
    // The pool takes a session back once its own check of it is answered.
    for _ in 0..100 {
        if storage.pool().num_idle() >= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(storage.pool().num_idle() >= 1, "the pulls' sessions are idle in the pool");
    partition.cut();
    // Idle for longer than the 5 s after which a session is checked before it is lent.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let pulled = tokio::time::timeout(Duration::from_secs(30), pull()).await.expect("the pull is answered");
    assert!(pulled.is_ok(), "served on a new session: {:?}", pulled.err());
}

/// The `q` quantile of `samples`, in milliseconds.
fn quantile(samples: &mut [Duration], q: f64) -> u128 {
    samples.sort();
    let at = ((samples.len() as f64 - 1.0) * q).round() as usize;
    samples[at].as_millis()
}

/// `count` pulls of `user` one after another: each one's status and time.
async fn pulls(server: &TestServer, user: &str, count: usize) -> Vec<(StatusCode, Duration)> {
    let mut answers = Vec::new();
    for _ in 0..count {
        let started = std::time::Instant::now();
        let response =
            server.post("/sync/pull", Some(user), json!({"clientId": uuid::Uuid::new_v4()}).to_string()).await;
        answers.push((response.status(), started.elapsed()));
    }
    answers
}

#[tokio::test]
async fn hostile_accounts_filling_the_pool_leave_a_bystander_its_turn() {
    let db = TestDb::new().await;
    // Four sessions on Postgres, and a second to wait for one: the pool's own order of arrival
    // would make the bystander wait behind every queued request of the others, past that second.
    // On SQLite, one reader and the one writer, each waited for at most a second as well.
    let store = match backend() {
        Backend::Postgres => {
            let pool = sqlx::postgres::PgPoolOptions::new()
                .max_connections(4)
                .acquire_timeout(Duration::from_secs(1))
                .connect(&db.url)
                .await
                .unwrap();
            TestStore::Postgres(engine::storage::postgres("unused").pool(pool))
        }
        Backend::Sqlite => match db.store(engine::storage::StoreLimits::default()) {
            TestStore::Sqlite(store) => TestStore::Sqlite(store.readers(1).acquire_timeout(Duration::from_secs(1))),
            TestStore::Postgres(_) => unreachable!("a SQLite run's store is SQLite"),
        },
    };
    let server = TestServer::start(&db, move |b| b.storage(store)).await;
    let server = std::sync::Arc::new(server);
    let alone = pulls(&server, "alice", 30).await;

    // Ten accounts, each with as many requests in progress as it may (4), again and again, until
    // the bystander is done. On Postgres pushes of 200 mutations: 40 pushes for 4 sessions. On
    // SQLite, where a push reads nothing and every mutation commits to disk on the one writer, a
    // push of 20 (which fills the writer's queue as well and drains in seconds once the bystander
    // is done) and three pulls of a page of the account's 1,000 lists: 30 pulls for one reader.
    let per_push = match backend() {
        Backend::Postgres => 200,
        Backend::Sqlite => 20,
    };
    let pulling = |task: usize| backend() == Backend::Sqlite && task > 0;
    if backend() == Backend::Sqlite {
        for account in 0..10 {
            sqlx::query(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000)
                 INSERT INTO lists (id, owner_id, title, archived) SELECT $1 || '-' || i, $1, 'seeded', 0 FROM n",
            )
            .bind(format!("mallory-{account}"))
            .execute(&db.pool)
            .await
            .unwrap();
        }
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut hostile = Vec::new();
    for account in 0..10 {
        for task in 0..4 {
            let (server, stop) = (server.clone(), stop.clone());
            hostile.push(tokio::spawn(async move {
                let mut statuses = Vec::new();
                let user = format!("mallory-{account}");
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let response = if pulling(task) {
                        let body = json!({"clientId": uuid::Uuid::new_v4()}).to_string();
                        server.post("/sync/pull", Some(&user), body).await
                    } else {
                        let body = push_body(uuid::Uuid::new_v4(), mutations(1, per_push));
                        server.post("/sync/push", Some(&user), body).await
                    };
                    statuses.push(response.status());
                }
                statuses
            }));
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let attacked = pulls(&server, "alice", 30).await;
    // And pushes of one mutation, reported, not asserted: each waits for the end of a run of
    // another's push (8 mutations).
    let mut pushed = Vec::new();
    for _ in 1..=5 {
        let started = std::time::Instant::now();
        let response = server.post("/sync/push", Some("alice"), push_body(uuid::Uuid::new_v4(), mutations(1, 1))).await;
        pushed.push((response.status(), started.elapsed()));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut statuses = Vec::new();
    for task in hostile {
        statuses.extend(task.await.unwrap());
    }

    let refused = attacked.iter().filter(|(status, _)| *status != StatusCode::OK).count();
    let (mut alone, mut attacked): (Vec<Duration>, Vec<Duration>) =
        (alone.iter().map(|a| a.1).collect(), attacked.iter().map(|a| a.1).collect());
    let answered = statuses.iter().filter(|s| **s == StatusCode::OK).count();
    let pushes_refused = pushed.iter().filter(|(status, _)| *status != StatusCode::OK).count();
    let mut pushed: Vec<Duration> = pushed.iter().map(|p| p.1).collect();
    eprintln!(
        "bystander pull p50/p99: {}/{} ms alone, {}/{} ms beside 10 hostile accounts \
         ({} of their {} requests answered, the rest refused as retryable); \
         bystander push of one mutation: p50/max {}/{} ms, {pushes_refused} of 5 refused as retryable",
        quantile(&mut alone, 0.5),
        quantile(&mut alone, 0.99),
        quantile(&mut attacked, 0.5),
        quantile(&mut attacked, 0.99),
        answered,
        statuses.len(),
        quantile(&mut pushed, 0.5),
        quantile(&mut pushed, 1.0),
    );
    assert_eq!(refused, 0, "every pull of the bystander is answered");
    assert!(statuses.iter().all(|s| *s == StatusCode::OK || *s == StatusCode::SERVICE_UNAVAILABLE), "{statuses:?}");
}
