//! The hub: one per server process. It knows which socket wants which bucket and which
//! membership claims concern which socket, so a ping reaches only the sockets subscribed to its
//! bucket; and it holds each ping until the pull horizon has passed the transaction that caused
//! it, so the pull a ping triggers sees the change.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::ws::Utf8Bytes;
use engine_kernel::BucketKey;
use engine_kernel::wire::ServerFrame;
use tokio::sync::broadcast;
use tokio::time::Instant;

use super::poll::{self, Journal};
use super::queue::{self, Inbox, Outbox};
use crate::realtime::{Realtime, Signal};
use crate::storage::Storage;

/// What the hub sends a socket.
#[derive(Debug, Clone)]
pub(crate) enum Event {
    /// Something in a subscribed bucket changed: its `ping` frame.
    Ping(Arc<BucketFrame>),
    /// A presence frame for a subscribed bucket.
    Frame(Arc<BucketFrame>),
    /// Look at the socket's [`Owed`] flags: what it owes came without an event of its own.
    Wake,
}

/// An event in a socket's queue, with how often the socket had left buckets when it was queued:
/// only an event queued before the socket last left some may be of a bucket it no longer
/// follows, so only such an event needs its bucket looked up.
#[derive(Debug)]
pub(crate) struct Queued {
    pub(crate) left: u64,
    pub(crate) event: Event,
}

/// A frame about one bucket, serialized once for every socket it goes to: a ping to 10,000
/// sockets is one string shared by their queues, not 10,000 copies of its bucket key and
/// 10,000 serializations.
#[derive(Debug)]
pub(crate) struct BucketFrame {
    pub(crate) bucket: BucketKey,
    /// The frame's JSON text.
    pub(crate) text: Utf8Bytes,
}

impl BucketFrame {
    /// `frame`, about `bucket`.
    pub(crate) fn new(bucket: BucketKey, frame: &ServerFrame) -> Arc<BucketFrame> {
        let text = serde_json::to_string(frame).expect("frames serialize");
        Arc::new(BucketFrame { bucket, text: text.into() })
    }

    /// The ping of `bucket`.
    pub(crate) fn ping(bucket: BucketKey) -> Arc<BucketFrame> {
        let frame = ServerFrame::Ping { bucket: bucket.clone() };
        BucketFrame::new(bucket, &frame)
    }
}

/// How many events a socket may have waiting; past that, events are dropped and a resync is
/// owed instead.
pub(crate) const SOCKET_QUEUE: usize = 64;

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
    outbox: Outbox<Queued>,
    /// How often the socket left buckets ([`Queued::left`]).
    left: u64,
    owed: Arc<Owed>,
    user: String,
    claims: Vec<String>,
    buckets: BTreeSet<BucketKey>,
    /// The buckets the socket is present in.
    present: BTreeSet<BucketKey>,
}

#[derive(Default)]
struct Index {
    sockets: HashMap<u64, Entry>,
    by_bucket: HashMap<BucketKey, HashSet<u64>>,
    by_claim: HashMap<String, HashSet<u64>>,
    per_user: HashMap<String, usize>,
    /// Presences of this process, by user and by bucket.
    presences_of_user: HashMap<String, usize>,
    presences_in_bucket: HashMap<BucketKey, usize>,
}

/// A socket from an address that has yet to authenticate, counted until it ends (or is evicted
/// for a newer socket of its address).
pub(crate) type Unauthenticated = crate::limits::UnauthenticatedConnection;

/// Whether a socket may be present in a bucket ([`Hub::be_present`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admitted {
    Yes,
    /// Its actor is present as often as it may be.
    ActorFull,
    /// The bucket holds as many presences as it may.
    BucketFull,
}

/// The sockets of one process.
pub(crate) struct Hub {
    index: Mutex<Index>,
    next: AtomicU64,
    /// Sockets upgraded and not yet registered ([`Opening`]).
    opening: AtomicUsize,
    /// Every signal delivered, for the polls of `GET /sync/poll`.
    pub(crate) journal: Journal,
    /// Sockets still waiting for their `auth` frame, by the address they came from.
    unauthenticated: Mutex<crate::limits::OldestFirst>,
}

