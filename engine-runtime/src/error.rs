//! The one error type of the server, and its rendering as a problem document
//! (`docs/protocol.md#problem-documents`): the status and stable code of each case, and never a
//! database's text, a bound value or a stack trace in a response.

use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use engine_kernel::ErrorCode;
use engine_kernel::wire::Problem;

/// Result with the server's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything the server can answer with besides success.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The body is not the JSON shape of the endpoint.
    #[error("malformed request: {0}")]
    MalformedRequest(String),
    /// No, bad or expired credentials.
    #[error("unauthenticated: {0}")]
    Unauthenticated(String),
    /// The actor may not do this.
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// No such route.
    #[error("not found: {0}")]
    NotFound(String),
    /// The route does not take this method.
    #[error("method not allowed")]
    MethodNotAllowed,
    /// A push whose first mutation skips ahead of the client's sequence.
    #[error("mutation out of order: expected mutation {}, got {got}", last_mutation_id + 1)]
    MutationOutOfOrder {
        /// The last mutation applied for the client.
        last_mutation_id: u64,
        /// The mutation id the push started with.
        got: u64,
    },
    /// The body is over the size limit.
    #[error("payload too large: the limit is {limit} bytes")]
    PayloadTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// A push with more mutations than the store takes in one push.
    #[error("too many mutations: a push holds at most {limit}")]
    TooManyMutations {
        /// The most mutations a push may hold.
        limit: usize,
    },
    /// A pull names more buckets than the store syncs for one actor. (An actor that holds more
    /// is served the most recently granted: `docs/protocol.md#the-bucket-bound`.)
    #[error("too many buckets: the pull asks for {asked}; at most {limit} are synced for one actor")]
    TooManyBuckets {
        /// How many the pull names.
        asked: usize,
        /// The most the store syncs.
        limit: usize,
    },
    /// The actor is over its request rate.
    #[error("rate limited: retry after {} ms", retry_after.as_millis())]
    RateLimited {
        /// When a request will be accepted again.
        retry_after: Duration,
    },
    /// A blob upload would take the uploader's blobs past its storage quota.
    #[error("over quota: {used} of {quota} bytes used")]
    OverQuota {
        /// The most bytes one actor's blobs may take.
        quota: u64,
        /// The bytes its blobs take now.
        used: u64,
    },
    /// The actor already has as many requests in progress, or sockets, as it may (or its
    /// address as many sockets waiting to authenticate).
    #[error("busy: {detail}")]
    Busy {
        /// Which limit, in words.
        detail: String,
        /// When to try again.
        retry_after: Duration,
    },
    /// A passing condition of the database; nothing was recorded.
    #[error("retry later: {detail}")]
    RetryLater {
        /// When to retry.
        retry_after: Duration,
        /// What happened (logged; the response says only that it is transient).
        detail: String,
    },
    /// Postgres did not answer within the deadline, and the session was taken for lost and
    /// closed. Transient; unlike [`Error::RetryLater`], what the request asked may have been
    /// done (a retried push is answered from the record of a mutation that was applied).
    #[error("Postgres did not answer within {} ms; the session was taken for lost and closed", .waited.as_millis())]
    Unanswered {
        /// How long the server waited.
        waited: Duration,
    },
    /// The realtime link (a NATS server) did not take a message in time, or failed it. Transient:
    /// the link reconnects by itself, and every socket resyncs when it is back.
    #[error("realtime: {what}")]
    Realtime {
        /// What failed.
        what: String,
        /// Why, when another error says.
        #[source]
        source: Option<BoxError>,
    },
    /// The database was provisioned by a newer engine, or provisioning failed.
    #[error("provisioning: {what}")]
    Provision {
        /// What failed.
        what: String,
        /// Why, when another error says.
        #[source]
        source: Option<BoxError>,
    },
    /// The server is configured inconsistently, or a resource it was configured with (an address,
    /// a database, a key) cannot be used.
    #[error("configuration: {what}")]
    Config {
        /// What is wrong.
        what: String,
        /// Why, when another error says.
        #[source]
        source: Option<BoxError>,
    },
    /// A failure of a mutator or of the app's definition.
    #[error(transparent)]
    Kernel(#[from] engine_kernel::Error),
    /// A database failure that is not transient.
    #[error("the database failed a statement")]
    Database(#[source] sqlx::Error),
    /// Any other fault of the server.
    #[error("internal: {what}")]
    Internal {
        /// What failed.
        what: String,
        /// Why, when another error says.
        #[source]
        source: Option<BoxError>,
    },
}

/// A cause kept with an error.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// An error and each of its causes once, as the server logs them: an error's own words say what
/// failed, and its causes travel in `source()` only. Logged as `?Chain(&err)`: its `Debug` is the
/// quoted, escaped text, so a cause that echoes what a client sent (a newline, say) cannot forge
/// a log line.
pub(crate) struct Chain<'a>(pub(crate) &'a (dyn std::error::Error + 'a));

impl std::fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&engine_kernel::error::chain(self.0))
    }
}

