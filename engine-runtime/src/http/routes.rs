//! The routes of `docs/protocol.md`: pull, push, the contract and stats; and the blob tickets.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use axum::Json;
use axum::Router;
use axum::extract::{NestedPath, State};
use axum::http::header;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use engine_kernel::ErrorCode;
use engine_kernel::wire::{BlobDownloadRequest, BlobTicket, BlobUploadRequest, PullRequest, PushRequest, PushResponse};
use serde_json::json;

use super::extract::{Caller, JsonBody};
use crate::blob::Upload;
use crate::error::{Error, Result};
use crate::metrics;
use crate::realtime::Signal;
use crate::state::ServerState;
use crate::storage::Pulled;

pub(crate) fn routes() -> Router<Arc<ServerState>> {
    Router::new()
        .route("/sync/pull", post(pull))
        .route("/sync/push", post(push))
        .route("/sync/stream", get(crate::stream::stream))
        .route(crate::CONTRACT_PATH, get(contract))
        .route("/engine/stats", get(stats))
        .route("/engine/metrics", get(metrics))
        .route("/blobs/upload", post(blob_upload))
        .route("/blobs/download", post(blob_download))
}

fn blobs(state: &ServerState) -> Result<&crate::blob::Blobs> {
    state.blobs.as_ref().ok_or_else(|| Error::NotFound("this server stores no blobs".into()))
}

async fn blob_upload(
    State(state): State<Arc<ServerState>>,
    Caller(actor, _work): Caller,
    JsonBody(request): JsonBody<BlobUploadRequest>,
) -> Result<Json<BlobTicket>> {
    let blobs = blobs(&state)?;
    if request.size > blobs.max_size {
        return Err(Error::PayloadTooLarge { limit: usize::try_from(blobs.max_size).unwrap_or(usize::MAX) });
    }
    // Bytes the actor uploaded before count once; the store checks the quota again on upload.
    if let Some(quota) = blobs.quota
        && !blobs.store.uploaders(&request.key).await?.contains(&actor.user_id)
    {
        let used = blobs.store.usage(&actor.user_id).await?;
        if used.saturating_add(request.size) > quota {
            return Err(Error::OverQuota { quota, used });
        }
    }
    let upload = Upload::new(request.key, request.size, actor.user_id, blobs.quota);
    Ok(Json(blobs.store.upload_url(&upload, blobs.expiry())?))
}

async fn blob_download(
    State(state): State<Arc<ServerState>>,
    Caller(actor, _work): Caller,
    JsonBody(request): JsonBody<BlobDownloadRequest>,
) -> Result<Json<BlobTicket>> {
    let blobs = blobs(&state)?;
    // Not 403, and the same answer whether or not the bytes exist: whether a blob exists is not
    // told to who may not read it.
    // Rows are looked at even when nobody uploaded the bytes, so the answer takes as long.
    let uploaders = blobs.store.uploaders(&request.key).await?;
    if !state.storage.can_read_blob(&actor, &request.key, &uploaders).await? {
        return Err(Error::NotFound(format!("no row the actor can read holds blob `{}`", request.key)));
    }
    Ok(Json(blobs.store.download_url(&request.key, blobs.expiry())?))
}

async fn pull(
    State(state): State<Arc<ServerState>>,
    Caller(actor, _work): Caller,
    JsonBody(request): JsonBody<PullRequest>,
) -> Result<Response> {
    let started = Instant::now();
    match state.storage.pull(&actor, &request).await {
        Ok(response) => {
            state.observer.on_pull(&actor, &request, &response);
            metrics::pulled(started.elapsed());
            page_json(&response)
        }
        Err(err) => {
            state.observer.on_error(&err);
            metrics::request_failed(metrics::Route::Pull, err.code());
            Err(err)
        }
    }
}

