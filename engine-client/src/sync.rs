//! The sync engine: pull and push, their answers classified as `docs/protocol.md` says, and the
//! loops that run them in the background — the outbox drains on a timer with backoff and jitter
//! (never waiting for the next local write), pulls run when the stream says so, after a push, and
//! on an interval.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use engine_kernel::wire::{MutationResult, MutationStatus, PullRequest, PushRequest};
use engine_kernel::{BucketKey, ErrorCode};

use crate::backoff::Backoff;
use crate::error::{Error, Result};
use crate::settings::SyncScope;
use crate::state::{ClientState, lock};

impl ClientState {
    fn record_error(&self, err: &Error) {
        let text = engine_kernel::error::chain(err);
        self.status.send_if_modified(|status| {
            let changed = status.last_error.as_deref() != Some(text.as_str());
            status.last_error = Some(text);
            changed
        });
    }

    fn clear_error(&self) {
        self.status.send_if_modified(|status| status.last_error.take().is_some());
    }

    /// A pull or a push starts (`true`) or ends: the status says syncing while any runs.
    fn set_syncing(&self, starts: bool) {
        let running = if starts {
            self.running.fetch_add(1, std::sync::atomic::Ordering::AcqRel) + 1
        } else {
            self.running.fetch_sub(1, std::sync::atomic::Ordering::AcqRel) - 1
        };
        let syncing = running > 0;
        self.status.send_if_modified(|status| std::mem::replace(&mut status.syncing, syncing) != syncing);
    }

    /// Pull until caught up, applying each page atomically.
    pub(crate) async fn pull(&self) -> Result<()> {
        let _running = self.pull_lock.lock().await;
        self.set_syncing(true);
        let (mut lost, mut changed) = (BTreeSet::new(), false);
        // Pages applied before a failure count: what they said was lost is lost.
        let pulled = self.pull_pages(&mut lost, &mut changed).await;
        self.status.send_if_modified(|status| status.progress.take().is_some());
        let mut result = pulled.and(self.refresh_held(lost).await);
        // Rows gone (a bucket lost, say) may have been the last to name some blob kept here.
        if changed {
            result = result.and(self.prune_blobs().await.map(drop));
        }
        self.set_syncing(false);
        match &result {
            Ok(()) => {
                self.clear_error();
                self.status.send_modify(|status| status.last_pull_at = Some(SystemTime::now()));
            }
            Err(err) => self.record_error(err),
        }
        self.refresh_status().await;
        result
    }

    /// The first request of a pull: every bucket held, or, syncing only what is open, the
    /// always-synced rules and the open buckets, those whose rows the store does not hold
    /// restarted (`docs/design.md` §3, "Sync what is open"). The buckets held that it leaves
    /// out are released first.
    async fn first_request(&self) -> Result<PullRequest> {
        let mut request = PullRequest {
            client_id: self.store.client_id(),
            cursor: self.store.cursor().await?,
            limit: Some(self.settings.pull_page),
            ..PullRequest::default()
        };
        if let SyncScope::Open { always } = &self.settings.scope {
            let open: Vec<BucketKey> = lock(&self.open).keys().cloned().collect();
            self.store.release(|b| always.iter().any(|rule| rule == b.rule()) || open.contains(b)).await?;
            let held: BTreeSet<BucketKey> = self.store.buckets().await?.into_iter().collect();
            request.restart = Some(open.iter().filter(|b| !held.contains(*b)).cloned().collect());
            request.rules = Some(always.clone());
            request.open = Some(open);
        }
        Ok(request)
    }

    async fn pull_pages(&self, lost: &mut BTreeSet<BucketKey>, changed: &mut bool) -> Result<()> {
        let first = self.first_request().await?;
        // Later pages go on from the cursor: a restart again would start the bucket over.
        let next_request = |cursor: String| PullRequest { cursor: Some(cursor), restart: None, ..first.clone() };
        let mut page = self.remote.pull(&first).await?;
        loop {
            // The next page is asked for while this one is applied: a cursor answers the same
            // however often it is sent, so a page fetched in vain costs nothing but the fetch.
            let next = async {
                match page.has_more {
                    true => Some(self.remote.pull(&next_request(page.cursor.clone())).await),
                    false => None,
                }
            };
            let (applied, next) = tokio::join!(self.store.apply_page(&page, self.settings.bucket_ttl), next);
            let applied = applied?;
            self.status
                .send_if_modified(|status| std::mem::replace(&mut status.progress, page.progress) != page.progress);
            lost.extend(page.removed_buckets.iter().cloned());
            *changed |= !applied.tables.is_empty();
            if applied.requeued > 0 {
                self.wake_push.notify_one();
            }
            self.notify_tables(applied.tables.iter().copied());
            match next {
                Some(next) => page = next?,
                None => return Ok(()),
            }
        }
    }

    /// Push the outbox until it is drained or a failure stops it. Returns whether anything
    /// was applied (a pull will show it).
    pub(crate) async fn push(&self) -> Result<bool> {
        let _running = self.push_lock.lock().await;
        self.set_syncing(true);
        let result = self.push_batches().await;
        self.set_syncing(false);
        match &result {
            Ok(_) => self.clear_error(),
            Err(err) => self.record_error(err),
        }
        self.refresh_status().await;
        result
    }

