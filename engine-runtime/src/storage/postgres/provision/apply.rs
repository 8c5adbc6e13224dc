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
use std::time::Duration;

use engine_kernel::App;
use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection, PgPool};

use super::catalog::{Catalog, function_body};
use super::{ADVISORY_LOCK, Object, SCHEMA_VERSION, Step, fingerprint, ident, steps};
use crate::error::{Error, Result};

/// How long provisioning waits for a table lock, and how many times it tries, before it gives up
/// with an error naming what holds the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProvisionLocks {
    /// The longest one attempt waits for a lock (default 2 s).
    pub wait: Duration,
    /// How many attempts (default 5), a little apart.
    pub attempts: u32,
}

impl Default for ProvisionLocks {
    fn default() -> Self {
        ProvisionLocks { wait: Duration::from_secs(2), attempts: 5 }
    }
}

impl ProvisionLocks {
    /// Wait at most `wait` per attempt, `attempts` times.
    pub fn new(wait: Duration, attempts: u32) -> Self {
        ProvisionLocks { wait: wait.max(Duration::from_millis(1)), attempts: attempts.max(1) }
    }
}

/// What a statement of the plan does to the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
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
struct Change {
    step: usize,
    kind: Kind,
    /// An index on a table that exists: built concurrently, outside the transaction.
    concurrent: bool,
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
            Object::Meta => None,
        };
        out.extend(change);
    }
    out
}

/// What the database records of provisioning.
#[derive(Debug, Default)]
struct Recorded {
    /// The engine's schema version.
    version: i64,
    /// The fingerprint of the plan last provisioned.
    fingerprint: Option<String>,
    /// The generation of the plan being applied, when it was provisioned before.
    ours: Option<i64>,
    /// The generation of the newest plan.
    newest: Option<i64>,
}

impl Recorded {
    /// Whether the plan being applied is older than the newest one provisioned.
    fn older(&self) -> Option<(i64, i64)> {
        match (self.ours, self.newest) {
            (Some(ours), Some(newest)) if ours < newest => Some((ours, newest)),
            _ => None,
        }
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
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT key, value FROM _engine_meta WHERE key IN ('schema_version', 'plan_fingerprint')")
            .fetch_all(&mut *conn)
            .await?;
    let mut recorded = Recorded {
        version: rows
            .iter()
            .find(|(k, _)| k == "schema_version")
            .map(|(_, v)| v.parse::<i64>().unwrap_or(i64::MAX))
            .unwrap_or(0),
        fingerprint: rows.into_iter().find(|(k, _)| k == "plan_fingerprint").map(|(_, v)| v),
        ..Recorded::default()
    };
    if plans.is_some() {
        let (ours, newest): (Option<i64>, Option<i64>) = sqlx::query_as(
            "SELECT (SELECT generation FROM _engine_plans WHERE fingerprint = $1), (SELECT max(generation) FROM _engine_plans)",
        )
        .bind(fingerprint)
        .fetch_one(&mut *conn)
        .await?;
        recorded.ours = ours;
        recorded.newest = newest;
    }
    Ok(Some(recorded))
}

fn refuse_newer(version: i64) -> Result<()> {
    if version > SCHEMA_VERSION {
        return Err(Error::provision(format!(
            "the database was provisioned by a newer engine (schema version {version}); this engine knows version {SCHEMA_VERSION}: upgrade the engine"
        )));
    }
    Ok(())
}

fn refuse_drift(catalog: &Catalog, app: &App) -> Result<()> {
    let drift = catalog.drift(app);
    if drift.is_empty() {
        return Ok(());
    }
    Err(Error::provision(format!(
        "the database differs from the app (schema drift), and the engine changes no existing column:\n  {}",
        drift.join("\n  ")
    )))
}

/// What the database lacks that an older plan needs (it cannot serve that app).
fn missing_for_older(steps: &[Step], changes: &[Change]) -> Vec<String> {
    changes
        .iter()
        .filter_map(|c| match &steps[c.step].object {
            Object::Table { table, .. } => Some(format!("table {table}")),
            Object::Column { table, column, .. } => Some(format!("column {table}.{column}")),
            _ => None,
        })
        .collect()
}

/// The outcome of comparing the app's plan with the database.
enum Standing {
    /// The database serves the plan as it is.
    Current,
    /// The database has a newer plan of the app, which serves this one too (read-compatible).
    Older,
    /// These statements are to run.
    Changes(Vec<Change>),
}

async fn standing(
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
    if let Some((ours, newest)) = recorded.as_ref().and_then(Recorded::older) {
        let missing = missing_for_older(steps, &changes);
        if !missing.is_empty() {
            return Err(Error::provision(format!(
                "the database holds a newer plan of this app (generation {newest}; this app's is {ours}), which lacks {}: run the newer version of the app",
                missing.join(", ")
            )));
        }
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
            return Err(Error::provision(format!(
                "the app adds column {column} to table {table}, NOT NULL, and the table has rows, which would have no value for it: declare the field `Option<…>`, or add the column yourself with a default (`ALTER TABLE {table} ADD COLUMN {column} … NOT NULL DEFAULT …`) before the app starts"
            )));
        }
    }
    Ok(())
}

