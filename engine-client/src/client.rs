//! The client handle and its builder.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use engine_kernel::{Actor, App, BucketKey, Filter, Mutator, Table};
use serde_json::{Map, Value};
use tokio::sync::{broadcast, watch};

use crate::auth::AuthProvider;
use crate::error::{Error, Result};
use crate::presence::{PresenceEvent, PresenceState};
use crate::remote::Remote;
use crate::settings::{Reconnect, Settings, SyncScope};
use crate::state::{ClientState, lock};
use crate::status::Status;
use crate::store::{Quarantined, Queued, Store, StoreLocation};

/// A client of an engine server: a durable local copy of the actor's buckets that takes writes
/// offline and converges when it reconnects. Cheap to clone; background work stops when the last
/// clone is dropped (or [`close`](Client::close) is called).
///
/// ```no_run
/// # async fn example() -> engine_client::Result<()> {
/// # let app = engine_kernel::App::builder().build().unwrap();
/// use engine_client::{BearerToken, Client, StoreLocation};
/// let client = Client::builder("http://127.0.0.1:8787")
///     .app(app)
///     .auth(BearerToken::new("eyJ…"))
///     .store(StoreLocation::File("notes.db".into()))
///     .build()
///     .await?;
/// client.pull().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Client {
    pub(crate) inner: Arc<ClientState>,
    _lifetime: Arc<Lifetime>,
}

