//! The `engine` command.
//!
//! - `engine check <CONTRACT> [--against <OLD> [--allow-widening]]`: read an app's contract and
//!   summarize its tables, sync rules and mutators, after checking them as the server would.
//!   `--against` compares its sync rules with an older contract's and reports, per rule and
//!   table, each change that widens or narrows who may read or write rows, widenings first; it
//!   fails on a widening unless `--allow-widening` is given.
//! - `engine migrate <CONTRACT> --database-url <URL>`: provision a Postgres database for the app
//!   the contract describes, exactly as the app's server would at start-up. `--plan` changes
//!   nothing: with a database it prints what provisioning would change there, as a diff (nothing
//!   when the database is current); without one, the whole plan's SQL. Drift (a column whose
//!   type, nullability or key differs from the app's) is an error either way.
//! - `engine gen <CONTRACT> [--out FILE]`: write the TypeScript module of the app for the
//!   TypeScript client: row and argument types, typed mutator calls, sync rules and bucket keys,
//!   and the schema the client is built with.
//! - `engine introspect --database-url <URL> [--schema public] [--tables a,b] [--out FILE]`: read
//!   an existing database's tables and write the Rust source of a starter app for them: tables,
//!   sync rules guessed from owner columns and memberships, the app, example mutators.
//! - `engine jobs list | retry <ID>… | discard <ID>… --database-url <URL>`: the background jobs
//!   of a database (Postgres or a SQLite file), newest first (`--state dead` for the failed ones);
//!   run dead jobs again, or delete jobs that are not running.
//!
//! `<CONTRACT>` is a file holding the JSON of `GET /engine/contract`, or the URL of a running
//! server (its `/engine/contract` is fetched) or of the contract itself.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod check;
mod error;
mod introspect;
mod jobs;
mod migrate;
mod source;
mod typescript;

use clap::{Parser, Subcommand};

pub use error::{Error, Result};
pub use source::{Contract, load_contract};
pub use typescript::typescript;

/// `engine`: tools for an engine app's contract and database.
#[derive(Debug, Parser)]
#[command(name = "engine", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Read a contract and list its tables, sync rules and mutators; with `--against`, report how
    /// its sync rules change who may read or write rows.
    Check {
        /// A contract file, or the URL of a server or of its contract.
        contract: String,
        /// An older contract of the same app (a file or URL): report every change of the sync
        /// rules that widens or narrows who may read or write rows, and fail on a widening.
        #[arg(long, value_name = "OLD_CONTRACT")]
        against: Option<String>,
        /// Report widenings without failing on them.
        #[arg(long, requires = "against")]
        allow_widening: bool,
    },
    /// Provision a Postgres database for the app a contract describes.
    Migrate {
        /// A contract file, or the URL of a server or of its contract.
        contract: String,
        /// The database to provision (`postgres://user@host:port/db`).
        #[arg(long, env = "DATABASE_URL", required_unless_present = "plan")]
        database_url: Option<String>,
        /// Create the database first if it does not exist.
        #[arg(long)]
        create_database: bool,
        /// Change nothing: print what provisioning would change in the database, as a diff
        /// (nothing when it is current), or the whole plan's SQL when no database is given.
        #[arg(long)]
        plan: bool,
    },
    /// Write the TypeScript module of the app a contract describes, for `@engine/client`.
    Gen {
        /// A contract file, or the URL of a server or of its contract.
        contract: String,
        /// The file to write; the module is printed when absent.
        #[arg(long)]
        out: Option<std::path::PathBuf>,
    },
    /// Look at a database's background jobs; run dead ones again or discard them.
    Jobs {
        /// The database (`postgres://user@host:port/db`, or `sqlite://path`).
        #[arg(long, env = "DATABASE_URL", global = true)]
        database_url: Option<String>,
        #[command(subcommand)]
        command: jobs::JobsCommand,
    },
    /// Write a starter app (Rust source) for the tables of an existing database.
    Introspect {
        /// The database to read (`postgres://user@host:port/db`).
        #[arg(long, env = "DATABASE_URL")]
        database_url: String,
        /// The schema whose tables are read.
        #[arg(long, default_value = "public")]
        schema: String,
        /// Only these tables (comma-separated); every table of the schema when absent.
        #[arg(long, value_delimiter = ',')]
        tables: Option<Vec<String>>,
        /// The file to write; the source is printed when absent.
        #[arg(long)]
        out: Option<std::path::PathBuf>,
    },
}

impl Cli {
    /// Run the command; what it reports on success.
    ///
    /// # Errors
    /// [`Error`] says what could not be read, what the contract got wrong, or what the database
    /// refused.
    pub async fn run(self) -> Result<String> {
        match self.command {
            Command::Check { contract, against: None, .. } => check::check(&load_contract(&contract).await?),
            Command::Check { contract, against: Some(old), allow_widening } => {
                check::against(&load_contract(&contract).await?, &load_contract(&old).await?, allow_widening)
            }
            Command::Migrate { contract, plan: true, database_url: None, .. } => {
                migrate::plan(&load_contract(&contract).await?)
            }
            Command::Migrate { contract, plan: true, database_url: Some(url), .. } => {
                migrate::diff(&load_contract(&contract).await?, &url).await
            }
            Command::Migrate { contract, database_url, create_database, plan: false } => {
                let doc = load_contract(&contract).await?;
                let url = database_url.ok_or(Error::NoDatabaseUrl)?;
                migrate::migrate(&doc, &url, create_database).await
            }
            Command::Jobs { database_url, command } => {
                jobs::run(command, &database_url.ok_or(Error::NoDatabaseUrl)?).await
            }
            Command::Gen { contract, out } => {
                let module = typescript(&load_contract(&contract).await?)?;
                match out {
                    None => Ok(module),
                    Some(path) => {
                        std::fs::write(&path, &module)
                            .map_err(|source| Error::Write { path: path.display().to_string(), source })?;
                        Ok(format!("wrote {}\n", path.display()))
                    }
                }
            }
            Command::Introspect { database_url, schema, tables, out } => {
                introspect::introspect(introspect::Request {
                    url: &database_url,
                    schema: &schema,
                    tables: tables.as_deref(),
                    out: out.as_deref(),
                })
                .await
            }
        }
    }
}
