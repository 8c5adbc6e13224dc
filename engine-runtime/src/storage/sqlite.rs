//! The SQLite store (sqlx): one file in WAL mode, served by one process (`docs/design.md` §11).
//! Built so far: provisioning and change tracking (which `engine migrate` runs on a
//! `sqlite://` URL), the pull and the push; jobs, retention and stats on it come next, and
//! until they do the server does not open it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use engine_kernel::rules::Membership;
use engine_kernel::wire::{PullRequest, PushRequest};
use engine_kernel::{Actor, App};

pub use crate::sqlite::Durability;

use crate::core::{Shared, StoreLimits};
use crate::error::{Error, Result};
use crate::provision;
use crate::pull::{self, PullState, Pulled};
use crate::push::{self, Pushed};
use crate::sqlite::Db;

/// The SQLite database at `path`, created when missing: the storage of a server with no
/// database server.
pub fn sqlite(path: impl Into<PathBuf>) -> Sqlite {
    Sqlite { path: path.into(), durability: Durability::default() }
}

/// The path a `sqlite://` URL names (`sqlite://notes.db`, `sqlite:///var/lib/notes.db`,
/// `sqlite:notes.db`), or `None` when `url` is not one.
pub fn sqlite_path(url: &str) -> Option<PathBuf> {
    let rest = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:"))?;
    let path = rest.split('?').next().unwrap_or_default();
    (!path.is_empty()).then(|| PathBuf::from(path))
}

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
}

impl Sqlite {
    /// When a commit is on disk (default [`Durability::Full`]: before it is answered).
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
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
        let readers = u32::try_from(std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get))
            .unwrap_or(2)
            .clamp(2, 8);
        let db = Db::open(&self.path, self.durability, readers).await?;
        Ok(SqliteStorage { db: Arc::new(db), shared: Arc::new(Shared::new(app)), pulls: Arc::default() })
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

    /// Apply the request's mutations in order, each in its own transaction.
    pub async fn push(&self, actor: &Actor, request: &PushRequest) -> Result<Pushed> {
        push::sqlite::push(&self.db, &self.shared, actor, request).await
    }

    /// What provisioning would change in the file, as `+` lines; empty when it is current.
    pub async fn plan_changes(&self) -> Result<String> {
        provision::sqlite::changes(&mut *self.db.readers.acquire().await?, &self.shared.app).await
    }
}

#[cfg(test)]
mod tests;
