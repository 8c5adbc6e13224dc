//! Provisioning on SQLite (`docs/design.md` §11): the same tables as on Postgres, in SQLite's
//! types (values in the form they travel in, `engine_sqlite::values`), and change tracking by
//! a number instead of a transaction id.
//!
//! SQLite runs one writing transaction at a time, so the order in which rows are written is the
//! order in which they commit. Every row write takes the next number of `_engine_seq` (its
//! triggers do, for any writer) and stamps the row with it in `_engine_seq`; a row that leaves
//! a live state (a delete, a soft delete, a change of a column that decides its buckets or of
//! its key) leaves a tombstone with the next number, holding its key and the deciding values it
//! had and has, from which the buckets it left are read (`RuleIndex::row_buckets`, in Rust: no
//! bucket key is written by SQL). A reader's snapshot sees every number up to the counter it
//! reads and never one below it later: there is no horizon to wait for.
//!
//! The statements are [`Step`]s as on Postgres; what the file lacks is read from
//! `sqlite_schema` and `pragma_table_info`, and only that runs, in one transaction. Drift (a
//! column whose type, nullability or key differs from the app's) is an error, as on Postgres.

use std::collections::{BTreeMap, BTreeSet};

use engine_kernel::rules::buckets::RuleIndex;
use engine_kernel::{App, ColumnMeta, MergePolicy, TableMeta};
use engine_sqlite::values::sqlite_type;
use sqlx::{Connection, Row as _, SqliteConnection};

use super::apply::{PLAN_GENERATIONS, RECORDED_META, Recorded, refuse_newer};
use super::catalog::{self, Reconcile, TableInfo};
use super::{Object, SCHEMA_VERSION, Step, fingerprint};
use crate::error::{Error, Result};
use crate::pg::sql::{index_name, literal};
use crate::sqlite::{exec, ident};

/// The empty collaborative document, as a column stores it (base64 of its state).
const EMPTY_CRDT: &str = "AAA=";

