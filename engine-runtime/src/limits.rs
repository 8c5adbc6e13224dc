//! Limits a user can rely on (`docs/design.md` §14), each configurable: the request body size, a
//! per-actor request rate (governor's token bucket, keyed by user id), a per-actor limit on
//! requests in progress at once, the connections from one address that have yet to
//! authenticate, and the limits of stream connections ([`StreamLimits`]).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::task::{Context, Waker};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};

use crate::error::Error;

/// The default body limit: 1 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;
/// The default sustained rate per actor: 50 requests a second.
pub const DEFAULT_RATE_PER_SECOND: u32 = 50;
/// The default burst per actor: 200 requests.
pub const DEFAULT_BURST: u32 = 200;
/// The default number of requests one actor may have in progress at once: 4.
pub const DEFAULT_CONCURRENT_PER_ACTOR: usize = 4;
/// The default time a request body has to arrive whole once its headers are read: 30 s.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// The default number of connections from one address that may be open without having
/// authenticated a request: 64.
pub const DEFAULT_UNAUTHENTICATED_PER_ADDRESS: usize = 64;

/// How long a connection may stay open without authenticating a request, unless it is set.
pub const DEFAULT_UNAUTHENTICATED_DEADLINE: Duration = Duration::from_secs(30);
/// A collaborative update of more bytes than this (its base64 text) is a large merge, gated by
/// [`Limits::large_merges`]; a smaller one, the common edit, merges at once: 16 KiB.
pub const LARGE_MERGE_BYTES: usize = 16 * 1024;
/// How long a large merge waits for its place before its mutation is answered `retry_later`:
/// 30 s.
pub const LARGE_MERGE_WAIT: Duration = Duration::from_secs(30);

/// The default number of large merges that run at once: half the host's cores, at least one.
pub fn default_large_merges() -> usize {
    std::thread::available_parallelism().map_or(1, |cores| (cores.get() / 2).max(1))
}

/// Request limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// The largest request body in bytes (413 beyond it).
    pub body_bytes: usize,
    /// Requests a second each actor may make on average; 0 turns the limit off.
    pub rate_per_second: u32,
    /// Requests an actor may make at once after being idle.
    pub burst: u32,
    /// Requests of one actor that may be in progress at once (pulls, pushes, stats, blob
    /// tickets): each may hold a database session, so one actor cannot take them all from the
    /// others. Beyond it, `429 rate_limited`; 0 turns the limit off.
    pub concurrent_per_actor: usize,
    /// How long a request body may take to arrive once its headers are read: a body sent
    /// slowly holds the actor's request permit and its bytes, and is given up after this with
    /// `503 retry_later`.
    pub body_read_timeout: Duration,
    /// Connections from one address (an IPv6 one: from its /64 network) that may be open at once
    /// without having authenticated a request (their headers still arriving, or answered 401 and
    /// kept open): a new connection from an address at the limit closes the address's oldest
    /// unauthenticated one. Counted by the listener of [`Server::serve`] and
    /// [`Server::connections`]; 0 turns the limit off. Behind a reverse proxy every connection
    /// comes from the proxy's address: turn it off there, and let the proxy bound each client.
    ///
    /// [`Server::serve`]: crate::Server::serve
    /// [`Server::connections`]: crate::Server::connections
    pub unauthenticated_per_address: usize,
    /// How long a connection may stay open without a request of it authenticating (or becoming
    /// a stream socket, which has its own deadline): past it, nothing more is read from the
    /// connection, and it closes once the request it has sent, if any, is answered. It bounds
    /// headers sent a byte at a time and connections answered 401 and kept open, from any number
    /// of addresses, and behind a reverse proxy too. Applied by the listener of
    /// [`Server::serve`] and [`Server::connections`]; zero turns it off.
    ///
    /// [`Server::serve`]: crate::Server::serve
    /// [`Server::connections`]: crate::Server::connections
    pub unauthenticated_deadline: Duration,
    /// Merges of large collaborative updates (over [`LARGE_MERGE_BYTES`]) that may run at once,
    /// over all actors, shared fairly between them (`docs/design.md` §7): each is CPU work on a
    /// blocking thread, and a few actors' many merges would otherwise starve the async workers
    /// that serve everyone. Default [`default_large_merges`]; 0 turns the gate off.
    pub large_merges: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            body_bytes: DEFAULT_BODY_LIMIT,
            rate_per_second: DEFAULT_RATE_PER_SECOND,
            burst: DEFAULT_BURST,
            concurrent_per_actor: DEFAULT_CONCURRENT_PER_ACTOR,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            unauthenticated_per_address: DEFAULT_UNAUTHENTICATED_PER_ADDRESS,
            unauthenticated_deadline: DEFAULT_UNAUTHENTICATED_DEADLINE,
            large_merges: default_large_merges(),
        }
    }
}

