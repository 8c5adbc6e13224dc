//! Pull benchmarks.
//!
//! Bootstrap: one client pulls every note of its buckets in pages of 1,000, and the server's
//! answer is serialized to JSON as it would be on the wire; the baseline reads the same rows with
//! a plain keyset-paged `SELECT` and serializes them to JSON the same way.
//!
//! Incremental: with a client caught up, 10 notes change, and the client pulls them; the cost
//! of that pull at growing table sizes should not grow with the table.

use std::time::{Duration, Instant};

use engine::server::Storage;
use engine::wire::PullRequest;
use engine::{Actor, ColumnType};
use sqlx::Row;

use crate::db::BenchDb;

const CLIENT: uuid::Uuid = uuid::Uuid::from_u128(0x0192_f0e0_0000_7000_8000_0000_0000_0001);

pub(crate) async fn seed(db: &BenchDb, rows: usize) {
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "INSERT INTO lists VALUES ('l1', 'alice', 'bench', false);
         INSERT INTO list_members VALUES ('l1', 'alice', 'alice', 'owner');
         INSERT INTO notes (id, owner_id, list_id, title, done, position)
           SELECT 'note-' || lpad(i::text, 8, '0'), 'alice', 'l1', 'note number ' || i, i % 3 = 0, i
           FROM generate_series(1, {rows}) AS i;
         ANALYZE;"
    )))
    .execute(&db.pool)
    .await
    .expect("seed");
}

fn per_second(count: usize, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64()
}

pub(crate) async fn run(rows: usize, sizes: &[usize]) {
    bootstrap(rows).await;
    incremental(sizes).await;
}

async fn bootstrap(rows: usize) {
    let db = BenchDb::new(8).await;
    let storage = db.storage(example_notes::app()).await;
    seed(&db, rows).await;
    db.settle(&storage).await;
    let actor = Actor::new("alice", "alice");

    let mut engine_best = Duration::MAX;
    let mut baseline_best = Duration::MAX;
    let mut delivered = 0;
    for _ in 0..3 {
        let start = Instant::now();
        let mut cursor = None;
        let mut notes = 0;
        loop {
            let page = storage
                .pull(&actor, &PullRequest { client_id: CLIENT, cursor, buckets: None, limit: None })
                .await
                .unwrap();
            let bytes = serde_json::to_vec(&page).unwrap();
            std::hint::black_box(bytes);
            notes += page.changes.iter().filter(|c| c.table == "notes").count();
            cursor = Some(page.cursor);
            if !page.has_more {
                break;
            }
        }
        engine_best = engine_best.min(start.elapsed());
        delivered = notes;

        let start = Instant::now();
        let mut after = String::new();
        let mut read = 0;
        loop {
            let page = sqlx::query(
                "SELECT id, owner_id, list_id, title, done, position, body, deleted_at FROM notes
                 WHERE owner_id = 'alice' AND id > $1 ORDER BY id LIMIT 1000",
            )
            .bind(&after)
            .fetch_all(&db.pool)
            .await
            .unwrap();
            if page.is_empty() {
                break;
            }
            let json: Vec<serde_json::Value> = page
                .iter()
                .map(|r| {
                    serde_json::json!({
                        "id": r.get::<String, _>(0), "owner_id": r.get::<String, _>(1), "list_id": r.get::<String, _>(2),
                        "title": r.get::<String, _>(3), "done": r.get::<bool, _>(4), "position": r.get::<i64, _>(5),
                        "body": r.get::<Vec<u8>, _>(6).to_json(),
                        "deleted_at": r.get::<Option<engine::Timestamp>, _>(7).to_json(),
                    })
                })
                .collect();
            std::hint::black_box(serde_json::to_vec(&json).unwrap());
            read += page.len();
            after = page.last().unwrap().get::<String, _>(0);
        }
        baseline_best = baseline_best.min(start.elapsed());
        assert_eq!(read, rows);
    }
    assert_eq!(delivered, rows, "the engine delivered every note");
    let engine = per_second(rows, engine_best);
    let baseline = per_second(rows, baseline_best);
    println!("\n## Pull: bootstrap of {rows} notes in pages of 1,000 (best of 3)\n");
    println!("| | rows/s | time |");
    println!("|---|---:|---:|");
    println!("| engine (pull + JSON) | {engine:.0} | {:.2} s |", engine_best.as_secs_f64());
    println!("| baseline (SELECT + JSON) | {baseline:.0} | {:.2} s |", baseline_best.as_secs_f64());
    println!("| ratio engine / baseline | {:.2} | |", engine / baseline);
    db.drop_database().await;
}

async fn incremental(sizes: &[usize]) {
    println!("\n## Pull: 10 recent changes from a table of N notes (median of 30 pulls)\n");
    println!("| notes in the table | engine pull | baseline (SELECT of the 10 rows) |");
    println!("|---:|---:|---:|");
    for &size in sizes {
        let db = BenchDb::new(8).await;
        let storage = db.storage(example_notes::app()).await;
        seed(&db, size).await;
        db.settle(&storage).await;
        let actor = Actor::new("alice", "alice");
        let mut cursor = None;
        loop {
            let page = storage
                .pull(&actor, &PullRequest { client_id: CLIENT, cursor, buckets: None, limit: Some(10_000) })
                .await
                .unwrap();
            cursor = Some(page.cursor);
            if !page.has_more {
                break;
            }
        }
        let mut engine_times = Vec::new();
        let mut baseline_times = Vec::new();
        for round in 0..30 {
            let ids: Vec<String> = (0..10).map(|i| format!("note-{:08}", 1 + (round * 10 + i) % size)).collect();
            sqlx::query("UPDATE notes SET title = title || '.' WHERE id = ANY($1)")
                .bind(&ids)
                .execute(&db.pool)
                .await
                .unwrap();
            db.settle(&storage).await;
            let start = Instant::now();
            let page = storage
                .pull(&actor, &PullRequest { client_id: CLIENT, cursor: cursor.clone(), buckets: None, limit: None })
                .await
                .unwrap();
            std::hint::black_box(serde_json::to_vec(&page).unwrap());
            engine_times.push(start.elapsed());
            assert_eq!(page.changes.len(), 10, "the pull brings the 10 changed notes");
            cursor = Some(page.cursor);
            let start = Instant::now();
            let rows = sqlx::query(
                "SELECT id, owner_id, list_id, title, done, position, body, deleted_at FROM notes WHERE id = ANY($1)",
            )
            .bind(&ids)
            .fetch_all(&db.pool)
            .await
            .unwrap();
            std::hint::black_box(rows.len());
            baseline_times.push(start.elapsed());
        }
        engine_times.sort();
        baseline_times.sort();
        println!(
            "| {size} | {:.2} ms | {:.2} ms |",
            engine_times[15].as_secs_f64() * 1000.0,
            baseline_times[15].as_secs_f64() * 1000.0
        );
        db.drop_database().await;
    }
}
