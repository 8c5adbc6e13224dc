//! The notes quickstart: `cargo run -p example-notes` serves the notes app on 127.0.0.1:8787,
//! its web UI at `/` beside the protocol's routes.
//!
//! - `cargo run -p example-notes -- token --user alice` prints a development token for `alice`.
//! - `cargo run -p example-notes -- contract` prints the app's contract.
//!
//! Environment: `PORT` (8787), `HOST` (127.0.0.1), `DATABASE_URL` (default
//! `sqlite://engine_notes.db`, a file in the working directory; `postgres://user@host/database`
//! serves on Postgres, the database created when missing), `ENGINE_SECRET` (the
//! token signing secret, 32 bytes at least; a development default otherwise, which serves loopback addresses only),
//! `ENGINE_RATE_LIMIT` (requests a second per actor, 0 turns the limit off), `ENGINE_BODY_LIMIT`
//! (bytes), `ENGINE_REALTIME`
//! (`in_process`, the default; `listen_notify` for several instances on one Postgres database;
//! a NATS URL such as `nats://127.0.0.1:4222` for several instances through a NATS server
//! with JetStream; or `edge`, pings also relayed to the edge relay (`@engine/edge`) at
//! `ENGINE_EDGE_URL`, signed with `ENGINE_EDGE_SECRET`, its tickets good for
//! `ENGINE_EDGE_TICKET_SECONDS`, 120 by default), `ENGINE_BLOB_DIR` (where the images attached to
//! notes are kept, default `./engine_notes_blobs`), `RUST_LOG`.

use std::time::Duration;

use clap::{Parser, Subcommand};
use engine::auth::{BearerTokenAuth, issue_bearer_token_with_claims};
use engine::limits::Limits;

mod web;

/// The signing secret when `ENGINE_SECRET` is not set. Development only.
const DEVELOPMENT_SECRET: &str = "engine-notes-development-secret-change-me";
/// The store when `DATABASE_URL` is not set: a SQLite file, so that the quickstart needs no
/// database server.
const DEFAULT_DATABASE_URL: &str = "sqlite://engine_notes.db";
/// Where blobs are kept when `ENGINE_BLOB_DIR` is not set.
const DEFAULT_BLOB_DIR: &str = "engine_notes_blobs";

#[derive(Parser)]
#[command(name = "example-notes", about = "The notes app: an engine quickstart")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the notes app (the default).
    Serve,
    /// Print a development token.
    Token {
        /// The user id (`sub`).
        #[arg(long)]
        user: String,
        /// The owner id (`ownerId`); the user id when not given.
        #[arg(long)]
        owner: Option<String>,
        /// Lifetime in seconds.
        #[arg(long, default_value_t = 3600)]
        ttl: u64,
        /// With the `admin` claim, which `/engine/stats` and `/engine/metrics` ask for.
        #[arg(long)]
        admin: bool,
    },
    /// Print the notes app's contract (OpenAPI 3.1).
    Contract,
}

fn secret() -> (String, bool) {
    match std::env::var("ENGINE_SECRET") {
        Ok(secret) if !secret.is_empty() => (secret, false),
        _ => (DEVELOPMENT_SECRET.to_owned(), true),
    }
}

fn env_number<T: std::str::FromStr>(name: &str) -> Result<Option<T>, String> {
    match std::env::var(name) {
        Ok(text) => text.trim().parse().map(Some).map_err(|_| format!("{name}={text} is not a number")),
        Err(_) => Ok(None),
    }
}

