//! JWT bearer tokens (`docs/protocol.md#authentication`): claims `sub` (the user id), `ownerId`,
//! `iat` and `exp`, all required; every other claim is passed to the actor.
//!
//! Tokens signed with HS256 are checked against the server's secret only, which is
//! [`MIN_SECRET_BYTES`] long at least; tokens signed with
//! RS256/384/512, PS256/384/512 or EdDSA are checked against the key of their `kid` in a JWKS,
//! and only when the token's algorithm is that key's. So `alg: none`, a bad signature, an expired
//! token, a token without a required claim, and a token of one family signed with a key of
//! another (the HS/RS confusion) are all refused.
//!
//! A token verified is kept until it expires: a client sends the same token with
//! every request, and checking an RS256 signature is a public-key operation each time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::request::Parts;
use engine_kernel::{Actor, BoxFuture};
use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, JwkSet, KeyAlgorithm};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::{EngineAuth, bearer_token};
use crate::error::{Error, Result};

/// How far clocks may disagree when checking `exp`, `iat` and `nbf`.
pub const LEEWAY: Duration = Duration::from_secs(30);

/// The default lifetime of an issued token.
pub const DEFAULT_TOKEN_TTL: Duration = Duration::from_secs(3600);

/// The shortest HS256 secret signed or verified with, in bytes: as long as the hash's output
/// (RFC 7518 §3.2). Refused, not warned about: with an empty secret, anyone signs tokens the
/// server takes.
pub const MIN_SECRET_BYTES: usize = 32;

/// The most tokens kept verified at once.
const VERIFIED_TOKENS: usize = 10_000;

/// Tokens verified lately, by the SHA-256 of their text, each with its actor, until its `exp`
/// (and the leeway) passes. Only tokens that verified are kept, so a stranger fills nothing;
/// at the bound, the expired ones go, and when none has, all of them. Emptied when the keys
/// change.
#[derive(Default)]
struct Verified(Mutex<HashMap<[u8; 32], (Actor, u64)>>);

impl Verified {
    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], (Actor, u64)>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The actor of the token whose digest is `digest`, if it was verified and has not expired.
    fn get(&self, digest: &[u8; 32]) -> Option<Actor> {
        let mut entries = self.entries();
        match entries.get(digest) {
            Some((actor, until)) if now_secs() < *until => Some(actor.clone()),
            Some(_) => {
                entries.remove(digest);
                None
            }
            None => None,
        }
    }

    fn insert(&self, digest: [u8; 32], actor: &Actor, exp: u64) {
        let mut entries = self.entries();
        if entries.len() >= VERIFIED_TOKENS {
            let now = now_secs();
            entries.retain(|_, (_, until)| now < *until);
            if entries.len() >= VERIFIED_TOKENS {
                entries.clear();
            }
        }
        entries.insert(digest, (actor.clone(), exp.saturating_add(LEEWAY.as_secs())));
    }

    fn clear(&self) {
        self.entries().clear();
    }
}

/// Bearer-token authentication. Build with [`BearerTokenAuth::new`]; add an identity
/// provider's keys with [`with_jwks`](Self::with_jwks) (and rotate them with
/// [`set_jwks`](Self::set_jwks)); with a provider other apps share, name this app's
/// [`issuer`](Self::issuer) and [`audience`](Self::audience), so tokens minted for the others
/// are refused. A token with an `aud` is refused unless an audience is set.
#[derive(Clone)]
pub struct BearerTokenAuth {
    secret: Option<Arc<DecodingKey>>,
    /// The length of an HS256 secret given shorter than [`MIN_SECRET_BYTES`]: then `secret` is
    /// none, and the server refuses to build ([`EngineAuth::check_config`]).
    short_secret: Option<usize>,
    jwks: Arc<RwLock<Vec<(String, Algorithm, DecodingKey)>>>,
    /// The `iss` every token must carry, when set.
    issuer: Option<Arc<str>>,
    /// The `aud` every token must carry, when set.
    audience: Option<Arc<str>>,
    verified: Arc<Verified>,
}

impl std::fmt::Debug for BearerTokenAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kids: Vec<String> =
            self.jwks.read().map(|k| k.iter().map(|(kid, _, _)| kid.clone()).collect()).unwrap_or_default();
        f.debug_struct("BearerTokenAuth").field("secret", &self.secret.is_some()).field("jwks", &kids).finish()
    }
}

