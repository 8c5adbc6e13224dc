//! Metrics: what a server measures, through the `metrics` facade, so that whatever recorder a
//! host app installs receives them; and, for a server built with
//! [`ServerBuilder::prometheus`](crate::ServerBuilder::prometheus), their Prometheus text
//! exposition at `GET /engine/metrics`, for admins as `/engine/stats` is.
//!
//! | name | kind | labels | what |
//! |---|---|---|---|
//! | `engine_pull_duration_seconds` | histogram | | a pull answered (its route, from the body read to the answer) |
//! | `engine_push_duration_seconds` | histogram | | a push answered |
//! | `engine_mutations_total` | counter | `status` (`applied`, `duplicate`, `rejected`) | mutations answered by pushes |
//! | `engine_rejections_total` | counter | `code` | rejected mutations, by their error code |
//! | `engine_request_errors_total` | counter | `route`, `code` | pulls and pushes answered with an error |
//! | `engine_pings_sent_total` | counter | | pings sent on sockets |
//! | `engine_sockets` | gauge | | open sockets of this instance |
//! | `engine_horizon_lag_seconds` | gauge | | how long the transaction holding the horizon back has run |
//! | `engine_pool_connections` | gauge | `state` (`in_use`, `idle`, `max`) | the database pool |
//! | `engine_jobs` | gauge | `state` (`queued`, `running`, `done`, `dead`) | background jobs |
//!
//! Gauges are read at each scrape. Labels never hold an actor or a value a client sent.

use std::sync::OnceLock;
use std::time::Duration;

use engine_kernel::ErrorCode;
use engine_kernel::wire::{MutationStatus, PushResponse};
use metrics::{Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::error::{Error, Result};
use crate::housekeeping::Gauges;

const PULL_SECONDS: &str = "engine_pull_duration_seconds";
const PUSH_SECONDS: &str = "engine_push_duration_seconds";
const MUTATIONS: &str = "engine_mutations_total";
const REJECTIONS: &str = "engine_rejections_total";
const REQUEST_ERRORS: &str = "engine_request_errors_total";
const PINGS: &str = "engine_pings_sent_total";
const SOCKETS: &str = "engine_sockets";
const HORIZON_LAG: &str = "engine_horizon_lag_seconds";
const POOL: &str = "engine_pool_connections";
const JOBS: &str = "engine_jobs";

/// The latency histograms' buckets, in seconds.
const LATENCY_BUCKETS: &[f64] = &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// The route a request error is counted under.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Route {
    Pull,
    Push,
}

impl Route {
    fn as_str(self) -> &'static str {
        match self {
            Route::Pull => "pull",
            Route::Push => "push",
        }
    }
}

/// A pull was answered after `elapsed`.
pub(crate) fn pulled(elapsed: Duration) {
    histogram!(PULL_SECONDS).record(elapsed);
}

/// A push was answered after `elapsed` with `response`.
pub(crate) fn pushed(elapsed: Duration, response: &PushResponse) {
    histogram!(PUSH_SECONDS).record(elapsed);
    for result in &response.results {
        let status = match result.status {
            MutationStatus::Applied => "applied",
            MutationStatus::Duplicate => "duplicate",
            MutationStatus::Rejected => "rejected",
        };
        counter!(MUTATIONS, "status" => status).increment(1);
        if let (MutationStatus::Rejected, Some(error)) = (result.status, &result.error) {
            counter!(REJECTIONS, "code" => error.code.as_str()).increment(1);
        }
    }
}

/// A pull or push was answered with an error.
pub(crate) fn request_failed(route: Route, code: ErrorCode) {
    counter!(REQUEST_ERRORS, "route" => route.as_str(), "code" => code.as_str()).increment(1);
}

/// `n` pings went out on a socket.
pub(crate) fn pings_sent(n: u64) {
    counter!(PINGS).increment(n);
}

/// The Prometheus exposition of the process: one recorder serves every server in it.
#[derive(Clone)]
pub(crate) struct Prometheus(PrometheusHandle);

impl std::fmt::Debug for Prometheus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Prometheus")
    }
}

impl Prometheus {
    /// The process's Prometheus recorder, installed at the first call; an error when another
    /// recorder was installed first (a host app's: it receives the engine's metrics itself).
    pub(crate) fn install() -> Result<Prometheus> {
        static INSTALLED: OnceLock<std::result::Result<PrometheusHandle, String>> = OnceLock::new();
        let installed = INSTALLED.get_or_init(|| {
            let handle = PrometheusBuilder::new()
                .set_buckets(LATENCY_BUCKETS)
                .and_then(PrometheusBuilder::install_recorder)
                .map_err(|e| e.to_string())?;
            describe();
            Ok(handle)
        });
        match installed {
            Ok(handle) => Ok(Prometheus(handle.clone())),
            Err(why) => Err(Error::config(format!(
                "the Prometheus exposition cannot be installed ({why}); an app with a metrics recorder of its own \
                 receives the engine's metrics there"
            ))),
        }
    }

    /// The text exposition, with the gauges read now.
    pub(crate) fn render(&self, gauges: &Gauges, sockets: usize) -> String {
        gauge!(SOCKETS).set(sockets as f64);
        gauge!(HORIZON_LAG).set(gauges.horizon_lag.as_secs_f64());
        let in_use = gauges.pool_size.saturating_sub(gauges.pool_idle);
        gauge!(POOL, "state" => "in_use").set(f64::from(in_use));
        gauge!(POOL, "state" => "idle").set(f64::from(gauges.pool_idle));
        gauge!(POOL, "state" => "max").set(f64::from(gauges.pool_max));
        let jobs = &gauges.jobs;
        for (state, n) in [("queued", jobs.queued), ("running", jobs.running), ("done", jobs.done), ("dead", jobs.dead)]
        {
            gauge!(JOBS, "state" => state).set(n as f64);
        }
        self.0.render()
    }
}

fn describe() {
    describe_histogram!(PULL_SECONDS, Unit::Seconds, "Pulls answered, by time to answer.");
    describe_histogram!(PUSH_SECONDS, Unit::Seconds, "Pushes answered, by time to answer.");
    describe_counter!(MUTATIONS, "Mutations answered by pushes, by status.");
    describe_counter!(REJECTIONS, "Rejected mutations, by error code.");
    describe_counter!(REQUEST_ERRORS, "Pulls and pushes answered with an error, by route and code.");
    describe_counter!(PINGS, "Pings sent on sockets.");
    describe_gauge!(SOCKETS, "Open sockets of this instance.");
    describe_gauge!(HORIZON_LAG, Unit::Seconds, "How long the transaction holding the horizon back has run.");
    describe_gauge!(POOL, "Database pool sessions, in use and idle, and the most it opens.");
    describe_gauge!(JOBS, "Background jobs, by state.");
}
