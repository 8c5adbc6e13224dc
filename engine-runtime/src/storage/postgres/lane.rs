//! The push lane: sessions one push hands on to the next without giving them back to the pool.
//!
//! sqlx's pool checks every session given back to it with a round trip (a `Sync` and its
//! `ReadyForQuery`): a third of the round trips of a push that is otherwise a read and a write.
//! A push that ends as it should (every transaction it began committed or rolled back, no
//! statement cut short) leaves its session in the lane, where the next push takes it unchecked;
//! one that failed, or whose request was dropped mid-statement, gives its session back to the
//! pool, which checks it and drops it if it is broken.
//!
//! The lane holds at most three quarters of the pool (and never all of it), so the pool's other
//! users (pulls, jobs, collection, the app's own queries) always have sessions it does not hold.
//! A session kept longer than [`CHECK_AFTER_IDLE`] goes back to the pool to be checked there,
//! and the lane empties itself when the pool is closed.

use std::sync::{Arc, Mutex, Once, PoisonError, Weak};
use std::time::Instant;

use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, PgPool, Postgres};
use tokio::sync::{Semaphore, SemaphorePermit};

use super::CHECK_AFTER_IDLE;
use crate::error::Result;

/// Sessions kept between pushes.
#[derive(Debug)]
pub(crate) struct Lane {
    pool: PgPool,
    /// One per session the lane lends or keeps; none when the pool is too small to share.
    permits: Option<Semaphore>,
    kept: Mutex<Vec<Kept>>,
    /// Whether the task that empties the lane when the pool closes was started.
    watching: Once,
}

#[derive(Debug)]
struct Kept {
    conn: PoolConnection<Postgres>,
    since: Instant,
}

/// A session lent by the lane; [`Lent::keep`] hands it on, dropping it gives it back to the pool.
pub(crate) struct Lent<'a> {
    lane: &'a Arc<Lane>,
    conn: PoolConnection<Postgres>,
    permit: Option<SemaphorePermit<'a>>,
}

impl Lane {
    /// The lane of `pool`: three quarters of its sessions, and never all of them.
    pub(crate) fn new(pool: PgPool) -> Arc<Lane> {
        let max = usize::try_from(pool.options().get_max_connections()).unwrap_or(usize::MAX);
        let size = (max * 3 / 4).min(max.saturating_sub(1));
        let permits = (size > 0).then(|| Semaphore::new(size));
        Arc::new(Lane { pool, permits, kept: Mutex::new(Vec::new()), watching: Once::new() })
    }

    /// A session: one the last push kept, or one from the pool.
    pub(crate) async fn lend(self: &Arc<Self>) -> Result<Lent<'_>> {
        let permit = match &self.permits {
            Some(permits) => {
                Some(permits.acquire().await.map_err(|_| crate::error::Error::internal("the push lane closed"))?)
            }
            None => None,
        };
        while let Some(kept) = self.take() {
            if kept.since.elapsed() <= CHECK_AFTER_IDLE {
                return Ok(Lent { lane: self, conn: kept.conn, permit });
            }
            // Idle too long to be lent unchecked: the pool checks it as it takes it back.
            drop(kept);
        }
        let conn = self.pool.acquire().await?;
        Ok(Lent { lane: self, conn, permit })
    }

    fn take(&self) -> Option<Kept> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner).pop()
    }

    /// Give every kept session back to the pool.
    fn empty(&self) {
        let kept = std::mem::take(&mut *self.kept.lock().unwrap_or_else(PoisonError::into_inner));
        drop(kept);
    }

    /// Start, once, the task that empties the lane when the pool is closed (closing waits for
    /// every session to come back).
    fn watch_close(self: &Arc<Self>) {
        self.watching.call_once(|| {
            let (closed, lane) = (self.pool.close_event(), Arc::downgrade(self));
            tokio::spawn(async move {
                closed.await;
                if let Some(lane) = Weak::upgrade(&lane) {
                    lane.empty();
                }
            });
        });
    }
}

impl Lent<'_> {
    /// Hand the session on to the next push: the push that used it ended every transaction it
    /// began and saw no failure of the session.
    pub(crate) fn keep(self) {
        let Lent { lane, conn, permit } = self;
        if permit.is_none() || lane.pool.is_closed() {
            return;
        }
        lane.watch_close();
        lane.kept.lock().unwrap_or_else(PoisonError::into_inner).push(Kept { conn, since: Instant::now() });
        if lane.pool.is_closed() {
            // Closed while it was put away: the watch may already have run.
            lane.empty();
        }
    }
}

impl std::ops::Deref for Lent<'_> {
    type Target = PgConnection;
    fn deref(&self) -> &PgConnection {
        &self.conn
    }
}

impl std::ops::DerefMut for Lent<'_> {
    fn deref_mut(&mut self) -> &mut PgConnection {
        &mut self.conn
    }
}