impl BearerTokenAuth {
    /// Tokens signed with HS256 and `secret`, of [`MIN_SECRET_BYTES`] at least (a server with a
    /// shorter one refuses to build, and verifies no HS256 token).
    pub fn new(secret: impl AsRef<[u8]>) -> Self {
        let secret = secret.as_ref();
        let short = secret.len() < MIN_SECRET_BYTES;
        BearerTokenAuth {
            secret: (!short).then(|| Arc::new(DecodingKey::from_secret(secret))),
            short_secret: short.then_some(secret.len()),
            jwks: Arc::default(),
            issuer: None,
            audience: None,
            verified: Arc::default(),
        }
    }

    /// Accept only tokens whose `iss` is `issuer` (the identity provider's).
    pub fn issuer(mut self, issuer: impl Into<String>) -> Self {
        self.issuer = Some(issuer.into().into());
        // What a clone without the issuer verified is not this one's.
        self.verified = Arc::default();
        self
    }

    /// Accept only tokens whose `aud` is, or includes, `audience` (this app's).
    pub fn audience(mut self, audience: impl Into<String>) -> Self {
        self.audience = Some(audience.into().into());
        self.verified = Arc::default();
        self
    }

    /// Tokens of an identity provider only (no shared secret).
    pub fn jwks_only(jwks: &JwkSet) -> Result<Self> {
        let auth = BearerTokenAuth {
            secret: None,
            short_secret: None,
            jwks: Arc::default(),
            issuer: None,
            audience: None,
            verified: Arc::default(),
        };
        auth.set_jwks(jwks)?;
        Ok(auth)
    }

    /// Also accept tokens signed by the keys of `jwks` (RS256/384/512, PS256/384/512, EdDSA), by
    /// `kid`.
    pub fn with_jwks(self, jwks: &JwkSet) -> Result<Self> {
        self.set_jwks(jwks)?;
        Ok(self)
    }

    /// Replace the identity provider's keys (key rotation): tokens of removed keys are refused
    /// from now on.
    pub fn set_jwks(&self, jwks: &JwkSet) -> Result<()> {
        let mut keys = Vec::new();
        for jwk in &jwks.keys {
            let Some(kid) = jwk.common.key_id.clone() else { continue };
            let Some(algorithm) = asymmetric_algorithm(jwk) else { continue };
            let key = DecodingKey::from_jwk(jwk).map_err(|e| Error::config_from(format!("JWKS key `{kid}`"), e))?;
            keys.push((kid, algorithm, key));
        }
        *self.jwks.write().unwrap_or_else(std::sync::PoisonError::into_inner) = keys;
        self.verified.clear();
        Ok(())
    }

    /// The actor of `token`, or why it is refused.
    pub fn verify(&self, token: &str) -> Result<Actor> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(actor) = self.verified.get(&digest) {
            return Ok(actor);
        }
        let claims = self.verify_signed(token)?;
        let exp = claims.get("exp").and_then(Value::as_u64).unwrap_or(0);
        let actor = actor_of(claims)?;
        self.verified.insert(digest, &actor, exp);
        Ok(actor)
    }

    /// The claims of `token` once its signature and claims are checked.
    fn verify_signed(&self, token: &str) -> Result<Map<String, Value>> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| unauthenticated("the token is malformed: it is not a JWT (`header.claims.signature`)"))?;
        let claims = match header.alg {
            Algorithm::HS256 => {
                let key = self.secret.as_deref().ok_or_else(|| unauthenticated("HS256 tokens are not accepted"))?;
                self.decode(token, key, Algorithm::HS256)?
            }
            alg => {
                let kid = header.kid.as_deref().ok_or_else(|| unauthenticated("the token names no key (`kid`)"))?;
                let keys = self.jwks.read().unwrap_or_else(std::sync::PoisonError::into_inner);
                let (_, key_alg, key) = keys
                    .iter()
                    .find(|(k, _, _)| k == kid)
                    .ok_or_else(|| unauthenticated(&format!("no key `{kid}` is trusted")))?;
                if *key_alg != alg {
                    return Err(unauthenticated("the token's algorithm is not its key's"));
                }
                self.decode(token, key, alg)?
            }
        };
        Ok(claims)
    }

    fn decode(&self, token: &str, key: &DecodingKey, alg: Algorithm) -> Result<Map<String, Value>> {
        let mut validation = Validation::new(alg);
        validation.algorithms = vec![alg];
        validation.leeway = LEEWAY.as_secs();
        validation.validate_exp = true;
        validation.validate_nbf = true;
        let mut required = vec!["exp", "iat", "sub"];
        if let Some(issuer) = &self.issuer {
            validation.set_issuer(&[issuer]);
            required.push("iss");
        }
        if let Some(audience) = &self.audience {
            validation.set_audience(&[audience]);
            required.push("aud");
        }
        validation.set_required_spec_claims(&required);
        decode(token, key, &validation)
    }
}

