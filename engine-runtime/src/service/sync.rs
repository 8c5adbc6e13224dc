//! Pull and push, transport aside: the store answers, the observer and metrics hear of it, and a
//! push's commits are signalled to realtime (`docs/design.md` §8: realtime is a hint, pulls
//! carry the data).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine_kernel::wire::{PullRequest, PushRequest, PushResponse};
use engine_kernel::{Actor, ErrorCode};

use crate::error::{Error, Result};
use crate::limits::{FairShare, LARGE_MERGE_BYTES, Place, Work};
use crate::metrics;
use crate::mutation::merge::MERGE_GATE;
use crate::observer::Observer;
use crate::realtime::{Realtime, Signal};
use crate::storage::{Pulled, Pushed, Sharing, Storage};

/// The mutations of a push applied on one place of the store's sessions: between two runs, other
/// actors' requests take their turn.
const TURN: usize = 8;

/// The pull and push of one server.
pub(crate) struct SyncService {
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) realtime: Arc<dyn Realtime>,
    pub(crate) observer: Arc<dyn Observer>,
    /// The store's sessions, shared fairly between actors, and the store's bounds on sharing
    /// (none for a store without a bound).
    pub(crate) share: Option<(Arc<FairShare>, Sharing)>,
    /// Membership changes whose signal could not be published, for [`publish_unsent`].
    pub(crate) unsent: tokio::sync::mpsc::UnboundedSender<String>,
    /// The merge gate: places for merges of large collaborative updates, shared fairly between
    /// actors (none when `Limits::large_merges` is 0).
    pub(crate) merges: Option<Arc<FairShare>>,
}

impl SyncService {
    /// A place among the store's sessions for `work` of `actor`, once its turn comes.
    async fn place(&self, actor: &Actor, work: Work) -> Result<Option<Place>> {
        match &self.share {
            Some((share, _)) => share.admit(&actor.user_id, work).await.map(Some),
            None => Ok(None),
        }
    }

