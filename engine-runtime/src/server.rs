//! The assembled server: a builder taking the app, its store, its auth and optional settings
//! with the defaults of `docs/design.md` §14; `router()` for mounting in an existing axum
//! service, `listen()` / `serve()` to run it alone with graceful shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::serve::{ListenerExt, TapIo};
use engine_kernel::{Actor, App};
use tokio::net::{TcpListener, TcpStream};

use crate::auth::EngineAuth;
use crate::blob::Blobs;
use crate::contract::ServedContract;
use crate::error::{Error, Result};
use crate::http;
use crate::jobs::Jobs;
use crate::limits::{FairShare, Limits, RateLimit, StreamLimits, WorkLimit};
use crate::metrics::Prometheus;
use crate::observer::{NoObserver, Observer};
use crate::realtime::{OpenRealtime, PresenceSettings, in_process};
use crate::service::{AdminCriterion, BlobAccess, Operator, SyncService};
use crate::state::{Background, Gate, Lifetime, ServerState};
use crate::storage::{OpenStorage, Retention, Storage, postgres};
use crate::stream::StreamState;
use crate::stream::hub::Hub;

/// How long tombstones are kept by default: clients away longer start their buckets afresh.
pub const DEFAULT_TOMBSTONE_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// How long a ping may wait for the horizon by default before the transaction holding it back
/// is named in a warning.
pub const DEFAULT_HORIZON_WARNING: Duration = Duration::from_secs(10);

/// How the server treats the database at start-up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Provisioning {
    /// Provision it (idempotent): the default.
    #[default]
    Apply,
    /// Check that it is provisioned for this app, and refuse to start otherwise.
    Verify,
}

enum StorageSource {
    Open(Box<dyn OpenStorage>),
    Ready(Arc<dyn Storage>),
}

/// Builds a [`Server`]. Start with [`Server::builder`].
///
/// # Mounting in an existing service
///
/// [`Server::router`] nests under a prefix of a host app beside its own routes and layers:
///
/// - The router opens no span of its own, so it does not duplicate the host's `TraceLayer`;
///   [`trace_requests`](Self::trace_requests) asks for one. Either way every response carries an
///   `x-request-id` (the request's own, or a new UUID v7).
/// - The served contract names the prefix in `servers`: the one the router is nested under, or
///   the one given to [`mount_prefix`](Self::mount_prefix).
/// - Serve the host app with `TCP_NODELAY` on accepted connections ([`tcp_nodelay`]), as
///   [`Server::serve`] does: otherwise the second of two small WebSocket frames in a row waits
///   for the client's delayed acknowledgement, about 40 ms.
/// - Serve it on [`Server::connections`] with [`Peer`](crate::Peer) as the connect info
///   (`into_make_service_with_connect_info::<Peer>()`), as [`Server::serve`] does, so that
///   connections that have yet to authenticate a request are counted per address
///   ([`Limits::unauthenticated_per_address`]), and so are stream sockets still waiting to
///   authenticate ([`StreamLimits::unauthenticated_per_address`]). Served with
///   `into_make_service_with_connect_info::<SocketAddr>()` on a plain listener, only the
///   sockets are counted; without connect info, neither is.
/// - The host's own routes authenticate with the engine's auth through the
///   [`Authenticated`](crate::auth::Authenticated) extractor, given [`Server::auth`] as state.
///
/// ```no_run
/// # async fn run(engine: engine_runtime::Server) -> std::io::Result<()> {
/// use axum::Router;
/// use axum::routing::get;
///
/// let host = Router::new().route("/health", get(|| async { "ok" })).nest("/sync-api", engine.router());
/// let listener = engine.connections(tokio::net::TcpListener::bind("127.0.0.1:8080").await?);
/// let host = host.into_make_service_with_connect_info::<engine_runtime::Peer>();
/// axum::serve(listener, host).await
/// # }
/// ```
#[must_use]
pub struct ServerBuilder {
    app: Option<App>,
    storage: Option<StorageSource>,
    auth: Option<Arc<dyn EngineAuth>>,
    realtime: Option<Box<dyn OpenRealtime>>,
    stream_limits: StreamLimits,
    observer: Arc<dyn Observer>,
    limits: Limits,
    presence: PresenceSettings,
    admin: AdminCriterion,
    provisioning: Provisioning,
    retention: Retention,
    horizon_warning: Duration,
    jobs: Option<Jobs>,
    blobs: Option<Blobs>,
    trace_requests: bool,
    prometheus: bool,
    mount_prefix: Option<String>,
}

