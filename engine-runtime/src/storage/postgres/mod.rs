//! The Postgres store (sqlx): provisioning, the change stream and pull, and the transactional
//! push path.

mod bucket_sets;
mod held;
mod jobs;
mod lane;
mod mutation;
mod provision;
mod pull;
mod push;
mod retention;
mod selection;
mod sql;
#[cfg(test)]
mod test_db;
mod timeouts;
mod values;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use engine_kernel::wire::{PullRequest, PushRequest};
use engine_kernel::{Actor, App, BoxFuture, BucketKey, HlcClock};
use serde_json::Value;
use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

pub use jobs::{JobAdmin, JobRecord};
pub use provision::{ProvisionLocks, SCHEMA_VERSION, provision_plan};
pub use pull::{DEFAULT_PULL_LIMIT, MAX_PULL_LIMIT};
pub use push::MAX_CLOCK_LEAD_MS;
pub use timeouts::{
    DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT, DEFAULT_LOCK_TIMEOUT, DEFAULT_LOST_AFTER, DEFAULT_STATEMENT_TIMEOUT, Timeouts,
};

use super::{Collected, Gauges, HorizonBlocker, OpenStorage, Pushed, Retention, Stats, Storage, StoreLimits};
use crate::buckets::RuleIndex;
use crate::deadline::{self, Lost, Session};
use crate::error::{Error, Result};
use selection::Sql;

/// Postgres at `url` (`postgres://user@host:port/database`): the storage the server opens.
///
/// Always name the user in the URL: with none, the driver connects as `anonymous`.
pub fn postgres(url: impl Into<String>) -> Postgres {
    Postgres {
        url: url.into(),
        max_connections: default_pool_size(),
        pool: None,
        limits: StoreLimits::default(),
        timeouts: Timeouts::default(),
    }
}

/// The pool's default size: 4 connections per CPU the process may use, 8 at least and 32 at
/// most. More sessions than Postgres has cores to run them only queue inside Postgres, where
/// they contend for its locks: on the push benchmark's two cores, 8 connections served 7-10%
/// more pushes a second than 16.
fn default_pool_size() -> u32 {
    let cpus = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
    u32::try_from(cpus.saturating_mul(4)).unwrap_or(u32::MAX).clamp(8, 32)
}

/// How long a pooled session may sit idle before it is checked with a round trip before it is
/// lent: a session in steady use is not (a push of one mutation is two statements, and a check
/// would be a third round trip).
pub(crate) const CHECK_AFTER_IDLE: Duration = Duration::from_secs(5);

/// How long that check may take: a quarter of the pool's 10 s to lend a session. A session that
/// does not answer in time is closed and the pool opens a new one for the request, which is
/// served; each session cut while idle costs the request that finds it this long.
const IDLE_CHECK: Duration = Duration::from_millis(2500);

/// Create the database `url` names when it does not exist (connecting to the server's
/// `postgres` database to do so). Returns whether it was created.
pub async fn create_database_if_missing(url: &str) -> Result<bool> {
    use sqlx::ConnectOptions;
    use sqlx::postgres::PgConnectOptions;
    let options: PgConnectOptions = url.parse().map_err(|e| Error::config_from("not a Postgres URL", e))?;
    let Some(name) = options.get_database().map(str::to_owned) else { return Ok(false) };
    let mut admin = options
        .clone()
        .database("postgres")
        .connect()
        .await
        .map_err(|e| Error::config_from("cannot connect to the Postgres server", e))?;
    let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
        .bind(&name)
        .fetch_one(&mut admin)
        .await?;
    if exists {
        return Ok(false);
    }
    let create = format!("CREATE DATABASE {}", sql::ident(&name));
    match sqlx::query(sqlx::AssertSqlSafe(create)).execute(&mut admin).await {
        Ok(_) => Ok(true),
        // Another process created it meanwhile.
        Err(sqlx::Error::Database(db)) if db.code().as_deref() == Some("42P04") => Ok(false),
        Err(e) => Err(Error::config_from(format!("cannot create database `{name}`"), e)),
    }
}

/// How to reach Postgres. Build with [`postgres`].
#[derive(Debug, Clone)]
#[must_use]
pub struct Postgres {
    url: String,
    max_connections: u32,
    pool: Option<PgPool>,
    limits: StoreLimits,
    timeouts: Timeouts,
}

