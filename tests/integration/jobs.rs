//! Background jobs on a real Postgres: enqueued by mutations in their transaction, run by
//! workers in this process and in server processes, retried, leased and fenced.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use engine::server::Storage;
use engine::server::jobs::{ClaimedJob, JobCtx, JobEnd, JobError, Jobs};
use engine::server::storage::PostgresStorage;
use engine::wire::{MutationRequest, MutationStatus, PushRequest};
use engine::{Actor, JobRequest, MutatorCtx, Outcome, Result};
use example_notes::jobs::{LIST_SHARED, ListShared};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::support::process::ServerProcess;
use crate::support::{TestDb, TestServer, postgres_only};

/// The notes app plus a mutator that enqueues a job and may then fail.
mod probe {
    use super::*;

    #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    pub(super) struct Probe {
        pub(super) fail: bool,
    }

    /// Enqueue `probe`, then fail when asked to.
    #[engine::mutator]
    pub(super) async fn enqueue_probe(ctx: &mut MutatorCtx<'_>, args: Probe) -> Result<Outcome> {
        ctx.enqueue("probe", &json!({"fail": args.fail})).await?;
        if args.fail {
            return Err(engine::Error::mutator_failed("failing after the enqueue"));
        }
        Ok(Outcome::new())
    }

    pub(super) fn app() -> engine::App {
        use example_notes::mutators::*;
        use example_notes::{List, ListMember, Note};
        engine::app! {
            tables: [List, ListMember, Note],
            mutators: [create_list, share_list, enqueue_probe],
            sync_rules: example_notes::rules,
        }
    }
}

async fn store(db: &TestDb) -> Arc<dyn Storage> {
    db.open(probe::app()).await
}

fn client() -> uuid::Uuid {
    uuid::Uuid::from_u128(0x0192_f0e0_0000_7000_8000_0000_0000_0001)
}

fn mutation(id: u64, name: &str, args: Value) -> MutationRequest {
    MutationRequest { mutation_id: id, client_mutation_id: uuid::Uuid::new_v4(), name: name.into(), args, hlc: None }
}

async fn push(storage: &Arc<dyn Storage>, who: &str, mutations: Vec<MutationRequest>) -> Vec<MutationStatus> {
    let pushed = storage.push(&Actor::new(who, who), &PushRequest { client_id: client(), mutations }).await.unwrap();
    assert!(pushed.stopped.is_none(), "{:?}", pushed.stopped);
    pushed.response.results.into_iter().map(|r| r.status).collect()
}

/// Every job's `(name, state, attempts, last_error)`, by id.
async fn jobs_table(db: &TestDb) -> Vec<(String, String, i32, Option<String>)> {
    sqlx::query_as("SELECT name, state, attempts, last_error FROM _engine_jobs ORDER BY id")
        .fetch_all(&db.pool)
        .await
        .unwrap()
}

