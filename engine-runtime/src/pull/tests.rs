//! The plan of a pull's walk, pinned on data written as apps write it (many small transactions,
//! several users, no ANALYZE): per bucket an ordered index range scan under a `LIMIT`, never a
//! bitmap scan, a sequential scan or a sort of a whole bucket (a step over one bucket sorts
//! nothing at all); and the rows it reads stay within
//! the page plus a bucket's worth, wherever the page starts.

use std::sync::Arc;

use serde_json::Value;
use sqlx::PgPool;

use super::page::Page;
use super::{PLANNER, scan_tombstones};
use crate::pg::sql::Sql;
use crate::pg::test_db::TestDb;
use crate::pull::cursor::{Group, TombstonePosition};
use crate::rules::selection::{WalkStep, push_walk};
use crate::storage::Storage;
use crate::storage::postgres::PostgresStorage;

/// Ten users, each owning ten lists of 150 notes, and a big list of 1,500 notes, written 55 to a
/// transaction (5 of them to the big list).
async fn write_as_apps_do(pool: &PgPool) {
    sqlx::raw_sql(
        "ALTER TABLE notes SET (autovacuum_enabled = false); ALTER TABLE lists SET (autovacuum_enabled = false)",
    )
    .execute(pool)
    .await
    .unwrap();
    let (mut n, mut big) = (0, 0);
    for _ in 0..300 {
        let mut batch = String::from("BEGIN;");
        for _ in 0..50 {
            let (user, list) = (n % 10, n % 100);
            batch.push_str(&format!(
                "INSERT INTO notes (id, owner_id, list_id, title, done, position) VALUES ('n{n:05}', 'u{user}', 'l{list}', 't', false, {n});"
            ));
            n += 1;
        }
        for _ in 0..5 {
            batch.push_str(&format!(
                "INSERT INTO notes (id, owner_id, list_id, title, done, position) VALUES ('b{big:05}', 'u{}', 'big', 't', false, {big});",
                big % 10
            ));
            big += 1;
        }
        batch.push_str("COMMIT;");
        sqlx::raw_sql(sqlx::AssertSqlSafe(batch)).execute(pool).await.unwrap();
    }
}

/// Run `test` to its end on a runtime of its own.
fn block_on<F: std::future::Future>(test: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(test)
}

/// A fresh database with the notes app provisioned.
async fn notes_db() -> (TestDb, PostgresStorage) {
    let db = TestDb::new().await;
    let storage = PostgresStorage::new(db.pool.clone(), Arc::new(example_notes::app()));
    storage.provision().await.unwrap();
    (db, storage)
}

/// Every node of a JSON plan, with the node types above it.
fn nodes<'p>(plan: &'p Value, above: &mut Vec<String>, out: &mut Vec<(Vec<String>, &'p Value)>) {
    out.push((above.clone(), plan));
    above.push(plan["Node Type"].as_str().unwrap_or_default().to_owned());
    for child in plan["Plans"].as_array().into_iter().flatten() {
        nodes(child, above, out);
    }
    above.pop();
}

async fn explain(pool: &PgPool, step: &WalkStep<'_>, rule: &str) -> Value {
    let app = example_notes::app();
    let rules = app.rule_index();
    let selection = rules.selections("notes").iter().find(|s| s.rule.name == rule).unwrap().clone();
    let table = app.table("notes").unwrap();
    let mut sql = Sql::new("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ");
    push_walk(&mut sql, table, &selection, step);
    let mut tx = pool.begin().await.unwrap();
    sqlx::raw_sql(PLANNER).execute(&mut *tx).await.unwrap();
    let plan: Value = sql.build_query_scalar().fetch_one(&mut *tx).await.unwrap();
    tx.rollback().await.unwrap();
    plan[0]["Plan"].clone()
}

/// The plan reads `notes` only by ordered index scans under a `LIMIT`, sorts nothing but within
/// a bucket, and reads at most `most` rows.
fn assert_walks(plan: &Value, most: u64) {
    let mut all = Vec::new();
    nodes(plan, &mut Vec::new(), &mut all);
    let mut read = 0;
    for (above, node) in &all {
        let kind = node["Node Type"].as_str().unwrap_or_default();
        assert!(!kind.starts_with("Bitmap"), "no bitmap scan: {plan:#}");
        assert_ne!(kind, "Sort", "no sort of a whole bucket: {plan:#}");
        assert_ne!(kind, "Seq Scan", "no sequential scan: {plan:#}");
        if node["Relation Name"] == "notes" {
            assert_eq!(kind, "Index Scan", "{plan:#}");
            assert!(above.iter().any(|k| k == "Limit"), "each bucket's scan stops at the page: {plan:#}");
            read += node["Actual Rows"].as_u64().unwrap() * node["Actual Loops"].as_u64().unwrap();
        }
    }
    assert!(read <= most, "read {read} rows of notes, at most {most} expected: {plan:#}");
}

/// The plan sorts nothing: the index gives the order.
fn assert_sorts_nothing(plan: &Value) {
    let mut all = Vec::new();
    nodes(plan, &mut Vec::new(), &mut all);
    for (_, node) in &all {
        let kind = node["Node Type"].as_str().unwrap_or_default();
        assert!(!kind.contains("Sort"), "a step over one bucket sorts nothing: {plan:#}");
    }
}

