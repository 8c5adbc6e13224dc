//! What every flow of the Postgres store reads: the pool, the app and its compiled rules, the
//! server's clock, the store's bounds and the deadline on Postgres's answers. Each flow (`pull`,
//! `push`, `provision`, `housekeeping`, `jobs`) keeps its own state beside it, and
//! [`PostgresStorage`](crate::storage::PostgresStorage) composes them; no flow reads another's.
//!
//! - `clock.rs`: the server's hybrid logical clock, the one place its lock is taken.
//! - `limits.rs`: [`StoreLimits`], the bounds on what one actor's requests may ask.

mod clock;
mod limits;

use std::sync::Arc;
use std::time::Duration;

use engine_kernel::App;
use engine_kernel::rules::buckets::RuleIndex;
use sqlx::PgPool;

pub(crate) use clock::Clock;
pub use clock::MAX_CLOCK_LEAD_MS;
pub use limits::StoreLimits;

use crate::error::{Error, Result};
use crate::pg::deadline::{self, Lost, Session};
use crate::pg::timeouts;
use crate::rules::held::{self, MembershipQuery};

/// What the flows of one app's store share on any backend: the app, its compiled rules, the
/// server's clock and the store's bounds.
#[derive(Debug, Clone)]
pub(crate) struct Shared {
    pub(crate) app: Arc<App>,
    pub(crate) rules: RuleIndex,
    /// The membership queries of the app's rules, compiled once.
    pub(crate) memberships: Vec<MembershipQuery>,
    /// The server's clock, for mutations that arrive without one and for pulls' `serverHlc`.
    pub(crate) clock: Clock,
    /// The bounds on what one actor's requests may ask.
    pub(crate) limits: StoreLimits,
}

impl Shared {
    /// What `app`'s store shares, with the default bounds.
    pub(crate) fn new(app: Arc<App>) -> Self {
        Shared {
            rules: app.rule_index(),
            memberships: held::compile(&app),
            app,
            clock: Clock::new(),
            limits: StoreLimits::default(),
        }
    }
}

/// The state the flows of one app's Postgres store share: [`Shared`], the pool, and the
/// deadline on Postgres's answers.
#[derive(Debug, Clone)]
pub(crate) struct Core {
    pub(crate) pool: PgPool,
    shared: Shared,
    /// How long Postgres has to answer a piece of work before its session is taken for lost.
    pub(crate) lost_after: Duration,
}

impl std::ops::Deref for Core {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.shared
    }
}

impl std::ops::DerefMut for Core {
    fn deref_mut(&mut self) -> &mut Shared {
        &mut self.shared
    }
}

impl Core {
    /// The state of `app`'s store on `pool`, with the default bounds and deadline.
    pub(crate) fn new(pool: PgPool, app: Arc<App>) -> Self {
        Core { pool, shared: Shared::new(app), lost_after: timeouts::DEFAULT_LOST_AFTER }
    }

    /// Run one piece of work on a session of the pool, within [`Core::lost_after`]: the session
    /// goes back to the pool when Postgres answered, and is closed when it did not.
    pub(crate) async fn on_session<T, E: Into<Error>>(
        &self,
        work: impl AsyncFnOnce(&mut sqlx::PgConnection) -> std::result::Result<T, E>,
    ) -> Result<T> {
        Session::take(&self.pool).await?.run(self.lost_after, work).await
    }

    /// `work`, unless Postgres has not answered it within [`Core::lost_after`].
    pub(crate) async fn within<T>(&self, work: impl Future<Output = T>) -> std::result::Result<T, Lost> {
        deadline::within(self.lost_after, work).await
    }
}
