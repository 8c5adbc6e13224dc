//! The SQLite store (sqlx): one file in WAL mode, served by one process (`docs/design.md` §11).
//! It composes the same flows as Postgres' store over `core::Shared`, each with its SQLite
//! statements: provisioning (which `engine migrate` runs on a `sqlite://` URL), pull, push,
//! housekeeping and the job queue.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use engine_kernel::rules::Membership;
use engine_kernel::wire::{PullRequest, PushRequest};
use engine_kernel::{Actor, App, BlobKey, BoxFuture, BucketKey, JobRequest};

pub use crate::sqlite::Durability;

use super::{OpenStorage, Storage};
use crate::core::{Shared, StoreLimits};
use crate::error::{Error, Result};
use crate::housekeeping::{self, Collected, Gauges, HorizonBlocker, Retention, Stats};
use crate::jobs::queue::sqlite::Wakeups;
use crate::jobs::{self, ClaimedJob, JobCounts, JobEnd, JobQueue};
use crate::pull::{self, PullState, Pulled};
use crate::push::{self, Pushed};
use crate::rules::held;
use crate::sqlite::Db;
use crate::{mutation, provision};

/// The SQLite database at `path`, created when missing: the storage of a server with no
/// database server.
pub fn sqlite(path: impl Into<PathBuf>) -> Sqlite {
    Sqlite {
        path: path.into(),
        durability: Durability::default(),
        limits: StoreLimits::default(),
        readers: crate::sqlite::default_readers(),
        wait: crate::sqlite::DEFAULT_WAIT,
    }
}

pub use crate::sqlite::sqlite_path;

/// The SQL statements that provision `app` on a new SQLite file, in order.
pub fn sqlite_plan(app: &App) -> Vec<String> {
    provision::sqlite::plan(app)
}

/// How to open a SQLite store. Build with [`sqlite`].
#[derive(Debug, Clone)]
#[must_use]
pub struct Sqlite {
    path: PathBuf,
    durability: Durability,
    limits: StoreLimits,
    readers: u32,
    wait: Duration,
}

