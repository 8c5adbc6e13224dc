//! The Postgres store (sqlx): the flows composed over the state they share. `core` holds what
//! every flow reads; `pull`, `push`, `provision`, `housekeeping` and `jobs` each keep their own
//! state and SQL; `pg` is the plumbing under them all.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use engine_kernel::wire::{PullRequest, PushRequest};
use engine_kernel::{Actor, App, BoxFuture, BucketKey, JobRequest};
use sqlx::PgPool;

pub use crate::core::MAX_CLOCK_LEAD_MS;
pub use crate::jobs::queue::{JobAdmin, JobRecord};
pub use crate::pg::{
    DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT, DEFAULT_LOCK_TIMEOUT, DEFAULT_LOST_AFTER, DEFAULT_STATEMENT_TIMEOUT, Timeouts,
    create_database_if_missing,
};
pub use crate::provision::{ProvisionLocks, SCHEMA_VERSION, provision_plan};
pub use crate::pull::{DEFAULT_PULL_LIMIT, MAX_PULL_LIMIT};

use super::{OpenStorage, Storage};
use crate::core::{Core, StoreLimits};
use crate::error::Result;
use crate::housekeeping::{self, Collected, Gauges, HorizonBlocker, Retention, Stats};
use crate::jobs::{ClaimedJob, JobCounts, JobEnd, JobQueue};
use crate::pg::connect;
use crate::pull::{self, PullState, Pulled};
use crate::push::{self, Lane, Pushed};
use crate::rules::held;
use crate::{mutation, provision};

/// Postgres at `url` (`postgres://user@host:port/database`): the storage the server opens.
///
/// Always name the user in the URL: with none, the driver connects as `anonymous`.
pub fn postgres(url: impl Into<String>) -> Postgres {
    Postgres {
        url: url.into(),
        max_connections: connect::default_pool_size(),
        pool: None,
        limits: StoreLimits::default(),
        timeouts: Timeouts::default(),
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
            None => connect::open_pool(&self.url, self.max_connections, &self.timeouts).await?,
        };
        let mut store = PostgresStorage::new(pool, app).with_limits(self.limits);
        Arc::make_mut(&mut store.core).lost_after = self.timeouts.answer_deadline();
        Ok(store)
    }
}

impl OpenStorage for Postgres {
    fn open(self: Box<Self>, app: Arc<App>) -> BoxFuture<'static, Result<Arc<dyn Storage>>> {
        Box::pin(async move { Ok(Arc::new(self.connect(app).await?) as Arc<dyn Storage>) })
    }
}

/// The Postgres store of one app: the flows' own state beside what they share.
#[derive(Debug, Clone)]
pub struct PostgresStorage {
    core: Arc<Core>,
    /// The pull's horizon floor, cursor key and bucket sets.
    pulls: Arc<PullState>,
    /// Sessions kept between pushes.
    lane: Arc<Lane>,
    /// How long provisioning waits for table locks.
    provision_locks: ProvisionLocks,
}

impl PostgresStorage {
    /// The store of `app` on `pool`, used as it is: its sessions get no
    /// [`Timeouts`] unless it was given through [`Postgres::pool`].
    pub fn new(pool: PgPool, app: Arc<App>) -> Self {
        PostgresStorage {
            lane: Lane::new(pool.clone()),
            core: Arc::new(Core::new(pool, app)),
            pulls: Arc::default(),
            provision_locks: ProvisionLocks::default(),
        }
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
        provision::changes(&self.core.pool, &self.core.app).await
    }

    /// Refuse the app when a raw membership query reads an app table it does not declare
    /// (`rules::held::check_raw_reads`).
    async fn check_raw_reads(&self) -> Result<()> {
        let mut conn = self.core.pool.acquire().await?;
        crate::rules::held::check_raw_reads(&mut conn, &self.core.app, &self.core.memberships).await
    }

    /// This store with `limits` (see [`StoreLimits`]).
    pub fn with_limits(mut self, limits: StoreLimits) -> Self {
        Arc::make_mut(&mut self.core).limits = limits;
        self
    }

    /// What the flows share, for the flows' own tests.
    #[cfg(test)]
    pub(crate) fn core(&self) -> &Core {
        &self.core
    }

    /// The connection pool.
    pub fn pool(&self) -> &PgPool {
        &self.core.pool
    }

