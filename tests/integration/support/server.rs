//! A running server on a real TCP port, for tests that speak HTTP to it.

use std::net::SocketAddr;

use engine::auth::BearerTokenAuth;
use engine::server::ServerBuilder;
use engine::{Server, limits::Limits};

use super::TestDb;
use super::db::{Backend, backend};

/// The signing secret of test servers.
pub(crate) const SECRET: &str = "the integration tests' HS256 secret, 32 bytes";

/// A server of the notes app on `127.0.0.1:<ephemeral port>`, stopped when dropped.
pub(crate) struct TestServer {
    pub(crate) addr: SocketAddr,
    pub(crate) http: reqwest::Client,
    task: tokio::task::JoinHandle<()>,
    /// The server's Postgres database and a store on it, to wait for its pull horizon
    /// (`settle`); none on SQLite, where every committed change is visible.
    horizon: Option<(sqlx::PgPool, engine::storage::PostgresStorage)>,
}

impl TestServer {
    /// The notes app on `db`, with `configure` applied to the builder (auth and generous limits
    /// are set first; `configure` may replace them).
    pub(crate) async fn start(db: &TestDb, configure: impl FnOnce(ServerBuilder) -> ServerBuilder) -> TestServer {
        let builder = Server::builder()
            .app(example_notes::app())
            .storage(db.store(engine::storage::StoreLimits::default()))
            .auth(BearerTokenAuth::new(SECRET))
            .limits(Limits::default().rate(0, 0));
        let server = configure(builder).build().await.expect("the server builds");
        let mut served = TestServer::serve_engine(&server).await;
        if backend() == Backend::Postgres {
            let pool = db.pg().clone();
            let store = engine::storage::PostgresStorage::new(pool.clone(), std::sync::Arc::new(example_notes::app()));
            served.horizon = Some((pool, store));
        }
        served
    }

    /// Wait until every commit so far is visible to pulls (the pull horizon has passed it): a
    /// pull right after another actor's push may otherwise not see it yet, as the protocol
    /// allows. A server of `serve` has no store of ours to ask: nothing is waited for.
    pub(crate) async fn settle(&self) {
        if let Some((pool, store)) = &self.horizon {
            super::db::settle(pool, store).await;
        }
    }

    /// Serve `server` as `Server::serve` serves it: connections counted by address until they
    /// authenticate a request, and closed when none has by their deadline.
    pub(crate) async fn serve_engine(server: &Server) -> TestServer {
        let listener = server.connections(tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap());
        let addr = axum::serve::Listener::local_addr(&listener).unwrap();
        let router = server.router().into_make_service_with_connect_info::<engine::server::Peer>();
        let task = tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        TestServer { addr, http: reqwest::Client::new(), task, horizon: None }
    }

    /// Serve any router (a host app with the engine nested in it, say).
    pub(crate) async fn serve(router: axum::Router) -> TestServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, router.into_make_service_with_connect_info::<SocketAddr>()).await.unwrap();
        });
        TestServer { addr, http: reqwest::Client::new(), task, horizon: None }
    }

    /// Stop serving, and wait until the server has let go of `db`, its database, so that
    /// another server may open it (on SQLite one process serves a file).
    pub(crate) async fn stop(mut self, db: &TestDb) {
        self.task.abort();
        let _ = (&mut self.task).await;
        db.released().await;
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// A token of the test secret.
    pub(crate) fn token(user: &str) -> String {
        engine::auth::issue_bearer_token(user, user, SECRET, std::time::Duration::from_secs(600)).unwrap()
    }

    /// A token of the test secret for `root`, with the `admin` claim that `/engine/stats` asks.
    pub(crate) fn admin_token() -> String {
        let mut claims = serde_json::Map::new();
        claims.insert("admin".into(), true.into());
        engine::server::auth::bearer::issue_bearer_token_with_claims(
            "root",
            "root",
            SECRET,
            std::time::Duration::from_secs(60),
            claims,
        )
        .unwrap()
    }

    /// `/engine/stats`, read as an admin.
    pub(crate) async fn stats(&self) -> serde_json::Value {
        let request = self.http.get(self.url("/engine/stats")).bearer_auth(Self::admin_token());
        request.send().await.unwrap().json().await.unwrap()
    }

    /// POST `body` (raw) to `path` as `user` (none: no `Authorization`).
    pub(crate) async fn post(
        &self,
        path: &str,
        user: Option<&str>,
        body: impl Into<reqwest::Body>,
    ) -> reqwest::Response {
        let mut request = self.http.post(self.url(path)).header("content-type", "application/json").body(body);
        if let Some(user) = user {
            request = request.bearer_auth(Self::token(user));
        }
        request.send().await.unwrap()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
