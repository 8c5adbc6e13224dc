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
//!
//! Each blob has a [`BlobState`] ([`Client::blob_state`], watched with
//! [`Client::watch_blob`]). The server answers a download `404` both before the upload ends and
//! to an actor who may not read the blob; the client tells them apart by its rows, as the
//! TypeScript client does: a key a row here names is [`BlobState::Uploading`], any other
//! [`BlobState::Missing`]. After a pull that changed rows, the bytes that no row here names and
//! that wait for no upload leave the store, so a member removed from a bucket keeps no copy of
//! its blobs.

use engine_kernel::BlobKey;
use engine_kernel::wire::{BlobDownloadRequest, BlobUploadRequest};
use tokio::sync::watch;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::state::ClientState;
use crate::store::BlobState;
use crate::store::QueuedBlob;

impl ClientState {
    /// Blob `key` is now in `state`: watchers see it, and a server's answer is remembered.
    pub(crate) fn blob_became(&self, key: &BlobKey, state: BlobState) {
        let mut blobs = crate::state::lock(&self.blobs);
        match blobs.get(key) {
            Some(sender) => {
                sender.send_if_modified(|before| std::mem::replace(before, state) != state);
            }
            None if matches!(state, BlobState::Uploading | BlobState::Missing) => {
                blobs.insert(key.clone(), watch::channel(state).0);
            }
            None => {}
        }
    }

    /// Where blob `key` stands: the store's word when the bytes are here, else the server's
    /// last answer.
    pub(crate) async fn blob_state(&self, key: &BlobKey) -> Result<BlobState> {
        if let Some(state) = self.store.blob_state(key).await? {
            return Ok(state);
        }
        let remembered = crate::state::lock(&self.blobs).get(key).map(|sender| *sender.borrow());
        Ok(match remembered {
            Some(state @ (BlobState::Uploading | BlobState::Missing)) => state,
            _ => BlobState::Unknown,
        })
    }

    /// Delete the bytes no row names and no upload waits for, after a pull that changed rows.
    pub(crate) async fn prune_blobs(&self) -> Result<Vec<BlobKey>> {
        let pruned = self.store.prune_blobs().await?;
        for key in &pruned {
            self.blob_became(key, BlobState::Unknown);
        }
        Ok(pruned)
    }

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
                Ok(()) => {
                    self.store.dequeue_blob(&queued.key, None).await?;
                    self.blob_became(&queued.key, BlobState::Cached);
                }
                Err(Error::Server { status, problem, .. }) if refused_for_good(status) => {
                    tracing::warn!(key = %queued.key, code = %problem.code.as_str(), "a blob upload was refused");
                    self.store.dequeue_blob(&queued.key, Some(&problem.detail)).await?;
                    self.blob_became(&queued.key, BlobState::Failed);
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
        if let Some(state) = self.inner.store.blob_state(&key).await? {
            self.inner.blob_became(&key, state);
        }
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
        let ticket = match self.inner.remote.download_ticket(&BlobDownloadRequest { key: key.clone() }).await {
            Ok(ticket) => ticket,
            Err(err @ Error::Server { status: 404, .. }) => {
                // Not 403, and the same before the upload as for a blob the actor may not read:
                // the rows here tell which.
                let state = match self.inner.store.blob_named(key).await? {
                    true => BlobState::Uploading,
                    false => BlobState::Missing,
                };
                self.inner.blob_became(key, state);
                return Err(err);
            }
            Err(err) => return Err(err),
        };
        let bytes = self.inner.remote.transfer(&ticket, None).await?;
        if BlobKey::for_bytes(&bytes) != *key {
            return Err(Error::network(format!("the bytes downloaded for blob {key} do not hash to it")));
        }
        self.inner.store.keep_blob(key, &bytes).await?;
        self.inner.blob_became(key, BlobState::Cached);
        Ok(bytes)
    }

    /// Where blob `key` stands: [`BlobState::Queued`], [`Cached`](BlobState::Cached) or
    /// [`Failed`](BlobState::Failed) when its bytes are on this device, else the server's last
    /// answer to [`blob`](Self::blob) ([`Uploading`](BlobState::Uploading) or
    /// [`Missing`](BlobState::Missing)), or [`Unknown`](BlobState::Unknown).
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails.
    pub async fn blob_state(&self, key: &BlobKey) -> Result<BlobState> {
        self.inner.blob_state(key).await
    }

    /// Watch where blob `key` stands: the receiver holds its [`BlobState`] now, and changes as
    /// the client puts, uploads, downloads or prunes it (await
    /// [`watch::Receiver::changed`], then read it).
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails.
    pub async fn watch_blob(&self, key: &BlobKey) -> Result<watch::Receiver<BlobState>> {
        let now = self.inner.blob_state(key).await?;
        let mut blobs = crate::state::lock(&self.inner.blobs);
        let sender = blobs.entry(key.clone()).or_insert_with(|| watch::channel(now).0);
        Ok(sender.subscribe())
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