impl Sqlite {
    /// When a commit is on disk (default [`Durability::Full`]: before it is answered).
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// The bounds on what one actor's requests may ask of the store (defaults:
    /// [`StoreLimits::default`]).
    pub fn limits(mut self, limits: StoreLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The most reading connections the store opens (default one per CPU, between 2 and 8).
    /// With the one writer they are the store's places (`docs/design.md` §6).
    pub fn readers(mut self, n: u32) -> Self {
        self.readers = n.max(1);
        self
    }

    /// How long a request waits for its turn at the store before it is refused as retryable
    /// (default 10 s, as a Postgres pool's acquire timeout).
    pub fn acquire_timeout(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// Open the file for `app`. Refused when another process has it open as a store, and for
    /// an app with a raw membership rule (raw SQL is Postgres').
    pub async fn connect(self, app: Arc<App>) -> Result<SqliteStorage> {
        if let Some(rule) = app.sync_rules().rules.iter().find(|r| matches!(r.membership, Some(Membership::Raw { .. })))
        {
            return Err(Error::config(format!(
                "sync rule `{}` holds its buckets through raw SQL, which runs on Postgres only: serve this app on Postgres",
                rule.name
            )));
        }
        let db = Db::open(&self.path, self.durability, self.readers, self.wait).await?;
        // Said at start-up, so that an operator (and a test run meant for SQLite) can see which
        // file a server is on.
        tracing::info!(path = %db.path.display(), "opened the SQLite store");
        Ok(SqliteStorage {
            db: Arc::new(db),
            shared: Arc::new(Shared { limits: self.limits, ..Shared::new(app) }),
            pulls: Arc::default(),
            pushes: Arc::default(),
            wakeups: Arc::default(),
        })
    }
}

/// The SQLite store of one app.
#[derive(Debug, Clone)]
pub struct SqliteStorage {
    db: Arc<Db>,
    /// The app, its rules, the clock and the bounds.
    shared: Arc<Shared>,
    /// The cursor key and the bucket sets cursors name.
    pulls: Arc<PullState>,
    /// The pushes waiting for the writer, applied a group at a time.
    pushes: Arc<push::sqlite::Queue>,
    /// The job workers of this process, woken when jobs are enqueued.
    wakeups: Arc<Wakeups>,
}

impl SqliteStorage {
    /// The file the store is in.
    pub fn path(&self) -> &Path {
        &self.db.path
    }

    /// Make the file serve the app (idempotent; refuses a file of a newer engine, and drift).
    pub async fn provision(&self) -> Result<()> {
        provision::sqlite::provision(&mut *self.db.writer().await, &self.shared.app).await
    }

    /// Check that the file serves the app, changing nothing.
    pub async fn verify(&self) -> Result<()> {
        provision::sqlite::verify(&mut *self.db.readers.acquire().await?, &self.shared.app).await
    }

    /// This store with `limits` (see [`StoreLimits`]).
    pub fn with_limits(mut self, limits: StoreLimits) -> Self {
        Arc::make_mut(&mut self.shared).limits = limits;
        self
    }

    /// The rows and tombstones of the actor's buckets since the request's cursor.
    pub async fn pull(&self, actor: &Actor, request: &PullRequest) -> Result<Pulled> {
        let store = pull::sqlite::Store {
            db: &self.db,
            app: &self.shared.app,
            rules: &self.shared.rules,
            limits: &self.shared.limits,
            clock: &self.shared.clock,
        };
        pull::sqlite::pull(&store, &self.pulls, actor, request).await
    }

    /// Apply the request's mutations in order, each undone alone when it fails, and answer once
    /// they are on disk (with the pushes that waited beside it, in one transaction).
    pub async fn push(&self, actor: &Actor, request: &PushRequest) -> Result<Pushed> {
        let pushed = push::sqlite::push(&self.db, &self.shared, &self.pushes, actor, request).await?;
        if !pushed.response.results.is_empty() {
            // A mutation may have enqueued jobs: the workers look.
            self.wakeups.wake();
        }
        Ok(pushed)
    }

    /// The counter now: the horizon is the next number.
    async fn counter(&self) -> Result<u64> {
        let counter: i64 = sqlx::query_scalar("SELECT seq FROM _engine_seq WHERE id = 1")
            .fetch_one(&mut *self.db.readers.acquire().await?)
            .await?;
        Ok(u64::try_from(counter).unwrap_or(0))
    }

    /// What provisioning would change in the file, as `+` lines; empty when it is current.
    pub async fn plan_changes(&self) -> Result<String> {
        provision::sqlite::changes(&mut *self.db.readers.acquire().await?, &self.shared.app).await
    }
}

impl OpenStorage for Sqlite {
    fn open(self: Box<Self>, app: Arc<App>) -> BoxFuture<'static, Result<Arc<dyn Storage>>> {
        Box::pin(async move { Ok(Arc::new(self.connect(app).await?) as Arc<dyn Storage>) })
    }
}

impl Storage for SqliteStorage {
    /// The places are the readers, for pulls, and places for the pushes that wait for the
    /// writer (16, `push::sqlite::QUEUED`), which hold no connection while they wait: a group
    /// gathers as many pushes as wait, and the runs queued on the writer are no more than those
    /// places, so the actor whose turn it is waits behind them alone, not behind every mutation
    /// queued in arrival order.
    fn sharing(&self) -> Option<super::Sharing> {
        let options = self.db.readers.options();
        let readers = options.get_max_connections() as usize;
        let sharing =
            super::Sharing::new(readers, options.get_acquire_timeout(), self.shared.limits.mutations_per_push);
        Some(sharing.with_queued_pushes(push::sqlite::QUEUED))
    }

    fn provision(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(SqliteStorage::provision(self))
    }

    fn verify(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(SqliteStorage::verify(self))
    }

