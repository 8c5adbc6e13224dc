//! Authentication: who a request acts for. One trait, [`EngineAuth`]; one implementation per
//! scheme; and [`Authenticated`], the extractor that lets a host app's own routes authenticate as
//! the engine's do.
//!
//! - [`bearer`]: JWT bearer tokens (HS256 with the server's secret, and RS256 / EdDSA keys of an
//!   identity provider's JWKS by `kid`).

pub mod bearer;

use std::sync::Arc;

use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;
use engine_kernel::{Actor, BoxFuture};

pub use bearer::{BearerTokenAuth, issue_bearer_token, issue_bearer_token_with_claims};

use crate::error::Error;

/// Resolves the actor of a request, or refuses it (401).
pub trait EngineAuth: Send + Sync + 'static {
    /// The actor `request` acts for, or `None` when it carries no valid credentials.
    fn resolve<'a>(&'a self, request: &'a Parts) -> BoxFuture<'a, Option<Actor>>;

    /// The actor of a bare token (for WebSocket clients that send it as a subprotocol or in a
    /// first frame), or `None`.
    fn resolve_token<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Option<Actor>>;

    /// The actor `request` acts for, or the `401` that refuses it. Its detail says why (no
    /// credential; a token expired, malformed or badly signed), never echoing the token. By
    /// default it only says that no valid credential came.
    fn check<'a>(&'a self, request: &'a Parts) -> BoxFuture<'a, Result<Actor, Error>> {
        Box::pin(async move {
            self.resolve(request)
                .await
                .ok_or_else(|| Error::Unauthenticated("send a valid `Authorization: Bearer <token>`".into()))
        })
    }

    /// Why this authentication must not serve, asked once as the server is built: a
    /// [`BearerTokenAuth`] whose HS256 secret is too short to sign with. By default, nothing.
    fn check_config(&self) -> Result<(), Error> {
        Ok(())
    }

    /// The actor of a bare token, or the `401` that refuses it, as [`check`](Self::check) says.
    fn check_token<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Actor, Error>> {
        Box::pin(async move {
            self.resolve_token(token).await.ok_or_else(|| Error::Unauthenticated("the token is not valid".into()))
        })
    }
}

/// The token of an `Authorization: Bearer <token>` header.
pub(crate) fn bearer_token(parts: &Parts) -> Option<&str> {
    let value = parts.headers.get(axum::http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
}

/// The actor of a request to a host app's own route, resolved by the engine's [`EngineAuth`]; a
/// request without valid credentials is refused with the 401 problem document the engine's
/// routes answer.
///
/// The extractor takes the auth from the route's state: an `Arc<dyn EngineAuth>`
/// ([`Server::auth`](crate::Server::auth)) as the state, or a field of the host's state that
/// `#[derive(FromRef)]` gives out.
///
/// ```no_run
/// use axum::Router;
/// use axum::routing::get;
/// use engine_runtime::auth::Authenticated;
///
/// async fn me(Authenticated(actor): Authenticated) -> String {
///     actor.user_id
/// }
///
/// fn host_app(engine: &engine_runtime::Server) -> Router {
///     Router::new().route("/me", get(me)).with_state(engine.auth()).nest("/sync-api", engine.router())
/// }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Authenticated(pub Actor);

impl<S> FromRequestParts<S> for Authenticated
where
    Arc<dyn EngineAuth>: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Error> {
        let auth = Arc::<dyn EngineAuth>::from_ref(state);
        authenticate(auth.as_ref(), parts).await.map(Authenticated)
    }
}

/// The actor `request` acts for, or the engine's 401 (logged at debug level with its reason).
/// Once a request authenticates, its connection no longer counts against its address
/// (`Limits::unauthenticated_per_address`).
pub(crate) async fn authenticate(auth: &dyn EngineAuth, request: &Parts) -> Result<Actor, Error> {
    let actor = auth.check(request).await.inspect_err(|refused| {
        tracing::debug!(path = ?request.uri.path(), reason = ?refused.to_string(), "a request was refused: not authenticated");
    })?;
    crate::limits::UnauthenticatedConnection::authenticated(request);
    Ok(actor)
}
