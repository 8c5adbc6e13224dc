//! Provisioning on a real Postgres: the plan, idempotence, existing tables, newer engines.

use std::sync::Arc;

use engine::server::Storage;
use engine::server::storage::PostgresStorage;
use sqlx::Row;

use crate::support::{TestDb, postgres_only};

/// Why these tests run on Postgres only.
const POSTGRES_ONLY: &str = "Postgres' provisioning: its triggers, functions and transaction-id stamps (SQLite's are in engine-runtime's storage::sqlite tests)";

fn snapshot_path() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("integration/snapshots/notes_provision.sql")
}

#[test]
fn the_notes_plan_matches_the_committed_snapshot() {
    let plan = engine::server::provision_plan(&example_notes::app()).join(";\n\n") + ";\n";
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(snapshot_path().parent().unwrap()).unwrap();
        std::fs::write(snapshot_path(), &plan).unwrap();
    }
    let committed = std::fs::read_to_string(snapshot_path()).expect("the plan snapshot exists");
    assert!(
        plan == committed,
        "the provisioning plan changed; if intended, run with UPDATE_SNAPSHOTS=1 and review the diff"
    );
}

/// Everything about the schema a second run could change: tables, columns, indexes, functions,
/// triggers, and the engine's metadata.
async fn schema_fingerprint(db: &TestDb) -> Vec<String> {
    let queries = [
        "SELECT table_name || '.' || column_name || ':' || data_type || ':' || is_nullable || ':' || coalesce(column_default, '')
         FROM information_schema.columns WHERE table_schema = 'public' ORDER BY 1",
        "SELECT indexname || ':' || indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1",
        "SELECT p.proname || ':' || pg_get_functiondef(p.oid) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
         WHERE n.nspname = 'public' ORDER BY 1",
        "SELECT tgname || ':' || pg_get_triggerdef(t.oid) FROM pg_trigger t WHERE NOT tgisinternal ORDER BY 1",
        "SELECT key || '=' || value FROM _engine_meta ORDER BY 1",
    ];
    let mut out = Vec::new();
    for query in queries {
        let rows = sqlx::query(query).fetch_all(db.pg()).await.unwrap();
        out.extend(rows.iter().map(|r| r.get::<String, _>(0)));
    }
    out
}

#[tokio::test]
async fn a_second_run_changes_nothing() {
    if postgres_only(POSTGRES_ONLY) {
        return;
    }
    let db = TestDb::new().await;
    let storage = db.notes_pg().await;
    sqlx::query("INSERT INTO lists (id, owner_id, title, archived) VALUES ('l1', 'alice', 'groceries', false)")
        .execute(db.pg())
        .await
        .unwrap();
    let before = schema_fingerprint(&db).await;
    let xid_before: String =
        sqlx::query_scalar("SELECT _engine_xid::text FROM lists").fetch_one(db.pg()).await.unwrap();
    storage.provision().await.unwrap();
    // A storage built afresh (a restarted server) provisions too, and changes nothing either.
    PostgresStorage::new(db.pg().clone(), Arc::new(example_notes::app())).provision().await.unwrap();
    assert_eq!(schema_fingerprint(&db).await, before);
    let xid_after: String = sqlx::query_scalar("SELECT _engine_xid::text FROM lists").fetch_one(db.pg()).await.unwrap();
    assert_eq!(xid_before, xid_after, "no row was rewritten");
    storage.verify().await.unwrap();
}

