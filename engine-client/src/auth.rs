//! Credentials: what the client sends with every request and every stream connection, asked
//! afresh each time, and refreshed when the server answers 401.

use std::sync::{Arc, Mutex};

use base64::Engine as _;
use engine_kernel::{Actor, BoxFuture};
use serde_json::Value;

use crate::error::{Error, Result};

/// Where the client's credentials come from.
///
/// `headers` is asked before every request and every (re)connection of the stream, so a provider
/// may rotate tokens on its own; `refresh` is called when the server answers 401, before the
/// request is tried again.
pub trait AuthProvider: Send + Sync + 'static {
    /// The headers to send (`authorization` among them).
    fn headers(&self) -> BoxFuture<'_, Result<Vec<(String, String)>>>;

    /// Get new credentials after the server refused the current ones.
    fn refresh(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(std::future::ready(Ok(())))
    }

    /// The actor the credentials stand for, if the provider can tell (the client needs it to
    /// run mutators locally; otherwise the builder must be given one).
    fn actor(&self) -> Option<Actor> {
        None
    }
}

/// A bearer token (`Authorization: Bearer …`), replaceable at any time.
#[derive(Debug, Clone)]
pub struct BearerToken {
    token: Arc<Mutex<String>>,
}

impl BearerToken {
    /// Credentials of `token`.
    pub fn new(token: impl Into<String>) -> Self {
        BearerToken { token: Arc::new(Mutex::new(token.into())) }
    }

    /// Use `token` from now on (the next request and the next stream connection).
    pub fn set(&self, token: impl Into<String>) {
        *self.token.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = token.into();
    }

    /// The current token.
    pub fn token(&self) -> String {
        self.token.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

impl AuthProvider for BearerToken {
    fn headers(&self) -> BoxFuture<'_, Result<Vec<(String, String)>>> {
        let header = ("authorization".to_owned(), format!("Bearer {}", self.token()));
        Box::pin(std::future::ready(Ok(vec![header])))
    }

    fn actor(&self) -> Option<Actor> {
        actor_of_token(&self.token()).ok()
    }
}

/// The actor a JWT names, read from its payload **without verifying it** (the server does
/// that): `sub` is the user id, `ownerId` the owner id (the user id when absent), and every other
/// claim is passed on.
///
/// # Errors
/// [`Error::Auth`] when the token is not a JWT with a `sub`.
pub fn actor_of_token(token: &str) -> Result<Actor> {
    let payload = token.split('.').nth(1).ok_or_else(|| Error::auth("the token is not a JWT"))?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .map_err(|_| Error::auth("the token's payload is not base64url"))?;
    let claims: serde_json::Map<String, Value> =
        serde_json::from_slice(&bytes).map_err(|_| Error::auth("the token's payload is not a JSON object"))?;
    let user = claims.get("sub").and_then(Value::as_str).ok_or_else(|| Error::auth("the token has no `sub`"))?;
    let owner = claims.get("ownerId").and_then(Value::as_str).unwrap_or(user);
    let mut actor = Actor::new(user, owner);
    for (name, value) in &claims {
        if !matches!(name.as_str(), "sub" | "ownerId") {
            actor.claims.insert(name.clone(), value.clone());
        }
    }
    Ok(actor)
}