/// The blocks of `notes` and its indexes the plan's scans read.
fn blocks(plan: &Value) -> u64 {
    let mut all = Vec::new();
    nodes(plan, &mut Vec::new(), &mut all);
    all.iter()
        .filter(|(_, node)| node["Relation Name"] == "notes")
        .map(|(_, node)| node["Shared Hit Blocks"].as_u64().unwrap() + node["Shared Read Blocks"].as_u64().unwrap())
        .sum()
}

#[test]
fn a_page_of_the_walk_reads_what_it_delivers_plus_a_bucket() {
    block_on(async {
        let (db, _provisioned) = notes_db().await;
        write_as_apps_do(&db.pool).await;
        let analyzed: Option<f32> = sqlx::query_scalar("SELECT reltuples FROM pg_class WHERE relname = 'notes'")
            .fetch_one(&db.pool)
            .await
            .unwrap();
        assert_eq!(analyzed, Some(-1.0), "the planner has no statistics of notes");

        // A bootstrap of the big list's 1,500 notes, in pages of 500.
        let big = vec![vec!["big".to_owned()]];
        let first = explain(
            &db.pool,
            &WalkStep { buckets: &big, resume: None, from: 0, to: u64::MAX / 2, limit: 500, stamps: false },
            "shared",
        )
        .await;
        assert_walks(&first, 500);
        assert_sorts_nothing(&first);
        assert_eq!(first["Actual Rows"], 500);
        // A later page, resumed after the big list's 1,200th note, reads no more than the first.
        let (xid, id): (String, String) = sqlx::query_as(
            "SELECT _engine_xid::text, id FROM notes WHERE list_id = 'big' ORDER BY _engine_xid, id COLLATE \"C\" OFFSET 1199 LIMIT 1",
        )
        .fetch_one(&db.pool)
        .await
        .unwrap();
        let key = [Value::from(id)];
        let deep = WalkStep {
            buckets: &big,
            resume: Some((xid.parse().unwrap(), &key[..])),
            from: 0,
            to: u64::MAX / 2,
            limit: 500,
            stamps: false,
        };
        let plan = explain(&db.pool, &deep, "shared").await;
        assert_walks(&plan, 500);
        assert_sorts_nothing(&plan);
        assert_eq!(plan["Actual Rows"], 300, "the rest of the bucket after {xid} {key:?}: {plan:#}");

        // An incremental step, from a transaction after every row: it finds nothing, and finds
        // it by a probe of the index, not by reading the big list's history.
        let now: String = sqlx::query_scalar("SELECT pg_current_xact_id()::text").fetch_one(&db.pool).await.unwrap();
        let recent = WalkStep {
            buckets: &big,
            resume: None,
            from: now.parse().unwrap(),
            to: u64::MAX / 2,
            limit: 500,
            stamps: false,
        };
        let plan = explain(&db.pool, &recent, "shared").await;
        assert_walks(&plan, 0);
        let probe = blocks(&plan);
        assert!(probe <= 4, "an empty step reads {probe} blocks of notes, at most 4 expected: {plan:#}");
        // The same from a resumed row older than the step: the step, not the row, bounds the scan.
        let old = WalkStep { resume: Some((xid.parse().unwrap(), &key[..])), ..recent };
        assert!(blocks(&explain(&db.pool, &old, "shared").await) <= probe);

        // All 100 lists shared with one actor: a page of 500 passes four lists of 150 notes.
        let lists: Vec<Vec<String>> = (0..100).map(|l| vec![format!("l{l}")]).collect();
        let shared = explain(
            &db.pool,
            &WalkStep { buckets: &lists, resume: None, from: 0, to: u64::MAX / 2, limit: 500, stamps: false },
            "shared",
        )
        .await;
        assert_walks(&shared, 500 + 150);
        assert_eq!(shared["Actual Rows"], 500);
        // Late in the walk, past 90 of the lists: what came before costs nothing.
        let late = &lists[90..];
        let step = WalkStep { buckets: late, resume: None, from: 0, to: u64::MAX / 2, limit: 500, stamps: false };
        assert_walks(&explain(&db.pool, &step, "shared").await, 500 + 150);
        db.drop().await;
    });
}