impl Limits {
    /// These limits with a body limit of `bytes`.
    #[must_use]
    pub fn body_bytes(mut self, bytes: usize) -> Self {
        self.body_bytes = bytes;
        self
    }

    /// These limits with `per_second` requests a second per actor (0: off) and a burst of
    /// `burst`.
    #[must_use]
    pub fn rate(mut self, per_second: u32, burst: u32) -> Self {
        self.rate_per_second = per_second;
        self.burst = burst.max(1);
        self
    }

    /// These limits with at most `n` requests of one actor in progress at once (0: off).
    #[must_use]
    pub fn concurrent_per_actor(mut self, n: usize) -> Self {
        self.concurrent_per_actor = n;
        self
    }

    /// These limits with a request body given up when it has not arrived whole within `timeout`
    /// of its headers.
    #[must_use]
    pub fn body_read_timeout(mut self, timeout: Duration) -> Self {
        self.body_read_timeout = timeout;
        self
    }

    /// These limits with at most `n` connections from one address open without having
    /// authenticated a request (0: off).
    #[must_use]
    pub fn unauthenticated_per_address(mut self, n: usize) -> Self {
        self.unauthenticated_per_address = n;
        self
    }

    /// These limits with a connection closed when none of its requests has authenticated within
    /// `deadline` of its opening (zero: never).
    #[must_use]
    pub fn unauthenticated_deadline(mut self, deadline: Duration) -> Self {
        self.unauthenticated_deadline = deadline;
        self
    }

    /// These limits with at most `n` merges of large collaborative updates running at once (0:
    /// no gate).
    #[must_use]
    pub fn large_merges(mut self, n: usize) -> Self {
        self.large_merges = n;
        self
    }
}

/// Connections or sockets that have yet to authenticate, counted by the address they came from:
/// one address cannot hold more than a limit of them, whatever they send and however slowly. An
/// IPv6 address counts as its /64 network ([`counted_as`]).
#[derive(Clone, Default)]
pub(crate) struct ByAddress(Arc<Mutex<HashMap<IpAddr, usize>>>);

/// The address a connection from `address` counts against: an IPv4 address itself (also when
/// written as an IPv4-mapped IPv6 one), an IPv6 address its /64 network. One host or home is
/// given a whole /64 and may use any address in it, so counted one by one its addresses would
/// bound nothing.
pub(crate) fn counted_as(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(std::net::Ipv6Addr::from(v6.to_bits() & !u128::from(u64::MAX))),
        },
    }
}

impl ByAddress {
    /// Count one more from `address` until the permit is dropped; refused when the address
    /// already has `limit`.
    pub(crate) fn admit(&self, address: IpAddr, limit: usize) -> Option<AddressPermit> {
        let address = counted_as(address);
        let mut counts = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = counts.entry(address).or_default();
        if *count >= limit {
            if *count == 0 {
                counts.remove(&address);
            }
            return None;
        }
        *count += 1;
        Some(AddressPermit { counts: self.clone(), address })
    }
}

/// Connections or sockets that have yet to authenticate, counted by address ([`ByAddress`]) and
/// kept per address oldest first: an address at its limit that brings another has its oldest
/// one evicted ([`UnauthenticatedConnection::evict`]) to make room. What one address holds stays
/// bounded, and a client behind the same address as an attacker (a shared NAT, an office) still
/// gets in, as it authenticates within moments where the attacker's wait to become the oldest.
/// Those that authenticated or ended are let go as their address comes again, and all of them
/// every [`SWEEP_EVERY`] admissions.
#[derive(Default)]
pub(crate) struct OldestFirst {
    counts: ByAddress,
    by_address: HashMap<IpAddr, std::collections::VecDeque<UnauthenticatedConnection>>,
    admitted: usize,
}