impl std::fmt::Debug for ServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerBuilder")
            .field("limits", &self.limits)
            .field("provisioning", &self.provisioning)
            .field("jobs", &self.jobs)
            .field("blobs", &self.blobs)
            .field("trace_requests", &self.trace_requests)
            .field("mount_prefix", &self.mount_prefix)
            .finish_non_exhaustive()
    }
}

impl ServerBuilder {
    /// The app to serve (required).
    pub fn app(mut self, app: App) -> Self {
        self.app = Some(app);
        self
    }

    /// Store the app in the database at `url`: Postgres (`postgres://user@host/database`,
    /// shorthand for `.storage(storage::postgres(url))`) or a SQLite file (`sqlite://path`,
    /// for `.storage(storage::sqlite(path))`).
    pub fn database_url(self, url: impl Into<String>) -> Self {
        let url = url.into();
        match crate::storage::sqlite_path(&url) {
            Some(path) => self.storage(crate::storage::sqlite(path)),
            None => self.storage(postgres(url)),
        }
    }

    /// The store to open for the app (required, unless [`database_url`](Self::database_url) or
    /// [`storage_instance`](Self::storage_instance) is given).
    pub fn storage(mut self, storage: impl OpenStorage) -> Self {
        self.storage = Some(StorageSource::Open(Box::new(storage)));
        self
    }

    /// An already opened store.
    pub fn storage_instance(mut self, storage: Arc<dyn Storage>) -> Self {
        self.storage = Some(StorageSource::Ready(storage));
        self
    }

    /// How requests are authenticated (required).
    pub fn auth(mut self, auth: impl EngineAuth) -> Self {
        self.auth = Some(Arc::new(auth));
        self
    }

    /// How signals and presence reach subscribers (default: [`in_process()`]; several
    /// instances on one Postgres: [`listen_notify`](crate::realtime::listen_notify()); several
    /// instances through NATS, with the feature `nats`: `realtime::nats(url)`).
    pub fn realtime(mut self, realtime: impl OpenRealtime) -> Self {
        self.realtime = Some(Box::new(realtime));
        self
    }

    /// Limits of `/sync/stream` connections (frame size and rate, sockets per actor, …).
    pub fn stream_limits(mut self, limits: StreamLimits) -> Self {
        self.stream_limits = limits;
        self
    }

    /// Hooks told of pulls, pushes, conflicts and errors.
    pub fn observer(mut self, observer: impl Observer) -> Self {
        self.observer = Arc::new(observer);
        self
    }

    /// Request limits (default: 1 MiB bodies; 50 requests a second per actor, bursts of 200; 4
    /// requests of one actor in progress at once).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Presence settings (default: a 30 s heartbeat timeout).
    pub fn presence(mut self, presence: PresenceSettings) -> Self {
        self.presence = presence;
        self
    }

    /// Who may read `/engine/stats` (default: actors whose token has `"admin": true`).
    pub fn admin(mut self, criterion: impl Fn(&Actor) -> bool + Send + Sync + 'static) -> Self {
        self.admin = Arc::new(criterion);
        self
    }

    /// Run background jobs with these handlers (`docs/design.md` §12): the server starts a
    /// worker on its store, which shares the queue with the workers of other instances. Without
    /// it, jobs that mutations enqueue wait for a worker elsewhere ([`Jobs::start`]).
    pub fn jobs(mut self, jobs: Jobs) -> Self {
        self.jobs = Some(jobs);
        self
    }

    /// Store blobs (`docs/protocol.md#blobs`): `POST /blobs/upload` and `/blobs/download` hand
    /// out signed URLs of this store, a download only to who can read a row referring to the
    /// blob. Without it, those routes answer 404.
    pub fn blobs(mut self, blobs: Blobs) -> Self {
        self.blobs = Some(blobs);
        self
    }

    /// Provision the database at start-up (the default) or only verify it.
    pub fn provisioning(mut self, provisioning: Provisioning) -> Self {
        self.provisioning = provisioning;
        self
    }

    /// How long a ping may wait for the horizon before the server logs a warning naming the
    /// transaction that holds it back (default [`DEFAULT_HORIZON_WARNING`]; `docs/design.md`,
    /// the horizon).
    pub fn horizon_warning(mut self, after: Duration) -> Self {
        self.horizon_warning = after;
        self
    }

