//! The deadline on Postgres's answers (`docs/design.md` §6), and sessions closed rather than
//! given back when their work is cut short.
//!
//! A session whose peer vanished without closing it never hears an answer again, and the driver
//! does not notice. So every piece of work on a pooled session has a deadline: past it the work
//! fails as transient ([`Error::Unanswered`]), and its [`Session`] is closed instead of given
//! back. A session that sat idle outside the pool answers a check of its own before it goes back
//! ([`give_back_checked`]).

use std::time::Duration;

use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, PgPool, Postgres};

use crate::error::{Error, Result};

/// A session of the pool for one piece of work: [`Session::run`] gives it back when the work was
/// answered (successfully or not); dropped otherwise, it is closed.
#[derive(Debug)]
pub(crate) struct Session {
    conn: Option<PoolConnection<Postgres>>,
}

/// Work that Postgres did not answer within the deadline.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lost(Duration);

impl From<Lost> for Error {
    fn from(Lost(waited): Lost) -> Error {
        Error::Unanswered { waited }
    }
}

impl Session {
    pub(crate) fn new(conn: PoolConnection<Postgres>) -> Session {
        Session { conn: Some(conn) }
    }

    /// A session of `pool`.
    pub(crate) async fn take(pool: &PgPool) -> Result<Session> {
        Ok(Session::new(pool.acquire().await?))
    }

    /// The session, to be given back to the pool by whoever takes it (the push lane keeping it).
    pub(crate) fn into_inner(mut self) -> PoolConnection<Postgres> {
        self.conn.take().expect("a session holds its connection until it ends")
    }

    /// Run `work` on this session within `deadline`: answered (successfully or not), the session
    /// goes back to the pool and the work's result is returned; not answered, it is closed.
    pub(crate) async fn run<T, E: Into<Error>>(
        mut self,
        deadline: Duration,
        work: impl AsyncFnOnce(&mut PgConnection) -> std::result::Result<T, E>,
    ) -> Result<T> {
        let answered = within(deadline, work(&mut self)).await?;
        drop(self.into_inner());
        answered.map_err(Into::into)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(mut conn) = self.conn.take() {
            // The pool's check would wait for the answer to whatever was cut short; closing
            // gives up after a few seconds and frees the pool's place either way.
            conn.close_on_drop();
        }
    }
}

impl std::ops::Deref for Session {
    type Target = PgConnection;
    fn deref(&self) -> &PgConnection {
        self.conn.as_ref().expect("a session holds its connection until it ends")
    }
}

impl std::ops::DerefMut for Session {
    fn deref_mut(&mut self) -> &mut PgConnection {
        self.conn.as_mut().expect("a session holds its connection until it ends")
    }
}

/// `work`, unless Postgres has not answered it within `deadline` (never, when zero).
pub(crate) async fn within<T>(deadline: Duration, work: impl Future<Output = T>) -> std::result::Result<T, Lost> {
    if deadline.is_zero() {
        return Ok(work.await);
    }
    tokio::time::timeout(deadline, work).await.map_err(|_| Lost(deadline))
}

/// Whether `conn` answers a check (a round trip) within `deadline`: the check the pools make of a
/// session before they lend it, within a part of the deadline of the work waiting for it, so that
/// a session cut while idle is closed (and a new one opened) rather than holding that work for
/// the whole of it.
pub(crate) async fn answers(conn: &mut PgConnection, deadline: Duration) -> bool {
    matches!(within(deadline, sqlx::Connection::ping(conn)).await, Ok(Ok(())))
}

/// Give `conn` back to the pool if it answers a check within `deadline`, and close it otherwise:
/// for a session that sat idle outside the pool, whose peer may be gone.
pub(crate) async fn give_back_checked(conn: PoolConnection<Postgres>, deadline: Duration) {
    let mut session = Session::new(conn);
    if answers(&mut session, deadline).await {
        drop(session.into_inner());
    }
}

/// Run `work` on a session of `pool`: the pool's lending (whose check of the session waits on
/// Postgres too) and the answer together have `deadline`. A session that did not answer is
/// closed.
pub(crate) async fn on_pool<T, E: Into<Error>>(
    pool: &PgPool,
    deadline: Duration,
    work: impl AsyncFnOnce(&mut PgConnection) -> std::result::Result<T, E>,
) -> Result<T> {
    // The deadline is the outer one: the session runs the work without one of its own.
    within(deadline, async { Session::take(pool).await?.run(Duration::ZERO, work).await }).await?
}