/// How many admissions [`OldestFirst`] makes between sweeps of every address.
const SWEEP_EVERY: usize = 1024;

impl OldestFirst {
    /// A count against `address` for a new connection or socket, the address's oldest
    /// unauthenticated one evicted first when it is at `limit` (which is not 0). None only were
    /// the address's count held by none that could be evicted, which does not happen.
    pub(crate) fn admit(&mut self, address: IpAddr, limit: usize) -> Option<UnauthenticatedConnection> {
        self.admitted = self.admitted.wrapping_add(1);
        if self.admitted.is_multiple_of(SWEEP_EVERY) {
            self.by_address.retain(|_, held| {
                held.retain(|c| !c.ended());
                !held.is_empty()
            });
        }
        let held = self.by_address.entry(counted_as(address)).or_default();
        held.retain(|c| !c.ended());
        let permit = match self.counts.admit(address, limit) {
            Some(permit) => permit,
            None => {
                while let Some(oldest) = held.pop_front() {
                    if oldest.evict() {
                        tracing::debug!(%address, "closed for a newer connection or socket of its address");
                        break;
                    }
                }
                self.counts.admit(address, limit)?
            }
        };
        let admitted = UnauthenticatedConnection::new(Some(permit));
        held.push_back(admitted.clone());
        Some(admitted)
    }
}

/// Ends an [`UnauthenticatedConnection`] when dropped: for a socket, whose count is also kept by
/// [`OldestFirst`], so that dropping the socket's own handle would not give it back.
pub(crate) struct EndOnDrop(pub(crate) UnauthenticatedConnection);

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// A connection while none of its requests has authenticated, with its count against its
/// address: the listener (`http::Connections`) puts it on each request of the connection, and the
/// first to authenticate ends it ([`end`](Self::end)); so does the connection's end. Without a
/// permit when the address is not counted.
#[derive(Clone)]
pub(crate) struct UnauthenticatedConnection(Arc<Mutex<Unauthenticated>>);

struct Unauthenticated {
    permit: Option<AddressPermit>,
    ended: bool,
    /// Closed to make room for a newer connection of its address.
    evicted: bool,
    /// The connection's reader, woken when it is evicted.
    reader: Option<Waker>,
}

impl UnauthenticatedConnection {
    pub(crate) fn new(permit: Option<AddressPermit>) -> Self {
        let state = Unauthenticated { permit, ended: false, evicted: false, reader: None };
        UnauthenticatedConnection(Arc::new(Mutex::new(state)))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Unauthenticated> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The connection no longer counts against its address, nor runs to its deadline.
    pub(crate) fn end(&self) {
        let mut state = self.state();
        state.permit = None;
        state.ended = true;
        state.reader = None;
    }

    /// Whether a request of the connection has authenticated (or it has ended).
    pub(crate) fn ended(&self) -> bool {
        self.state().ended
    }

    /// Close the connection for a newer one of its address, unless a request of it has
    /// authenticated: its count is given back at once, and its reader woken to read the close.
    /// Whether it was evicted.
    pub(crate) fn evict(&self) -> bool {
        let mut state = self.state();
        if state.ended || state.evicted {
            return false;
        }
        state.permit = None;
        state.evicted = true;
        if let Some(reader) = state.reader.take() {
            reader.wake();
        }
        true
    }

    /// Whether the connection was evicted; if not and it still counts, `cx` is woken when it is.
    pub(crate) fn poll_evicted(&self, cx: &Context<'_>) -> bool {
        let mut state = self.state();
        if state.evicted {
            return true;
        }
        if !state.ended && !state.reader.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            state.reader = Some(cx.waker().clone());
        }
        false
    }

