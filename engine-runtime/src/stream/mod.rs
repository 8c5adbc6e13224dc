//! `GET /sync/stream` (`docs/protocol.md#get-syncstream`): the WebSocket (subprotocol
//! `engine.v1`) carrying pings, bucket-set changes and presence.
//!
//! - [`socket`]: one task per connection: authentication, subscription, coalescing, limits,
//!   presence.
//!
//! - [`queue`]: a socket's bounded queue of what the hub sends it.
//!
//! - [`hub`]: one per process: which socket wants which bucket, and pings held until pulls can
//!   see their commit. It passes each socket the pings and presence of its buckets.
//!
//! - [`poll`]: `GET /sync/poll`, the pings of the hub's journal over plain HTTP, for clients
//!   whose WebSocket upgrade is refused on the way.

pub(crate) mod hub;
pub(crate) mod poll;
mod queue;
mod socket;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::ws::WebSocketUpgrade;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};

use crate::auth::EngineAuth;
use crate::error::Error;
use crate::limits::{BUSY_RETRY_AFTER, RateLimit, StreamLimits};
use crate::realtime::{PresenceSettings, Realtime};
use crate::storage::Storage;
use hub::Hub;

/// What the stream's sockets use of a server.
pub(crate) struct StreamState {
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) hub: Arc<Hub>,
    pub(crate) realtime: Arc<dyn Realtime>,
    pub(crate) auth: Arc<dyn EngineAuth>,
    pub(crate) stream_limits: StreamLimits,
    pub(crate) presence: PresenceSettings,
    pub(crate) rate_limit: Option<RateLimit>,
    /// Set once the server is shutting down: sockets close with 1012 and new ones are refused.
    pub(crate) draining: tokio::sync::watch::Sender<bool>,
}

/// The subprotocol of the stream.
pub const SUBPROTOCOL: &str = engine_kernel::wire::STREAM_SUBPROTOCOL;

/// The token a browser offers as the subprotocol `bearer.<token>`.
fn subprotocol_token(headers: &HeaderMap) -> Option<String> {
    let offered = headers.get(axum::http::header::SEC_WEBSOCKET_PROTOCOL)?.to_str().ok()?;
    offered
        .split(',')
        .map(str::trim)
        .find_map(|p| p.strip_prefix("bearer."))
        .map(str::to_owned)
        .filter(|t| !t.is_empty())
}

/// The membership claims of an actor, as the push path names them.
pub(crate) fn claims(actor: &engine_kernel::Actor) -> Vec<String> {
    let mut claims = vec![format!("user_id={}", actor.user_id), format!("owner_id={}", actor.owner_id)];
    for (name, value) in &actor.claims {
        if let Some(text) = engine_kernel::rules::buckets::param_text(value) {
            claims.push(format!("claims.{name}={text}"));
        }
    }
    claims
}