/// The engine's own tables.
fn engine_tables() -> Vec<Step> {
    let table = |name: &str, sql: &str| {
        let columns = sql.split('(').nth(1).unwrap_or_default();
        let columns = columns.split(',').filter_map(|c| c.split_whitespace().next()).map(str::to_owned).collect();
        Step::new(sql, Object::Table { table: name.into(), columns })
    };
    let index =
        |table: &str, name: &str, sql: &str| Step::new(sql, Object::Index { table: table.into(), name: name.into() });
    vec![
        table("_engine_meta", "CREATE TABLE IF NOT EXISTS _engine_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"),
        // The plans provisioned, in order, as on Postgres: an instance whose plan is older than
        // the last one does not replace it.
        table(
            "_engine_plans",
            "CREATE TABLE IF NOT EXISTS _engine_plans (generation INTEGER PRIMARY KEY AUTOINCREMENT, fingerprint TEXT NOT NULL UNIQUE, provisioned_at INTEGER NOT NULL)",
        ),
        // The change stream's counter: one row, the last number taken.
        table(
            "_engine_seq",
            "CREATE TABLE IF NOT EXISTS _engine_seq (id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL)",
        ),
        Step::new("INSERT OR IGNORE INTO _engine_seq (id, seq) VALUES (1, 0)", Object::Meta),
        // A row that left its buckets: its key and deciding values before (`old`) and after
        // (`new`, none when it is gone or no longer live), as JSON arrays in column order.
        table(
            "_engine_tombstones",
            "CREATE TABLE IF NOT EXISTS _engine_tombstones (seq INTEGER PRIMARY KEY, table_name TEXT NOT NULL, key TEXT NOT NULL, old TEXT NOT NULL, new TEXT, created_at INTEGER NOT NULL)",
        ),
        index(
            "_engine_tombstones",
            "_engine_tombstones_created",
            "CREATE INDEX IF NOT EXISTS _engine_tombstones_created ON _engine_tombstones (created_at)",
        ),
        table(
            "_engine_clients",
            "CREATE TABLE IF NOT EXISTS _engine_clients (user_id TEXT NOT NULL, client_id TEXT NOT NULL, last_mutation_id INTEGER NOT NULL DEFAULT 0, last_seq INTEGER NOT NULL DEFAULT 0, collected_to INTEGER DEFAULT 0, recorded_at INTEGER NOT NULL DEFAULT 0, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, PRIMARY KEY (user_id, client_id))",
        ),
        index(
            "_engine_clients",
            "_engine_clients_updated",
            "CREATE INDEX IF NOT EXISTS _engine_clients_updated ON _engine_clients (updated_at)",
        ),
        table(
            "_engine_mutations",
            "CREATE TABLE IF NOT EXISTS _engine_mutations (user_id TEXT NOT NULL, client_id TEXT NOT NULL, mutation_id INTEGER NOT NULL, client_mutation_id TEXT NOT NULL, name TEXT NOT NULL, status TEXT NOT NULL, result TEXT NOT NULL, seq INTEGER NOT NULL, applied_at INTEGER NOT NULL, PRIMARY KEY (user_id, client_id, mutation_id))",
        ),
        index(
            "_engine_mutations",
            "_engine_mutations_client_mutation",
            "CREATE UNIQUE INDEX IF NOT EXISTS _engine_mutations_client_mutation ON _engine_mutations (user_id, client_id, client_mutation_id)",
        ),
        index(
            "_engine_mutations",
            "_engine_mutations_applied",
            "CREATE INDEX IF NOT EXISTS _engine_mutations_applied ON _engine_mutations (applied_at)",
        ),
        table(
            "_engine_bucket_sets",
            "CREATE TABLE IF NOT EXISTS _engine_bucket_sets (digest TEXT PRIMARY KEY, buckets TEXT NOT NULL, used_at INTEGER NOT NULL, user_id TEXT NOT NULL, bytes INTEGER NOT NULL)",
        ),
        index(
            "_engine_bucket_sets",
            "_engine_bucket_sets_used",
            "CREATE INDEX IF NOT EXISTS _engine_bucket_sets_used ON _engine_bucket_sets (used_at)",
        ),
        // Whose set each is and the bytes of its keys, which a file provisioned before sets were
        // bounded per user lacks (its sets belong to no user and go with age).
        Step::new(
            "ALTER TABLE _engine_bucket_sets ADD COLUMN user_id TEXT NOT NULL DEFAULT ''",
            Object::Column { table: "_engine_bucket_sets".into(), column: "user_id".into(), required: false },
        ),
        Step::new(
            "ALTER TABLE _engine_bucket_sets ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0",
            Object::Column { table: "_engine_bucket_sets".into(), column: "bytes".into(), required: false },
        ),
        index(
            "_engine_bucket_sets",
            "_engine_bucket_sets_user",
            "CREATE INDEX IF NOT EXISTS _engine_bucket_sets_user ON _engine_bucket_sets (user_id, used_at)",
        ),
        table(
            "_engine_jobs",
            "CREATE TABLE IF NOT EXISTS _engine_jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, payload TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'queued', run_at INTEGER NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, leased_until INTEGER, last_error TEXT, user_id TEXT, created_at INTEGER NOT NULL, finished_at INTEGER)",
        ),
        index(
            "_engine_jobs",
            "_engine_jobs_due",
            "CREATE INDEX IF NOT EXISTS _engine_jobs_due ON _engine_jobs (name, run_at, id) WHERE state = 'queued'",
        ),
        table(
            "_engine_blob_refs",
            "CREATE TABLE IF NOT EXISTS _engine_blob_refs (table_name TEXT NOT NULL, row_key TEXT NOT NULL, column_name TEXT NOT NULL, blob_key TEXT NOT NULL, writer TEXT NOT NULL, PRIMARY KEY (table_name, row_key, column_name))",
        ),
        index(
            "_engine_blob_refs",
            "_engine_blob_refs_key",
            "CREATE INDEX IF NOT EXISTS _engine_blob_refs_key ON _engine_blob_refs (blob_key)",
        ),
        table(
            "_engine_blobs",
            "CREATE TABLE IF NOT EXISTS _engine_blobs (blob_key TEXT NOT NULL, uploader TEXT NOT NULL, size INTEGER NOT NULL, stored INTEGER NOT NULL DEFAULT 0, ticket TEXT, expires_at INTEGER NOT NULL DEFAULT 0, receiving_until INTEGER, unused_since INTEGER, PRIMARY KEY (blob_key, uploader))",
        ),
        index(
            "_engine_blobs",
            "_engine_blobs_uploader",
            "CREATE INDEX IF NOT EXISTS _engine_blobs_uploader ON _engine_blobs (uploader)",
        ),
    ]
}