/// A row is stamped with the transaction that writes it however it is written: by the column's
/// default on an insert that names no stamp (where the stamp trigger does not run), by the
/// trigger on an insert that names an old one and on every update.
#[tokio::test]
async fn every_write_stamps_its_row_with_its_own_transaction() {
    if postgres_only(POSTGRES_ONLY) {
        return;
    }
    let db = TestDb::new().await;
    db.notes_pg().await;
    let mut tx = db.pg().begin().await.unwrap();
    let own: String = sqlx::query_scalar("SELECT pg_current_xact_id()::text").fetch_one(&mut *tx).await.unwrap();
    sqlx::query("INSERT INTO lists (id, owner_id, title, archived) VALUES ('plain', 'alice', 't', false)")
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO lists (id, owner_id, title, archived, _engine_xid) VALUES ('copied', 'alice', 't', false, '3')",
    )
    .execute(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let stamps: Vec<String> =
        sqlx::query_scalar("SELECT _engine_xid::text FROM lists ORDER BY id").fetch_all(db.pg()).await.unwrap();
    assert_eq!(stamps, [own.clone(), own.clone()], "a copied row's old stamp is replaced");
    let mut tx = db.pg().begin().await.unwrap();
    let later: String = sqlx::query_scalar("SELECT pg_current_xact_id()::text").fetch_one(&mut *tx).await.unwrap();
    sqlx::query("UPDATE lists SET title = 'u' WHERE id = 'plain'").execute(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();
    let stamp: String =
        sqlx::query_scalar("SELECT _engine_xid::text FROM lists WHERE id = 'plain'").fetch_one(db.pg()).await.unwrap();
    assert_eq!(stamp, later, "an update stamps its transaction");
    assert_ne!(own, later);
}

/// The engine's own update sets the row's stamp in its statement, so the stamp trigger is not
/// called for it; the tombstone trigger, which shares the function, is. Counted by Postgres'
/// function statistics: 2 calls for an updated note before, 1 after.
#[tokio::test]
async fn the_engines_update_stamps_its_row_without_the_stamp_trigger() {
    if postgres_only(POSTGRES_ONLY) {
        return;
    }
    let db = TestDb::new().await;
    let name: String = sqlx::query_scalar("SELECT current_database()").fetch_one(db.pg()).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("ALTER DATABASE \"{name}\" SET track_functions = 'pl'")))
        .execute(db.pg())
        .await
        .unwrap();
    // A pool of its own, whose sessions begin after the setting.
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let storage = PostgresStorage::new(pool, Arc::new(example_notes::app()));
    storage.provision().await.unwrap();
    let storage: Arc<dyn Storage> = Arc::new(storage);
    let alice = engine::Actor::new("alice", "alice");
    let push = |id: u64, name: &str, args: serde_json::Value| {
        let (storage, alice) = (storage.clone(), alice.clone());
        let mutation = engine::wire::MutationRequest {
            mutation_id: id,
            client_mutation_id: uuid::Uuid::new_v4(),
            name: name.into(),
            args,
            hlc: None,
        };
        async move {
            let request = engine::wire::PushRequest { client_id: uuid::Uuid::from_u128(7), mutations: vec![mutation] };
            let pushed = storage.push(&alice, &request).await.unwrap();
            assert_eq!(
                pushed.response.results[0].status,
                engine::wire::MutationStatus::Applied,
                "{:?}",
                pushed.response
            );
        }
    };
    push(1, "create_list", serde_json::json!({"id": "l1", "title": "t"})).await;
    push(2, "add_note", serde_json::json!({"id": "n1", "list_id": "l1", "title": "milk"})).await;
    push(3, "update_note", serde_json::json!({"id": "n1", "done": true})).await;
    let calls = || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_user_functions WHERE funcname = '_engine_track_notes'",
        )
        .fetch_one(db.pg())
        .await
        .unwrap()
    };
    // A session sends its transaction's counts together, once it is idle.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while calls().await == 0 {
        assert!(tokio::time::Instant::now() < deadline, "the update's trigger calls are never counted");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(calls().await, 1, "the tombstone trigger only");
    let stamp: bool =
        sqlx::query_scalar("SELECT _engine_xid > (SELECT _engine_xid FROM lists WHERE id = 'l1') FROM notes")
            .fetch_one(db.pg())
            .await
            .unwrap();
    assert!(stamp, "the update stamped the note with its own transaction");
}