impl Postgres {
    /// The most connections the pool opens (default 4 per CPU, between 8 and 32).
    pub fn max_connections(mut self, n: u32) -> Self {
        self.max_connections = n.max(1);
        self
    }

    /// The bounds on what one actor's requests may ask of the store (defaults:
    /// [`StoreLimits::default`]).
    pub fn limits(mut self, limits: StoreLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The timeouts of every session (default: [`Timeouts::default`]: statements 30 s, lock
    /// waits 10 s, idle in a transaction 60 s), and how long Postgres has to answer a piece of
    /// the store's work before its session is taken for lost (45 s).
    pub fn timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// Use an existing pool instead of connecting to the URL. Its sessions get the
    /// [`timeouts`](Self::timeouts) too: the pool opens new sessions with them from then on,
    /// and the sessions it holds idle are replaced.
    pub fn pool(mut self, pool: PgPool) -> Self {
        self.pool = Some(pool);
        self
    }

    /// Connect for `app`.
    pub async fn connect(self, app: Arc<App>) -> Result<PostgresStorage> {
        let pool = match self.pool {
            Some(pool) => {
                self.timeouts.apply_to_pool(&pool).await;
                pool
            }
            None => {
                let options: PgConnectOptions =
                    self.url.parse().map_err(|e| Error::config_from("not a Postgres URL", e))?;
                PgPoolOptions::new()
                    .max_connections(self.max_connections)
                    .acquire_timeout(Duration::from_secs(10))
                    // sqlx checks a session with a round trip each time it lends it; a session
                    // that served a request a moment ago is checked by its next statement (a lost
                    // one fails that request as transient and is not lent again).
                    .test_before_acquire(false)
                    .before_acquire(|conn, meta| {
                        Box::pin(async move {
                            Ok(meta.idle_for <= CHECK_AFTER_IDLE || deadline::answers(conn, IDLE_CHECK).await)
                        })
                    })
                    .connect_with(self.timeouts.apply(options))
                    .await
                    .map_err(|e| Error::config_from("cannot connect to Postgres", e))?
            }
        };
        let mut store = PostgresStorage::new(pool, app).with_limits(self.limits);
        store.lost_after = self.timeouts.answer_deadline();
        Ok(store)
    }
}

impl OpenStorage for Postgres {
    fn open(self: Box<Self>, app: Arc<App>) -> BoxFuture<'static, Result<Arc<dyn Storage>>> {
        Box::pin(async move { Ok(Arc::new(self.connect(app).await?) as Arc<dyn Storage>) })
    }
}

/// What a pull reads in its first statement.
pub(crate) struct PullStart {
    pub(crate) horizon: u64,
    pub(crate) tombstone_horizon: u64,
    pub(crate) last_mutation_id: u64,
    pub(crate) synced_mutation_id: u64,
    /// Every bucket the actor holds, in the pull's snapshot.
    pub(crate) held: BTreeSet<BucketKey>,
}

/// The Postgres store of one app.
#[derive(Debug, Clone)]
pub struct PostgresStorage {
    pub(crate) pool: PgPool,
    /// Sessions kept between pushes.
    pub(crate) lane: Arc<lane::Lane>,
    pub(crate) app: Arc<App>,
    pub(crate) rules: RuleIndex,
    pub(crate) memberships: Vec<held::MembershipQuery>,
    /// The highest horizon this process has read ([`PostgresStorage::horizon_floor`]).
    highest_horizon: Arc<AtomicU64>,
    /// The server's clock, for mutations that arrive without one.
    pub(crate) clock: Arc<Mutex<HlcClock>>,
    /// The key that signs cursors, read from the database once.
    cursor_key: Arc<tokio::sync::OnceCell<crate::cursor::CursorKey>>,
    /// The bucket sets cursors name, as far as this instance has seen them.
    pub(crate) bucket_sets: Arc<Mutex<bucket_sets::SetCache>>,
    /// The bounds on what one actor's requests may ask.
    pub(crate) limits: Arc<StoreLimits>,
    /// How long provisioning waits for table locks.
    provision_locks: ProvisionLocks,
    /// How long Postgres has to answer a piece of work before its session is taken for lost.
    pub(crate) lost_after: Duration,
}

impl PostgresStorage {
    /// The store of `app` on `pool`, used as it is: its sessions get no
    /// [`Timeouts`] unless it was given through [`Postgres::pool`].
    pub fn new(pool: PgPool, app: Arc<App>) -> Self {
        let rules = RuleIndex::new(&app);
        let memberships = held::compile(&app);
        PostgresStorage {
            lane: lane::Lane::new(pool.clone()),
            pool,
            app,
            rules,
            memberships,
            highest_horizon: Arc::new(AtomicU64::new(0)),
            clock: Arc::new(Mutex::new(HlcClock::new("server"))),
            cursor_key: Arc::new(tokio::sync::OnceCell::new()),
            bucket_sets: Arc::default(),
            limits: Arc::default(),
            provision_locks: ProvisionLocks::default(),
            lost_after: timeouts::DEFAULT_LOST_AFTER,
        }
    }

