//! The hub: one per server process. It knows which socket wants which bucket and which
//! membership claims concern which socket, so a ping reaches only the sockets subscribed to its
//! bucket; and it holds each ping until the pull horizon has passed the transaction that caused
//! it, so the pull a ping triggers sees the change.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use engine_kernel::BucketKey;
use engine_kernel::wire::ServerFrame;
use tokio::sync::{broadcast, mpsc};

use crate::realtime::{Realtime, Signal};
use crate::storage::Storage;

/// What the hub sends a socket.
#[derive(Debug, Clone)]
pub(crate) enum Event {
    /// Something in a subscribed bucket changed.
    Ping(BucketKey),
    /// The actor's memberships may have changed: recompute the bucket set.
    Membership,
    /// A presence frame for a subscribed bucket (boxed: every socket's queue is sized by the
    /// largest event).
    Frame(Box<ServerFrame>),
    /// Signals may have been lost: ping every subscribed bucket and refresh presence.
    Resync,
}

/// How many events a socket may have waiting before it is told to resync instead.
const SOCKET_QUEUE: usize = 64;

struct Entry {
    sender: mpsc::Sender<Event>,
    user: String,
    claims: Vec<String>,
    buckets: BTreeSet<BucketKey>,
    /// Whether an event was dropped for a full queue (a resync is owed).
    behind: bool,
}

#[derive(Default)]
struct Index {
    sockets: HashMap<u64, Entry>,
    by_bucket: HashMap<BucketKey, HashSet<u64>>,
    by_claim: HashMap<String, HashSet<u64>>,
    per_user: HashMap<String, usize>,
}

/// The sockets of one process.
pub(crate) struct Hub {
    index: Mutex<Index>,
    next: AtomicU64,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub").field("sockets", &self.sockets()).finish()
    }
}

impl Hub {
    pub(crate) fn new() -> Arc<Hub> {
        Arc::new(Hub { index: Mutex::default(), next: AtomicU64::new(1) })
    }

    fn index(&self) -> std::sync::MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Connected sockets.
    pub(crate) fn sockets(&self) -> usize {
        self.index().sockets.len()
    }

    /// Connected sockets of `user`.
    pub(crate) fn sockets_of(&self, user: &str) -> usize {
        self.index().per_user.get(user).copied().unwrap_or(0)
    }

    /// Register a socket of `user` whose memberships are keyed by `claims` (`user_id=alice`…);
    /// refused when the user already has `limit` sockets.
    pub(crate) fn register(
        &self,
        user: &str,
        claims: Vec<String>,
        limit: usize,
    ) -> Option<(u64, mpsc::Receiver<Event>)> {
        let mut index = self.index();
        let count = index.per_user.entry(user.to_owned()).or_default();
        if *count >= limit {
            return None;
        }
        *count += 1;
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = mpsc::channel(SOCKET_QUEUE);
        for claim in claims.iter().chain(std::iter::once(&"*".to_owned())) {
            index.by_claim.entry(claim.clone()).or_default().insert(id);
        }
        index
            .sockets
            .insert(id, Entry { sender, user: user.to_owned(), claims, buckets: BTreeSet::new(), behind: false });
        Some((id, receiver))
    }

    /// The buckets socket `id` wants pings and presence of.
    pub(crate) fn subscribe(&self, id: u64, buckets: &BTreeSet<BucketKey>) {
        let mut index = self.index();
        let Some(old) = index.sockets.get(&id).map(|e| e.buckets.clone()) else { return };
        for bucket in old.difference(buckets) {
            if let Some(ids) = index.by_bucket.get_mut(bucket) {
                ids.remove(&id);
                if ids.is_empty() {
                    index.by_bucket.remove(bucket);
                }
            }
        }
        for bucket in buckets.difference(&old) {
            index.by_bucket.entry(bucket.clone()).or_default().insert(id);
        }
        if let Some(entry) = index.sockets.get_mut(&id) {
            entry.buckets = buckets.clone();
        }
    }

