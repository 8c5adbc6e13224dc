//! Applying a plan: read the catalog, refuse drift and older plans, and run only what is missing,
//! with bounded lock waits (`docs/design.md` §1).
//!
//! Provisioning runs on a session of its own under a session advisory lock (one instance at a
//! time). Statements that create tables, add columns or replace functions and triggers run in
//! one transaction with `lock_timeout` set to [`ProvisionLocks::wait`], retried
//! [`ProvisionLocks::attempts`] times; indexes on tables that existed before run
//! `CREATE INDEX CONCURRENTLY` after it, one at a time, each with the same bounds. While a
//! statement waits, a second session reads who blocks it (`pg_blocking_pids`), so the error of a
//! wait that gives up names the blocking query.

use std::collections::BTreeSet;

use engine_kernel::App;
use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection, PgPool};

use super::catalog::{Catalog, function_body};
use super::locks::{ProvisionLocks, Watch, again, concurrently, first_line, run_outside, run_transaction};
use super::{ADVISORY_LOCK, Object, SCHEMA_VERSION, Step, fingerprint, ident, steps};
use crate::error::{Error, Result};

/// What a statement of the plan does to the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// It creates what is missing.
    Create,
    /// It replaces a function whose body differs, or a trigger whose `WHEN` condition is
    /// missing or not the plan's to have.
    Replace,
    /// It rebuilds an index a failed concurrent build left invalid.
    Rebuild,
}

/// One statement to run.
#[derive(Debug, Clone, Copy)]
pub(super) struct Change {
    pub(super) step: usize,
    pub(super) kind: Kind,
    /// An index on a table that exists: built concurrently, outside the transaction.
    pub(super) concurrent: bool,
}

/// The plan's statements the database needs, read from its catalog.
fn pending(steps: &[Step], catalog: &Catalog) -> Vec<Change> {
    let mut new_tables: BTreeSet<&str> = BTreeSet::new();
    let mut new_columns: BTreeSet<(&str, &str)> = BTreeSet::new();
    let mut out = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let table = catalog.tables.get(step.table().unwrap_or_default());
        let change = |kind| Some(Change { step: i, kind, concurrent: false });
        let change = match &step.object {
            Object::Table { table: name, columns } => match table {
                Some(_) => None,
                None => {
                    new_tables.insert(name);
                    new_columns.extend(columns.iter().map(|c| (name.as_str(), c.as_str())));
                    change(Kind::Create)
                }
            },
            Object::Column { table: name, column, .. } => {
                let exists = table.is_some_and(|t| t.columns.contains_key(column))
                    || new_columns.contains(&(name.as_str(), column.as_str()));
                if exists { None } else { change(Kind::Create) }
            }
            Object::Index { table: name, name: index } => {
                let concurrent = !new_tables.contains(name.as_str());
                match catalog.indexes.get(index) {
                    Some(true) => None,
                    Some(false) => Some(Change { step: i, kind: Kind::Rebuild, concurrent }),
                    None => Some(Change { step: i, kind: Kind::Create, concurrent }),
                }
            }
            Object::Function { name } => match catalog.functions.get(name) {
                None => change(Kind::Create),
                Some(body) if Some(body.as_str()) != function_body(&step.sql) => change(Kind::Replace),
                Some(_) => None,
            },
            Object::Trigger { table: name, name: trigger } => {
                match table.and_then(|t| t.triggers.get(trigger)).filter(|_| !new_tables.contains(name.as_str())) {
                    None => change(Kind::Create),
                    Some(&conditional) if conditional != step.sql.contains(" WHEN (") => change(Kind::Replace),
                    Some(_) => None,
                }
            }
            Object::Meta | Object::Rebuild { .. } => None,
        };
        out.extend(change);
    }
    out
}

/// The rows of `_engine_meta` that record provisioning ([`Recorded::from_meta`]), on either
/// backend.
pub(super) const RECORDED_META: &str =
    "SELECT key, value FROM _engine_meta WHERE key IN ('schema_version', 'plan_fingerprint')";