/// A column as the app declares it, in SQLite.
fn column_definition(column: &ColumnMeta) -> String {
    let mut def = format!("{} {}", ident(column.name), sqlite_type(column.sql_type));
    if !column.nullable {
        def.push_str(" NOT NULL");
    }
    if column.sql_type.is_crdt() {
        def.push_str(&format!(" DEFAULT {}", literal(EMPTY_CRDT)));
    }
    def
}

/// The table of `table` and its columns.
fn user_table(table: &TableMeta) -> Vec<Step> {
    let mut columns: Vec<String> = table.columns.iter().map(column_definition).collect();
    columns
        .push(format!("PRIMARY KEY ({})", table.primary_key.iter().map(|k| ident(k)).collect::<Vec<_>>().join(", ")));
    let mut plan = vec![Step::new(
        format!("CREATE TABLE IF NOT EXISTS {} ({})", ident(table.name), columns.join(", ")),
        Object::Table { table: table.name.into(), columns: table.columns.iter().map(|c| c.name.into()).collect() },
    )];
    for column in table.columns {
        plan.push(Step::new(
            format!("ALTER TABLE {} ADD COLUMN {}", ident(table.name), column_definition(column)),
            Object::Column {
                table: table.name.into(),
                column: column.name.into(),
                required: !column.nullable && !column.sql_type.is_crdt(),
            },
        ));
    }
    plan
}

/// `json_object('c', record.c, …)` of `columns`: values in the form the table stores them.
fn json_values(record: &str, columns: &[&str]) -> String {
    let values: Vec<String> = columns.iter().map(|c| format!("{}, {record}.{}", literal(c), ident(c))).collect();
    format!("json_object({})", values.join(", "))
}

/// The name of an engine trigger on `table`: its purpose and a digest of its statement, so that
/// a trigger the app's rules change gets a new name, and the old one is dropped.
fn trigger_name(table: &str, purpose: &str, statement: &str) -> String {
    let hash =
        statement.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("_engine_{table}_{purpose}_{:08x}", hash >> 32)
}

