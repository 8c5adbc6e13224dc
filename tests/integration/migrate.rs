//! `engine migrate` and `engine check`: an app read back from its contract provisions exactly as
//! the compiled app does, from a file or from a running server; bad contracts are refused with
//! the reason and touch no database.

use clap::Parser;
use engine::contract::app_from_contract;
use engine::wire::{MutationRequest, MutationStatus, PullRequest, PushRequest};
use engine::{Actor, App, contract};
use serde_json::{Value, json};

use crate::support::{Backend, TestDb, TestServer, backend, postgres_only};

/// An app using what the notes app does not: every column type, custom claims, constant
/// filters in selections and membership queries, raw membership SQL.
mod wide {
    use engine::{CrdtMap, CrdtText, Timestamp};

    /// Every column type.
    #[engine::table(name = "samples", merge = "field")]
    #[derive(Debug, Clone)]
    pub(crate) struct Sample {
        #[engine(primary_key)]
        pub id: uuid::Uuid,
        #[engine(owner)]
        pub owner_id: String,
        pub team_id: i64,
        pub small: i16,
        pub medium: i32,
        pub single: f32,
        pub double: f64,
        pub flag: bool,
        pub at: Timestamp,
        pub doc: serde_json::Value,
        pub bytes: Vec<u8>,
        pub text: CrdtText,
        pub map: CrdtMap,
        pub maybe_text: Option<String>,
        #[engine(soft_delete)]
        pub deleted_at: Option<Timestamp>,
    }

    /// Who is in which team.
    #[engine::table(name = "team_members")]
    #[derive(Debug, Clone)]
    pub(crate) struct TeamMember {
        #[engine(primary_key)]
        pub team_id: i64,
        #[engine(primary_key)]
        pub user_id: String,
        pub active: bool,
    }

    #[engine::sync_rules]
    pub(crate) mod rules {
        use super::{Sample, TeamMember};

        /// Samples of the actor's organisation at its rank, unflagged.
        #[bucket(
            data(Sample::owner_id == bucket.org && Sample::small == bucket.rank && Sample::flag == false),
            write(Sample)
        )]
        #[derive(Debug)]
        pub(crate) struct OrgRank {
            #[param(actor.claims.org)]
            pub org: String,
            #[param(actor.claims.rank)]
            pub rank: i16,
        }

        /// Samples and members of the teams the actor is an active member of.
        #[bucket(
            membership(TeamMember::user_id == actor.user_id && TeamMember::active == true),
            data(Sample::team_id == bucket.team_id, TeamMember::team_id == bucket.team_id),
            write(Sample),
        )]
        #[derive(Debug)]
        pub(crate) struct Team {
            #[param(TeamMember::team_id)]
            pub team_id: i64,
        }

        /// Samples the actor was handed by raw SQL.
        #[bucket(
            membership(raw(
                "SELECT team_id FROM team_members WHERE user_id = $user_id AND team_id > 100",
                reads(TeamMember),
            )),
            data(Sample::team_id == bucket.big_team),
            write(Sample),
        )]
        #[derive(Debug)]
        pub(crate) struct BigTeam {
            #[param(membership.team_id)]
            pub big_team: i64,
        }
    }

    pub(crate) fn app() -> engine::App {
        engine::app! { tables: [TeamMember, Sample], mutators: [], sync_rules: rules }
    }
}

/// The contract's `x-engine` tables and sync rules, row schemas left out.
fn storage_part(doc: &Value) -> Value {
    let mut tables = doc["x-engine"]["tables"].clone();
    for table in tables.as_object_mut().unwrap().values_mut() {
        table.as_object_mut().unwrap().remove("row");
    }
    json!({"tables": tables, "syncRules": doc["x-engine"]["syncRules"]})
}

