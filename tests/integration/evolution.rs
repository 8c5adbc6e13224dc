//! Operating provisioning and schema evolution: a second start takes no table lock, a blocked
//! one names what blocks it (Postgres' table locks), an older plan never replaces a newer one,
//! drift is an error naming what differs, and an added column reaches new clients while old ones
//! keep syncing and an offline client reads its rows after the upgrade (two versions of one app
//! on one database, through the real server). All but the locks' run on both backends.

use std::sync::Arc;
use std::time::Duration;

use engine::client::{BearerToken, Client, StoreLocation};
use engine::server::Storage;
use engine::server::storage::{PostgresStorage, ProvisionLocks, SqliteStorage, StoreLimits};
use sqlx::Row;

use crate::support::db::TestStore;
use crate::support::{Backend, TestDb, TestServer, backend, postgres_only};

/// Why these tests run on Postgres only.
const POSTGRES_ONLY: &str =
    "provisioning under Postgres' table locks and the queries that block it (SQLite has one writer and no table lock)";

/// The first version of the app: items and tags of their owner.
mod v1 {
    use engine::{MutatorCtx, Outcome, Result};

    /// An item.
    #[engine::table(name = "items")]
    #[derive(Debug, Clone, PartialEq)]
    pub(crate) struct Item {
        #[engine(primary_key)]
        pub(crate) id: String,
        #[engine(owner)]
        pub(crate) owner_id: String,
        pub(crate) title: String,
    }

    /// A tag.
    #[engine::table(name = "tags")]
    #[derive(Debug, Clone, PartialEq)]
    pub(crate) struct Tag {
        #[engine(primary_key)]
        pub(crate) id: String,
        #[engine(owner)]
        pub(crate) owner_id: String,
        pub(crate) label: String,
    }

    /// Arguments of `put_item`.
    #[engine::args]
    #[derive(Debug, Clone)]
    pub(crate) struct PutItem {
        pub(crate) id: String,
        pub(crate) title: String,
    }

    /// Insert an item of the actor.
    #[engine::mutator]
    pub(crate) async fn put_item(ctx: &mut MutatorCtx<'_>, args: PutItem) -> Result<Outcome> {
        let owner_id = ctx.actor().owner_id.clone();
        ctx.insert(&Item { id: args.id, owner_id, title: args.title }).await?;
        Ok(Outcome::new())
    }

    #[engine::sync_rules]
    pub(crate) mod rules {
        use super::{Item, Tag};

        /// What the actor owns.
        #[bucket(data(Item::owner_id == bucket.owner_id, Tag::owner_id == bucket.owner_id), write(Item, Tag))]
        #[derive(Debug)]
        pub(crate) struct Own {
            #[param(actor.owner_id)]
            pub(crate) owner_id: String,
        }
    }

    pub(crate) fn app() -> engine::App {
        engine::app! { tables: [Item, Tag], mutators: [put_item], sync_rules: rules }
    }
}

/// The second version: items gain a nullable `priority`, and a second rule selects them (so the
/// items trigger changes); tags are as they were.
mod v2 {
    use engine::{MutatorCtx, Outcome, Result};

    pub(crate) use super::v1::Tag;

    /// An item, with a priority.
    #[engine::table(name = "items")]
    #[derive(Debug, Clone, PartialEq)]
    pub(crate) struct Item {
        #[engine(primary_key)]
        pub(crate) id: String,
        #[engine(owner)]
        pub(crate) owner_id: String,
        pub(crate) title: String,
        pub(crate) priority: Option<i64>,
    }

    /// Arguments of `put_item`: old clients send no priority.
    #[engine::args]
    #[derive(Debug, Clone)]
    pub(crate) struct PutItem {
        pub(crate) id: String,
        pub(crate) title: String,
        #[serde(default)]
        pub(crate) priority: Option<i64>,
    }

    /// Insert an item of the actor.
    #[engine::mutator]
    pub(crate) async fn put_item(ctx: &mut MutatorCtx<'_>, args: PutItem) -> Result<Outcome> {
        let owner_id = ctx.actor().owner_id.clone();
        ctx.insert(&Item { id: args.id, owner_id, title: args.title, priority: args.priority }).await?;
        Ok(Outcome::new())
    }