/// The change-tracking columns, triggers and indexes of a synced table.
fn tracking(rules: &RuleIndex, table: &TableMeta) -> Vec<Step> {
    let name = ident(table.name);
    let column = |column: &str, definition: &str| {
        Step::new(
            format!("ALTER TABLE {name} ADD COLUMN {column} {definition}"),
            Object::Column { table: table.name.into(), column: column.into(), required: false },
        )
    };
    let mut plan = vec![column("_engine_seq", "INTEGER NOT NULL DEFAULT 0")];
    if table.merge == MergePolicy::Field {
        plan.push(column("_engine_hlc", "TEXT NOT NULL DEFAULT '{}'"));
    }
    // Each trigger: its purpose, when it fires and its body.
    let mut triggers: Vec<(&str, String, String)> = Vec::new();
    let next = "UPDATE _engine_seq SET seq = seq + 1 WHERE id = 1;";
    let this_row: Vec<String> = table.primary_key.iter().map(|k| format!("{k} IS NEW.{k}", k = ident(k))).collect();
    let stamp = format!(
        "{next} UPDATE {name} SET _engine_seq = (SELECT seq FROM _engine_seq WHERE id = 1) WHERE {};",
        this_row.join(" AND ")
    );
    triggers.push(("stamp_insert", format!("AFTER INSERT ON {name}"), stamp.clone()));
    // Only a write of the app's columns is stamped: the stamp's own update is not.
    let app_columns: Vec<String> = table.columns.iter().map(|c| ident(c.name)).collect();
    triggers.push(("stamp_update", format!("AFTER UPDATE OF {} ON {name}", app_columns.join(", ")), stamp));
    let keys: Vec<&str> = table.primary_key.to_vec();
    let deciding = rules.deciding_columns(table);
    let live = |record: &str| match table.soft_delete {
        Some(deleted) => format!("{record}.{} IS NULL", ident(deleted)),
        None => "1".into(),
    };
    let same_key: Vec<String> = keys.iter().map(|k| format!("OLD.{k} IS NEW.{k}", k = ident(k))).collect();
    let tombstone = |new: String| {
        format!(
            "{next} INSERT INTO _engine_tombstones (seq, table_name, key, old, new, created_at) VALUES ((SELECT seq FROM _engine_seq WHERE id = 1), {}, {}, {}, {new}, CAST(unixepoch('subsec') * 1000 AS INTEGER));",
            literal(table.name),
            json_values("OLD", &keys),
            json_values("OLD", &deciding),
        )
    };
    let mut watched: BTreeSet<&str> = deciding.iter().copied().collect();
    watched.extend(keys.iter().copied());
    triggers.push((
        "tombstone_update",
        format!(
            "AFTER UPDATE OF {} ON {name} WHEN {}",
            watched.iter().map(|c| ident(c)).collect::<Vec<_>>().join(", "),
            live("OLD")
        ),
        tombstone(format!(
            "CASE WHEN {} AND {} THEN {} END",
            live("NEW"),
            same_key.join(" AND "),
            json_values("NEW", &deciding)
        )),
    ));
    triggers.push((
        "tombstone_delete",
        format!("AFTER DELETE ON {name} WHEN {}", live("OLD")),
        tombstone("NULL".into()),
    ));
    for (purpose, when, body) in triggers {
        let trigger = trigger_name(table.name, purpose, &format!("{when} {body}"));
        plan.push(Step::new(
            format!("CREATE TRIGGER IF NOT EXISTS {} {when} BEGIN {body} END", ident(&trigger)),
            Object::Trigger { table: table.name.into(), name: trigger },
        ));
    }
    // The change stream in a table's order, and in each scope's.
    let key: Vec<String> = keys.iter().map(|k| ident(k)).collect();
    let mut indexes = vec![(index_name(table.name, "seq", &[]), format!("_engine_seq, {}", key.join(", ")))];
    let mut scopes: Vec<&[&str]> = Vec::new();
    for selection in rules.selections(table.name) {
        let columns = selection.scope_columns();
        if !columns.is_empty() && !scopes.contains(&columns) {
            scopes.push(columns);
            let mut parts: Vec<String> = columns.iter().map(|c| ident(c)).collect();
            parts.push("_engine_seq".into());
            parts.extend(key.iter().cloned());
            indexes.push((index_name(table.name, "scope", columns), parts.join(", ")));
        }
    }
    for (index, columns) in indexes {
        plan.push(Step::new(
            format!("CREATE INDEX IF NOT EXISTS {} ON {name} ({columns})", ident(&index)),
            Object::Index { table: table.name.into(), name: index },
        ));
    }
    plan
}

/// The statements that provision `app` on SQLite, in order (tables by name, as on Postgres).
fn steps(app: &App) -> Vec<Step> {
    let rules = app.rule_index();
    let mut plan = engine_tables();
    let mut tables: Vec<&TableMeta> = app.tables().iter().map(|def| def.meta()).collect();
    tables.sort_by_key(|t| t.name);
    for table in tables {
        plan.extend(user_table(table));
        if !rules.selections(table.name).is_empty() {
            plan.extend(tracking(&rules, table));
        }
        for column in table.columns.iter().filter(|c| c.blob) {
            let index = index_name(table.name, "blob", &[column.name]);
            plan.push(Step::new(
                format!(
                    "CREATE INDEX IF NOT EXISTS {} ON {} ({})",
                    ident(&index),
                    ident(table.name),
                    ident(column.name)
                ),
                Object::Index { table: table.name.into(), name: index },
            ));
        }
    }
    for (table, columns) in super::membership_indexes(app) {
        let index = index_name(table, "member", &columns);
        plan.push(Step::new(
            format!(
                "CREATE INDEX IF NOT EXISTS {} ON {} ({})",
                ident(&index),
                ident(table),
                columns.iter().map(|c| ident(c)).collect::<Vec<_>>().join(", ")
            ),
            Object::Index { table: table.into(), name: index },
        ));
    }
    plan.push(Step::new(
        format!("INSERT INTO _engine_meta (key, value) VALUES ('schema_version', '{SCHEMA_VERSION}') ON CONFLICT (key) DO UPDATE SET value = excluded.value WHERE value IS NOT excluded.value"),
        Object::Meta,
    ));
    plan.push(Step::new(
        "INSERT INTO _engine_meta (key, value) VALUES ('tombstone_horizon', '0') ON CONFLICT (key) DO NOTHING",
        Object::Meta,
    ));
    plan
}

