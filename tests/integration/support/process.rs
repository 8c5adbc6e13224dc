//! Server processes (`engine-test-server`) on a test database, for multi-instance tests.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::server::SECRET;

pub(crate) struct ServerProcess {
    child: Child,
    pub(crate) addr: SocketAddr,
}

impl ServerProcess {
    /// Start a server on `database_url` whose presences expire after `heartbeat_timeout`.
    pub(crate) async fn start(database_url: &str, heartbeat_timeout: Duration) -> ServerProcess {
        Self::start_on(database_url, heartbeat_timeout, 0).await
    }

    /// Start a server on port `port` (0: any).
    pub(crate) async fn start_on(database_url: &str, heartbeat_timeout: Duration, port: u16) -> ServerProcess {
        Self::start_with(database_url, heartbeat_timeout, port, &[]).await
    }

    /// Start a server with more environment (`JOB_RUNS`, …: see `engine-test-server`).
    pub(crate) async fn start_with(
        database_url: &str,
        heartbeat_timeout: Duration,
        port: u16,
        env: &[(&str, String)],
    ) -> ServerProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_engine-test-server"))
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .env("DATABASE_URL", database_url)
            .env("PORT", port.to_string())
            .env("ENGINE_SECRET", SECRET)
            .env("HEARTBEAT_TIMEOUT_MS", heartbeat_timeout.as_millis().to_string())
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start engine-test-server");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the server starts within 30 s")
            .unwrap()
            .expect("the server prints its address");
        let addr = line.strip_prefix("listening on ").expect("`listening on <addr>`").parse().unwrap();
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        ServerProcess { child, addr }
    }

    /// Stop the process as a deploy does, with SIGTERM, and wait for it to exit; it must exit
    /// cleanly.
    pub(crate) async fn terminate(&mut self) {
        let pid = self.child.id().expect("the server runs").to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().await.unwrap();
        assert!(sent.success(), "kill -TERM {pid}");
        let exit = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("the server exits within 30 s of SIGTERM")
            .unwrap();
        assert!(exit.success(), "the server exits cleanly after SIGTERM: {exit}");
    }

    /// Kill the process with SIGKILL: it gets no chance to clean up.
    pub(crate) async fn kill(&mut self) {
        self.child.kill().await.unwrap();
    }
}

/// A port free now, for a server process to be started (and restarted) on.
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}
