//! Collection of blobs (`docs/design.md` §13): a blob that no row names any more is deleted
//! from its store once no row has named it for the grace period, and reservations whose
//! tickets expired long ago are recorded stored or dropped. It walks `_engine_blobs` in key order, a
//! batch at a time, so each step is short whatever the number of blobs. A first pass that
//! finds no row naming a blob notes when (`unused_since`); a pass after the grace period that
//! still finds none deletes it, deciding under the blob's lock (`mutation::key_lock`) that a write
//! naming the blob also takes. A row naming the blob meanwhile clears the note. Last, the
//! store's objects are listed, and those no upload in the ledger accounts for are deleted.

use std::time::Duration;

use engine_kernel::App;

use super::{BlobStore, Blobs, Ledger, Pending, Upload};
use crate::error::Result;

/// What one collection of blobs did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CollectedBlobs {
    /// Blobs found named by no row, and noted so.
    pub noted: u64,
    /// Blobs deleted, no row having named them for the grace period.
    pub deleted: u64,
    /// Reservations whose bytes were found in the store, and recorded stored.
    pub stored: u64,
    /// Reservations dropped, their bytes never having arrived.
    pub dropped: u64,
    /// Objects deleted from the store that no upload in the ledger accounted for (bytes that
    /// arrived after their reservation was dropped).
    pub orphans: u64,
    /// The batches it took.
    pub steps: u64,
}

/// The wall clock in milliseconds since the epoch, as `_engine_blobs` keeps times.
pub(crate) fn now_ms() -> i64 {
    crate::sqlite::now_ms()
}

fn ms(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// Record stored each of `stale` whose bytes the store finds, and drop the others; for a store that
/// reports arrivals itself, a stale reservation never arrived. Counts into `done`.
pub(crate) async fn resolve(
    ledger: &Ledger,
    store: &dyn BlobStore,
    stale: Vec<Pending>,
    done: &mut CollectedBlobs,
) -> Result<()> {
    for pending in stale {
        let upload = Upload::new(pending.key.clone(), pending.size, pending.uploader.clone());
        if store.arrived(&upload).await? == Some(true) {
            ledger.mark_stored(&pending.key, &pending.uploader, true).await?;
            done.stored += 1;
        } else {
            ledger.drop_reservation(&pending.key, &pending.uploader).await?;
            done.dropped += 1;
        }
    }
    Ok(())
}

/// Record stored each of `pending` whose bytes the store finds (none for a store that reports its
/// uploads itself): how many.
pub(crate) async fn record_arrivals(ledger: &Ledger, store: &dyn BlobStore, pending: Vec<Pending>) -> Result<u64> {
    let mut stored = 0;
    for pending in pending {
        let upload = Upload::new(pending.key.clone(), pending.size, pending.uploader.clone());
        if store.arrived(&upload).await? == Some(true) {
            ledger.mark_stored(&pending.key, &pending.uploader, true).await?;
            stored += 1;
        }
    }
    Ok(stored)
}

/// A reservation is stale once its ticket expired longer ago than the upload timeout: no
/// body can still be arriving under it.
pub(crate) fn stale_before(blobs: &Blobs) -> i64 {
    now_ms().saturating_sub(ms(blobs.upload_timeout))
}

/// Collect the blobs of `blobs` that no row of `app` names, in batches of `batch`.
pub(crate) async fn collect(ledger: &Ledger, blobs: &Blobs, app: &App, batch: usize) -> Result<CollectedBlobs> {
    let batch = batch.max(1);
    let mut done = CollectedBlobs::default();
    loop {
        let stale = ledger.stale(None, stale_before(blobs), now_ms(), batch).await?;
        let more = stale.len() == batch;
        resolve(ledger, &*blobs.store, stale, &mut done).await?;
        done.steps += 1;
        if !more {
            break;
        }
    }
    // Uploads not reported by the store that received them are looked for there.
    let mut after = (String::new(), String::new());
    loop {
        let pending = ledger.pending(None, (&after.0, &after.1), batch).await?;
        done.steps += 1;
        let Some(last) = pending.last() else { break };
        after = (last.key.to_string(), last.uploader.clone());
        let full = pending.len() == batch;
        done.stored += record_arrivals(ledger, &*blobs.store, pending).await?;
        if !full {
            break;
        }
    }
    let columns: Vec<(&str, &str)> = app
        .tables()
        .iter()
        .flat_map(|def| {
            let table = def.meta();
            table.columns.iter().filter(|c| c.blob).map(move |c| (table.name, c.name))
        })
        .collect();
    let mut after = String::new();
    loop {
        let candidates = ledger.candidates(&after, batch).await?;
        done.steps += 1;
        let Some(last) = candidates.last() else { break };
        after = last.key.clone();
        let full = candidates.len() == batch;
        for candidate in candidates {
            // An upload under way: the bytes are wanted (and the row may not be synced yet).
            if candidate.pending {
                continue;
            }
            let mut named = false;
            for (table, column) in &columns {
                if ledger.named(table, column, &candidate.key).await? {
                    named = true;
                    break;
                }
            }
            let now = now_ms();
            match (named, candidate.unused_since) {
                (true, Some(_)) => ledger.mark_unused(&candidate.key, None).await?,
                (true, None) => {}
                (false, None) => {
                    ledger.mark_unused(&candidate.key, Some(now)).await?;
                    done.noted += 1;
                }
                (false, Some(since)) if now.saturating_sub(since) >= ms(blobs.unused_grace) => {
                    let Ok(key) = candidate.key.parse() else { continue };
                    // Checked again under the blob's lock, with the deletion: a row may have
                    // come to name it since.
                    let unused_before = now.saturating_sub(ms(blobs.unused_grace));
                    if ledger.delete_unused(&key, &columns, unused_before, &*blobs.store).await? {
                        done.deleted += 1;
                    }
                }
                (false, Some(_)) => {}
            }
        }
        if !full {
            break;
        }
    }
    // Objects that no upload in the ledger accounts for: bytes that arrived after their
    // reservation was dropped, or under an upload URL still good after its blob was deleted.
    let mut after = String::new();
    loop {
        let objects = blobs.store.objects(&after, batch).await?;
        done.steps += 1;
        let Some(last) = objects.last() else { break };
        after = last.name.clone();
        let full = objects.len() == batch;
        for object in objects {
            let uploads = ledger.uploaders(&object.key, false).await?;
            if uploads.iter().any(|uploader| blobs.store.holds(&object, uploader)) {
                continue;
            }
            if ledger.delete_orphan(&object, &*blobs.store).await? {
                done.orphans += 1;
            }
        }
        if !full {
            break;
        }
    }
    Ok(done)
}
