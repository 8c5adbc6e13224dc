//! Extractors: the authenticated, rate-limited actor of a request, and a JSON body that is
//! refused (never defaulted) when it is empty, malformed or too large.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use engine_kernel::Actor;
use serde::de::DeserializeOwned;

use axum::extract::FromRef;

use crate::error::Error;
use crate::limits::WorkPermit;
use crate::state::Gate;

/// The actor a request to the engine's routes acts for: authenticated (401 otherwise), within
/// its rate and with room for one more request in progress (429). The request counts as in
/// progress for as long as its handler holds the permit.
pub(crate) struct Caller(pub(crate) Actor, pub(crate) Option<WorkPermit>);

impl<S: Send + Sync> FromRequestParts<S> for Caller
where
    Arc<Gate>: FromRef<S>,
{
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Error> {
        let state = Arc::<Gate>::from_ref(state);
        let actor = match parts.extensions.remove::<super::Authenticated>() {
            Some(super::Authenticated(actor)) => actor,
            None => crate::auth::authenticate(state.auth.as_ref(), parts).await?,
        };
        tracing::Span::current().record("actor", tracing::field::debug(&actor.user_id));
        if let Some(limit) = &state.rate_limit {
            limit.check(&actor.user_id)?;
        }
        let work = state.work_limit.as_ref().map(|limit| limit.enter(&actor.user_id)).transpose()?;
        Ok(Caller(actor, work))
    }
}

/// A JSON body of type `T`.
pub(crate) struct JsonBody<T>(pub(crate) T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T>
where
    Arc<Gate>: FromRef<S>,
{
    type Rejection = Error;

    async fn from_request(request: Request, state: &S) -> Result<Self, Error> {
        let limit = Arc::<Gate>::from_ref(state).body_limit;
        let bytes: Bytes = match axum::body::to_bytes(request.into_body(), limit).await {
            Ok(bytes) => bytes,
            Err(err) => {
                let too_large = std::error::Error::source(&err)
                    .is_some_and(|e| e.is::<http_body_util::LengthLimitError>())
                    || err.to_string().contains("length limit");
                // A body cut short is the connection's fault, not the request's: retry it.
                return Err(if too_large {
                    Error::PayloadTooLarge { limit }
                } else {
                    Error::RetryLater {
                        retry_after: crate::error::RETRY_AFTER,
                        detail: format!("the body could not be read: {err}"),
                    }
                });
            }
        };
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(Error::MalformedRequest("the body is empty: send the endpoint's JSON".into()));
        }
        serde_json::from_slice(&bytes)
            .map(JsonBody)
            .map_err(|e| Error::MalformedRequest(format!("the body is not the expected JSON: {e}")))
    }
}