    /// Run one piece of work on a session of the pool, within [`Timeouts::lost_after`]: the
    /// session goes back to the pool when Postgres answered, and is closed when it did not.
    pub(crate) async fn on_session<T, E: Into<Error>>(
        &self,
        work: impl AsyncFnOnce(&mut sqlx::PgConnection) -> std::result::Result<T, E>,
    ) -> Result<T> {
        Session::take(&self.pool).await?.run(self.lost_after, work).await
    }

    /// `work`, unless Postgres has not answered it within [`Timeouts::lost_after`].
    pub(crate) async fn within<T>(&self, work: impl Future<Output = T>) -> std::result::Result<T, Lost> {
        deadline::within(self.lost_after, work).await
    }

    /// This store with provisioning's lock waits bounded by `locks` (default:
    /// [`ProvisionLocks::default`], 5 attempts of 2 s).
    pub fn with_provision_locks(mut self, locks: ProvisionLocks) -> Self {
        self.provision_locks = locks;
        self
    }

    /// What provisioning would change in the database, as a diff: `+` lines for what it would
    /// create, `~` for a function it would replace (with its body's changed lines) or an index it
    /// would rebuild. Empty when the database is current. Drift and a database of a newer engine
    /// are errors, as at start-up.
    pub async fn plan_changes(&self) -> Result<String> {
        provision::changes(&self.pool, &self.app).await
    }

    /// This store with `limits` (see [`StoreLimits`]).
    pub fn with_limits(mut self, limits: StoreLimits) -> Self {
        self.limits = Arc::new(limits);
        self
    }

    /// The key that signs this database's cursors.
    pub(crate) async fn cursor_key(&self, conn: &mut sqlx::PgConnection) -> Result<crate::cursor::CursorKey> {
        self.cursor_key.get_or_try_init(|| bucket_sets::cursor_key(conn)).await.cloned()
    }

