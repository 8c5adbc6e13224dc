//! The HTTP face of the server: the router, and the layers every route goes through (request
//! ids, a span per request when asked, authentication from the headers and then the body read
//! whole within its limit and timeout before anything answers, problem documents for every
//! error).

mod connections;
mod extract;
mod routes;

pub use crate::limits::Peer;
pub(crate) use connections::set_nodelay;
pub use connections::{Connection, Connections};

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderValue, Method, Request, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tower_http::request_id::{MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer};
use tower_http::trace::TraceLayer;
use tracing::Instrument;

use std::sync::Arc;

use engine_kernel::Actor;

use crate::error::Error;
use crate::state::{Gate, ServerState};

/// The actor `read_body_first` authenticated from a request's headers, for the route's
/// `Caller` to take rather than ask again.
#[derive(Clone)]
pub(crate) struct Authenticated(pub(crate) Actor);

/// Resolves once the client of a request has gone away: `run_to_completion` drops its sender
/// when the connection drops the request, which no handler notices by itself, since each runs on
/// a task of its own. A poll (`GET /sync/poll`) waits on it, so that one whose client vanished
/// gives its place back at once rather than at the end of its wait.
#[derive(Clone)]
pub(crate) struct ClientGone(tokio::sync::watch::Receiver<()>);

impl ClientGone {
    pub(crate) async fn wait(mut self) {
        // Nothing is ever sent: `changed` ends when the sender is dropped.
        while self.0.changed().await.is_ok() {}
    }
}

/// Request ids: UUID v7, so they sort by time in logs.
#[derive(Clone, Copy, Default)]
struct MakeUuid;

impl MakeRequestId for MakeUuid {
    fn make_request_id<B>(&mut self, _: &Request<B>) -> Option<RequestId> {
        HeaderValue::from_str(&uuid::Uuid::now_v7().to_string()).ok().map(RequestId::new)
    }
}

/// The router of a server.
pub(crate) fn router(state: ServerState) -> Router {
    let gate = state.gate.clone();
    let trace_requests = state.trace_requests;
    let mut routes = routes::routes().layer(axum::middleware::from_fn_with_state(gate, read_body_first));
    // Blob bytes are not bound by the body limit: the signed size bounds them.
    let data = match (&state.blobs.blobs, &state.blobs.ledger) {
        (Some(blobs), Some(ledger)) => blobs.store.routes(ledger.clone()),
        _ => None,
    };
    if let Some(data) = data {
        routes = routes.nest_service("/blobs/data", data);
    }
    let router = routes
        .fallback(|| async { Error::NotFound("no such route".into()) })
        .method_not_allowed_fallback(|| async { Error::MethodNotAllowed })
        .with_state(state)
        .layer(axum::middleware::from_fn(run_to_completion))
        .layer(axum::middleware::from_fn(peer_address))
        .layer(PropagateRequestIdLayer::x_request_id());
    // A host app that mounts the router traces requests itself, so the span is asked for.
    let router = match trace_requests {
        true => router.layer(TraceLayer::new_for_http().make_span_with(request_span)),
        false => router,
    };
    router.layer(SetRequestIdLayer::x_request_id(MakeUuid))
}

/// Give a request served by [`Connections`] its peer's address as `ConnectInfo<SocketAddr>`, as
/// a request served with `into_make_service_with_connect_info::<SocketAddr>()` has it, and its
/// connection's count against the address, for the request to end once it authenticates.
pub(crate) async fn peer_address(mut request: Request<Body>, next: Next) -> Response {
    if let Some(ConnectInfo(peer)) = request.extensions().get::<ConnectInfo<Peer>>() {
        let (address, unauthenticated) = (peer.address(), peer.unauthenticated());
        request.extensions_mut().insert(ConnectInfo(address));
        request.extensions_mut().insert(unauthenticated);
    }
    next.run(request).await
}

/// Run the request on a task of its own, to its end even when its client goes away. Dropped
/// halfway, a handler could leave a pooled database session inside a transaction (sqlx does not
/// roll back a `BEGIN` cancelled before its answer arrived, and every later borrower of that
/// session fails), and a push cancelled after its commit would ping no one.
async fn run_to_completion(mut request: Request<Body>, next: Next) -> Response {
    let (_here, gone) = tokio::sync::watch::channel(());
    request.extensions_mut().insert(ClientGone(gone));
    match tokio::spawn(next.run(request).in_current_span()).await {
        Ok(response) => response,
        Err(err) => {
            tracing::error!(error = ?crate::error::Chain(&err), "a request's task failed");
            Error::internal("the request's task failed").into_response()
        }
    }
}

/// The span of one request: its method, path and request id, the actor once known, and a push's
/// mutator names (never their arguments). The path and the request id go unquoted (`%`): neither
/// can hold a control character (HTTP refuses one in a request's target, and `HeaderValue::to_str`
/// takes visible ASCII only); the actor and the names are recorded quoted.
fn request_span<B>(request: &Request<B>) -> tracing::Span {
    let id = request.headers().get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or("-");
    tracing::info_span!("request", method = %request.method(), route = %request.uri().path(), request_id = %id, actor = tracing::field::Empty, mutators = tracing::field::Empty)
}

/// Read an authenticated request's body whole, within the body limit and the body read timeout,
/// before the route sees the request, so that every answer of the route, a refusal included
/// (429, 403), leaves the connection ready for the next request: an answer sent while the body is
/// still arriving makes the server close the connection once the answer is out, and a client
/// that had already sent its next request on it would get no answer at all. A request without a
/// valid token is answered from its headers, its body never read (a stranger holds no memory
/// of the server's); so is a body over the limit, and one that does not arrive in time: those
/// answers say `Connection: close`, and so does the answer to a body cut short.
async fn read_body_first(State(gate): State<Arc<Gate>>, request: Request<Body>, next: Next) -> Response {
    if matches!(*request.method(), Method::GET | Method::HEAD) {
        return next.run(request).await;
    }
    let limit = gate.body_limit;
    let declared =
        request.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit as u64) {
        return closing(Error::PayloadTooLarge { limit }.into_response());
    }
    let (mut parts, body) = request.into_parts();
    match crate::auth::authenticate(gate.auth.as_ref(), &parts).await {
        Ok(actor) => {
            parts.extensions.insert(Authenticated(actor));
        }
        Err(refused) => return closing(refused.into_response()),
    }
    let Ok(read) = tokio::time::timeout(gate.body_read_timeout, axum::body::to_bytes(body, limit)).await else {
        let detail = format!("the body did not arrive within {} ms of the headers", gate.body_read_timeout.as_millis());
        return closing(Error::RetryLater { retry_after: crate::error::RETRY_AFTER, detail }.into_response());
    };
    match read {
        Ok(bytes) => next.run(Request::from_parts(parts, Body::from(bytes))).await,
        Err(err) => {
            let too_large = std::error::Error::source(&err).is_some_and(|e| e.is::<http_body_util::LengthLimitError>());
            // A body cut short is the connection's fault, not the request's: retry it.
            closing(
                match too_large {
                    true => Error::PayloadTooLarge { limit },
                    false => Error::RetryLater {
                        retry_after: crate::error::RETRY_AFTER,
                        detail: format!("the body could not be read: {err}"),
                    },
                }
                .into_response(),
            )
        }
    }
}

/// `response` with `Connection: close`: the request's body was not read to its end, so the
/// connection cannot carry another request.
fn closing(mut response: Response) -> Response {
    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}
