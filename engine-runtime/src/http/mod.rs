//! The HTTP face of the server: the router, its shared state, and the layers every route goes
//! through (request ids, tracing, the body limit, problem documents for every error).

mod extract;
mod routes;

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderValue, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use engine_kernel::Actor;
use tower_http::request_id::{MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

use crate::auth::EngineAuth;
use crate::error::Error;
use crate::limits::RateLimit;
use crate::observer::Observer;
use crate::realtime::Realtime;
use crate::storage::Storage;

/// Decides whether an actor may read `/engine/stats`.
pub(crate) type AdminCriterion = Arc<dyn Fn(&Actor) -> bool + Send + Sync>;

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct State(pub(crate) Arc<Shared>);

pub(crate) struct Shared {
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) hub: Arc<crate::stream::Hub>,
    pub(crate) stream_limits: crate::stream::StreamLimits,
    pub(crate) presence: crate::server::PresenceSettings,
    pub(crate) auth: Arc<dyn EngineAuth>,
    pub(crate) realtime: Arc<dyn Realtime>,
    pub(crate) observer: Arc<dyn Observer>,
    pub(crate) rate_limit: Option<RateLimit>,
    pub(crate) body_limit: usize,
    pub(crate) admin: AdminCriterion,
    pub(crate) contract: Bytes,
    /// Background work (tombstone collection, limiter housekeeping) that lives as long as the
    /// router does.
    pub(crate) _background: crate::server::Background,
    /// The blob store, when the server has one.
    pub(crate) blobs: Option<crate::blob::Blobs>,
    /// The job worker, when the server runs jobs: dropped with the last router.
    pub(crate) _jobs: Option<crate::jobs::JobWorker>,
}

impl std::ops::Deref for State {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
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
pub(crate) fn router(state: State) -> Router {
    let body_limit = state.body_limit;
    let trace = TraceLayer::new_for_http().make_span_with(|request: &Request<_>| {
        let id = request.headers().get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or("-");
        tracing::info_span!("request", method = %request.method(), route = %request.uri().path(), request_id = %id, actor = tracing::field::Empty)
    });
    let mut routes = routes::routes().layer(tower_http::limit::RequestBodyLimitLayer::new(body_limit));
    // Blob bytes are not bound by the body limit: the signed size bounds them.
    if let Some(data) = state.blobs.as_ref().and_then(|blobs| blobs.store.routes()) {
        routes = routes.nest_service("/blobs/data", data);
    }
    routes
        .fallback(|| async { Error::NotFound("no such route".into()) })
        .method_not_allowed_fallback(|| async { Error::MethodNotAllowed })
        .with_state(state)
        .layer(axum::middleware::map_response(move |response| problem_for_plain_errors(response, body_limit)))
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(trace)
        .layer(SetRequestIdLayer::x_request_id(MakeUuid))
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
