//! `engine introspect` adopts an existing database: on a brownfield schema of its own
//! (`brownfield.sql`, with rows), the source it writes is the committed snapshot, and that
//! snapshot is compiled into this test binary (`generated`), provisions the same database without
//! changing a row, and serves each user exactly their organisation's rows over HTTP.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use clap::Parser;
use engine::server::Storage;
use engine::server::storage::PostgresStorage;
use engine::wire::PullResponse;
use serde_json::{Value, json};
use sqlx::Row;

use crate::support::{TestDb, TestServer, postgres_only};

/// Why these tests run on Postgres only.
const POSTGRES_ONLY: &str = "introspection adopts an existing Postgres database";

/// The app `engine introspect` wrote for `brownfield.sql`, exactly as committed.
#[allow(unreachable_pub, dead_code)]
#[path = "snapshots/introspect_brownfield.rs"]
mod generated;

/// The app `engine introspect --tables activity,feature_flags` wrote: no owner column, no
/// membership, so no sync rules.
#[allow(unreachable_pub, dead_code)]
#[path = "snapshots/introspect_unscoped.rs"]
mod generated_unscoped;

const SCHEMA: &str = include_str!("brownfield.sql");
const ACME: &str = "00000000-0000-4000-8000-00000000000a";
const GLOBEX: &str = "00000000-0000-4000-8000-00000000000b";

fn snapshot_path(name: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("integration/snapshots/{name}"))
}

/// `source` is the committed snapshot `name` (which this binary compiles).
fn assert_snapshot(name: &str, source: &str) {
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(snapshot_path(name), source).unwrap();
    }
    let committed = std::fs::read_to_string(snapshot_path(name)).expect("the introspection snapshot exists");
    assert!(
        source == committed,
        "the introspected source {name} changed; if intended, run with UPDATE_SNAPSHOTS=1, review the diff, and run again (the snapshot is compiled into this test)"
    );
}

/// Run the `engine` command with `args`.
async fn engine_cli(args: &[&str]) -> engine_cli::Result<String> {
    let cli = engine_cli::Cli::try_parse_from(std::iter::once("engine").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{e}"));
    cli.run().await
}

/// A fresh database holding the brownfield schema and its rows.
async fn brownfield() -> TestDb {
    let db = TestDb::new().await;
    sqlx::raw_sql(SCHEMA).execute(db.pg()).await.expect("the brownfield schema loads");
    db
}

/// Every table of the schema with its columns, as they were before the engine came.
async fn original_columns(db: &TestDb) -> BTreeMap<String, Vec<String>> {
    let rows = sqlx::query(
        "SELECT table_name::text, column_name::text FROM information_schema.columns
         WHERE table_schema = 'public' ORDER BY table_name, ordinal_position",
    )
    .fetch_all(db.pg())
    .await
    .unwrap();
    let mut tables: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for row in rows {
        tables.entry(row.get(0)).or_default().push(row.get(1));
    }
    tables
}

/// A checksum of every row of every table, over the original columns, and the row counts.
async fn checksums(db: &TestDb, tables: &BTreeMap<String, Vec<String>>) -> BTreeMap<String, (i64, String)> {
    let mut out = BTreeMap::new();
    for (table, columns) in tables {
        let columns: Vec<String> = columns.iter().map(|c| format!("\"{c}\"")).collect();
        let sql = format!(
            "SELECT count(*), coalesce(md5(string_agg(r::text, '|' ORDER BY r::text)), '') FROM (SELECT {} FROM \"{table}\") r",
            columns.join(", ")
        );
        let row = sqlx::query(sqlx::AssertSqlSafe(sql)).fetch_one(db.pg()).await.unwrap();
        out.insert(table.clone(), (row.get(0), row.get(1)));
    }
    out
}

/// Everything `user` pulls from a fresh start: each table's rows.
async fn pull_everything(server: &TestServer, user: &str) -> BTreeMap<String, Vec<Value>> {
    let client_id = uuid::Uuid::new_v4();
    let mut cursor: Option<String> = None;
    let mut tables: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    loop {
        let mut body = json!({"clientId": client_id});
        if let Some(cursor) = &cursor {
            body["cursor"] = json!(cursor);
        }
        let response = server
            .http
            .post(server.url("/sync/pull"))
            .bearer_auth(TestServer::token(user))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success(), "pull as {user}: {}", response.status());
        let page: PullResponse = response.json().await.unwrap();
        assert!(page.tombstones.is_empty(), "a first pull has no tombstones: {:?}", page.tombstones);
        for change in page.changes {
            tables.entry(change.table).or_default().push(Value::Object(change.row));
        }
        if !page.has_more {
            return tables;
        }
        cursor = Some(page.cursor);
    }
}

