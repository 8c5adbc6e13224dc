//! The routes of PROTOCOL.md: pull, push, the contract and stats; and the blob tickets.

use axum::Json;
use axum::Router;
use axum::extract::State as AxumState;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use engine_kernel::ErrorCode;
use engine_kernel::wire::{
    BlobDownloadRequest, BlobTicket, BlobUploadRequest, PullRequest, PullResponse, PushRequest, PushResponse,
};
use serde_json::json;

use super::State;
use super::extract::{Authenticated, JsonBody};
use crate::error::{Error, Result};
use crate::realtime::Signal;

pub(crate) fn routes() -> Router<State> {
    Router::new()
        .route("/sync/pull", post(pull))
        .route("/sync/push", post(push))
        .route("/sync/stream", get(crate::stream::stream))
        .route(crate::CONTRACT_PATH, get(contract))
        .route("/engine/stats", get(stats))
        .route("/blobs/upload", post(blob_upload))
        .route("/blobs/download", post(blob_download))
}

fn blobs(state: &State) -> Result<&crate::blob::Blobs> {
    state.blobs.as_ref().ok_or_else(|| Error::NotFound("this server stores no blobs".into()))
}

async fn blob_upload(
    AxumState(state): AxumState<State>,
    Authenticated(_actor): Authenticated,
    JsonBody(request): JsonBody<BlobUploadRequest>,
) -> Result<Json<BlobTicket>> {
    let blobs = blobs(&state)?;
    if request.size > blobs.max_size {
        return Err(Error::PayloadTooLarge { limit: usize::try_from(blobs.max_size).unwrap_or(usize::MAX) });
    }
    Ok(Json(blobs.store.upload_url(&request.key, request.size, blobs.expiry())?))
}

async fn blob_download(
    AxumState(state): AxumState<State>,
    Authenticated(actor): Authenticated,
    JsonBody(request): JsonBody<BlobDownloadRequest>,
) -> Result<Json<BlobTicket>> {
    let blobs = blobs(&state)?;
    // Not 403: whether a blob exists is not told to who may not read it.
    if !state.storage.can_read_blob(&actor, &request.key).await? {
        return Err(Error::NotFound(format!("no row the actor can read holds blob `{}`", request.key)));
    }
    Ok(Json(blobs.store.download_url(&request.key, blobs.expiry())?))
}

async fn pull(
    AxumState(state): AxumState<State>,
    Authenticated(actor): Authenticated,
    JsonBody(request): JsonBody<PullRequest>,
) -> Result<Json<PullResponse>> {
    match state.storage.pull(&actor, &request).await {
        Ok(response) => {
            state.observer.on_pull(&actor, &request, &response);
            Ok(Json(response))
        }
        Err(err) => {
            state.observer.on_error(&err);
            Err(err)
        }
    }
}

async fn push(
    AxumState(state): AxumState<State>,
    Authenticated(actor): Authenticated,
    JsonBody(request): JsonBody<PushRequest>,
) -> Result<Json<PushResponse>> {
    let pushed = match state.storage.push(&actor, &request).await {
        Ok(pushed) => pushed,
        Err(err) => {
            state.observer.on_error(&err);
            return Err(err);
        }
    };
    // Everything in `pushed` has committed: ping its buckets, even when the push stopped.
    for bucket in &pushed.affected {
        let ping = Signal::Ping { bucket: bucket.clone(), xid: pushed.commit_xid };
        if let Err(err) = state.realtime.publish(ping).await {
            tracing::warn!(error = %err, "publishing a ping failed");
        }
    }
    for change in &pushed.membership_changes {
        if let Err(err) = state.realtime.publish(Signal::Membership(change.clone())).await {
            tracing::warn!(error = %err, "publishing a membership change failed");
        }
    }
    for result in &pushed.response.results {
        if result.error.as_ref().is_some_and(|e| e.code == ErrorCode::Conflict) {
            state.observer.on_conflict(&actor, result);
        }
    }
    state.observer.on_push(&actor, &request, &pushed.response);
    match pushed.stopped {
        Some(err) => {
            state.observer.on_error(&err);
            Err(err)
        }
        None => Ok(Json(pushed.response)),
    }
}

async fn contract(AxumState(state): AxumState<State>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], state.contract.clone())
}

async fn stats(AxumState(state): AxumState<State>, Authenticated(actor): Authenticated) -> Result<impl IntoResponse> {
    if !(state.admin)(&actor) {
        return Err(Error::Forbidden("statistics are for admins".into()));
    }
    let stats = state.storage.stats().await?;
    let mut body = json!(stats);
    body["sockets"] = state.hub.sockets().into();
    Ok(Json(body))
}