impl std::fmt::Debug for Chain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", engine_kernel::error::chain(self.0))
    }
}

/// How long clients wait after a transient failure.
pub(crate) const RETRY_AFTER: Duration = Duration::from_secs(1);

impl Error {
    /// A configuration error with nothing behind it.
    pub(crate) fn config(what: impl Into<String>) -> Self {
        Error::Config { what: what.into(), source: None }
    }

    /// A configuration error caused by `source`.
    pub(crate) fn config_from(what: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Error::Config { what: what.into(), source: Some(source.into()) }
    }

    /// A provisioning error with nothing behind it.
    pub(crate) fn provision(what: impl Into<String>) -> Self {
        Error::Provision { what: what.into(), source: None }
    }

    /// A provisioning error caused by `source`.
    pub(crate) fn provision_from(what: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Error::Provision { what: what.into(), source: Some(source.into()) }
    }

    /// A fault of the server with nothing behind it.
    pub(crate) fn internal(what: impl Into<String>) -> Self {
        Error::Internal { what: what.into(), source: None }
    }

    /// A fault of the server caused by `source`.
    pub(crate) fn internal_from(what: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Error::Internal { what: what.into(), source: Some(source.into()) }
    }

    /// The stable code of this error on the wire.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::MalformedRequest(_) => ErrorCode::MalformedRequest,
            Error::Unauthenticated(_) => ErrorCode::Unauthenticated,
            Error::Forbidden(_) => ErrorCode::Forbidden,
            Error::NotFound(_) => ErrorCode::NotFound,
            Error::MethodNotAllowed => ErrorCode::MethodNotAllowed,
            Error::MutationOutOfOrder { .. } => ErrorCode::MutationOutOfOrder,
            Error::PayloadTooLarge { .. } | Error::TooManyBuckets { .. } | Error::OverQuota { .. } => {
                ErrorCode::PayloadTooLarge
            }
            Error::TooManyMutations { .. } => ErrorCode::TooManyMutations,
            Error::RateLimited { .. } | Error::Busy { .. } => ErrorCode::RateLimited,
            Error::RetryLater { .. } | Error::Unanswered { .. } | Error::Realtime { .. } => ErrorCode::RetryLater,
            Error::Kernel(e) => e.code(),
            Error::Provision { .. } | Error::Config { .. } | Error::Database(_) | Error::Internal { .. } => {
                ErrorCode::Internal
            }
        }
    }

    /// Whether the failure is transient: to be retried.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::RetryLater { .. } | Error::Unanswered { .. } | Error::Realtime { .. })
            || matches!(self, Error::Kernel(e) if e.code() == ErrorCode::RetryLater)
    }

    /// The problem document of this error: its detail is safe to show (internal faults say only
    /// that they happened).
    pub fn problem(&self) -> Problem {
        let code = self.code();
        let detail = match self {
            Error::Provision { .. } | Error::Config { .. } | Error::Database(_) | Error::Internal { .. } => {
                "the server failed; the failure is logged".to_owned()
            }
            Error::Kernel(engine_kernel::Error::Internal(_) | engine_kernel::Error::InvalidApp(_)) => {
                "the server failed; the failure is logged".to_owned()
            }
            Error::RetryLater { .. } | Error::Realtime { .. } | Error::Kernel(engine_kernel::Error::Transient(_)) => {
                "a transient condition; retry after the Retry-After delay (nothing was recorded)".to_owned()
            }
            Error::Unanswered { .. } => "the database did not answer in time; retry after the Retry-After delay (a \
                                         mutation it applied is answered from its record)"
                .to_owned(),
            Error::MalformedRequest(m) | Error::Unauthenticated(m) | Error::Forbidden(m) | Error::NotFound(m) => {
                m.clone()
            }
            Error::MethodNotAllowed => "this route does not take this method".to_owned(),
            Error::MutationOutOfOrder { last_mutation_id, got } => format!(
                "the push starts at mutation {got}, but the next mutation of this client is {}",
                last_mutation_id + 1
            ),
            Error::PayloadTooLarge { limit } => format!("the body is over the limit of {limit} bytes"),
            Error::TooManyMutations { limit } => {
                format!("the push holds more mutations than the server takes at once ({limit}); push fewer")
            }
            Error::TooManyBuckets { asked, limit } => {
                format!("the pull asks for {asked} buckets; this server syncs at most {limit} buckets for one actor")
            }
            Error::RateLimited { retry_after } => {
                format!("over the request rate; retry in {} ms", retry_after.as_millis().max(1))
            }
            Error::Busy { detail, .. } => detail.clone(),
            Error::OverQuota { quota, used } => {
                format!("the actor's blobs take {used} bytes of its quota of {quota}; this one does not fit")
            }
            other => other.to_string(),
        };
        let mut problem = Problem::new(code, detail);
        if let Error::MutationOutOfOrder { last_mutation_id, .. } = self {
            problem.last_mutation_id = Some(*last_mutation_id);
        }
        problem
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::RateLimited { retry_after }
            | Error::Busy { retry_after, .. }
            | Error::RetryLater { retry_after, .. } => Some(*retry_after),
            Error::Kernel(e) if e.code() == ErrorCode::RetryLater => Some(RETRY_AFTER),
            Error::Unanswered { .. } => Some(RETRY_AFTER),
            _ => None,
        }
    }
}