    /// The connection pool.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The safe horizon now: every transaction below it that could write this database has
    /// finished, so a pull sees every commit below it. A commit is visible to pulls once the
    /// horizon has passed its transaction id.
    pub async fn horizon(&self) -> Result<u64> {
        let floor = self.horizon_floor();
        self.on_session(async |conn| {
            let mut tx = sqlx::Connection::begin_with(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").await?;
            let horizon = self.read_horizon(&mut tx, floor).await?;
            tx.commit().await?;
            Ok::<_, Error>(horizon)
        })
        .await
    }

    /// A horizon a transaction begun after this call may use even if its own reading is lower:
    /// the highest this process has read so far. Read it *before* the transaction's first
    /// statement.
    ///
    /// Why that is safe: the floor came from a snapshot taken before the new one. A transaction
    /// below the floor was, in that snapshot, finished (so it is finished in the new one too) or
    /// proven to belong to another database (so it cannot hide rows of this one). A reading can
    /// be lower than the floor when a transaction of another database can no longer be placed;
    /// without the floor, horizons would step back and a commit a client was told about could
    /// vanish from its next pull. A value read *after* the first statement would not be safe: it
    /// may come from a later snapshot, and this one would not see the transactions in between.
    pub(crate) fn horizon_floor(&self) -> u64 {
        self.highest_horizon.load(Ordering::Acquire)
    }

    fn raise_floor(&self, horizon: u64) {
        self.highest_horizon.fetch_max(horizon, Ordering::AcqRel);
    }

    /// For a pull transaction, in its first statement: the horizon (at least `floor`, from
    /// [`horizon_floor`](Self::horizon_floor)), the tombstone horizon, the client's last mutation
    /// id, and the last whose transaction is below the horizon (whose rows the pull holds).
    pub(crate) async fn read_pull_start(
        &self,
        conn: &mut sqlx::PgConnection,
        actor: &Actor,
        client: uuid::Uuid,
        floor: u64,
    ) -> Result<PullStart> {
        let user = actor.user_id.as_str();
        let mut sql = Sql::new("WITH h AS (SELECT greatest((");
        sql.push(pull::HORIZON).push(")::xid8, ").push_bind(floor.to_string()).push("::text::xid8) AS h), ");
        sql.push("c AS (SELECT last_mutation_id, last_xid FROM _engine_clients WHERE user_id = ")
            .push_bind(user.to_owned());
        sql.push(" AND client_id = ").push_bind(client).push(") ");
        sql.push(
            "SELECT h.h::text,
                    (SELECT value FROM _engine_meta WHERE key = 'tombstone_horizon'),
                    (SELECT last_mutation_id FROM c),
                    (SELECT CASE WHEN c.last_xid < h.h THEN c.last_mutation_id
                                 ELSE coalesce((SELECT m.mutation_id FROM _engine_mutations m
                                                WHERE m.user_id = ",
        );
        sql.push_bind(user.to_owned()).push(" AND m.client_id = ").push_bind(client);
        sql.push(" AND m.xid < h.h ORDER BY m.mutation_id DESC LIMIT 1), 0) END FROM c), ");
        held::push_held_json(&mut sql, &self.memberships, actor);
        sql.push(" FROM h");
        let (horizon, gc, last, synced, held): (String, Option<String>, Option<i64>, Option<i64>, String) =
            sql.build_query_as().fetch_one(conn).await?;
        let held = held::held_from_json(&self.app, &self.memberships, actor, &held)?;
        let horizon: u64 = sql::xid(&horizon)?;
        self.raise_floor(horizon);
        let id = |n: Option<i64>| n.map_or(0, |n| u64::try_from(n).unwrap_or(0));
        Ok(PullStart {
            horizon,
            tombstone_horizon: gc.and_then(|v| v.parse().ok()).unwrap_or(0),
            last_mutation_id: id(last),
            synced_mutation_id: id(synced),
            held,
        })
    }

    /// The horizon (at least `floor`) for a transaction whose snapshot this statement fixes (its
    /// first).
    pub(crate) async fn read_horizon(&self, conn: &mut sqlx::PgConnection, floor: u64) -> Result<u64> {
        let text: String = sqlx::query_scalar(pull::HORIZON).fetch_one(conn).await?;
        let read: u64 = sql::xid(&text)?;
        let horizon = read.max(floor);
        self.raise_floor(horizon);
        Ok(horizon)
    }

    /// The next transaction id to be assigned: once [`horizon`](Self::horizon) reaches it,
    /// everything committed before this call is visible to pulls.
    pub async fn next_xid(&self) -> Result<u64> {
        let next: String = self
            .on_session(async |conn| {
                sqlx::query_scalar("SELECT pg_snapshot_xmax(pg_current_snapshot())::text").fetch_one(conn).await
            })
            .await?;
        sql::xid(&next)
    }
}

impl Storage for PostgresStorage {
    fn provision(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(provision::provision(&self.pool, &self.app, self.provision_locks))
    }

    fn verify(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(provision::verify(&self.pool, &self.app))
    }

    fn pull<'a>(&'a self, actor: &'a Actor, request: &'a PullRequest) -> BoxFuture<'a, Result<crate::storage::Pulled>> {
        Box::pin(pull::pull(self, actor, request))
    }

    fn push<'a>(&'a self, actor: &'a Actor, request: &'a PushRequest) -> BoxFuture<'a, Result<Pushed>> {
        Box::pin(push::push(self, actor, request))
    }