/// `CREATE [UNIQUE] INDEX CONCURRENTLY IF NOT EXISTS …`.
fn concurrently(sql: &str) -> String {
    sql.replacen("INDEX IF NOT EXISTS", "INDEX CONCURRENTLY IF NOT EXISTS", 1)
}

fn first_line(sql: &str) -> &str {
    sql.lines().next().unwrap_or_default()
}

/// How a statement's lock waits are bounded and watched.
struct Watch<'a> {
    options: &'a PgConnectOptions,
    /// The provisioning session's backend.
    pid: i32,
    locks: ProvisionLocks,
}

/// Why a statement failed.
enum Failure {
    /// Its lock wait gave up; who held the lock, as seen while it waited.
    Lock {
        statement: String,
        blockers: Vec<String>,
    },
    Other(Error),
}

impl From<sqlx::Error> for Failure {
    fn from(e: sqlx::Error) -> Self {
        Failure::Other(e.into())
    }
}

/// After attempt `tries` failed: `Ok` when it is to be tried again (after a pause), the error to
/// return otherwise.
async fn again(watch: &Watch<'_>, tries: u32, failure: Failure) -> Result<()> {
    let (statement, blockers) = match failure {
        Failure::Other(e) => return Err(e),
        Failure::Lock { statement, blockers } => (statement, blockers),
    };
    if tries < watch.locks.attempts {
        tracing::warn!(
            statement = first_line(&statement),
            blockers = blockers.join("; "),
            "provisioning: a lock wait gave up; trying again"
        );
        tokio::time::sleep(Duration::from_millis(100 * u64::from(tries))).await;
        return Ok(());
    }
    let blockers = if blockers.is_empty() {
        "another session (gone by the time it was looked up)".to_owned()
    } else {
        blockers.join("; ")
    };
    Err(Error::provision(format!(
        "`{}` waited {tries} times {:?} for a lock and gave up; it was blocked by {blockers}: end that transaction, or provision when it is done",
        first_line(&statement),
        watch.locks.wait
    )))
}

async fn run_transaction(
    conn: &mut PgConnection,
    watch: &Watch<'_>,
    steps: &[&Step],
) -> std::result::Result<(), Failure> {
    let mut tx = conn.begin().await?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("SET LOCAL lock_timeout = '{}ms'", watch.locks.wait.as_millis())))
        .execute(&mut *tx)
        .await?;
    for step in steps {
        watched(&mut tx, watch, &step.sql).await?;
    }
    tx.commit().await?;
    Ok(())
}

async fn run_outside(
    conn: &mut PgConnection,
    watch: &Watch<'_>,
    statements: &[&str],
) -> std::result::Result<(), Failure> {
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("SET lock_timeout = '{}ms'", watch.locks.wait.as_millis())))
        .execute(&mut *conn)
        .await?;
    let mut result = Ok(());
    for statement in statements {
        result = watched(&mut *conn, watch, statement).await;
        if result.is_err() {
            break;
        }
    }
    sqlx::raw_sql("SET lock_timeout = 0").execute(&mut *conn).await?;
    result
}

/// Run one statement; if it is still waiting halfway through its lock timeout, read from another
/// session who blocks it.
async fn watched(conn: &mut PgConnection, watch: &Watch<'_>, sql: &str) -> std::result::Result<(), Failure> {
    let run = sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(conn);
    tokio::pin!(run);
    let mut blockers = Vec::new();
    let result = tokio::select! {
        result = &mut run => result,
        () = tokio::time::sleep(watch.locks.wait / 2) => {
            blockers = blocking(watch).await;
            run.await
        }
    };
    match result {
        Ok(_) => Ok(()),
        // A lock wait that gave up, or a deadlock this statement lost (an app's transaction
        // taking two tables' locks in the other order): tried again.
        Err(sqlx::Error::Database(db)) if matches!(db.code().as_deref(), Some("55P03" | "40P01")) => {
            Err(Failure::Lock { statement: sql.to_owned(), blockers })
        }
        Err(e) => Err(Failure::Other(Error::provision_from(format!("`{}…` failed", first_line(sql)), e))),
    }
}