    /// The request of `parts` authenticated: its connection no longer counts. The engine's
    /// router puts the count on its requests; a host app's own routes served on the same
    /// connections have it in their connect info ([`Peer`]).
    pub(crate) fn authenticated(parts: &axum::http::request::Parts) {
        if let Some(unauthenticated) = parts.extensions.get::<UnauthenticatedConnection>() {
            unauthenticated.end();
        }
        if let Some(axum::extract::ConnectInfo(peer)) = parts.extensions.get::<axum::extract::ConnectInfo<Peer>>() {
            peer.unauthenticated.end();
        }
    }
}

/// The connect info of a connection of `http::Connections`: the peer's address, and the
/// connection's count against it, which the first request to authenticate ends. The engine's
/// router gives its requests the address as `ConnectInfo<SocketAddr>` too, and the count as an
/// extension.
#[derive(Clone)]
pub struct Peer {
    address: SocketAddr,
    unauthenticated: UnauthenticatedConnection,
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peer").field("address", &self.address).finish_non_exhaustive()
    }
}

impl Peer {
    pub(crate) fn new(address: SocketAddr, unauthenticated: UnauthenticatedConnection) -> Self {
        Peer { address, unauthenticated }
    }

    /// The peer's address.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The connection's count against its address.
    pub(crate) fn unauthenticated(&self) -> UnauthenticatedConnection {
        self.unauthenticated.clone()
    }
}

/// One of [`ByAddress`], counted until dropped.
pub(crate) struct AddressPermit {
    counts: ByAddress,
    address: IpAddr,
}

impl Drop for AddressPermit {
    fn drop(&mut self) {
        let mut counts = self.counts.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(count) = counts.get_mut(&self.address) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.address);
            }
        }
    }
}

/// The per-actor limiter.
#[derive(Clone)]
pub(crate) struct RateLimit {
    limiter: Arc<DefaultKeyedRateLimiter<String>>,
}

impl RateLimit {
    pub(crate) fn new(limits: &Limits) -> Option<Self> {
        let rate = NonZeroU32::new(limits.rate_per_second)?;
        let burst = NonZeroU32::new(limits.burst.max(limits.rate_per_second)).unwrap_or(rate);
        let quota = Quota::per_second(rate).allow_burst(burst);
        Some(RateLimit { limiter: Arc::new(DefaultKeyedRateLimiter::keyed(quota)) })
    }

    /// Count a request of `actor`; refuse it when over the rate.
    pub(crate) fn check(&self, actor: &str) -> Result<(), Error> {
        self.limiter.check_key(&actor.to_owned()).map_err(|not_until| Error::RateLimited {
            retry_after: not_until.wait_time_from(DefaultClock::default().now()).max(Duration::from_millis(1)),
        })
    }

    /// Forget actors that have been idle long enough to be back at a full burst.
    pub(crate) fn housekeep(&self) {
        self.limiter.retain_recent();
        self.limiter.shrink_to_fit();
    }
}

/// How long an actor at its limit of requests in progress, or of sockets, is asked to wait.
pub(crate) const BUSY_RETRY_AFTER: Duration = Duration::from_secs(1);

/// The requests each actor has in progress, bounded per actor.
#[derive(Clone)]
pub(crate) struct WorkLimit {
    limit: usize,
    in_progress: Arc<Mutex<HashMap<String, usize>>>,
}

impl WorkLimit {
    pub(crate) fn new(limits: &Limits) -> Option<Self> {
        (limits.concurrent_per_actor > 0)
            .then(|| WorkLimit { limit: limits.concurrent_per_actor, in_progress: Arc::default() })
    }

    /// Count a request of `actor` as in progress until the permit is dropped; refuse it when the
    /// actor is at its limit.
    pub(crate) fn enter(&self, actor: &str) -> Result<WorkPermit, Error> {
        let mut in_progress = self.in_progress.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = in_progress.entry(actor.to_owned()).or_default();
        if *count >= self.limit {
            return Err(Error::Busy {
                detail: format!(
                    "the actor already has {} requests in progress, as many as it may; retry when one has finished",
                    self.limit
                ),
                retry_after: BUSY_RETRY_AFTER,
            });
        }
        *count += 1;
        Ok(WorkPermit { limit: self.clone(), actor: actor.to_owned() })
    }
}

/// One request in progress of an actor, counted until dropped.
pub(crate) struct WorkPermit {
    limit: WorkLimit,
    actor: String,
}

