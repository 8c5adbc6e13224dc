//! What a client's handles and background tasks share: the local store, the remote, the
//! settings, the status, presence and subscription, the wake-ups of the loops, and the
//! bookkeeping every layer above does after changing them. The handle (`client`), the sync loops
//! (`sync`) and the stream (`stream`) all hold it.

use std::collections::{BTreeMap, BTreeSet};

use engine_kernel::{BlobKey, BucketKey};
use tokio::sync::{Mutex as AsyncMutex, Notify, broadcast, watch};

use crate::error::Result;
use crate::presence::{Presence, PresenceEvent, PresenceState};
use crate::remote::Remote;
use crate::settings::Settings;
use crate::status::Status;
use crate::store::{BlobState, Store};

/// The value behind `mutex`, even if a thread panicked holding it (the data stays consistent:
/// no guard is held across a step that can fail half-way).
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Everything the client's handles and tasks share.
pub(crate) struct ClientState {
    pub(crate) store: Store,
    pub(crate) remote: Remote,
    pub(crate) settings: Settings,
    pub(crate) status: watch::Sender<Status>,
    /// A version per local table, bumped when its view may have changed.
    pub(crate) tables: BTreeMap<&'static str, watch::Sender<u64>>,
    pub(crate) presence: std::sync::Mutex<Presence>,
    pub(crate) presence_events: broadcast::Sender<PresenceEvent>,
    /// The buckets followed in realtime, when the app narrowed them ([`crate::Client::subscribe`]).
    pub(crate) subscription: std::sync::Mutex<Option<Vec<BucketKey>>>,
    /// The buckets open through [`crate::SyncedBucket`] handles, with how many handles hold each.
    pub(crate) open: std::sync::Mutex<BTreeMap<BucketKey, usize>>,
    /// The app changed its subscription or presence: the stream tells the server.
    pub(crate) stream_wanted: Notify,
    /// The buckets the store holds rows of, as the last pull left them.
    pub(crate) held: watch::Sender<BTreeSet<BucketKey>>,
    /// The server refused a subscription: from then on the stream asks only for buckets held.
    pub(crate) strict: std::sync::atomic::AtomicBool,
    pub(crate) wake_push: Notify,
    pub(crate) wake_pull: Notify,
    pub(crate) shutdown: watch::Sender<bool>,
    /// One push at a time.
    pub(crate) push_lock: AsyncMutex<()>,
    /// One pull at a time.
    pub(crate) pull_lock: AsyncMutex<()>,
    /// How many pulls and pushes run now.
    pub(crate) running: std::sync::atomic::AtomicUsize,
    /// The state of each blob watched ([`crate::Client::watch_blob`]) or that the server
    /// answered for with `404` (whose state the store cannot tell), as last known.
    pub(crate) blobs: std::sync::Mutex<BTreeMap<BlobKey, watch::Sender<BlobState>>>,
}

impl std::fmt::Debug for ClientState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("client_id", &self.store.client_id()).field("remote", &self.remote).finish()
    }
}

impl ClientState {
    pub(crate) fn new(store: Store, remote: Remote, settings: Settings) -> ClientState {
        let tables =
            crate::store::local_table_names(store.app()).into_iter().map(|t| (t, watch::channel(0).0)).collect();
        ClientState {
            store,
            remote,
            settings,
            status: watch::channel(Status::default()).0,
            tables,
            presence: std::sync::Mutex::new(Presence::default()),
            presence_events: broadcast::channel(256).0,
            subscription: std::sync::Mutex::new(None),
            open: std::sync::Mutex::new(BTreeMap::new()),
            stream_wanted: Notify::new(),
            held: watch::channel(BTreeSet::new()).0,
            strict: std::sync::atomic::AtomicBool::new(false),
            wake_push: Notify::new(),
            wake_pull: Notify::new(),
            shutdown: watch::channel(false).0,
            push_lock: AsyncMutex::new(()),
            pull_lock: AsyncMutex::new(()),
            running: std::sync::atomic::AtomicUsize::new(0),
            blobs: std::sync::Mutex::new(BTreeMap::new()),
        }
    }

    /// Read the buckets held from the store, after a pull. Those a pull said the actor `lost`
    /// (and no later page brought back) leave a narrowed subscription and the presence
    /// tracked, as they left the server's, and nobody is present in them any more.
    pub(crate) async fn refresh_held(&self, mut lost: BTreeSet<BucketKey>) -> Result<()> {
        let held: BTreeSet<BucketKey> = self.store.buckets().await?.into_iter().collect();
        lost.retain(|b| !held.contains(b));
        if !lost.is_empty() {
            if let Some(subscription) = lock(&self.subscription).as_mut() {
                subscription.retain(|b| !lost.contains(b));
            }
            self.change_presence(|presence| {
                presence.tracked.retain(|b, _| !lost.contains(b));
                presence.forget(&lost)
            });
            self.stream_wanted.notify_one();
        }
        self.held.send_if_modified(|before| {
            let changed = *before != held;
            *before = held;
            changed
        });
        Ok(())
    }

    /// Change the presence with `change`, and tell the app of every bucket it returns that
    /// nobody is present in it any more. Events go out under the lock, so they come in the
    /// order of the changes.
    pub(crate) fn change_presence(&self, change: impl FnOnce(&mut Presence) -> Vec<BucketKey>) {
        let mut presence = lock(&self.presence);
        for bucket in change(&mut presence) {
            let _ = self.presence_events.send(PresenceEvent { bucket, state: PresenceState::new() });
        }
    }

    pub(crate) fn notify_tables<'a>(&self, tables: impl IntoIterator<Item = &'a str>) {
        for table in tables {
            if let Some(version) = self.tables.get(table) {
                version.send_modify(|v| *v += 1);
            }
        }
    }

    /// Refresh the counts in the status.
    pub(crate) async fn refresh_status(&self) {
        let pending = self.store.pending_count().await.unwrap_or(0);
        let quarantined = self.store.quarantined().await.unwrap_or_default();
        self.status.send_if_modified(|status| {
            let changed = status.pending != pending || status.quarantined != quarantined;
            status.pending = pending;
            status.quarantined = quarantined;
            changed
        });
    }
}
