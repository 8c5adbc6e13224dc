//! Blob keys: the name of a file stored beside the rows (a photo, an attachment), which a row
//! holds in a [`BlobKey`] column.
//!
//! A key is the SHA-256 of the bytes (`sha256:<64 lowercase hex digits>`), so a client names a
//! blob before any upload, offline, and writes rows that refer to it at once; the store checks
//! that uploaded bytes match their key. Who may download a blob follows the sync rules: an actor
//! who can read a row whose blob column holds the key.

use std::fmt;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::column::{ColumnType, NonNullColumn, SqlType};

/// The key of a blob: the SHA-256 of its bytes, as `sha256:<hex>`.
///
/// ```
/// use engine_kernel::BlobKey;
/// let key = BlobKey::for_bytes(b"hello");
/// assert_eq!(key.as_str(), "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
/// assert_eq!(key.as_str().parse::<BlobKey>().unwrap(), key);
/// assert!("sha256:abc".parse::<BlobKey>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct BlobKey(String);

const PREFIX: &str = "sha256:";

impl BlobKey {
    /// The key of `bytes`.
    pub fn for_bytes(bytes: &[u8]) -> BlobKey {
        BlobKey::from_digest(Sha256::digest(bytes).into())
    }

    /// The key of a SHA-256 digest.
    pub fn from_digest(digest: [u8; 32]) -> BlobKey {
        let mut key = String::with_capacity(PREFIX.len() + 64);
        key.push_str(PREFIX);
        for byte in digest {
            key.push_str(&format!("{byte:02x}"));
        }
        BlobKey(key)
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The hex digest, without the `sha256:` prefix: a name safe in paths and object keys.
    pub fn hex(&self) -> &str {
        &self.0[PREFIX.len()..]
    }
}

impl fmt::Display for BlobKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for BlobKey {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.strip_prefix(PREFIX) {
            Some(hex) if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) => {
                Ok(BlobKey(s.to_owned()))
            }
            _ => Err(format!("a blob key is `sha256:` and 64 lowercase hex digits, not `{s}`")),
        }
    }
}

impl TryFrom<String> for BlobKey {
    type Error = String;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<BlobKey> for String {
    fn from(key: BlobKey) -> String {
        key.0
    }
}

impl schemars::JsonSchema for BlobKey {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "BlobKey".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"})
    }
}

impl ColumnType for BlobKey {
    const SQL_TYPE: SqlType = SqlType::Text;
    const BLOB: bool = true;
    fn to_json(&self) -> Value {
        Value::String(self.0.clone())
    }
    fn from_json(value: Value) -> Result<Self, String> {
        match value {
            Value::String(s) => s.parse(),
            other => Err(format!("expected a blob key, found {other}")),
        }
    }
}

impl NonNullColumn for BlobKey {}