impl Drop for WorkPermit {
    fn drop(&mut self) {
        let mut in_progress = self.limit.in_progress.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(count) = in_progress.get_mut(&self.actor) {
            *count -= 1;
            if *count == 0 {
                in_progress.remove(&self.actor);
            }
        }
    }
}

/// Limits of stream connections (`docs/design.md` §8 and §14; how a connection over one is
/// closed: `docs/protocol.md#closing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct StreamLimits {
    /// The largest frame a client may send (1009 beyond it).
    pub max_frame_bytes: usize,
    /// Frames a second a socket may send on average (1008 beyond it).
    pub frames_per_second: u32,
    /// Frames a socket may send at once.
    pub frame_burst: u32,
    /// Sockets one actor may hold on one server instance.
    pub sockets_per_actor: usize,
    /// How long a socket without credentials has to send its `auth` frame.
    pub auth_deadline: Duration,
    /// The largest presence meta, serialized.
    pub max_meta_bytes: usize,
    /// How long after a bucket's ping its next pings are gathered before they go out, as one
    /// ping to each socket following the bucket (a ping with none in the window before it goes
    /// out at once); at most [`MAX_PING_WINDOW`] (the server refuses to build with more).
    pub ping_window: Duration,
    /// The largest frame the WebSocket layer reads on a socket that brought no credentials to
    /// its upgrade (it authenticates by its first frame): beyond it the connection is dropped.
    pub first_frame_bytes: usize,
    /// Sockets from one address (an IPv6 one: from its /64 network) that may be waiting for their
    /// `auth` frame at once: one more closes the address's oldest (`1013 retry_later`); with 0,
    /// every socket that brings no credentials to its upgrade is refused `429`.
    pub unauthenticated_per_address: usize,
    /// Presences one actor may hold on one server instance, over all its sockets and buckets: a
    /// `track` beyond closes its socket (`too_many_presences`).
    pub presences_per_actor: usize,
    /// Presences one bucket may hold on one server instance: a `track` into a full bucket is
    /// not announced (the socket stays open).
    pub presences_per_bucket: usize,
    /// Polls (`GET /sync/poll`) one actor may have waiting at once on one server instance;
    /// more are refused `429`.
    pub polls_per_actor: usize,
    /// The longest a poll waits for a frame, whatever its `wait` asks: shorter than the idle
    /// timeout of the proxies in front of the server (30 s by default).
    pub longest_poll: Duration,
}

/// The longest [`StreamLimits::ping_window`].
pub const MAX_PING_WINDOW: Duration = Duration::from_secs(1);

impl Default for StreamLimits {
    fn default() -> Self {
        StreamLimits {
            max_frame_bytes: 64 * 1024,
            frames_per_second: 20,
            frame_burst: 50,
            sockets_per_actor: 16,
            auth_deadline: Duration::from_secs(5),
            max_meta_bytes: 1024,
            ping_window: Duration::from_millis(10),
            first_frame_bytes: 16 * 1024,
            unauthenticated_per_address: 32,
            presences_per_actor: 64,
            presences_per_bucket: 128,
            polls_per_actor: 8,
            longest_poll: Duration::from_secs(30),
        }
    }
}

/// What a request does with its place of [`FairShare`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Work {
    /// A pull: a page, bounded in what it costs.
    Pull,
    /// A push: up to a thousand mutations on one session.
    Push,
    /// A merge of a large collaborative update, on a place of the merge gate: it may take any
    /// place, as a pull may.
    Merge,
}

/// The store's places (its pool's sessions) shared fairly between actors (`docs/design.md` §6):
/// at most `capacity` requests use the store at once, pushes at most three quarters of them
/// (never all), so pulls always have a place that no push holds. While a place a request may take
/// is free and nobody waits, it takes it at once; otherwise it waits, and a place set free goes
/// to the waiting request, of those that may take it, whose actor holds the fewest places, then
/// whose actor took one longest ago (the earliest request among those). So however many requests
/// some actors queue, another actor waits only for the next place to be freed, not behind their
/// queue, as it did in the pool's own order of arrival. The merge gate shares its places
/// (merges of large collaborative updates) by the same turns ([`FairShare::merges`]).
pub(crate) struct FairShare {
    capacity: usize,
    pushes: usize,
    /// The most places requests other than pushes hold at once.
    others: usize,
    wait: Duration,
    /// What a place is, as a refusal names it.
    place: &'static str,
    state: Mutex<Shares>,
}