/// Wait until every job is finished (`done` or `dead`).
async fn until_finished(db: &TestDb) {
    for _ in 0..600 {
        let open: i64 = sqlx::query_scalar("SELECT count(*) FROM _engine_jobs WHERE state IN ('queued', 'running')")
            .fetch_one(&db.pool)
            .await
            .unwrap();
        if open == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("jobs still open after 30 s: {:?}", jobs_table(db).await);
}

fn quick() -> Jobs {
    Jobs::new()
        .poll_interval(Duration::from_millis(50))
        .retry_backoff(Duration::from_millis(50), Duration::from_millis(200))
}

#[tokio::test]
async fn a_share_enqueues_its_job_once_and_a_worker_runs_it_after_the_commit() {
    let db = TestDb::new().await;
    let storage = store(&db).await;
    let create = mutation(1, "create_list", json!({"id": "groceries", "title": "Groceries"}));
    let share = mutation(2, "share_list", json!({"list_id": "groceries", "user_id": "bob", "role": "editor"}));
    assert_eq!(push(&storage, "alice", vec![create.clone(), share.clone()]).await, [MutationStatus::Applied; 2]);
    // The same push again (its response was lost): answered from the record, not run again.
    assert_eq!(push(&storage, "alice", vec![create, share]).await, [MutationStatus::Duplicate; 2]);
    // A change of role is no new share.
    let again = mutation(3, "share_list", json!({"list_id": "groceries", "user_id": "bob", "role": "viewer"}));
    assert_eq!(push(&storage, "alice", vec![again]).await, [MutationStatus::Applied]);
    assert_eq!(storage.job_counts().await.unwrap().queued, 1, "{:?}", jobs_table(&db).await);

    let (ran, mut runs) = mpsc::unbounded_channel();
    let jobs = quick().job(LIST_SHARED, move |ctx: JobCtx, shared: ListShared| {
        let ran = ran.clone();
        async move {
            ran.send((ctx.user_id().map(str::to_owned), ctx.attempt(), shared)).unwrap();
            Ok(())
        }
    });
    let worker = jobs.start(storage.clone()).await.unwrap();
    let run = tokio::time::timeout(Duration::from_secs(10), runs.recv()).await.expect("the job runs").unwrap();
    let expected = ListShared { list_id: "groceries".into(), user_id: "bob".into(), shared_by: "alice".into() };
    assert_eq!(run, (Some("alice".into()), 1, expected));
    until_finished(&db).await;
    assert_eq!(jobs_table(&db).await, [(LIST_SHARED.to_owned(), "done".to_owned(), 1, None)]);
    let stats = storage.stats().await.unwrap();
    assert_eq!((stats.jobs.done, stats.jobs.queued), (1, 0));
    worker.stop().await;
    assert!(runs.try_recv().is_err(), "the job ran once");
}

#[tokio::test]
async fn a_mutation_that_fails_after_enqueueing_leaves_no_job() {
    let db = TestDb::new().await;
    let storage = store(&db).await;
    let statuses = push(
        &storage,
        "alice",
        vec![mutation(1, "enqueue_probe", json!({"fail": true})), mutation(2, "enqueue_probe", json!({"fail": false}))],
    )
    .await;
    assert_eq!(statuses, [MutationStatus::Rejected, MutationStatus::Applied]);
    let jobs = jobs_table(&db).await;
    assert_eq!(jobs, [("probe".to_owned(), "queued".to_owned(), 0, None)], "only the applied mutation's job");
    let payload: String =
        sqlx::query_scalar("SELECT CAST(payload AS TEXT) FROM _engine_jobs").fetch_one(&db.pool).await.unwrap();
    assert_eq!(serde_json::from_str::<Value>(&payload).unwrap(), json!({"fail": false}));
}

#[tokio::test]
async fn failed_runs_are_retried_until_the_job_succeeds_or_is_dead() {
    let db = TestDb::new().await;
    let storage = store(&db).await;
    for name in ["flaky", "doomed", "refused", "panicky", "misfit"] {
        storage.enqueue_job(JobRequest::new(name, &json!({"n": 1})).unwrap()).await.unwrap();
    }
    #[derive(serde::Deserialize)]
    struct N {
        #[allow(dead_code)]
        n: u32,
    }
    let jobs = quick()
        .max_attempts(3)
        .job("flaky", |ctx: JobCtx, _: N| async move {
            if ctx.attempt() < 3 { Err(JobError::retry(format!("run {} fails", ctx.attempt()))) } else { Ok(()) }
        })
        .job("doomed", |ctx: JobCtx, _: N| async move { Err(JobError::retry(format!("run {} fails", ctx.attempt()))) })
        .job("refused", |_: JobCtx, _: N| async move { Err(JobError::permanent("no such user")) })
        .job("panicky", |ctx: JobCtx, _: N| async move {
            assert!(ctx.attempt() > 1, "the first run panics");
            Ok(())
        })
        .job("misfit", |_: JobCtx, _: String| async move { Ok(()) });
    let worker = jobs.start(storage.clone()).await.unwrap();
    until_finished(&db).await;
    worker.stop().await;
    let by_name: BTreeMap<String, (String, i32, Option<String>)> = jobs_table(&db)
        .await
        .into_iter()
        .map(|(name, state, attempts, error)| (name, (state, attempts, error)))
        .collect();
    assert_eq!(by_name["flaky"], ("done".into(), 3, None));
    assert_eq!(by_name["doomed"], ("dead".into(), 3, Some("run 3 fails".into())));
    assert_eq!(by_name["refused"], ("dead".into(), 1, Some("no such user".into())));
    assert_eq!(by_name["panicky"].0, "done");
    assert_eq!(by_name["panicky"].1, 2);
    let misfit = &by_name["misfit"];
    assert_eq!((misfit.0.as_str(), misfit.1), ("dead", 1));
    assert!(misfit.2.as_deref().unwrap().contains("payload does not fit"), "{misfit:?}");
    let counts = storage.job_counts().await.unwrap();
    assert_eq!((counts.done, counts.dead, counts.queued, counts.running), (2, 3, 0, 0));
    // Collection takes the finished jobs and leaves the dead ones for an operator (kept longer).
    storage.collect_garbage(&engine::server::Retention::default().jobs(Duration::ZERO)).await.unwrap();
    let counts = storage.job_counts().await.unwrap();
    assert_eq!((counts.done, counts.dead), (0, 3));
}

#[tokio::test]
async fn a_delayed_job_waits_for_its_time_and_a_timed_out_run_fails() {
    let db = TestDb::new().await;
    let storage = store(&db).await;
    // The store times the delay by the wall clock (Postgres' `now()`, or the system time in whole
    // milliseconds on SQLite), so the test does too, from the millisecond the enqueue began in: a
    // monotonic clock may run a little slower than the wall clock.
    let since_epoch = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap();
    let enqueued = SystemTime::UNIX_EPOCH + Duration::from_millis(u64::try_from(since_epoch.as_millis()).unwrap());
    let delay = Duration::from_millis(800);
    storage.enqueue_job(JobRequest::new("later", &()).unwrap().after(delay)).await.unwrap();
    storage.enqueue_job(JobRequest::new("slow", &()).unwrap()).await.unwrap();
    let (ran, mut runs) = mpsc::unbounded_channel();
    let jobs = quick()
        .max_attempts(1)
        .timeout(Duration::from_millis(200))
        .job("later", move |_: JobCtx, (): ()| {
            let ran = ran.clone();
            async move {
                ran.send(enqueued.elapsed().unwrap_or_default()).unwrap();
                Ok(())
            }
        })
        .job("slow", |_: JobCtx, (): ()| async move {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(())
        });
    let worker = jobs.start(storage.clone()).await.unwrap();
    let waited = tokio::time::timeout(Duration::from_secs(10), runs.recv()).await.unwrap().unwrap();
    assert!(waited >= delay, "the job ran {waited:?} after it was enqueued, before its delay of {delay:?}");
    until_finished(&db).await;
    worker.stop().await;
    let jobs = jobs_table(&db).await;
    assert_eq!(jobs[0], ("later".into(), "done".into(), 1, None));
    assert_eq!((jobs[1].1.as_str(), jobs[1].2), ("dead", 1));
    assert!(jobs[1].3.as_deref().unwrap().contains("longer than its timeout"), "{jobs:?}");
}

#[tokio::test]
async fn workers_on_separate_pools_share_the_queue_and_run_each_job_once() {
    if postgres_only("several stores on one database: one process serves a SQLite file") {
        return;
    }
    let db = TestDb::new().await;
    let storage = store(&db).await;
    for n in 0..60 {
        storage.enqueue_job(JobRequest::new("count", &n).unwrap()).await.unwrap();
    }
    let runs: Arc<Mutex<Vec<(usize, u32)>>> = Arc::default();
    let mut workers = Vec::new();
    for worker in 0..2 {
        let other = sqlx::postgres::PgPoolOptions::new().max_connections(4).connect(&db.url).await.unwrap();
        let queue = Arc::new(PostgresStorage::new(other, Arc::new(probe::app())));
        let runs = runs.clone();
        let jobs = quick().concurrency(3).job("count", move |_: JobCtx, n: u32| {
            let runs = runs.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(10)).await;
                runs.lock().unwrap().push((worker, n));
                Ok(())
            }
        });
        workers.push(jobs.start(queue).await.unwrap());
    }
    until_finished(&db).await;
    for worker in workers {
        worker.stop().await;
    }
    let mut ran: Vec<u32> = runs.lock().unwrap().iter().map(|(_, n)| *n).collect();
    ran.sort_unstable();
    assert_eq!(ran, (0..60).collect::<Vec<_>>(), "each job ran exactly once");
}