/// The generation of the plan of fingerprint `$1` and the newest one's, on either backend.
pub(super) const PLAN_GENERATIONS: &str =
    "SELECT (SELECT generation FROM _engine_plans WHERE fingerprint = $1), (SELECT max(generation) FROM _engine_plans)";

/// What the database records of provisioning (on SQLite too, `sqlite.rs`).
#[derive(Debug, Default)]
pub(super) struct Recorded {
    /// The engine's schema version.
    pub(super) version: i64,
    /// The fingerprint of the plan last provisioned.
    pub(super) fingerprint: Option<String>,
    /// The generation of the plan being applied, when it was provisioned before.
    pub(super) ours: Option<i64>,
    /// The generation of the newest plan.
    pub(super) newest: Option<i64>,
}

impl Recorded {
    /// What `_engine_meta`'s rows `schema_version` and `plan_fingerprint` record (an unreadable
    /// version is a newer engine's), where the plans are not read yet.
    pub(super) fn from_meta(rows: Vec<(String, String)>) -> Recorded {
        Recorded {
            version: rows
                .iter()
                .find(|(k, _)| k == "schema_version")
                .map(|(_, v)| v.parse::<i64>().unwrap_or(i64::MAX))
                .unwrap_or(0),
            fingerprint: rows.into_iter().find(|(k, _)| k == "plan_fingerprint").map(|(_, v)| v),
            ..Recorded::default()
        }
    }

    /// Whether the plan being applied is older than the newest one provisioned.
    fn older(&self) -> Option<(i64, i64)> {
        match (self.ours, self.newest) {
            (Some(ours), Some(newest)) if ours < newest => Some((ours, newest)),
            _ => None,
        }
    }

    /// Whether the plan being applied is older than the newest one provisioned and served by
    /// it, whose database lacks what the plan's `lacking` steps create: refused when they
    /// create a table or a column (the older app cannot run there).
    pub(super) fn served_by_newer<'a>(&self, lacking: impl IntoIterator<Item = &'a Step>) -> Result<bool> {
        let Some((ours, newest)) = self.older() else { return Ok(false) };
        let missing = missing_for_older(lacking);
        if !missing.is_empty() {
            return Err(Error::provision(format!(
                "the database holds a newer plan of this app (generation {newest}; this app's is {ours}), which lacks {}: run the newer version of the app",
                missing.join(", ")
            )));
        }
        Ok(true)
    }

    /// What `engine migrate --plan` says of a plan the newer one serves.
    pub(super) fn older_plan_note(&self) -> String {
        format!(
            "# the database holds a newer plan of this app (generation {}; this app's is {}); nothing would change\n",
            self.newest.unwrap_or_default(),
            self.ours.unwrap_or_default()
        )
    }
}

async fn recorded(conn: &mut PgConnection, fingerprint: &str) -> Result<Option<Recorded>> {
    let (meta, plans): (Option<String>, Option<String>) =
        sqlx::query_as("SELECT to_regclass('_engine_meta')::text, to_regclass('_engine_plans')::text")
            .fetch_one(&mut *conn)
            .await?;
    if meta.is_none() {
        return Ok(None);
    }
    let mut recorded = Recorded::from_meta(sqlx::query_as(RECORDED_META).fetch_all(&mut *conn).await?);
    if plans.is_some() {
        (recorded.ours, recorded.newest) =
            sqlx::query_as(PLAN_GENERATIONS).bind(fingerprint).fetch_one(&mut *conn).await?;
    }
    Ok(Some(recorded))
}

/// A database of a newer engine is refused.
pub(super) fn refuse_newer(version: i64) -> Result<()> {
    if version > SCHEMA_VERSION {
        return Err(Error::provision(format!(
            "the database was provisioned by a newer engine (schema version {version}); this engine knows version {SCHEMA_VERSION}: upgrade the engine"
        )));
    }
    Ok(())
}

fn refuse_drift(catalog: &Catalog, app: &App) -> Result<()> {
    let drift = catalog.drift(app);
    if drift.is_empty() { Ok(()) } else { Err(super::catalog::drift_error(&drift)) }
}

