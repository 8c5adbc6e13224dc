//! What a store holds, counted for operators: `/engine/stats` (exact counts, read on request)
//! and the gauges of each metrics scrape (cheap: no count over the app's tables).

use std::time::Duration;

use crate::core::Core;
use crate::error::{Error, Result};
use crate::jobs::JobCounts;
use crate::jobs::queue::counts;
use crate::pg::sql;
use crate::pg::sql::Sql;
use crate::rules::selection;

/// What the store reports at each metrics scrape ([`Storage::gauges`](crate::storage::Storage::gauges)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Gauges {
    /// Background jobs, by state.
    pub jobs: JobCounts,
    /// Sessions the pool holds, in use or idle.
    pub pool_size: u32,
    /// Sessions idle in the pool.
    pub pool_idle: u32,
    /// The most sessions the pool opens.
    pub pool_max: u32,
    /// How long the transaction holding the horizon back has run (zero when none does).
    pub horizon_lag: Duration,
}

/// Counts of what the store holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Stats {
    /// Buckets that hold at least one row.
    pub buckets: u64,
    /// Clients that have pushed.
    pub clients: u64,
    /// Mutations applied.
    pub applied_mutations: u64,
    /// Mutations rejected.
    pub rejected_mutations: u64,
    /// Tombstones kept.
    pub tombstones: u64,
    /// Background jobs, by state.
    pub jobs: JobCounts,
    /// How long the oldest transaction that may write this database has been running, in
    /// milliseconds (0 when none is): pings and pulls wait for it (`docs/design.md`, the
    /// horizon).
    pub horizon_lag_ms: u64,
    /// The backend (process id) running that transaction.
    pub horizon_blocker_pid: Option<i32>,
}

/// The transaction that holds the horizon back: its backend, as `pg_stat_activity` shows it
/// (never the query's text, which may hold values).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HorizonBlocker {
    /// The backend's process id (`pg_terminate_backend(pid)` ends it).
    pub pid: i32,
    /// How long its transaction has been running.
    pub age: Duration,
    /// When its current (or last) query started.
    pub query_start: Option<chrono::DateTime<chrono::Utc>>,
    /// `active`, `idle in transaction`, …
    pub state: Option<String>,
    /// Its `application_name`.
    pub application: Option<String>,
}

/// The counts of `/engine/stats`.
pub(crate) async fn stats(core: &Core) -> Result<Stats> {
    core.on_session(async |conn| stats_on(core, conn).await).await
}

/// The oldest transaction that may write this database and is still running.
pub(crate) async fn horizon_blocker(core: &Core) -> Result<Option<HorizonBlocker>> {
    core.on_session(async |conn| blocker(conn).await).await
}

/// What an operator watches at each metrics scrape.
pub(crate) async fn gauges(core: &Core) -> Result<Gauges> {
    let pool = &core.pool;
    let (pool_size, pool_idle) = (pool.size(), u32::try_from(pool.num_idle()).unwrap_or(u32::MAX));
    let (horizon_lag, jobs) = core
        .on_session(async |conn| {
            let horizon_lag = blocker(conn).await?.map(|b| b.age).unwrap_or_default();
            Ok::<_, Error>((horizon_lag, counts(conn).await?))
        })
        .await?;
    Ok(Gauges { jobs, pool_size, pool_idle, pool_max: pool.options().get_max_connections(), horizon_lag })
}

/// The counts of `/engine/stats`, read on `conn`.
async fn stats_on(core: &Core, conn: &mut sqlx::PgConnection) -> Result<Stats> {
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    let (clients, applied, rejected, tombstones): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM _engine_clients),
                (SELECT count(*) FROM _engine_mutations WHERE status = 'applied'),
                (SELECT count(*) FROM _engine_mutations WHERE status = 'rejected'),
                (SELECT count(*) FROM _engine_tombstones)",
    )
    .fetch_one(&mut *conn)
    .await?;
    let mut buckets = 0;
    for rule in core.app.sync_rules().rules {
        let scopes: Vec<String> = core
            .rules
            .rule_selections(rule.name)
            .map(|rule_selection| {
                let table = core.app.table(rule_selection.selection.table).expect("rule tables are app tables");
                let (parameters, conditions) = selection::any_bucket("t", table, rule_selection);
                format!("SELECT {parameters} FROM {} AS t WHERE {conditions}", sql::ident(table.name))
            })
            .collect();
        let mut sql = Sql::new(format!("SELECT count(*) FROM ({}) AS b", scopes.join(" UNION ")));
        let n: i64 = sql.build_query_scalar().fetch_one(&mut *conn).await?;
        buckets += count(n);
    }
    let blocker = blocker(&mut *conn).await?;
    Ok(Stats {
        horizon_lag_ms: blocker.as_ref().map_or(0, |b| u64::try_from(b.age.as_millis()).unwrap_or(u64::MAX)),
        horizon_blocker_pid: blocker.map(|b| b.pid),
        jobs: counts(&mut *conn).await?,
        buckets,
        clients: count(clients),
        applied_mutations: count(applied),
        rejected_mutations: count(rejected),
        tombstones: count(tombstones),
    })
}

/// The oldest running transaction of this database that has an id (may write), other than the
/// session asking.
async fn blocker(conn: &mut sqlx::PgConnection) -> Result<Option<HorizonBlocker>> {
    type Row = (i32, f64, Option<chrono::DateTime<chrono::Utc>>, Option<String>, Option<String>);
    let row: Option<Row> = sqlx::query_as(
        "SELECT pid, extract(epoch FROM now() - xact_start)::float8, query_start, state, application_name
         FROM pg_stat_activity
         WHERE backend_xid IS NOT NULL AND datname = current_database() AND pid <> pg_backend_pid()
         ORDER BY age(backend_xid) DESC LIMIT 1",
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|(pid, age, query_start, state, application)| HorizonBlocker {
        pid,
        age: Duration::try_from_secs_f64(age.max(0.0)).unwrap_or_default(),
        query_start,
        state,
        application,
    }))
}
