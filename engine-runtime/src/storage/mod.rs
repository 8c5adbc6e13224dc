//! Storage: where an app's rows live and how pulls and pushes reach them. One trait, one module
//! per backend.
//!
//! - [`postgres`](mod@postgres): Postgres, the production store (change tracking by transaction id and
//!   triggers; no logical replication).

pub mod postgres;
mod pulled;

use std::sync::Arc;
use std::time::Duration;

use std::collections::BTreeSet;

use engine_kernel::wire::{PullRequest, PushRequest, PushResponse};
use engine_kernel::{Actor, App, BoxFuture, BucketKey};

use crate::error::{Error, Result};
use crate::jobs::{JobCounts, JobQueue};

pub use postgres::{
    JobAdmin, JobRecord, Postgres, PostgresStorage, ProvisionLocks, create_database_if_missing, postgres,
    provision_plan,
};
pub use pulled::{Pulled, PulledChange};

/// An app's store: provisioning, pull and push, and the queue of its background jobs (which
/// mutations enqueue in their own transactions), for one app.
pub trait Storage: JobQueue + Send + Sync + 'static {
    /// Make the database serve the app (idempotent; refuses a database of a newer engine).
    fn provision(&self) -> BoxFuture<'_, Result<()>>;
    /// Check that the database serves the app, changing nothing.
    fn verify(&self) -> BoxFuture<'_, Result<()>>;
    /// The rows and tombstones of the actor's buckets since the request's cursor.
    fn pull<'a>(&'a self, actor: &'a Actor, request: &'a PullRequest) -> BoxFuture<'a, Result<Pulled>>;
    /// Apply the request's mutations in order, each in its own transaction.
    fn push<'a>(&'a self, actor: &'a Actor, request: &'a PushRequest) -> BoxFuture<'a, Result<Pushed>>;
    /// Whether the actor can read a row whose blob column holds `key` and that one of
    /// `uploaders` wrote there (who may download the blob).
    fn can_read_blob<'a>(
        &'a self,
        actor: &'a Actor,
        key: &'a engine_kernel::BlobKey,
        uploaders: &'a [String],
    ) -> BoxFuture<'a, Result<bool>>;
    /// Every bucket the actor holds now.
    fn held_buckets<'a>(&'a self, actor: &'a Actor) -> BoxFuture<'a, Result<BTreeSet<BucketKey>>>;
    /// The safe horizon now: a commit whose transaction id is below it is visible to pulls.
    fn horizon(&self) -> BoxFuture<'_, Result<u64>>;
    /// Counts for `/engine/stats`.
    fn stats(&self) -> BoxFuture<'_, Result<Stats>>;
    /// The oldest transaction that may write this database and is still running, which holds
    /// the horizon back (none when no transaction with an id runs).
    fn horizon_blocker(&self) -> BoxFuture<'_, Result<Option<HorizonBlocker>>>;
    /// What an operator watches, read at each metrics scrape: the jobs by state, the
    /// connection pool's use and the horizon's lag. Cheap: no count over the app's tables.
    fn gauges(&self) -> BoxFuture<'_, Result<Gauges>>;
    /// Delete what is older than its [`Retention`], in steps of at most `retention.batch` rows,
    /// unless another instance is collecting (then nothing is done: [`Collected::skipped`]).
    /// Clients whose cursors predate the collected tombstones get `reset: true` on their next
    /// pull.
    fn collect_garbage<'a>(&'a self, retention: &'a Retention) -> BoxFuture<'a, Result<Collected>>;
}

/// How often a server collects what its [`Retention`] no longer keeps (one instance at a time).
pub const COLLECTION_INTERVAL: Duration = Duration::from_secs(3600);

/// How long a store keeps what it no longer needs for long, and how much one step of collection
/// deletes (`docs/design.md`, retention).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Retention {
    /// Tombstones, and the bucket sets no cursor has named since (default 7 days): a client away
    /// longer starts its buckets afresh.
    pub tombstones: Duration,
    /// The records of mutations, and the rows of clients that have not pushed since (default 30
    /// days). A replay of a mutation whose record is gone is answered `duplicate` without its
    /// outcome, from the client's kept sequence (`docs/protocol.md#post-syncpush`).
    pub mutations: Duration,
    /// Jobs `done` (default 7 days).
    pub jobs: Duration,
    /// Jobs `dead` (default 30 days), kept longer for an operator to look at, retry or discard.
    pub dead_jobs: Duration,
    /// The most rows one step deletes (default 1,000): each step is a short transaction of its
    /// own, so collection never holds many locks or a long snapshot.
    pub batch: usize,
}

impl Default for Retention {
    fn default() -> Self {
        const DAY: u64 = 24 * 3600;
        Retention {
            tombstones: Duration::from_secs(7 * DAY),
            mutations: Duration::from_secs(30 * DAY),
            jobs: Duration::from_secs(7 * DAY),
            dead_jobs: Duration::from_secs(30 * DAY),
            batch: 1_000,
        }
    }
}

impl Retention {
    /// This retention with tombstones kept for `keep`.
    #[must_use]
    pub fn tombstones(mut self, keep: Duration) -> Self {
        self.tombstones = keep;
        self
    }

    /// This retention with mutation records and idle clients kept for `keep`.
    #[must_use]
    pub fn mutations(mut self, keep: Duration) -> Self {
        self.mutations = keep;
        self
    }

    /// This retention with jobs `done` kept for `keep`.
    #[must_use]
    pub fn jobs(mut self, keep: Duration) -> Self {
        self.jobs = keep;
        self
    }

