//! The server instances of the soak: processes of this binary (`soak-serve`), each a notes
//! server with LISTEN/NOTIFY realtime on one database, on a port of its own that it keeps across
//! kills and restarts.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

pub(crate) struct Instance {
    pub(crate) addr: SocketAddr,
    database_url: String,
    child: Option<Child>,
}

impl Instance {
    /// Start an instance on a free port.
    pub(crate) async fn start(database_url: &str) -> Instance {
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("an address");
        let mut instance = Instance { addr: port, database_url: database_url.to_owned(), child: None };
        instance.restart().await;
        instance
    }

    /// Start the process again on its port (after a kill).
    pub(crate) async fn restart(&mut self) {
        let mut child = Command::new(std::env::current_exe().expect("this binary"))
            .arg("soak-serve")
            .env("DATABASE_URL", &self.database_url)
            .env("PORT", self.addr.port().to_string())
            .env("RUST_LOG", "error")
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start an instance");
        let mut lines = BufReader::new(child.stdout.take().expect("its output")).lines();
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .expect("the instance starts within 60 s")
            .expect("its output")
            .expect("the instance prints its address");
        assert!(line.starts_with("listening on "), "unexpected: {line}");
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        self.child = Some(child);
    }

    /// SIGKILL: no drain, no goodbye; connections and transactions in flight are cut.
    pub(crate) async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
        }
    }
}

/// The process of one instance (`soak-serve`): `DATABASE_URL` and `PORT` from the environment.
pub(crate) async fn serve() {
    let url = std::env::var("DATABASE_URL").expect("DATABASE_URL");
    let port: u16 = std::env::var("PORT").ok().and_then(|p| p.parse().ok()).expect("PORT");
    let server = engine::Server::builder()
        .app(example_notes::app())
        .database_url(url.clone())
        .auth(engine::auth::BearerTokenAuth::new(crate::db::SECRET))
        .limits(engine::limits::Limits::default().rate(0, 0))
        .realtime(engine::realtime::listen_notify(url))
        .build()
        .await
        .expect("the instance builds");
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("bind the instance's port");
    println!("listening on {}", listener.local_addr().expect("an address"));
    server.serve(listener).await.expect("serve");
}