/// A socket between its upgrade and its registration with the hub, counted until dropped, so
/// that a drain begun meanwhile waits for it to register and close.
pub(crate) struct Opening(Arc<Hub>);

impl Drop for Opening {
    fn drop(&mut self) {
        self.0.opening.fetch_sub(1, Ordering::AcqRel);
    }
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub").field("sockets", &self.sockets()).finish()
    }
}

impl Hub {
    pub(crate) fn new() -> Arc<Hub> {
        Arc::new(Hub {
            index: Mutex::default(),
            next: AtomicU64::new(1),
            opening: AtomicUsize::new(0),
            journal: Journal::new(),
            unauthenticated: Mutex::default(),
        })
    }

    fn index(&self) -> std::sync::MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether a socket of this process follows `bucket`.
    fn follows(&self, bucket: &BucketKey) -> bool {
        self.index().by_bucket.contains_key(bucket)
    }

    /// Connected sockets.
    pub(crate) fn sockets(&self) -> usize {
        self.index().sockets.len()
    }

    /// Count a socket as opening from its upgrade until the returned guard is dropped.
    pub(crate) fn opening(self: &Arc<Self>) -> Opening {
        self.opening.fetch_add(1, Ordering::AcqRel);
        Opening(Arc::clone(self))
    }

    /// Connected sockets and sockets still opening: what a drain waits for. The opening ones are
    /// read first: a socket registers before it stops counting as opening, so it is seen as one
    /// or the other.
    pub(crate) fn sockets_and_opening(&self) -> usize {
        let opening = self.opening.load(Ordering::Acquire);
        opening + self.sockets()
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
    ) -> Option<(u64, Inbox<Queued>, Arc<Owed>)> {
        let mut index = self.index();
        let count = index.per_user.entry(user.to_owned()).or_default();
        if *count >= limit {
            return None;
        }
        *count += 1;
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (outbox, inbox) = queue::queue(SOCKET_QUEUE);
        let owed = Arc::new(Owed::default());
        Self::index_claims(&mut index, id, &claims);
        let entry = Entry {
            outbox,
            left: 0,
            owed: owed.clone(),
            user: user.to_owned(),
            claims,
            buckets: BTreeSet::new(),
            present: BTreeSet::new(),
        };
        index.sockets.insert(id, entry);
        Some((id, inbox, owed))
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

    /// Count a socket from `address` that has yet to authenticate until it ends; when that
    /// address already has `limit` such sockets, its oldest is evicted to make room.
    pub(crate) fn admit_unauthenticated(&self, address: IpAddr, limit: usize) -> Option<Unauthenticated> {
        let mut waiting = self.unauthenticated.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        waiting.admit(address, limit)
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

    /// The buckets socket `id` wants pings and presence of; how often it has left buckets now
    /// ([`Queued::left`]).
    pub(crate) fn subscribe(&self, id: u64, buckets: &BTreeSet<BucketKey>) -> u64 {
        let mut index = self.index();
        let Some(old) = index.sockets.get(&id).map(|e| e.buckets.clone()) else { return 0 };
        let left = old.difference(buckets).next().is_some();
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
        let Some(entry) = index.sockets.get_mut(&id) else { return 0 };
        entry.buckets = buckets.clone();
        entry.left += u64::from(left);
        entry.left
    }

    /// Count socket `id` present in `bucket` (once however often it tracks there): refused when
    /// its user is present `per_actor` times already, or the bucket holds `per_bucket` presences
    /// of this process.
    pub(crate) fn be_present(&self, id: u64, bucket: &BucketKey, per_actor: usize, per_bucket: usize) -> Admitted {
        let mut index = self.index();
        let Some(entry) = index.sockets.get(&id) else { return Admitted::Yes };
        if entry.present.contains(bucket) {
            return Admitted::Yes;
        }
        let user = entry.user.clone();
        if index.presences_of_user.get(&user).copied().unwrap_or(0) >= per_actor {
            return Admitted::ActorFull;
        }
        if index.presences_in_bucket.get(bucket).copied().unwrap_or(0) >= per_bucket {
            return Admitted::BucketFull;
        }
        *index.presences_of_user.entry(user).or_default() += 1;
        *index.presences_in_bucket.entry(bucket.clone()).or_default() += 1;
        if let Some(entry) = index.sockets.get_mut(&id) {
            entry.present.insert(bucket.clone());
        }
        Admitted::Yes
    }

    /// Socket `id` is no longer present in `bucket`.
    pub(crate) fn not_present(&self, id: u64, bucket: &BucketKey) {
        let mut index = self.index();
        let Some(entry) = index.sockets.get_mut(&id) else { return };
        if entry.present.remove(bucket) {
            let user = entry.user.clone();
            Self::uncount_presence(&mut index, &user, bucket);
        }
    }

    fn uncount_presence(index: &mut Index, user: &str, bucket: &BucketKey) {
        if let Some(count) = index.presences_of_user.get_mut(user) {
            *count -= 1;
            if *count == 0 {
                index.presences_of_user.remove(user);
            }
        }
        if let Some(count) = index.presences_in_bucket.get_mut(bucket) {
            *count -= 1;
            if *count == 0 {
                index.presences_in_bucket.remove(bucket);
            }
        }
    }

    pub(crate) fn unregister(&self, id: u64) {
        let mut index = self.index();
        let Some(entry) = index.sockets.remove(&id) else { return };
        for bucket in &entry.present {
            Self::uncount_presence(&mut index, &entry.user, bucket);
        }
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
                && !entry.outbox.push(Queued { left: entry.left, event: event.clone() })
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
                entry.outbox.push(Queued { left: entry.left, event: Event::Wake });
            }
        }
    }

