//! The one error type of the kernel: every way a mutator, a value or an app definition can fail,
//! classified the way the push protocol reports it.

use std::fmt;

/// Result with the kernel's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while defining an app or running a mutator.
///
/// The variants are the failure classes of `docs/design.md` §6: deterministic failures
/// ([`Validation`], [`UnknownMutator`], [`Forbidden`], [`MutatorFailed`], [`Conflict`],
/// [`Refused`]) are recorded and never retried; [`Transient`] is retried and records nothing; [`Internal`] and
/// [`InvalidApp`] are server faults, logged, neither shown nor recorded.
///
/// [`Validation`]: Error::Validation
/// [`UnknownMutator`]: Error::UnknownMutator
/// [`Forbidden`]: Error::Forbidden
/// [`MutatorFailed`]: Error::MutatorFailed
/// [`Conflict`]: Error::Conflict
/// [`Refused`]: Error::Refused
/// [`Transient`]: Error::Transient
/// [`Internal`]: Error::Internal
/// [`InvalidApp`]: Error::InvalidApp
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Arguments or values do not match their schema (a mutator's arguments, a column value, an HLC).
    #[error("validation failed: {0}")]
    Validation(String),
    /// No mutator of this name is registered.
    #[error("unknown mutator `{0}`")]
    UnknownMutator(String),
    /// A read or write outside the actor's buckets.
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// The mutator refused the operation (a business rule of the app).
    #[error("{0}")]
    MutatorFailed(String),
    /// A uniqueness, foreign-key or check constraint refused the write.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The store refused a write (a constraint, a value that does not fit its column): answered
    /// as `code` (`conflict` or `validation_failed`) with `message`, in words of the domain, and
    /// shown as a [`Conflict`](Error::Conflict) or a [`Validation`](Error::Validation) is.
    /// `cause` is the store's own error, for the operator's log only: its text may echo values.
    #[error("{}", refused_text(*.code, .message))]
    Refused {
        /// `conflict` or `validation_failed`.
        code: ErrorCode,
        /// What the client is told.
        message: String,
        /// The store's error.
        #[source]
        cause: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A passing condition of the store (serialization failure, deadlock, lost connection).
    #[error("transient failure: {0}")]
    Transient(String),
    /// The app's tables, mutators and sync rules do not fit together.
    #[error("invalid app: {0}")]
    InvalidApp(String),
    /// A fault of the store or the server, logged and never shown to clients in detail.
    #[error("internal error")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl Error {
    /// A mutator refusing the operation, with a message for the user.
    ///
    /// ```
    /// let err = engine_kernel::Error::mutator_failed("only the list's owner may share it");
    /// assert_eq!(err.code(), engine_kernel::ErrorCode::MutatorFailed);
    /// ```
    pub fn mutator_failed(message: impl fmt::Display) -> Self {
        Error::MutatorFailed(message.to_string())
    }

    /// Arguments or values that do not match their schema.
    pub fn validation(message: impl fmt::Display) -> Self {
        Error::Validation(message.to_string())
    }

    /// A read or write outside the actor's buckets.
    pub fn forbidden(message: impl fmt::Display) -> Self {
        Error::Forbidden(message.to_string())
    }

    /// A constraint violation.
    pub fn conflict(message: impl fmt::Display) -> Self {
        Error::Conflict(message.to_string())
    }

    /// A server fault, wrapping its cause.
    pub fn internal(source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Error::Internal(source.into())
    }

    /// The stable code of this error on the wire.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Validation(_) => ErrorCode::ValidationFailed,
            Error::UnknownMutator(_) => ErrorCode::UnknownMutator,
            Error::Forbidden(_) => ErrorCode::Forbidden,
            Error::MutatorFailed(_) => ErrorCode::MutatorFailed,
            Error::Conflict(_) => ErrorCode::Conflict,
            Error::Refused { code, .. } => *code,
            Error::Transient(_) => ErrorCode::RetryLater,
            Error::InvalidApp(_) | Error::Internal(_) => ErrorCode::Internal,
        }
    }

    /// Whether the same mutation would fail the same way again, so the failure is recorded and
    /// the client's outbox moves on.
    pub fn is_deterministic(&self) -> bool {
        matches!(
            self,
            Error::Validation(_)
                | Error::UnknownMutator(_)
                | Error::Forbidden(_)
                | Error::MutatorFailed(_)
                | Error::Conflict(_)
                | Error::Refused { .. }
        )
    }
}

/// How [`Error::Refused`] shows: as the error of its code would.
fn refused_text(code: ErrorCode, message: &str) -> String {
    match code {
        ErrorCode::ValidationFailed => Error::Validation(message.to_owned()).to_string(),
        _ => Error::Conflict(message.to_owned()).to_string(),
    }
}

