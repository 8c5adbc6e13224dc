//! The push lane (`docs/design.md` §5): sessions one push hands on to the next without giving
//! them back to the pool, whose check of each costs a round trip.
//!
//! A push that ends as it should leaves its session in the lane; one that failed gives it back to
//! the pool; one cut short closes it (`pg/deadline.rs`). The lane holds at most three quarters of
//! the pool and never all of it. A session kept longer than [`CHECK_AFTER_IDLE`] goes back once it
//! has answered a check of the lane's own, and is closed otherwise.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Once, PoisonError, Weak};
use std::time::{Duration, Instant};

use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, PgPool, Postgres};
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::error::Result;
use crate::pg::connect::CHECK_AFTER_IDLE;
use crate::pg::deadline::{Session, give_back_checked};

/// How long a push waits for a place in the lane before it borrows a session from the pool: a
/// place frees up as soon as a push ends (a fraction of a millisecond for most), and a session
/// kept in the lane saves the pool's check.
const PLACE_WAIT: Duration = Duration::from_millis(100);

/// How long a session that sat kept has to answer the check it gets before it goes back to the
/// pool; one that does not is closed.
const RETURN_CHECK: Duration = Duration::from_secs(5);

/// Sessions kept between pushes.
#[derive(Debug)]
pub(crate) struct Lane {
    pool: PgPool,
    /// One per session the lane lends (only a push that held one keeps its session, and a push
    /// that gets one takes a kept session first, so kept and lent sessions never outnumber
    /// them); none when the pool is too small to share.
    permits: Option<Semaphore>,
    /// Kept sessions, the longest kept first.
    kept: Mutex<VecDeque<Kept>>,
    /// Whether the task that tends the lane was started.
    tending: Once,
}

#[derive(Debug)]
struct Kept {
    conn: PoolConnection<Postgres>,
    /// When it was kept.
    since: Instant,
    /// When the lane took it from the pool.
    taken: Instant,
}

/// A session lent by the lane: [`Lent::keep`] hands it on, [`Lent::give_back`] gives it back to
/// the pool, and dropping it closes it.
pub(crate) struct Lent<'a> {
    lane: &'a Arc<Lane>,
    conn: Session,
    /// When the lane took the session from the pool.
    taken: Instant,
    /// The lane's place: none for a session borrowed from the pool when no place freed up,
    /// which goes back to the pool.
    permit: Option<SemaphorePermit<'a>>,
}

impl Lane {
    /// The lane of `pool`: three quarters of its sessions, and never all of them.
    pub(crate) fn new(pool: PgPool) -> Arc<Lane> {
        let max = usize::try_from(pool.options().get_max_connections()).unwrap_or(usize::MAX);
        let size = (max * 3 / 4).min(max.saturating_sub(1));
        let permits = (size > 0).then(|| Semaphore::new(size));
        Arc::new(Lane { pool, permits, kept: Mutex::new(VecDeque::new()), tending: Once::new() })
    }

    /// A session: the one the last push kept, or one from the pool (without a place in the lane
    /// when none frees up within [`PLACE_WAIT`]).
    pub(crate) async fn lend(self: &Arc<Self>) -> Result<Lent<'_>> {
        if self.pool.is_closed() {
            // Whatever became of the task that tends the lane, closing does not wait on it.
            self.empty();
        }
        let permit = match &self.permits {
            None => None,
            Some(permits) => match tokio::time::timeout(PLACE_WAIT, permits.acquire()).await {
                Ok(permit) => permit.ok(),
                // A session from the pool, unless a place frees up first (and with it, likely,
                // a kept session the pool does not have).
                Err(_) => {
                    let borrowed = self.pool.acquire();
                    tokio::pin!(borrowed);
                    tokio::select! {
                        conn = &mut borrowed => return Ok(Lent { lane: self, conn: Session::new(conn?), taken: Instant::now(), permit: None }),
                        permit = permits.acquire() => permit.ok(),
                    }
                }
            },
        };
        if permit.is_some() {
            let (newest, stale) = {
                let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
                (kept.pop_back(), Self::stale(&mut kept))
            };
            // Sessions idle too long to be lent unchecked go back to the pool, checked.
            Self::give_back(stale);
            if let Some(Kept { conn, since, taken }) = newest {
                if since.elapsed() <= CHECK_AFTER_IDLE {
                    return Ok(Lent { lane: self, conn: Session::new(conn), taken, permit });
                }
                Self::give_back(vec![Kept { conn, since, taken }]);
            }
        }
        let conn = self.pool.acquire().await?;
        Ok(Lent { lane: self, conn: Session::new(conn), taken: Instant::now(), permit })
    }

    /// Take out the sessions kept longer than [`CHECK_AFTER_IDLE`] (the oldest are first).
    fn stale(kept: &mut VecDeque<Kept>) -> Vec<Kept> {
        let fresh_from = kept.iter().position(|k| k.since.elapsed() <= CHECK_AFTER_IDLE).unwrap_or(kept.len());
        kept.drain(..fresh_from).collect()
    }

    /// Give `sessions` back to the pool, each once it answers a check within [`RETURN_CHECK`],
    /// and close those that do not.
    fn give_back(sessions: Vec<Kept>) {
        for Kept { conn, .. } in sessions {
            tokio::spawn(give_back_checked(conn, RETURN_CHECK));
        }
    }

    /// Give every kept session back to the pool (closed: the pool closes what it takes back).
    fn empty(&self) {
        let kept = std::mem::take(&mut *self.kept.lock().unwrap_or_else(PoisonError::into_inner));
        drop(kept);
    }

    /// Start, once, the task that tends the lane: it sends stale sessions back to the pool every
    /// [`CHECK_AFTER_IDLE`], and empties the lane when the pool is closed (closing waits for
    /// every session to come back). It ends with the lane.
    fn tend(self: &Arc<Self>) {
        self.tending.call_once(|| {
            let (mut closed, lane) = (self.pool.close_event(), Arc::downgrade(self));
            tokio::spawn(async move {
                loop {
                    let closing = tokio::select! {
                        () = &mut closed => true,
                        () = tokio::time::sleep(CHECK_AFTER_IDLE) => false,
                    };
                    let Some(lane) = Weak::upgrade(&lane) else { return };
                    if closing {
                        lane.empty();
                        return;
                    }
                    let stale = Self::stale(&mut lane.kept.lock().unwrap_or_else(PoisonError::into_inner));
                    Self::give_back(stale);
                }
            });
        });
    }

    /// How long the pool lets a session live.
    fn max_lifetime(&self) -> Duration {
        self.pool.options().get_max_lifetime().unwrap_or(Duration::MAX)
    }
}