    #[engine::sync_rules]
    pub(crate) mod rules {
        use super::{Item, Tag};

        /// What the actor owns.
        #[bucket(data(Item::owner_id == bucket.owner_id, Tag::owner_id == bucket.owner_id), write(Item, Tag))]
        #[derive(Debug)]
        pub(crate) struct Own {
            #[param(actor.owner_id)]
            pub(crate) owner_id: String,
        }

        /// The actor's items, again.
        #[bucket(data(Item::owner_id == bucket.owner_id), write(Item))]
        #[derive(Debug)]
        pub(crate) struct Mine {
            #[param(actor.owner_id)]
            pub(crate) owner_id: String,
        }
    }

    pub(crate) fn app() -> engine::App {
        engine::app! { tables: [Item, Tag], mutators: [put_item], sync_rules: rules }
    }
}

/// Versions that change what the database cannot follow: a type change, a removed column, a
/// required column added.
#[allow(dead_code)]
mod bad {
    macro_rules! version {
        ($module:ident, { $($field:tt)* }) => {
            pub(crate) mod $module {
                /// An item.
                #[engine::table(name = "items")]
                #[derive(Debug, Clone, PartialEq)]
                pub(crate) struct Item {
                    #[engine(primary_key)]
                    pub(crate) id: String,
                    #[engine(owner)]
                    pub(crate) owner_id: String,
                    $($field)*
                }

                #[engine::sync_rules]
                pub(crate) mod rules {
                    use super::Item;

                    /// What the actor owns.
                    #[bucket(data(Item::owner_id == bucket.owner_id), write(Item))]
                    #[derive(Debug)]
                    pub(crate) struct Own {
                        #[param(actor.owner_id)]
                        pub(crate) owner_id: String,
                    }
                }

                pub(crate) fn app() -> engine::App {
                    engine::app! { tables: [Item], mutators: [], sync_rules: rules }
                }
            }
        };
    }

    version!(retyped, { pub(crate) title: i64, });
    version!(removed, {});
    version!(required, { pub(crate) title: String, pub(crate) rank: i64, });
}

fn store(db: &TestDb, app: engine::App) -> PostgresStorage {
    PostgresStorage::new(db.pg().clone(), Arc::new(app))
}

/// A store of the app on either backend, with what `engine migrate --plan` reads.
enum AnyStore {
    Postgres(PostgresStorage),
    Sqlite(SqliteStorage),
}

impl AnyStore {
    async fn of(db: &TestDb, app: engine::App) -> AnyStore {
        match db.store(StoreLimits::default()) {
            TestStore::Postgres(_) => AnyStore::Postgres(store(db, app)),
            TestStore::Sqlite(sqlite) => AnyStore::Sqlite(sqlite.connect(Arc::new(app)).await.unwrap()),
        }
    }

    async fn provision(&self) -> engine::server::Result<()> {
        match self {
            AnyStore::Postgres(store) => store.provision().await,
            AnyStore::Sqlite(store) => store.provision().await,
        }
    }

    async fn verify(&self) -> engine::server::Result<()> {
        match self {
            AnyStore::Postgres(store) => store.verify().await,
            AnyStore::Sqlite(store) => store.verify().await,
        }
    }

    async fn plan_changes(&self) -> engine::server::Result<String> {
        match self {
            AnyStore::Postgres(store) => store.plan_changes().await,
            AnyStore::Sqlite(store) => store.plan_changes().await,
        }
    }
}

async fn provisioned(db: &TestDb, app: engine::App) -> PostgresStorage {
    let storage = store(db, app);
    storage.provision().await.expect("provisioned");
    storage
}

/// A session of its own holding `lock` (SQL run inside an open transaction) until
/// [`release`]d.
async fn holding(db: &TestDb, lock: &str) -> sqlx::PgConnection {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(&db.url).await.unwrap();
    sqlx::raw_sql("BEGIN").execute(&mut conn).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(lock.to_owned())).execute(&mut conn).await.unwrap();
    conn
}

async fn release(mut conn: sqlx::PgConnection) {
    use sqlx::Connection;
    sqlx::raw_sql("ROLLBACK").execute(&mut conn).await.unwrap();
    conn.close().await.unwrap();
}

/// Provisioning that does not hang the test if it waits on a lock forever.
async fn bounded<T>(what: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(120), what).await.expect("provisioning finished")
}

