//! Blobs: files stored beside the rows, named by the SHA-256 of their bytes ([`BlobKey`]) and
//! referred to by rows in `BlobKey` columns. The server hands out signed URLs; the bytes go
//! straight between the client and the store (`docs/design.md` §13, `docs/protocol.md#blobs`).
//!
//! - `POST /blobs/upload {key, size}`: a signed `PUT` URL for any authenticated actor within its
//!   storage quota, good for one upload of exactly `size` bytes that hash to the key. The ticket
//!   reserves the bytes against the quota before any byte moves.
//! - `POST /blobs/download {key}`: a signed `GET` URL, only for an actor who can read a row
//!   whose blob column holds the key and that an uploader of the bytes wrote there (the sync
//!   rules decide readability, as for rows); 404 otherwise, so a blob's existence does not leak.
//!   Knowing a key and naming it in a row of one's own gives nothing.
//!
//! Who uploaded what, reservations and tickets are kept in the app's database
//! (`_engine_blobs`, [`Ledger`]), the same for every store. One trait, [`BlobStore`], with a
//! module per backend:
//! - [`local_fs`](mod@local_fs): files in a directory, served by the engine's own router under
//!   `/blobs/data` with HMAC-signed, expiring URLs.
//! - `s3` (feature `s3`): an S3-compatible object store (S3, R2, MinIO) with presigned URLs:
//!   `blob::s3(…)`, `blob::r2(…)`.

pub(crate) mod collect;
mod ledger;
pub mod local_fs;
#[cfg(feature = "s3")]
pub mod s3;

use std::sync::Arc;
use std::time::Duration;

use engine_kernel::wire::BlobTicket;
use engine_kernel::{BlobKey, BoxFuture, Timestamp};

use crate::error::Result;

pub use collect::CollectedBlobs;
pub use ledger::Ledger;
pub(crate) use ledger::{Inner as LedgerInner, Pending, Reserved};
pub use local_fs::{LocalFs, local_fs};
#[cfg(feature = "s3")]
pub use s3::{Credentials, S3, r2, s3};

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
    /// The upload's one-time ticket, as `_engine_blobs` records it.
    pub ticket: String,
    /// The bytes' media type, when the client named one.
    pub content_type: Option<String>,
}

impl Upload {
    /// An upload of the `size` bytes of `key` by `uploader`, under a new ticket.
    pub fn new(key: BlobKey, size: u64, uploader: impl Into<String>) -> Self {
        Upload {
            key,
            size,
            uploader: uploader.into(),
            ticket: uuid::Uuid::new_v4().simple().to_string(),
            content_type: None,
        }
    }

    /// This upload with the media type `content_type`.
    #[must_use]
    pub fn content_type(mut self, content_type: Option<String>) -> Self {
        self.content_type = content_type;
        self
    }
}

/// An object a store holds: the bytes of a blob, of one uploader or of all.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoredObject {
    /// Its name in the store, which orders the listing.
    pub name: String,
    /// The blob it holds the bytes of.
    pub key: BlobKey,
}

impl StoredObject {
    /// The object `name`, holding bytes of `key`.
    pub fn new(name: impl Into<String>, key: BlobKey) -> Self {
        StoredObject { name: name.into(), key }
    }
}

