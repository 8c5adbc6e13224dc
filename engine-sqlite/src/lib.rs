//! SQLite plumbing shared by the engine server's SQLite store and the client's local store. It
//! knows tables and columns, no flow and no rule.
//!
//! - [`values`]: column values between their JSON (wire) form and SQLite.
//! - [`Sql`] and [`ident`]: statements built with sqlx's `QueryBuilder`, names quoted.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod values;

/// A statement being built, with its bound values.
pub type Sql = sqlx::QueryBuilder<sqlx::Sqlite>;

/// A quoted SQLite identifier.
pub fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}
