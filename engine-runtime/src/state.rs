//! What a server holds for its lifetime, shared by every route and socket: the store, the hub,
//! auth, realtime, limits, the served contract, and the background work that lives as long as
//! a router does. The builder (`server`) assembles it; the routes (`http`) and the sockets
//! (`stream`) read it.

use std::sync::Arc;
use std::time::Duration;

use engine_kernel::Actor;

use crate::auth::EngineAuth;
use crate::blob::Blobs;
use crate::contract::ServedContract;
use crate::hub::Hub;
use crate::jobs::JobWorker;
use crate::limits::{RateLimit, StreamLimits, WorkLimit};
use crate::metrics::Prometheus;
use crate::observer::Observer;
use crate::realtime::{PresenceSettings, Realtime};
use crate::storage::{Collected, Retention, Storage};

/// Decides whether an actor may read `/engine/stats`.
pub(crate) type AdminCriterion = Arc<dyn Fn(&Actor) -> bool + Send + Sync>;

/// The state of one server, behind an `Arc` as the routers' state.
pub(crate) struct ServerState {
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) hub: Arc<Hub>,
    pub(crate) stream_limits: StreamLimits,
    pub(crate) presence: PresenceSettings,
    pub(crate) auth: Arc<dyn EngineAuth>,
    pub(crate) realtime: Arc<dyn Realtime>,
    pub(crate) observer: Arc<dyn Observer>,
    pub(crate) rate_limit: Option<RateLimit>,
    /// The bound on each actor's requests in progress.
    pub(crate) work_limit: Option<WorkLimit>,
    pub(crate) body_limit: usize,
    pub(crate) admin: AdminCriterion,
    pub(crate) contract: ServedContract,
    /// Whether the router opens a span per request (`ServerBuilder::trace_requests`).
    pub(crate) trace_requests: bool,
    /// The Prometheus exposition, when the server serves `/engine/metrics`.
    pub(crate) prometheus: Option<Prometheus>,
    /// The blob store, when the server has one.
    pub(crate) blobs: Option<Blobs>,
    /// Set once the server is shutting down: sockets close with 1012 and new ones are refused.
    pub(crate) draining: tokio::sync::watch::Sender<bool>,
    /// Background work (tombstone collection, limiter housekeeping, the hub) that lives as long
    /// as the router does.
    pub(crate) _background: Background,
    /// The job worker, when the server runs jobs: dropped with the last router.
    pub(crate) _jobs: Option<JobWorker>,
}

/// Background work of a server, stopped when the last router holding it is dropped.
pub(crate) struct Background(Vec<tokio::task::AbortHandle>);

impl Background {
    /// Collect what `retention` no longer keeps every [`COLLECTION_INTERVAL`] (skipped while
    /// another instance collects), and let the rate limiter forget idle actors every minute.
    ///
    /// [`COLLECTION_INTERVAL`]: crate::storage::COLLECTION_INTERVAL
    pub(crate) fn start(storage: Arc<dyn Storage>, rate_limit: Option<RateLimit>, retention: Retention) -> Self {
        let mut tasks = Vec::new();
        tasks.push(
            tokio::spawn(async move {
                let mut every = tokio::time::interval(crate::storage::COLLECTION_INTERVAL);
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
                        Err(err) => tracing::warn!(error = %err, "collection failed"),
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
