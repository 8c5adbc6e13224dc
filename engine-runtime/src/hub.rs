//! The hub: one per server process. It knows which socket wants which bucket and which
//! membership claims concern which socket, so a ping reaches only the sockets subscribed to its
//! bucket; and it holds each ping until the pull horizon has passed the transaction that caused
//! it, so the pull a ping triggers sees the change.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
    /// A presence frame for a subscribed bucket (boxed: every socket's queue is sized by the
    /// largest event).
    Frame(Box<ServerFrame>),
    /// Look at the socket's [`Owed`] flags: what it owes came without an event of its own.
    Wake,
}

/// How many events a socket may have waiting; past that, events are dropped and a resync is
/// owed instead.
const SOCKET_QUEUE: usize = 64;

/// What a socket owes its client beyond the events in its queue, set by the hub and taken by
/// the socket before it sends anything else, so that no frame goes out on a bucket set that may
/// be stale (`docs/protocol.md#subscription`).
#[derive(Debug, Default)]
pub(crate) struct Owed {
    /// The actor's buckets may have changed (its memberships, or signals lost): recompute them.
    recompute: AtomicBool,
    /// Signals may have been lost: ping every followed bucket and send its presence afresh.
    resync: AtomicBool,
}

impl Owed {
    /// Whether the buckets are to be recomputed; the flag is cleared.
    pub(crate) fn take_recompute(&self) -> bool {
        self.recompute.swap(false, Ordering::AcqRel)
    }

    /// Whether a resync is owed; the flag is cleared.
    pub(crate) fn take_resync(&self) -> bool {
        self.resync.swap(false, Ordering::AcqRel)
    }

    fn lost_signals(&self) {
        // Whatever was lost may have been a membership change.
        self.recompute.store(true, Ordering::Release);
        self.resync.store(true, Ordering::Release);
    }
}

struct Entry {
    sender: mpsc::Sender<Event>,
    owed: Arc<Owed>,
    user: String,
    claims: Vec<String>,
    buckets: BTreeSet<BucketKey>,
}

#[derive(Default)]
struct Index {
    sockets: HashMap<u64, Entry>,
    by_bucket: HashMap<BucketKey, HashSet<u64>>,
    by_claim: HashMap<String, HashSet<u64>>,
    per_user: HashMap<String, usize>,
    /// Sockets still waiting for their `auth` frame, by the address they came from.
    unauthenticated: HashMap<IpAddr, usize>,
}

/// A socket from an address that has yet to authenticate, counted until dropped.
pub(crate) struct Unauthenticated {
    hub: Arc<Hub>,
    address: IpAddr,
}

impl Drop for Unauthenticated {
    fn drop(&mut self) {
        let mut index = self.hub.index();
        if let Some(count) = index.unauthenticated.get_mut(&self.address) {
            *count -= 1;
            if *count == 0 {
                index.unauthenticated.remove(&self.address);
            }
        }
    }
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
    ) -> Option<(u64, mpsc::Receiver<Event>, Arc<Owed>)> {
        let mut index = self.index();
        let count = index.per_user.entry(user.to_owned()).or_default();
        if *count >= limit {
            return None;
        }
        *count += 1;
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = mpsc::channel(SOCKET_QUEUE);
        let owed = Arc::new(Owed::default());
        Self::index_claims(&mut index, id, &claims);
        let entry = Entry { sender, owed: owed.clone(), user: user.to_owned(), claims, buckets: BTreeSet::new() };
        index.sockets.insert(id, entry);
        Some((id, receiver, owed))
    }

    fn index_claims(index: &mut Index, id: u64, claims: &[String]) {
        for claim in claims.iter().chain(std::iter::once(&"*".to_owned())) {
            index.by_claim.entry(claim.clone()).or_default().insert(id);
        }
    }

    fn unindex_claims(index: &mut Index, id: u64, claims: &[String]) {
        for claim in claims.iter().chain(std::iter::once(&"*".to_owned())) {
            if let Some(ids) = index.by_claim.get_mut(claim) {
                ids.remove(&id);
                if ids.is_empty() {
                    index.by_claim.remove(claim);
                }
            }
        }
    }

    /// Count a socket from `address` that has yet to authenticate, until the returned guard is
    /// dropped; refused when that address already has `limit` such sockets.
    pub(crate) fn admit_unauthenticated(self: &Arc<Self>, address: IpAddr, limit: usize) -> Option<Unauthenticated> {
        let mut index = self.index();
        let count = index.unauthenticated.entry(address).or_default();
        if *count >= limit {
            return None;
        }
        *count += 1;
        Some(Unauthenticated { hub: Arc::clone(self), address })
    }

    /// Socket `id` now acts with these membership claims (a fresh token with other claims).
    pub(crate) fn set_claims(&self, id: u64, claims: Vec<String>) {
        let mut index = self.index();
        let Some(old) = index.sockets.get(&id).map(|e| e.claims.clone()) else { return };
        Self::unindex_claims(&mut index, id, &old);
        Self::index_claims(&mut index, id, &claims);
        if let Some(entry) = index.sockets.get_mut(&id) {
            entry.claims = claims;
        }
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
        Self::unindex_claims(&mut index, id, &entry.claims);
        if let Some(count) = index.per_user.get_mut(&entry.user) {
            *count -= 1;
            if *count == 0 {
                index.per_user.remove(&entry.user);
            }
        }
    }

    /// Send `event` to the sockets `ids`; a socket whose queue is full owes a resync instead.
    fn send(index: &Index, ids: impl IntoIterator<Item = u64>, event: &Event) {
        for id in ids {
            if let Some(entry) = index.sockets.get(&id)
                && let Err(mpsc::error::TrySendError::Full(_)) = entry.sender.try_send(event.clone())
            {
                entry.owed.lost_signals();
            }
        }
    }

    /// Tell the sockets `ids` that they owe what `mark` sets, waking those that are idle (a
    /// socket whose queue is full finds the flags before it sends its next event).
    fn owe(index: &Index, ids: impl IntoIterator<Item = u64>, mark: impl Fn(&Owed)) {
        for id in ids {
            if let Some(entry) = index.sockets.get(&id) {
                mark(&entry.owed);
                let _ = entry.sender.try_send(Event::Wake);
            }
        }
    }

    fn deliver(&self, signal: Signal) {
        let index = self.index();
        match signal {
            Signal::Ping { bucket, .. } => {
                let ids: Vec<u64> =
                    index.by_bucket.get(&bucket).map(|s| s.iter().copied().collect()).unwrap_or_default();
                Self::send(&index, ids, &Event::Ping(bucket));
            }
            Signal::Membership(claim) => {
                let ids: Vec<u64> = if claim == "*" {
                    index.sockets.keys().copied().collect()
                } else {
                    index.by_claim.get(&claim).map(|s| s.iter().copied().collect()).unwrap_or_default()
                };
                Self::owe(&index, ids, |owed| owed.recompute.store(true, Ordering::Release));
            }
            Signal::Presence { bucket, joins, leaves } => {
                let ids: Vec<u64> =
                    index.by_bucket.get(&bucket).map(|s| s.iter().copied().collect()).unwrap_or_default();
                Self::send(&index, ids, &Event::Frame(Box::new(ServerFrame::PresenceDiff { bucket, joins, leaves })));
            }
            Signal::Resync => {
                let ids: Vec<u64> = index.sockets.keys().copied().collect();
                Self::owe(&index, ids, Owed::lost_signals);
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
