//! Background jobs (`docs/design.md` §12): durable tasks that a mutator enqueues in its own
//! transaction ([`MutatorCtx::enqueue`](engine_kernel::MutatorCtx::enqueue)) or the app enqueues
//! directly ([`JobQueue::enqueue_job`]), run by workers after the commit.
//!
//! - A job is enqueued exactly when the mutation commits: a rejected or failed mutation enqueues
//!   nothing, and a replayed one (a lost push response) does not enqueue again.
//! - A job runs at least once. A worker leases the jobs it claims; a worker that dies leaves its
//!   lease to run out and another worker takes the job again. Handlers that touch the outside
//!   world should be idempotent (the job's [`JobCtx::id`] makes a good idempotency key).
//! - A failed run is retried with exponential backoff until the job has had
//!   [`Jobs::max_attempts`] runs; then it is `dead`, kept with its last error for an operator.
//!   A handler can also fail a job for good ([`JobError::permanent`]).
//! - Workers of several processes share one queue (`FOR UPDATE SKIP LOCKED`); a worker takes
//!   only the jobs it has handlers for, and hears of new ones at once (LISTEN/NOTIFY on
//!   Postgres), polling besides for delayed ones.
//!
//! [`Jobs`] is the registry of handlers and settings: give it to the server
//! (`Server::builder().jobs(…)`), or start a worker of its own in another process with
//! [`Jobs::start`].

pub(crate) mod queue;
mod worker;

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use engine_kernel::{BoxFuture, JobRequest};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{Error, Result};

pub use worker::JobWorker;

/// A queue of jobs: one implementation per store, because a mutation's jobs go in the
/// mutation's own transaction.
pub trait JobQueue: Send + Sync + 'static {
    /// Enqueue a job outside any mutation; returns its id.
    fn enqueue_job(&self, job: JobRequest) -> BoxFuture<'_, Result<i64>>;
    /// Lease up to `limit` due jobs named in `names` for `lease`: queued jobs whose time has
    /// come, and running jobs whose lease ran out. Each claim counts as an attempt.
    fn claim_jobs<'a>(
        &'a self,
        names: &'a [String],
        limit: usize,
        lease: Duration,
    ) -> BoxFuture<'a, Result<Vec<ClaimedJob>>>;
    /// Record how a claimed job's run ended. Returns `false` when the lease was lost (another
    /// worker took the job again), and nothing is recorded.
    fn finish_job<'a>(&'a self, job: &'a ClaimedJob, end: JobEnd) -> BoxFuture<'a, Result<bool>>;
    /// A signal that jobs may have been enqueued: one message per wake-up, coalesced. The
    /// store stops signalling when the receiver is dropped.
    fn job_wakeups(&self) -> BoxFuture<'_, Result<tokio::sync::mpsc::Receiver<()>>>;
    /// How many jobs are in each state.
    fn job_counts(&self) -> BoxFuture<'_, Result<JobCounts>>;
}

/// A job a worker leased.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ClaimedJob {
    /// The job's id, unique in its store.
    pub id: i64,
    /// The job's name.
    pub name: String,
    /// The job's payload.
    pub payload: Value,
    /// Which run this is: 1 for the first.
    pub attempt: u32,
    /// The user whose mutation enqueued the job, if a mutation did.
    pub user_id: Option<String>,
}

/// How a job's run ended, as recorded by [`JobQueue::finish_job`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum JobEnd {
    /// It succeeded: the job is `done`.
    Done,
    /// It failed and runs again after `after`.
    Retry {
        /// How long until the next run.
        after: Duration,
        /// Why the run failed.
        error: String,
    },
    /// It failed for good: the job is `dead`.
    Dead {
        /// Why.
        error: String,
    },
}

/// How many jobs are in each state, for `/engine/stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct JobCounts {
    /// Waiting to run (also those waiting for a retry).
    pub queued: u64,
    /// Leased by a worker.
    pub running: u64,
    /// Succeeded (kept as long as tombstones are).
    pub done: u64,
    /// Failed for good.
    pub dead: u64,
}

/// What a handler is told about the job it runs.
#[derive(Debug, Clone)]
pub struct JobCtx {
    job: Arc<ClaimedJob>,
}

