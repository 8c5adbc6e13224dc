//! Realtime: hints that something changed, delivered after commit (DESIGN.md decision 8: realtime
//! is a hint, pull is the truth). One trait, one module per backend.
//!
//! - [`in_process`](mod@in_process): one server process.

pub mod in_process;

use engine_kernel::{BoxFuture, BucketKey};
use tokio::sync::broadcast;

pub use in_process::in_process;

use crate::error::Result;

/// What travels between the commit chokepoint and connected clients (across server instances,
/// for adapters that span several).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Signal {
    /// Rows of the bucket changed: its subscribers should pull.
    Ping(BucketKey),
    /// Membership rows of holders of this claim value (`user_id=carol`) changed: their bucket
    /// sets may have changed.
    Membership(String),
}

/// Carries signals from the commit chokepoint to every subscriber.
pub trait Realtime: Send + Sync + 'static {
    /// Publish a signal; called only after the transaction that caused it committed.
    fn publish(&self, signal: Signal) -> BoxFuture<'_, Result<()>>;
    /// Receive every signal published from now on.
    fn subscribe(&self) -> broadcast::Receiver<Signal>;
}
