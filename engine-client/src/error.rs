//! The one error type of the client.

use engine_kernel::wire::Problem;

/// Result with the client's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything the client can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The local store failed (SQLite).
    #[error("local store: {0}")]
    Store(#[from] sqlx::Error),
    /// The local store belongs to another user, or was written by a newer client.
    #[error("local store: {0}")]
    StoreMismatch(String),
    /// The mutator refused the mutation when it ran locally; nothing was queued.
    #[error("{0}")]
    Mutation(#[from] engine_kernel::Error),
    /// The server answered with a problem document.
    #[error("the server answered {status}: {}", problem.detail)]
    Server {
        /// The HTTP status.
        status: u16,
        /// The problem it sent.
        problem: Problem,
        /// How long it asked to wait before trying again (`Retry-After`).
        retry_after: Option<std::time::Duration>,
    },
    /// The server could not be reached, or answered something that is not the protocol.
    #[error("network: {0}")]
    Network(String),
    /// The auth provider failed.
    #[error("auth: {0}")]
    Auth(String),
    /// The builder is missing something or was given something unusable.
    #[error("configuration: {0}")]
    Config(String),
    /// The client was shut down.
    #[error("the client is closed")]
    Closed,
}