#[derive(Default)]
struct Shares {
    in_use: usize,
    /// The most places in use at once so far.
    most_in_use: usize,
    pushes_in_use: usize,
    held: HashMap<String, usize>,
    /// When each actor last took a place, in places taken (forgotten past [`SERVED_KEPT`]).
    served: HashMap<String, u64>,
    taken: u64,
    /// In order of arrival.
    waiting: std::collections::VecDeque<Waiter>,
    next: u64,
}

/// How many actors [`FairShare`] remembers the last turn of; past it, it starts over.
const SERVED_KEPT: usize = 10_000;

struct Waiter {
    id: u64,
    actor: String,
    work: Work,
    granted: tokio::sync::oneshot::Sender<()>,
}

impl Shares {
    fn take(&mut self, actor: &str, work: Work) {
        self.in_use += 1;
        self.most_in_use = self.most_in_use.max(self.in_use);
        if work == Work::Push {
            self.pushes_in_use += 1;
        }
        *self.held.entry(actor.to_owned()).or_default() += 1;
        if self.served.len() >= SERVED_KEPT {
            self.served.clear();
        }
        self.taken += 1;
        self.served.insert(actor.to_owned(), self.taken);
    }

    /// Who goes first among waiters: the actor holding the fewest places, then the one served
    /// longest ago (or never).
    fn turn_of(&self, actor: &str) -> (usize, u64) {
        (self.held.get(actor).copied().unwrap_or(0), self.served.get(actor).copied().unwrap_or(0))
    }
}

impl FairShare {
    /// `capacity` places (at least one), of which pushes hold at most `pushes` and other
    /// requests at most `others` (`Sharing::places` tells a store's); a request waits at most
    /// `wait` for one.
    pub(crate) fn new(capacity: usize, pushes: usize, others: usize, wait: Duration) -> Arc<Self> {
        let capacity = capacity.max(1);
        Arc::new(FairShare {
            capacity,
            pushes: pushes.clamp(1, capacity),
            others: others.clamp(1, capacity),
            wait,
            place: "database session",
            state: Mutex::default(),
        })
    }

    /// The merge gate: `capacity` places (at least one) for merges of large collaborative
    /// updates ([`Work::Merge`]), waited for at most [`LARGE_MERGE_WAIT`]; none when `capacity`
    /// is 0.
    pub(crate) fn merges(capacity: usize) -> Option<Arc<Self>> {
        (capacity > 0).then(|| {
            Arc::new(FairShare {
                capacity,
                pushes: capacity,
                others: capacity,
                wait: LARGE_MERGE_WAIT,
                place: "place to merge a large collaborative update",
                state: Mutex::default(),
            })
        })
    }

    /// The places in use now, the most in use at once so far, and how many there are.
    pub(crate) fn use_of_places(&self) -> (usize, usize, usize) {
        let shares = self.shares();
        (shares.in_use, shares.most_in_use, self.capacity)
    }

    fn shares(&self) -> std::sync::MutexGuard<'_, Shares> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether a free place may go to `work`.
    fn room_for(&self, shares: &Shares, work: Work) -> bool {
        shares.in_use < self.capacity
            && match work {
                Work::Push => shares.pushes_in_use < self.pushes,
                Work::Pull | Work::Merge => shares.in_use - shares.pushes_in_use < self.others,
            }
    }

    /// A place for `work` of `actor` if one is free now and nobody waits for one; `retry_later`
    /// otherwise. For a task that holds a place of another share, which must not wait for this
    /// one: a task holding a place of this share and waiting for the other's would wait for it.
    pub(crate) fn try_admit(self: &Arc<Self>, actor: &str, work: Work) -> Result<Place, Error> {
        self.take_free(&mut self.shares(), actor, work).ok_or_else(|| Error::RetryLater {
            retry_after: BUSY_RETRY_AFTER,
            detail: format!("no {} was free", self.place),
        })
    }