/// Refuse an HS256 secret shorter than [`MIN_SECRET_BYTES`], of `len` bytes.
fn check_secret_len(len: usize) -> Result<()> {
    if len >= MIN_SECRET_BYTES {
        return Ok(());
    }
    Err(Error::config(format!(
        "the HS256 token secret has {len} bytes: give `BearerTokenAuth::new` (and `issue_bearer_token`) a random \
         secret of {MIN_SECRET_BYTES} bytes at least, such as the output of `openssl rand -hex 32`"
    )))
}

fn unauthenticated(why: &str) -> Error {
    Error::Unauthenticated(why.to_owned())
}

/// The algorithm of an asymmetric JWK; symmetric keys are never taken from a JWKS.
fn asymmetric_algorithm(jwk: &Jwk) -> Option<Algorithm> {
    let declared = jwk.common.key_algorithm.and_then(|a| match a {
        KeyAlgorithm::RS256 => Some(Algorithm::RS256),
        KeyAlgorithm::RS384 => Some(Algorithm::RS384),
        KeyAlgorithm::RS512 => Some(Algorithm::RS512),
        KeyAlgorithm::PS256 => Some(Algorithm::PS256),
        KeyAlgorithm::PS384 => Some(Algorithm::PS384),
        KeyAlgorithm::PS512 => Some(Algorithm::PS512),
        KeyAlgorithm::EdDSA => Some(Algorithm::EdDSA),
        _ => None,
    });
    match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => declared.filter(|a| !matches!(a, Algorithm::EdDSA)).or(Some(Algorithm::RS256)),
        AlgorithmParameters::OctetKeyPair(_) => Some(Algorithm::EdDSA),
        _ => None,
    }
}

fn decode(token: &str, key: &DecodingKey, validation: &Validation) -> Result<Map<String, Value>> {
    let data = jsonwebtoken::decode::<Map<String, Value>>(token, key, validation).map_err(|e| {
        use jsonwebtoken::errors::ErrorKind;
        unauthenticated(match e.kind() {
            ErrorKind::ExpiredSignature => "the token has expired: get a fresh one",
            ErrorKind::InvalidSignature => {
                "the token has a bad signature: it was not signed by a key this server trusts"
            }
            ErrorKind::InvalidToken | ErrorKind::Base64(_) | ErrorKind::Json(_) | ErrorKind::Utf8(_) => {
                "the token is malformed: its parts are not base64url JSON"
            }
            ErrorKind::InvalidAlgorithm => "the token's algorithm is not accepted",
            ErrorKind::MissingRequiredClaim(_) => {
                "the token lacks a required claim (`sub`, `iat`, `exp`, and `iss` and `aud` where this server names them)"
            }
            ErrorKind::InvalidIssuer => "the token was issued by another issuer (`iss`) than this server trusts",
            ErrorKind::InvalidAudience => "the token is meant for another audience (`aud`) than this app",
            ErrorKind::ImmatureSignature => "the token is not valid yet",
            _ => "the token is not valid",
        })
    })?;
    let iat = data.claims.get("iat").and_then(Value::as_u64).unwrap_or(0);
    if iat > now_secs() + LEEWAY.as_secs() {
        return Err(unauthenticated("the token was issued in the future"));
    }
    Ok(data.claims)
}

