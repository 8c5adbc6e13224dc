//! A session that `LISTEN`s on one channel for as long as the server runs, and notices when it
//! has gone deaf.
//!
//! A listening session only reads, so a connection cut without a close (see `deadline.rs`)
//! would leave it waiting for notifications that never come, and nothing would tell. So when it
//! has heard nothing for a while it asks Postgres a question; unanswered within the same time,
//! the session is given up and a new one listens in its place, and the owner is told that
//! notifications may have been missed. Each session has a one-session pool of its own, made
//! afresh: the driver's own clean-up of a dropped listener waits on its session, and would hold
//! a shared pool's place for as long.

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};

use crate::error::Result;
use crate::pg::deadline::within;

/// What the owner of a listening session hears.
pub(crate) enum Heard<'a> {
    /// A notification's payload.
    Notification(&'a str),
    /// Notifications may have been missed: the session was lost, and another listens now.
    Missed,
}

/// Listen on `channel` of the Postgres at `options` until the returned task is aborted, passing
/// what is heard to `hear`. The session is checked after `quiet` without a notification, and
/// given up when the check is not answered within `quiet` (never checked when `quiet` is zero).
pub(crate) async fn listen(
    options: PgConnectOptions,
    channel: &'static str,
    quiet: Duration,
    mut hear: impl FnMut(Heard<'_>) + Send + 'static,
) -> Result<tokio::task::AbortHandle> {
    let mut listener = session(&options, channel).await?;
    Ok(tokio::spawn(async move {
        loop {
            let received = match within(quiet, listener.try_recv()).await {
                Ok(received) => received,
                // Quiet for a while: make sure the session still answers.
                Err(_) => match within(quiet, sqlx::query("SELECT 1").execute(&mut listener)).await {
                    Ok(Ok(_)) => continue,
                    _ => {
                        tracing::warn!(channel, "a listening session stopped answering");
                        Ok(None)
                    }
                },
            };
            match received {
                Ok(Some(notification)) => hear(Heard::Notification(notification.payload())),
                // The session was lost: another listens in its place, and what came meanwhile
                // is gone.
                Ok(None) | Err(_) => {
                    if let Err(err) = received {
                        tracing::warn!(channel, error = ?crate::error::Chain(&err), "a listening session failed");
                    }
                    listener = again(&options, channel, quiet).await;
                    hear(Heard::Missed);
                }
            }
        }
    })
    .abort_handle())
}

/// A new session listening on `channel`, once one answers: Postgres has `quiet` (when not zero)
/// to answer each try, and tries are spaced by a backoff from 100 ms to 5 s.
async fn again(options: &PgConnectOptions, channel: &'static str, quiet: Duration) -> PgListener {
    let mut backoff = Duration::from_millis(100);
    loop {
        match within(quiet, session(options, channel)).await {
            Ok(Ok(listener)) => {
                tracing::info!(channel, "listening on a new session");
                return listener;
            }
            Ok(Err(err)) => {
                tracing::warn!(channel, error = ?crate::error::Chain(&err), "listening again failed; retrying")
            }
            Err(_) => tracing::warn!(channel, "listening again was not answered; retrying"),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// A new session listening on `channel`, on a pool of its own. The driver does not connect
/// again by itself when the session is lost (that would happen inside a read the quiet check
/// may cut short): the caller makes a new one, and knows notifications may have been missed.
async fn session(options: &PgConnectOptions, channel: &str) -> Result<PgListener> {
    let pool = PgPoolOptions::new().max_connections(1).connect_lazy_with(options.clone());
    let mut listener = PgListener::connect_with(&pool).await?;
    listener.eager_reconnect(false);
    listener.listen(channel).await?;
    Ok(listener)
}