#[test]
fn tombstones_come_in_transaction_order_across_a_digit_boundary() {
    block_on(async {
        let (db, _provisioned) = notes_db().await;
        // Transactions 99, 100 and 1000: as text, 100 and 1000 sort before 99.
        sqlx::raw_sql(
            "INSERT INTO _engine_tombstones (xid, table_name, key, buckets) VALUES
               ('1000', 'notes', '{\"id\": \"c\"}', '{shared/l}'),
               ('99', 'notes', '{\"id\": \"a\"}', '{shared/l}'),
               ('100', 'notes', '{\"id\": \"b\"}', '{shared/l}')",
        )
        .execute(&db.pool)
        .await
        .unwrap();
        let app = example_notes::app();
        let rules = app.rule_index();
        let bucket = engine_kernel::BucketKey::parse("shared/l").unwrap();
        let requested = std::collections::BTreeSet::from([bucket.clone()]);
        let mut group =
            Group { buckets: vec![bucket], rows: 0, tombstones: TombstonePosition::at(1), walk: None, granted: 0 };
        let mut seen = Vec::new();
        let mut conn = db.pool.acquire().await.unwrap();
        // A page of one entry at a time: each page goes on from where the last ended.
        for _ in 0..4 {
            let mut page = Page::new(&rules, &requested, 1, usize::MAX);
            scan_tombstones(&mut conn, &mut group, 5_000, &mut page).await.unwrap();
            seen.extend(page.finish().tombstones.into_iter().map(|t| t.key["id"].clone()));
        }
        assert_eq!(seen, ["a", "b", "c"], "every tombstone, in transaction order");
        drop(conn);
        db.drop().await;
    });
}

/// The notes of a pull, by id and title.
fn notes(response: &engine_kernel::wire::PullResponse) -> Vec<(String, String)> {
    let mut notes: Vec<(String, String)> = response
        .changes
        .iter()
        .filter(|c| c.table == "notes")
        .map(|c| (c.row["id"].as_str().unwrap().to_owned(), c.row["title"].as_str().unwrap().to_owned()))
        .collect();
    notes.sort();
    notes
}

/// An actor of more buckets than a walk probes one by one: an incremental pull reads which of
/// them changed from the window's rows, and delivers exactly the rows of those, none of another
/// actor's; a window with more rows than the actor has buckets is walked bucket by bucket.
#[test]
fn an_incremental_pull_of_many_buckets_delivers_what_changed_in_them() {
    block_on(async {
        let (db, storage) = notes_db().await;
        let exec = |sql: String| {
            let pool = db.pool.clone();
            async move { sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&pool).await.unwrap() }
        };
        // carol is a member of 80 lists of 3 notes; dave's list is not hers.
        let mut seed = String::new();
        for l in 0..80 {
            seed.push_str(&format!(
                "INSERT INTO lists (id, owner_id, title, archived) VALUES ('l{l}', 'o', 't', false);
                 INSERT INTO list_members (list_id, user_id, owner_id, role, accepted, invited_by, title) VALUES ('l{l}', 'carol', 'o', 'viewer', true, 'x', 't');"
            ));
            for n in 0..3 {
                seed.push_str(&format!(
                    "INSERT INTO notes (id, owner_id, list_id, title, done, position) VALUES ('n{l}-{n}', 'o', 'l{l}', 'first', false, {n});"
                ));
            }
        }
        seed.push_str("INSERT INTO lists (id, owner_id, title, archived) VALUES ('dave', 'dave', 't', false);");
        exec(seed).await;
        let carol = engine_kernel::Actor::new("carol", "carol");
        let client = uuid::Uuid::new_v4();
        let pull = |cursor: Option<String>| {
            let request = engine_kernel::wire::PullRequest {
                client_id: client,
                cursor,
                buckets: None,
                limit: Some(1000),
                ..Default::default()
            };
            let (storage, carol) = (&storage, &carol);
            async move { storage.pull(carol, &request).await.unwrap().response().unwrap() }
        };
        // Pull on from `cursor` until `want` notes arrived, or 50 tries: what arrived, sorted (two
        // writes may arrive on different pages when a transaction elsewhere in the cluster holds
        // the window back).
        let pull_until = async |cursor: &mut String, want: usize| {
            let mut changed = Vec::new();
            for _ in 0..50 {
                let page = pull(Some(cursor.clone())).await;
                *cursor = page.cursor.clone();
                changed.extend(notes(&page));
                if changed.len() >= want {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            changed.sort();
            changed
        };
        let first = pull(None).await;
        assert_eq!(notes(&first).len(), 240);
        let mut cursor = first.cursor;

        // Two notes change, one is added, and dave writes into his own list.
        exec("UPDATE notes SET title = 'second' WHERE id IN ('n3-1', 'n70-2')".into()).await;
        exec("INSERT INTO notes (id, owner_id, list_id, title, done, position) VALUES ('n41-9', 'o', 'l41', 'new', false, 9), ('d1', 'dave', 'dave', 'dave''s', false, 0)".into()).await;
        let changed = pull_until(&mut cursor, 3).await;
        let expected = [("n3-1", "second"), ("n41-9", "new"), ("n70-2", "second")];
        assert_eq!(changed, expected.map(|(id, title)| (id.to_owned(), title.to_owned())));

        // More rows in the window than carol has buckets: dave's 200, then one of hers.
        let many: Vec<String> = (0..200).map(|n| format!("('d-{n}', 'dave', 'dave', 't', false, {n})")).collect();
        exec(format!("INSERT INTO notes (id, owner_id, list_id, title, done, position) VALUES {}", many.join(", ")))
            .await;
        exec("UPDATE notes SET title = 'third' WHERE id = 'n79-0'".into()).await;
        let changed = pull_until(&mut cursor, 1).await;
        assert_eq!(changed, [("n79-0".to_owned(), "third".to_owned())]);
        db.drop().await;
    });
}