/// A column as the file has it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ColumnInfo {
    type_name: String,
    not_null: bool,
    /// Its default's SQL, if it has one.
    default: Option<String>,
    /// Its place in the primary key (0: not in it).
    key: i64,
    /// Its place in the table.
    order: i64,
}

impl ColumnInfo {
    /// The column's definition, as a `CREATE TABLE` would give it.
    fn definition(&self, name: &str) -> String {
        let mut def = format!("{} {}", ident(name), self.type_name);
        if self.not_null {
            def.push_str(" NOT NULL");
        }
        if let Some(default) = &self.default {
            def.push_str(&format!(" DEFAULT {default}"));
        }
        def
    }
}

/// What the file has: each table's columns, and the names of its indexes and triggers.
#[derive(Debug, Default, Clone)]
struct Catalog {
    tables: BTreeMap<String, BTreeMap<String, ColumnInfo>>,
    /// Every index and trigger, with its table.
    objects: BTreeMap<String, String>,
    /// The engine's triggers, with their tables.
    triggers: BTreeMap<String, String>,
    /// Each table's indexes and triggers that are not the engine's, as their SQL.
    own: BTreeMap<String, Vec<String>>,
}

impl Catalog {
    async fn read(conn: &mut SqliteConnection) -> Result<Catalog> {
        let mut catalog = Catalog::default();
        let rows = sqlx::query("SELECT type, name, tbl_name, sql FROM sqlite_schema").fetch_all(&mut *conn).await?;
        let mut tables = Vec::new();
        for row in rows {
            let (kind, name, table): (String, String, String) = (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
            let sql: Option<String> = row.try_get(3)?;
            match kind.as_str() {
                "table" => tables.push(name),
                _ => {
                    if name.starts_with("_engine_") && kind == "trigger" {
                        catalog.triggers.insert(name.clone(), table.clone());
                    }
                    // An index SQLite made for a constraint has no SQL: the table's makes it.
                    if let Some(sql) = sql.filter(|_| !name.starts_with("_engine_") && kind != "view") {
                        catalog.own.entry(table.clone()).or_default().push(sql);
                    }
                    catalog.objects.insert(name, table);
                }
            }
        }
        for table in tables {
            let rows = sqlx::query("SELECT name, type, \"notnull\", dflt_value, pk, cid FROM pragma_table_info(?)")
                .bind(&table)
                .fetch_all(&mut *conn)
                .await?;
            let mut columns = BTreeMap::new();
            for row in rows {
                columns.insert(
                    row.try_get::<String, _>(0)?,
                    ColumnInfo {
                        type_name: row.try_get::<String, _>(1)?.to_uppercase(),
                        not_null: row.try_get::<bool, _>(2)?,
                        default: row.try_get(3)?,
                        key: row.try_get(4)?,
                        order: row.try_get(5)?,
                    },
                );
            }
            catalog.tables.insert(table, columns);
        }
        Ok(catalog)
    }

    /// Whether the file lacks what `step` creates.
    fn lacks(&self, step: &Step) -> bool {
        match &step.object {
            Object::Table { table, .. } => !self.tables.contains_key(table),
            Object::Column { table, column, .. } => {
                self.tables.get(table).is_some_and(|columns| !columns.contains_key(column))
            }
            Object::Index { name, .. } | Object::Trigger { name, .. } => !self.objects.contains_key(name),
            Object::Function { .. } => false,
            Object::Meta | Object::Rebuild { .. } => true,
        }
    }

    /// Drift, as on Postgres (`catalog::drift`), in SQLite's words.
    fn drift(&self, app: &App) -> Vec<String> {
        let tables = self
            .tables
            .iter()
            .map(|(name, columns)| {
                let mut key: Vec<(&i64, &String)> =
                    columns.iter().filter(|(_, c)| c.key > 0).map(|(n, c)| (&c.key, n)).collect();
                key.sort();
                let info = TableInfo {
                    columns: columns
                        .iter()
                        .map(|(n, c)| {
                            let info = catalog::ColumnInfo {
                                type_name: c.type_name.clone(),
                                not_null: c.not_null,
                                has_default: c.default.is_some(),
                            };
                            (n.clone(), info)
                        })
                        .collect(),
                    key: key.into_iter().map(|(_, n)| n.clone()).collect(),
                    triggers: BTreeMap::new(),
                };
                (name.clone(), info)
            })
            .collect();
        catalog::drift(&tables, app, &Sqlite)
    }
}

/// How to make on SQLite what the engine does not (`catalog::Dialect`): its `ALTER TABLE`
/// adds, renames and drops a column, and changes nothing else in place.
struct Sqlite;

/// The way SQLite changes a column's type, nullability or a table's key.
const REBUILD: &str = "SQLite changes a column or a key only by rebuilding the table: https://www.sqlite.org/lang_altertable.html#otheralter";

impl catalog::Dialect for Sqlite {
    fn type_of(&self, column: &ColumnMeta) -> String {
        sqlite_type(column.sql_type).to_owned()
    }

