//! The engine Rust client: a durable local copy of the actor's buckets that takes writes offline
//! and converges when it reconnects. It speaks only the wire protocol (`docs/protocol.md`).
//!
//! - [`Client`] and [`ClientBuilder`] (`client`): the handle — mutate, pull, push, read
//!   [`Collection`]s and [`LiveQuery`]s, presence, status.
//! - `authorize`: the write rules evaluated offline, so a write the server would certainly
//!   refuse fails locally, in the server's words.
//! - `store`: the local SQLite store — the view the app reads, the confirmed base, the outbox,
//!   the quarantine; pull pages applied atomically, and the rebase of pending mutations.
//! - `state`: what the handle and the background tasks share.
//! - `sync`: pushing and pulling, classified by the protocol, and the background loops.
//! - `stream`: the reconnecting WebSocket that turns pings into pulls and keeps presence.
//! - `blobs`: files beside the rows — [`Client::put_blob`] offline with a durable upload queue,
//!   [`Client::blob`] from the store or by a download ticket, a [`BlobState`] per key to
//!   watch, and the bytes no row names any more pruned after a pull.
//! - [`auth`]: credentials ([`AuthProvider`], [`BearerToken`]).
//! - [`Settings`], [`Status`], [`PresenceEvent`], [`Error`].
//!
//! Writes: [`Client::mutate`] runs the same `#[engine::mutator]` function the server runs,
//! against the local view, and appends it to the outbox in one SQLite transaction. The view is
//! always the confirmed base with every pending mutation applied on top; after every pull page
//! the pending mutations run again on the new base (the rebase), so what the server decided —
//! a rejection, a lost merge, a no-op — shows. Ids a mutator takes from `ctx.new_id()` are the
//! same in the local run and the server's.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod auth;
mod authorize;
mod backoff;
mod blobs;
mod client;
mod error;
mod presence;
mod remote;
mod settings;
mod state;
mod status;
mod store;
mod stream;
mod sync;

pub use auth::{AuthProvider, BearerToken};
pub use client::{Client, ClientBuilder, Collection, LiveQuery, SyncedBucket};
/// The boxed future [`AuthProvider`]'s methods return.
pub use engine_kernel::BoxFuture;
/// Collaborative columns, to edit before a mutation carries the edit: `CrdtText::insert` and
/// `CrdtMap::insert` return the update ([`crdt::CrdtUpdate`]), which goes into the mutator's
/// arguments as it is; `merge` applies an update or a server state.
pub use engine_kernel::crdt;
pub use error::{BoxError, Error, Result};
pub use presence::{PresenceEvent, PresenceState};
pub use settings::{Reconnect, Settings, SyncScope};
pub use status::{PullProgress, Status};
pub use store::{BlobState, Quarantined, Queued, QueuedBlob, StoreLocation};

/// The WebSocket subprotocol the client asks for.
pub const STREAM_SUBPROTOCOL: &str = engine_kernel::wire::STREAM_SUBPROTOCOL;