    async fn push_batches(&self) -> Result<bool> {
        let mut batch_size = self.settings.push_batch.max(1);
        let mut applied_any = false;
        let mut renumbered_at = None;
        loop {
            let batch = self.store.unpushed(batch_size).await?;
            if batch.is_empty() {
                return Ok(applied_any);
            }
            let request = PushRequest {
                client_id: self.store.client_id(),
                mutations: batch.iter().map(crate::store::Entry::request).collect(),
            };
            match self.remote.push(&request).await {
                Ok(response) => {
                    applied_any |= response.results.iter().any(|r| r.status != MutationStatus::Rejected);
                    let tables = self.store.record_results(&response.results).await?;
                    self.notify_tables(tables.iter().copied());
                    if response.results.len() < batch.len() {
                        // The server stopped early without an error: try the rest later.
                        return Ok(applied_any);
                    }
                }
                Err(Error::Server { status: 409, problem, retry_after })
                    if problem.code == ErrorCode::MutationOutOfOrder =>
                {
                    // The server's sequence is behind the outbox: number it on from there, once.
                    let Some(last) = problem.last_mutation_id.filter(|last| renumbered_at != Some(*last)) else {
                        return Err(Error::Server { status: 409, problem, retry_after });
                    };
                    renumbered_at = Some(last);
                    self.store.renumber(last).await?;
                }
                Err(Error::Server { problem, .. })
                    if matches!(
                        problem.code,
                        ErrorCode::MalformedRequest | ErrorCode::PayloadTooLarge | ErrorCode::TooManyMutations
                    ) =>
                {
                    if batch.len() > 1 {
                        // Find the mutation the server cannot take by pushing fewer at a time.
                        batch_size = u32::try_from(batch.len() / 2).unwrap_or(1).max(1);
                        continue;
                    }
                    // One mutation the server will never take: quarantine it, go on (the next
                    // one is numbered on when the server says where its sequence is).
                    batch_size = self.settings.push_batch.max(1);
                    let entry = &batch[0];
                    // Up to the synced id the server has recorded it (a lost answer): its effect
                    // is in the base, and quarantined, a retry would apply it twice.
                    let settled = entry.mutation_id <= self.store.synced().await?;
                    let result = MutationResult {
                        client_mutation_id: entry.request().client_mutation_id,
                        mutation_id: entry.request().mutation_id,
                        status: if settled { MutationStatus::Duplicate } else { MutationStatus::Rejected },
                        server_id: None,
                        reconciliation: None,
                        error: (!settled).then_some(problem),
                        superseded: false,
                    };
                    let tables = self.store.record_results(&[result]).await?;
                    self.notify_tables(tables.iter().copied());
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// How long to wait after `err` before trying again.
    fn wait_after(&self, err: &Error, backoff: &mut Backoff) -> Duration {
        let wait = backoff.next_delay();
        match err {
            Error::Server { retry_after: Some(after), .. } => {
                (*after).max(wait).min(self.settings.reconnect.backoff_max)
            }
            _ => wait,
        }
    }
}

/// The push and pull loops of a client, stopped when the last handle is dropped.
pub(crate) fn spawn(inner: &Arc<ClientState>) -> Vec<tokio::task::JoinHandle<()>> {
    vec![tokio::spawn(work_loop(inner.clone(), Work::Push)), tokio::spawn(work_loop(inner.clone(), Work::Pull))]
}

/// How often an idle push loop looks at the outbox.
const PUSH_RECHECK: Duration = Duration::from_secs(2);

/// What a background loop does each round.
#[derive(Debug, Clone, Copy)]
enum Work {
    Push,
    Pull,
}

/// Run `work` whenever it is woken, and on a timer: the pull interval after a success, the
/// backoff (or the server's `Retry-After`) after a failure.
async fn work_loop(inner: Arc<ClientState>, work: Work) {
    let reconnect = &inner.settings.reconnect;
    let mut backoff = Backoff::new(reconnect.backoff_base, reconnect.backoff_max);
    let mut shutdown = inner.shutdown.subscribe();
    let wake = match work {
        Work::Push => &inner.wake_push,
        Work::Pull => &inner.wake_pull,
    };
    let mut wait = Duration::ZERO;
    loop {
        tokio::select! {
            () = wake.notified() => {}
            () = tokio::time::sleep(wait) => {}
            _ = shutdown.changed() => return,
        }
        let done = match work {
            // What a push applied, a pull confirms.
            // Blobs go up after the rows that name them: a reader sees the row, then the bytes.
            Work::Push => match inner.push().await {
                Ok(applied) => {
                    if applied {
                        inner.wake_pull.notify_one();
                    }
                    inner.upload_blobs().await
                }
                Err(err) => Err(err),
            },
            Work::Pull => inner.pull().await,
        };
        match done {
            Ok(()) => {
                backoff.reset();
                // A mutation wakes the push loop; should a wake be missed (a `mutate` cancelled
                // after its commit), the outbox is looked at again soon anyway.
                wait = match work {
                    Work::Push => inner.settings.pull_interval.min(PUSH_RECHECK),
                    Work::Pull => inner.settings.pull_interval,
                };
            }
            Err(err) => {
                tracing::debug!(error = ?engine_kernel::error::chain(&err), ?work, "sync failed; retrying");
                wait = inner.wait_after(&err, &mut backoff);
            }
        }
    }
}