/// The stable, snake_case codes of the problem documents (`docs/protocol.md#problem-codes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorCode {
    /// The body is not the JSON shape of the endpoint.
    MalformedRequest,
    /// No, bad or expired credentials.
    Unauthenticated,
    /// The actor may not do this (a bucket it does not hold, a write outside its buckets).
    Forbidden,
    /// The route does not exist.
    NotFound,
    /// The route exists but not for this method.
    MethodNotAllowed,
    /// A push whose first mutation id skips ahead of the last applied one.
    MutationOutOfOrder,
    /// The body is over the size limit.
    PayloadTooLarge,
    /// A push holds more mutations than the server takes in one push.
    TooManyMutations,
    /// The actor is over its request rate.
    RateLimited,
    /// A passing condition: retry after the `Retry-After` delay; nothing was recorded.
    RetryLater,
    /// A mutation's arguments (or its HLC) do not match the schema.
    ValidationFailed,
    /// A mutation names no registered mutator.
    UnknownMutator,
    /// The mutator refused the operation.
    MutatorFailed,
    /// A constraint refused the write.
    Conflict,
    /// A server fault; details are in the server's log under the request id.
    Internal,
}

impl ErrorCode {
    /// The code as it appears on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::MalformedRequest => "malformed_request",
            ErrorCode::Unauthenticated => "unauthenticated",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotFound => "not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::MutationOutOfOrder => "mutation_out_of_order",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::TooManyMutations => "too_many_mutations",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::RetryLater => "retry_later",
            ErrorCode::ValidationFailed => "validation_failed",
            ErrorCode::UnknownMutator => "unknown_mutator",
            ErrorCode::MutatorFailed => "mutator_failed",
            ErrorCode::Conflict => "conflict",
            ErrorCode::Internal => "internal",
        }
    }

    /// The HTTP status that goes with the code when it is a whole response's error.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::MalformedRequest => 400,
            ErrorCode::Unauthenticated => 401,
            ErrorCode::Forbidden => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::MutationOutOfOrder => 409,
            ErrorCode::PayloadTooLarge | ErrorCode::TooManyMutations => 413,
            ErrorCode::ValidationFailed
            | ErrorCode::UnknownMutator
            | ErrorCode::MutatorFailed
            | ErrorCode::Conflict => 422,
            ErrorCode::RateLimited => 429,
            ErrorCode::RetryLater => 503,
            ErrorCode::Internal => 500,
        }
    }

    /// A short, human title for the code.
    pub fn title(self) -> &'static str {
        match self {
            ErrorCode::MalformedRequest => "Malformed request",
            ErrorCode::Unauthenticated => "Unauthenticated",
            ErrorCode::Forbidden => "Forbidden",
            ErrorCode::NotFound => "Not found",
            ErrorCode::MethodNotAllowed => "Method not allowed",
            ErrorCode::MutationOutOfOrder => "Mutation out of order",
            ErrorCode::PayloadTooLarge => "Payload too large",
            ErrorCode::TooManyMutations => "Too many mutations",
            ErrorCode::RateLimited => "Rate limited",
            ErrorCode::RetryLater => "Retry later",
            ErrorCode::ValidationFailed => "Validation failed",
            ErrorCode::UnknownMutator => "Unknown mutator",
            ErrorCode::MutatorFailed => "Mutator failed",
            ErrorCode::Conflict => "Conflict",
            ErrorCode::Internal => "Internal error",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error with all its causes, `outer: cause: root cause` (many libraries say little at the
/// top level).
///
/// A cause whose text already ends the text so far is not written again. Some errors print their
/// cause in their own text and return it from `source()` as well (sqlx's `Error::Database` does),
/// and the chain still says each thing once.
///
/// ```
/// let io = std::io::Error::other("refused");
/// assert_eq!(engine_kernel::error::chain(&io), "refused");
/// ```
pub fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let said = cause.to_string();
        if !text.ends_with(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that says what failed and leaves the cause to `source()`.
    #[derive(Debug, thiserror::Error)]
    #[error("cannot read the contract")]
    struct Once(#[source] std::io::Error);

    /// An error that prints its cause and returns it from `source()` as well.
    #[derive(Debug, thiserror::Error)]
    #[error("cannot read the contract: {0}")]
    struct Twice(#[source] std::io::Error);

    #[test]
    fn each_cause_is_written_once() {
        let refused = || std::io::Error::other("refused");
        assert_eq!(chain(&Once(refused())), "cannot read the contract: refused");
        assert_eq!(chain(&Twice(refused())), "cannot read the contract: refused");
        let internal = Error::internal(Once(refused()));
        assert_eq!(chain(&internal), "internal error: cannot read the contract: refused");
    }
}
