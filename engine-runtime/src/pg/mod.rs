//! Postgres plumbing that knows no flow and no rule: opening the pool, the deadline on
//! Postgres's answers, sessions that listen, the sessions' timeouts, writing SQL text and
//! reading and binding column values.
//!
//! - `connect.rs`: the pool the store opens, and creating a database that is missing.
//! - `deadline.rs`: how long Postgres has to answer before a session is taken for lost.
//! - `listener.rs`: a session that `LISTEN`s, replaced when it goes deaf.
//! - `timeouts.rs`: the timeouts every session runs under.
//! - `sql.rs`: identifiers, literals, byte-ordered text and the engine's own object names.
//! - `values.rs`: column values between Postgres and their JSON form.

pub(crate) mod connect;
pub(crate) mod deadline;
pub(crate) mod listener;
pub(crate) mod sql;
#[cfg(test)]
pub(crate) mod test_db;
pub(crate) mod timeouts;
pub(crate) mod values;

pub use connect::create_database_if_missing;
pub use timeouts::{
    DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT, DEFAULT_LOCK_TIMEOUT, DEFAULT_LOST_AFTER, DEFAULT_STATEMENT_TIMEOUT, Timeouts,
};
