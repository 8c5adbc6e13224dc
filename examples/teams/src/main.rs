//! The task board's server: `cargo run -p example-teams` serves it on 127.0.0.1:8788.
//!
//! Environment: `PORT` (8788), `HOST` (127.0.0.1), `DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/engine_teams`, created when missing), `ENGINE_SECRET` (the
//! token signing secret, 32 bytes at least; a development default otherwise), `RUST_LOG`.

use engine::auth::BearerTokenAuth;

/// The signing secret when `ENGINE_SECRET` is not set. Development only.
const DEVELOPMENT_SECRET: &str = "engine-teams-development-secret-change-me";
const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/engine_teams";

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match serve().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("example-teams: {message}");
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
    let port: u16 = match std::env::var("PORT") {
        Ok(text) => text.trim().parse().map_err(|_| format!("PORT={text} is not a port"))?,
        Err(_) => 8788,
    };
    let host = std::env::var("HOST").unwrap_or_else(|_| "127.0.0.1".into());
    let database_url = std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_DATABASE_URL.into());
    let secret = match std::env::var("ENGINE_SECRET") {
        Ok(secret) if !secret.is_empty() => secret,
        _ => {
            // Anyone can sign tokens with the published secret: only this machine may be served so.
            let loopback = host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
            if !loopback {
                return Err(format!(
                    "ENGINE_SECRET is not set, and the development secret is public: set ENGINE_SECRET to serve on {host}"
                ));
            }
            tracing::warn!("ENGINE_SECRET is not set: signing tokens with the development secret");
            DEVELOPMENT_SECRET.to_owned()
        }
    };
    if engine::storage::create_database_if_missing(&database_url).await.map_err(|e| engine::error::chain(&e))? {
        tracing::info!(database_url, "created the database");
    }
    let server = engine::Server::builder()
        .app(example_teams::app())
        .database_url(database_url)
        .auth(BearerTokenAuth::new(secret))
        .build()
        .await
        .map_err(|e| engine::error::chain(&e))?;
    let listener = tokio::net::TcpListener::bind((host.as_str(), port))
        .await
        .map_err(|e| format!("cannot listen on {host}:{port}: {e}"))?;
    let addr = listener.local_addr().map_err(|e| engine::error::chain(&e))?;
    tracing::info!("task board on http://{addr}");
    server.serve(listener).await.map_err(|e| engine::error::chain(&e))
}