    /// A column declared with another type of SQLite's text affinity (`VARCHAR(20)`, `CLOB`)
    /// carries text: SQLite stores its values as text and bounds no length
    /// (`datatype3.html`, "determination of column affinity").
    fn carries(&self, expected: &str, found: &str) -> bool {
        let text = |t: &str| !t.contains("INT") && ["CHAR", "CLOB", "TEXT"].iter().any(|a| t.contains(a));
        expected == found || (expected == "TEXT" && text(found))
    }

    fn how(&self, change: Reconcile<'_>) -> Option<String> {
        Some(match change {
            Reconcile::SetNotNull { .. } => format!("after filling its nulls; {REBUILD}"),
            Reconcile::DropNotNull { .. } | Reconcile::Retype { .. } | Reconcile::Rekey => REBUILD.to_owned(),
            Reconcile::Drop { table, column } => format!("`ALTER TABLE {table} DROP COLUMN {column}`"),
        })
    }
}

/// The steps of `app`'s plan a file with `catalog` lacks (all of them on an empty file, whose
/// new tables get their columns from their `CREATE TABLE` and the engine's after it).
fn lacking(catalog: &Catalog, app: &App) -> Vec<Step> {
    // A new table has the columns its statement creates; the engine's are added after it.
    let mut created: BTreeSet<(String, String)> = BTreeSet::new();
    let mut lacking = Vec::new();
    for step in steps(app) {
        let needed = match &step.object {
            Object::Table { table, columns } if catalog.lacks(&step) => {
                created.extend(columns.iter().map(|c| (table.clone(), c.clone())));
                true
            }
            Object::Column { table, column, .. } if !catalog.tables.contains_key(table) => {
                !created.contains(&(table.clone(), column.clone()))
            }
            _ => catalog.lacks(&step),
        };
        if needed {
            lacking.push(step);
        }
    }
    // An engine trigger the plan no longer has (the rules changed what it records) goes first.
    let planned: BTreeSet<String> = steps(app)
        .into_iter()
        .filter_map(|step| match step.object {
            Object::Trigger { name, .. } => Some(name),
            _ => None,
        })
        .collect();
    let stale = catalog.triggers.iter().filter(|(name, _)| !planned.contains(*name)).map(|(name, table)| {
        Step::new(
            format!("DROP TRIGGER IF EXISTS {}", ident(name)),
            Object::Trigger { table: table.clone(), name: name.clone() },
        )
    });
    stale.chain(lacking).collect()
}

/// The statements that provision `app` on a new file, in order.
pub(crate) fn plan(app: &App) -> Vec<String> {
    lacking(&Catalog::default(), app).into_iter().map(|step| step.sql).collect()
}

/// What the file records of provisioning: its engine's schema version, and where the plan of
/// `fingerprint` stands among those provisioned.
async fn recorded(conn: &mut SqliteConnection, catalog: &Catalog, fingerprint: &str) -> Result<Option<Recorded>> {
    if !catalog.tables.contains_key("_engine_meta") {
        return Ok(None);
    }
    let mut recorded = Recorded::from_meta(sqlx::query_as(RECORDED_META).fetch_all(&mut *conn).await?);
    if catalog.tables.contains_key("_engine_plans") {
        (recorded.ours, recorded.newest) =
            sqlx::query_as(PLAN_GENERATIONS).bind(fingerprint).fetch_one(&mut *conn).await?;
    }
    Ok(Some(recorded))
}

/// What provisioning `app` would do to the file.
enum Pending {
    /// The file holds a newer plan of the app, which serves it: nothing changes.
    Older(Recorded),
    /// The steps the file lacks (none when it is current).
    Steps(Vec<Step>),
}

/// What the file holds against `app`: the steps it lacks, refusing drift and a file of a newer
/// engine; nothing when it holds a newer plan of the app that serves it, as on Postgres. A
/// `NOT NULL` column without a default is refused on a table with rows, as on Postgres; on an
/// empty table, which SQLite's `ADD COLUMN` cannot give one, the table is rebuilt ([`rebuilt`]).
async fn pending(conn: &mut SqliteConnection, app: &App) -> Result<Pending> {
    let catalog = Catalog::read(conn).await?;
    let recorded = recorded(conn, &catalog, &fingerprint(&steps(app))).await?;
    if let Some(recorded) = &recorded {
        refuse_newer(recorded.version)?;
    }
    let drift = catalog.drift(app);
    if !drift.is_empty() {
        return Err(catalog::drift_error(&drift));
    }
    let lacking = lacking(&catalog, app);
    if let Some(recorded) = recorded
        && recorded.served_by_newer(&lacking)?
    {
        return Ok(Pending::Older(recorded));
    }
    let mut rebuild = BTreeSet::new();
    for step in &lacking {
        let Object::Column { table, column, required: true } = &step.object else { continue };
        if !catalog.tables.contains_key(table) {
            continue;
        }
        let rows: bool =
            sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT EXISTS (SELECT 1 FROM {})", ident(table))))
                .fetch_one(&mut *conn)
                .await?;
        if rows {
            let fresh = "move the SQLite file aside (its rows with it), and the app starts with a new one";
            return Err(catalog::required_on_rows(table, column, &step.sql, fresh));
        }
        rebuild.insert(table.as_str());
    }
    if rebuild.is_empty() {
        return Ok(Pending::Steps(lacking));
    }
    Ok(Pending::Steps(rebuilt(&catalog, app, &rebuild)))
}

/// The steps of `app`'s plan on a file with `catalog`, whose tables `rebuild` are rebuilt first
/// by SQLite's procedure for a change `ALTER TABLE` cannot make (`lang_altertable.html`, "other
/// kinds of table schema changes"), in the one transaction of provisioning: a new table with
/// the app's columns and every other column the old one has, the rows copied, the old table
/// dropped and the new one renamed to its name, then its own indexes and triggers made again
/// from their SQL. The engine's indexes and triggers, gone with the old table, are in the plan.
fn rebuilt(catalog: &Catalog, app: &App, rebuild: &BTreeSet<&str>) -> Vec<Step> {
    let mut after = catalog.clone();
    let mut steps = Vec::new();
    for table in app.tables().iter().map(|def| def.meta()).filter(|t| rebuild.contains(t.name)) {
        let old = &catalog.tables[table.name];
        let (name, new) = (ident(table.name), ident(&format!("_engine_new_{}", table.name)));
        let mut kept: Vec<(&String, &ColumnInfo)> =
            old.iter().filter(|(c, _)| !table.columns.iter().any(|d| d.name == c.as_str())).collect();
        kept.sort_by_key(|(_, c)| c.order);
        let mut columns: Vec<String> = table.columns.iter().map(column_definition).collect();
        columns.extend(kept.iter().map(|(c, info)| info.definition(c)));
        columns.push(format!(
            "PRIMARY KEY ({})",
            table.primary_key.iter().map(|k| ident(k)).collect::<Vec<_>>().join(", ")
        ));
        let mut copied: Vec<(&String, &ColumnInfo)> = old.iter().collect();
        copied.sort_by_key(|(_, c)| c.order);
        let copied = copied.iter().map(|(c, _)| ident(c)).collect::<Vec<_>>().join(", ");
        let step = |sql: String| Step::new(sql, Object::Rebuild { table: table.name.into() });
        steps.push(step(format!("CREATE TABLE {new} ({})", columns.join(", "))));
        steps.push(step(format!("INSERT INTO {new} ({copied}) SELECT {copied} FROM {name}")));
        steps.push(step(format!("DROP TABLE {name}")));
        // The legacy rename touches no view or trigger that names the table: they name it again
        // once it is renamed, where the current one would refuse a view naming the dropped table.
        steps.push(step("PRAGMA legacy_alter_table = ON".into()));
        steps.push(step(format!("ALTER TABLE {new} RENAME TO {name}")));
        steps.push(step("PRAGMA legacy_alter_table = OFF".into()));
        steps.extend(catalog.own.get(table.name).into_iter().flatten().map(|sql| step(sql.clone())));
        // What the file has once it is rebuilt: the columns, none of the engine's objects.
        let columns = after.tables.get_mut(table.name).expect("a rebuilt table is in the file");
        for column in table.columns {
            columns.entry(column.name.into()).or_insert(ColumnInfo {
                type_name: sqlite_type(column.sql_type).into(),
                not_null: !column.nullable,
                default: None,
                key: 0,
                order: i64::MAX,
            });
        }
        after.objects.retain(|object, on| on != table.name || !object.starts_with("_engine_"));
        after.triggers.retain(|_, on| on != table.name);
    }
    steps.extend(lacking(&after, app));
    steps
}

/// Make the file serve `app`: run what it lacks and record its plan, in one transaction.
pub(crate) async fn provision(conn: &mut SqliteConnection, app: &App) -> Result<()> {
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
    let steps = match pending(&mut tx, app).await? {
        Pending::Older(recorded) => {
            tracing::warn!(
                ours = recorded.ours,
                newest = recorded.newest,
                "provisioning: the database holds a newer plan of this app, which serves it; starting without changing it"
            );
            return Ok(());
        }
        Pending::Steps(steps) => steps,
    };
    for step in &steps {
        exec(&mut tx, &step.sql).await.map_err(|e| Error::Provision {
            what: format!("running `{}`", first_line(&step.sql)),
            source: Some(e.into()),
        })?;
    }
    let fingerprint = fingerprint(&self::steps(app));
    sqlx::query(
        "INSERT INTO _engine_plans (fingerprint, provisioned_at) VALUES (?, ?) ON CONFLICT (fingerprint) DO NOTHING",
    )
    .bind(&fingerprint)
    .bind(crate::sqlite::now_ms())
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO _engine_meta (key, value) VALUES ('plan_fingerprint', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value WHERE value IS NOT excluded.value",
    )
    .bind(&fingerprint)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    let created: Vec<&Step> = steps.iter().filter(|s| s.object != Object::Meta).collect();
    if !created.is_empty() {
        tracing::info!(statements = created.len(), "provisioned the SQLite database");
    }
    Ok(())
}

/// Check that the file serves `app`, changing nothing.
pub(crate) async fn verify(conn: &mut SqliteConnection, app: &App) -> Result<()> {
    let Pending::Steps(steps) = pending(conn, app).await? else { return Ok(()) };
    let missing: Vec<String> =
        steps.into_iter().filter(|s| s.object != Object::Meta).map(|s| first_line(&s.sql).to_owned()).collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Error::provision(format!("the database is not provisioned for the app; it lacks: {}", missing.join("; "))))
    }
}

/// What provisioning would change, as `+` lines, each rebuilt table announced by a `~` line;
/// empty when the file is current.
pub(crate) async fn changes(conn: &mut SqliteConnection, app: &App) -> Result<String> {
    let steps = match pending(conn, app).await? {
        Pending::Older(recorded) => return Ok(recorded.older_plan_note()),
        Pending::Steps(steps) => steps,
    };
    let mut out = String::new();
    let mut announced = BTreeSet::new();
    for step in steps.iter().filter(|s| s.object != Object::Meta) {
        if let Object::Rebuild { table } = &step.object
            && announced.insert(table.clone())
        {
            out.push_str(&format!(
                "~ table {table} (rebuilt: it is empty, and SQLite adds a NOT NULL column without a default only to a new table)\n"
            ));
        }
        out.push_str(&format!("+ {}\n", step.sql));
    }
    Ok(out)
}

fn first_line(sql: &str) -> &str {
    sql.lines().next().unwrap_or_default()
}