/// Whether `value` holds a NUL character anywhere: no Postgres text can hold one, so a claim
/// with one would fail every statement it is bound into, as a server error, on every retry.
fn holds_nul(value: &Value) -> bool {
    match value {
        Value::String(text) => text.contains('\0'),
        Value::Array(items) => items.iter().any(holds_nul),
        Value::Object(map) => map.iter().any(|(key, v)| key.contains('\0') || holds_nul(v)),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

fn actor_of(mut claims: Map<String, Value>) -> Result<Actor> {
    if claims.iter().any(|(key, value)| key.contains('\0') || holds_nul(value)) {
        return Err(unauthenticated("the token's claims hold a NUL character"));
    }
    let user_id = match claims.remove("sub") {
        Some(Value::String(s)) if !s.is_empty() => s,
        _ => return Err(unauthenticated("the token's `sub` is not a user id")),
    };
    let owner_id = match claims.remove("ownerId") {
        Some(Value::String(s)) if !s.is_empty() => s,
        _ => return Err(unauthenticated("the token lacks the `ownerId` claim")),
    };
    Ok(Actor { user_id, owner_id, claims })
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl EngineAuth for BearerTokenAuth {
    fn resolve<'a>(&'a self, request: &'a Parts) -> BoxFuture<'a, Option<Actor>> {
        Box::pin(async move { self.verify(bearer_token(request)?).ok() })
    }

    fn resolve_token<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Option<Actor>> {
        Box::pin(async move { self.verify(token).ok() })
    }

    fn check_config(&self) -> Result<()> {
        self.short_secret.map_or(Ok(()), check_secret_len)
    }

    fn check<'a>(&'a self, request: &'a Parts) -> BoxFuture<'a, Result<Actor>> {
        Box::pin(async move {
            match bearer_token(request) {
                Some(token) => self.verify(token),
                None => Err(unauthenticated("send a valid `Authorization: Bearer <token>`")),
            }
        })
    }

    fn check_token<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Actor>> {
        Box::pin(async move { self.verify(token) })
    }
}

/// An HS256 token for `user_id` with owner id `owner_id`, valid for `ttl`.
///
/// ```
/// use std::time::Duration;
/// use engine_runtime::auth::{BearerTokenAuth, issue_bearer_token};
///
/// let secret = b"a random secret of 32 bytes at least";
/// let token = issue_bearer_token("alice", "acme", secret, Duration::from_secs(60)).unwrap();
/// let actor = BearerTokenAuth::new(secret).verify(&token).unwrap();
/// assert_eq!((actor.user_id.as_str(), actor.owner_id.as_str()), ("alice", "acme"));
/// ```
pub fn issue_bearer_token(user_id: &str, owner_id: &str, secret: impl AsRef<[u8]>, ttl: Duration) -> Result<String> {
    issue_bearer_token_with_claims(user_id, owner_id, secret, ttl, Map::new())
}

/// Like [`issue_bearer_token`], with more claims (which sync rules can take parameters from).
pub fn issue_bearer_token_with_claims(
    user_id: &str,
    owner_id: &str,
    secret: impl AsRef<[u8]>,
    ttl: Duration,
    mut claims: Map<String, Value>,
) -> Result<String> {
    check_secret_len(secret.as_ref().len())?;
    let now = now_secs();
    claims.insert("sub".into(), user_id.into());
    claims.insert("ownerId".into(), owner_id.into());
    claims.insert("iat".into(), now.into());
    claims.insert("exp".into(), (now + ttl.as_secs()).into());
    jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &EncodingKey::from_secret(secret.as_ref()))
        .map_err(|e| Error::internal_from("cannot sign a token", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"the unit tests' HS256 secret, 32 bytes";
    const OTHER_KEY: &[u8] = b"another HS256 secret of 32 bytes, or more";

    /// A token of `alice` with `iss` and `aud` as given (none where `None`).
    fn token_from(iss: Option<&str>, aud: Option<Value>) -> String {
        let mut claims = Map::new();
        if let Some(iss) = iss {
            claims.insert("iss".into(), iss.into());
        }
        if let Some(aud) = aud {
            claims.insert("aud".into(), aud);
        }
        issue_bearer_token_with_claims("alice", "alice", KEY, Duration::from_secs(60), claims).unwrap()
    }

    fn refusal(auth: &BearerTokenAuth, token: &str) -> String {
        match auth.verify(token) {
            Err(Error::Unauthenticated(why)) => why,
            other => panic!("refused as unauthenticated, not {other:?}"),
        }
    }

    /// Issue 37, finding 12: with an identity provider other apps share, a token minted for
    /// another app (another `aud`) or by another issuer is refused once this app names its own.
    #[test]
    fn issuer_and_audience_are_enforced_where_named() {
        let auth = BearerTokenAuth::new(KEY).issuer("https://id.example").audience("notes");
        assert!(auth.verify(&token_from(Some("https://id.example"), Some("notes".into()))).is_ok());
        assert!(
            auth.verify(&token_from(Some("https://id.example"), Some(serde_json::json!(["chat", "notes"])))).is_ok()
        );
        let other_app = refusal(&auth, &token_from(Some("https://id.example"), Some("chat".into())));
        assert!(other_app.contains("`aud`"), "{other_app}");
        let other_issuer = refusal(&auth, &token_from(Some("https://evil.example"), Some("notes".into())));
        assert!(other_issuer.contains("`iss`"), "{other_issuer}");
        for token in [token_from(None, Some("notes".into())), token_from(Some("https://id.example"), None)] {
            assert!(refusal(&auth, &token).contains("lacks a required claim"));
        }
        // Without an audience named, a token meant for some audience is not this app's.
        assert!(BearerTokenAuth::new(KEY).verify(&token_from(None, Some("chat".into()))).is_err());
        assert!(BearerTokenAuth::new(KEY).verify(&token_from(Some("anyone"), None)).is_ok());
    }

    /// A token verified once is not checked again while it is valid (here the key that
    /// verified it is gone and it still opens), and a change of keys forgets it.
    #[test]
    fn a_verified_token_is_kept_until_the_keys_change() {
        let auth = BearerTokenAuth::new(KEY);
        let token = issue_bearer_token("alice", "acme", KEY, Duration::from_secs(60)).unwrap();
        assert_eq!(auth.verify(&token).unwrap().user_id, "alice");
        let keyless = BearerTokenAuth { secret: None, ..auth.clone() };
        assert_eq!(keyless.verify(&token).unwrap().user_id, "alice", "kept");
        keyless.set_jwks(&JwkSet { keys: Vec::new() }).unwrap();
        assert!(keyless.verify(&token).is_err(), "forgotten with the keys");
        let other = BearerTokenAuth::new(KEY).audience("notes");
        assert!(other.verify(&token).is_err(), "a token without `aud` is not this audience's");
    }

    /// A kept token still expires: the entry lives until `exp` and the leeway.
    #[test]
    fn a_kept_token_expires_with_its_exp() {
        let verified = Verified::default();
        let actor = Actor { user_id: "u".into(), owner_id: "o".into(), claims: Map::new() };
        let now = now_secs();
        verified.insert([1; 32], &actor, now + 60);
        verified.insert([2; 32], &actor, now - LEEWAY.as_secs() - 1);
        assert!(verified.get(&[1; 32]).is_some());
        assert!(verified.get(&[2; 32]).is_none(), "past its exp and the leeway");
        assert_eq!(verified.entries().len(), 1, "the expired entry is gone");
    }

    #[test]
    fn issued_tokens_carry_user_owner_and_extra_claims() {
        let mut extra = Map::new();
        extra.insert("org".into(), "acme".into());
        let token = issue_bearer_token_with_claims("u", "o", KEY, Duration::from_secs(60), extra).unwrap();
        let actor = BearerTokenAuth::new(KEY).verify(&token).unwrap();
        assert_eq!(actor.claim::<String>("org").as_deref(), Some("acme"));
        assert!(actor.claims.contains_key("exp"));
        assert!(BearerTokenAuth::new(OTHER_KEY).verify(&token).is_err());
    }

    /// An HS256 secret shorter than `MIN_SECRET_BYTES`, the empty one included, builds no
    /// server, signs no token, and verifies none (a token signed with the empty key, which
    /// anyone can make, was taken).
    #[test]
    fn a_short_secret_is_refused() {
        for short in ["", "test-secret", &"s".repeat(MIN_SECRET_BYTES - 1)] {
            let auth = BearerTokenAuth::new(short);
            let refused = auth.check_config().unwrap_err().to_string();
            assert!(refused.contains("32 bytes at least") && refused.contains("BearerTokenAuth::new"), "{refused}");
            assert!(issue_bearer_token("alice", "alice", short, Duration::from_secs(60)).is_err());
            let claims =
                serde_json::json!({"sub": "alice", "ownerId": "alice", "iat": now_secs(), "exp": now_secs() + 60});
            let forged = jsonwebtoken::encode(
                &Header::new(Algorithm::HS256),
                &claims,
                &EncodingKey::from_secret(short.as_bytes()),
            )
            .unwrap();
            assert!(auth.verify(&forged).is_err(), "a token signed with a {}-byte key", short.len());
        }
        assert!(BearerTokenAuth::new("s".repeat(MIN_SECRET_BYTES)).check_config().is_ok());
        assert!(BearerTokenAuth::jwks_only(&JwkSet { keys: Vec::new() }).unwrap().check_config().is_ok());
    }

    #[test]
    fn a_nul_in_any_claim_is_refused_as_unauthenticated() {
        let auth = BearerTokenAuth::new(KEY);
        let nul_user = issue_bearer_token("mal\u{0}lory", "o", KEY, Duration::from_secs(60)).unwrap();
        assert!(matches!(auth.verify(&nul_user), Err(Error::Unauthenticated(_))));
        let mut extra = Map::new();
        extra.insert("teams".into(), serde_json::json!(["a", "b\u{0}"]));
        let nul_claim = issue_bearer_token_with_claims("u", "o", KEY, Duration::from_secs(60), extra).unwrap();
        assert!(matches!(auth.verify(&nul_claim), Err(Error::Unauthenticated(_))));
    }
}
