//! What a server holds for its lifetime, as the substates its routes and sockets take (axum's
//! `FromRef`): each handler gets only the part it uses. The builder (`server`) assembles it; the
//! routes (`http`) and the sockets (`stream`) read it.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::FromRef;

use crate::auth::EngineAuth;
use crate::contract::ServedContract;
use crate::housekeeping::{COLLECTION_INTERVAL, Collected, Retention};
use crate::jobs::JobWorker;
use crate::limits::{RateLimit, WorkLimit};
use crate::service::{BlobAccess, Operator, SyncService};
use crate::storage::Storage;
use crate::stream::StreamState;

/// The state of one server: what its routers hold, cloned into each.
#[derive(Clone)]
pub(crate) struct ServerState {
    pub(crate) sync: Arc<SyncService>,
    pub(crate) stream: Arc<StreamState>,
    pub(crate) gate: Arc<Gate>,
    pub(crate) operator: Arc<Operator>,
    pub(crate) blobs: Arc<BlobAccess>,
    pub(crate) contract: Arc<ServedContract>,
    /// Whether the router opens a span per request (`ServerBuilder::trace_requests`).
    pub(crate) trace_requests: bool,
    /// Background work that lives as long as the last router holding it.
    pub(crate) _lifetime: Arc<Lifetime>,
}

/// Who may call the engine's routes, and how much: what the `Caller` and `JsonBody` extractors
/// check before a handler runs.
pub(crate) struct Gate {
    pub(crate) auth: Arc<dyn EngineAuth>,
    pub(crate) rate_limit: Option<RateLimit>,
    /// The bound on each actor's requests in progress.
    pub(crate) work_limit: Option<WorkLimit>,
    pub(crate) body_limit: usize,
    /// How long a body may take to arrive.
    pub(crate) body_read_timeout: std::time::Duration,
    /// Connections from one address that may be open without having authenticated a request.
    pub(crate) unauthenticated_per_address: usize,
    /// How long a connection may stay open without authenticating a request.
    pub(crate) unauthenticated_deadline: std::time::Duration,
}

/// Background work (tombstone collection, limiter housekeeping, the hub) and the job worker,
/// stopped when the last router holding them is dropped.
pub(crate) struct Lifetime {
    pub(crate) _background: Background,
    /// The job worker, when the server runs jobs.
    pub(crate) _jobs: Option<JobWorker>,
}

macro_rules! substates {
    ($($field:ident: $type:ty),* $(,)?) => {$(
        impl FromRef<ServerState> for Arc<$type> {
            fn from_ref(state: &ServerState) -> Self {
                state.$field.clone()
            }
        }
    )*};
}

substates!(sync: SyncService, stream: StreamState, gate: Gate, operator: Operator, blobs: BlobAccess, contract: ServedContract);

/// Background work of a server, stopped when the last router holding it is dropped.
pub(crate) struct Background(Vec<tokio::task::AbortHandle>);

impl Background {
    /// Collect what `retention` no longer keeps every [`COLLECTION_INTERVAL`] (skipped while
    /// another instance collects), and let the rate limiter forget idle actors every minute.
    pub(crate) fn start(storage: Arc<dyn Storage>, rate_limit: Option<RateLimit>, retention: Retention) -> Self {
        let mut tasks = Vec::new();
        tasks.push(
            tokio::spawn(async move {
                let mut every = tokio::time::interval(COLLECTION_INTERVAL);
                loop {
                    every.tick().await;
                    match storage.collect_garbage(&retention).await {
                        Ok(c) if c.skipped => tracing::debug!("another instance is collecting"),
                        Ok(c) if c == Collected { steps: c.steps, ..Collected::default() } => {}
                        Ok(c) => tracing::info!(
                            tombstones = c.tombstones,
                            mutations = c.mutations,
                            clients = c.clients,
                            jobs = c.jobs,
                            bucket_sets = c.bucket_sets,
                            steps = c.steps,
                            "collected what the retention no longer keeps"
                        ),
                        Err(err) => tracing::warn!(error = ?crate::error::Chain(&err), "collection failed"),
                    }
                }
            })
            .abort_handle(),
        );
        if let Some(limit) = rate_limit {
            tasks.push(
                tokio::spawn(async move {
                    let mut every = tokio::time::interval(Duration::from_secs(60));
                    loop {
                        every.tick().await;
                        limit.housekeep();
                    }
                })
                .abort_handle(),
            );
        }
        Background(tasks)
    }

    /// Collect the blobs no row names any more every [`COLLECTION_INTERVAL`], `batch` at a time
    /// (`blob/collect.rs`).
    pub(crate) fn collect_blobs(blobs: Arc<BlobAccess>, batch: usize) -> tokio::task::AbortHandle {
        tokio::spawn(async move {
            // The first an interval after start, not at start: each of many instances started
            // together would look through every blob at once.
            let first = tokio::time::Instant::now() + COLLECTION_INTERVAL;
            let mut every = tokio::time::interval_at(first, COLLECTION_INTERVAL);
            loop {
                every.tick().await;
                match blobs.collect(batch).await {
                    Ok(c) if c.deleted + c.dropped + c.stored + c.noted == 0 => {}
                    Ok(c) => tracing::info!(
                        noted = c.noted,
                        deleted = c.deleted,
                        stored = c.stored,
                        dropped = c.dropped,
                        steps = c.steps,
                        "collected blobs no row names"
                    ),
                    Err(err) => tracing::warn!(error = ?crate::error::Chain(&err), "blob collection failed"),
                }
            }
        })
        .abort_handle()
    }

    /// Stop `task` with the rest.
    pub(crate) fn add(&mut self, task: tokio::task::AbortHandle) {
        self.0.push(task);
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}
