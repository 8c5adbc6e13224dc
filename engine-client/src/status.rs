//! What the client is doing, for a UI: connectivity, syncing, what waits to be confirmed, what
//! the server rejected, how far a long pull has got, when the last pull finished, the last
//! error.

use std::time::SystemTime;

use crate::store::Quarantined;
pub use engine_kernel::wire::PullProgress;

/// A snapshot of the client's state ([`crate::Client::status`], [`crate::Client::status_stream`]).
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Status {
    /// Whether the realtime stream is connected.
    pub connected: bool,
    /// Whether realtime comes by long-poll (`GET /sync/poll`), since something between the
    /// client and the server refuses the WebSocket upgrade: pings still arrive, presence does
    /// not.
    pub long_poll: bool,
    /// Whether a pull or a push is running.
    pub syncing: bool,
    /// Mutations made locally that a pull has not yet shown applied.
    pub pending: u64,
    /// Mutations the server rejected, with its errors, until retried or discarded.
    pub quarantined: Vec<Quarantined>,
    /// How far a pull that takes several pages has got (a first sync, a bucket opened), as the
    /// server estimates it on each page; `None` once the pull ends.
    pub progress: Option<PullProgress>,
    /// When the last pull finished.
    pub last_pull_at: Option<SystemTime>,
    /// Whether the server refused this client's presence as too many (`too_many_presences`:
    /// the actor is present too often on one server, over all its connections): none is
    /// announced until the app tracks or untracks again.
    pub presence_refused: bool,
    /// The last failure of a pull, a push or the stream, with its causes (`what failed: why`),
    /// cleared by the next success.
    pub last_error: Option<String>,
}