    /// How long tombstones are kept (default 7 days): shorthand for
    /// [`retention`](Self::retention) with only the tombstones' changed.
    pub fn tombstone_retention(mut self, retention: Duration) -> Self {
        self.retention.tombstones = retention;
        self
    }

    /// How long tombstones, mutation records, idle clients and finished jobs are kept, and how
    /// many rows a step of their collection deletes (defaults in [`Retention`]). Every instance
    /// tries to collect every [`COLLECTION_INTERVAL`](crate::storage::COLLECTION_INTERVAL); one
    /// at a time does.
    pub fn retention(mut self, retention: Retention) -> Self {
        self.retention = retention;
        self
    }

    /// Open a `tracing` span per request (`request`, with the method, path, request id and
    /// actor), for a server that runs alone. Off by default: a host app that mounts the router
    /// traces requests itself.
    pub fn trace_requests(mut self, trace: bool) -> Self {
        self.trace_requests = trace;
        self
    }

    /// Serve the server's metrics in Prometheus' text format at `GET /engine/metrics`, to
    /// admins as `/engine/stats` (off by default). The server always measures through the
    /// `metrics` facade; this installs a Prometheus recorder for the process, which fails when
    /// the app installed a recorder of its own (which then receives the metrics). The metrics
    /// are listed in `docs/design.md` §15.
    pub fn prometheus(mut self, on: bool) -> Self {
        self.prometheus = on;
        self
    }

    /// The path prefix (`/sync-api`) or URL clients reach the routes under, which the served
    /// contract names in `servers`. By default it is the prefix the router is nested under in
    /// the host app (`Router::nest`), and none at the root; set it when something between the
    /// clients and the host changes the path, such as a proxy that strips a prefix.
    pub fn mount_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.mount_prefix = Some(prefix.into());
        self
    }

    /// Open the store, provision (or verify) the database, and assemble the server.
    pub async fn build(self) -> Result<Server> {
        let app = Arc::new(self.app.ok_or_else(|| Error::config("the server needs an app: `.app(…)`"))?);
        if self.stream_limits.ping_window > crate::limits::MAX_PING_WINDOW {
            return Err(Error::config(format!(
                "the stream's ping window is at most {} ms, not {} ms",
                crate::limits::MAX_PING_WINDOW.as_millis(),
                self.stream_limits.ping_window.as_millis()
            )));
        }
        let auth =
            self.auth.ok_or_else(|| Error::config("the server needs auth: `.auth(BearerTokenAuth::new(secret))`"))?;
        auth.check_config()?;
        let storage = match self.storage {
            Some(StorageSource::Ready(storage)) => storage,
            Some(StorageSource::Open(open)) => open.open(app.clone()).await?,
            None => return Err(Error::config("the server needs a store: `.database_url(…)` or `.storage(…)`")),
        };
        if let Some(needs) = self.realtime.as_ref().and_then(|r| r.needs())
            && needs != storage.backend()
        {
            return Err(Error::config(format!(
                "the realtime adapter carries its messages through {needs}, and the store is {}: a {} store is \
                 served by one process, whose in-process realtime (the default) reaches every socket",
                storage.backend(),
                storage.backend()
            )));
        }
        if let Some(jobs) = &self.jobs {
            jobs.check()?;
        }
        match self.provisioning {
            Provisioning::Apply => storage.provision().await?,
            Provisioning::Verify => storage.verify().await?,
        }
        let jobs = match self.jobs {
            Some(jobs) => Some(jobs.start(storage.clone()).await?),
            None => None,
        };
        let prometheus = if self.prometheus { Some(Prometheus::install()?) } else { None };
        let contract = ServedContract::new(&app, self.mount_prefix)?;
        let rate_limit = RateLimit::new(&self.limits);
        let realtime =
            self.realtime.unwrap_or_else(|| Box::new(in_process())).open(self.presence.heartbeat_timeout).await?;
        let hub = Hub::new();
        let has_blob_columns = app.tables().iter().any(|def| def.meta().columns.iter().any(|c| c.blob));
        let ledger = match (&self.blobs, has_blob_columns) {
            (Some(blobs), true) => storage.blob_ledger().map(|mut ledger| {
                ledger.upload_timeout = blobs.upload_timeout;
                ledger
            }),
            _ => None,
        };
        let mut background = Background::start(storage.clone(), rate_limit.clone(), self.retention);
        background.add(hub.start(&realtime, storage.clone(), self.stream_limits.ping_window, self.horizon_warning));
        let share = storage.sharing().map(|sharing| {
            let (capacity, pushes, others) = sharing.places();
            (FairShare::new(capacity, pushes, others, sharing.wait), sharing)
        });
        let merges = FairShare::merges(self.limits.large_merges);
        let blob_access = Arc::new(BlobAccess {
            blobs: self.blobs,
            storage: storage.clone(),
            ledger,
            app: app.clone(),
            share: share.as_ref().map(|(share, _)| share.clone()),
        });
        if blob_access.ledger.is_some() {
            background.add(Background::collect_blobs(blob_access.clone(), self.retention.batch));
        }
        let (unsent, publishing) = crate::service::publish_unsent(realtime.clone());
        background.add(publishing);
        let state = ServerState {
            sync: Arc::new(SyncService {
                storage: storage.clone(),
                realtime: realtime.clone(),
                observer: self.observer,
                share: share.clone(),
                unsent,
                merges: merges.clone(),
            }),
            stream: Arc::new(StreamState {
                storage: storage.clone(),
                hub: hub.clone(),
                realtime,
                auth: auth.clone(),
                stream_limits: self.stream_limits,
                presence: self.presence,
                rate_limit: rate_limit.clone(),
                draining: tokio::sync::watch::Sender::new(false),
            }),
            gate: Arc::new(Gate {
                auth,
                rate_limit,
                work_limit: WorkLimit::new(&self.limits),
                body_limit: self.limits.body_bytes,
                body_read_timeout: self.limits.body_read_timeout,
                unauthenticated_per_address: self.limits.unauthenticated_per_address,
                unauthenticated_deadline: self.limits.unauthenticated_deadline,
            }),
            operator: Arc::new(Operator {
                admin: self.admin,
                storage: storage.clone(),
                hub,
                prometheus,
                merges,
                places: share.as_ref().map(|(places, _)| places.clone()),
            }),
            blobs: blob_access,
            contract: Arc::new(contract),
            trace_requests: self.trace_requests,
            _lifetime: Arc::new(Lifetime { _background: background, _jobs: jobs }),
        };
        Ok(Server { state })
    }
}