    /// A place for `work` of `actor` when one is free and nobody waits for one.
    fn take_free(self: &Arc<Self>, shares: &mut Shares, actor: &str, work: Work) -> Option<Place> {
        if !(self.room_for(shares, work) && shares.waiting.is_empty()) {
            return None;
        }
        shares.take(actor, work);
        Some(Place { share: Arc::clone(self), actor: actor.to_owned(), work })
    }

    /// A place for `work` of `actor`, held until dropped; `retry_later` after waiting `wait` in
    /// vain.
    pub(crate) async fn admit(self: &Arc<Self>, actor: &str, work: Work) -> Result<Place, Error> {
        let (id, mut granted) = {
            let mut shares = self.shares();
            if let Some(place) = self.take_free(&mut shares, actor, work) {
                return Ok(place);
            }
            let (sender, granted) = tokio::sync::oneshot::channel();
            shares.next += 1;
            let id = shares.next;
            shares.waiting.push_back(Waiter { id, actor: actor.to_owned(), work, granted: sender });
            // Waiters that gave up are dropped here, and a place they left free is handed on.
            self.hand_on(&mut shares);
            (id, granted)
        };
        // The receiver outlives the wait, so a place handed on as the wait runs out is seen.
        let admitted = match tokio::time::timeout(self.wait, &mut granted).await {
            Ok(answer) => answer.is_ok(),
            Err(_) => {
                let mut shares = self.shares();
                match shares.waiting.iter().position(|w| w.id == id) {
                    Some(at) => {
                        shares.waiting.remove(at);
                        false
                    }
                    // Handed a place as the wait ran out: it is this request's.
                    None => granted.try_recv().is_ok(),
                }
            }
        };
        if admitted {
            Ok(Place { share: Arc::clone(self), actor: actor.to_owned(), work })
        } else {
            Err(Error::RetryLater {
                retry_after: BUSY_RETRY_AFTER,
                detail: format!("no {} was free for {} ms", self.place, self.wait.as_millis()),
            })
        }
    }

    /// Give free places to the waiting requests that may take them, in turn ([`Shares::turn_of`]).
    fn hand_on(&self, shares: &mut Shares) {
        loop {
            let next = (0..shares.waiting.len())
                .filter(|&i| self.room_for(shares, shares.waiting[i].work))
                .min_by_key(|&i| shares.turn_of(&shares.waiting[i].actor));
            let Some(next) = next else { return };
            let waiter = shares.waiting.remove(next).expect("the waiter is there");
            if waiter.granted.send(()).is_ok() {
                shares.take(&waiter.actor, waiter.work);
            }
        }
    }
}

/// A place of [`FairShare`], given back when dropped.
pub(crate) struct Place {
    share: Arc<FairShare>,
    actor: String,
    work: Work,
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut shares = self.share.shares();
        shares.in_use -= 1;
        if self.work == Work::Push {
            shares.pushes_in_use -= 1;
        }
        if let Some(count) = shares.held.get_mut(&self.actor) {
            *count -= 1;
            if *count == 0 {
                shares.held.remove(&self.actor);
            }
        }
        self.share.hand_on(&mut shares);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv6_address_counts_as_its_64_network_and_an_ipv4_one_as_itself() {
        let cases = [
            ("203.0.113.7", "203.0.113.7"),
            ("::ffff:203.0.113.7", "203.0.113.7"),
            ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::"),
            ("2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::"),
            ("2001:db8:1:3::1", "2001:db8:1:3::"),
            ("::1", "::"),
        ];
        for (address, counted) in cases {
            let address: IpAddr = address.parse().unwrap();
            assert_eq!(counted_as(address), counted.parse::<IpAddr>().unwrap(), "{address}");
        }
    }

    #[test]
    fn the_addresses_of_one_64_network_share_its_count() {
        let counts = ByAddress::default();
        let first = counts.admit("2001:db8::1".parse().unwrap(), 2);
        let second = counts.admit("2001:db8::ffff:2".parse().unwrap(), 2);
        assert!(first.is_some() && second.is_some());
        assert!(counts.admit("2001:db8::3".parse().unwrap(), 2).is_none(), "the network is at its count");
        assert!(counts.admit("2001:db8:0:1::3".parse().unwrap(), 2).is_some(), "another network has its own");
        drop(first);
        assert!(counts.admit("2001:db8::3".parse().unwrap(), 2).is_some(), "a place given back is taken");
    }