/// What records the engine's changes: its functions on Postgres, its triggers on SQLite.
async fn tracking_code(db: &TestDb) -> Vec<String> {
    let sql = match backend() {
        Backend::Postgres => {
            "SELECT proname || ':' || prosrc FROM pg_proc WHERE pronamespace = 'public'::regnamespace ORDER BY 1"
        }
        Backend::Sqlite => "SELECT name || ':' || sql FROM sqlite_schema WHERE type = 'trigger' ORDER BY 1",
    };
    sqlx::query_scalar(sql).fetch_all(&db.pool).await.unwrap()
}

async fn meta(db: &TestDb, key: &str) -> Option<String> {
    sqlx::query_scalar("SELECT value FROM _engine_meta WHERE key = $1")
        .bind(key)
        .fetch_optional(&db.pool)
        .await
        .unwrap()
}

/// Change a table behind the engine's back: on Postgres by `postgres`, on SQLite by rebuilding
/// `table` with `from` replaced by `to` in its definition.
async fn alter(db: &TestDb, postgres: &str, (table, from, to): (&str, &str, &str)) {
    match backend() {
        Backend::Postgres => {
            sqlx::raw_sql(sqlx::AssertSqlSafe(postgres.to_owned())).execute(db.pg()).await.unwrap();
        }
        Backend::Sqlite => {
            db.rebuild_sqlite_table(table, |definition| {
                assert!(definition.contains(from), "{definition}");
                definition.replacen(from, to, 1)
            })
            .await;
        }
    }
}

#[tokio::test]
async fn a_second_start_takes_no_table_lock() {
    if postgres_only(POSTGRES_ONLY) {
        return;
    }
    let db = TestDb::new().await;
    provisioned(&db, v1::app()).await;
    let holder = holding(&db, "LOCK TABLE items, tags IN ACCESS EXCLUSIVE MODE").await;
    bounded(store(&db, v1::app()).provision()).await.expect("an unchanged plan needs no lock");
    bounded(store(&db, v1::app()).verify()).await.expect("verifying needs no lock");
    release(holder).await;
}

#[tokio::test]
async fn a_new_column_locks_only_its_table() {
    if postgres_only(POSTGRES_ONLY) {
        return;
    }
    let db = TestDb::new().await;
    provisioned(&db, v1::app()).await;
    sqlx::query("INSERT INTO items (id, owner_id, title) VALUES ('i1', 'alice', 'kept')")
        .execute(db.pg())
        .await
        .unwrap();
    let holder = holding(&db, "LOCK TABLE tags IN ACCESS EXCLUSIVE MODE").await;
    bounded(store(&db, v2::app()).provision()).await.expect("the tags table is not touched");
    release(holder).await;
    let row = sqlx::query("SELECT title, priority FROM items").fetch_one(db.pg()).await.unwrap();
    assert_eq!(row.get::<String, _>(0), "kept");
    assert_eq!(row.get::<Option<i64>, _>(1), None);
}

#[tokio::test]
async fn a_blocked_provisioning_names_the_blocking_query() {
    if postgres_only(POSTGRES_ONLY) {
        return;
    }
    let db = TestDb::new().await;
    provisioned(&db, v1::app()).await;
    let holder = holding(&db, "SELECT count(*) FROM items WHERE title <> 'blocker'").await;
    let storage = store(&db, v2::app()).with_provision_locks(ProvisionLocks::new(Duration::from_millis(400), 2));
    let err = bounded(storage.provision()).await.unwrap_err().to_string();
    assert!(err.contains("ALTER TABLE \"items\" ADD COLUMN IF NOT EXISTS \"priority\""), "{err}");
    assert!(err.contains("waited 2 times"), "{err}");
    assert!(err.contains("idle in transaction"), "{err}");
    assert!(err.contains("SELECT count(*) FROM items WHERE title <> 'blocker'"), "{err}");
    // Nothing of the plan was applied, and it is applied once the blocker is gone.
    let has: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_name = 'items' AND column_name = 'priority')",
    )
    .fetch_one(db.pg())
    .await
    .unwrap();
    assert!(!has);
    release(holder).await;
    bounded(storage.provision()).await.unwrap();
}

