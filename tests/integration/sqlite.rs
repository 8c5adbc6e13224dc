//! A server on a SQLite file, as a real process over HTTP: it serves the quickstart's session
//! with no database server, and a push answered `applied` survives `kill -9` of the process.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::process::{ServerProcess, free_port};
use crate::support::server::SECRET;

/// A directory of its own, removed with it.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("engine-sqlite-server-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn url(&self) -> String {
        format!("sqlite://{}", self.0.join("notes.db").display())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn token(user: &str) -> String {
    engine::auth::issue_bearer_token(user, user, SECRET, Duration::from_secs(600)).unwrap()
}

async fn post(
    http: &reqwest::Client,
    server: &ServerProcess,
    path: &str,
    user: &str,
    body: &Value,
) -> reqwest::Response {
    http.post(format!("http://{}{path}", server.addr)).bearer_auth(token(user)).json(body).send().await.unwrap()
}

/// Every note `user` pulls from the beginning, by title.
async fn titles(http: &reqwest::Client, server: &ServerProcess, user: &str) -> BTreeSet<String> {
    let client = uuid::Uuid::new_v4();
    let (mut titles, mut cursor) = (BTreeSet::new(), Value::Null);
    loop {
        let page: Value = post(http, server, "/sync/pull", user, &json!({"clientId": client, "cursor": cursor}))
            .await
            .json()
            .await
            .unwrap();
        for change in page["changes"].as_array().unwrap() {
            if change["table"] == "notes" {
                titles.insert(change["row"]["title"].as_str().unwrap().to_owned());
            }
        }
        cursor = page["cursor"].clone();
        if page["hasMore"] != json!(true) {
            return titles;
        }
    }
}