/// Classify a database error by SQLSTATE (never by its message): passing conditions are
/// [`Error::RetryLater`], the rest [`Error::Database`].
impl From<sqlx::Error> for Error {
    fn from(err: sqlx::Error) -> Self {
        if is_transient(&err) {
            Error::RetryLater { retry_after: RETRY_AFTER, detail: err.to_string() }
        } else {
            Error::Database(err)
        }
    }
}

/// What a database error means for the request that met it, by SQLSTATE (never by message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailureClass {
    /// A passing condition: retried, nothing recorded.
    Transient,
    /// The same statement on the same data fails again: a mutation's failure is recorded.
    Deterministic,
    /// The server or its database is wrong (schema, privileges, a bug): logged, answered 500.
    Fault,
}

/// The class of a database error.
///
/// - Transient: serialization failures and deadlocks (40001, 40P01), lock and statement
///   timeouts (55P03, 57014), shutdowns (57P0x), insufficient resources (53), system errors (58),
///   lost connections (08 and the driver's I/O and pool errors), and a client's sequence moved
///   by a concurrent push (EN409).
/// - Faults: statements the server got wrong or may not run (42, 0A, 26, 34, 3D, 3F, 25, 28, 0L,
///   0P, 2B, F0, XX) and every failure that is not the database's answer to a statement.
/// - Deterministic: everything else the database answers, data exceptions (22), constraints
///   (23), program limits (54), cardinality (21), and errors raised by triggers and functions
///   (P0, 38, 39, 2F, 44).
pub(crate) fn classify(err: &sqlx::Error) -> FailureClass {
    match err {
        sqlx::Error::Database(db) => {
            let code = sqlstate(db.as_ref());
            let class = code.get(..2).unwrap_or_default();
            match (class, code.as_ref()) {
                (_, "40001" | "40P01" | "55P03" | "57014" | "EN409") | ("08" | "53" | "58" | "57", _) => {
                    FailureClass::Transient
                }
                ("42" | "0A" | "26" | "34" | "3D" | "3F" | "25" | "28" | "0L" | "0P" | "2B" | "F0" | "XX", _) => {
                    FailureClass::Fault
                }
                _ => FailureClass::Deterministic,
            }
        }
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::WorkerCrashed => {
            FailureClass::Transient
        }
        _ => FailureClass::Fault,
    }
}