#[test]
fn an_app_read_from_its_contract_has_the_apps_plan() {
    // The teams app and the authors test app compare rows with the actor (`row.author == actor.user_id`).
    for app in [example_notes::app(), wide::app(), example_teams::app(), crate::authors::app::app()] {
        let doc = contract(&app);
        let read = app_from_contract(&doc).unwrap();
        assert_eq!(engine::server::provision_plan(&read), engine::server::provision_plan(&app));
        assert_eq!(storage_part(&contract(&read)), storage_part(&doc), "the contract survives a round trip");
    }
}

/// Run the `engine` command with `args`.
async fn engine_cli(args: &[&str]) -> engine_cli::Result<String> {
    let cli = engine_cli::Cli::try_parse_from(std::iter::once("engine").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{e}"));
    cli.run().await
}

fn notes_contract_file() -> String {
    format!("{}/../examples/notes/contract.json", env!("CARGO_MANIFEST_DIR"))
}

/// The compiled notes app accepts the database as provisioned for it, and serves a push and a
/// pull on it.
async fn serves_the_notes_app(db: &TestDb) {
    let storage = db.connect(example_notes::app(), engine::storage::StoreLimits::default()).await;
    storage.verify().await.expect("the compiled app finds the database provisioned for it");
    let alice = Actor::new("alice", "alice");
    let client_id = uuid::Uuid::new_v4();
    let create = MutationRequest {
        mutation_id: 1,
        client_mutation_id: uuid::Uuid::new_v4(),
        name: "create_list".into(),
        args: json!({"id": "l1", "title": "groceries"}),
        hlc: None,
    };
    let pushed = storage.push(&alice, &PushRequest { client_id, mutations: vec![create] }).await.unwrap();
    assert_eq!(pushed.response.results[0].status, MutationStatus::Applied);
    db.settle(&*storage).await;
    let pulled = storage
        .pull(&alice, &PullRequest { client_id, cursor: None, buckets: None, limit: None, ..Default::default() })
        .await
        .unwrap()
        .response()
        .unwrap();
    assert!(pulled.changes.iter().any(|c| c.table == "lists" && c.row["id"] == "l1"));
}

async fn is_provisioned(db: &TestDb) -> bool {
    let sql = match backend() {
        Backend::Postgres => "SELECT count(*) FROM pg_tables WHERE tablename = '_engine_meta'",
        Backend::Sqlite => "SELECT count(*) FROM sqlite_schema WHERE name = '_engine_meta'",
    };
    sqlx::query_scalar::<_, i64>(sql).fetch_one(&db.pool).await.unwrap() > 0
}

#[tokio::test]
async fn migrate_provisions_from_a_contract_file_and_a_second_run_does_nothing() {
    let db = TestDb::new().await;
    let file = notes_contract_file();
    let first = engine_cli(&["migrate", &file, "--database-url", &db.url]).await.unwrap();
    assert!(first.starts_with("provisioned for tables list_members, lists, notes"), "{first}");
    serves_the_notes_app(&db).await;
    let second = engine_cli(&["migrate", &file, "--database-url", &db.url]).await.unwrap();
    assert!(second.starts_with("already provisioned"), "{second}");
}

#[tokio::test]
async fn migrate_provisions_a_sqlite_file_and_plans_nothing_after() {
    let dir = std::env::temp_dir().join(format!("engine-migrate-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}", dir.join("notes.db").display());
    let file = notes_contract_file();
    let plan = engine_cli(&["migrate", &file, "--plan", "--database-url", &url]).await.unwrap();
    assert!(plan.contains("+ CREATE TABLE IF NOT EXISTS \"notes\""), "{plan}");
    assert!(!dir.join("notes.db").exists(), "a plan touches nothing");
    let first = engine_cli(&["migrate", &file, "--database-url", &url]).await.unwrap();
    assert!(first.starts_with("created the database\nprovisioned for tables list_members, lists, notes"), "{first}");
    let second = engine_cli(&["migrate", &file, "--database-url", &url]).await.unwrap();
    assert!(second.starts_with("already provisioned"), "{second}");
    let plan = engine_cli(&["migrate", &file, "--plan", "--database-url", &url]).await.unwrap();
    assert_eq!(plan, "", "a provisioned file needs nothing");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn migrate_fetches_the_contract_from_a_running_server() {
    let served = TestDb::new().await;
    let server = TestServer::start(&served, |b| b).await;
    let db = TestDb::new().await;
    let report = engine_cli(&["migrate", &server.url(""), "--database-url", &db.url]).await.unwrap();
    assert!(report.starts_with("provisioned"), "{report}");
    serves_the_notes_app(&db).await;
}

#[tokio::test]
async fn migrate_creates_the_database_when_asked() {
    if postgres_only("creating a database is a Postgres server's") {
        return;
    }
    let name = format!("engine_test_{}", uuid::Uuid::new_v4().simple());
    let url = crate::support::db::database_url(&name);
    let file = notes_contract_file();
    let refused = engine_cli(&["migrate", &file, "--database-url", &url]).await.unwrap_err().chain();
    assert!(refused.contains("does not exist"), "the cause is in the chain: {refused}");
    let report = engine_cli(&["migrate", &file, "--database-url", &url, "--create-database"]).await.unwrap();
    assert!(report.starts_with("created the database\nprovisioned"), "{report}");
    let db = TestDb::adopt(&name).await;
    serves_the_notes_app(&db).await;
}

#[tokio::test]
async fn the_plan_is_printed_and_nothing_is_touched() {
    let printed = engine_cli(&["migrate", &notes_contract_file(), "--plan"]).await.unwrap();
    let expected: String =
        engine::server::provision_plan(&example_notes::app()).iter().map(|s| format!("{s};\n\n")).collect();
    assert_eq!(printed, expected);
}

#[tokio::test]
async fn check_summarizes_a_contract() {
    let summary = engine_cli(&["check", &notes_contract_file()]).await.unwrap();
    assert_eq!(
        summary,
        format!(
            "protocol {}\ntables: list_members, lists, notes\nsync rules: invitations, memberships, own, shared\nmutators: accept_list, add_note, create_list, delete_note, edit_note_body, leave_list, move_note, purge_note, rename_list, set_note_image, share_list, unshare_list, update_note\n",
            engine::wire::PROTOCOL_VERSION
        )
    );
}

/// The notes contract with `edit` applied, written to a temporary file.
fn edited_contract(edit: impl FnOnce(&mut Value)) -> tempfile_path::TempFile {
    let mut doc = contract(&example_notes::app());
    edit(&mut doc);
    tempfile_path::TempFile::with(&doc.to_string())
}

mod tempfile_path {
    /// A file removed on drop.
    pub(crate) struct TempFile(pub(crate) std::path::PathBuf);

    impl TempFile {
        pub(crate) fn with(text: &str) -> TempFile {
            let path = std::env::temp_dir().join(format!("engine-contract-{}.json", uuid::Uuid::new_v4().simple()));
            std::fs::write(&path, text).unwrap();
            TempFile(path)
        }

        pub(crate) fn path(&self) -> &str {
            self.0.to_str().unwrap()
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

#[tokio::test]
async fn bad_contracts_are_refused_with_the_reason_and_touch_nothing() {
    let db = TestDb::new().await;
    let not_json = tempfile_path::TempFile::with("{ not json");
    let cases: Vec<(tempfile_path::TempFile, &str)> = vec![
        (not_json, "is not JSON"),
        (edited_contract(|doc| drop(doc.as_object_mut().unwrap().remove("x-engine"))), "no `x-engine` section"),
        (edited_contract(|doc| doc["x-engine"]["version"] = json!("0")), "speaks protocol version 0"),
        (
            edited_contract(|doc| doc["x-engine"]["tables"]["notes"]["columns"][0]["type"] = json!("varchar")),
            "column `notes.id` has type `varchar`",
        ),
        (
            // The leak the macros refuse at compile time: notes of every list.
            edited_contract(|doc| doc["x-engine"]["syncRules"]["shared"]["data"][1]["scope"] = json!([])),
            "sync rule `shared`'s selection from `notes` does not scope parameter `list_id`",
        ),
        (
            edited_contract(|doc| {
                doc["x-engine"]["syncRules"]["own"]["parameters"][0]["source"] = json!("request.owner_id")
            }),
            "comes from `request.owner_id`, which is no actor claim or membership column",
        ),
        (
            edited_contract(|doc| doc["x-engine"]["syncRules"]["own"]["data"][0]["table"] = json!("secrets")),
            "reads table `secrets`, which the contract does not list",
        ),
        (
            edited_contract(|doc| doc["x-engine"]["tables"]["lists"]["primaryKey"] = json!(["nope"])),
            "the primary key of table `lists` is column `nope`",
        ),
    ];
    for (file, reason) in cases {
        let err = engine_cli(&["migrate", file.path(), "--database-url", &db.url]).await.unwrap_err().chain();
        assert!(err.contains(reason), "expected `{reason}` in: {err}");
    }
    let missing = engine_cli(&["migrate", "/nonexistent/contract.json", "--database-url", &db.url]).await.unwrap_err();
    assert!(matches!(missing, engine_cli::Error::Read { .. }), "{missing}");
    let unreachable = engine_cli(&["migrate", "http://127.0.0.1:9", "--database-url", &db.url]).await.unwrap_err();
    assert!(
        unreachable.to_string().starts_with("cannot fetch the contract from http://127.0.0.1:9/engine/contract"),
        "{unreachable}"
    );
    let https = engine_cli(&["migrate", "https://example.invalid", "--database-url", &db.url]).await.unwrap_err();
    assert!(
        https.to_string().starts_with("cannot fetch the contract from https://example.invalid/engine/contract"),
        "{https}"
    );
    assert!(!is_provisioned(&db).await, "a refused contract provisions nothing");
}

#[test]
fn a_contract_app_has_no_mutators_and_keeps_every_table() {
    let app: App = app_from_contract(&contract(&wide::app())).unwrap();
    assert!(app.mutators().is_empty());
    let names: Vec<&str> = app.tables().iter().map(|t| t.meta().name).collect();
    assert_eq!(names, ["samples", "team_members"]);
}

#[tokio::test]
async fn the_plan_against_a_database_is_a_diff_and_empty_when_current() {
    let db = TestDb::new().await;
    let file = notes_contract_file();
    let fresh = engine_cli(&["migrate", &file, "--plan", "--database-url", &db.url]).await.unwrap();
    assert!(fresh.starts_with("+ CREATE TABLE IF NOT EXISTS _engine_meta ("), "{fresh}");
    assert!(!is_provisioned(&db).await, "the plan touches nothing");
    engine_cli(&["migrate", &file, "--database-url", &db.url]).await.unwrap();
    assert_eq!(engine_cli(&["migrate", &file, "--plan", "--database-url", &db.url]).await.unwrap(), "");
    let differs = match backend() {
        Backend::Postgres => {
            sqlx::query("ALTER TABLE notes ALTER COLUMN title DROP NOT NULL").execute(db.pg()).await.unwrap();
            "table notes, column title: the app declares text NOT NULL, the database has text NULL"
        }
        Backend::Sqlite => {
            db.rebuild_sqlite_table("notes", |definition| {
                definition.replacen("\"title\" TEXT NOT NULL", "\"title\" TEXT", 1)
            })
            .await;
            "table notes, column title: the app declares TEXT NOT NULL, the database has TEXT NULL"
        }
    };
    for args in
        [vec!["migrate", &file, "--plan", "--database-url", &db.url], vec!["migrate", &file, "--database-url", &db.url]]
    {
        let err = engine_cli(&args).await.unwrap_err().to_string();
        assert!(err.contains(differs), "{err}");
    }
}