/// The edge relay `ENGINE_EDGE_URL`, `ENGINE_EDGE_SECRET` and `ENGINE_EDGE_TICKET_SECONDS` name.
fn edge_relay() -> Result<engine::realtime::edge::Edge, String> {
    let url = std::env::var("ENGINE_EDGE_URL").map_err(|_| "ENGINE_REALTIME=edge needs ENGINE_EDGE_URL".to_owned())?;
    let secret =
        std::env::var("ENGINE_EDGE_SECRET").map_err(|_| "ENGINE_REALTIME=edge needs ENGINE_EDGE_SECRET".to_owned())?;
    let relay = engine::realtime::edge(url, secret);
    Ok(match env_number::<u64>("ENGINE_EDGE_TICKET_SECONDS")? {
        Some(seconds) => relay.ticket_lifetime(Duration::from_secs(seconds)),
        None => relay,
    })
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => serve().await,
        Command::Token { user, owner, ttl, admin } => {
            let owner = owner.unwrap_or_else(|| user.clone());
            let mut claims = serde_json::Map::new();
            if admin {
                claims.insert("admin".into(), true.into());
            }
            issue_bearer_token_with_claims(&user, &owner, secret().0, Duration::from_secs(ttl), claims)
                .map(|token| println!("{token}"))
                .map_err(|e| engine::error::chain(&e))
        }
        Command::Contract => {
            let contract = engine::contract(&example_notes::app());
            println!("{}", serde_json::to_string_pretty(&contract).expect("the contract serializes"));
            Ok(())
        }
    };
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("example-notes: {message}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn serve() -> Result<(), String> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,sqlx=warn".into()),
        )
        .init();
    let port: u16 = env_number("PORT")?.unwrap_or(8787);
    let host = std::env::var("HOST").unwrap_or_else(|_| "127.0.0.1".into());
    let database_url = match std::env::var("DATABASE_URL") {
        Ok(url) => url,
        Err(_) => {
            tracing::info!(
                "DATABASE_URL is not set: serving from the SQLite file ./engine_notes.db \
                 (DATABASE_URL=postgres://postgres@127.0.0.1:5432/engine_notes serves from Postgres)"
            );
            DEFAULT_DATABASE_URL.into()
        }
    };
    let mut limits = Limits::default();
    if let Some(bytes) = env_number::<usize>("ENGINE_BODY_LIMIT")? {
        limits = limits.body_bytes(bytes);
    }
    if let Some(rate) = env_number::<u32>("ENGINE_RATE_LIMIT")? {
        limits = limits.rate(rate, rate.saturating_mul(4));
    }
    let (secret, development) = secret();
    if development {
        // Anyone can sign tokens with the published secret: only this machine may be served so.
        let loopback = host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
        if !loopback {
            return Err(format!(
                "ENGINE_SECRET is not set, and the development secret is public: set ENGINE_SECRET to serve on {host}"
            ));
        }
        tracing::warn!("ENGINE_SECRET is not set: signing tokens with the development secret");
    }
    if engine::storage::sqlite_path(&database_url).is_none() {
        let created = engine::storage::create_database_if_missing(&database_url).await.map_err(|e| {
            // The one place the server is named: say how to name another.
            format!(
                "{}; DATABASE_URL names the database to use (unset, the notes app serves from a SQLite file)",
                engine::error::chain(&e)
            )
        })?;
        if created {
            tracing::info!(database_url, "created the database");
        }
    }
    let builder = engine::Server::builder().app(example_notes::app());
    let builder = match engine::storage::sqlite_path(&database_url) {
        Some(path) => builder.storage(engine::storage::sqlite(path).limits(example_notes::store_limits())),
        None => builder.storage(engine::storage::postgres(database_url.clone()).limits(example_notes::store_limits())),
    };
    let blob_dir = std::env::var("ENGINE_BLOB_DIR").unwrap_or_else(|_| DEFAULT_BLOB_DIR.into());
    // Not the token secret itself: a blob URL's signature and a token's are never the same key.
    let blobs = example_notes::blobs(blob_dir, format!("blobs:{secret}"));
    let builder = builder
        .blobs(blobs)
        .auth(BearerTokenAuth::new(secret))
        .limits(limits)
        .presence(example_notes::presence())
        .jobs(example_notes::jobs::jobs())
        .trace_requests(true)
        .prometheus(true);
    let builder = match std::env::var("ENGINE_REALTIME").as_deref() {
        Ok("listen_notify") => builder.realtime(engine::realtime::listen_notify(database_url)),
        Ok(url) if url.starts_with("nats://") => builder.realtime(engine::realtime::nats(url)),
        Ok("edge") => builder.realtime(edge_relay()?),
        Ok("in_process") | Err(_) => builder,
        Ok(other) => {
            return Err(format!(
                "ENGINE_REALTIME={other}: use `in_process`, `listen_notify`, a NATS URL (`nats://127.0.0.1:4222`) \
                 or `edge`"
            ));
        }
    };
    let server = builder.build().await.map_err(|e| engine::error::chain(&e))?;
    let listener = tokio::net::TcpListener::bind((host.as_str(), port))
        .await
        .map_err(|e| format!("cannot listen on {host}:{port}: {e}"))?;
    let addr = listener.local_addr().map_err(|e| engine::error::chain(&e))?;
    tracing::info!("notes app on http://{addr}");
    tracing::info!("get a token: cargo run -p example-notes -- token --user alice");
    if development {
        // Development sign-in links for the web UI (the token rides in the fragment, which the
        // browser never sends).
        for user in ["alice", "bob"] {
            let token =
                engine::auth::issue_bearer_token(user, user, DEVELOPMENT_SECRET, Duration::from_secs(24 * 3600))
                    .map_err(|e| engine::error::chain(&e))?;
            tracing::info!("open the web app as {user}: http://{addr}/#token={token}");
        }
    }
    server
        .serve_beside(listener, web::routes(development.then_some(DEVELOPMENT_SECRET)))
        .await
        .map_err(|e| engine::error::chain(&e))
}