/// What `org` holds of each synced table: the row count, by SQL on the original schema.
async fn expected_counts(db: &TestDb, org: &str) -> BTreeMap<String, i64> {
    let org: uuid::Uuid = org.parse().unwrap();
    let queries = [
        ("organisations", "SELECT count(*) FROM organisations WHERE id = $1"),
        ("members", "SELECT count(*) FROM members WHERE org_id = $1"),
        // A soft-deleted project has left its buckets.
        ("projects", "SELECT count(*) FROM projects WHERE org_id = $1 AND deleted_at IS NULL"),
        ("tasks", "SELECT count(*) FROM tasks WHERE org_id = $1"),
        ("comments", "SELECT count(*) FROM comments WHERE org_id = $1"),
        ("task_watchers", "SELECT count(*) FROM task_watchers WHERE org_id = $1"),
        ("activity", "SELECT count(*) FROM activity WHERE org_id = $1"),
        ("invoices", "SELECT count(*) FROM invoices WHERE org_id = $1"),
    ];
    let mut out = BTreeMap::new();
    for (table, sql) in queries {
        out.insert(table.to_owned(), sqlx::query_scalar(sql).bind(org).fetch_one(db.pg()).await.unwrap());
    }
    out
}

#[tokio::test]
async fn an_existing_database_is_adopted_without_changing_a_row() {
    if postgres_only(POSTGRES_ONLY) {
        return;
    }
    let db = brownfield().await;
    let columns = original_columns(&db).await;
    let before = checksums(&db, &columns).await;

    let source = engine_cli(&["introspect", "--database-url", &db.url]).await.unwrap();
    assert_snapshot("introspect_brownfield.rs", &source);

    // The compiled snapshot provisions the database it was read from; every row stays as it was.
    let app = generated::app();
    let names: Vec<&str> = app.tables().iter().map(|t| t.meta().name).collect();
    assert_eq!(
        names,
        [
            "activity",
            "comments",
            "feature_flags",
            "invoices",
            "members",
            "organisations",
            "projects",
            "task_watchers",
            "tasks"
        ]
    );
    assert!(!app.is_synced("feature_flags"), "no rule scopes feature_flags: the server keeps it");
    let storage = PostgresStorage::new(db.pg().clone(), Arc::new(app));
    storage.provision().await.expect("the introspected app provisions its own database");
    assert_eq!(checksums(&db, &columns).await, before, "provisioning changed no row of any table");
    let again = engine_cli(&["introspect", "--database-url", &db.url]).await.unwrap();
    assert!(
        again == source,
        "the engine's own columns and tables are not the app's: introspecting again changes nothing"
    );

    let server = TestServer::start(&db, |b| b.app(generated::app())).await;
    db.settle(&storage).await;
    for (user, org) in [("alice", ACME), ("bob", GLOBEX)] {
        let pulled = pull_everything(&server, user).await;
        let expected = expected_counts(&db, org).await;
        let mut received = BTreeMap::new();
        for (table, rows) in &pulled {
            for row in rows {
                let row_org = if table == "organisations" { &row["id"] } else { &row["org_id"] };
                assert_eq!(row_org, org, "{user} received a row of another organisation from {table}: {row}");
            }
            let distinct: BTreeSet<String> = rows.iter().map(Value::to_string).collect();
            received.insert(table.clone(), i64::try_from(distinct.len()).unwrap());
        }
        let expected: BTreeMap<String, i64> = expected.into_iter().filter(|(_, n)| *n > 0).collect();
        assert_eq!(received, expected, "{user} receives exactly the rows of their organisation");
    }

    // The rows arrive as they are in the database, in the types the introspection chose.
    let alice = pull_everything(&server, "alice").await;
    let plan = alice["tasks"].iter().find(|t| t["id"] == "10000000-0000-4000-8000-000000000001").unwrap();
    assert_eq!(plan["title"], "Write the plan");
    assert_eq!(plan["type"], "task");
    assert_eq!(plan["priority"], 2);
    assert_eq!(plan["estimate"], 1.5);
    assert_eq!(plan["details"], json!({"tags": ["plan"]}));
    let invoice = &alice["invoices"][0];
    assert_eq!(invoice["number"], 1001);
    assert!(invoice.get("amount").is_none(), "a left-out column is not synced: {invoice}");
    assert_eq!(checksums(&db, &columns).await, before, "serving the app changed no row either");
}