    #[tokio::test]
    async fn pushes_and_other_requests_hold_no_more_than_their_places() {
        let wait = Duration::from_millis(20);
        // A store of 2 sessions whose pushes queue for one writer: 4 places for pushes beside.
        let share = FairShare::new(6, 4, 2, wait);
        let mut held = Vec::new();
        for user in ["a", "b", "c", "d"] {
            held.push(share.admit(user, Work::Push).await.expect("a push's place"));
        }
        assert!(share.admit("e", Work::Push).await.is_err(), "the pushes' places are taken");
        for user in ["e", "f"] {
            held.push(share.admit(user, Work::Pull).await.expect("a pull's place beside the pushes"));
        }
        assert!(share.admit("g", Work::Pull).await.is_err(), "the sessions are taken");
        drop(held.remove(0));
        assert!(share.admit("g", Work::Pull).await.is_err(), "a push's place is not a pull's");
        assert!(share.admit("g", Work::Push).await.is_ok(), "it is the next push's");
        // Pushes that take sessions hold at most three quarters of them; pulls may take all.
        let share = FairShare::new(4, 3, 4, wait);
        let pushes: Vec<_> =
            futures_util::future::join_all(["a", "b", "c", "d"].map(|u| share.admit(u, Work::Push))).await;
        assert_eq!(pushes.iter().filter(|p| p.is_ok()).count(), 3, "one session is kept from pushes");
        assert!(share.admit("e", Work::Pull).await.is_ok(), "a pull finds the one no push holds");
    }

    #[tokio::test]
    async fn the_merge_gate_lends_every_place_and_the_next_to_the_actor_holding_fewest() {
        let gate = FairShare::merges(2).expect("a gate of two places");
        assert!(FairShare::merges(0).is_none(), "0 turns the gate off");
        // Merges may take every place, where pushes keep one back.
        let first = gate.admit("mallory", Work::Merge).await.unwrap();
        let second = gate.admit("mallory", Work::Merge).await.unwrap();
        assert_eq!(gate.use_of_places(), (2, 2, 2));
        let (mallory, alice) = (gate.clone(), gate.clone());
        let mallory = tokio::spawn(async move { mallory.admit("mallory", Work::Merge).await });
        tokio::task::yield_now().await;
        let alice = tokio::spawn(async move { alice.admit("alice", Work::Merge).await });
        tokio::task::yield_now().await;
        drop(first);
        // The freed place goes to alice, who holds none, though mallory asked first.
        let alice = alice.await.unwrap();
        assert!(alice.is_ok());
        tokio::task::yield_now().await;
        assert!(!mallory.is_finished(), "mallory waits while she holds a place and alice asked");
        drop(second);
        let mallory = mallory.await.unwrap();
        assert!(mallory.is_ok());
        assert_eq!(gate.use_of_places(), (2, 2, 2));
        drop((alice, mallory));
        assert_eq!(gate.use_of_places(), (0, 2, 2));
    }

    /// A task holding another share's place takes a place only if one is free at once and
    /// nobody waits: it never waits behind a task that may wait for its place.
    #[tokio::test]
    async fn trying_for_a_place_takes_a_free_one_and_never_waits() {
        let gate = FairShare::merges(1).expect("a gate of one place");
        let held = gate.try_admit("alice", Work::Merge).expect("a free place");
        assert!(matches!(gate.try_admit("bob", Work::Merge), Err(Error::RetryLater { .. })));
        let waiting = gate.clone();
        let waiting = tokio::spawn(async move { waiting.admit("carol", Work::Merge).await });
        tokio::task::yield_now().await;
        drop(held);
        // The freed place went to carol, who waited: not to a try that came after her.
        let carol = waiting.await.unwrap().expect("carol's turn");
        assert!(gate.try_admit("bob", Work::Merge).is_err());
        drop(carol);
        assert!(gate.try_admit("bob", Work::Merge).is_ok());
    }
}
