//! The HTTP face of the server: the router, and the layers every route goes through (request
//! ids, a span per request when asked, the body limit, problem documents for every error).

mod extract;
mod routes;

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderValue, Request, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tower_http::request_id::{MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer};
use tower_http::trace::TraceLayer;
use tracing::Instrument;

use crate::error::Error;
use crate::state::ServerState;

/// Request ids: UUID v7, so they sort by time in logs.
#[derive(Clone, Copy, Default)]
struct MakeUuid;

impl MakeRequestId for MakeUuid {
    fn make_request_id<B>(&mut self, _: &Request<B>) -> Option<RequestId> {
        HeaderValue::from_str(&uuid::Uuid::now_v7().to_string()).ok().map(RequestId::new)
    }
}

/// The router of a server.
pub(crate) fn router(state: Arc<ServerState>) -> Router {
    let body_limit = state.body_limit;
    let trace_requests = state.trace_requests;
    let mut routes = routes::routes().layer(tower_http::limit::RequestBodyLimitLayer::new(body_limit));
    // Blob bytes are not bound by the body limit: the signed size bounds them.
    if let Some(data) = state.blobs.as_ref().and_then(|blobs| blobs.store.routes()) {
        routes = routes.nest_service("/blobs/data", data);
    }
    let router = routes
        .fallback(|| async { Error::NotFound("no such route".into()) })
        .method_not_allowed_fallback(|| async { Error::MethodNotAllowed })
        .with_state(state)
        .layer(axum::middleware::from_fn(run_to_completion))
        .layer(axum::middleware::map_response(move |response| problem_for_plain_errors(response, body_limit)))
        .layer(PropagateRequestIdLayer::x_request_id());
    // A host app that mounts the router traces requests itself, so the span is asked for.
    let router = match trace_requests {
        true => router.layer(TraceLayer::new_for_http().make_span_with(request_span)),
        false => router,
    };
    router.layer(SetRequestIdLayer::x_request_id(MakeUuid))
}

/// Run the request on a task of its own, to its end even when its client goes away. Dropped
/// halfway, a handler could leave a pooled database session inside a transaction (sqlx does not
/// roll back a `BEGIN` cancelled before its answer arrived, and every later borrower of that
/// session fails), and a push cancelled after its commit would ping no one.
async fn run_to_completion(request: Request<Body>, next: Next) -> Response {
    match tokio::spawn(next.run(request).in_current_span()).await {
        Ok(response) => response,
        Err(err) => {
            tracing::error!(error = %err, "a request's task failed");
            Error::internal("the request's task failed").into_response()
        }
    }
}

/// The span of one request: its method, path and request id, and the actor once known.
fn request_span<B>(request: &Request<B>) -> tracing::Span {
    let id = request.headers().get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or("-");
    tracing::info_span!("request", method = %request.method(), route = %request.uri().path(), request_id = %id, actor = tracing::field::Empty)
}

/// Responses made below the handlers (the body limit's 413) become problem documents too.
async fn problem_for_plain_errors(response: Response, body_limit: usize) -> Response {
    let is_problem = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/problem+json"));
    if is_problem || response.status().is_success() || response.status() == StatusCode::SWITCHING_PROTOCOLS {
        return response;
    }
    match response.status() {
        StatusCode::PAYLOAD_TOO_LARGE => Error::PayloadTooLarge { limit: body_limit }.into_response(),
        _ => response,
    }
}
