//! What the `engine` command reports when it fails.

/// Result with the command's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every way a command can fail.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The contract file could not be read.
    #[error("cannot read the contract {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The contract could not be fetched from a server.
    #[error("cannot fetch the contract from {url}: {reason}{}", source.as_ref().map(|s| format!(": {s}")).unwrap_or_default())]
    Fetch {
        /// Where from.
        url: String,
        /// What went wrong.
        reason: String,
        /// The HTTP client's error behind it, when there is one.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// What was read is not JSON.
    #[error("the contract {origin} is not JSON: {source}")]
    NotJson {
        /// The file or URL.
        origin: String,
        /// Where parsing stopped.
        source: serde_json::Error,
    },
    /// The contract does not describe a valid app.
    #[error("the contract {origin} does not describe an app: {source}")]
    Contract {
        /// The file or URL.
        origin: String,
        /// What does not fit.
        source: engine_kernel::Error,
    },
    /// The contract has something `gen` cannot write TypeScript for.
    #[error("cannot generate TypeScript for the contract {origin}: {reason}")]
    Generate {
        /// The file or URL.
        origin: String,
        /// What stands in the way.
        reason: String,
    },
    /// A file could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// `migrate` was given no database.
    #[error("no database: pass --database-url or set DATABASE_URL")]
    NoDatabaseUrl,
    /// `introspect` could not read the database's schema.
    #[error("{reason}: {source}")]
    Introspect {
        /// What was being read.
        reason: String,
        /// The database's error.
        source: sqlx::Error,
    },
    /// `introspect` found no table it can write an app for.
    #[error("nothing to introspect: {reason}")]
    NothingUsable {
        /// What was found instead.
        reason: String,
    },
    /// The database refused or failed.
    #[error("{0}")]
    Database(#[from] engine_runtime::Error),
}