#[tokio::test]
async fn introspect_writes_a_file_reports_what_it_left_out_and_refuses_nothing_usable() {
    if postgres_only(POSTGRES_ONLY) {
        return;
    }
    let db = brownfield().await;
    let out = std::env::temp_dir().join(format!("engine-model-{}.rs", uuid::Uuid::new_v4().simple()));
    let report = engine_cli(&[
        "introspect",
        "--database-url",
        &db.url,
        "--tables",
        "organisations,members,invoices,import_log",
        "--out",
        out.to_str().unwrap(),
    ])
    .await
    .unwrap();
    let written = std::fs::read_to_string(&out).unwrap();
    std::fs::remove_file(&out).unwrap();
    assert!(report.starts_with(&format!("wrote {}: 3 tables, 1 sync rules\n", out.display())), "{report}");
    for line in [
        "left out column invoices.amount (numeric(12,2)): exact decimals",
        "left out column invoices.status (invoice_status): an enum type",
        "left out column invoices.tags (text[]): an array",
        "left out column invoices.total_cents (bigint): the database computes it",
        "left out table import_log: it has no primary key",
    ] {
        assert!(report.contains(line), "expected `{line}` in:\n{report}");
    }
    assert!(written.contains("pub struct MemberOfOrganisation"), "{written}");
    assert!(!written.contains("pub struct Task "), "only the tables asked for: {written}");

    let nothing = engine_cli(&["introspect", "--database-url", &db.url, "--tables", "import_log"]).await.unwrap_err();
    assert!(matches!(nothing, engine_cli::Error::NothingUsable { .. }), "{nothing}");
    assert!(nothing.to_string().contains("table `import_log`: it has no primary key"), "{nothing}");
    let missing = engine_cli(&["introspect", "--database-url", &db.url, "--tables", "nope"]).await.unwrap_err();
    assert!(missing.to_string().contains("has no table nope"), "{missing}");
    let empty = engine_cli(&["introspect", "--database-url", &db.url, "--schema", "nope"]).await.unwrap_err();
    assert!(empty.to_string().contains("schema `nope` has no table the engine can carry"), "{empty}");
}

#[tokio::test]
async fn tables_no_rule_can_scope_make_an_app_without_sync_rules() {
    if postgres_only(POSTGRES_ONLY) {
        return;
    }
    let db = brownfield().await;
    let source =
        engine_cli(&["introspect", "--database-url", &db.url, "--tables", "activity,feature_flags"]).await.unwrap();
    assert_snapshot("introspect_unscoped.rs", &source);
    let app = generated_unscoped::app();
    assert!(app.sync_rules().rules.is_empty());
    assert!(!app.is_synced("activity") && !app.is_synced("feature_flags"));
    let flags = app.table("feature_flags").unwrap();
    assert_eq!(flags.struct_name, "FeatureFlag");
    let columns: Vec<&str> = flags.columns.iter().map(|c| c.name).collect();
    assert_eq!(columns, ["name", "enabled", "crate"], "`crate` is carried by a renamed field");
    let storage = PostgresStorage::new(db.pg().clone(), Arc::new(app));
    storage.provision().await.expect("an app without sync rules provisions too");
}

/// Catalog text that would break out of the comments and code spans it is quoted in: a newline
/// ends a `//` or `///` line, a backtick a code span, a bidirectional control is refused by rustc.
const HOSTILE_SCHEMA: &str = r#"
CREATE TYPE "mood`
pub fn injected_by_a_type() {}
//" AS ENUM ('calm');
CREATE TABLE notebooks (
  id text PRIMARY KEY DEFAULT E'a`\n#[used] pub static INJECTED_BY_A_DEFAULT: u8 = 0;\n// ',
  owner_id text NOT NULL,
  title text NOT NULL DEFAULT E'\u202Eevil',
  feeling "mood`
pub fn injected_by_a_type() {}
//",
  "odd`
pub fn injected_by_a_column() {}
//" text
);
CREATE TABLE "odd`
pub fn injected_by_a_table() {}
//" (id int);
"#;

#[tokio::test]
async fn catalog_text_cannot_write_code_into_the_generated_source() {
    if postgres_only(POSTGRES_ONLY) {
        return;
    }
    let db = TestDb::new().await;
    sqlx::raw_sql(HOSTILE_SCHEMA).execute(db.pg()).await.expect("the hostile schema loads");
    let source = engine_cli(&["introspect", "--database-url", &db.url]).await.unwrap();
    let file = syn::parse_file(&source).unwrap_or_else(|e| panic!("the generated source parses: {e}\n{source}"));
    let items: Vec<String> = file
        .items
        .iter()
        .map(|item| match item {
            syn::Item::Struct(s) => s.ident.to_string(),
            syn::Item::Mod(m) => m.ident.to_string(),
            syn::Item::Fn(f) => f.sig.ident.to_string(),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(items, ["Notebook", "rules", "app"], "only what introspection writes:\n{source}");
    for line in source.lines() {
        if line.to_lowercase().contains("injected") {
            assert!(line.trim_start().starts_with("//"), "catalog text outside a comment: {line}");
        }
        if line.trim_start().starts_with("//") {
            assert_eq!(line.matches('`').count() % 2, 0, "a code span the catalog opened or closed: {line}");
        }
    }
    assert!(!source.contains('\u{202e}'), "a bidirectional control reached the source");
    assert!(source.contains(r"default `'a\u{60}\u{a}#[used] pub static INJECTED_BY_A_DEFAULT"), "{source}");
    assert!(source.contains(r"Table `odd\u{60}\u{a}pub fn injected_by_a_table() {}\u{a}//` is left out"), "{source}");
}
