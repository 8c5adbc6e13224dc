//! A server of the notes app for tests that need several server processes on one Postgres.
//!
//! Environment: `DATABASE_URL` (required), `ENGINE_SECRET` (required), `HEARTBEAT_TIMEOUT_MS`
//! (default 30000), `PORT` (default 0: any). Listens on `127.0.0.1:<PORT>` with `listen_notify`
//! realtime (in-process on a `sqlite://` file; with `NATS_URL`, NATS realtime under the prefix
//! `NATS_PREFIX`, default `engine`), serves its metrics at `/engine/metrics`, and prints
//! `listening on <addr>` once it serves.
//!
//! With `JOB_RUNS` (a file), it runs the notes app's `list_shared` jobs: each run appends
//! `start <job> <attempt> <pid>` to the file, sleeps `JOB_SLEEP_MS` (default 0), and appends
//! `done <job> <attempt> <pid>`; `JOB_TIMEOUT_MS` (default 60000) is the jobs' timeout.

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
        .presence(presence)
        .prometheus(true);
    // A SQLite file is served by one process: its realtime is in the process.
    let server = match (std::env::var("NATS_URL"), engine::storage::sqlite_path(&url)) {
        (Ok(nats), _) => {
            let prefix = std::env::var("NATS_PREFIX").unwrap_or_else(|_| engine::realtime::nats::DEFAULT_PREFIX.into());
            server.realtime(engine::realtime::nats(nats).prefix(prefix))
        }
        (Err(_), Some(_)) => server,
        (Err(_), None) => server.realtime(engine::realtime::listen_notify(url)),
    };
    let server = match std::env::var("JOB_RUNS") {
        Ok(file) => server.jobs(recording_jobs(file)),
        Err(_) => server,
    };
    let server = server.build().await.expect("the server builds");
    let port: u16 = std::env::var("PORT").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("bind");
    println!("listening on {}", listener.local_addr().expect("an address"));
    server.serve(listener).await.expect("serve");
}

fn env_ms(name: &str, default: u64) -> Duration {
    Duration::from_millis(std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default))
}

/// `list_shared` jobs that record their runs in `file`.
fn recording_jobs(file: String) -> engine::server::Jobs {
    let sleep = env_ms("JOB_SLEEP_MS", 0);
    let record = move |event: &str, ctx: &engine::server::JobCtx| {
        use std::io::Write;
        let line = format!("{event} {} {} {}\n", ctx.id(), ctx.attempt(), std::process::id());
        let mut out = std::fs::OpenOptions::new().create(true).append(true).open(&file).expect("open JOB_RUNS");
        out.write_all(line.as_bytes()).expect("write JOB_RUNS");
    };
    engine::server::Jobs::new().timeout(env_ms("JOB_TIMEOUT_MS", 60_000)).poll_interval(Duration::from_millis(200)).job(
        example_notes::jobs::LIST_SHARED,
        move |ctx, _: example_notes::jobs::ListShared| {
            let record = record.clone();
            async move {
                record("start", &ctx);
                tokio::time::sleep(sleep).await;
                record("done", &ctx);
                Ok(())
            }
        },
    )
}