/// Where blobs are stored: signs the URLs clients upload to and download from, says whether an
/// upload arrived, and deletes what no row names any more. Who uploaded what is not its
/// business: the server keeps that in the database ([`Ledger`]).
pub trait BlobStore: Send + Sync + 'static {
    /// A URL to `PUT` the bytes of `upload` to, once, until `expires_at`. The URL (or the
    /// headers it comes with) binds the size and the bytes' hash, so that no other bytes are
    /// stored under it.
    fn upload_url(&self, upload: &Upload, expires_at: Timestamp) -> Result<BlobTicket>;
    /// A URL to `GET` blob `key` from, until `expires_at`: the bytes `uploader` stored.
    fn download_url(&self, key: &BlobKey, uploader: &str, expires_at: Timestamp) -> Result<BlobTicket>;
    /// Whether the bytes of `upload` arrived, checked against its key and size (`None`: the
    /// store tells the ledger itself when an upload arrives, as one receiving the bytes does).
    /// Bytes that arrived wrong are deleted, and answer `false`.
    fn arrived<'a>(&'a self, upload: &'a Upload) -> BoxFuture<'a, Result<Option<bool>>>;
    /// Delete blob `key`: the bytes each of `uploaders` stored.
    fn delete<'a>(&'a self, key: &'a BlobKey, uploaders: &'a [String]) -> BoxFuture<'a, Result<()>>;
    /// The objects the store holds whose names come after `after`, in name order, at most
    /// `limit`: what collection compares with the ledger to find bytes that no upload in it
    /// accounts for (an upload that arrived after its reservation was dropped, say). A store
    /// that cannot list its objects lists none.
    fn objects<'a>(&'a self, after: &'a str, limit: usize) -> BoxFuture<'a, Result<Vec<StoredObject>>> {
        let _ = (after, limit);
        Box::pin(async { Ok(Vec::new()) })
    }
    /// Whether `object` holds the bytes `uploader` uploads of its key (a store that keeps one
    /// copy of a blob for every uploader: always).
    fn holds(&self, object: &StoredObject, uploader: &str) -> bool {
        let _ = (object, uploader);
        true
    }
    /// Delete `object`, one that [`objects`](Self::objects) listed.
    fn delete_object<'a>(&'a self, object: &'a StoredObject) -> BoxFuture<'a, Result<()>> {
        let _ = object;
        Box::pin(async { Ok(()) })
    }
    /// Routes the store serves itself, nested under `/blobs/data` of the engine's router (a
    /// store whose URLs point elsewhere has none), given the ledger of uploads.
    fn routes(&self, ledger: Ledger) -> Option<axum::Router> {
        let _ = ledger;
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
    pub(crate) in_flight: usize,
    pub(crate) upload_timeout: Duration,
    pub(crate) content_types: Option<Vec<String>>,
    pub(crate) unused_grace: Duration,
}

impl std::fmt::Debug for Blobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Blobs")
            .field("max_size", &self.max_size)
            .field("url_lifetime", &self.url_lifetime)
            .field("quota", &self.quota)
            .field("in_flight", &self.in_flight)
            .field("upload_timeout", &self.upload_timeout)
            .field("content_types", &self.content_types)
            .field("unused_grace", &self.unused_grace)
            .finish_non_exhaustive()
    }
}

impl Blobs {
    /// Blobs in `store`, of at most 64 MiB and of any media type, with URLs that work for 15
    /// minutes, 1 GiB of blobs and 8 uploads in flight per actor, 10 minutes to receive an
    /// upload, and collected a day after the last row naming them is gone.
    pub fn new(store: impl BlobStore) -> Self {
        Blobs {
            store: Arc::new(store),
            max_size: 64 << 20,
            url_lifetime: Duration::from_secs(15 * 60),
            quota: Some(1 << 30),
            in_flight: 8,
            upload_timeout: Duration::from_secs(10 * 60),
            content_types: None,
            unused_grace: Duration::from_secs(24 * 3600),
        }
    }

    /// The most uploads one actor may have reserved and not finished (tickets handed out whose
    /// bytes have not arrived): beyond, `429 rate_limited`. An unused ticket stops counting
    /// once it has expired and the upload timeout has passed.
    pub fn uploads_in_flight(mut self, uploads: usize) -> Self {
        self.in_flight = uploads.max(1);
        self
    }

    /// How long an upload may take once its URL is used: the body timeout of a store that
    /// receives the bytes itself, and how long after its URL expires an upload's reservation
    /// is kept for bytes still arriving.
    pub fn upload_timeout(mut self, timeout: Duration) -> Self {
        self.upload_timeout = timeout;
        self
    }

    /// The media types a blob may have (`None`, the default: any). With a list, an upload
    /// ticket must name one of them as `contentType`, or is refused `422 validation_failed`.
    pub fn content_types<S: Into<String>>(mut self, types: Option<impl IntoIterator<Item = S>>) -> Self {
        self.content_types = types.map(|types| types.into_iter().map(Into::into).collect());
        self
    }

    /// How long a blob that no row names is kept before collection deletes it (the time a
    /// client has between uploading the bytes and syncing the row that names them).
    pub fn unused_grace(mut self, grace: Duration) -> Self {
        self.unused_grace = grace;
        self
    }

    /// The most bytes the blobs one actor uploaded may take, each blob counted once, with the
    /// uploads it reserved (`None`: no bound). A ticket past it is refused
    /// `413 payload_too_large`.
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