    fn deliver(&self, signal: Signal) {
        let index = self.index();
        match signal {
            Signal::Ping { bucket, .. } => {
                self.journal.record(poll::Entry::Ping(bucket.clone()));
                let ids: Vec<u64> =
                    index.by_bucket.get(&bucket).map(|s| s.iter().copied().collect()).unwrap_or_default();
                Self::send(&index, ids, &Event::Ping(BucketFrame::ping(bucket)));
            }
            Signal::Membership(claim) => {
                self.journal.record(poll::Entry::Membership(claim.clone()));
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
                let frame = ServerFrame::PresenceDiff { bucket: bucket.clone(), joins, leaves };
                Self::send(&index, ids, &Event::Frame(BucketFrame::new(bucket, &frame)));
            }
            Signal::Resync => {
                self.journal.record(poll::Entry::Resync);
                let ids: Vec<u64> = index.sockets.keys().copied().collect();
                Self::owe(&index, ids, Owed::lost_signals);
            }
        }
    }

    /// Route every signal of `realtime` to the sockets it concerns, holding pings until the
    /// horizon of `storage` has passed their transaction, and pass released pings on to its
    /// [`Relay`](crate::realtime::Relay), if it has one. Runs until the hub is dropped.
    ///
    /// A bucket's ping goes out as soon as the horizon has passed its transaction; the pings that
    /// come within `window` after it are gathered, then go out as one for the transactions the
    /// horizon has passed ([`Waiting::release`]): at most one ping of a bucket a window, one timer
    /// for the process, however many sockets follow the bucket. Waiting pings are kept one
    /// gathering per bucket, at most [`WAITING_BUCKETS`] of them; past that they become one resync
    /// of every socket, sent once the horizon has passed them all. While a ping of a bucket a
    /// socket follows waits, the horizon is read when the first gathering is due, then every 2 ms
    /// while it moves, less often (up to every [`MAX_CHECK`]) while it stands still; pings no
    /// socket followed when they came (a server taking pushes with no one listening) wait for a
    /// reading every [`MAX_CHECK`], so they cost no query per commit and still reach a socket that
    /// subscribes meanwhile. When a ping has waited longer than `warn_after`, the transaction
    /// holding the horizon back is named in a warning.
    pub(crate) fn start(
        self: &Arc<Self>,
        realtime: &Arc<dyn Realtime>,
        storage: Arc<dyn Storage>,
        window: Duration,
        warn_after: Duration,
    ) -> tokio::task::AbortHandle {
        let hub = Arc::downgrade(self);
        let mut signals = realtime.subscribe();
        // Pings relayed beyond this process have followers the hub does not see: every ping
        // counts as followed.
        let realtime = Arc::clone(realtime);
        let relaying = realtime.relay().is_some();
        tokio::spawn(async move {
            let mut waiting = Waiting::default();
            let mut horizon: u64 = 0;
            let mut delay = MIN_CHECK;
            let mut next_check = Instant::now();
            let mut warned: Option<Instant> = None;
            loop {
                tokio::select! {
                    signal = signals.recv() => {
                        let Some(hub) = hub.upgrade() else { return };
                        match signal {
                            Ok(Signal::Ping { bucket, xid }) => {
                                let (followed, now) = (relaying || hub.follows(&bucket), Instant::now());
                                let (was_empty, was_urgent) = (waiting.is_empty(), waiting.is_urgent());
                                let due = waiting.add(bucket, xid, followed, now, window);
                                if was_empty || (followed && !was_urgent) {
                                    // The horizon is read when the bucket's gathering is due: at
                                    // once, unless the bucket was pinged within the window.
                                    delay = if followed { MIN_CHECK } else { MAX_CHECK };
                                    next_check = if followed { due } else { now + MAX_CHECK.max(window) };
                                } else if followed && xid < horizon {
                                    // Passed already: it goes when its gathering is due, however
                                    // long others wait for the horizon.
                                    next_check = next_check.min(due);
                                }
                            }
                            Ok(signal) => hub.deliver(signal),
                            Err(broadcast::error::RecvError::Lagged(missed)) => {
                                tracing::warn!(missed, "the hub fell behind its signals; resyncing every socket");
                                hub.deliver(Signal::Resync);
                            }
                            Err(broadcast::error::RecvError::Closed) => return,
                        }
                    }
                    () = until(next_check), if !waiting.is_empty() => {
                        let before = horizon;
                        match storage.horizon().await {
                            Ok(h) => horizon = horizon.max(h),
                            Err(err) => tracing::warn!(error = ?crate::error::Chain(&err), "reading the horizon failed"),
                        }
                        let Some(hub) = hub.upgrade() else { return };
                        let mut released = Vec::new();
                        waiting.release(horizon, Instant::now(), window, |signal| {
                            if let Signal::Ping { bucket, .. } = &signal && relaying {
                                released.push(bucket.clone());
                            }
                            hub.deliver(signal);
                        });
                        if let Some(relay) = realtime.relay() && !released.is_empty() {
                            relay.send(released);
                        }
                        delay = if !waiting.is_urgent() {
                            MAX_CHECK
                        } else if horizon > before {
                            MIN_CHECK
                        } else {
                            (delay * 2).min(MAX_CHECK)
                        };
                        let now = Instant::now();
                        next_check = waiting.gathered().map_or(now + delay, |due| due.max(now + delay));
                        let held = waiting.oldest().map(|since| since.elapsed());
                        if held.is_some_and(|held| held > warn_after) && warned.is_none_or(|at| at.elapsed() > warn_after.max(WARN_EVERY)) {
                            warned = Some(Instant::now());
                            warn_held_back(storage.as_ref(), held.unwrap_or_default(), waiting.len()).await;
                        }
                    }
                }
            }
        })
        .abort_handle()
    }
}

