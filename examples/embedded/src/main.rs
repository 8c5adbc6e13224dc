//! `cargo run -p example-embedded` serves a host app on 127.0.0.1:8788 with the notes engine under `/sync-api`.
//!
//! The host knows two users by development API keys, `alice-key` and `bob-key`:
//!
//! ```sh
//! curl -s http://127.0.0.1:8788/me -H 'Authorization: Bearer alice-key'
//! curl -s -X POST http://127.0.0.1:8788/sync-api/sync/pull -H 'Authorization: Bearer alice-key' -H 'content-type: application/json' -d '{"clientId":"0192f0e0-0000-7000-8000-000000000001"}'
//! curl -s http://127.0.0.1:8788/sync-api/engine/contract     # "servers": [{"url": "/sync-api"}]
//! ```
//!
//! Environment: `PORT` (8788), `HOST` (127.0.0.1), `DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/engine_embedded`, created when missing), `RUST_LOG`.

use example_embedded::{ApiKeys, SYNC_PREFIX};

const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/engine_embedded";

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,tower_http=debug,sqlx=warn".into()),
        )
        .init();
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("example-embedded: {message}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), String> {
    let port = match std::env::var("PORT") {
        Ok(port) => port.parse::<u16>().map_err(|_| format!("PORT={port} is not a port"))?,
        Err(_) => 8788,
    };
    let host = std::env::var("HOST").unwrap_or_else(|_| "127.0.0.1".into());
    let database_url = std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_DATABASE_URL.into());
    engine::storage::create_database_if_missing(&database_url).await.map_err(|e| engine::error::chain(&e))?;
    let keys = ApiKeys::new([("alice-key", "alice"), ("bob-key", "bob")]);
    let engine = example_embedded::engine(&database_url, keys).await.map_err(|e| engine::error::chain(&e))?;
    let listener = tokio::net::TcpListener::bind((host.as_str(), port))
        .await
        .map_err(|e| format!("cannot listen on {host}:{port}: {e}"))?;
    let addr = listener.local_addr().map_err(|e| engine::error::chain(&e))?;
    tracing::info!("host app on http://{addr}, the notes engine under http://{addr}{SYNC_PREFIX}");
    example_embedded::serve(&engine, listener, example_embedded::host_app(&engine))
        .await
        .map_err(|e| engine::error::chain(&e))
}