/// The SQLSTATE of a database error: Postgres' own, or for SQLite the SQLSTATE of the condition
/// its (extended) result code names, so that one table classifies both.
pub(crate) fn sqlstate(db: &dyn sqlx::error::DatabaseError) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_none() {
        return db.code().unwrap_or_default();
    }
    let code: i64 = db.code().and_then(|c| c.parse().ok()).unwrap_or(0);
    Cow::Borrowed(match (code, code & 0xff) {
        // SQLITE_CONSTRAINT_UNIQUE, _PRIMARYKEY, _FOREIGNKEY, _NOTNULL, _CHECK, and the rest.
        (2067 | 1555, _) => "23505",
        (787, _) => "23503",
        (1299, _) => "23502",
        (275, _) => "23514",
        (_, 19) => "23000",
        // SQLITE_BUSY, SQLITE_LOCKED: another connection holds the lock.
        (_, 5 | 6) => "40001",
        // SQLITE_FULL, SQLITE_IOERR.
        (_, 13) => "53100",
        (_, 10) => "58030",
        // SQLITE_TOOBIG; SQLITE_MISMATCH, SQLITE_RANGE.
        (_, 18) => "54000",
        (_, 20 | 25) => "22000",
        // SQLITE_ERROR (a statement the server got wrong), and everything else.
        (_, 1) => "42000",
        _ => "XX000",
    })
}

/// Whether a database error is a passing condition ([`FailureClass::Transient`]).
pub(crate) fn is_transient(err: &sqlx::Error) -> bool {
    classify(err) == FailureClass::Transient
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let problem = self.problem();
        if problem.code == ErrorCode::Internal {
            tracing::error!(error = ?Chain(&self), "request failed");
        } else if self.is_transient() {
            tracing::warn!(error = ?Chain(&self), "transient failure");
        }
        let status = StatusCode::from_u16(problem.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&problem).unwrap_or_default();
        let mut response = (status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/problem+json"));
        if let Some(after) = self.retry_after() {
            let seconds = after.as_secs_f64().ceil().max(1.0) as u64;
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn errors_keep_their_causes() {
        let refused = std::io::Error::new(std::io::ErrorKind::AddrInUse, "address in use");
        let err = Error::config_from("cannot listen", refused);
        assert_eq!(err.to_string(), "configuration: cannot listen", "the cause is said once, by `source()`");
        assert_eq!(Chain(&err).to_string(), "configuration: cannot listen: address in use");
        let cause = err.source().and_then(|s| s.downcast_ref::<std::io::Error>()).expect("the cause is kept");
        assert_eq!(cause.kind(), std::io::ErrorKind::AddrInUse);
        assert!(Error::provision("not provisioned").source().is_none());
        assert_eq!(Error::internal("lost").to_string(), "internal: lost");
        assert_eq!(err.problem().detail, "the server failed; the failure is logged", "never shown to a client");
    }
}