/// What the database lacks that an older plan needs (it cannot serve that app).
fn missing_for_older<'a>(lacking: impl IntoIterator<Item = &'a Step>) -> Vec<String> {
    lacking
        .into_iter()
        .filter_map(|step| match &step.object {
            Object::Table { table, .. } => Some(format!("table {table}")),
            Object::Column { table, column, .. } => Some(format!("column {table}.{column}")),
            _ => None,
        })
        .collect()
}

/// The outcome of comparing the app's plan with the database.
pub(super) enum Standing {
    /// The database serves the plan as it is.
    Current,
    /// The database has a newer plan of the app, which serves this one too (read-compatible).
    Older,
    /// These statements are to run.
    Changes(Vec<Change>),
}

pub(super) async fn standing(
    conn: &mut PgConnection,
    app: &App,
    steps: &[Step],
    fingerprint: &str,
) -> Result<(Standing, Option<Recorded>)> {
    let recorded = recorded(conn, fingerprint).await?;
    if let Some(recorded) = &recorded {
        refuse_newer(recorded.version)?;
    }
    let catalog = Catalog::read(conn, app).await?;
    refuse_drift(&catalog, app)?;
    let changes = pending(steps, &catalog);
    if let Some(older) = &recorded
        && older.served_by_newer(changes.iter().map(|c| &steps[c.step]))?
    {
        return Ok((Standing::Older, recorded));
    }
    let current = recorded.as_ref().is_some_and(|r| {
        r.fingerprint.as_deref() == Some(fingerprint) && r.version == SCHEMA_VERSION && r.ours.is_some()
    });
    if changes.is_empty() && current {
        return Ok((Standing::Current, recorded));
    }
    Ok((Standing::Changes(changes), recorded))
}

/// A session of its own for provisioning: no statement timeout, notices only from warnings up
/// (a re-run raises none anyway: it skips what exists).
async fn session(options: &PgConnectOptions) -> Result<PgConnection> {
    let mut conn = PgConnection::connect_with(options)
        .await
        .map_err(|e| Error::provision_from("cannot open a session to provision the database", e))?;
    sqlx::raw_sql(
        "SET statement_timeout = 0; SET lock_timeout = 0; SET client_min_messages = warning; SET application_name = 'engine provisioning'",
    )
    .execute(&mut conn)
    .await?;
    Ok(conn)
}

/// Apply `app`'s plan: only what the database lacks. Refuses a database of a newer engine, one
/// whose tables drifted from the app, and (when it lacks what the app needs) one holding a newer
/// plan of the app; starts on a newer plan that serves the app without changing it.
pub(crate) async fn provision(pool: &PgPool, app: &App, locks: ProvisionLocks) -> Result<()> {
    let options = (*pool.connect_options()).clone();
    let mut conn = session(&options).await?;
    sqlx::query("SELECT pg_advisory_lock($1)").bind(ADVISORY_LOCK).execute(&mut conn).await?;
    let result = provision_locked(&mut conn, &options, app, locks).await;
    // Closing the session releases the advisory lock too; unlocking first lets the next
    // instance go on at once.
    let _ = sqlx::query("SELECT pg_advisory_unlock($1)").bind(ADVISORY_LOCK).execute(&mut conn).await;
    let _ = conn.close().await;
    result
}

