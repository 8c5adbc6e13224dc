//! The engine Rust client: a durable local copy of the actor's buckets that takes writes offline
//! and converges when it reconnects. It speaks only the wire protocol (PROTOCOL.md).
//!
//! This crate is filled by the client work; so far it holds the subprotocol it will speak.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

/// The WebSocket subprotocol the client asks for.
pub const STREAM_SUBPROTOCOL: &str = engine_kernel::wire::STREAM_SUBPROTOCOL;
