//! The client's settings, with the defaults of `docs/design.md` §14.

use std::time::Duration;

use crate::error::{Error, Result};

/// How the client syncs. Every field has a default ([`Settings::default`]); change them through
/// [`crate::ClientBuilder`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Settings {
    /// How often to pull when nothing else asks for it (the stream's pings are the fast path).
    pub pull_interval: Duration,
    /// Entries per pull page.
    pub pull_page: u32,
    /// Mutations per push request.
    pub push_batch: u32,
    /// How long rows of a bucket the actor no longer holds stay in the store.
    pub bucket_ttl: Duration,
    /// How often to tell the server this client's presence is alive.
    pub presence_heartbeat: Duration,
    /// Reconnection of the stream, and retries of pushes and pulls.
    pub reconnect: Reconnect,
    /// Whether to keep a realtime stream open (pings make pulls immediate).
    pub realtime: bool,
    /// Whether to sync in the background; without it, only explicit `pull`/`push` calls sync.
    pub background: bool,
    /// Which buckets the pulls bring and the stream follows.
    pub scope: SyncScope,
}

/// Which buckets a client syncs (`docs/design.md` §3, "Sync what is open").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SyncScope {
    /// Every bucket the actor holds, as memberships grant and revoke them (the default).
    #[default]
    Held,
    /// Every held bucket of the rules `always` (an index the app always shows), and the buckets
    /// the app has open ([`crate::Client::sync_bucket`]). A bucket released goes as a lost one
    /// does, after the bucket TTL.
    Open {
        /// The rules whose buckets are always synced.
        always: Vec<String>,
    },
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            pull_interval: Duration::from_secs(30),
            pull_page: 1_000,
            push_batch: 100,
            bucket_ttl: Duration::ZERO,
            presence_heartbeat: Duration::from_secs(15),
            reconnect: Reconnect::default(),
            realtime: true,
            background: true,
            scope: SyncScope::Held,
        }
    }
}

impl Settings {
    /// Refuse timings the client cannot run with.
    pub(crate) fn check(&self) -> Result<()> {
        let positive = [
            ("pull interval", self.pull_interval),
            ("presence heartbeat", self.presence_heartbeat),
            ("stream liveness check", self.reconnect.heartbeat),
            ("connect timeout", self.reconnect.connect_timeout),
            ("first backoff", self.reconnect.backoff_base),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, d)| d.is_zero()) {
            return Err(Error::config(format!("the {name} must be longer than zero")));
        }
        if self.reconnect.backoff_base > self.reconnect.backoff_max {
            return Err(Error::config(format!(
                "the backoff starts at {:?}, above its maximum {:?}",
                self.reconnect.backoff_base, self.reconnect.backoff_max
            )));
        }
        Ok(())
    }
}

/// Reconnection and retry timing.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Reconnect {
    /// The first wait after a failure.
    pub backoff_base: Duration,
    /// The longest wait.
    pub backoff_max: Duration,
    /// A connection that stays up this long resets the backoff.
    pub stable_after: Duration,
    /// How long opening the stream may take.
    pub connect_timeout: Duration,
    /// How often to check that an idle stream is alive.
    pub heartbeat: Duration,
}

impl Default for Reconnect {
    fn default() -> Self {
        Reconnect {
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(30),
            stable_after: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
            heartbeat: Duration::from_secs(25),
        }
    }
}

impl Reconnect {
    /// These settings with the backoff running from `base` to `max`.
    #[must_use]
    pub fn backoff(mut self, base: Duration, max: Duration) -> Self {
        self.backoff_base = base;
        self.backoff_max = max;
        self
    }

    /// These settings with a connection counted stable after `after`.
    #[must_use]
    pub fn stable_after(mut self, after: Duration) -> Self {
        self.stable_after = after;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timings_the_client_cannot_run_with_are_refused() {
        assert!(Settings::default().check().is_ok());
        let settings = Settings { presence_heartbeat: Duration::ZERO, ..Settings::default() };
        let err = settings.check().unwrap_err().to_string();
        assert!(err.contains("presence heartbeat"), "{err}");
        let settings = Settings {
            reconnect: Reconnect::default().backoff(Duration::from_secs(2), Duration::from_secs(1)),
            ..Settings::default()
        };
        assert!(matches!(settings.check(), Err(Error::Config { .. })));
    }
}
