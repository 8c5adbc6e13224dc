//! Storage: where an app's rows live and how pulls and pushes reach them. One trait, one module
//! per backend.
//!
//! - [`postgres`](mod@postgres): Postgres, the production store (change tracking by transaction id and
//!   triggers; no logical replication).

pub mod postgres;

use std::sync::Arc;

use std::collections::BTreeSet;

use engine_kernel::wire::{PullRequest, PullResponse, PushRequest, PushResponse};
use engine_kernel::{Actor, App, BoxFuture, BucketKey};

use crate::error::{Error, Result};
use crate::jobs::{JobCounts, JobQueue};

pub use postgres::{Postgres, PostgresStorage, create_database_if_missing, postgres, provision_plan};

/// An app's store: provisioning, pull and push, and the queue of its background jobs (which
/// mutations enqueue in their own transactions), for one app.
pub trait Storage: JobQueue + Send + Sync + 'static {
    /// Make the database serve the app (idempotent; refuses a database of a newer engine).
    fn provision(&self) -> BoxFuture<'_, Result<()>>;
    /// Check that the database serves the app, changing nothing.
    fn verify(&self) -> BoxFuture<'_, Result<()>>;
    /// The rows and tombstones of the actor's buckets since the request's cursor.
    fn pull<'a>(&'a self, actor: &'a Actor, request: &'a PullRequest) -> BoxFuture<'a, Result<PullResponse>>;
    /// Apply the request's mutations in order, each in its own transaction.
    fn push<'a>(&'a self, actor: &'a Actor, request: &'a PushRequest) -> BoxFuture<'a, Result<Pushed>>;
    /// Whether the actor can read a row whose blob column holds `key` (who may download it).
    fn can_read_blob<'a>(&'a self, actor: &'a Actor, key: &'a engine_kernel::BlobKey) -> BoxFuture<'a, Result<bool>>;
    /// Every bucket the actor holds now.
    fn held_buckets<'a>(&'a self, actor: &'a Actor) -> BoxFuture<'a, Result<BTreeSet<BucketKey>>>;
    /// The safe horizon now: a commit whose transaction id is below it is visible to pulls.
    fn horizon(&self) -> BoxFuture<'_, Result<u64>>;
    /// Counts for `/engine/stats`.
    fn stats(&self) -> BoxFuture<'_, Result<Stats>>;
    /// Delete tombstones older than `retention` (and jobs done before then); returns how many
    /// tombstones went. Clients whose cursors
    /// predate the collected ones get `reset: true` on their next pull.
    fn collect_garbage(&self, retention: std::time::Duration) -> BoxFuture<'_, Result<u64>>;
}

/// What a push did. Mutations before a stop are committed even when the push stopped, so their
/// buckets are to be pinged either way.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct Pushed {
    /// The results of the mutations that were answered, and the client's sequence after them.
    pub response: PushResponse,
    /// Why the push stopped before its end: a transient failure (nothing of that mutation was
    /// recorded) or a sequence gap.
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
}

/// Opens a store for an app: what `Server::builder().storage(…)` takes.
pub trait OpenStorage: Send + 'static {
    /// Connect to the store for `app`.
    fn open(self: Box<Self>, app: Arc<App>) -> BoxFuture<'static, Result<Arc<dyn Storage>>>;
}
