//! An existing axum service that mounts the engine. The host has routes of its own (`/health`,
//! `/me`), middleware of its own (tower-http's `TraceLayer` over everything), and users of its
//! own: API keys it issued, sent as bearer tokens. [`ApiKeys`] is the host's [`EngineAuth`], so
//! the engine's routes, nested under [`SYNC_PREFIX`], know the same users; the host's `/me`
//! resolves them through the engine's [`Authenticated`] extractor.
//!
//! Three things a host does for the engine: it nests [`Server::router`] under a prefix (the
//! served contract names it), it serves on the engine's listener ([`serve`]: `TCP_NODELAY`, and
//! connections that have yet to authenticate bounded), and it traces requests itself (the
//! engine's router opens no span of its own).

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{FromRef, State};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::routing::get;
use axum::{Json, Router};
use engine::Actor;
use engine::auth::{Authenticated, EngineAuth};
use engine::server::{BoxFuture, Peer, Server};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tower_http::trace::TraceLayer;

/// Where the engine's routes live in the host app.
pub const SYNC_PREFIX: &str = "/sync-api";

/// The host's users, known by the API keys it issued them. A real service keeps them in its
/// own database; the engine needs only the [`EngineAuth`] answer: who a request acts for.
#[derive(Debug, Clone, Default)]
pub struct ApiKeys {
    users: HashMap<String, String>,
}

impl ApiKeys {
    /// Keys, each with the user id it stands for.
    pub fn new<'a>(keys: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        ApiKeys { users: keys.into_iter().map(|(key, user)| (key.to_owned(), user.to_owned())).collect() }
    }

    /// The actor of `key`: the user owns what it writes.
    fn actor(&self, key: &str) -> Option<Actor> {
        self.users.get(key).map(|user| Actor::new(user, user))
    }
}

impl EngineAuth for ApiKeys {
    fn resolve<'a>(&'a self, request: &'a Parts) -> BoxFuture<'a, Option<Actor>> {
        Box::pin(async move {
            let header = request.headers.get(AUTHORIZATION)?.to_str().ok()?;
            self.actor(header.strip_prefix("Bearer ")?.trim())
        })
    }

    // A WebSocket client sends its key as the `bearer.<key>` subprotocol or in an `auth` frame.
    fn resolve_token<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Option<Actor>> {
        Box::pin(async move { self.actor(token) })
    }
}

/// What the host's own routes share. `FromRef` hands the engine's auth to [`Authenticated`].
#[derive(Clone, FromRef)]
struct HostState {
    auth: Arc<dyn EngineAuth>,
    name: &'static str,
}

/// The notes app's engine on `database_url`, knowing the host's users.
pub async fn engine(database_url: &str, keys: ApiKeys) -> engine::server::Result<Server> {
    Server::builder().app(example_notes::app()).database_url(database_url).auth(keys).build().await
}

/// The host app: its own routes, the engine's under [`SYNC_PREFIX`], and its `TraceLayer`
/// around both.
pub fn host_app(engine: &Server) -> Router {
    let state = HostState { auth: engine.auth(), name: "embedded example" };
    Router::new()
        .route("/health", get(|| async { "ok" }))
        .route("/me", get(me))
        .with_state(state)
        .nest(SYNC_PREFIX, engine.router())
        .layer(TraceLayer::new_for_http())
}

/// Who the caller is, by the same auth the engine's routes use; without a valid key, the
/// engine's 401 problem document.
async fn me(Authenticated(actor): Authenticated, State(host): State<HostState>) -> Json<Value> {
    Json(json!({"service": host.name, "userId": actor.user_id, "ownerId": actor.owner_id}))
}

/// Serve `app` on `listener` until the task is dropped, on the engine's
/// [`connections`](Server::connections): `TCP_NODELAY` goes on every accepted connection (the
/// engine's stream sends small frames, and without it the second of two in a row waits for the
/// client's delayed acknowledgement, about 40 ms), and connections that have yet to authenticate
/// a request are bounded per address and in time. [`Peer`] is the connect info they need.
pub fn serve(
    engine: &Server,
    listener: TcpListener,
    app: Router,
) -> impl Future<Output = std::io::Result<()>> + Send + 'static {
    axum::serve(engine.connections(listener), app.into_make_service_with_connect_info::<Peer>()).into_future()
}
