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

/// A constraint or a limit of the database that refused a mutation's write: the cause of its
/// rejection, kept whole for the operator's log (`push::log_rejection`), which names its
/// fields ([`DatabaseRefusal::sqlstate`], `table`, `constraint`).
#[derive(Debug, Clone, thiserror::Error)]
#[error("the database refused a write of the mutation")]
pub(crate) struct DatabaseRefusal(#[source] Arc<sqlx::Error>);

impl DatabaseRefusal {
    fn database(&self) -> Option<&dyn sqlx::error::DatabaseError> {
        match self.0.as_ref() {
            sqlx::Error::Database(db) => Some(db.as_ref()),
            _ => None,
        }
    }

    /// The SQLSTATE of the refusal (for SQLite, of the condition its result code names).
    pub(crate) fn sqlstate(&self) -> String {
        self.database().map(|db| crate::error::sqlstate(db).into_owned()).unwrap_or_default()
    }

    /// The table the database names, if it names one (Postgres does, SQLite does not).
    pub(crate) fn table(&self) -> Option<&str> {
        self.database().and_then(|db| db.table())
    }

    /// The constraint the database names, if it names one.
    pub(crate) fn constraint(&self) -> Option<&str> {
        self.database().and_then(|db| db.constraint())
    }
}

/// A database error as the mutation's failure, classified by SQLSTATE ([`classify`]): a
/// deterministic one in words of the domain, never the database's text, which may echo values.
/// The database's error stays the cause of a refusal ([`DatabaseRefusal`]): it is logged once,
/// with the rejection, not here, where the request's mutation is not known.
pub(crate) fn map_sql_error(err: sqlx::Error) -> KernelError {
    match classify(&err) {
        FailureClass::Transient => KernelError::Transient(err.to_string()),
        FailureClass::Fault => KernelError::Internal(Box::new(DatabaseFault(Arc::new(err)))),
        FailureClass::Deterministic => {
            let code = match &err {
                sqlx::Error::Database(db) => crate::error::sqlstate(db.as_ref()).into_owned(),
                _ => String::new(),
            };
            let (code, message) = match code.as_str() {
                // Raised by a record statement (`_engine_unconfirmed`) on the push's next path.
                "EN403" => return KernelError::forbidden(UNCONFIRMED),
                "23505" => (ErrorCode::Conflict, "a row with this key already exists".to_owned()),
                "23503" => (ErrorCode::Conflict, "a referenced row is missing".to_owned()),
                "23502" => (ErrorCode::Conflict, "a required column is null".to_owned()),
                "23514" => (ErrorCode::Conflict, "a check constraint refused the values".to_owned()),
                class if class.starts_with("23") => (ErrorCode::Conflict, "a constraint refused the write".to_owned()),
                class if class.starts_with("22") => {
                    (ErrorCode::ValidationFailed, "a value does not fit its column".to_owned())
                }
                class if class.starts_with("54") => (
                    ErrorCode::ValidationFailed,
                    "a value is over a limit of the database (too long for a key or an index)".to_owned(),
                ),
                _ => (ErrorCode::Conflict, format!("the database refused the write (SQLSTATE {code})")),
            };
            KernelError::Refused { code, message, cause: Box::new(DatabaseRefusal(Arc::new(err))) }
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
    /// The database's error, when the failure was a fault of it or its refusal.
    database: Option<Arc<sqlx::Error>>,
}

impl Failure {
    pub(crate) fn of(err: &KernelError) -> Self {
        let message = match err {
            KernelError::Validation(m)
            | KernelError::Forbidden(m)
            | KernelError::MutatorFailed(m)
            | KernelError::Conflict(m)
            | KernelError::Transient(m)
            | KernelError::Refused { message: m, .. } => m.clone(),
            other => other.to_string(),
        };
        let database = match err {
            KernelError::Internal(cause) => cause.downcast_ref::<DatabaseFault>().map(|f| f.0.clone()),
            KernelError::Refused { cause, .. } => cause.downcast_ref::<DatabaseRefusal>().map(|r| r.0.clone()),
            _ => None,
        };
        Failure { code: err.code(), message, database }
    }

    /// The failure again, in its class.
    pub(crate) fn error(&self) -> KernelError {
        match (self.code, &self.database) {
            (ErrorCode::RetryLater, _) => KernelError::Transient(self.message.clone()),
            (code @ (ErrorCode::Conflict | ErrorCode::ValidationFailed), Some(database)) => KernelError::Refused {
                code,
                message: self.message.clone(),
                cause: Box::new(DatabaseRefusal(database.clone())),
            },
            (ErrorCode::Conflict, None) => KernelError::conflict(&self.message),
            (ErrorCode::ValidationFailed, None) => KernelError::validation(&self.message),
            (ErrorCode::Forbidden, _) => KernelError::forbidden(&self.message),
            (_, Some(database)) => KernelError::Internal(Box::new(DatabaseFault(database.clone()))),
            (_, None) => KernelError::Internal(self.message.clone().into()),
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