/// A sync server for one app.
pub struct Server {
    state: ServerState,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("presence", &self.state.stream.presence).finish_non_exhaustive()
    }
}

impl Server {
    /// Start building a server.
    pub fn builder() -> ServerBuilder {
        ServerBuilder {
            app: None,
            storage: None,
            auth: None,
            realtime: None,
            stream_limits: StreamLimits::default(),
            observer: Arc::new(NoObserver),
            limits: Limits::default(),
            presence: PresenceSettings::default(),
            admin: Arc::new(|actor: &Actor| actor.claim::<bool>("admin") == Some(true)),
            provisioning: Provisioning::Apply,
            retention: Retention::default(),
            horizon_warning: DEFAULT_HORIZON_WARNING,
            jobs: None,
            blobs: None,
            trace_requests: false,
            prometheus: false,
            mount_prefix: None,
        }
    }

    /// The routes of the protocol as an axum router, to serve alone or to `nest` under a prefix
    /// of an existing service beside its own routes ([mounting](ServerBuilder#mounting-in-an-existing-service)).
    /// Serve it with `TCP_NODELAY` on accepted connections ([`tcp_nodelay`]), or small
    /// WebSocket frames wait for delayed acknowledgements.
    pub fn router(&self) -> Router {
        http::router(self.state.clone())
    }

    /// The auth the server's routes resolve actors with: the state a host app's routes give
    /// the [`Authenticated`](crate::auth::Authenticated) extractor.
    pub fn auth(&self) -> Arc<dyn EngineAuth> {
        self.state.gate.auth.clone()
    }

    /// Collect the blobs that no row has named for [`Blobs::unused_grace`], and resolve the
    /// upload reservations long expired, in batches of `batch` (the server does it every
    /// [`COLLECTION_INTERVAL`](crate::storage::COLLECTION_INTERVAL) by itself).
    /// [`Error::NotFound`] on a server that stores no blobs.
    pub async fn collect_blobs(&self, batch: usize) -> Result<crate::blob::CollectedBlobs> {
        self.state.blobs.collect(batch).await
    }

    /// The store the server serves from.
    pub fn storage(&self) -> Arc<dyn Storage> {
        self.state.sync.storage.clone()
    }