    fn can_read_blob<'a>(
        &'a self,
        actor: &'a Actor,
        key: &'a engine_kernel::BlobKey,
        uploaders: &'a [String],
    ) -> BoxFuture<'a, Result<bool>> {
        Box::pin(
            async move { self.on_session(async |conn| self.can_read_blob_on(conn, actor, key, uploaders).await).await },
        )
    }

    fn held_buckets<'a>(&'a self, actor: &'a Actor) -> BoxFuture<'a, Result<BTreeSet<BucketKey>>> {
        Box::pin(async move {
            let held = self
                .on_session(async |conn| held::held_buckets(conn, &self.app, &self.memberships, actor).await)
                .await?;
            if held.len() > self.limits.buckets_per_actor {
                return Err(Error::TooManyBuckets { held: held.len(), limit: self.limits.buckets_per_actor });
            }
            Ok(held)
        })
    }

    fn horizon(&self) -> BoxFuture<'_, Result<u64>> {
        Box::pin(PostgresStorage::horizon(self))
    }

    fn stats(&self) -> BoxFuture<'_, Result<Stats>> {
        Box::pin(async move { self.on_session(async |conn| self.stats_on(conn).await).await })
    }

    fn horizon_blocker(&self) -> BoxFuture<'_, Result<Option<HorizonBlocker>>> {
        Box::pin(async move { self.on_session(async |conn| blocker(conn).await).await })
    }

    fn gauges(&self) -> BoxFuture<'_, Result<Gauges>> {
        Box::pin(async move {
            let (pool_size, pool_idle) = (self.pool.size(), u32::try_from(self.pool.num_idle()).unwrap_or(u32::MAX));
            let (horizon_lag, jobs) = self
                .on_session(async |conn| {
                    let horizon_lag = blocker(conn).await?.map(|b| b.age).unwrap_or_default();
                    Ok::<_, Error>((horizon_lag, jobs::counts(conn).await?))
                })
                .await?;
            Ok(Gauges { jobs, pool_size, pool_idle, pool_max: self.pool.options().get_max_connections(), horizon_lag })
        })
    }

    fn collect_garbage<'a>(&'a self, retention: &'a Retention) -> BoxFuture<'a, Result<Collected>> {
        Box::pin(retention::collect(&self.pool, retention, self.lost_after))
    }
}

impl PostgresStorage {
    /// Whether the actor can read a row whose blob column holds `key` and that one of
    /// `uploaders` wrote there, read on `conn`.
    async fn can_read_blob_on(
        &self,
        conn: &mut sqlx::PgConnection,
        actor: &Actor,
        key: &engine_kernel::BlobKey,
        uploaders: &[String],
    ) -> Result<bool> {
        use engine_kernel::MutatorTx;
        let has_blobs = self.app.tables().iter().any(|def| def.meta().columns.iter().any(|c| c.blob));
        if !has_blobs {
            return Ok(false);
        }
        // The rows an uploader wrote the key into; whether the actor can read one of them,
        // and whether it still holds the key, the mutation's scoped reads say.
        let written: Vec<(String, Value, String)> = sqlx::query_as(
            "SELECT table_name, row_key, column_name FROM _engine_blob_refs
             WHERE blob_key = $1 AND writer = ANY($2) LIMIT 1000",
        )
        .bind(key.to_string())
        .bind(uploaders)
        .fetch_all(&mut *conn)
        .await?;
        let hlc = self
            .clock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .tick(engine_kernel::hlc::wall_clock_ms());
        // The reads of a mutation, which see only the rows of the actor's buckets; it
        // never writes, so no transaction begins.
        let mut reads =
            mutation::PgMutatorTx::new(mutation::Session::Deferred(conn), self, actor.clone(), hlc, uuid::Uuid::nil());
        for (table_name, row_key, column_name) in written {
            let Some(table) = self.app.table(&table_name) else { continue };
            let Some(column) = table.column(&column_name).filter(|c| c.blob) else { continue };
            let Value::Object(key_values) = row_key else { continue };
            let mut filter = vec![(column.name, Value::String(key.to_string()))];
            for (name, value) in key_values {
                let Some(key_column) = table.column(&name) else { continue };
                filter.push((key_column.name, value));
            }
            if !reads.select(table, filter, Some(1)).await?.is_empty() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The counts of `/engine/stats`, read on `conn`.
    async fn stats_on(&self, conn: &mut sqlx::PgConnection) -> Result<Stats> {
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
        for rule in self.app.sync_rules().rules {
            let scopes: Vec<String> = self
                .rules
                .rule_selections(rule.name)
                .map(|rule_selection| {
                    let table = self.app.table(rule_selection.selection.table).expect("rule tables are app tables");
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
            jobs: jobs::counts(&mut *conn).await?,
            buckets,
            clients: count(clients),
            applied_mutations: count(applied),
            rejected_mutations: count(rejected),
            tombstones: count(tombstones),
        })
    }
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

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[tokio::test]
    async fn an_unreachable_database_says_why() {
        let err = create_database_if_missing("postgres://postgres@127.0.0.1:1/none").await.unwrap_err();
        assert!(matches!(err, Error::Config { .. }), "{err}");
        assert!(
            err.source().and_then(|s| s.downcast_ref::<sqlx::Error>()).is_some(),
            "the driver's error is kept: {err:?}"
        );
    }
}
