//! Push benchmark: one-row-insert mutations from concurrent clients, each pushing one mutation
//! per request, through the engine's push path (sequence check, authorization, the insert, the
//! record, commit); the baseline runs plain single-row insert transactions over sqlx at the same
//! concurrency, into a table of the same shape without the engine's tracking.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use engine::server::Storage;
use engine::wire::{MutationRequest, PushRequest};
use engine::{Actor, CrdtText, MutatorCtx, Outcome, Result};
use example_notes::{List, ListMember, Note};
use serde_json::json;

use crate::db::BenchDb;

#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
struct InsertNote {
    id: String,
    list_id: String,
    title: String,
}

/// Insert one note: the one-row-insert mutator of the benchmark.
#[engine::mutator]
async fn insert_note(ctx: &mut MutatorCtx<'_>, args: InsertNote) -> Result<Outcome> {
    let note = Note {
        id: args.id.clone(),
        owner_id: ctx.actor().owner_id.clone(),
        list_id: args.list_id,
        title: args.title,
        done: false,
        position: 0,
        body: CrdtText::new(),
        deleted_at: None,
    };
    ctx.insert(&note).await?;
    Ok(Outcome::new().server_id(args.id))
}

fn app() -> engine::App {
    engine::app! { tables: [List, ListMember, Note], mutators: [insert_note], sync_rules: example_notes::rules }
}

pub(crate) async fn run(concurrency: &[usize], seconds: u64) {
    println!("\n## Push: one-row-insert mutations, one per request ({seconds} s per figure)\n");
    println!("| clients | engine mutations/s | baseline insert transactions/s | ratio |");
    println!("|---:|---:|---:|---:|");
    for &clients in concurrency {
        let db = BenchDb::new(u32::try_from(clients).unwrap() + 4).await;
        let storage = db.storage(app()).await;
        let mut setup = String::from(
            "CREATE TABLE plain_notes (id text PRIMARY KEY, owner_id text NOT NULL, list_id text NOT NULL, title text NOT NULL, done boolean NOT NULL, position bigint NOT NULL, body bytea NOT NULL, deleted_at timestamptz);",
        );
        for c in 0..clients {
            setup.push_str(&format!("INSERT INTO lists VALUES ('list-{c}', 'user-{c}', 'bench', false); INSERT INTO list_members VALUES ('list-{c}', 'user-{c}', 'user-{c}', 'owner');"));
        }
        sqlx::raw_sql(sqlx::AssertSqlSafe(setup)).execute(&db.pool).await.unwrap();

        let engine = measure(clients, seconds, {
            let storage = storage.clone();
            move |c, n| {
                let storage = storage.clone();
                async move {
                    let actor = Actor::new(format!("user-{c}"), format!("user-{c}"));
                    let mutation = MutationRequest {
                        mutation_id: n,
                        client_mutation_id: uuid::Uuid::new_v4(),
                        name: "insert_note".into(),
                        args: json!({"id": format!("n-{c}-{n}"), "list_id": format!("list-{c}"), "title": "bench"}),
                        hlc: None,
                    };
                    let request =
                        PushRequest { client_id: uuid::Uuid::from_u128(c as u128 + 1), mutations: vec![mutation] };
                    let pushed = storage.push(&actor, &request).await.unwrap();
                    assert!(pushed.stopped.is_none() && pushed.response.results[0].error.is_none());
                }
            }
        })
        .await;
        let baseline = measure(clients, seconds, {
            let pool = db.pool.clone();
            move |c, n| {
                let pool = pool.clone();
                async move {
                    let mut tx = pool.begin().await.unwrap();
                    sqlx::query("INSERT INTO plain_notes VALUES ($1, $2, $3, 'bench', false, 0, '\\x0000', NULL)")
                        .bind(format!("n-{c}-{n}"))
                        .bind(format!("user-{c}"))
                        .bind(format!("list-{c}"))
                        .execute(&mut *tx)
                        .await
                        .unwrap();
                    tx.commit().await.unwrap();
                }
            }
        })
        .await;
        println!("| {clients} | {engine:.0} | {baseline:.0} | {:.2} |", engine / baseline);
        db.drop_database().await;
    }
}

/// Operations a second: `clients` tasks each running `op(client, sequence)` in a loop for
/// `seconds`.
async fn measure<F, Fut>(clients: usize, seconds: u64, op: F) -> f64
where
    F: Fn(usize, u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (op, stop, done) = (op.clone(), stop.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                op(c, n).await;
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let start = Instant::now();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let count = done.load(Ordering::Relaxed);
    let elapsed = start.elapsed();
    for task in tasks {
        task.await.unwrap();
    }
    count as f64 / elapsed.as_secs_f64()
}
