//! Pull and push, transport aside: the store answers, the observer and metrics hear of it, and a
//! push's commits are signalled to realtime (`docs/design.md` §8: realtime is a hint, pulls
//! carry the data).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use engine_kernel::wire::{PullRequest, PushRequest, PushResponse};
use engine_kernel::{Actor, ErrorCode};

use crate::error::{Error, Result};
use crate::metrics;
use crate::observer::Observer;
use crate::realtime::{Realtime, Signal};
use crate::storage::{Pulled, Pushed, Storage};

/// The pull and push of one server.
pub(crate) struct SyncService {
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) realtime: Arc<dyn Realtime>,
    pub(crate) observer: Arc<dyn Observer>,
}

impl SyncService {
    /// A page of the actor's buckets since the request's cursor.
    pub(crate) async fn pull(&self, actor: &Actor, request: &PullRequest) -> Result<Pulled> {
        let started = Instant::now();
        match self.storage.pull(actor, request).await {
            Ok(pulled) => {
                self.observer.on_pull(actor, request, &pulled);
                metrics::pulled(started.elapsed());
                Ok(pulled)
            }
            Err(err) => Err(self.failed(metrics::Route::Pull, err)),
        }
    }

    /// Apply the request's mutations, then signal what committed: the push's answer, or why it
    /// stopped once its committed mutations were signalled.
    pub(crate) async fn push(&self, actor: &Actor, request: &PushRequest) -> Result<PushResponse> {
        let started = Instant::now();
        let names: BTreeSet<&str> = request.mutations.iter().map(|m| m.name.as_str()).collect();
        tracing::Span::current()
            .record("mutators", tracing::field::debug(names.into_iter().collect::<Vec<_>>().join(",")));
        let pushed = match self.storage.push(actor, request).await {
            Ok(pushed) => pushed,
            Err(err) => return Err(self.failed(metrics::Route::Push, err)),
        };
        self.signal(&pushed).await;
        for result in &pushed.response.results {
            if result.error.as_ref().is_some_and(|e| e.code == ErrorCode::Conflict) {
                self.observer.on_conflict(actor, result);
            }
        }
        self.observer.on_push(actor, request, &pushed.response);
        metrics::pushed(started.elapsed(), &pushed.response);
        match pushed.stopped {
            Some(err) => Err(self.failed(metrics::Route::Push, err)),
            None => Ok(pushed.response),
        }
    }

    /// Everything in `pushed` has committed: signal it, even when the push stopped. Membership
    /// changes go first and each is tried: one that cannot be sent has this process's sockets
    /// recompute their buckets all the same (other processes' sockets do when their link's
    /// listening session is replaced, or at their next membership signal). Pings are hints: once
    /// the realtime link does not answer, the rest are not sent, so the push is answered without
    /// waiting on each, and sockets learn of the rows from their next pull.
    async fn signal(&self, pushed: &Pushed) {
        for change in &pushed.membership_changes {
            if let Err(err) = self.realtime.publish(Signal::Membership(change.clone())).await {
                tracing::warn!(error = ?crate::error::Chain(&err), "publishing a membership change failed; this process's sockets resync");
                let _ = self.realtime.publish(Signal::Resync).await;
            }
        }
        for bucket in &pushed.affected {
            let ping = Signal::Ping { bucket: bucket.clone(), xid: pushed.commit_xid };
            match self.realtime.publish(ping).await {
                Ok(()) => {}
                Err(err @ Error::Unanswered { .. }) => {
                    tracing::warn!(error = ?crate::error::Chain(&err), "publishing the push's pings stopped");
                    break;
                }
                Err(err) => tracing::warn!(error = ?crate::error::Chain(&err), "publishing a ping failed"),
            }
        }
    }

    /// `err`, told to the observer and counted.
    fn failed(&self, route: metrics::Route, err: Error) -> Error {
        self.observer.on_error(&err);
        metrics::request_failed(route, err.code());
        err
    }
}
