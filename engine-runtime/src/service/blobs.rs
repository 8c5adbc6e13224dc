//! The tickets of the blob routes (`docs/design.md` §13): an upload reserved within the size
//! limit, the allowed media types, the actor's quota and its uploads in flight, and a download
//! for an actor that can read a row naming the blob.

use std::sync::Arc;
use std::time::Duration;

use engine_kernel::wire::{BlobDownloadRequest, BlobTicket, BlobUploadRequest};
use engine_kernel::{Actor, App};

use crate::blob::collect::{self, CollectedBlobs, now_ms, stale_before};
use crate::blob::{Blobs, Ledger, Reserved, Upload};
use crate::error::{Error, Result};
use crate::storage::Storage;

/// The most uploads of one blob not yet stored that a download checks the store for.
const PENDING_CHECKED: usize = 16;

/// The blob store of a server, the ledger of its uploads, and the store that says who may read
/// a blob.
pub(crate) struct BlobAccess {
    pub(crate) blobs: Option<Blobs>,
    pub(crate) storage: Arc<dyn Storage>,
    /// `_engine_blobs` in the store (none for a store without it, or an app without blob
    /// columns).
    pub(crate) ledger: Option<Ledger>,
    pub(crate) app: Arc<App>,
    /// The store's sessions, shared fairly between actors (`SyncService::share`).
    pub(crate) share: Option<Arc<crate::limits::FairShare>>,
}

impl BlobAccess {
    fn blobs(&self) -> Result<(&Blobs, &Ledger)> {
        let blobs = self.blobs.as_ref().ok_or_else(|| Error::NotFound("this server stores no blobs".into()))?;
        let ledger = self
            .ledger
            .as_ref()
            .ok_or_else(|| Error::NotFound("this app has no blob column: it stores no blobs".into()))?;
        Ok((blobs, ledger))
    }

    /// A ticket to upload the blob `request` describes, its bytes reserved against the actor's
    /// quota.
    pub(crate) async fn upload(&self, actor: Actor, request: BlobUploadRequest) -> Result<BlobTicket> {
        let (blobs, ledger) = self.blobs()?;
        if request.size > blobs.max_size {
            return Err(Error::PayloadTooLarge { limit: usize::try_from(blobs.max_size).unwrap_or(usize::MAX) });
        }
        if let Some(allowed) = &blobs.content_types
            && !request.content_type.as_ref().is_some_and(|t| allowed.iter().any(|a| a.eq_ignore_ascii_case(t)))
        {
            return Err(Error::Kernel(engine_kernel::Error::validation(format!(
                "a blob's `contentType` is one of {}",
                allowed.join(", ")
            ))));
        }
        let upload = Upload::new(request.key, request.size, actor.user_id).content_type(request.content_type);
        let expires_at = blobs.expiry();
        let reserve = || {
            ledger.reserve(
                &upload.key,
                &upload.uploader,
                upload.size,
                &upload.ticket,
                expires_at.timestamp_millis(),
                blobs.quota,
                blobs.in_flight,
            )
        };
        let mut reserved = reserve().await?;
        if matches!(reserved, Reserved::TooMany { .. } | Reserved::OverQuota { .. }) {
            // Reservations may hold the actor's quota or places in flight for nothing: those
            // whose tickets expired long ago are recorded stored or dropped, and uploads that
            // finished in a store that does not report them are recorded stored. Only a ticket
            // they stand in the way of pays for that, not every ticket.
            let mut settled = CollectedBlobs::default();
            let stale = ledger.stale(Some(&upload.uploader), stale_before(blobs), now_ms(), blobs.in_flight).await?;
            collect::resolve(ledger, &*blobs.store, stale, &mut settled).await?;
            let pending = ledger.pending(Some(&upload.uploader), ("", ""), blobs.in_flight).await?;
            let arrived = collect::record_arrivals(ledger, &*blobs.store, pending).await?;
            if settled.stored + settled.dropped + arrived > 0 {
                reserved = reserve().await?;
            }
        }
        match reserved {
            Reserved::Done => blobs.store.upload_url(&upload, expires_at),
            Reserved::OverQuota { used } => Err(Error::OverQuota { quota: blobs.quota.unwrap_or(u64::MAX), used }),
            Reserved::TooMany { in_flight } => Err(Error::Busy {
                detail: format!(
                    "the actor has {in_flight} blob uploads in flight, the most it may have: finish one, or wait for \
                     an unused ticket to expire"
                ),
                retry_after: Duration::from_secs(30),
            }),
        }
    }

    /// A ticket to download the blob `request` names.
    pub(crate) async fn download(&self, actor: &Actor, request: &BlobDownloadRequest) -> Result<BlobTicket> {
        let (blobs, ledger) = self.blobs()?;
        // Uploads the store did not report are checked there: a row may name bytes whose
        // upload finished since.
        let pending = ledger.pending_of_key(&request.key, PENDING_CHECKED).await?;
        collect::record_arrivals(ledger, &*blobs.store, pending).await?;
        // Not 403, and the same answer whether or not the bytes exist: whether a blob exists is
        // not told to who may not read it.
        // Rows are looked at even when nobody uploaded the bytes, so the answer takes as long.
        let uploaders = ledger.uploaders(&request.key, true).await?;
        let _place = match &self.share {
            Some(share) => Some(share.admit(&actor.user_id, crate::limits::Work::Pull).await?),
            None => None,
        };
        let readable = self.storage.can_read_blob(actor, &request.key, &uploaders).await?;
        match uploaders.first() {
            Some(uploader) if readable => blobs.store.download_url(&request.key, uploader, blobs.expiry()),
            _ => Err(Error::NotFound(format!("no row the actor can read holds blob `{}`", request.key))),
        }
    }

    /// Collect the blobs no row names any more, and the reservations long expired.
    pub(crate) async fn collect(&self, batch: usize) -> Result<CollectedBlobs> {
        let (blobs, ledger) = self.blobs()?;
        collect::collect(ledger, blobs, &self.app, batch).await
    }
}
