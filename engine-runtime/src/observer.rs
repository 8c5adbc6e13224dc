//! Observer hooks: what the server tells an app's metrics or logs about pulls, pushes, conflicts
//! and errors. Every hook defaults to doing nothing; hooks run on the request's task, so they
//! should be quick.

use engine_kernel::Actor;
use engine_kernel::wire::{MutationResult, PullRequest, PushRequest, PushResponse};

use crate::error::Error;
use crate::pull::Pulled;

/// Hooks called by the server.
pub trait Observer: Send + Sync + 'static {
    /// A pull was answered: [`Pulled::changes`] gives its rows as the JSON text sent,
    /// [`Pulled::response`] the whole answer as the wire type.
    fn on_pull(&self, _actor: &Actor, _request: &PullRequest, _response: &Pulled) {}
    /// A push was answered (also when it stopped early).
    fn on_push(&self, _actor: &Actor, _request: &PushRequest, _response: &PushResponse) {}
    /// A mutation was rejected with `conflict`.
    fn on_conflict(&self, _actor: &Actor, _result: &MutationResult) {}
    /// A request failed.
    fn on_error(&self, _error: &Error) {}
}

/// The observer that observes nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoObserver;

impl Observer for NoObserver {}
