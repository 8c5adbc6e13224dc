//! How a mutation's failures are classified for the push protocol: by SQLSTATE, never by message.
//! A deterministic failure (a constraint, a value that does not fit) is recorded and answered
//! `rejected`; a transient one (serialization failure, deadlock, lost connection) is retried and
//! records nothing (docs/design.md §6). Database text never reaches the client.

use std::sync::Arc;

use engine_kernel::{Error as KernelError, ErrorCode};

use crate::error::{Error, FailureClass, classify};

/// A database error a mutation cannot go on from (a fault, not the client's doing): the cause
/// of its internal failure, kept whole for the operator's log.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the database failed a statement of the mutation")]
pub(crate) struct DatabaseFault(#[source] Arc<sqlx::Error>);

/// Why a mutation whose record statement found an assumed write permission, or a row it
/// required, missing failed.
pub(crate) const UNCONFIRMED: &str = "a write permission the mutation assumed, or a row it required, does not hold";

/// Why the next path's first try stopped: a write permission it assumed did not hold before
/// a later operation of the mutator, or a row it required did not before its next write. The
/// next path then runs the mutation again, asking; the checked path never assumes, so a client
/// is never told this.
pub(crate) const ASK_INSTEAD: &str = "a write permission the mutation assumed does not hold: ask instead";

/// A database error as the mutation's failure, classified by SQLSTATE ([`classify`]): a
/// deterministic one in words of the domain, never the database's text, which may echo values.
pub(crate) fn map_sql_error(err: sqlx::Error) -> KernelError {
    match classify(&err) {
        FailureClass::Transient => KernelError::Transient(err.to_string()),
        FailureClass::Fault => KernelError::Internal(Box::new(DatabaseFault(Arc::new(err)))),
        FailureClass::Deterministic => {
            let code = match &err {
                sqlx::Error::Database(db) => {
                    // What the client is not told (the database's text may echo values), for the
                    // operator: logged in the request's span, which names the actor.
                    tracing::info!(
                        sqlstate = db.code().as_deref().unwrap_or(""),
                        table = db.table().unwrap_or(""),
                        constraint = db.constraint().unwrap_or(""),
                        message = db.message(),
                        "the database refused a mutation's write"
                    );
                    crate::error::sqlstate(db.as_ref()).into_owned()
                }
                _ => String::new(),
            };
            match code.as_str() {
                // Raised by a record statement (`_engine_unconfirmed`) on the push's next path.
                "EN403" => KernelError::forbidden(UNCONFIRMED),
                "23505" => KernelError::conflict("a row with this key already exists"),
                "23503" => KernelError::conflict("a referenced row is missing"),
                "23502" => KernelError::conflict("a required column is null"),
                "23514" => KernelError::conflict("a check constraint refused the values"),
                class if class.starts_with("23") => KernelError::conflict("a constraint refused the write"),
                class if class.starts_with("22") => KernelError::validation("a value does not fit its column"),
                class if class.starts_with("54") => {
                    KernelError::validation("a value is over a limit of the database (too long for a key or an index)")
                }
                _ => KernelError::conflict(format!("the database refused the write (SQLSTATE {code})")),
            }
        }
    }
}

/// A store error as the mutation's failure.
pub(crate) fn to_kernel(err: Error) -> KernelError {
    match err {
        Error::Kernel(e) => e,
        Error::RetryLater { detail, .. } => KernelError::Transient(detail),
        Error::Database(e) => map_sql_error(e),
        other => KernelError::Internal(other.into()),
    }
}

/// The first failure of a statement, kept: the transaction is aborted from then on, so every
/// later step of the mutation fails as that statement did, whatever the mutator did next.
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    code: ErrorCode,
    message: String,
    /// The database's error, when the failure was a fault of it.
    fault: Option<DatabaseFault>,
}

impl Failure {
    pub(crate) fn of(err: &KernelError) -> Self {
        let message = match err {
            KernelError::Validation(m)
            | KernelError::Forbidden(m)
            | KernelError::MutatorFailed(m)
            | KernelError::Conflict(m)
            | KernelError::Transient(m) => m.clone(),
            other => other.to_string(),
        };
        let fault = match err {
            KernelError::Internal(cause) => cause.downcast_ref::<DatabaseFault>().cloned(),
            _ => None,
        };
        Failure { code: err.code(), message, fault }
    }

    /// The failure again, in its class.
    pub(crate) fn error(&self) -> KernelError {
        match self.code {
            ErrorCode::RetryLater => KernelError::Transient(self.message.clone()),
            ErrorCode::Conflict => KernelError::conflict(&self.message),
            ErrorCode::ValidationFailed => KernelError::validation(&self.message),
            ErrorCode::Forbidden => KernelError::forbidden(&self.message),
            _ => match &self.fault {
                Some(fault) => KernelError::Internal(Box::new(fault.clone())),
                None => KernelError::Internal(self.message.clone().into()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_comes_back_in_its_class() {
        for err in [
            KernelError::conflict("a row with this key already exists"),
            KernelError::validation("a value does not fit its column"),
            KernelError::Transient("the connection was lost".into()),
            KernelError::forbidden("the actor may not write this row of `notes`"),
        ] {
            let again = Failure::of(&err).error();
            assert_eq!(again.code(), err.code());
            assert_eq!(again.to_string(), err.to_string());
        }
    }

    #[test]
    fn a_fault_of_the_database_keeps_its_error_as_the_cause() {
        let fault = map_sql_error(sqlx::Error::Protocol("an answer out of order".into()));
        for err in [&fault, &Failure::of(&fault).error()] {
            assert_eq!(err.code(), ErrorCode::Internal);
            let cause =
                std::error::Error::source(err).and_then(|e| e.downcast_ref::<DatabaseFault>()).expect("the fault");
            let database = std::error::Error::source(cause).expect("the database's error");
            assert!(database.to_string().contains("an answer out of order"), "{database}");
        }
    }
}
