//! The timeouts every database session of the store runs under, so that no request, however
//! hostile, holds a session, a lock or an open transaction for long (`docs/design.md` §14):
//! `statement_timeout`, `lock_timeout` and `idle_in_transaction_session_timeout`. They are set
//! when a session starts (its startup options), for a pool the store opens and for one it is
//! given alike. A statement they stop fails as transient (57014, 55P03: `503 retry_later`); a
//! session they end is replaced by the pool.
//!
//! One more bound is the store's own: how long it waits for Postgres to answer before it takes
//! a session for lost ([`Timeouts::lost_after`], see `pg/deadline.rs`).

use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgConnectOptions;

/// The default `statement_timeout`: 30 s.
pub const DEFAULT_STATEMENT_TIMEOUT: Duration = Duration::from_secs(30);
/// The default `lock_timeout`: 10 s.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(10);
/// The default `idle_in_transaction_session_timeout`: 60 s.
pub const DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the store waits, by default, for Postgres to answer one piece of work before it
/// takes the session for lost: 45 s, past the default statement timeout.
pub const DEFAULT_LOST_AFTER: Duration = Duration::from_secs(45);

/// The timeouts of the store's sessions; a zero duration turns one off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Timeouts {
    /// The longest one statement may run.
    pub statement: Duration,
    /// The longest a statement may wait for a lock.
    pub lock: Duration,
    /// The longest a session may sit idle inside a transaction before Postgres ends it.
    pub idle_in_transaction: Duration,
    /// The longest the store waits for Postgres to answer one piece of work (a pull, one
    /// mutation of a push, a reading) before it takes the session for lost: the work fails as
    /// transient and the session is closed. It is never shorter than `statement` and 5 s more
    /// (a statement Postgres still lets run is not cut); it bounds the whole piece of work, so a
    /// mutation that always needs longer fails every time, as one whose statement always
    /// outlasts `statement` does.
    pub lost_after: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            statement: DEFAULT_STATEMENT_TIMEOUT,
            lock: DEFAULT_LOCK_TIMEOUT,
            idle_in_transaction: DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT,
            lost_after: DEFAULT_LOST_AFTER,
        }
    }
}

impl Timeouts {
    /// These timeouts with statements stopped after `timeout`.
    #[must_use]
    pub fn statement(mut self, timeout: Duration) -> Self {
        self.statement = timeout;
        self
    }

    /// These timeouts with lock waits stopped after `timeout`.
    #[must_use]
    pub fn lock(mut self, timeout: Duration) -> Self {
        self.lock = timeout;
        self
    }

    /// These timeouts with sessions idle in a transaction ended after `timeout`.
    #[must_use]
    pub fn idle_in_transaction(mut self, timeout: Duration) -> Self {
        self.idle_in_transaction = timeout;
        self
    }

    /// These timeouts with a session taken for lost when Postgres has not answered a piece of
    /// work after `timeout`.
    #[must_use]
    pub fn lost_after(mut self, timeout: Duration) -> Self {
        self.lost_after = timeout;
        self
    }

    /// How long the store waits for an answer: `lost_after`, and never less than the statement
    /// timeout and 5 s more (zero, no deadline, when `lost_after` is zero).
    pub(crate) fn answer_deadline(&self) -> Duration {
        if self.lost_after.is_zero() || self.statement.is_zero() {
            self.lost_after
        } else {
            self.lost_after.max(self.statement + Duration::from_secs(5))
        }
    }

    /// `options` with these timeouts among the session's startup options.
    pub(crate) fn apply(&self, options: PgConnectOptions) -> PgConnectOptions {
        options.options([
            ("statement_timeout", millis(self.statement)),
            ("lock_timeout", millis(self.lock)),
            ("idle_in_transaction_session_timeout", millis(self.idle_in_transaction)),
        ])
    }

    /// Make `pool`, which the store was given, open its sessions with these timeouts, and
    /// replace the sessions it holds idle now. A session busy elsewhere at this moment keeps the
    /// settings it was opened with until the pool retires it.
    pub(crate) async fn apply_to_pool(&self, pool: &PgPool) {
        pool.set_connect_options(self.apply((*pool.connect_options()).clone()));
        for _ in 0..pool.size() {
            let Some(idle) = pool.try_acquire() else { break };
            if let Err(err) = idle.close().await {
                tracing::debug!(error = ?crate::error::Chain(&err), "closing a session opened without the timeouts");
            }
        }
    }
}

/// A duration as Postgres reads a setting in milliseconds.
fn millis(duration: Duration) -> String {
    format!("{}ms", duration.as_millis())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Timeouts;

    /// The deadline for an answer is never shorter than the statement timeout and 5 s more, so
    /// a statement Postgres still lets run is not cut; zero turns it off.
    #[test]
    fn the_answer_deadline_outlasts_the_statement_timeout() {
        let secs = Duration::from_secs;
        assert_eq!(Timeouts::default().answer_deadline(), secs(45));
        assert_eq!(Timeouts::default().lost_after(secs(1)).answer_deadline(), secs(35));
        assert_eq!(Timeouts::default().statement(secs(60)).answer_deadline(), secs(65));
        assert_eq!(Timeouts::default().statement(Duration::ZERO).lost_after(secs(1)).answer_deadline(), secs(1));
        assert_eq!(Timeouts::default().lost_after(Duration::ZERO).answer_deadline(), Duration::ZERO);
    }
}