/// Stops the background tasks when the last handle goes.
#[derive(Debug)]
struct Lifetime {
    inner: Arc<ClientState>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Lifetime {
    fn drop(&mut self) {
        let _ = self.inner.shutdown.send(true);
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Builds a [`Client`]. Required: the app ([`app`](Self::app)) and credentials
/// ([`auth`](Self::auth)).
#[must_use]
pub struct ClientBuilder {
    server_url: String,
    app: Option<Arc<App>>,
    auth: Option<Arc<dyn AuthProvider>>,
    actor: Option<Actor>,
    store: StoreLocation,
    settings: Settings,
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("server_url", &self.server_url)
            .field("store", &self.store)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl ClientBuilder {
    /// The app: the same tables, mutators and rules the server runs.
    pub fn app(mut self, app: impl Into<Arc<App>>) -> Self {
        self.app = Some(app.into());
        self
    }

    /// Where credentials come from.
    pub fn auth(mut self, auth: impl AuthProvider) -> Self {
        self.auth = Some(Arc::new(auth));
        self
    }

    /// The actor mutators run for locally, when the auth provider cannot tell.
    pub fn actor(mut self, actor: Actor) -> Self {
        self.actor = Some(actor);
        self
    }

    /// Where the local store lives (default: memory).
    pub fn store(mut self, store: StoreLocation) -> Self {
        self.store = store;
        self
    }

    /// How often to pull when nothing else asks for it (default 30 s).
    pub fn pull_interval(mut self, every: Duration) -> Self {
        self.settings.pull_interval = every;
        self
    }

    /// Entries per pull page (default 1,000).
    pub fn pull_page(mut self, entries: u32) -> Self {
        self.settings.pull_page = entries.max(1);
        self
    }

    /// Mutations per push (default 100).
    pub fn push_batch(mut self, mutations: u32) -> Self {
        self.settings.push_batch = mutations.max(1);
        self
    }

    /// How long rows of buckets the actor no longer holds stay (default: they go at once).
    pub fn bucket_ttl(mut self, ttl: Duration) -> Self {
        self.settings.bucket_ttl = ttl;
        self
    }

    /// How often presence is kept alive (default 15 s).
    pub fn presence_heartbeat(mut self, every: Duration) -> Self {
        self.settings.presence_heartbeat = every;
        self
    }

    /// Reconnection and retry timing.
    pub fn reconnect(mut self, reconnect: Reconnect) -> Self {
        self.settings.reconnect = reconnect;
        self
    }

    /// Whether to keep a realtime stream (default yes).
    pub fn realtime(mut self, on: bool) -> Self {
        self.settings.realtime = on;
        self
    }

    /// Sync only what is open: every held bucket of the rules `always` (say, the rule of a list
    /// index), and the buckets the app opens with [`Client::sync_bucket`] while they are open.
    /// By default a client syncs every bucket the actor holds.
    pub fn sync_open<S: Into<String>>(mut self, always: impl IntoIterator<Item = S>) -> Self {
        self.settings.scope = SyncScope::Open { always: always.into_iter().map(Into::into).collect() };
        self
    }

    /// Whether to sync in the background (default yes); without it only explicit
    /// [`Client::pull`] and [`Client::push`] calls talk to the server.
    pub fn background(mut self, on: bool) -> Self {
        self.settings.background = on;
        self
    }

    /// Open the store and start syncing.
    ///
    /// # Errors
    /// [`Error::Config`] when the app or credentials are missing, the URL is not one or a
    /// timing is zero;
    /// [`Error::Store`] or [`Error::StoreMismatch`] when the store cannot be opened for this app
    /// and actor.
    pub async fn build(self) -> Result<Client> {
        let app = self.app.ok_or_else(|| Error::config("no app: call `.app(…)`"))?;
        let auth = self.auth.ok_or_else(|| Error::config("no credentials: call `.auth(…)`"))?;
        let actor = self
            .actor
            .or_else(|| auth.actor())
            .ok_or_else(|| Error::config("no actor: the auth provider cannot tell who it is; call `.actor(…)`"))?;
        self.settings.check()?;
        let remote = Remote::new(&self.server_url, auth)?;
        let store = Store::open(&self.store, app, actor).await?;
        let inner = Arc::new(ClientState::new(store, remote, self.settings));
        inner.refresh_status().await;
        inner.refresh_held(std::collections::BTreeSet::new()).await?;
        let mut tasks = Vec::new();
        if inner.settings.background {
            tasks.extend(crate::sync::spawn(&inner));
            if inner.settings.realtime {
                tasks.push(tokio::spawn(crate::stream::run(inner.clone())));
            }
        }
        let lifetime = Lifetime { inner: inner.clone(), tasks };
        Ok(Client { inner, _lifetime: Arc::new(lifetime) })
    }
}

impl Client {
    /// Start building a client of the server at `server_url` (`http://host:port`, or with the
    /// prefix the server is nested under). With `https://`, requests and the stream (`wss://`)
    /// use TLS and trust the system's certificate store.
    pub fn builder(server_url: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            server_url: server_url.into(),
            app: None,
            auth: None,
            actor: None,
            store: StoreLocation::Memory,
            settings: Settings::default(),
        }
    }

    /// The client's id, kept in its store.
    pub fn client_id(&self) -> uuid::Uuid {
        self.inner.store.client_id()
    }

    /// Run mutator `M` on the local store and queue it for the server, in one local transaction:
    /// when this returns, the mutation is durable and its effect is in the view.
    ///
    /// # Errors
    /// [`Error::Mutation`] when the local run refuses it (bad arguments, a business rule, a key
    /// that exists), or makes a write the server would certainly refuse (`forbidden`, in the
    /// server's words, even when the mutator went on past it): nothing is queued then.
    /// [`Error::Store`] when the store fails.
    pub async fn mutate<M: Mutator>(&self, args: M::Args) -> Result<Queued> {
        let args = serde_json::to_value(args).map_err(|e| engine_kernel::Error::validation(e.to_string()))?;
        self.mutate_named(M::NAME, args).await
    }

    /// [`mutate`](Self::mutate) by wire name, with JSON arguments.
    ///
    /// # Errors
    /// As [`mutate`](Self::mutate).
    pub async fn mutate_named(&self, name: &str, args: Value) -> Result<Queued> {
        let queued = self.inner.store.mutate(name, args).await?;
        self.inner.notify_tables(self.inner.tables.keys().copied());
        self.inner.status.send_modify(|status| status.pending += 1);
        self.inner.wake_push.notify_one();
        Ok(queued)
    }

    /// Pull until caught up.
    ///
    /// # Errors
    /// [`Error::Network`] or [`Error::Server`] when the server cannot be reached or refuses;
    /// nothing of an unfinished page is applied.
    pub async fn pull(&self) -> Result<()> {
        self.inner.pull().await
    }

    /// Push the outbox until it is drained.
    ///
    /// # Errors
    /// As [`pull`](Self::pull); mutations not yet acknowledged stay queued.
    pub async fn push(&self) -> Result<()> {
        self.inner.push().await.map(drop)
    }

    /// Push, then pull, until the outbox is empty (or a few seconds pass: a write reaches pulls
    /// once every transaction that began before it has finished on the server, and a pull may
    /// hand back writes the server lost, to be pushed again).
    ///
    /// # Errors
    /// As [`push`](Self::push) and [`pull`](Self::pull).
    pub async fn sync(&self) -> Result<()> {
        let mut wait = Duration::from_millis(10);
        for _ in 0..8 {
            self.push().await?;
            self.pull().await?;
            if self.inner.store.pending_count().await? == 0 {
                break;
            }
            tokio::time::sleep(wait).await;
            wait *= 2;
        }
        Ok(())
    }

    /// The buckets the client holds rows of, in key order.
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails.
    pub async fn buckets(&self) -> Result<Vec<BucketKey>> {
        self.inner.store.buckets().await
    }

    /// The buckets of sync rule `rule` the client holds rows of (`shared/…` for `"shared"`).
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails.
    pub async fn buckets_for_rule(&self, rule: &str) -> Result<Vec<BucketKey>> {
        Ok(self.buckets().await?.into_iter().filter(|b| b.rule() == rule).collect())
    }

    /// The cursor of the last pull (opaque; `None` before the first).
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails.
    pub async fn cursor(&self) -> Result<Option<String>> {
        self.inner.store.cursor().await
    }

    /// Follow only `buckets` in realtime (`None`: every bucket the actor holds, kept current as
    /// memberships change — the default), from now on and across reconnections. Pulls still
    /// bring every held bucket: this scopes pings, not data. A bucket the actor loses leaves the
    /// subscription, as it leaves the server's.
    pub fn subscribe(&self, buckets: Option<Vec<BucketKey>>) {
        *lock(&self.inner.subscription) = buckets;
        self.inner.stream_wanted.notify_one();
    }

    /// Sync `bucket` while the returned handle lives, on a client that syncs only what is open
    /// ([`ClientBuilder::sync_open`]): the next pull brings it (from its beginning, when the
    /// client holds none of its rows), and the stream follows it once its rows are in. Dropping
    /// the handle (or [`SyncedBucket::release`]) releases it once no other handle holds it: pulls
    /// leave it out, and its rows go after the bucket TTL, unless it is opened again before.
    /// A bucket the actor does not hold is left out of the pulls, not refused. On a client that
    /// syncs every bucket held, the handle changes nothing.
    pub fn sync_bucket(&self, bucket: BucketKey) -> SyncedBucket {
        *lock(&self.inner.open).entry(bucket.clone()).or_insert(0) += 1;
        self.inner.wake_pull.notify_one();
        SyncedBucket { inner: self.inner.clone(), bucket: Some(bucket) }
    }

    /// The buckets open through [`sync_bucket`](Self::sync_bucket) handles, in key order.
    pub fn open_buckets(&self) -> Vec<BucketKey> {
        lock(&self.inner.open).keys().cloned().collect()
    }

    /// The rows of table `T` in the view.
    pub fn collection<T: Table>(&self) -> Collection<T> {
        Collection { client: self.clone(), _table: PhantomData }
    }

    /// The row of `T` with key `key`, as the view has it.
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails.
    pub async fn get<T: Table>(&self, key: &T::Key) -> Result<Option<T>> {
        self.collection::<T>().get(key).await
    }

    /// Whether the actor may update `row`, as far as the client can tell offline from the
    /// buckets its pulls said it holds and the membership rows it has (`docs/design.md` §4,
    /// "Offline."; `canWrite` in the TypeScript client): `Some(false)` when the server would
    /// certainly refuse, `None` when only the server can tell. For a UI to show read-only
    /// controls; the server stays the authority.
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails.
    pub async fn may_update<T: Table>(&self, row: &T) -> Result<Option<bool>> {
        self.inner.store.may_update(T::META, &row.to_row()).await
    }

    /// The client's state now.
    pub fn status(&self) -> Status {
        self.inner.status.borrow().clone()
    }

    /// The client's state, as it changes. Drop a borrow of it (`borrow()`, what `wait_for`
    /// returns) before the next `.await`: while it is held, the client cannot update the status
    /// and waits.
    pub fn status_stream(&self) -> watch::Receiver<Status> {
        self.inner.status.subscribe()
    }

    /// The mutations the server rejected.
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails.
    pub async fn quarantined(&self) -> Result<Vec<Quarantined>> {
        self.inner.store.quarantined().await
    }

    /// Queue a rejected mutation again (as a new mutation, run locally first). Returns `None`
    /// when no such mutation is quarantined.
    ///
    /// # Errors
    /// As [`mutate`](Self::mutate); a mutation refused locally stays out of the quarantine.
    pub async fn retry_quarantined(&self, client_mutation_id: uuid::Uuid) -> Result<Option<Queued>> {
        let queued = self.inner.store.retry(client_mutation_id).await?;
        self.inner.notify_tables(self.inner.tables.keys().copied());
        self.inner.refresh_status().await;
        self.inner.wake_push.notify_one();
        Ok(queued)
    }

    /// Drop a rejected mutation. Returns whether it was quarantined.
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails.
    pub async fn discard_quarantined(&self, client_mutation_id: uuid::Uuid) -> Result<bool> {
        let found = self.inner.store.discard(client_mutation_id).await?;
        self.inner.refresh_status().await;
        Ok(found)
    }

    /// Announce presence in `bucket` with `meta` (kept across reconnections). It is announced
    /// while the stream follows `bucket` (see [`subscribe`](Self::subscribe)), and withdrawn
    /// for good when the actor loses the bucket.
    ///
    /// After the server refused presence as too many ([`Status::presence_refused`]), nothing is
    /// announced until the app tracks something new or untracks: the same meta tracked again
    /// (a view drawn again) changes nothing.
    pub fn track(&self, bucket: BucketKey, meta: Map<String, Value>) {
        let changed = {
            let mut presence = lock(&self.inner.presence);
            presence.tracked.insert(bucket, meta.clone()).as_ref() != Some(&meta)
        };
        self.presence_changed(changed);
    }

    /// Withdraw presence from `bucket`.
    pub fn untrack(&self, bucket: &BucketKey) {
        let changed = lock(&self.inner.presence).tracked.remove(bucket).is_some();
        self.presence_changed(changed);
    }

    /// Tell the stream of the app's presence; when it `changed`, announce it even after a
    /// refusal.
    fn presence_changed(&self, changed: bool) {
        if changed {
            lock(&self.inner.presence).refused = false;
            self.inner.status.send_if_modified(|status| std::mem::replace(&mut status.presence_refused, false));
        }
        self.inner.stream_wanted.notify_one();
    }

    /// Who is present in `bucket`, as the stream last said.
    pub fn presence_state(&self, bucket: &BucketKey) -> PresenceState {
        lock(&self.inner.presence).states.get(bucket).cloned().unwrap_or_default()
    }

    /// Presence changes, as they arrive.
    pub fn presence_events(&self) -> broadcast::Receiver<PresenceEvent> {
        self.inner.presence_events.subscribe()
    }

    /// Call `on_event` with every presence change, until the client closes.
    pub fn on_presence(&self, on_event: impl Fn(PresenceEvent) + Send + 'static) {
        let mut events = self.presence_events();
        let mut shutdown = self.inner.shutdown.subscribe();
        let inner = self.inner.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    event = events.recv() => match event {
                        Ok(event) => on_event(event),
                        // Events were dropped: each bucket's state now stands for them.
                        Err(broadcast::error::RecvError::Lagged(_)) => {
                            let states = lock(&inner.presence).states.clone();
                            for (bucket, state) in states {
                                on_event(PresenceEvent { bucket, state });
                            }
                        }
                        Err(broadcast::error::RecvError::Closed) => return,
                    },
                    _ = shutdown.changed() => return,
                }
            }
        });
    }

    /// Stop syncing now (the store stays as it is).
    pub fn close(&self) {
        let _ = self.inner.shutdown.send(true);
    }
}