#[tokio::test]
async fn a_lease_that_ran_out_goes_to_another_worker_and_the_first_cannot_finish_the_job() {
    let db = TestDb::new().await;
    let storage = store(&db).await;
    storage.enqueue_job(JobRequest::new("leased", &()).unwrap()).await.unwrap();
    let names = ["leased".to_owned()];
    let first: Vec<ClaimedJob> = storage.claim_jobs(&names, 5, Duration::from_millis(100)).await.unwrap();
    assert_eq!(first.len(), 1);
    assert!(storage.claim_jobs(&names, 5, Duration::from_secs(60)).await.unwrap().is_empty(), "leased: not due");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = storage.claim_jobs(&names, 5, Duration::from_secs(60)).await.unwrap();
    assert_eq!(second.iter().map(|j| (j.id, j.attempt)).collect::<Vec<_>>(), [(first[0].id, 2)]);
    assert!(!storage.finish_job(&first[0], JobEnd::Done).await.unwrap(), "the first lease is fenced off");
    assert!(storage.finish_job(&second[0], JobEnd::Done).await.unwrap());
    assert_eq!(jobs_table(&db).await, [("leased".into(), "done".into(), 2, None)]);
}

#[tokio::test]
async fn the_server_runs_its_jobs_and_counts_them_in_stats() {
    let db = TestDb::new().await;
    let refused = engine::Server::builder()
        .app(example_notes::app())
        .storage(db.store(engine::storage::StoreLimits::default()))
        .auth(engine::auth::BearerTokenAuth::new(crate::support::server::SECRET))
        .jobs(Jobs::new().concurrency(0))
        .build()
        .await;
    assert!(matches!(refused, Err(engine::server::Error::Config { .. })), "{refused:?}");

    let (ran, mut runs) = mpsc::unbounded_channel();
    let jobs = quick().job(LIST_SHARED, move |_: JobCtx, shared: ListShared| {
        let ran = ran.clone();
        async move {
            ran.send(shared.user_id).unwrap();
            Ok(())
        }
    });
    let server = TestServer::start(&db, |b| b.jobs(jobs)).await;
    let body = json!({"clientId": client(), "mutations": [
        {"mutationId": 1, "clientMutationId": uuid::Uuid::new_v4(), "name": "create_list", "args": {"id": "l", "title": "L"}},
        {"mutationId": 2, "clientMutationId": uuid::Uuid::new_v4(), "name": "share_list", "args": {"list_id": "l", "user_id": "carol", "role": "viewer"}},
    ]});
    let response = server.post("/sync/push", Some("alice"), body.to_string()).await;
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    let user = tokio::time::timeout(Duration::from_secs(10), runs.recv()).await.expect("the server runs the job");
    assert_eq!(user.as_deref(), Some("carol"));
    until_finished(&db).await;
    let admin = TestServer::admin_token();
    let stats: Value =
        server.http.get(server.url("/engine/stats")).bearer_auth(admin).send().await.unwrap().json().await.unwrap();
    assert_eq!(stats["jobs"], json!({"queued": 0, "running": 0, "done": 1, "dead": 0}), "{stats}");
}