    /// This retention with jobs `dead` kept for `keep`.
    #[must_use]
    pub fn dead_jobs(mut self, keep: Duration) -> Self {
        self.dead_jobs = keep;
        self
    }

    /// This retention deleting at most `rows` per step.
    #[must_use]
    pub fn batch(mut self, rows: usize) -> Self {
        self.batch = rows.max(1);
        self
    }
}

/// What one collection did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Collected {
    /// Another instance was collecting: this one did nothing.
    pub skipped: bool,
    /// Tombstones deleted.
    pub tombstones: u64,
    /// Mutation records deleted.
    pub mutations: u64,
    /// Client rows deleted.
    pub clients: u64,
    /// Jobs deleted (`done` and `dead`).
    pub jobs: u64,
    /// Bucket sets deleted.
    pub bucket_sets: u64,
    /// The steps (short transactions) it took.
    pub steps: u64,
}

/// What a push did. Mutations before a stop are committed even when the push stopped, so their
/// buckets are to be pinged either way.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct Pushed {
    /// The results of the mutations that were answered, and the client's sequence after them.
    pub response: PushResponse,
    /// Why the push stopped before its end: a transient failure (nothing of that mutation was
    /// recorded, unless Postgres did not answer: [`Error::Unanswered`]) or a sequence gap.
    pub stopped: Option<Error>,
    /// Every bucket whose rows the committed mutations changed.
    pub affected: BTreeSet<BucketKey>,
    /// Claim values (`user_id=carol`) whose membership rows changed: their holders' bucket sets
    /// may have changed.
    pub membership_changes: BTreeSet<String>,
    /// The highest transaction id among the committed mutations (0 when none): pulls see them
    /// once the horizon has passed it.
    pub commit_xid: u64,
}

/// What the store reports at each metrics scrape ([`Storage::gauges`]).
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

/// Bounds on what one actor's requests may ask of a store, each answered with an error that
/// names it (`docs/protocol.md` lists where).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreLimits {
    /// The most mutations one push holds (default 1,000): past it, the push is refused whole
    /// with `413 too_many_mutations`.
    pub mutations_per_push: usize,
    /// The most buckets synced for one actor (default 10,000): past it, a pull is refused with
    /// `413 payload_too_large`, which names both numbers.
    pub buckets_per_actor: usize,
    /// The most bytes of a primary-key value or of a value that becomes a bucket parameter
    /// (default 512): past it, the write is rejected `validation_failed`.
    pub key_bytes: usize,
    /// The most bytes of a row's JSON (default 1 MiB; see [`StoreLimits::table_row_bytes`]):
    /// past it, the write is rejected `validation_failed`.
    pub row_bytes: usize,
    /// The deepest nesting of a mutation's arguments (default 64): past it, the mutation is
    /// rejected `validation_failed`.
    pub args_depth: usize,
    /// The most row data a pull page carries, in bytes (default 4 MiB): a page that would carry
    /// more ends early with `hasMore`. A page always takes at least one entry.
    pub page_bytes: usize,
    /// Row bounds of single tables, in place of `row_bytes`.
    pub table_row_bytes: Vec<(String, usize)>,
}

impl Default for StoreLimits {
    fn default() -> Self {
        StoreLimits {
            mutations_per_push: 1_000,
            buckets_per_actor: 10_000,
            key_bytes: 512,
            row_bytes: 1024 * 1024,
            args_depth: 64,
            page_bytes: 4 * 1024 * 1024,
            table_row_bytes: Vec::new(),
        }
    }
}

impl StoreLimits {
    /// These limits with at most `n` mutations per push.
    #[must_use]
    pub fn mutations_per_push(mut self, n: usize) -> Self {
        self.mutations_per_push = n.max(1);
        self
    }

    /// These limits with at most `n` buckets synced per actor.
    #[must_use]
    pub fn buckets_per_actor(mut self, n: usize) -> Self {
        self.buckets_per_actor = n.max(1);
        self
    }

    /// These limits with keys and bucket parameters of at most `bytes`.
    #[must_use]
    pub fn key_bytes(mut self, bytes: usize) -> Self {
        self.key_bytes = bytes.max(1);
        self
    }

    /// These limits with rows of at most `bytes` of JSON, in tables without a bound of their own.
    #[must_use]
    pub fn row_bytes(mut self, bytes: usize) -> Self {
        self.row_bytes = bytes.max(1);
        self
    }

    /// These limits with rows of table `table` of at most `bytes` of JSON.
    #[must_use]
    pub fn table_row_bytes(mut self, table: impl Into<String>, bytes: usize) -> Self {
        let table = table.into();
        self.table_row_bytes.retain(|(t, _)| *t != table);
        self.table_row_bytes.push((table, bytes.max(1)));
        self
    }

    /// These limits with arguments nested at most `depth` deep.
    #[must_use]
    pub fn args_depth(mut self, depth: usize) -> Self {
        self.args_depth = depth.max(1);
        self
    }

    /// These limits with pull pages of at most `bytes` of row data.
    #[must_use]
    pub fn page_bytes(mut self, bytes: usize) -> Self {
        self.page_bytes = bytes.max(1);
        self
    }

    /// The row bound of `table`.
    pub fn row_bytes_of(&self, table: &str) -> usize {
        self.table_row_bytes.iter().find(|(t, _)| t == table).map_or(self.row_bytes, |(_, bytes)| *bytes)
    }
}

/// Opens a store for an app: what `Server::builder().storage(…)` takes.
pub trait OpenStorage: Send + 'static {
    /// Connect to the store for `app`.
    fn open(self: Box<Self>, app: Arc<App>) -> BoxFuture<'static, Result<Arc<dyn Storage>>>;
}
