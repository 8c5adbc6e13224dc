//! What the server's requests do, transport aside: a handler or socket extracts its input, calls
//! a service and answers with what it returns. A service holds only the parts of the server it
//! uses, so a route takes only that substate (`crate::state`).
//!
//! - `sync.rs`: [`SyncService`], pull and push: the store, the observer and metrics, and the signals
//!   sent after a push commits.
//! - `blobs.rs`: [`BlobAccess`], the tickets to upload and download a blob.
//! - `operator.rs`: [`Operator`], `/engine/stats` and `/engine/metrics`, for admins.

mod blobs;
mod operator;
mod sync;

pub(crate) use blobs::BlobAccess;
pub(crate) use operator::{AdminCriterion, Operator};
pub(crate) use sync::{SyncService, publish_unsent};
