//! The engine sync server. It takes an [`engine_kernel::App`] and serves the wire protocol
//! (PROTOCOL.md) over HTTP and WebSocket, on Postgres.
//!
//! This crate is filled by the storage, push, server and realtime work; so far it holds the
//! name of the contract route every server serves.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

/// The path of the public contract route.
pub const CONTRACT_PATH: &str = "/engine/contract";