/// The sessions that block the provisioning session now, with what they run.
async fn blocking(watch: &Watch<'_>) -> Vec<String> {
    let read = async {
        let mut conn = PgConnection::connect_with(watch.options).await?;
        let rows: Vec<(i32, String, String, f64)> = sqlx::query_as(
            "SELECT pid, coalesce(state, ''), coalesce(query, ''), coalesce(extract(epoch FROM now() - xact_start)::float8, 0)
             FROM pg_stat_activity WHERE pid = ANY(pg_blocking_pids($1)) ORDER BY pid",
        )
        .bind(watch.pid)
        .fetch_all(&mut conn)
        .await?;
        let _ = conn.close().await;
        Ok::<_, sqlx::Error>(rows)
    };
    match read.await {
        Ok(rows) => rows
            .into_iter()
            .map(|(pid, state, query, age)| {
                let query: String = query.split_whitespace().collect::<Vec<_>>().join(" ");
                let query: String = query.chars().take(200).collect();
                format!("pid {pid} ({state}, in a transaction for {age:.0} s) running `{query}`")
            })
            .collect(),
        Err(e) => vec![format!("a session that could not be looked up ({e})")],
    }
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

/// What provisioning `app` would change, as a diff (`+` what it creates, `~` what it replaces or
/// rebuilds, with the lines of a replaced function's body); empty when the database is current.
pub(crate) async fn changes(pool: &PgPool, app: &App) -> Result<String> {
    let mut conn = pool.acquire().await?;
    let steps = steps(app);
    let fingerprint = fingerprint(&steps);
    let changes = match standing(&mut conn, app, &steps, &fingerprint).await? {
        (Standing::Current, _) => return Ok(String::new()),
        (Standing::Older, recorded) => {
            let recorded = recorded.unwrap_or_default();
            return Ok(format!(
                "# the database holds a newer plan of this app (generation {}; this app's is {}); nothing would change\n",
                recorded.newest.unwrap_or_default(),
                recorded.ours.unwrap_or_default()
            ));
        }
        (Standing::Changes(changes), _) => changes,
    };
    let catalog = Catalog::read(&mut conn, app).await?;
    let mut out = String::new();
    for change in changes {
        let step = &steps[change.step];
        let sql = if change.concurrent { concurrently(&step.sql) } else { step.sql.clone() };
        match (change.kind, &step.object) {
            (Kind::Replace, Object::Function { name }) => {
                out.push_str(&format!("~ function {name}\n"));
                let old = catalog.functions.get(name).map(String::as_str).unwrap_or_default();
                out.push_str(&line_diff(old, function_body(&sql).unwrap_or_default()));
            }
            (Kind::Replace, Object::Trigger { table, name }) => {
                out.push_str(&format!("~ trigger {name} on {table}\n"));
                out.push_str(&prefixed("+ ", &sql));
            }
            (Kind::Rebuild, Object::Index { name, .. }) => {
                out.push_str(&format!("~ index {name} (invalid: dropped and built again)\n"));
                out.push_str(&prefixed("+ ", &sql));
            }
            _ => out.push_str(&prefixed("+ ", &sql)),
        }
    }
    Ok(out)
}

fn prefixed(prefix: &str, text: &str) -> String {
    text.lines().map(|l| format!("{prefix}{l}\n")).collect()
}

/// The lines that differ between `old` and `new` (`- ` removed, `+ ` added), by their longest
/// common subsequence.
fn line_diff(old: &str, new: &str) -> String {
    let old: Vec<&str> = old.lines().collect();
    let new: Vec<&str> = new.lines().collect();
    // common[i][j]: the longest common subsequence of old[i..] and new[j..].
    let mut common = vec![vec![0_usize; new.len() + 1]; old.len() + 1];
    for i in (0..old.len()).rev() {
        for j in (0..new.len()).rev() {
            common[i][j] =
                if old[i] == new[j] { common[i + 1][j + 1] + 1 } else { common[i + 1][j].max(common[i][j + 1]) };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < old.len() || j < new.len() {
        if i < old.len() && j < new.len() && old[i] == new[j] {
            i += 1;
            j += 1;
        } else if j < new.len() && (i == old.len() || common[i][j + 1] >= common[i + 1][j]) {
            out.push_str(&format!("+ {}\n", new[j]));
            j += 1;
        } else {
            out.push_str(&format!("- {}\n", old[i]));
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::line_diff;

    #[test]
    fn a_line_diff_shows_only_the_changed_lines() {
        assert_eq!(line_diff("a\nb\nc\n", "a\nx\nb\nc\ny\n"), "+ x\n+ y\n");
        assert_eq!(line_diff("a\nb\nc", "a\nc"), "- b\n");
        assert_eq!(line_diff("same", "same"), "");
    }
}