/// A bucket kept open by [`Client::sync_bucket`]; dropping it releases the bucket.
#[derive(Debug)]
#[must_use = "the bucket is released when the handle is dropped"]
pub struct SyncedBucket {
    inner: Arc<ClientState>,
    bucket: Option<BucketKey>,
}

impl SyncedBucket {
    /// The bucket kept open.
    pub fn bucket(&self) -> &BucketKey {
        self.bucket.as_ref().expect("held until dropped")
    }

    /// Release the bucket now (as dropping the handle does).
    pub fn release(self) {}
}

impl Drop for SyncedBucket {
    fn drop(&mut self) {
        let Some(bucket) = self.bucket.take() else { return };
        let mut open = lock(&self.inner.open);
        if let Some(count) = open.get_mut(&bucket) {
            *count -= 1;
            if *count == 0 {
                open.remove(&bucket);
                // The pull releases it, and the stream stops following it.
                self.inner.wake_pull.notify_one();
            }
        }
    }
}

/// The rows of table `T` as the view has them (confirmed rows with pending mutations applied),
/// soft-deleted rows left out.
#[derive(Debug)]
pub struct Collection<T> {
    client: Client,
    _table: PhantomData<fn() -> T>,
}

impl<T> Clone for Collection<T> {
    fn clone(&self) -> Self {
        Collection { client: self.client.clone(), _table: PhantomData }
    }
}