#[tokio::test]
async fn an_older_plan_never_replaces_a_newer_one() {
    let db = TestDb::new().await;
    provisioned_on(&db, v1::app()).await;
    let v1_tracking = tracking_code(&db).await;
    provisioned_on(&db, v2::app()).await;
    let v2_tracking = tracking_code(&db).await;
    // Postgres: the second rule's bucket key; SQLite: the new column an update of which is stamped.
    assert_ne!(v1_tracking, v2_tracking, "the second version changes what tracks the items");
    let v2_fingerprint = meta(&db, "plan_fingerprint").await;
    assert!(v2_fingerprint.is_some());
    // An instance of the first version restarts during the rolling deploy: it starts, on the
    // newer schema, and changes nothing.
    let old = AnyStore::of(&db, v1::app()).await;
    old.provision().await.expect("the older app starts");
    old.verify().await.expect("the newer plan serves the older app");
    assert_eq!(tracking_code(&db).await, v2_tracking);
    assert_eq!(meta(&db, "plan_fingerprint").await, v2_fingerprint);
    let plan = old.plan_changes().await.unwrap();
    assert!(
        plan.starts_with("# the database holds a newer plan of this app (generation 2; this app's is 1)"),
        "{plan}"
    );
    drop(old);
    // The newer version again: current.
    assert_eq!(AnyStore::of(&db, v2::app()).await.plan_changes().await.unwrap(), "");
}

#[tokio::test]
async fn the_plan_shows_what_would_change_and_nothing_when_current() {
    let db = TestDb::new().await;
    let plan = |app: fn() -> engine::App| {
        let db = &db;
        async move { AnyStore::of(db, app()).await.plan_changes().await.unwrap() }
    };
    let fresh = plan(v1::app).await;
    assert!(fresh.starts_with("+ CREATE TABLE IF NOT EXISTS _engine_meta ("), "{fresh}");
    provisioned_on(&db, v1::app()).await;
    assert_eq!(plan(v1::app).await, "", "current: nothing");
    let diff = plan(v2::app).await;
    let lines: Vec<&str> = diff.lines().collect();
    match backend() {
        Backend::Postgres => {
            assert!(lines.contains(&"+ ALTER TABLE \"items\" ADD COLUMN IF NOT EXISTS \"priority\" int8"), "{diff}");
            assert!(lines.contains(&"~ function _engine_track_items"), "{diff}");
            assert!(
                lines.iter().any(|l| l.starts_with("+ ") && l.contains("'mine'")),
                "the new rule's bucket key: {diff}"
            );
        }
        Backend::Sqlite => {
            // Bucket keys are read in Rust (no SQL has them): the new column changes the trigger
            // that stamps an update, which is replaced.
            assert!(lines.contains(&"+ ALTER TABLE \"items\" ADD COLUMN \"priority\" INTEGER"), "{diff}");
            assert!(
                lines.iter().any(|l| l.starts_with("+ DROP TRIGGER IF EXISTS \"_engine_items_stamp_update_")),
                "{diff}"
            );
            assert!(
                lines.iter().any(|l| l.starts_with("+ CREATE TRIGGER IF NOT EXISTS \"_engine_items_stamp_update_")
                    && l.contains("AFTER UPDATE OF \"id\", \"owner_id\", \"title\", \"priority\" ON \"items\"")),
                "{diff}"
            );
        }
    }
    assert!(!diff.contains("tags"), "nothing of the unchanged table: {diff}");
    assert!(!diff.contains("CREATE TABLE"), "{diff}");
    // An index dropped by hand is made again (on Postgres, built concurrently on a table that
    // exists).
    let (index, made) = match backend() {
        Backend::Postgres => ("_engine_tags_xid", "+ CREATE INDEX CONCURRENTLY IF NOT EXISTS \"_engine_tags_xid\""),
        Backend::Sqlite => ("_engine_tags_seq", "+ CREATE INDEX IF NOT EXISTS \"_engine_tags_seq\""),
    };
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP INDEX {index}"))).execute(&db.pool).await.unwrap();
    let diff = plan(v1::app).await;
    assert!(diff.starts_with(made), "{diff}");
    provisioned_on(&db, v1::app()).await;
    assert_eq!(plan(v1::app).await, "", "repaired");
}

