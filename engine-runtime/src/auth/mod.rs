//! Authentication: who a request acts for. One trait, [`EngineAuth`]; one implementation per
//! scheme.
//!
//! - [`bearer`]: JWT bearer tokens (HS256 with the server's secret, and RS256 / EdDSA keys of an
//!   identity provider's JWKS by `kid`).

pub mod bearer;

use axum::http::request::Parts;
use engine_kernel::{Actor, BoxFuture};

pub use bearer::{BearerTokenAuth, issue_bearer_token};

/// Resolves the actor of a request, or refuses it (401).
pub trait EngineAuth: Send + Sync + 'static {
    /// The actor `request` acts for, or `None` when it carries no valid credentials.
    fn resolve<'a>(&'a self, request: &'a Parts) -> BoxFuture<'a, Option<Actor>>;

    /// The actor of a bare token (for WebSocket clients that send it as a subprotocol or in a
    /// first frame), or `None`.
    fn resolve_token<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Option<Actor>>;
}

/// The token of an `Authorization: Bearer <token>` header.
pub(crate) fn bearer_token(parts: &Parts) -> Option<&str> {
    let value = parts.headers.get(axum::http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
}
