//! The worker: claims due jobs, runs each with its handler under a timeout, and records how the
//! run ended.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinHandle, JoinSet};

use super::{ClaimedJob, JobCtx, JobEnd, JobError, JobQueue, Jobs};
use crate::error::Result;

/// How much longer than a run's timeout a lease lasts, at most: the worker records the end of a
/// run that timed out before any other worker may take the job.
const LEASE_MARGIN: Duration = Duration::from_secs(30);

/// A running worker. Dropping it aborts the runs in flight (their leases run out and the jobs
/// run again); [`stop`](JobWorker::stop) lets them finish.
#[derive(Debug)]
pub struct JobWorker {
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl JobWorker {
    pub(super) async fn start(jobs: Jobs, queue: Arc<dyn JobQueue>) -> Result<JobWorker> {
        let wakeups = queue.job_wakeups().await?;
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(run(Arc::new(jobs), queue, wakeups, stopped));
        Ok(JobWorker { stop, task: Some(task) })
    }

    /// Claim no more jobs, and wait for the runs in flight to end.
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for JobWorker {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

async fn run(
    jobs: Arc<Jobs>,
    queue: Arc<dyn JobQueue>,
    mut wakeups: tokio::sync::mpsc::Receiver<()>,
    mut stopped: watch::Receiver<bool>,
) {
    let names: Vec<String> = jobs.handlers.keys().cloned().collect();
    let settings = jobs.settings;
    let lease = settings.timeout + settings.timeout.min(LEASE_MARGIN);
    let mut running = JoinSet::new();
    let mut listening = true;
    tracing::info!(jobs = ?names, concurrency = settings.concurrency, "job worker started");
    while !*stopped.borrow() {
        let free = settings.concurrency.saturating_sub(running.len());
        if free > 0 && !names.is_empty() {
            match queue.claim_jobs(&names, free, lease).await {
                Ok(claimed) => {
                    for job in claimed {
                        running.spawn(run_one(Arc::clone(&jobs), Arc::clone(&queue), job));
                    }
                }
                Err(err) => tracing::warn!(error = ?crate::error::Chain(&err), "claiming jobs failed; trying again"),
            }
        }
        tokio::select! {
            _ = stopped.changed() => {}
            Some(_) = running.join_next(), if !running.is_empty() => {}
            woken = wakeups.recv(), if listening => {
                if woken.is_none() {
                    tracing::warn!("the job queue stopped signalling new jobs; polling only");
                    listening = false;
                }
            }
            () = tokio::time::sleep(settings.poll_interval) => {}
        }
    }
    while running.join_next().await.is_some() {}
    tracing::info!("job worker stopped");
}

/// Aborts a task when dropped: a handler's run does not outlive the worker that started it.
struct AbortOnDrop(AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn run_one(jobs: Arc<Jobs>, queue: Arc<dyn JobQueue>, job: ClaimedJob) {
    let job = Arc::new(job);
    let timeout = jobs.settings.timeout;
    let end = match jobs.handlers.get(&job.name) {
        // The lease of the last run ran out: the worker running it died or lost the database.
        _ if job.attempt > jobs.settings.max_attempts => {
            JobEnd::Dead { error: format!("the lease ran out on all {} runs", jobs.settings.max_attempts) }
        }
        None => JobEnd::Retry { after: jobs.settings.poll_interval, error: "no handler in this worker".into() },
        Some(handler) => {
            // Spawned, so that a panic is the run's failure, not the worker's.
            let handle = tokio::spawn(handler(JobCtx { job: Arc::clone(&job) }, job.payload.clone()));
            let _guard = AbortOnDrop(handle.abort_handle());
            let failure = match tokio::time::timeout(timeout, handle).await {
                Ok(Ok(Ok(()))) => None,
                Ok(Ok(Err(err))) => Some(err),
                Ok(Err(join)) if join.is_panic() => {
                    Some(JobError::retry(format!("the job panicked: {}", panic_text(join))))
                }
                Ok(Err(_)) => Some(JobError::retry("the job was cancelled")),
                Err(_) => Some(JobError::retry(format!("the job ran longer than its timeout of {timeout:?}"))),
            };
            failure.map_or(JobEnd::Done, |err| jobs.failed(&job, &err))
        }
    };
    match &end {
        JobEnd::Done => tracing::debug!(job = ?job.name, id = job.id, attempt = job.attempt, "job done"),
        JobEnd::Retry { after, error } => {
            tracing::warn!(job = ?job.name, id = job.id, attempt = job.attempt, retry_in = ?after, error = ?error.to_string(), "job failed; it will run again");
        }
        JobEnd::Dead { error } => {
            tracing::error!(job = ?job.name, id = job.id, attempt = job.attempt, error = ?error.to_string(), "job failed for good");
        }
    }
    match queue.finish_job(&job, end).await {
        Ok(true) => {}
        Ok(false) => tracing::warn!(job = ?job.name, id = job.id, "the job's lease ran out before its run ended"),
        Err(err) => {
            tracing::warn!(job = %job.name, id = job.id, error = ?crate::error::Chain(&err), "recording the job's end failed; it will run again")
        }
    }
}

fn panic_text(join: tokio::task::JoinError) -> String {
    let payload = join.into_panic();
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-text panic".into())
}
