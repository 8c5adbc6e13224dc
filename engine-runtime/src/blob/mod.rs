//! Blobs: files stored beside the rows, named by the SHA-256 of their bytes ([`BlobKey`]) and
//! referred to by rows in `BlobKey` columns. The server hands out signed URLs; the bytes go
//! straight between the client and the store (`docs/design.md` §13, `docs/protocol.md#blobs`).
//!
//! - `POST /blobs/upload {key, size}`: a signed `PUT` URL for any authenticated actor within its
//!   storage quota, good for one upload of exactly `size` bytes. The store checks that the bytes
//!   hash to the key, so nobody can put other bytes under a key, and records who uploaded them.
//! - `POST /blobs/download {key}`: a signed `GET` URL, only for an actor who can read a row
//!   whose blob column holds the key and that an uploader of the bytes wrote there (the sync
//!   rules decide readability, as for rows); 404 otherwise, so a blob's existence does not leak.
//!   Knowing a key and naming it in a row of one's own gives nothing.
//!
//! One trait, [`BlobStore`], with a module per backend:
//! - [`local_fs`](mod@local_fs): files in a directory, served by the engine's own router under
//!   `/blobs/data` with HMAC-signed, expiring URLs.

pub mod local_fs;

use std::sync::Arc;
use std::time::Duration;

use engine_kernel::wire::BlobTicket;
use engine_kernel::{BlobKey, BoxFuture, Timestamp};

use crate::error::Result;

pub use local_fs::{LocalFs, local_fs};

/// An upload the server grants: what its signed URL allows.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Upload {
    /// The blob's key.
    pub key: BlobKey,
    /// Exactly how many bytes.
    pub size: u64,
    /// Who uploads (the actor's user id): the bytes count against its quota, and rows it writes
    /// naming the key let their readers download them.
    pub uploader: String,
    /// The most bytes the uploader's blobs may take once these are stored, when bounded.
    pub quota: Option<u64>,
}

impl Upload {
    /// An upload of the `size` bytes of `key` by `uploader`, whose blobs may take `quota` bytes.
    pub fn new(key: BlobKey, size: u64, uploader: impl Into<String>, quota: Option<u64>) -> Self {
        Upload { key, size, uploader: uploader.into(), quota }
    }
}

/// Where blobs are stored: signs the URLs clients upload to and download from, and knows who
/// uploaded what.
pub trait BlobStore: Send + Sync + 'static {
    /// A URL to `PUT` the bytes of `upload` to, once, until `expires_at`.
    fn upload_url(&self, upload: &Upload, expires_at: Timestamp) -> Result<BlobTicket>;
    /// A URL to `GET` blob `key` from, until `expires_at`.
    fn download_url(&self, key: &BlobKey, expires_at: Timestamp) -> Result<BlobTicket>;
    /// The users who uploaded the bytes of `key` (none when they were never uploaded).
    fn uploaders<'a>(&'a self, key: &'a BlobKey) -> BoxFuture<'a, Result<Vec<String>>>;
    /// The bytes of the blobs `user` uploaded, each counted once.
    fn usage<'a>(&'a self, user: &'a str) -> BoxFuture<'a, Result<u64>>;
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
    pub(crate) quota: Option<u64>,
}

impl std::fmt::Debug for Blobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Blobs")
            .field("max_size", &self.max_size)
            .field("url_lifetime", &self.url_lifetime)
            .field("quota", &self.quota)
            .finish_non_exhaustive()
    }
}

impl Blobs {
    /// Blobs in `store`, of at most 64 MiB, with URLs that work for 15 minutes, and 1 GiB of
    /// blobs per actor.
    pub fn new(store: impl BlobStore) -> Self {
        Blobs {
            store: Arc::new(store),
            max_size: 64 << 20,
            url_lifetime: Duration::from_secs(15 * 60),
            quota: Some(1 << 30),
        }
    }

    /// The most bytes the blobs one actor uploaded may take, each blob counted once (`None`: no
    /// bound). An upload past it is refused `413 payload_too_large`.
    pub fn quota_per_actor(mut self, bytes: Option<u64>) -> Self {
        self.quota = bytes;
        self
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
