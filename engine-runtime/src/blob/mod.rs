//! Blobs (`docs/design.md` §13, `docs/protocol.md#blobs`): files stored beside the rows, named by
//! the SHA-256 of their bytes ([`BlobKey`]) and referred to by rows in `BlobKey` columns. The
//! server hands out signed URLs; the bytes go straight between the client and the store.
//!
//! - `POST /blobs/upload {key, size}`: a signed `PUT` URL for any authenticated actor. The store
//!   checks that the bytes hash to the key, so nobody can put other bytes under a key.
//! - `POST /blobs/download {key}`: a signed `GET` URL, only for an actor who can read a row whose
//!   blob column holds the key (the sync rules decide, as for rows); 404 otherwise, so a blob's
//!   existence does not leak either.
//!
//! One trait, [`BlobStore`], with a module per backend:
//! - [`local_fs`](mod@local_fs): files in a directory, served by the engine's own router under
//!   `/blobs/data` with HMAC-signed, expiring URLs.

pub mod local_fs;

use std::sync::Arc;
use std::time::Duration;

use engine_kernel::wire::BlobTicket;
use engine_kernel::{BlobKey, Timestamp};

use crate::error::Result;

pub use local_fs::{LocalFs, local_fs};

/// Where blobs are stored: signs the URLs clients upload to and download from.
pub trait BlobStore: Send + Sync + 'static {
    /// A URL to `PUT` the `size` bytes of blob `key` to, until `expires_at`.
    fn upload_url(&self, key: &BlobKey, size: u64, expires_at: Timestamp) -> Result<BlobTicket>;
    /// A URL to `GET` blob `key` from, until `expires_at`.
    fn download_url(&self, key: &BlobKey, expires_at: Timestamp) -> Result<BlobTicket>;
    /// Routes the store serves itself, nested under `/blobs/data` of the engine's router (a
    /// store whose URLs point elsewhere has none).
    fn routes(&self) -> Option<axum::Router> {
        None
    }
}

/// A blob store and how the server hands out its URLs: what `Server::builder().blobs(…)` takes.
#[derive(Clone)]
#[must_use]
pub struct Blobs {
    pub(crate) store: Arc<dyn BlobStore>,
    pub(crate) max_size: u64,
    pub(crate) url_lifetime: Duration,
}

impl std::fmt::Debug for Blobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Blobs")
            .field("max_size", &self.max_size)
            .field("url_lifetime", &self.url_lifetime)
            .finish_non_exhaustive()
    }
}

impl Blobs {
    /// Blobs in `store`, of at most 64 MiB, with URLs that work for 15 minutes.
    pub fn new(store: impl BlobStore) -> Self {
        Blobs { store: Arc::new(store), max_size: 64 << 20, url_lifetime: Duration::from_secs(15 * 60) }
    }

    /// The largest blob accepted, in bytes (413 above it).
    pub fn max_size(mut self, bytes: u64) -> Self {
        self.max_size = bytes;
        self
    }

    /// How long a signed URL works.
    pub fn url_lifetime(mut self, lifetime: Duration) -> Self {
        self.url_lifetime = lifetime;
        self
    }

    /// When a URL signed now expires.
    pub(crate) fn expiry(&self) -> Timestamp {
        chrono::Utc::now() + chrono::Duration::from_std(self.url_lifetime).unwrap_or(chrono::Duration::MAX)
    }
}