async fn provision_locked(
    conn: &mut PgConnection,
    options: &PgConnectOptions,
    app: &App,
    locks: ProvisionLocks,
) -> Result<()> {
    let steps = steps(app);
    let fingerprint = fingerprint(&steps);
    let changes = match standing(conn, app, &steps, &fingerprint).await? {
        (Standing::Current, _) => {
            tracing::debug!("provisioning: the database is current");
            return Ok(());
        }
        (Standing::Older, recorded) => {
            let recorded = recorded.unwrap_or_default();
            tracing::warn!(
                ours = recorded.ours,
                newest = recorded.newest,
                "provisioning: the database holds a newer plan of this app, which serves it; starting without changing it"
            );
            return Ok(());
        }
        (Standing::Changes(changes), _) => changes,
    };
    refuse_required_on_rows(conn, &steps, &changes).await?;
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()").fetch_one(&mut *conn).await?;
    let watch = Watch { options, pid, locks };
    let in_tx: Vec<&Step> = changes
        .iter()
        .filter(|c| !c.concurrent)
        .map(|c| &steps[c.step])
        .chain(steps.iter().filter(|s| s.object == Object::Meta))
        .collect();
    for change in changes.iter().filter(|c| !c.concurrent) {
        tracing::info!(kind = ?change.kind, "provisioning: {}", first_line(&steps[change.step].sql));
    }
    let mut tries = 0;
    loop {
        tries += 1;
        match run_transaction(conn, &watch, &in_tx).await {
            Ok(()) => break,
            Err(failure) => again(&watch, tries, failure).await?,
        }
    }
    for change in changes.iter().filter(|c| c.concurrent) {
        let step = &steps[change.step];
        let Object::Index { name, .. } = &step.object else { continue };
        tracing::info!(kind = ?change.kind, "provisioning: {}", first_line(&concurrently(&step.sql)));
        let drop = format!("DROP INDEX CONCURRENTLY IF EXISTS {}", ident(name));
        let create = concurrently(&step.sql);
        let mut tries = 0;
        loop {
            tries += 1;
            // A build that gave up leaves an invalid index behind: drop it before the next one.
            let statements: Vec<&str> = if tries == 1 && change.kind != Kind::Rebuild {
                vec![create.as_str()]
            } else {
                vec![drop.as_str(), create.as_str()]
            };
            match run_outside(conn, &watch, &statements).await {
                Ok(()) => break,
                Err(failure) => again(&watch, tries, failure).await?,
            }
        }
    }
    let record = [
        // A database provisioned before plans were ordered: its plan is the first.
        "INSERT INTO _engine_plans (fingerprint) SELECT value FROM _engine_meta WHERE key = 'plan_fingerprint' AND NOT EXISTS (SELECT 1 FROM _engine_plans)",
        "INSERT INTO _engine_plans (fingerprint) SELECT $1 WHERE NOT EXISTS (SELECT 1 FROM _engine_plans WHERE fingerprint = $1)",
        "INSERT INTO _engine_meta (key, value) VALUES ('plan_fingerprint', $1) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
    ];
    let mut tx = conn.begin().await?;
    for (i, statement) in record.into_iter().enumerate() {
        let query = sqlx::query(statement);
        let query = if i == 0 { query } else { query.bind(&fingerprint) };
        query.execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// A `NOT NULL` column without a default cannot be added to a table that has rows: say so, and
/// what to do, before anything runs.
async fn refuse_required_on_rows(conn: &mut PgConnection, steps: &[Step], changes: &[Change]) -> Result<()> {
    let created: BTreeSet<&str> = changes
        .iter()
        .filter_map(|c| match &steps[c.step].object {
            Object::Table { table, .. } => Some(table.as_str()),
            _ => None,
        })
        .collect();
    for change in changes {
        let Object::Column { table, column, required: true } = &steps[change.step].object else { continue };
        if created.contains(table.as_str()) {
            continue;
        }
        let has_rows: bool =
            sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT EXISTS (SELECT 1 FROM {})", ident(table))))
                .fetch_one(&mut *conn)
                .await?;
        if has_rows {
            let (step, fresh) = (&steps[change.step].sql, "start the app on an empty database");
            return Err(super::catalog::required_on_rows(table, column, step, fresh));
        }
    }
    Ok(())
}

/// Check that the database serves `app` as provisioned, changing nothing.
pub(crate) async fn verify(pool: &PgPool, app: &App) -> Result<()> {
    let mut conn = pool.acquire().await?;
    let steps = steps(app);
    let fingerprint = fingerprint(&steps);
    match standing(&mut conn, app, &steps, &fingerprint).await? {
        (Standing::Current | Standing::Older, _) => Ok(()),
        (Standing::Changes(_), None) => Err(Error::provision(
            "the database is not provisioned: run `engine migrate` or let the server provision it",
        )),
        (Standing::Changes(_), Some(_)) => Err(Error::provision(
            "the database is provisioned for another version of this app: run `engine migrate` or let the server provision it",
        )),
    }
}
