//! What the `engine` command reports when it fails.
//!
//! An error's text says what failed, and its cause is its `source()`; [`Error::chain`] writes
//! both, as the command prints them.

/// Result with the command's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every way a command can fail.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The contract file could not be read.
    #[error("cannot read the contract {path}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The contract could not be fetched from a server.
    #[error("cannot fetch the contract from {url}: {reason}")]
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
    #[error("the contract {origin} is not JSON")]
    NotJson {
        /// The file or URL.
        origin: String,
        /// Where parsing stopped.
        source: serde_json::Error,
    },
    /// The contract does not describe a valid app.
    #[error("the contract {origin} does not describe an app")]
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
    #[error("cannot write {path}")]
    Write {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// `check --against` found changes that let someone read or write rows they could not
    /// before, and was not told to allow them.
    #[error(
        "the sync rules widen who may read or write rows ({} against {against}): review them, then pass --allow-widening",
        widening_count(*widenings)
    )]
    Widening {
        /// The older contract.
        against: String,
        /// How many changes widen.
        widenings: usize,
        /// The whole report, which the command prints before the error.
        report: String,
    },
    /// `migrate` or `jobs` was given no database.
    #[error("no database: pass --database-url or set DATABASE_URL")]
    NoDatabaseUrl,
    /// `introspect` could not read the database's schema.
    #[error("{reason}")]
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
    #[error(transparent)]
    Database(#[from] engine_runtime::Error),
}

impl Error {
    /// This error and its causes, `what failed: why: root cause`, as the `engine` command prints
    /// it.
    ///
    /// ```
    /// let missing = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
    /// let err = engine_cli::Error::Read { path: "contract.json".into(), source: missing };
    /// assert_eq!(err.to_string(), "cannot read the contract contract.json");
    /// assert_eq!(err.chain(), "cannot read the contract contract.json: no such file");
    /// ```
    pub fn chain(&self) -> String {
        engine_kernel::error::chain(self)
    }

    /// What the command found before it failed, to print as its output: the report of a
    /// [`Error::Widening`]; nothing for other errors.
    pub fn report(&self) -> Option<&str> {
        match self {
            Error::Widening { report, .. } => Some(report),
            _ => None,
        }
    }
}

/// `1 widening`, `3 widenings`.
fn widening_count(n: usize) -> String {
    if n == 1 { "1 widening".to_owned() } else { format!("{n} widenings") }
}