    pub(crate) fn unregister(&self, id: u64) {
        let mut index = self.index();
        let Some(entry) = index.sockets.remove(&id) else { return };
        for bucket in &entry.buckets {
            if let Some(ids) = index.by_bucket.get_mut(bucket) {
                ids.remove(&id);
                if ids.is_empty() {
                    index.by_bucket.remove(bucket);
                }
            }
        }
        for claim in entry.claims.iter().chain(std::iter::once(&"*".to_owned())) {
            if let Some(ids) = index.by_claim.get_mut(claim) {
                ids.remove(&id);
                if ids.is_empty() {
                    index.by_claim.remove(claim);
                }
            }
        }
        if let Some(count) = index.per_user.get_mut(&entry.user) {
            *count -= 1;
            if *count == 0 {
                index.per_user.remove(&entry.user);
            }
        }
    }

    /// Send `event` to the sockets `ids`; a socket whose queue is full owes a resync instead.
    fn send(index: &mut Index, ids: impl IntoIterator<Item = u64>, event: &Event) {
        for id in ids {
            if let Some(entry) = index.sockets.get_mut(&id) {
                if entry.behind {
                    if entry.sender.try_send(Event::Resync).is_ok() {
                        entry.behind = false;
                    }
                    continue;
                }
                if entry.sender.try_send(event.clone()).is_err() {
                    entry.behind = true;
                }
            }
        }
    }

    fn deliver(&self, signal: Signal) {
        let mut index = self.index();
        match signal {
            Signal::Ping { bucket, .. } => {
                let ids: Vec<u64> =
                    index.by_bucket.get(&bucket).map(|s| s.iter().copied().collect()).unwrap_or_default();
                Self::send(&mut index, ids, &Event::Ping(bucket));
            }
            Signal::Membership(claim) => {
                let ids: Vec<u64> = if claim == "*" {
                    index.sockets.keys().copied().collect()
                } else {
                    index.by_claim.get(&claim).map(|s| s.iter().copied().collect()).unwrap_or_default()
                };
                Self::send(&mut index, ids, &Event::Membership);
            }
            Signal::Presence { bucket, joins, leaves } => {
                let ids: Vec<u64> =
                    index.by_bucket.get(&bucket).map(|s| s.iter().copied().collect()).unwrap_or_default();
                Self::send(
                    &mut index,
                    ids,
                    &Event::Frame(Box::new(ServerFrame::PresenceDiff { bucket, joins, leaves })),
                );
            }
            Signal::Resync => {
                let ids: Vec<u64> = index.sockets.keys().copied().collect();
                Self::send(&mut index, ids, &Event::Resync);
            }
        }
    }

    /// Route every signal of `realtime` to the sockets it concerns, holding pings until the
    /// horizon of `storage` has passed their transaction. Runs until the hub is dropped.
    pub(crate) fn start(
        self: &Arc<Self>,
        realtime: &Arc<dyn Realtime>,
        storage: Arc<dyn Storage>,
    ) -> tokio::task::AbortHandle {
        let hub = Arc::downgrade(self);
        let mut signals = realtime.subscribe();
        tokio::spawn(async move {
            // Pings waiting for the horizon: (transaction id, bucket).
            let mut waiting: Vec<(u64, BucketKey)> = Vec::new();
            let mut horizon: u64 = 0;
            let mut tick = tokio::time::interval(Duration::from_millis(2));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tokio::select! {
                    signal = signals.recv() => {
                        let Some(hub) = hub.upgrade() else { return };
                        match signal {
                            Ok(Signal::Ping { bucket, xid }) if xid >= horizon => waiting.push((xid, bucket)),
                            Ok(signal) => hub.deliver(signal),
                            Err(broadcast::error::RecvError::Lagged(missed)) => {
                                tracing::warn!(missed, "the hub fell behind its signals; resyncing every socket");
                                hub.deliver(Signal::Resync);
                            }
                            Err(broadcast::error::RecvError::Closed) => return,
                        }
                    }
                    _ = tick.tick(), if !waiting.is_empty() => {
                        match storage.horizon().await {
                            Ok(h) => horizon = horizon.max(h),
                            Err(err) => tracing::warn!(error = %err, "reading the horizon failed"),
                        }
                        let Some(hub) = hub.upgrade() else { return };
                        waiting.retain(|(xid, bucket)| {
                            let ready = *xid < horizon;
                            if ready {
                                hub.deliver(Signal::Ping { bucket: bucket.clone(), xid: *xid });
                            }
                            !ready
                        });
                    }
                }
            }
        })
        .abort_handle()
    }
}
