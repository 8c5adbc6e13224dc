//! Realtime: hints that something changed, delivered after commit, and presence
//! (`docs/design.md` §8: realtime is a hint, pulls carry the data). One trait, one module per
//! backend.
//!
//! - [`in_process`](mod@in_process): one server process, the default.
//! - [`listen_notify`](mod@listen_notify): several server processes on one Postgres, through
//!   `LISTEN`/`NOTIFY`, with presence shared in the database.
//! - `nats` (feature `nats`): several server processes on any store, through a NATS
//!   server, with presence in a JetStream key-value bucket.
//! - `edge` (feature `edge`): one process as [`in_process`](mod@in_process), and every ping
//!   also relayed, signed, to an edge relay (`@engine/edge`) that holds clients' sockets
//!   elsewhere ([`Relay`]).

#[cfg(feature = "edge")]
pub mod edge;
pub mod in_process;
pub mod listen_notify;
#[cfg(feature = "nats")]
pub mod nats;
mod payload;

use std::collections::BTreeMap;
use std::time::Duration;

use engine_kernel::{BoxFuture, BucketKey};
use serde_json::{Map, Value};
use tokio::sync::broadcast;

#[cfg(feature = "edge")]
pub use edge::edge;
pub use in_process::in_process;
pub use listen_notify::listen_notify;
#[cfg(feature = "nats")]
pub use nats::nats;

use crate::error::Result;

/// Who is present in a bucket: presence key (the user id) → one meta per connection, each with
/// its `presenceRef`.
pub type PresenceState = BTreeMap<String, Vec<Map<String, Value>>>;

/// What travels between the commit chokepoint, presence, and connected clients (across server
/// instances, for adapters that span several).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Signal {
    /// Rows of the bucket changed, in transaction `xid` (0 when unknown): its subscribers should
    /// pull once pulls can see it.
    Ping {
        /// The bucket.
        bucket: BucketKey,
        /// The committing transaction.
        xid: u64,
    },
    /// Membership rows of holders of this claim value (`user_id=carol`; `*` for anyone) changed:
    /// their bucket sets may have changed.
    Membership(String),
    /// Presence in a bucket changed.
    Presence {
        /// The bucket.
        bucket: BucketKey,
        /// Metas that joined.
        joins: PresenceState,
        /// Metas that left.
        leaves: PresenceState,
    },
    /// Signals may have been lost (a reconnection, a slow subscriber): everyone should pull and
    /// refresh presence.
    Resync,
}

/// One connection's presence in one bucket.
#[derive(Debug, Clone, PartialEq)]
pub struct Presence {
    /// The bucket.
    pub bucket: BucketKey,
    /// The presence key: the user id.
    pub key: String,
    /// The server-minted reference of this meta.
    pub presence_ref: String,
    /// What the connection shows others (with `presenceRef` set).
    pub meta: Map<String, Value>,
}

/// Presence settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PresenceSettings {
    /// A connection silent for this long leaves every bucket it was present in. After a third of
    /// it in silence, the server sends the connection a WebSocket ping, which a live client's
    /// WebSocket answers: a short timeout asks no faster heartbeat of clients.
    pub heartbeat_timeout: Duration,
}

impl Default for PresenceSettings {
    fn default() -> Self {
        PresenceSettings { heartbeat_timeout: Duration::from_secs(30) }
    }
}

/// Carries signals from the commit chokepoint to every subscriber, and keeps presence.
pub trait Realtime: Send + Sync + 'static {
    /// Publish a signal; pings are published only after the transaction that caused them
    /// committed.
    fn publish(&self, signal: Signal) -> BoxFuture<'_, Result<()>>;
    /// Receive every signal published from now on, by any instance.
    fn subscribe(&self) -> broadcast::Receiver<Signal>;
    /// Announce a presence (and publish its join).
    fn track(&self, presence: Presence) -> BoxFuture<'_, Result<()>>;
    /// Withdraw a presence (and publish its leave).
    fn untrack<'a>(&'a self, bucket: &'a BucketKey, presence_ref: &'a str) -> BoxFuture<'a, Result<()>>;
    /// Everyone present in each of `buckets`.
    fn presence_state<'a>(
        &'a self,
        buckets: &'a [BucketKey],
    ) -> BoxFuture<'a, Result<BTreeMap<BucketKey, PresenceState>>>;
    /// Where pings go beyond this process's sockets, for an adapter that relays them.
    fn relay(&self) -> Option<&dyn Relay> {
        None
    }
}

/// Passes pings on to clients connected to something other than a server instance (an edge
/// relay), and vouches for those clients' buckets with tickets the relay checks.
pub trait Relay: Send + Sync {
    /// Pings of `buckets`, released by the hub: the pull horizon has passed their transactions.
    /// Returns at once; a ping that cannot be passed on is lost (pings are hints).
    fn send(&self, buckets: Vec<BucketKey>);
    /// Tickets for `buckets`, the buckets an actor holds now.
    fn tickets(&self, buckets: &std::collections::BTreeSet<BucketKey>) -> engine_kernel::wire::EdgeTickets;
}

/// Opens a realtime adapter: what `Server::builder().realtime(…)` takes.
pub trait OpenRealtime: Send + 'static {
    /// Start the adapter; presences of an instance silent for `heartbeat_timeout` leave.
    fn open(self: Box<Self>, heartbeat_timeout: Duration) -> BoxFuture<'static, Result<std::sync::Arc<dyn Realtime>>>;
    /// What the adapter needs of the store, when it is not any store: `listen_notify` carries
    /// its messages through Postgres, so a server whose store is not Postgres refuses it.
    fn needs(&self) -> Option<&'static str> {
        None
    }
}

/// `state` with one more meta.
pub(crate) fn add_meta(state: &mut PresenceState, key: &str, meta: Map<String, Value>) {
    state.entry(key.to_owned()).or_default().push(meta);
}