/// The lines of a `JOB_RUNS` file, once it has `done` lines for `jobs` jobs.
pub(crate) async fn job_runs(file: &std::path::Path, jobs: usize) -> Vec<String> {
    for _ in 0..400 {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        if text.lines().filter(|l| l.starts_with("done ")).count() >= jobs {
            return text.lines().map(str::to_owned).collect();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("fewer than {jobs} jobs done after 20 s: {:?}", std::fs::read_to_string(file));
}

/// Push `create_list` and a share with each of `users` to a server process as alice.
pub(crate) async fn share_with(server: &ServerProcess, users: &[String]) {
    let mut mutations = vec![
        json!({"mutationId": 1, "clientMutationId": uuid::Uuid::new_v4(), "name": "create_list", "args": {"id": "l", "title": "L"}}),
    ];
    for (n, user) in users.iter().enumerate() {
        mutations.push(json!({"mutationId": n + 2, "clientMutationId": uuid::Uuid::new_v4(), "name": "share_list",
                              "args": {"list_id": "l", "user_id": user, "role": "viewer"}}));
    }
    let response = reqwest::Client::new()
        .post(format!("http://{}/sync/push", server.addr))
        .bearer_auth(TestServer::token("alice"))
        .json(&json!({"clientId": client(), "mutations": mutations}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
}

fn runs_file(db: &TestDb) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("{}-job-runs", db.name))
}

#[tokio::test]
async fn server_processes_on_one_database_share_the_jobs() {
    if postgres_only("several server processes on one database: one process serves a SQLite file") {
        return;
    }
    let db = TestDb::new().await;
    let file = runs_file(&db);
    let env = [("JOB_RUNS", file.display().to_string()), ("JOB_SLEEP_MS", "20".to_owned())];
    let a = ServerProcess::start_with(&db.url, Duration::from_secs(30), 0, &env).await;
    let _b = ServerProcess::start_with(&db.url, Duration::from_secs(30), 0, &env).await;
    let users: Vec<String> = (0..30).map(|n| format!("user{n}")).collect();
    share_with(&a, &users).await;
    let lines = job_runs(&file, 30).await;
    let _ = std::fs::remove_file(&file);
    let mut done: Vec<i64> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("done "))
        .map(|l| l.split(' ').next().unwrap().parse().unwrap())
        .collect();
    done.sort_unstable();
    let ids: Vec<i64> =
        sqlx::query_scalar("SELECT id FROM _engine_jobs ORDER BY id").fetch_all(&db.pool).await.unwrap();
    assert_eq!(done, ids, "each of the 30 jobs ran to its end once");
    assert_eq!(lines.iter().filter(|l| l.starts_with("start ")).count(), 30, "and started once: {lines:?}");
}

#[tokio::test]
async fn the_job_of_a_killed_server_runs_again_on_another() {
    let db = TestDb::new().await;
    let file = runs_file(&db);
    let runs = |sleep: &str| {
        [
            ("JOB_RUNS", file.display().to_string()),
            ("JOB_SLEEP_MS", sleep.to_owned()),
            ("JOB_TIMEOUT_MS", "1500".to_owned()),
        ]
    };
    let mut a = ServerProcess::start_with(&db.url, Duration::from_secs(30), 0, &runs("60000")).await;
    share_with(&a, &["bob".to_owned()]).await;
    for _ in 0..200 {
        if std::fs::read_to_string(&file).unwrap_or_default().starts_with("start ") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    a.kill().await;
    let _b = ServerProcess::start_with(&db.url, Duration::from_secs(30), 0, &runs("0")).await;
    let lines = job_runs(&file, 1).await;
    let _ = std::fs::remove_file(&file);
    let fields: Vec<Vec<&str>> = lines.iter().map(|l| l.split(' ').collect()).collect();
    assert_eq!(fields.len(), 3, "{lines:?}");
    let (id, pid_a) = (fields[0][1], fields[0][3]);
    assert_eq!(fields[0][..3], ["start", id, "1"], "{lines:?}");
    assert_eq!(fields[1][..3], ["start", id, "2"], "{lines:?}");
    assert_eq!(fields[2][..3], ["done", id, "2"], "{lines:?}");
    assert_ne!(fields[1][3], pid_a, "the second run is the other server's: {lines:?}");
    // The handler writes its `done` line before the runner records the job done.
    until_finished(&db).await;
    assert_eq!(jobs_table(&db).await, [(LIST_SHARED.to_owned(), "done".to_owned(), 2, None)]);
}