impl JobCtx {
    /// The job's id: unique in its store, the same on every run of the job, so a good
    /// idempotency key for the outside world.
    pub fn id(&self) -> i64 {
        self.job.id
    }

    /// The job's name.
    pub fn name(&self) -> &str {
        &self.job.name
    }

    /// Which run this is: 1 for the first.
    pub fn attempt(&self) -> u32 {
        self.job.attempt
    }

    /// The user whose mutation enqueued the job, if a mutation did.
    pub fn user_id(&self) -> Option<&str> {
        self.job.user_id.as_deref()
    }
}

/// Why a job's run failed. Any error converts into one that retries (`?` works in handlers);
/// [`JobError::permanent`] fails the job for good.
pub struct JobError {
    message: String,
    permanent: bool,
}

impl JobError {
    /// A failure worth retrying.
    pub fn retry(message: impl fmt::Display) -> Self {
        JobError { message: message.to_string(), permanent: false }
    }

    /// A failure no retry will mend: the job is `dead` at once.
    pub fn permanent(message: impl fmt::Display) -> Self {
        JobError { message: message.to_string(), permanent: true }
    }

    /// Whether the job is failed for good.
    pub fn is_permanent(&self) -> bool {
        self.permanent
    }
}

impl fmt::Debug for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobError").field("message", &self.message).field("permanent", &self.permanent).finish()
    }
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for JobError {
    fn from(err: E) -> Self {
        JobError::retry(err)
    }
}

type Handler = Arc<dyn Fn(JobCtx, Value) -> BoxFuture<'static, std::result::Result<(), JobError>> + Send + Sync>;

/// The job handlers of an app and how its workers run them.
///
/// ```
/// use engine_runtime::jobs::{JobCtx, JobError, Jobs};
///
/// #[derive(serde::Deserialize)]
/// struct Welcome { user_id: String }
///
/// let jobs = Jobs::new()
///     .job("send_welcome", |ctx: JobCtx, welcome: Welcome| async move {
///         println!("job {} (run {}): welcome {}", ctx.id(), ctx.attempt(), welcome.user_id);
///         Ok::<_, JobError>(())
///     })
///     .concurrency(8);
/// assert_eq!(jobs.names(), ["send_welcome"]);
/// ```
#[derive(Clone)]
#[must_use]
pub struct Jobs {
    handlers: BTreeMap<String, Handler>,
    settings: Settings,
}

#[derive(Debug, Clone, Copy)]
struct Settings {
    concurrency: usize,
    max_attempts: u32,
    timeout: Duration,
    retry_base: Duration,
    retry_max: Duration,
    poll_interval: Duration,
}

impl Default for Jobs {
    fn default() -> Self {
        Jobs::new()
    }
}

impl fmt::Debug for Jobs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Jobs").field("names", &self.names()).field("settings", &self.settings).finish()
    }
}

impl Jobs {
    /// No handlers; 4 jobs at once, 10 attempts, a 5 minute timeout, retries after 1 s doubling
    /// to at most 1 h, a poll every second.
    pub fn new() -> Self {
        Jobs {
            handlers: BTreeMap::new(),
            settings: Settings {
                concurrency: 4,
                max_attempts: 10,
                timeout: Duration::from_secs(300),
                retry_base: Duration::from_secs(1),
                retry_max: Duration::from_secs(3600),
                poll_interval: Duration::from_secs(1),
            },
        }
    }

