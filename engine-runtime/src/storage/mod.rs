//! Storage: where an app's rows live and how pulls and pushes reach them. One trait, one module
//! per backend.
//!
//! - [`postgres`](mod@postgres): Postgres, the production store (change tracking by transaction id and
//!   triggers; no logical replication). It composes the flows (`pull`, `push`, `provision`,
//!   `housekeeping`, `jobs`) over the state they share (`core`).
//! - [`sqlite`](mod@sqlite): one SQLite file served by one process, for a server with no
//!   database server (change tracking by a counter and triggers). Being built: it provisions.

pub mod postgres;
pub mod sqlite;

use std::collections::BTreeSet;
use std::sync::Arc;

use engine_kernel::wire::{PullRequest, PushRequest};
use engine_kernel::{Actor, App, BoxFuture, BucketKey};

use crate::error::Result;
use crate::jobs::JobQueue;

pub use crate::core::StoreLimits;
pub use crate::housekeeping::{COLLECTION_INTERVAL, Collected, Gauges, HorizonBlocker, Retention, Stats};
pub use crate::jobs::queue::{JobAdmin, JobRecord};
pub use crate::pg::create_database_if_missing;
pub use crate::provision::{ProvisionLocks, provision_plan};
pub use crate::pull::{Pulled, PulledChange};
pub use crate::push::Pushed;
pub use postgres::{Postgres, PostgresStorage, postgres};
pub use sqlite::{Sqlite, SqliteStorage, sqlite, sqlite_path, sqlite_plan};

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
    /// The record of blob uploads, `_engine_blobs` (`None`, the default, for a store without
    /// it: a server on it stores no blobs).
    fn blob_ledger(&self) -> Option<crate::blob::Ledger> {
        None
    }
    /// Every bucket the actor holds now, or past the bucket bound the part a full pull serves
    /// (`docs/protocol.md#the-bucket-bound`): what its pings and presence follow.
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
    /// The backend's name (`postgres`, `sqlite`), as realtime adapters that need one name it.
    fn backend(&self) -> &'static str;
    /// How many requests may use the store at once, how long one may wait for its turn (a
    /// pool's size and its acquire timeout), and the most mutations a push holds: the server
    /// shares the places fairly between actors (`docs/design.md` §6). `None`, the default, for a
    /// store without such a bound.
    fn sharing(&self) -> Option<Sharing> {
        None
    }
}

/// What [`Storage::sharing`] tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Sharing {
    /// Requests that may use the store at once.
    pub sessions: usize,
    /// How long a request may wait for its turn.
    pub wait: std::time::Duration,
    /// The most mutations one push may hold.
    pub mutations_per_push: usize,
    /// Places for pushes beside the sessions, for a store whose pushes queue for one writer
    /// shared by a group and hold no session while they wait (SQLite); 0 when pushes take
    /// sessions (Postgres).
    pub queued_pushes: usize,
}

impl Sharing {
    /// `sessions` places, waited for at most `wait`, and pushes of at most `mutations_per_push`.
    pub fn new(sessions: usize, wait: std::time::Duration, mutations_per_push: usize) -> Self {
        Sharing { sessions, wait, mutations_per_push, queued_pushes: 0 }
    }

    /// With `pushes` places for pushes beside the sessions, which pulls then keep to themselves:
    /// for a store whose pushes wait for a writer that applies them a group at a time.
    pub fn with_queued_pushes(mut self, pushes: usize) -> Self {
        self.queued_pushes = pushes;
        self
    }

    /// The places requests share (`docs/design.md` §6), the most pushes hold and the most other
    /// requests hold: where pushes take sessions, every session, of which pushes hold at most
    /// three quarters (never all, so a pull always finds one no push holds); where they queue for
    /// a shared writer ([`with_queued_pushes`](Self::with_queued_pushes)), the sessions for pulls and the queued pushes' places beside them.
    pub(crate) fn places(&self) -> (usize, usize, usize) {
        let sessions = self.sessions.max(1);
        match self.queued_pushes {
            0 => (sessions, (sessions * 3 / 4).clamp(1, sessions.saturating_sub(1).max(1)), sessions),
            queued => (sessions + queued, queued, sessions),
        }
    }
}

/// Opens a store for an app: what `Server::builder().storage(…)` takes.
pub trait OpenStorage: Send + 'static {
    /// Connect to the store for `app`.
    fn open(self: Box<Self>, app: Arc<App>) -> BoxFuture<'static, Result<Arc<dyn Storage>>>;
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Sharing;

    #[test]
    fn places_keep_a_session_from_pushes_or_set_places_beside_the_sessions_for_queued_ones() {
        // (sessions, queued pushes) → (places, most pushes, most other requests)
        let cases = [
            ((8, 0), (8, 6, 8)),
            ((4, 0), (4, 3, 4)),
            ((2, 0), (2, 1, 2)),
            ((1, 0), (1, 1, 1)),
            ((0, 0), (1, 1, 1)),
            ((2, 16), (18, 16, 2)),
            ((8, 16), (24, 16, 8)),
        ];
        for ((sessions, queued), places) in cases {
            let sharing = Sharing::new(sessions, Duration::from_secs(1), 1000).with_queued_pushes(queued);
            assert_eq!(sharing.places(), places, "{sessions} sessions, {queued} queued pushes");
        }
    }
}