async fn refused(db: &TestDb, app: fn() -> engine::App) -> Vec<String> {
    // One at a time: a SQLite file is one store's.
    let provision = AnyStore::of(db, app()).await.provision().await.unwrap_err().to_string();
    let verify = AnyStore::of(db, app()).await.verify().await.unwrap_err().to_string();
    let plan = AnyStore::of(db, app()).await.plan_changes().await.unwrap_err().to_string();
    let mut errors = vec![provision, verify, plan];
    errors.dedup();
    errors
}

#[tokio::test]
async fn drift_is_an_error_naming_table_column_and_definitions() {
    let db = TestDb::new().await;
    provisioned_on(&db, v1::app()).await;
    let fingerprint = meta(&db, "plan_fingerprint").await;
    assert!(fingerprint.is_some());
    let title = ("items", "\"title\" TEXT NOT NULL", "\"title\" VARCHAR(20) NOT NULL");
    // Another string type is no drift: the engine carries varchar as text.
    alter(&db, "ALTER TABLE items ALTER COLUMN title TYPE varchar(20)", title).await;
    AnyStore::of(&db, v1::app()).await.verify().await.expect("varchar(20) carries a String");
    let bytes = ("items", title.2, "\"title\" BLOB NOT NULL");
    alter(&db, "ALTER TABLE items ALTER COLUMN title TYPE bytea USING convert_to(title, 'UTF8')", bytes).await;
    let errors = refused(&db, v1::app).await;
    assert_eq!(errors.len(), 1, "start-up, verify and the plan say the same: {errors:?}");
    let (differs, how) = match backend() {
        Backend::Postgres => (
            "table items, column title: the app declares text NOT NULL, the database has bytea NOT NULL",
            "ALTER TABLE items ALTER COLUMN title TYPE text USING",
        ),
        Backend::Sqlite => (
            "table items, column title: the app declares TEXT NOT NULL, the database has BLOB NOT NULL",
            "SQLite changes a column or a key only by rebuilding the table",
        ),
    };
    assert!(errors[0].contains(differs), "{}", errors[0]);
    assert!(errors[0].contains(how), "{}", errors[0]);
    assert_eq!(meta(&db, "plan_fingerprint").await, fingerprint, "nothing recorded");

    let text = ("items", bytes.2, "\"title\" TEXT NOT NULL");
    alter(&db, "ALTER TABLE items ALTER COLUMN title TYPE text USING convert_from(title, 'UTF8')", text).await;
    let label = ("tags", "\"label\" TEXT NOT NULL", "\"label\" TEXT");
    alter(&db, "ALTER TABLE tags ALTER COLUMN label DROP NOT NULL", label).await;
    let errors = refused(&db, v1::app).await;
    let differs = match backend() {
        Backend::Postgres => "table tags, column label: the app declares text NOT NULL, the database has text NULL",
        Backend::Sqlite => "table tags, column label: the app declares TEXT NOT NULL, the database has TEXT NULL",
    };
    assert!(errors[0].contains(differs), "{}", errors[0]);

    alter(&db, "ALTER TABLE tags ALTER COLUMN label SET NOT NULL", ("tags", label.2, label.1)).await;
    alter(
        &db,
        "ALTER TABLE tags DROP CONSTRAINT tags_pkey; ALTER TABLE tags ADD PRIMARY KEY (id, owner_id)",
        ("tags", "PRIMARY KEY (\"id\")", "PRIMARY KEY (\"id\", \"owner_id\")"),
    )
    .await;
    let errors = refused(&db, v1::app).await;
    assert!(
        errors[0]
            .contains("table tags: the app declares primary key (id), the database has primary key (id, owner_id)"),
        "{}",
        errors[0]
    );
}

/// The app provisioned on `db`, on either backend (the store closed after, for SQLite's one).
async fn provisioned_on(db: &TestDb, app: engine::App) {
    AnyStore::of(db, app).await.provision().await.expect("provisioned");
}