    /// Run jobs named `name` with `handler`, given the job's context and its payload as `P`. A
    /// payload that is not a `P` fails the job for good.
    pub fn job<P, F, Fut>(mut self, name: impl Into<String>, handler: F) -> Self
    where
        P: DeserializeOwned + Send + 'static,
        F: Fn(JobCtx, P) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), JobError>> + Send + 'static,
    {
        let handler = Arc::new(handler);
        let erased: Handler = Arc::new(move |ctx: JobCtx, payload: Value| {
            let handler = Arc::clone(&handler);
            Box::pin(async move {
                let payload: P = serde_json::from_value(payload)
                    .map_err(|e| JobError::permanent(format!("the payload does not fit the job: {e}")))?;
                handler(ctx, payload).await
            })
        });
        self.handlers.insert(name.into(), erased);
        self
    }

    /// The names of the jobs handled, in order.
    pub fn names(&self) -> Vec<&str> {
        self.handlers.keys().map(String::as_str).collect()
    }

    /// How many jobs a worker runs at once (default 4).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.settings.concurrency = n;
        self
    }

    /// How many runs a job gets before it is `dead` (default 10).
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.settings.max_attempts = n;
        self
    }

    /// How long a run may take before it counts as failed (default 5 minutes). A worker's lease
    /// on a job lasts twice as long, or 30 s more when that is shorter: the time after which a
    /// worker that died is taken for dead and its job runs again.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.settings.timeout = timeout;
        self
    }

    /// The wait before the first retry, doubling with each failed run up to `max` (default 1 s
    /// to 1 h).
    pub fn retry_backoff(mut self, base: Duration, max: Duration) -> Self {
        self.settings.retry_base = base;
        self.settings.retry_max = max;
        self
    }

    /// How often a worker looks for due jobs without being told of new ones (default 1 s):
    /// delayed jobs and retries become due without a signal.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.settings.poll_interval = interval;
        self
    }

    /// Refuse settings a worker cannot run with.
    pub fn check(&self) -> Result<()> {
        let s = &self.settings;
        let refuse = |what: &str| Err(Error::config(format!("jobs: {what}")));
        if s.concurrency == 0 {
            return refuse("the concurrency must be at least 1");
        }
        if s.max_attempts == 0 {
            return refuse("a job needs at least 1 attempt");
        }
        if s.timeout.is_zero() || s.poll_interval.is_zero() || s.retry_base.is_zero() {
            return refuse("the timeout, the poll interval and the retry backoff must be above zero");
        }
        if s.retry_max < s.retry_base {
            return refuse("the longest retry wait is below the first");
        }
        Ok(())
    }

    /// Start a worker on `queue`: it runs until it is stopped or dropped. A server given these
    /// jobs starts its own.
    pub async fn start(self, queue: Arc<dyn JobQueue>) -> Result<JobWorker> {
        self.check()?;
        JobWorker::start(self, queue).await
    }

    /// The wait before the run after failed run number `attempt`.
    fn backoff(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1));
        self.settings.retry_base.saturating_mul(factor).min(self.settings.retry_max)
    }

    /// How a failed run of `job` ends.
    fn failed(&self, job: &ClaimedJob, error: &JobError) -> JobEnd {
        if error.permanent || job.attempt >= self.settings.max_attempts {
            JobEnd::Dead { error: error.message.clone() }
        } else {
            JobEnd::Retry { after: self.backoff(job.attempt), error: error.message.clone() }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claimed(attempt: u32) -> ClaimedJob {
        ClaimedJob { id: 1, name: "j".into(), payload: Value::Null, attempt, user_id: None }
    }

    #[test]
    fn retries_back_off_doubling_to_the_cap_then_the_job_is_dead() {
        let jobs = Jobs::new().max_attempts(5).retry_backoff(Duration::from_secs(1), Duration::from_secs(5));
        let waits: Vec<JobEnd> = (1..=5).map(|n| jobs.failed(&claimed(n), &JobError::retry("x"))).collect();
        let retry = |s| JobEnd::Retry { after: Duration::from_secs(s), error: "x".into() };
        assert_eq!(waits, [retry(1), retry(2), retry(4), retry(5), JobEnd::Dead { error: "x".into() }]);
    }

    #[test]
    fn a_permanent_failure_is_dead_at_once() {
        let end = Jobs::new().failed(&claimed(1), &JobError::permanent("no such user"));
        assert_eq!(end, JobEnd::Dead { error: "no such user".into() });
    }

    #[test]
    fn settings_a_worker_cannot_run_with_are_refused() {
        assert!(Jobs::new().check().is_ok());
        assert!(Jobs::new().concurrency(0).check().is_err());
        assert!(Jobs::new().max_attempts(0).check().is_err());
        assert!(Jobs::new().timeout(Duration::ZERO).check().is_err());
        assert!(Jobs::new().retry_backoff(Duration::from_secs(2), Duration::from_secs(1)).check().is_err());
    }
}
