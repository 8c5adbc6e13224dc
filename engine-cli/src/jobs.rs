//! `engine jobs`: an operator's look at the background jobs of a database, and the dead ones
//! run again or discarded.

use engine_runtime::storage::JobAdmin;

use crate::error::Result;

/// What `engine jobs` does.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum JobsCommand {
    /// List jobs, newest first: id, name, state, attempts, when due or finished, last error.
    List {
        /// Only jobs in this state: queued, running, done or dead.
        #[arg(long)]
        state: Option<String>,
        /// The most jobs listed.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Queue dead jobs to run again now, their attempts counted afresh.
    Retry {
        /// The jobs' ids.
        #[arg(required = true)]
        ids: Vec<i64>,
    },
    /// Delete jobs that are not running.
    Discard {
        /// The jobs' ids.
        #[arg(required = true)]
        ids: Vec<i64>,
    },
}

/// Run `command` on the queue of the database at `url`.
pub(crate) async fn run(command: JobsCommand, url: &str) -> Result<String> {
    let admin = JobAdmin::connect(url).await?;
    let mut report = String::new();
    match command {
        JobsCommand::List { state, limit } => {
            for job in admin.list(state.as_deref(), limit).await? {
                let when = job.finished_at.unwrap_or(job.run_at).to_rfc3339();
                let error = job.last_error.as_deref().map(|e| format!("  {e}")).unwrap_or_default();
                report.push_str(&format!(
                    "{}  {}  {}  attempts {}  {when}{error}\n",
                    job.id, job.name, job.state, job.attempts
                ));
            }
            if report.is_empty() {
                report.push_str("no jobs\n");
            }
        }
        JobsCommand::Retry { ids } => {
            for id in ids {
                let line = match admin.retry(id).await? {
                    true => format!("job {id} queued to run again\n"),
                    false => format!("job {id} is not dead (or does not exist): left as it is\n"),
                };
                report.push_str(&line);
            }
        }
        JobsCommand::Discard { ids } => {
            for id in ids {
                let line = match admin.discard(id).await? {
                    true => format!("job {id} discarded\n"),
                    false => format!("job {id} is running (or does not exist): left as it is\n"),
                };
                report.push_str(&line);
            }
        }
    }
    Ok(report)
}
