//! The routes of `docs/protocol.md`: pull, push, poll, the edge relay's tickets, the contract and
//! stats; and the blob tickets.
//! Each handler extracts, calls its service (`crate::service`) and answers.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Extension, NestedPath, Query, State};
use axum::http::header;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use engine_kernel::wire::{
    BlobDownloadRequest, BlobTicket, BlobUploadRequest, EdgeTickets, PollAnswer, PullRequest, PushRequest, PushResponse,
};

use super::ClientGone;
use super::extract::{Caller, JsonBody};
use crate::contract::ServedContract;
use crate::error::{Error, Result};
use crate::service::{BlobAccess, Operator, SyncService};
use crate::state::ServerState;
use crate::stream::StreamState;

pub(crate) fn routes() -> Router<ServerState> {
    Router::new()
        .route("/sync/pull", post(pull))
        .route("/sync/push", post(push))
        .route("/sync/stream", get(crate::stream::stream))
        .route("/sync/poll", get(poll))
        .route("/sync/edge-tickets", get(edge_tickets))
        .route(crate::CONTRACT_PATH, get(contract))
        .route("/engine/stats", get(stats))
        .route("/engine/metrics", get(metrics))
        .route("/blobs/upload", post(blob_upload))
        .route("/blobs/download", post(blob_download))
}

async fn pull(
    State(sync): State<Arc<SyncService>>,
    Caller(actor, _work): Caller,
    JsonBody(request): JsonBody<PullRequest>,
) -> Result<Response> {
    let pulled = sync.pull(&actor, &request).await?;
    // The page is written as JSON around the rows' own texts (`Pulled::to_json`).
    Ok(([(header::CONTENT_TYPE, "application/json")], pulled.to_json()?).into_response())
}

async fn push(
    State(sync): State<Arc<SyncService>>,
    Caller(actor, _work): Caller,
    JsonBody(request): JsonBody<PushRequest>,
) -> Result<Json<PushResponse>> {
    Ok(Json(sync.push(&actor, &request).await?))
}

/// The query of `GET /sync/poll`.
#[derive(serde::Deserialize)]
struct PollQuery {
    /// The position the previous answer gave; none on the first poll.
    position: Option<String>,
    /// How long to wait for a frame, in seconds.
    wait: Option<u64>,
}

async fn poll(
    State(stream): State<Arc<StreamState>>,
    Caller(actor, work): Caller,
    query: Result<Query<PollQuery>, QueryRejection>,
    Extension(gone): Extension<ClientGone>,
) -> Result<Json<PollAnswer>> {
    let Query(query) =
        query.map_err(|refused| Error::MalformedRequest(format!("the query: {}", refused.body_text())))?;
    let wait = query.wait.map_or(crate::stream::poll::DEFAULT_POLL_WAIT, Duration::from_secs);
    Ok(Json(crate::stream::poll::poll(&stream, &actor, query.position.as_deref(), wait, work, gone.wait()).await?))
}

/// Tickets for the edge relay: one per bucket the actor holds now, so that a member whose
/// membership was revoked gets none for the bucket (`docs/protocol.md#get-syncedge-tickets`).
async fn edge_tickets(
    State(stream): State<Arc<StreamState>>,
    Caller(actor, _work): Caller,
) -> Result<Json<EdgeTickets>> {
    let relay = stream.realtime.relay().ok_or_else(|| Error::NotFound("this server relays to no edge".into()))?;
    let held = stream.storage.held_buckets(&actor).await?;
    Ok(Json(relay.tickets(&held)))
}

async fn blob_upload(
    State(blobs): State<Arc<BlobAccess>>,
    Caller(actor, _work): Caller,
    JsonBody(request): JsonBody<BlobUploadRequest>,
) -> Result<Json<BlobTicket>> {
    Ok(Json(blobs.upload(actor, request).await?))
}

async fn blob_download(
    State(blobs): State<Arc<BlobAccess>>,
    Caller(actor, _work): Caller,
    JsonBody(request): JsonBody<BlobDownloadRequest>,
) -> Result<Json<BlobTicket>> {
    Ok(Json(blobs.download(&actor, &request).await?))
}

/// The contract, naming in `servers` the prefix the router is nested under, if any.
async fn contract(State(contract): State<Arc<ServedContract>>, request: Parts) -> impl IntoResponse {
    let nested = request.extensions.get::<NestedPath>().map(NestedPath::as_str);
    ([(header::CONTENT_TYPE, "application/json")], contract.bytes(nested))
}

async fn stats(State(operator): State<Arc<Operator>>, Caller(actor, _work): Caller) -> Result<impl IntoResponse> {
    Ok(Json(operator.stats(&actor).await?))
}

/// The server's metrics in Prometheus' text format, for admins.
async fn metrics(State(operator): State<Arc<Operator>>, Caller(actor, _work): Caller) -> Result<impl IntoResponse> {
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], operator.metrics(&actor).await?))
}
