//! Blobs on the client (`docs/protocol.md#blobs`): [`Client::put_blob`] keeps the bytes in the
//! local store and queues their upload, offline included, and gives their key for a row;
//! [`Client::blob`] reads them from the store, or downloads them with a ticket (and keeps
//! them). The queue is in the store, so it survives a restart. The push loop uploads it, oldest
//! first, after each push:
//!
//! ```text
//! queued ── ticket (POST /blobs/upload), PUT to its URL ──▶ uploaded: dequeued
//!   │  ▲
//!   │  └── no answer, 5xx, 429, 401, or the URL refused (403: expired or in use): the loop
//!   │      waits (backoff, or `Retry-After`), then asks for a new ticket
//!   └──── refused for good (400, 404, 413 over the size limit or the quota, 422 bytes not
//!         hashing to the key or a media type refused): dequeued, `failed` kept with it
//! ```

use engine_kernel::BlobKey;
use engine_kernel::wire::{BlobDownloadRequest, BlobUploadRequest};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::state::ClientState;
use crate::store::QueuedBlob;

impl ClientState {
    /// Upload the queue until it is empty, or a failure that may pass stops it.
    pub(crate) async fn upload_blobs(&self) -> Result<()> {
        for queued in self.store.queued_blobs().await? {
            let Some(bytes) = self.store.blob(&queued.key).await? else { continue };
            let request =
                BlobUploadRequest { key: queued.key.clone(), size: queued.size, content_type: queued.content_type };
            let sent = match self.remote.upload_ticket(&request).await {
                Ok(ticket) => self.remote.transfer(&ticket, Some(bytes)).await.map(drop),
                Err(err) => Err(err),
            };
            match sent {
                Ok(()) => self.store.dequeue_blob(&queued.key, None).await?,
                Err(Error::Server { status, problem, .. }) if refused_for_good(status) => {
                    tracing::warn!(key = %queued.key, code = %problem.code.as_str(), "a blob upload was refused");
                    self.store.dequeue_blob(&queued.key, Some(&problem.detail)).await?;
                }
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }
}

/// Whether an answer of `status` to a blob upload will never change: the bytes cannot go.
fn refused_for_good(status: u16) -> bool {
    matches!(status, 400 | 404 | 413 | 415 | 422)
}

impl Client {
    /// Keep `bytes` on this device and queue their upload (uploaded in the background, or by
    /// [`upload_blobs`](Self::upload_blobs)); their key, to write into a row with a mutator.
    /// Works offline. `content_type` is their media type, which a server may require.
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails.
    pub async fn put_blob(&self, bytes: &[u8], content_type: Option<&str>) -> Result<BlobKey> {
        let key = BlobKey::for_bytes(bytes);
        self.inner.store.put_blob(&key, bytes, content_type).await?;
        self.inner.wake_push.notify_one();
        Ok(key)
    }

    /// The bytes of blob `key`: from this device, or downloaded with a ticket (and kept).
    ///
    /// # Errors
    /// [`Error::Server`] `404` when the server does not give them to this actor (no row it can
    /// read names them, or their upload has not ended); [`Error::Network`] when they cannot be
    /// fetched, or the bytes fetched do not hash to the key.
    pub async fn blob(&self, key: &BlobKey) -> Result<Vec<u8>> {
        if let Some(bytes) = self.inner.store.blob(key).await? {
            return Ok(bytes);
        }
        let ticket = self.inner.remote.download_ticket(&BlobDownloadRequest { key: key.clone() }).await?;
        let bytes = self.inner.remote.transfer(&ticket, None).await?;
        if BlobKey::for_bytes(&bytes) != *key {
            return Err(Error::network(format!("the bytes downloaded for blob {key} do not hash to it")));
        }
        self.inner.store.keep_blob(key, &bytes).await?;
        Ok(bytes)
    }

    /// The queued uploads, oldest first.
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails.
    pub async fn queued_blobs(&self) -> Result<Vec<QueuedBlob>> {
        self.inner.store.queued_blobs().await
    }

    /// Upload the queue now, until it is empty; an upload the server refuses for good leaves the
    /// queue (and the bytes stay on this device).
    ///
    /// # Errors
    /// [`Error::Network`] or [`Error::Server`] when an upload may succeed later: it stays queued.
    pub async fn upload_blobs(&self) -> Result<()> {
        self.inner.upload_blobs().await
    }
}