    /// Serve on `addr` until Ctrl-C or SIGTERM, then finish the requests in flight.
    pub async fn listen(self, addr: impl tokio::net::ToSocketAddrs) -> Result<()> {
        let listener = TcpListener::bind(addr).await.map_err(|e| Error::config_from("cannot listen", e))?;
        self.serve(listener).await
    }

    /// Serve on a bound listener until Ctrl-C or SIGTERM, then shut down for a rolling restart:
    /// stop accepting connections, close every socket with 1012 ([`drain`](Self::drain)), and
    /// answer the requests in flight before returning.
    pub async fn serve(self, listener: TcpListener) -> Result<()> {
        self.serve_beside(listener, Router::new()).await
    }

    /// As [`serve`](Self::serve), with the host app's own `routes` (a web app's pages, a health
    /// check) served beside the protocol's; the two must not share a path.
    pub async fn serve_beside(self, listener: TcpListener, routes: Router) -> Result<()> {
        let addr: Option<SocketAddr> = listener.local_addr().ok();
        if let Some(addr) = addr {
            tracing::info!(%addr, "serving");
        }
        let state = self.state.clone();
        let stop = async move {
            shutdown_signal().await;
            // Sockets are detached from their HTTP connections: they close themselves.
            state.stream.draining.send_replace(true);
        };
        // The host's routes have the peer's address as `ConnectInfo<SocketAddr>` too.
        let router = routes.merge(self.router()).layer(axum::middleware::from_fn(http::peer_address));
        let listener = self.connections(listener);
        axum::serve(listener, router.into_make_service_with_connect_info::<http::Peer>())
            .with_graceful_shutdown(stop)
            .await
            .map_err(|e| Error::internal_from("the server stopped", e))?;
        self.drain().await;
        Ok(())
    }

    /// `listener` with `TCP_NODELAY` set on every connection it accepts, and each connection
    /// counted against its address until one of its requests authenticates: an address with
    /// [`Limits::unauthenticated_per_address`] such connections open that opens another has its
    /// oldest unauthenticated one closed to make room, and a connection still unauthenticated at
    /// [`Limits::unauthenticated_deadline`] is closed. A host app that serves the
    /// [`router`](Self::router) itself serves it on this, with [`Peer`](http::Peer) as the
    /// connect info:
    ///
    /// ```no_run
    /// # async fn run(engine: engine_runtime::Server) -> std::io::Result<()> {
    /// let host = axum::Router::new().nest("/sync-api", engine.router());
    /// let listener = engine.connections(tokio::net::TcpListener::bind("127.0.0.1:8080").await?);
    /// let host = host.into_make_service_with_connect_info::<engine_runtime::Peer>();
    /// axum::serve(listener, host).await
    /// # }
    /// ```
    pub fn connections(&self, listener: TcpListener) -> http::Connections {
        http::Connections::new(
            listener,
            self.state.gate.unauthenticated_per_address,
            self.state.gate.unauthenticated_deadline,
        )
    }

    /// Shut the realtime side down for a restart: every socket is sent `retry_later` and closed
    /// with 1012 (service restart), so its client reconnects at once, to another instance; new
    /// sockets are refused 503. Returns once the sockets have closed, or after
    /// 5 s. A host app that serves the [`router`](Self::router) itself calls this
    /// when it shuts down, after it stops accepting connections.
    pub async fn drain(&self) {
        self.state.stream.draining.send_replace(true);
        let deadline = tokio::time::Instant::now() + DRAIN_DEADLINE;
        while self.state.stream.hub.sockets_and_opening() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let left = self.state.stream.hub.sockets_and_opening();
        if left > 0 {
            tracing::warn!(sockets = left, "sockets still open after the drain deadline");
        }
    }
}

/// How long [`Server::drain`] waits for the sockets to close.
pub(crate) const DRAIN_DEADLINE: Duration = Duration::from_secs(5);

/// `listener` with `TCP_NODELAY` set on every connection it accepts, for `axum::serve`.
///
/// Pings and presence are small frames: without `TCP_NODELAY` the second of two frames in a row
/// waits for the client's delayed acknowledgement (about 40 ms). A host app that mounts the
/// engine's router serves it through this (or sets the option itself).
pub fn tcp_nodelay(listener: TcpListener) -> TapIo<TcpListener, fn(&mut TcpStream)> {
    listener.tap_io(http::set_nodelay)
}

/// Ctrl-C, or SIGTERM on Unix.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
    tracing::info!("shutting down");
}