/// Wait until `at`, without a timer when it has come. A ping due at once would otherwise wait
/// for the timer's next tick: tokio's timers round a deadline up to the end of its millisecond.
async fn until(at: Instant) {
    if at > Instant::now() {
        tokio::time::sleep_until(at).await;
    }
}

/// The first wait between readings of the horizon while pings wait.
const MIN_CHECK: Duration = Duration::from_millis(2);

/// The longest wait between readings of the horizon while pings wait.
pub(crate) const MAX_CHECK: Duration = Duration::from_millis(250);

/// The most buckets whose pings wait for the horizon one by one.
pub(crate) const WAITING_BUCKETS: usize = 10_000;

/// How often, at most, the warning about a held-back horizon is repeated.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// Pings waiting for the horizon: per bucket a [`Gathering`]; past [`WAITING_BUCKETS`], one
/// resync for everything.
#[derive(Default)]
struct Waiting {
    buckets: HashMap<BucketKey, Gathering>,
    /// When each bucket's last ping went out, while that was less than a window ago.
    sent: HashMap<BucketKey, Instant>,
    /// How many of `buckets` a socket followed.
    followed: usize,
    /// Every socket is owed a resync once the horizon has passed this transaction, waiting since.
    overflow: Option<(u64, Instant)>,
}

