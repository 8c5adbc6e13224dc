//! The actor: who a request or a mutation acts for, as resolved by the server's auth.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// The authenticated user a request acts for.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Actor {
    /// The user id (the token's `sub`).
    pub user_id: String,
    /// The owner id written into owner columns (the token's `ownerId`).
    pub owner_id: String,
    /// Every other claim of the token; sync rules may take parameters from them.
    #[serde(default)]
    pub claims: Map<String, Value>,
}

impl Actor {
    /// An actor with no claims beyond its user and owner ids.
    pub fn new(user_id: impl Into<String>, owner_id: impl Into<String>) -> Self {
        Actor { user_id: user_id.into(), owner_id: owner_id.into(), claims: Map::new() }
    }

    /// This actor with claim `name` set to `value`.
    #[must_use]
    pub fn with_claim(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        self.claims.insert(name.into(), value.into());
        self
    }

    /// Claim `name` as a `T`, or `None` when it is absent or of another type.
    pub fn claim<T: DeserializeOwned>(&self, name: &str) -> Option<T> {
        self.claims.get(name).and_then(|v| T::deserialize(v).ok())
    }
}