#[tokio::test]
async fn the_quickstart_session_is_served_from_a_file_with_no_database_server() {
    let scratch = Scratch::new();
    // Nothing of Postgres is named: the file is the whole store.
    let server = ServerProcess::start(&scratch.url(), Duration::from_secs(30)).await;
    let http = reqwest::Client::new();
    let client = "0192f0e0-0000-7000-8000-000000000001";
    let push = json!({"clientId": client, "mutations": [
        {"mutationId": 1, "clientMutationId": "0192f0e0-0000-7000-8000-00000000a001", "name": "create_list", "args": {"id": "groceries", "title": "Groceries"}},
        {"mutationId": 2, "clientMutationId": "0192f0e0-0000-7000-8000-00000000a002", "name": "add_note", "args": {"list_id": "groceries", "title": "Oat milk"}},
    ]});
    let pushed: Value = post(&http, &server, "/sync/push", "alice", &push).await.json().await.unwrap();
    let statuses: Vec<&Value> = pushed["results"].as_array().unwrap().iter().map(|r| &r["status"]).collect();
    assert_eq!(statuses, [&json!("applied"), &json!("applied")], "{pushed}");
    let again: Value = post(&http, &server, "/sync/push", "alice", &push).await.json().await.unwrap();
    assert_eq!(again["results"][0]["status"], "duplicate");
    let pulled: Value =
        post(&http, &server, "/sync/pull", "alice", &json!({"clientId": client})).await.json().await.unwrap();
    let buckets: BTreeSet<String> = pulled["changes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["buckets"].as_array().unwrap().iter().map(|b| b.as_str().unwrap().to_owned()))
        .collect();
    let expected = ["memberships/alice", "own/alice", "shared/groceries"];
    assert_eq!(buckets, expected.into_iter().map(str::to_owned).collect::<BTreeSet<_>>());
    assert_eq!(titles(&http, &server, "alice").await, BTreeSet::from(["Oat milk".to_owned()]));
    assert!(titles(&http, &server, "bob").await.is_empty(), "bob holds nothing of alice's");
    let contract = http.get(format!("http://{}/engine/contract", server.addr)).send().await.unwrap();
    assert!(contract.status().is_success());
}

/// Writers push notes one mutation a request while the server is killed with SIGKILL; the
/// server starts again on the file, and every note whose push was answered `applied` is there.
#[tokio::test]
async fn a_push_answered_applied_survives_kill_9() {
    let scratch = Scratch::new();
    let port = free_port();
    let mut server = ServerProcess::start_on(&scratch.url(), Duration::from_secs(30), port).await;
    let http = reqwest::Client::new();
    for user in ["u0", "u1", "u2", "u3"] {
        let create = json!({"clientId": uuid::Uuid::new_v4(), "mutations": [{"mutationId": 1, "clientMutationId": uuid::Uuid::new_v4(), "name": "create_list", "args": {"id": format!("list-{user}"), "title": "t"}}]});
        let created: Value = post(&http, &server, "/sync/push", user, &create).await.json().await.unwrap();
        assert_eq!(created["results"][0]["status"], "applied");
    }
    let answered_so_far = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let writers: Vec<_> = ["u0", "u1", "u2", "u3"]
        .into_iter()
        .map(|user| {
            let (http, base) = (http.clone(), format!("http://{}", server.addr));
            let answered_so_far = answered_so_far.clone();
            tokio::spawn(async move {
                let client = uuid::Uuid::new_v4();
                let mut applied = BTreeSet::new();
                for n in 1..=400_u64 {
                    let title = format!("{user}-{n}");
                    let body = json!({"clientId": client, "mutations": [{"mutationId": n, "clientMutationId": uuid::Uuid::new_v4(), "name": "add_note", "args": {"list_id": format!("list-{user}"), "title": title}}]});
                    let Ok(response) = http.post(format!("{base}/sync/push")).bearer_auth(token(user)).json(&body).send().await else {
                        break; // the server is gone
                    };
                    let Ok(answer) = response.json::<Value>().await else { break };
                    if answer["results"][0]["status"] == "applied" {
                        applied.insert(title);
                        answered_so_far.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
                (user, applied)
            })
        })
        .collect();
    // Mid-load: some pushes answered, others in flight.
    for waited in 0.. {
        if answered_so_far.load(std::sync::atomic::Ordering::Relaxed) >= 40 {
            break;
        }
        assert!(waited < 12_000, "the writers' pushes are answered");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    server.kill().await;
    let mut answered = Vec::new();
    for writer in writers {
        answered.push(writer.await.unwrap());
    }
    let total: usize = answered.iter().map(|(_, applied)| applied.len()).sum();
    assert!(total < 1600, "the kill came mid-load: {total} of 1,600 pushes answered");
    let server = ServerProcess::start_on(&scratch.url(), Duration::from_secs(30), port).await;
    for (user, applied) in answered {
        let kept = titles(&http, &server, user).await;
        let lost: Vec<&String> = applied.difference(&kept).collect();
        assert!(lost.is_empty(), "{user}: {} applied, {} lost after kill -9: {lost:?}", applied.len(), lost.len());
    }
    eprintln!("kill -9 mid-load: {total} pushes answered applied, none lost");
}

/// The jobs mutations enqueue run on a SQLite store too: each once, to its end, and the
/// operator's stats count them.
#[tokio::test]
async fn the_jobs_a_push_enqueues_run_once() {
    let scratch = Scratch::new();
    let file = scratch.0.join("job-runs");
    let env = [("JOB_RUNS", file.display().to_string())];
    let server = ServerProcess::start_with(&scratch.url(), Duration::from_secs(30), 0, &env).await;
    let users: Vec<String> = (0..5).map(|n| format!("user{n}")).collect();
    crate::jobs::share_with(&server, &users).await;
    let lines = crate::jobs::job_runs(&file, 5).await;
    assert_eq!(lines.iter().filter(|l| l.starts_with("start ")).count(), 5, "each started once: {lines:?}");
    let admin = crate::support::server::TestServer::admin_token();
    for _ in 0..200 {
        let stats: Value = reqwest::Client::new()
            .get(format!("http://{}/engine/stats", server.addr))
            .bearer_auth(&admin)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if stats["jobs"]["done"] == 5 {
            assert_eq!(stats["jobs"], json!({"queued": 0, "running": 0, "done": 5, "dead": 0}), "{stats}");
            assert_eq!(stats["appliedMutations"], 6, "{stats}");
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the jobs were not recorded done");
}

/// `listen_notify` carries pings through Postgres: beside a SQLite store, the server refuses to
/// build, saying why, instead of serving sockets that never hear of other instances' writes.
#[tokio::test]
async fn listen_notify_beside_a_sqlite_store_is_refused_at_build() {
    let scratch = Scratch::new();
    let built = engine::Server::builder()
        .app(example_notes::app())
        .database_url(scratch.url())
        .auth(engine::auth::BearerTokenAuth::new(SECRET))
        .realtime(engine::realtime::listen_notify("postgres://postgres@127.0.0.1:5432/postgres"))
        .build()
        .await;
    let Err(err) = built else { panic!("the server built") };
    let text = err.to_string();
    assert!(text.contains("through postgres") && text.contains("the store is sqlite"), "{text}");
}

/// An app whose memberships are raw SQL is refused on SQLite, by name, instead of holding
/// nobody its buckets.
#[tokio::test]
async fn raw_membership_sql_is_refused_on_sqlite() {
    let scratch = Scratch::new();
    let mut doc = engine::contract(&example_notes::app());
    let shared = &mut doc["x-engine"]["syncRules"]["shared"];
    shared["membership"] =
        json!({"sql": "SELECT list_id FROM list_members WHERE user_id = $user_id", "reads": ["list_members"]});
    shared["write"] = json!({});
    shared["leave"] = json!(false);
    shared["invite"] = json!(null);
    let app = engine::contract::app_from_contract(&doc).unwrap();
    let path = engine::storage::sqlite_path(&scratch.url()).unwrap();
    let err = engine::storage::sqlite(path).connect(std::sync::Arc::new(app)).await.unwrap_err().to_string();
    assert!(err.contains("sync rule `shared`") && err.contains("raw SQL"), "{err}");
}
