//! The one error type of the client.

use engine_kernel::wire::Problem;

/// Result with the client's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything the client can fail with.
///
/// An error's text says what failed, and its cause is its `source()`:
/// [`engine_kernel::error::chain`] writes both, as [`crate::Status::last_error`] holds them.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The local store failed (SQLite).
    #[error("the local store failed")]
    Store(#[from] sqlx::Error),
    /// The local store belongs to another user, or was written by a newer client.
    #[error("local store: {0}")]
    StoreMismatch(String),
    /// A row of the local store could not be read as its table's: a value SQLite gives back in
    /// another type than its column's, or a row the app's struct does not fit.
    #[error("local store: a row of `{table}` cannot be read")]
    #[non_exhaustive]
    Decode {
        /// The table.
        table: &'static str,
        /// Why: the SQLite driver's error, or the kernel's when the struct does not fit.
        #[source]
        source: BoxError,
    },
    /// The mutator refused the mutation when it ran locally; nothing was queued.
    #[error(transparent)]
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
    #[error("network: {what}")]
    Network {
        /// What failed.
        what: String,
        /// Why, when another error says (the HTTP or WebSocket client's error).
        #[source]
        source: Option<BoxError>,
    },
    /// The auth provider failed, or gave credentials that cannot be used.
    #[error("auth: {what}")]
    Auth {
        /// What is wrong.
        what: String,
        /// Why, when another error says.
        #[source]
        source: Option<BoxError>,
    },
    /// The builder is missing something or was given something unusable.
    #[error("configuration: {what}")]
    Config {
        /// What is wrong.
        what: String,
        /// Why, when another error says.
        #[source]
        source: Option<BoxError>,
    },
    /// The client was shut down.
    #[error("the client is closed")]
    Closed,
}

/// A cause kept with an error.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

impl Error {
    /// A network failure with nothing behind it.
    pub(crate) fn network(what: impl Into<String>) -> Self {
        Error::Network { what: what.into(), source: None }
    }

    /// A network failure caused by `source`.
    pub(crate) fn network_from(what: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Error::Network { what: what.into(), source: Some(source.into()) }
    }

    /// An auth failure with nothing behind it.
    pub(crate) fn auth(what: impl Into<String>) -> Self {
        Error::Auth { what: what.into(), source: None }
    }

    /// An auth failure caused by `source`.
    pub(crate) fn auth_from(what: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Error::Auth { what: what.into(), source: Some(source.into()) }
    }

    /// A row of `table` that cannot be read, because of `source`.
    pub(crate) fn decode(table: &'static str, source: impl Into<BoxError>) -> Self {
        Error::Decode { table, source: source.into() }
    }

    /// A configuration error with nothing behind it.
    pub(crate) fn config(what: impl Into<String>) -> Self {
        Error::Config { what: what.into(), source: None }
    }

    /// A configuration error caused by `source`.
    pub(crate) fn config_from(what: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Error::Config { what: what.into(), source: Some(source.into()) }
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn errors_keep_their_causes() {
        let timeout = std::io::Error::new(std::io::ErrorKind::TimedOut, "timed out");
        let err = Error::network_from("/sync/pull could not be sent", timeout);
        assert_eq!(err.to_string(), "network: /sync/pull could not be sent");
        assert_eq!(engine_kernel::error::chain(&err), "network: /sync/pull could not be sent: timed out");
        assert!(err.source().and_then(|s| s.downcast_ref::<std::io::Error>()).is_some());
        assert!(Error::auth("the token has no `sub`").source().is_none());
        let refused = Error::from(engine_kernel::Error::mutator_failed("only the list's owner may share it"));
        assert_eq!(engine_kernel::error::chain(&refused), "only the list's owner may share it");
        assert!(refused.source().is_none());
    }
}