#[tokio::test]
async fn a_type_change_or_removal_in_the_app_is_refused_with_what_to_do() {
    let db = TestDb::new().await;
    provisioned_on(&db, v1::app()).await;
    let (retyped, removed) = match backend() {
        Backend::Postgres => (
            "table items, column title: the app declares bigint NOT NULL, the database has text NOT NULL; the engine does not change a column's type",
            "table items, column title: the app does not declare it, and the database has it text NOT NULL without a default",
        ),
        Backend::Sqlite => (
            "table items, column title: the app declares INTEGER NOT NULL, the database has TEXT NOT NULL; the engine does not change a column's type: convert it yourself (SQLite changes a column or a key only by rebuilding the table: https://www.sqlite.org/lang_altertable.html#otheralter)",
            "table items, column title: the app does not declare it, and the database has it TEXT NOT NULL without a default",
        ),
    };
    let errors = refused(&db, bad::retyped::app).await;
    assert_eq!(errors.len(), 1, "start-up, verify and the plan say the same: {errors:?}");
    assert!(errors[0].contains(retyped), "{}", errors[0]);
    let errors = refused(&db, bad::removed::app).await;
    assert!(errors[0].contains(removed) && errors[0].contains("ALTER TABLE items DROP COLUMN title"), "{}", errors[0]);
    // What the error says to run lets the app start.
    sqlx::query("ALTER TABLE items DROP COLUMN title").execute(&db.pool).await.unwrap();
    provisioned_on(&db, bad::removed::app()).await;
}