/// The pings of one bucket that wait.
struct Gathering {
    /// The earliest transaction the horizon has yet to pass.
    first: u64,
    /// The latest transaction.
    last: u64,
    /// When the first of these pings came.
    since: Instant,
    /// When the gathering may go out: when its first ping came, or a window after the bucket's
    /// last ping went out if that was less than a window before.
    due: Instant,
    /// Whether a socket followed the bucket when a ping came.
    followed: bool,
}

impl Waiting {
    fn is_empty(&self) -> bool {
        self.buckets.is_empty() && self.overflow.is_none()
    }

    /// Whether a socket waits for what waits: a bucket it followed, or the resync every socket
    /// is owed.
    fn is_urgent(&self) -> bool {
        self.followed > 0 || self.overflow.is_some()
    }

    fn len(&self) -> usize {
        self.buckets.len() + usize::from(self.overflow.is_some())
    }

    /// Add a ping of `bucket`; when its gathering is due.
    fn add(&mut self, bucket: BucketKey, xid: u64, followed: bool, now: Instant, window: Duration) -> Instant {
        if let Some((top, _)) = &mut self.overflow {
            *top = (*top).max(xid);
            return now;
        }
        if self.buckets.len() >= WAITING_BUCKETS && !self.buckets.contains_key(&bucket) {
            let since = self.buckets.values().map(|g| g.since).min().unwrap_or(now);
            let top = self.buckets.drain().map(|(_, g)| g.last).fold(xid, u64::max);
            self.followed = 0;
            tracing::warn!(buckets = WAITING_BUCKETS, "too many pings wait for the horizon; every socket will resync");
            self.overflow = Some((top, since));
            return now;
        }
        let due = self.sent.get(&bucket).map_or(now, |sent| now.max(*sent + window));
        let entry =
            self.buckets.entry(bucket).or_insert(Gathering { first: xid, last: xid, since: now, due, followed: false });
        entry.first = entry.first.min(xid);
        entry.last = entry.last.max(xid);
        if followed && !entry.followed {
            entry.followed = true;
            self.followed += 1;
        }
        entry.due
    }

    /// Deliver a ping for each bucket whose gathering is due by `now` and some of whose
    /// transactions the horizon has passed. A bucket with transactions the horizon has yet to
    /// pass keeps waiting for them, in a gathering due a window from now: under a steady stream
    /// of commits the horizon may never pass the latest, and its followers still hear of the rest.
    fn release(&mut self, horizon: u64, now: Instant, window: Duration, mut deliver: impl FnMut(Signal)) {
        let (followed, sent) = (&mut self.followed, &mut self.sent);
        sent.retain(|_, at| *at + window > now);
        self.buckets.retain(|bucket, gathering| {
            if gathering.first >= horizon || gathering.due > now {
                return true;
            }
            deliver(Signal::Ping { bucket: bucket.clone(), xid: gathering.last.min(horizon - 1) });
            sent.insert(bucket.clone(), now);
            if gathering.last < horizon {
                *followed -= usize::from(gathering.followed);
                return false;
            }
            gathering.first = horizon;
            gathering.since = now;
            gathering.due = now + window;
            true
        });
        if self.overflow.is_some_and(|(top, _)| top < horizon) {
            self.overflow = None;
            deliver(Signal::Resync);
        }
    }