impl Lent<'_> {
    /// Hand the session on to the next push: the push that used it ended every transaction it
    /// began and saw no failure of the session.
    pub(crate) fn keep(self) {
        let Lent { lane, conn, taken, permit } = self;
        let conn = conn.into_inner();
        if permit.is_none() || lane.pool.is_closed() || taken.elapsed() >= lane.max_lifetime() {
            // Back to the pool.
            return drop(conn);
        }
        lane.tend();
        let kept = Kept { conn, since: Instant::now(), taken };
        lane.kept.lock().unwrap_or_else(PoisonError::into_inner).push_back(kept);
        if lane.pool.is_closed() {
            // Closed while it was put away: the task may already have emptied the lane.
            lane.empty();
        }
    }

    /// Give the session back to the pool, which checks it: the push that used it saw a failure,
    /// but Postgres answered everything it sent.
    pub(crate) fn give_back(self) {
        drop(self.conn.into_inner());
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

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::Lane;
    use crate::pg::connect::CHECK_AFTER_IDLE;
    use crate::pg::test_db::TestDb;

    fn block_on<F: std::future::Future>(test: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(test)
    }

    /// A pool of four sessions: a lane of three.
    async fn lane(db: &TestDb) -> (sqlx::PgPool, std::sync::Arc<Lane>) {
        let pool = sqlx::postgres::PgPoolOptions::new().max_connections(4).connect(&db.url).await.unwrap();
        (pool.clone(), Lane::new(pool))
    }

    #[test]
    fn a_push_finding_every_place_taken_borrows_from_the_pool_and_gives_back() {
        block_on(async {
            let db = TestDb::new().await;
            let (pool, lane) = lane(&db).await;
            let mut lent = Vec::new();
            for _ in 0..4 {
                lent.push(lane.lend().await.unwrap());
            }
            assert_eq!(lent.iter().filter(|l| l.permit.is_some()).count(), 3, "three places, one borrowed");
            for l in lent {
                l.keep();
            }
            assert_eq!(lane.kept.lock().unwrap().len(), 3, "the borrowed session went back to the pool");
            while pool.num_idle() == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            pool.close().await;
            db.drop().await;
        });
    }

    #[test]
    fn sessions_kept_too_long_go_back_to_the_pool() {
        block_on(async {
            let db = TestDb::new().await;
            let (pool, lane) = lane(&db).await;
            let (a, b) = (lane.lend().await.unwrap(), lane.lend().await.unwrap());
            a.keep();
            b.keep();
            // The first kept grows stale: the next lend takes the fresh one and gives the stale
            // one back.
            lane.kept.lock().unwrap()[0].since = Instant::now() - CHECK_AFTER_IDLE * 2;
            let fresh = lane.lend().await.unwrap();
            assert!(lane.kept.lock().unwrap().is_empty());
            while pool.num_idle() == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            // And with nothing lent meanwhile, the lane's task gives it back within the period.
            fresh.keep();
            lane.kept.lock().unwrap()[0].since = Instant::now() - CHECK_AFTER_IDLE * 2;
            tokio::time::sleep(CHECK_AFTER_IDLE + Duration::from_millis(500)).await;
            assert!(lane.kept.lock().unwrap().is_empty(), "the lane's task gave the stale session back");
            pool.close().await;
            db.drop().await;
        });
    }
}