#[tokio::test]
async fn a_required_column_is_added_to_an_empty_table_and_refused_on_one_with_rows() {
    let db = TestDb::new().await;
    provisioned_on(&db, v1::app()).await;
    sqlx::query("INSERT INTO items (id, owner_id, title) VALUES ('i1', 'alice', 'a')").execute(&db.pool).await.unwrap();
    let err = AnyStore::of(&db, bad::required::app()).await.provision().await.unwrap_err().to_string();
    assert!(
        err.contains("the app adds column rank to table items, NOT NULL, and the table has rows")
            && err.contains("declare the field `Option<…>`"),
        "{err}"
    );
    // The statement to run, with the column's type, and the other way out on this store.
    let (statement, fresh) = match backend() {
        Backend::Postgres => {
            (r#"`ALTER TABLE "items" ADD COLUMN IF NOT EXISTS "rank" int8 NOT NULL DEFAULT …`"#, "an empty database")
        }
        Backend::Sqlite => {
            (r#"`ALTER TABLE "items" ADD COLUMN "rank" INTEGER NOT NULL DEFAULT …`"#, "move the SQLite file aside")
        }
    };
    assert!(err.contains(statement) && err.contains(fresh), "{err}");
    // With the column added by hand, with a default, the app starts.
    let integer = match backend() {
        Backend::Postgres => "bigint",
        Backend::Sqlite => "INTEGER",
    };
    sqlx::query(sqlx::AssertSqlSafe(format!("ALTER TABLE items ADD COLUMN rank {integer} NOT NULL DEFAULT 0")))
        .execute(&db.pool)
        .await
        .unwrap();
    provisioned_on(&db, bad::required::app()).await;

    // On an empty table the column is added, NOT NULL without a default (on SQLite by rebuilding
    // the table, which keeps its stamps, the engine's triggers and indexes, and the table's own).
    let empty = TestDb::new().await;
    provisioned_on(&empty, v1::app()).await;
    if backend() == Backend::Sqlite {
        sqlx::raw_sql("CREATE INDEX items_by_title ON items (title)").execute(&empty.pool).await.unwrap();
        let plan = AnyStore::of(&empty, bad::required::app()).await.plan_changes().await.unwrap();
        assert!(plan.starts_with("~ table items (rebuilt: it is empty"), "{plan}");
        assert!(plan.contains("\n+ DROP TABLE \"items\"\n"), "{plan}");
    }
    provisioned_on(&empty, bad::required::app()).await;
    let rank_required: i64 = match backend() {
        Backend::Postgres => sqlx::query_scalar(
            "SELECT count(*) FROM information_schema.columns WHERE table_name = 'items' AND column_name = 'rank' AND is_nullable = 'NO' AND column_default IS NULL",
        ),
        Backend::Sqlite => sqlx::query_scalar(
            "SELECT count(*) FROM pragma_table_info('items') WHERE name = 'rank' AND \"notnull\" = 1 AND dflt_value IS NULL",
        ),
    }
    .fetch_one(&empty.pool)
    .await
    .unwrap();
    assert_eq!(rank_required, 1, "rank is NOT NULL without a default");
    assert_eq!(AnyStore::of(&empty, bad::required::app()).await.plan_changes().await.unwrap(), "", "and nothing after");
    if backend() == Backend::Sqlite {
        let own: i64 = sqlx::query_scalar("SELECT count(*) FROM sqlite_schema WHERE name = 'items_by_title'")
            .fetch_one(&empty.pool)
            .await
            .unwrap();
        assert_eq!(own, 1, "the table's own index is made again");
    }
    // The rebuilt table is tracked: a row written to it is stamped.
    sqlx::query("INSERT INTO items (id, owner_id, title, rank) VALUES ('i1', 'alice', 'a', 3)")
        .execute(&empty.pool)
        .await
        .unwrap();
    let stamp = match backend() {
        Backend::Postgres => "SELECT count(*) FROM items WHERE _engine_xid::text <> '0'",
        Backend::Sqlite => "SELECT count(*) FROM items WHERE _engine_seq > 0",
    };
    let stamped: i64 = sqlx::query_scalar(stamp).fetch_one(&empty.pool).await.unwrap();
    assert_eq!(stamped, 1, "the row is stamped");
}

fn client_of(server: &TestServer, app: engine::App, store: StoreLocation) -> engine::client::ClientBuilder {
    Client::builder(server.url(""))
        .app(app)
        .auth(BearerToken::new(TestServer::token("alice")))
        .store(store)
        .background(false)
}

#[tokio::test]
async fn an_added_column_reaches_new_clients_while_old_ones_keep_syncing() {
    let db = TestDb::new().await;
    let dir = std::env::temp_dir().join(format!("engine-evolution-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let offline_store = dir.join("offline.sqlite");

    // Version 1: a client writes and syncs, then goes offline.
    let server = TestServer::start(&db, |b| b.app(v1::app())).await;
    let offline = client_of(&server, v1::app(), StoreLocation::File(offline_store.clone())).build().await.unwrap();
    offline.mutate::<v1::put_item>(v1::PutItem { id: "i1".into(), title: "before".into() }).await.unwrap();
    offline.sync().await.unwrap();
    offline.close();
    drop(offline);
    server.stop(&db).await;

    // Version 2 on the same database: the column is added on start.
    let server = TestServer::start(&db, |b| b.app(v2::app())).await;
    // An old client keeps syncing: its mutation (no priority) applies, and rows with the
    // unknown column reach it.
    let old = client_of(&server, v1::app(), StoreLocation::Memory).build().await.unwrap();
    old.mutate::<v1::put_item>(v1::PutItem { id: "i2".into(), title: "old client".into() }).await.unwrap();
    old.sync().await.unwrap();
    let new = client_of(&server, v2::app(), StoreLocation::Memory).build().await.unwrap();
    new.mutate::<v2::put_item>(v2::PutItem { id: "i3".into(), title: "new client".into(), priority: Some(7) })
        .await
        .unwrap();
    new.sync().await.unwrap();
    old.sync().await.unwrap();
    let mut seen: Vec<String> = old.collection::<v1::Item>().all().await.unwrap().into_iter().map(|i| i.id).collect();
    seen.sort();
    assert_eq!(seen, ["i1", "i2", "i3"], "the old client reads every row, the new column ignored");
    let mut items = new.collection::<v2::Item>().all().await.unwrap();
    items.sort_by(|a, b| a.id.cmp(&b.id));
    let priorities: Vec<(String, Option<i64>)> = items.into_iter().map(|i| (i.id, i.priority)).collect();
    assert_eq!(priorities, [("i1".into(), None), ("i2".into(), None), ("i3".into(), Some(7))]);

    // The offline client upgrades: its store migrates, and it reads its rows before any sync.
    let upgraded = client_of(&server, v2::app(), StoreLocation::File(offline_store.clone())).build().await.unwrap();
    let rows = upgraded.collection::<v2::Item>().all().await.unwrap();
    assert_eq!(
        rows.iter().map(|i| (i.id.as_str(), i.title.as_str(), i.priority)).collect::<Vec<_>>(),
        [("i1", "before", None)]
    );
    upgraded.sync().await.unwrap();
    assert_eq!(upgraded.collection::<v2::Item>().all().await.unwrap().len(), 3);
    std::fs::remove_dir_all(&dir).ok();
}