impl<T: Table> Collection<T> {
    /// The row with key `key`.
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails; [`Error::Decode`] when a row is not a `T`.
    pub async fn get(&self, key: &T::Key) -> Result<Option<T>> {
        let filter: Vec<(&'static str, Value)> =
            T::key_row(key).into_iter().map(|(k, v)| (T::META.column(&k).map_or("", |c| c.name), v)).collect();
        let rows = self.client.inner.store.rows(T::META, &filter, Some(1)).await?;
        rows.into_iter().next().map(T::from_row).transpose().map_err(|e| Error::decode(T::META.name, e))
    }

    /// Every row, in key order.
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails; [`Error::Decode`] when a row is not a `T`.
    pub async fn all(&self) -> Result<Vec<T>> {
        self.filter(Filter::all()).await
    }

    /// The rows matching `filter` (`Note::list_id.eq("l1")`), in key order.
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails; [`Error::Decode`] when a row is not a `T`.
    pub async fn filter(&self, filter: Filter<T>) -> Result<Vec<T>> {
        let rows = self.client.inner.store.rows(T::META, filter.conditions(), None).await?;
        decode(rows)
    }

    /// A version of the table that changes whenever its rows may have: wait on
    /// [`watch::Receiver::changed`], then read again.
    pub fn changes(&self) -> watch::Receiver<u64> {
        match self.client.inner.tables.get(T::META.name) {
            Some(version) => version.subscribe(),
            // A table without a local copy never changes here.
            None => watch::channel(0).1,
        }
    }

    /// The rows matching `filter`, live: [`LiveQuery::next`] gives them at once, then again
    /// each time they differ (a write elsewhere in the table does not wake it).
    pub fn live(&self, filter: Filter<T>) -> LiveQuery<T> {
        LiveQuery { collection: self.clone(), filter, version: self.changes(), last: None }
    }
}

/// Rows of the view as `T`s.
fn decode<T: Table>(rows: Vec<engine_kernel::Row>) -> Result<Vec<T>> {
    rows.into_iter().map(T::from_row).collect::<engine_kernel::Result<_>>().map_err(|e| Error::decode(T::META.name, e))
}

/// A query whose result is given again whenever it changes ([`Collection::live`]).
pub struct LiveQuery<T> {
    collection: Collection<T>,
    filter: Filter<T>,
    version: watch::Receiver<u64>,
    /// The rows last given.
    last: Option<Vec<engine_kernel::Row>>,
}

impl<T> std::fmt::Debug for LiveQuery<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveQuery").field("filter", &self.filter.conditions()).finish_non_exhaustive()
    }
}

impl<T: Table> LiveQuery<T> {
    /// The rows now, the first time; after that, the rows once they differ from the last given.
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails; [`Error::Decode`] when a row is not a `T`;
    /// [`Error::Closed`] when the client closed.
    pub async fn next(&mut self) -> Result<Vec<T>> {
        loop {
            if self.last.is_some() {
                self.version.changed().await.map_err(|_| Error::Closed)?;
            } else {
                self.version.borrow_and_update();
            }
            let rows = self.collection.client.inner.store.rows(T::META, self.filter.conditions(), None).await?;
            if self.last.as_ref() != Some(&rows) {
                self.last = Some(rows.clone());
                return decode(rows);
            }
        }
    }
}