    /// A page of the actor's buckets since the request's cursor.
    pub(crate) async fn pull(&self, actor: &Actor, request: &PullRequest) -> Result<Pulled> {
        let started = Instant::now();
        let place = self.place(actor, Work::Pull).await.map_err(|err| self.failed(metrics::Route::Pull, err))?;
        let pulled = self.storage.pull(actor, request).await;
        drop(place);
        match pulled {
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
        let pushed = match self.push_in_turns(actor, request).await {
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

    /// The request's mutations applied [`TURN`] at a time, each run of them with a place of its
    /// own: a push of a thousand mutations holds a session for a run, not for all of them, so
    /// another actor's push waits for the end of a run, not of the push. The runs' answers are
    /// one answer; a run that fails after others committed stops the push there.
    async fn push_in_turns(&self, actor: &Actor, request: &PushRequest) -> Result<Pushed> {
        // A push past the bound goes whole, to be refused whole.
        let whole = self.share.as_ref().is_none_or(|(_, sharing)| {
            request.mutations.len() <= TURN || request.mutations.len() > sharing.mutations_per_push
        });
        if whole {
            return self.run(actor, request).await;
        }
        let mut pushed = Pushed::default();
        for (run, mutations) in request.mutations.chunks(TURN).enumerate() {
            let part = PushRequest { client_id: request.client_id, mutations: mutations.to_vec() };
            let part = match self.run(actor, &part).await {
                Ok(part) => part,
                Err(err) if run == 0 => return Err(err),
                Err(err) => {
                    pushed.stopped = Some(err);
                    break;
                }
            };
            pushed.response.results.extend(part.response.results);
            pushed.response.last_mutation_id = part.response.last_mutation_id;
            pushed.affected.extend(part.affected);
            pushed.membership_changes.extend(part.membership_changes);
            pushed.commit_xid = pushed.commit_xid.max(part.commit_xid);
            if part.stopped.is_some() {
                pushed.stopped = part.stopped;
                break;
            }
        }
        Ok(pushed)
    }

    /// One run of a push, on a place of the store's sessions. A run carrying a value large enough
    /// to be a large collaborative update ([`LARGE_MERGE_BYTES`]) first takes its turn at the
    /// merge gate, holding no session while it waits, and merges on that turn: sessions are held
    /// by work that can run, not by merges queued behind the gate, so an actor sending many large
    /// updates takes no session another actor's small push needs. Any other run takes the gate in
    /// its merge if one turns out large ([`MERGE_GATE`]).
    async fn run(&self, actor: &Actor, request: &PushRequest) -> Result<Pushed> {
        let merging = match &self.merges {
            Some(gate) if request.mutations.iter().any(|m| carries_large_value(&m.args)) => {
                Some(gate.admit(&actor.user_id, Work::Merge).await?)
            }
            _ => None,
        };
        let push = async {
            let _place = self.place(actor, Work::Push).await?;
            self.storage.push(actor, request).await
        };
        match (&self.merges, merging) {
            (Some(gate), None) => MERGE_GATE.scope((gate.clone(), actor.user_id.clone()), push).await,
            // Ungated, or merging on the turn already taken.
            (_, _merging) => push.await,
        }
    }

    /// Everything in `pushed` has committed: signal it, even when the push stopped. Membership
    /// changes go first. Once one cannot be sent, this process's sockets recompute their
    /// buckets at once, and it and the rest are published in the background until they go
    /// through ([`publish_unsent`]): other processes' sockets learn of a change from its signal
    /// only, and would otherwise keep a revoked bucket's pings and presence until their next
    /// one. Pings are hints: once the realtime link does not answer, the rest are not sent, so
    /// the push is answered without waiting on each, and sockets learn of the rows from their
    /// next pull.
    async fn signal(&self, pushed: &Pushed) {
        let mut changes = pushed.membership_changes.iter();
        while let Some(change) = changes.next() {
            if let Err(err) = self.realtime.publish(Signal::Membership(change.clone())).await {
                tracing::warn!(error = ?crate::error::Chain(&err), "publishing a membership change failed; this process's sockets resync, and it is published again in the background");
                let _ = self.realtime.publish(Signal::Resync).await;
                for unsent in std::iter::once(change).chain(changes.by_ref()) {
                    let _ = self.unsent.send(unsent.clone());
                }
            }
        }
        for bucket in &pushed.affected {
            let ping = Signal::Ping { bucket: bucket.clone(), xid: pushed.commit_xid };
            match self.realtime.publish(ping).await {
                Ok(()) => {}
                Err(err @ (Error::Unanswered { .. } | Error::Realtime { .. })) => {
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

/// The first wait before a membership change whose signal failed is published again; it doubles
/// at each failure up to [`UNSENT_LONGEST_WAIT`].
const UNSENT_FIRST_WAIT: Duration = Duration::from_millis(100);
/// The longest wait between two tries of [`publish_unsent`].
const UNSENT_LONGEST_WAIT: Duration = Duration::from_secs(5);

/// The most membership changes [`publish_unsent`] keeps apart: past them, one change of anyone's
/// (`*`) stands for all of them.
const UNSENT_MOST: usize = 1_000;

/// Add `change` to the changes waiting to be published again. A change already waiting is not
/// added twice (a signal says only that the claim's memberships changed); `*` (anyone's) stands
/// for every other; and past [`UNSENT_MOST`] changes, a `*` replaces them all, so that a long
/// outage of the realtime link holds a bounded list, at the price of every socket of every
/// process recomputing its buckets once the link is back.
fn keep_unsent(pending: &mut Vec<String>, change: String) {
    const ANYONE: &str = "*";
    if pending.iter().any(|waiting| waiting == ANYONE) || pending.contains(&change) {
        return;
    }
    if change == ANYONE || pending.len() >= UNSENT_MOST {
        pending.clear();
        pending.push(ANYONE.to_owned());
        return;
    }
    pending.push(change);
}

/// Publish the membership changes `unsent` receives until each has gone through, oldest first,
/// for as long as the server runs ([`keep_unsent`] says which are kept).
pub(crate) fn publish_unsent(
    realtime: Arc<dyn Realtime>,
) -> (tokio::sync::mpsc::UnboundedSender<String>, tokio::task::AbortHandle) {
    let (sender, mut unsent) = tokio::sync::mpsc::unbounded_channel::<String>();
    let task = tokio::spawn(async move {
        let mut pending: Vec<String> = Vec::new();
        while let Some(first) = unsent.recv().await {
            keep_unsent(&mut pending, first);
            let mut wait = UNSENT_FIRST_WAIT;
            while !pending.is_empty() {
                tokio::time::sleep(wait).await;
                while let Ok(more) = unsent.try_recv() {
                    keep_unsent(&mut pending, more);
                }
                while let Some(change) = pending.first() {
                    match realtime.publish(Signal::Membership(change.clone())).await {
                        Ok(()) => {
                            pending.remove(0);
                        }
                        Err(err) => {
                            tracing::warn!(error = ?crate::error::Chain(&err), left = pending.len(), "publishing a membership change failed again");
                            break;
                        }
                    }
                }
                wait = (wait * 2).min(UNSENT_LONGEST_WAIT);
            }
        }
    });
    (sender, task.abort_handle())
}

/// Whether `value` holds a text longer than [`LARGE_MERGE_BYTES`]: what a large collaborative
/// update is sent as.
fn carries_large_value(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::String(text) => text.len() > LARGE_MERGE_BYTES,
        serde_json::Value::Array(items) => items.iter().any(carries_large_value),
        serde_json::Value::Object(fields) => fields.values().any(carries_large_value),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsent_changes_are_kept_once_and_past_the_most_as_anyone_s() {
        let claim = |i: usize| format!("user_id=u{i}");
        let cases: [(&str, Vec<String>, String, Vec<String>); 6] = [
            ("a first change is kept", vec![], claim(1), vec![claim(1)]),
            (
                "a change waiting already is not kept twice",
                vec![claim(1), claim(2)],
                claim(1),
                vec![claim(1), claim(2)],
            ),
            ("a new one goes last", vec![claim(1)], claim(2), vec![claim(1), claim(2)]),
            ("anyone's stands for all those waiting", vec![claim(1), claim(2)], "*".into(), vec!["*".into()]),
            ("anyone's covers a later one", vec!["*".into()], claim(3), vec!["*".into()]),
            (
                "past the most, anyone's replaces them",
                (0..UNSENT_MOST).map(claim).collect(),
                claim(UNSENT_MOST),
                vec!["*".into()],
            ),
        ];
        for (case, mut pending, change, kept) in cases {
            keep_unsent(&mut pending, change);
            assert_eq!(pending, kept, "{case}");
        }
        let mut pending = (0..UNSENT_MOST - 1).map(claim).collect::<Vec<_>>();
        keep_unsent(&mut pending, claim(UNSENT_MOST));
        assert_eq!(pending.len(), UNSENT_MOST, "up to the most, each is kept apart");
    }
}
