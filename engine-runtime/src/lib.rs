//! The engine sync server. It takes an [`engine_kernel::App`] and serves the wire protocol
//! (PROTOCOL.md) over HTTP and WebSocket, on Postgres.
//!
//! - [`storage`]: the [`storage::Storage`] trait and its Postgres backend:
//!   provisioning, change tracking, pull and push.
//! - [`error`]: the server's one error type and its problem-document responses.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod buckets;
mod cursor;
pub mod error;
pub mod storage;

pub use error::{Error, Result};
pub use storage::{Storage, postgres, provision_plan};