/// Upgrade to the stream. A token in the `Authorization` header or the `bearer.` subprotocol is
/// checked now (401 when bad). Without one, the server's auth may still know the request by
/// other credentials (a host app's session cookie, say); otherwise the socket must authenticate
/// in its first frame, read within a small budget, and its address may have only so many such
/// sockets waiting at once. An upgrade whose actor is known counts against the actor's request
/// rate and socket limit.
pub(crate) async fn stream(
    State(state): State<Arc<StreamState>>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
    parts: Parts,
) -> Response {
    let actor = if crate::auth::bearer_token(&parts).is_some() {
        match state.auth.check(&parts).await {
            Ok(actor) => Some(actor),
            Err(refused) => return refused.into_response(),
        }
    } else if let Some(token) = subprotocol_token(&parts.headers) {
        match state.auth.check_token(&token).await {
            Ok(actor) => Some(actor),
            Err(Error::Unauthenticated(why)) => {
                return Error::Unauthenticated(format!("the `bearer.` subprotocol's token: {why}")).into_response();
            }
            Err(refused) => return refused.into_response(),
        }
    } else {
        state.auth.resolve(&parts).await
    };
    let waits_for_subscribe = match follow(&parts) {
        Ok(waits) => waits,
        Err(refused) => return refused.into_response(),
    };
    let upgrade = match upgrade {
        Ok(upgrade) => upgrade,
        Err(refused) => {
            let detail = format!("not a WebSocket upgrade: {}", refused.body_text());
            return Error::MalformedRequest(detail).into_response();
        }
    };
    // A drain begun before the socket registers waits for it, to close it with 1012; counted
    // before the check, so a drain that began after the check sees it.
    let opening = state.hub.opening();
    if *state.draining.borrow() {
        return Error::RetryLater {
            detail: "the server is restarting: connect again".into(),
            retry_after: BUSY_RETRY_AFTER,
        }
        .into_response();
    }
    let limits = state.stream_limits;
    let mut unauthenticated = None;
    if let Some(actor) = &actor {
        if let Err(refused) = admit(&state, &actor.user_id) {
            return refused.into_response();
        }
    } else if let Some(ConnectInfo(address)) = parts.extensions.get::<ConnectInfo<SocketAddr>>() {
        // Behind a host that serves the router without connect info, addresses are unknown.
        match state.hub.admit_unauthenticated(address.ip(), limits.unauthenticated_per_address) {
            Some(admitted) => unauthenticated = Some(admitted),
            None => {
                let detail = format!(
                    "{} sockets from this address are already waiting to authenticate",
                    limits.unauthenticated_per_address
                );
                return Error::Busy { detail, retry_after: limits.auth_deadline.max(BUSY_RETRY_AFTER) }.into_response();
            }
        }
    }
    // Counted from now on as an actor's socket, or as a socket waiting for its `auth` frame.
    crate::limits::UnauthenticatedConnection::authenticated(&parts);
    // The WebSocket layer's own cap is a backstop well above the protocol's frame limit: a frame
    // over the limit is read and refused by the socket (1009), which keeps the socket able to
    // say why; past the backstop the connection is dropped. A socket that has yet to say who it
    // is gets only the first frame's budget.
    let backstop = match actor {
        Some(_) => (limits.max_frame_bytes * 16).max(64 * 1024),
        None => limits.first_frame_bytes.max(1024),
    };
    upgrade
        .protocols([SUBPROTOCOL])
        .max_message_size(backstop)
        .max_frame_size(backstop)
        // Client frames are small; a larger one grows the buffer to its size. The buffer is
        // resident for every idle socket, so it starts small.
        .read_buffer_size(1024)
        .write_buffer_size(0)
        .max_write_buffer_size(limits.max_frame_bytes * 4)
        .on_upgrade(move |socket| socket::run(socket, state, actor, unauthenticated, opening, waits_for_subscribe))
}

/// The query of `GET /sync/stream`.
#[derive(serde::Deserialize)]
struct StreamQuery {
    /// `subscription`: follow only what the socket subscribes to; absent: every bucket held.
    follow: Option<String>,
}

/// Whether the upgrade asks to follow only what the socket subscribes to (`follow=subscription`)
/// rather than every bucket held (no `follow`).
fn follow(parts: &Parts) -> Result<bool, Error> {
    let Query(query) = Query::<StreamQuery>::try_from_uri(&parts.uri)
        .map_err(|refused| Error::MalformedRequest(format!("the query: {}", refused.body_text())))?;
    match query.follow.as_deref() {
        None => Ok(false),
        Some("subscription") => Ok(true),
        Some(_) => Err(Error::MalformedRequest("`follow` is `subscription`, or absent".into())),
    }
}

/// A new socket of `user`: within the actor's request rate and socket limit, or the refusal.
pub(crate) fn admit(state: &StreamState, user: &str) -> Result<(), Error> {
    if let Some(rate) = &state.rate_limit {
        rate.check(user)?;
    }
    if state.hub.sockets_of(user) >= state.stream_limits.sockets_per_actor {
        let detail = format!("an actor holds at most {} sockets", state.stream_limits.sockets_per_actor);
        return Err(Error::Busy { detail, retry_after: BUSY_RETRY_AFTER });
    }
    Ok(())
}
