//! `GET /sync/stream` (`docs/protocol.md#get-syncstream`): the WebSocket (subprotocol
//! `engine.v1`) carrying pings, bucket-set changes and presence.
//!
//! - [`socket`]: one task per connection: authentication, subscription, coalescing, limits,
//!   presence.
//!
//! The sockets of a process are registered with the hub (`crate::hub`), which passes each one
//! the pings and presence of its buckets.

mod socket;

use std::sync::Arc;

use axum::extract::State;
use axum::extract::ws::WebSocketUpgrade;
use axum::http::HeaderMap;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};

use crate::error::Error;
use crate::state::ServerState;

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

/// Upgrade to the stream. A token in the `Authorization` header or the `bearer.` subprotocol is
/// checked now (401 when bad). Without one, the server's auth may still know the request by
/// other credentials (a host app's session cookie, say); otherwise the socket must authenticate
/// in its first frame.
pub(crate) async fn stream(State(state): State<Arc<ServerState>>, upgrade: WebSocketUpgrade, parts: Parts) -> Response {
    let actor = if crate::auth::bearer_token(&parts).is_some() {
        match state.auth.resolve(&parts).await {
            Some(actor) => Some(actor),
            None => return Error::Unauthenticated("the bearer token is not valid".into()).into_response(),
        }
    } else if let Some(token) = subprotocol_token(&parts.headers) {
        match state.auth.resolve_token(&token).await {
            Some(actor) => Some(actor),
            None => {
                return Error::Unauthenticated("the `bearer.` subprotocol's token is not valid".into()).into_response();
            }
        }
    } else {
        state.auth.resolve(&parts).await
    };
    if let Some(actor) = &actor
        && state.hub.sockets_of(&actor.user_id) >= state.stream_limits.sockets_per_actor
    {
        return Error::RateLimited { retry_after: std::time::Duration::from_secs(1) }.into_response();
    }
    let limits = state.stream_limits;
    // The WebSocket layer's own cap is a backstop well above the protocol's frame limit: a frame
    // over the limit is read and refused by the socket (1009), which keeps the socket able to
    // say why; past the backstop the connection is dropped.
    let backstop = (limits.max_frame_bytes * 16).max(64 * 1024);
    upgrade
        .protocols([SUBPROTOCOL])
        .max_message_size(backstop)
        .max_frame_size(backstop)
        // Client frames are small; a larger one grows the buffer to its size. The buffer is
        // resident for every idle socket, so it starts small.
        .read_buffer_size(1024)
        .write_buffer_size(0)
        .max_write_buffer_size(limits.max_frame_bytes * 4)
        .on_upgrade(move |socket| socket::run(socket, state, actor))
}
