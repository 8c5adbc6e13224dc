//! A server of the notes app for tests that need several server processes on one Postgres.
//!
//! Environment: `DATABASE_URL` (required), `ENGINE_SECRET` (required), `HEARTBEAT_TIMEOUT_MS`
//! (default 30000), `PORT` (default 0: any). Listens on `127.0.0.1:<PORT>` with `listen_notify`
//! realtime and prints `listening on <addr>` once it serves.

use std::time::Duration;

use engine::auth::BearerTokenAuth;
use engine::limits::Limits;
use engine::server::PresenceSettings;

#[tokio::main]
async fn main() {
    let url = std::env::var("DATABASE_URL").expect("DATABASE_URL");
    let secret = std::env::var("ENGINE_SECRET").expect("ENGINE_SECRET");
    let timeout = std::env::var("HEARTBEAT_TIMEOUT_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(30_000);
    let mut presence = PresenceSettings::default();
    presence.heartbeat_timeout = Duration::from_millis(timeout);
    let server = engine::Server::builder()
        .app(example_notes::app())
        .database_url(url.clone())
        .auth(BearerTokenAuth::new(secret))
        .limits(Limits::default().rate(0, 0))
        .realtime(engine::realtime::listen_notify(url))
        .presence(presence)
        .build()
        .await
        .expect("the server builds");
    let port: u16 = std::env::var("PORT").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("bind");
    println!("listening on {}", listener.local_addr().expect("an address"));
    server.serve(listener).await.expect("serve");
}