/// A database provisioned when the stamp trigger ran on every write gets the conditional one:
/// the plan shows it replaced, and provisioning replaces it.
#[tokio::test]
async fn a_stamp_trigger_without_its_condition_is_replaced() {
    if postgres_only(POSTGRES_ONLY) {
        return;
    }
    let db = TestDb::new().await;
    let storage = db.notes_pg().await;
    sqlx::query(
        "CREATE OR REPLACE TRIGGER _engine_stamp BEFORE INSERT OR UPDATE ON lists FOR EACH ROW EXECUTE FUNCTION _engine_track_lists()",
    )
    .execute(db.pg())
    .await
    .unwrap();
    let plan = storage.plan_changes().await.unwrap();
    assert!(plan.starts_with("~ trigger _engine_stamp on lists\n+ CREATE OR REPLACE TRIGGER _engine_stamp"), "{plan}");
    assert!(plan.contains("WHEN (NEW._engine_xid IS DISTINCT FROM pg_current_xact_id())"), "{plan}");
    assert!(storage.verify().await.is_err(), "verify refuses the old trigger");
    storage.provision().await.unwrap();
    assert_eq!(storage.plan_changes().await.unwrap(), "", "replaced");
    let conditional: bool = sqlx::query_scalar(
        "SELECT tgqual IS NOT NULL FROM pg_trigger WHERE tgname = '_engine_stamp' AND tgrelid = 'lists'::regclass",
    )
    .fetch_one(db.pg())
    .await
    .unwrap();
    assert!(conditional);
}

#[tokio::test]
async fn a_pre_existing_table_keeps_its_rows_and_gains_the_engines_columns() {
    if postgres_only(POSTGRES_ONLY) {
        return;
    }
    let db = TestDb::new().await;
    sqlx::raw_sql(
        "CREATE TABLE lists (id text PRIMARY KEY, owner_id text NOT NULL, title text NOT NULL, archived boolean NOT NULL, legacy text);
         INSERT INTO lists VALUES ('old-1', 'alice', 'from before', false, 'kept'), ('old-2', 'bob', 'also', true, NULL);",
    )
    .execute(db.pg())
    .await
    .unwrap();
    db.notes_pg().await;
    let rows =
        sqlx::query("SELECT id, legacy, _engine_xid::text FROM lists ORDER BY id").fetch_all(db.pg()).await.unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].get::<Option<String>, _>(1).as_deref(), Some("kept"));
    assert!(rows.iter().all(|r| r.get::<String, _>(2).parse::<u64>().is_ok()), "existing rows are stamped");
    let triggers: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'lists'::regclass AND tgname LIKE '_engine_%'",
    )
    .fetch_one(db.pg())
    .await
    .unwrap();
    assert_eq!(triggers, 2);
}

#[tokio::test]
async fn a_database_of_a_newer_engine_is_refused() {
    if postgres_only(POSTGRES_ONLY) {
        return;
    }
    let db = TestDb::new().await;
    let storage = db.notes_pg().await;
    sqlx::query("UPDATE _engine_meta SET value = '999' WHERE key = 'schema_version'").execute(db.pg()).await.unwrap();
    let err = storage.provision().await.unwrap_err();
    assert!(err.to_string().contains("newer engine (schema version 999)"), "{err}");
    let err = storage.verify().await.unwrap_err();
    assert!(err.to_string().contains("newer engine"), "{err}");
}

#[tokio::test]
async fn verify_refuses_a_database_provisioned_for_nothing_or_something_else() {
    if postgres_only(POSTGRES_ONLY) {
        return;
    }
    let db = TestDb::new().await;
    let storage = PostgresStorage::new(db.pg().clone(), Arc::new(example_notes::app()));
    assert!(storage.verify().await.unwrap_err().to_string().contains("not provisioned"));
    sqlx::raw_sql("CREATE TABLE _engine_meta (key text PRIMARY KEY, value text NOT NULL); INSERT INTO _engine_meta VALUES ('schema_version', '1'), ('plan_fingerprint', 'other')")
        .execute(db.pg())
        .await
        .unwrap();
    assert!(storage.verify().await.unwrap_err().to_string().contains("another version of this app"));
}