    /// When the first bucket's gathering is due.
    fn gathered(&self) -> Option<Instant> {
        self.buckets.values().map(|g| g.due).min()
    }

    /// Since when the longest-waiting ping waits.
    fn oldest(&self) -> Option<Instant> {
        self.buckets.values().map(|g| g.since).chain(self.overflow.map(|(_, since)| since)).min()
    }
}

/// Name the transaction that holds the horizon back, for the operator.
async fn warn_held_back(storage: &dyn Storage, held: Duration, waiting: usize) {
    let held_ms = u64::try_from(held.as_millis()).unwrap_or(u64::MAX);
    match storage.horizon_blocker().await {
        Ok(Some(blocker)) => tracing::warn!(
            held_ms,
            waiting,
            pid = blocker.pid,
            age_ms = u64::try_from(blocker.age.as_millis()).unwrap_or(u64::MAX),
            query_start = blocker.query_start.map(|t| t.to_rfc3339()).unwrap_or_default(),
            state = blocker.state.as_deref().unwrap_or(""),
            application = blocker.application.as_deref().unwrap_or(""),
            "the horizon is held back: pings and pulls wait for this transaction (end it, or set \
             idle_in_transaction_session_timeout)"
        ),
        Ok(None) => tracing::warn!(held_ms, waiting, "the horizon is held back by a transaction that cannot be named"),
        Err(err) => {
            tracing::warn!(held_ms, waiting, error = ?crate::error::Chain(&err), "the horizon is held back; naming its transaction failed")
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use engine_kernel::BucketKey;
    use tokio::time::Instant;

    use super::{Signal, WAITING_BUCKETS, Waiting, until};

    fn bucket(n: usize) -> BucketKey {
        BucketKey::parse(&format!("own/u{n}")).unwrap()
    }

    /// Instants by milliseconds from now.
    fn clock() -> impl Fn(u64) -> Instant {
        let start = Instant::now();
        move |ms| start + Duration::from_millis(ms)
    }

    /// A reading of the horizon due now starts at the first poll, not at the timer's next tick:
    /// a bucket's first ping is due at once (`tokio::time::sleep_until` with that instant would
    /// still be pending here); one due later still waits.
    #[tokio::test]
    async fn a_reading_due_now_waits_for_no_timer() {
        use futures_util::FutureExt;
        let now = Instant::now();
        assert!(until(now).now_or_never().is_some(), "due now: ready at once");
        assert!(until(now - Duration::from_millis(1)).now_or_never().is_some(), "overdue: ready at once");
        assert!(until(now + Duration::from_secs(60)).now_or_never().is_none(), "due later: pending");
    }

    /// Pings of buckets no socket follows wait without urgency, and are still delivered once the
    /// horizon passes them; a followed bucket's ping makes the wait urgent until it is delivered;
    /// an overflow (a resync every socket is owed) is urgent.
    #[test]
    fn only_a_followed_bucket_or_an_owed_resync_makes_waiting_urgent() {
        let (now, none) = (Instant::now(), Duration::ZERO);
        let mut waiting = Waiting::default();
        waiting.add(bucket(1), 10, false, now, none);
        waiting.add(bucket(1), 12, false, now, none);
        assert!(!waiting.is_urgent());
        waiting.add(bucket(2), 11, true, now, none);
        waiting.add(bucket(2), 13, true, now, none);
        waiting.add(bucket(1), 14, true, now, none);
        assert!(waiting.is_urgent());

        let mut delivered = Vec::new();
        waiting.release(14, now, none, |signal| delivered.push(signal));
        assert!(
            delivered.iter().all(|signal| matches!(signal, Signal::Ping { xid: 13, .. })) && delivered.len() == 2,
            "bucket 2 whole, bucket 1 up to 13: {delivered:?}"
        );
        assert!(waiting.is_urgent(), "bucket 1 waits for transaction 14, followed");
        waiting.release(15, now, none, |signal| delivered.push(signal));
        assert!(matches!(&delivered[2..], [Signal::Ping { xid: 14, .. }]), "{delivered:?}");
        assert!(waiting.is_empty() && !waiting.is_urgent());

        for n in 0..=WAITING_BUCKETS {
            waiting.add(bucket(n), 20, false, now, none);
        }
        assert!(waiting.is_urgent(), "past the bound, every socket is owed a resync");
        waiting.release(21, now, none, |signal| delivered.push(signal));
        assert!(matches!(delivered.last(), Some(Signal::Resync)));
        assert!(waiting.is_empty() && !waiting.is_urgent());
    }

    /// A bucket's first ping goes out as soon as the horizon has passed it; the pings that come
    /// within the window after it are gathered and go out as one when the window ends, even when
    /// the horizon passed them at once; a ping a window or more after the last goes out at once.
    #[test]
    fn a_buckets_pings_go_out_once_a_window() {
        let (at, window, mut waiting) = (clock(), Duration::from_millis(10), Waiting::default());
        assert_eq!(waiting.add(bucket(1), 10, true, at(0), window), at(0), "due at once");
        let mut delivered = Vec::new();
        waiting.release(100, at(0), window, |signal| delivered.push(signal));
        assert!(matches!(&delivered[..], [Signal::Ping { xid: 10, .. }]), "{delivered:?}");

        assert_eq!(waiting.add(bucket(1), 11, true, at(4), window), at(10), "a window after the last ping");
        waiting.add(bucket(1), 12, true, at(6), window);
        assert_eq!(waiting.add(bucket(2), 13, true, at(6), window), at(6), "another bucket's, at once");
        assert_eq!(waiting.gathered(), Some(at(6)));
        waiting.release(100, at(6), window, |signal| delivered.push(signal));
        assert!(matches!(&delivered[1..], [Signal::Ping { xid: 13, .. }]), "{delivered:?}");
        waiting.release(100, at(9), window, |signal| delivered.push(signal));
        assert_eq!(delivered.len(), 2, "nothing more within the window: {delivered:?}");
        waiting.release(100, at(10), window, |signal| delivered.push(signal));
        assert!(
            matches!(&delivered[2..], [Signal::Ping { xid: 12, .. }]),
            "bucket 1's two pings as one: {delivered:?}"
        );

        assert_eq!(waiting.add(bucket(1), 14, true, at(20), window), at(20), "a window after the last ping");
        waiting.release(100, at(20), window, |signal| delivered.push(signal));
        assert!(matches!(&delivered[3..], [Signal::Ping { xid: 14, .. }]), "{delivered:?}");
        assert!(waiting.is_empty());
    }

    /// Under a steady stream of commits the horizon may never pass a bucket's latest
    /// transaction: its followers still get a ping for what it has passed, and another once it
    /// passes the rest, a window later.
    #[test]
    fn a_bucket_whose_latest_transaction_is_not_yet_passed_is_pinged_for_the_earlier_ones() {
        let (at, window, mut waiting) = (clock(), Duration::from_millis(10), Waiting::default());
        waiting.add(bucket(1), 10, true, at(0), window);
        waiting.add(bucket(1), 20, true, at(1), window);
        let mut delivered = Vec::new();
        waiting.release(10, at(1), window, |signal| delivered.push(signal));
        assert!(delivered.is_empty(), "the horizon passed none: {delivered:?}");
        waiting.release(15, at(2), window, |signal| delivered.push(signal));
        assert!(matches!(&delivered[..], [Signal::Ping { xid: 14, .. }]), "{delivered:?}");
        assert!(waiting.is_urgent(), "transaction 20 still waits, followed");
        waiting.add(bucket(1), 30, true, at(5), window);
        waiting.release(31, at(11), window, |signal| delivered.push(signal));
        assert_eq!(delivered.len(), 1, "the rest is due at 12 ms: {delivered:?}");
        waiting.release(31, at(12), window, |signal| delivered.push(signal));
        assert!(matches!(&delivered[1..], [Signal::Ping { xid: 30, .. }]), "{delivered:?}");
        assert!(waiting.is_empty() && !waiting.is_urgent());
    }
}
