//! A NATS server with JetStream of a test's own (`nats-server`, Debian's package), on a free port
//! with a store directory of its own, which the test may stop and start again: the machine's
//! NATS service is never touched, and parallel tests never hear each other.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::process::free_port;

pub(crate) struct NatsServer {
    child: Option<Child>,
    port: u16,
    store: PathBuf,
}

impl NatsServer {
    /// Start a server, and wait until it is ready.
    pub(crate) async fn start() -> NatsServer {
        let port = free_port();
        let store = std::env::temp_dir().join(format!("engine-nats-{}-{port}", std::process::id()));
        let mut server = NatsServer { child: None, port, store };
        server.restart().await;
        server
    }

    /// The URL clients dial.
    pub(crate) fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Kill the server; its JetStream store stays for [`NatsServer::restart`].
    pub(crate) async fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().await.unwrap();
        }
    }

    /// Start the server on the same port and store, and wait until it is ready.
    pub(crate) async fn restart(&mut self) {
        let binary = ["/usr/sbin/nats-server", "/usr/bin/nats-server"]
            .into_iter()
            .find(|path| std::path::Path::new(path).exists())
            .unwrap_or("nats-server");
        let mut child = Command::new(binary)
            .args(["-js", "-a", "127.0.0.1", "-p", &self.port.to_string(), "-sd"])
            .arg(&self.store)
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start nats-server (Debian's package `nats-server`)");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if line.contains("Server is ready") {
                    return;
                }
            }
            panic!("nats-server exited before it was ready");
        })
        .await
        .expect("nats-server is ready within 30 s");
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        self.child = Some(child);
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.start_kill();
        }
        let _ = std::fs::remove_dir_all(&self.store);
    }
}
