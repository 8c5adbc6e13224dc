//! Limits a user can rely on (`docs/design.md` §14), each configurable: the request body size, a
//! per-actor request rate (governor's token bucket, keyed by user id), and the limits of stream
//! connections ([`StreamLimits`]).

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};

use crate::error::Error;

/// The default body limit: 1 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;
/// The default sustained rate per actor: 50 requests a second.
pub const DEFAULT_RATE_PER_SECOND: u32 = 50;
/// The default burst per actor: 200 requests.
pub const DEFAULT_BURST: u32 = 200;

/// Request limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// The largest request body in bytes (413 beyond it).
    pub body_bytes: usize,
    /// Requests a second each actor may make on average; 0 turns the limit off.
    pub rate_per_second: u32,
    /// Requests an actor may make at once after being idle.
    pub burst: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { body_bytes: DEFAULT_BODY_LIMIT, rate_per_second: DEFAULT_RATE_PER_SECOND, burst: DEFAULT_BURST }
    }
}

impl Limits {
    /// These limits with a body limit of `bytes`.
    #[must_use]
    pub fn body_bytes(mut self, bytes: usize) -> Self {
        self.body_bytes = bytes;
        self
    }

    /// These limits with `per_second` requests a second per actor (0: off) and a burst of
    /// `burst`.
    #[must_use]
    pub fn rate(mut self, per_second: u32, burst: u32) -> Self {
        self.rate_per_second = per_second;
        self.burst = burst.max(1);
        self
    }
}

/// The per-actor limiter.
#[derive(Clone)]
pub(crate) struct RateLimit {
    limiter: Arc<DefaultKeyedRateLimiter<String>>,
}

impl RateLimit {
    pub(crate) fn new(limits: &Limits) -> Option<Self> {
        let rate = NonZeroU32::new(limits.rate_per_second)?;
        let burst = NonZeroU32::new(limits.burst.max(limits.rate_per_second)).unwrap_or(rate);
        let quota = Quota::per_second(rate).allow_burst(burst);
        Some(RateLimit { limiter: Arc::new(DefaultKeyedRateLimiter::keyed(quota)) })
    }

    /// Count a request of `actor`; refuse it when over the rate.
    pub(crate) fn check(&self, actor: &str) -> Result<(), Error> {
        self.limiter.check_key(&actor.to_owned()).map_err(|not_until| Error::RateLimited {
            retry_after: not_until.wait_time_from(DefaultClock::default().now()).max(Duration::from_millis(1)),
        })
    }

    /// Forget actors that have been idle long enough to be back at a full burst.
    pub(crate) fn housekeep(&self) {
        self.limiter.retain_recent();
        self.limiter.shrink_to_fit();
    }
}

/// Limits of stream connections (`docs/design.md` §8 and §14; how a connection over one is
/// closed: `docs/protocol.md#closing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct StreamLimits {
    /// The largest frame a client may send (1009 beyond it).
    pub max_frame_bytes: usize,
    /// Frames a second a socket may send on average (1008 beyond it).
    pub frames_per_second: u32,
    /// Frames a socket may send at once.
    pub frame_burst: u32,
    /// Sockets one actor may hold on one server instance.
    pub sockets_per_actor: usize,
    /// How long a socket without credentials has to send its `auth` frame.
    pub auth_deadline: Duration,
    /// The largest presence meta, serialized.
    pub max_meta_bytes: usize,
    /// How long pings of a socket are gathered before they are sent (one per bucket).
    pub ping_window: Duration,
}

impl Default for StreamLimits {
    fn default() -> Self {
        StreamLimits {
            max_frame_bytes: 64 * 1024,
            frames_per_second: 20,
            frame_burst: 50,
            sockets_per_actor: 16,
            auth_deadline: Duration::from_secs(5),
            max_meta_bytes: 1024,
            ping_window: Duration::from_millis(10),
        }
    }
}