    fn pull<'a>(&'a self, actor: &'a Actor, request: &'a PullRequest) -> BoxFuture<'a, Result<Pulled>> {
        Box::pin(SqliteStorage::pull(self, actor, request))
    }

    fn push<'a>(&'a self, actor: &'a Actor, request: &'a PushRequest) -> BoxFuture<'a, Result<Pushed>> {
        Box::pin(SqliteStorage::push(self, actor, request))
    }

    fn blob_ledger(&self) -> Option<crate::blob::Ledger> {
        Some(crate::blob::Ledger::new(crate::blob::LedgerInner::Sqlite(self.db.clone())))
    }

    fn can_read_blob<'a>(
        &'a self,
        actor: &'a Actor,
        key: &'a BlobKey,
        uploaders: &'a [String],
    ) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            let mut conn = self.db.readers.acquire().await?;
            mutation::can_read_blob_on_sqlite(&self.shared, &mut conn, actor, key, uploaders).await
        })
    }

    fn held_buckets<'a>(&'a self, actor: &'a Actor) -> BoxFuture<'a, Result<BTreeSet<BucketKey>>> {
        Box::pin(async move {
            let mut conn = self.db.readers.acquire().await?;
            let (held, since) = held::sqlite::held_since(&mut conn, &self.shared.app, actor).await?;
            let bound = self.shared.limits.buckets_per_actor;
            Ok(held::within_bound(&held, &since, bound).map_or(held, |(served, _)| served))
        })
    }

    fn horizon(&self) -> BoxFuture<'_, Result<u64>> {
        // Every number up to the counter has committed, and no later commit takes one below it.
        Box::pin(async move { Ok(self.counter().await? + 1) })
    }

    fn stats(&self) -> BoxFuture<'_, Result<Stats>> {
        Box::pin(async move { housekeeping::sqlite::stats(&mut *self.db.readers.acquire().await?, &self.shared).await })
    }

    fn horizon_blocker(&self) -> BoxFuture<'_, Result<Option<HorizonBlocker>>> {
        // No transaction holds the horizon back: there is none to wait for.
        Box::pin(async { Ok(None) })
    }

    fn gauges(&self) -> BoxFuture<'_, Result<Gauges>> {
        Box::pin(async move {
            let jobs = jobs::queue::sqlite::counts(&mut *self.db.readers.acquire().await?).await?;
            let readers = &self.db.readers;
            Ok(Gauges {
                jobs,
                pool_size: readers.size(),
                pool_idle: u32::try_from(readers.num_idle()).unwrap_or(u32::MAX),
                pool_max: readers.options().get_max_connections(),
                ..Gauges::default()
            })
        })
    }

    fn collect_garbage<'a>(&'a self, retention: &'a Retention) -> BoxFuture<'a, Result<Collected>> {
        Box::pin(housekeeping::sqlite::collect(&self.db, retention))
    }

    fn backend(&self) -> &'static str {
        "sqlite"
    }
}

impl JobQueue for SqliteStorage {
    fn enqueue_job(&self, job: JobRequest) -> BoxFuture<'_, Result<i64>> {
        Box::pin(async move {
            let id = jobs::queue::sqlite::insert(&mut *self.db.writer().await, &job).await?;
            self.wakeups.wake();
            Ok(id)
        })
    }

    fn claim_jobs<'a>(
        &'a self,
        names: &'a [String],
        limit: usize,
        lease: Duration,
    ) -> BoxFuture<'a, Result<Vec<ClaimedJob>>> {
        Box::pin(async move { jobs::queue::sqlite::claim(&mut *self.db.writer().await, names, limit, lease).await })
    }

    fn finish_job<'a>(&'a self, job: &'a ClaimedJob, end: JobEnd) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move { jobs::queue::sqlite::finish(&mut *self.db.writer().await, job, &end).await })
    }

    fn job_wakeups(&self) -> BoxFuture<'_, Result<tokio::sync::mpsc::Receiver<()>>> {
        Box::pin(async move { Ok(self.wakeups.subscribe()) })
    }

    fn job_counts(&self) -> BoxFuture<'_, Result<JobCounts>> {
        Box::pin(async move { jobs::queue::sqlite::counts(&mut *self.db.readers.acquire().await?).await })
    }
}

#[cfg(test)]
mod tests;