    /// The safe horizon now: every transaction below it that could write this database has
    /// finished, so a pull sees every commit below it. A commit is visible to pulls once the
    /// horizon has passed its transaction id.
    pub async fn horizon(&self) -> Result<u64> {
        pull::horizon(&self.core, &self.pulls).await
    }

    /// The next transaction id to be assigned: once [`horizon`](Self::horizon) reaches it,
    /// everything committed before this call is visible to pulls.
    pub async fn next_xid(&self) -> Result<u64> {
        pull::next_xid(&self.core).await
    }
}

impl Storage for PostgresStorage {
    fn sharing(&self) -> Option<super::Sharing> {
        let options = self.core.pool.options();
        let sessions = options.get_max_connections() as usize;
        Some(super::Sharing::new(sessions, options.get_acquire_timeout(), self.core.limits.mutations_per_push))
    }

    fn provision(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            provision::provision(&self.core.pool, &self.core.app, self.provision_locks).await?;
            self.check_raw_reads().await
        })
    }

    fn verify(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            provision::verify(&self.core.pool, &self.core.app).await?;
            self.check_raw_reads().await
        })
    }

    fn pull<'a>(&'a self, actor: &'a Actor, request: &'a PullRequest) -> BoxFuture<'a, Result<Pulled>> {
        Box::pin(pull::pull(&self.core, &self.pulls, actor, request))
    }

    fn push<'a>(&'a self, actor: &'a Actor, request: &'a PushRequest) -> BoxFuture<'a, Result<Pushed>> {
        Box::pin(push::push(&self.core, &self.lane, actor, request))
    }

    fn blob_ledger(&self) -> Option<crate::blob::Ledger> {
        Some(crate::blob::Ledger::new(crate::blob::LedgerInner::Postgres(self.core.pool.clone())))
    }

    fn can_read_blob<'a>(
        &'a self,
        actor: &'a Actor,
        key: &'a engine_kernel::BlobKey,
        uploaders: &'a [String],
    ) -> BoxFuture<'a, Result<bool>> {
        let core = &*self.core;
        Box::pin(async move {
            core.on_session(async |conn| mutation::can_read_blob(core, conn, actor, key, uploaders).await).await
        })
    }

    fn held_buckets<'a>(&'a self, actor: &'a Actor) -> BoxFuture<'a, Result<BTreeSet<BucketKey>>> {
        let core = &*self.core;
        Box::pin(async move {
            let bound = core.limits.buckets_per_actor;
            core.on_session(async |conn| held::served_buckets(conn, &core.app, &core.memberships, actor, bound).await)
                .await
        })
    }

    fn horizon(&self) -> BoxFuture<'_, Result<u64>> {
        Box::pin(PostgresStorage::horizon(self))
    }

    fn stats(&self) -> BoxFuture<'_, Result<Stats>> {
        Box::pin(housekeeping::stats(&self.core))
    }

    fn horizon_blocker(&self) -> BoxFuture<'_, Result<Option<HorizonBlocker>>> {
        Box::pin(housekeeping::horizon_blocker(&self.core))
    }

    fn gauges(&self) -> BoxFuture<'_, Result<Gauges>> {
        Box::pin(housekeeping::gauges(&self.core))
    }

    fn collect_garbage<'a>(&'a self, retention: &'a Retention) -> BoxFuture<'a, Result<Collected>> {
        Box::pin(housekeeping::collect(&self.core.pool, retention, self.core.lost_after))
    }

    fn backend(&self) -> &'static str {
        "postgres"
    }
}

impl JobQueue for PostgresStorage {
    fn enqueue_job(&self, job: JobRequest) -> BoxFuture<'_, Result<i64>> {
        self.core.enqueue_job(job)
    }

    fn claim_jobs<'a>(
        &'a self,
        names: &'a [String],
        limit: usize,
        lease: Duration,
    ) -> BoxFuture<'a, Result<Vec<ClaimedJob>>> {
        self.core.claim_jobs(names, limit, lease)
    }

    fn finish_job<'a>(&'a self, job: &'a ClaimedJob, end: JobEnd) -> BoxFuture<'a, Result<bool>> {
        self.core.finish_job(job, end)
    }

    fn job_wakeups(&self) -> BoxFuture<'_, Result<tokio::sync::mpsc::Receiver<()>>> {
        self.core.job_wakeups()
    }

    fn job_counts(&self) -> BoxFuture<'_, Result<JobCounts>> {
        self.core.job_counts()
    }
}
