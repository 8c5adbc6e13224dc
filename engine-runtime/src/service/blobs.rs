//! The tickets of the blob routes (`docs/design.md` §13): an upload within the size limit and
//! the actor's quota, and a download for an actor that can read a row naming the blob.

use std::sync::Arc;

use engine_kernel::Actor;
use engine_kernel::wire::{BlobDownloadRequest, BlobTicket, BlobUploadRequest};

use crate::blob::{Blobs, Upload};
use crate::error::{Error, Result};
use crate::storage::Storage;

/// The blob store of a server and the store that says who may read a blob.
pub(crate) struct BlobAccess {
    pub(crate) blobs: Option<Blobs>,
    pub(crate) storage: Arc<dyn Storage>,
    /// The store's sessions, shared fairly between actors (`SyncService::share`).
    pub(crate) share: Option<Arc<crate::limits::FairShare>>,
}

impl BlobAccess {
    fn blobs(&self) -> Result<&Blobs> {
        self.blobs.as_ref().ok_or_else(|| Error::NotFound("this server stores no blobs".into()))
    }

    /// A ticket to upload the blob `request` describes.
    pub(crate) async fn upload(&self, actor: Actor, request: BlobUploadRequest) -> Result<BlobTicket> {
        let blobs = self.blobs()?;
        if request.size > blobs.max_size {
            return Err(Error::PayloadTooLarge { limit: usize::try_from(blobs.max_size).unwrap_or(usize::MAX) });
        }
        // Bytes the actor uploaded before count once; the store checks the quota again on upload.
        if let Some(quota) = blobs.quota
            && !blobs.store.uploaders(&request.key).await?.contains(&actor.user_id)
        {
            let used = blobs.store.usage(&actor.user_id).await?;
            if used.saturating_add(request.size) > quota {
                return Err(Error::OverQuota { quota, used });
            }
        }
        let upload = Upload::new(request.key, request.size, actor.user_id, blobs.quota);
        blobs.store.upload_url(&upload, blobs.expiry())
    }

    /// A ticket to download the blob `request` names.
    pub(crate) async fn download(&self, actor: &Actor, request: &BlobDownloadRequest) -> Result<BlobTicket> {
        let blobs = self.blobs()?;
        // Not 403, and the same answer whether or not the bytes exist: whether a blob exists is
        // not told to who may not read it.
        // Rows are looked at even when nobody uploaded the bytes, so the answer takes as long.
        let uploaders = blobs.store.uploaders(&request.key).await?;
        let _place = match &self.share {
            Some(share) => Some(share.admit(&actor.user_id, crate::limits::Work::Pull).await?),
            None => None,
        };
        if !self.storage.can_read_blob(actor, &request.key, &uploaders).await? {
            return Err(Error::NotFound(format!("no row the actor can read holds blob `{}`", request.key)));
        }
        blobs.store.download_url(&request.key, blobs.expiry())
    }
}