async fn push(
    State(state): State<Arc<ServerState>>,
    Caller(actor, _work): Caller,
    JsonBody(request): JsonBody<PushRequest>,
) -> Result<Json<PushResponse>> {
    let started = Instant::now();
    let names: BTreeSet<&str> = request.mutations.iter().map(|m| m.name.as_str()).collect();
    tracing::Span::current().record("mutators", names.into_iter().collect::<Vec<_>>().join(","));
    let pushed = match state.storage.push(&actor, &request).await {
        Ok(pushed) => pushed,
        Err(err) => {
            state.observer.on_error(&err);
            metrics::request_failed(metrics::Route::Push, err.code());
            return Err(err);
        }
    };
    // Everything in `pushed` has committed: signal it, even when the push stopped. Membership
    // changes go first and each is tried: one that cannot be sent has this process's sockets
    // recompute their buckets all the same (other processes' sockets do when their link's
    // listening session is replaced, or at their next membership signal). Pings are hints: once the
    // realtime link does not answer, the rest are not sent, so the push is answered without
    // waiting on each, and sockets learn of the rows from their next pull.
    for change in &pushed.membership_changes {
        if let Err(err) = state.realtime.publish(Signal::Membership(change.clone())).await {
            tracing::warn!(error = %err, "publishing a membership change failed; this process's sockets resync");
            let _ = state.realtime.publish(Signal::Resync).await;
        }
    }
    for bucket in &pushed.affected {
        let ping = Signal::Ping { bucket: bucket.clone(), xid: pushed.commit_xid };
        match state.realtime.publish(ping).await {
            Ok(()) => {}
            Err(err @ Error::Unanswered { .. }) => {
                tracing::warn!(error = %err, "publishing the push's pings stopped");
                break;
            }
            Err(err) => tracing::warn!(error = %err, "publishing a ping failed"),
        }
    }
    for result in &pushed.response.results {
        if result.error.as_ref().is_some_and(|e| e.code == ErrorCode::Conflict) {
            state.observer.on_conflict(&actor, result);
        }
    }
    state.observer.on_push(&actor, &request, &pushed.response);
    metrics::pushed(started.elapsed(), &pushed.response);
    match pushed.stopped {
        Some(err) => {
            state.observer.on_error(&err);
            metrics::request_failed(metrics::Route::Push, err.code());
            Err(err)
        }
        None => Ok(Json(pushed.response)),
    }
}

/// A pull's answer as JSON.
fn page_json(response: &Pulled) -> Result<Response> {
    Ok(([(header::CONTENT_TYPE, "application/json")], response.to_json()?).into_response())
}

/// The contract, naming in `servers` the prefix the router is nested under, if any.
async fn contract(State(state): State<Arc<ServerState>>, request: Parts) -> impl IntoResponse {
    let nested = request.extensions.get::<NestedPath>().map(NestedPath::as_str);
    ([(header::CONTENT_TYPE, "application/json")], state.contract.bytes(nested))
}

async fn stats(State(state): State<Arc<ServerState>>, Caller(actor, _work): Caller) -> Result<impl IntoResponse> {
    if !(state.admin)(&actor) {
        return Err(Error::Forbidden("statistics are for admins".into()));
    }
    let stats = state.storage.stats().await?;
    let mut body = json!(stats);
    body["sockets"] = state.hub.sockets().into();
    Ok(Json(body))
}

/// The server's metrics in Prometheus' text format, for admins.
async fn metrics(State(state): State<Arc<ServerState>>, Caller(actor, _work): Caller) -> Result<impl IntoResponse> {
    if !(state.admin)(&actor) {
        return Err(Error::Forbidden("metrics are for admins".into()));
    }
    let Some(prometheus) = &state.prometheus else {
        return Err(Error::NotFound("this server exports no metrics: build it with `.prometheus(true)`".into()));
    };
    let gauges = state.storage.gauges().await?;
    let text = prometheus.render(&gauges, state.hub.sockets());
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text))
}
