//! The engine sync server. It takes an [`engine_kernel::App`] and serves the wire protocol
//! (`docs/protocol.md`) over HTTP and WebSocket, on Postgres.
//!
//! - [`Server`]: the builder, the mountable axum router, `listen`; [`tcp_nodelay`] for a host
//!   app that serves the router itself.
//! - [`storage`]: the [`storage::Storage`] trait and its Postgres backend: provisioning, change
//!   tracking, pull and push.
//! - [`auth`]: the [`auth::EngineAuth`] trait, JWT bearer tokens, and the
//!   [`Authenticated`] extractor for a host app's own routes.
//! - [`realtime`]: the [`realtime::Realtime`] trait that carries pings after commit and presence,
//!   in one process or across instances; `GET /sync/stream` serves them to clients.
//! - [`blob`]: the [`blob::BlobStore`] trait: files beside the rows, downloadable by who can
//!   read a row that refers to them.
//! - [`jobs`]: background jobs that mutations enqueue, and the workers that run them.
//! - [`limits`] and [`observer`]: request limits, and hooks for an app's own metrics; `metrics`:
//!   what the server measures, exported to Prometheus at `/engine/metrics` on request.
//! - [`error`]: the server's one error type and its problem-document responses; `deadline`:
//!   how long Postgres has to answer before a session is taken for lost.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod auth;
pub mod blob;
mod buckets;
mod contract;
mod cursor;
mod deadline;
pub mod error;
mod http;
mod hub;
pub mod jobs;
pub mod limits;
mod listener;
mod metrics;
pub mod observer;
pub mod realtime;
mod server;
mod state;
pub mod storage;
mod stream;

pub use auth::{Authenticated, BearerTokenAuth, EngineAuth, issue_bearer_token};
/// The boxed future [`EngineAuth`]'s methods return.
pub use engine_kernel::BoxFuture;
pub use error::{Error, Result};
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
