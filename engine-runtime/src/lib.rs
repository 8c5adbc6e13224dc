//! The engine sync server. It takes an [`engine_kernel::App`] and serves the wire protocol
//! (`docs/protocol.md`) over HTTP and WebSocket, on Postgres. The code is laid out by the flow a
//! request takes (`docs/design.md` §16).
//!
//! The public surface:
//! - [`Server`]: the builder, the mountable axum router, `listen`; [`tcp_nodelay`] for a host
//!   app that serves the router itself.
//! - [`storage`]: the [`storage::Storage`] trait and its Postgres backend.
//! - [`auth`]: the [`auth::EngineAuth`] trait, JWT bearer tokens, and the
//!   [`Authenticated`] extractor for a host app's own routes.
//! - [`realtime`]: the [`realtime::Realtime`] trait that carries pings after commit and presence,
//!   in one process or across instances; `GET /sync/stream` serves them to clients.
//! - [`blob`]: the [`blob::BlobStore`] trait: files beside the rows, downloadable by who can
//!   read a row that refers to them.
//! - [`jobs`]: background jobs that mutations enqueue, and the workers that run them.
//! - [`limits`] and [`observer`]: request limits, and hooks for an app's own metrics.
//! - [`error`]: the server's one error type and its problem-document responses.
//!
//! Inside, from the top layer down:
//! - `server`, `http`: the builder and the routes; `state`: the substates handlers take.
//! - `service`: what a pull, a push, a blob ticket and the operator's routes do.
//! - `stream`: the socket and the hub; `metrics`: what the server measures.
//! - `pull`, `push`, `provision`, `housekeeping`: the flows of the Postgres store, each with its
//!   own state and SQL, composed by `storage::postgres`; `mutation`: the mutator transaction.
//! - `core`: what every flow reads; `rules`: the sync rules in Rust and in SQL.
//! - `pg`, `sqlite`: Postgres and SQLite plumbing that knows no flow and no rule; `row_json`: a
//!   row's JSON object written from either's rows.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod auth;
pub mod blob;
mod contract;
mod core;
pub mod error;
mod housekeeping;
mod http;
pub mod jobs;
pub mod limits;
mod metrics;
mod mutation;
pub mod observer;
mod pg;
mod provision;
mod pull;
mod push;
pub mod realtime;
mod row_json;
mod rules;
mod server;
mod service;
mod sqlite;
mod state;
pub mod storage;
mod stream;

pub use auth::{Authenticated, BearerTokenAuth, EngineAuth, issue_bearer_token};
/// The boxed future [`EngineAuth`]'s methods return.
pub use engine_kernel::BoxFuture;
pub use error::{Error, Result};
pub use http::{Connection, Connections, Peer};
pub use jobs::{JobCtx, JobError, JobQueue, Jobs};
pub use limits::{Limits, StreamLimits};
pub use realtime::PresenceSettings;
pub use server::{
    DEFAULT_HORIZON_WARNING, DEFAULT_TOMBSTONE_RETENTION, Provisioning, Server, ServerBuilder, tcp_nodelay,
};
pub use storage::{COLLECTION_INTERVAL, Collected, HorizonBlocker, Retention, Storage, postgres, provision_plan};
pub use stream::SUBPROTOCOL;

/// The path of the public contract route.
pub const CONTRACT_PATH: &str = "/engine/contract";