#[tokio::test]
async fn bucket_keys_in_sql_equal_bucket_keys_in_rust() {
    if postgres_only(POSTGRES_ONLY) {
        return;
    }
    let db = TestDb::new().await;
    db.notes_pg().await;
    for params in
        [vec!["alice"], vec!["a/b c%"], vec!["é ü 日本"], vec![""], vec!["x", "y-z.~_"], vec!["'quote\"", "\\"]]
    {
        let sql: String = sqlx::query_scalar("SELECT _engine_bucket_key('rule', $1::text[])")
            .bind(params.iter().map(|p| p.to_string()).collect::<Vec<_>>())
            .fetch_one(db.pg())
            .await
            .unwrap();
        assert_eq!(sql, engine::BucketKey::new("rule", &params).as_str(), "{params:?}");
    }
}

/// Adopting a table of a million rows rewrites none of them, while another session goes on
/// inserting into it: the stamp's default, `pg_current_xact_id()`, is stable, so Postgres
/// stores the provisioning transaction's id as the value of every existing row instead of
/// writing it into each (a volatile default would rewrite the table under an exclusive lock).
/// The longest of the other session's inserts is printed, a figure and not a limit.
#[tokio::test]
async fn a_large_table_is_adopted_without_a_rewrite_while_it_is_written() {
    if postgres_only(POSTGRES_ONLY) {
        return;
    }
    const ROWS: i64 = 1_000_000;
    let db = TestDb::new().await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE TABLE lists (id text PRIMARY KEY, owner_id text NOT NULL, title text NOT NULL, archived boolean NOT NULL);
         INSERT INTO lists SELECT 'old-' || i, 'alice', 'from before', false FROM generate_series(1, {ROWS}) AS i;"
    )))
    .execute(db.pg())
    .await
    .unwrap();
    let file = || async {
        sqlx::query_scalar::<_, i64>("SELECT pg_relation_filenode('lists')::bigint").fetch_one(db.pg()).await.unwrap()
    };
    let before = file().await;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let pool = db.pg().clone();
    let writer = tokio::spawn(async move {
        let mut conn = pool.acquire().await.unwrap();
        let (mut written, mut longest) = (0_i64, std::time::Duration::ZERO);
        while !*stopped.borrow() {
            let started = std::time::Instant::now();
            sqlx::query("INSERT INTO lists (id, owner_id, title, archived) VALUES ($1, 'bob', 'meanwhile', false)")
                .bind(format!("new-{written}"))
                .execute(&mut *conn)
                .await
                .unwrap();
            longest = longest.max(started.elapsed());
            written += 1;
        }
        (written, longest)
    });
    let started = std::time::Instant::now();
    let storage = db.notes_pg().await;
    let took = started.elapsed();
    stop.send(true).unwrap();
    let (written, longest) = writer.await.unwrap();
    eprintln!(
        "adopting {ROWS} rows took {took:?}; another session inserted {written} rows meanwhile, the longest in {longest:?}"
    );

    assert_eq!(file().await, before, "the table was not rewritten");
    let (rows, unstamped, not_null): (i64, i64, bool) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM lists), (SELECT count(*) FROM lists WHERE _engine_xid IS NULL),
                (SELECT attnotnull FROM pg_attribute WHERE attrelid = 'lists'::regclass AND attname = '_engine_xid')",
    )
    .fetch_one(db.pg())
    .await
    .unwrap();
    assert_eq!(rows, ROWS + written, "every row is kept");
    assert_eq!(unstamped, 0, "every row is stamped");
    assert!(not_null, "the stamp is NOT NULL");
    assert_eq!(storage.plan_changes().await.unwrap(), "", "the adopted database is current");
}
