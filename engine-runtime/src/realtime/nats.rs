//! The NATS adapter: several server instances, on any store, share signals and presence through
//! a NATS server with JetStream. Pings and membership signals are core NATS messages on the
//! subject `<prefix>.signals`, which every instance subscribes to; each is published after the
//! commit that caused it, as a `NOTIFY` is. Core NATS keeps nothing for an instance that is
//! away: once the client is connected again it has subscribed again, and every local socket is
//! told to resync, so nothing is missed silently. Every request has [`Nats::lost_after`] to be
//! answered, and the client pings the server twice within it, so a link cut without a close is
//! given up and dialled again.
//!
//! Presence lives in the JetStream key-value bucket `<prefix>_presence`, one entry per presence,
//! whose entries expire after the heartbeat timeout. Each instance puts its own presences again
//! every third of the timeout and watches the bucket into a local mirror: a put it has not
//! seen is a join, a delete is a leave, and an entry not put again within the timeout (its
//! instance was killed or cut off) leaves, in every instance's mirror alike.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_nats::jetstream::{kv, stream};
use engine_kernel::{BoxFuture, BucketKey};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::{Notify, broadcast, mpsc};
use tokio::time::Instant;

use super::listen_notify::{DEFAULT_REALTIME_LOST_AFTER, MIN_LOST_AFTER};
use super::payload::{decode, encode};
use super::{OpenRealtime, Presence, PresenceState, Realtime, Signal, add_meta};
use crate::error::{BoxError, Error, Result};

/// The prefix of the subject and the key-value bucket, unless [`Nats::prefix`] says otherwise.
pub const DEFAULT_PREFIX: &str = "engine";

/// Realtime across instances through the NATS server at `url` (`nats://host:4222`, or several
/// comma-separated).
pub fn nats(url: impl Into<String>) -> Nats {
    Nats { url: url.into(), prefix: DEFAULT_PREFIX.to_owned(), lost_after: DEFAULT_REALTIME_LOST_AFTER }
}

/// Realtime across instances over NATS. Build with [`nats()`].
#[derive(Debug, Clone)]
#[must_use]
pub struct Nats {
    url: String,
    prefix: String,
    lost_after: Duration,
}

impl Nats {
    /// What the subject and the key-value bucket are named after (default [`DEFAULT_PREFIX`]):
    /// instances with one prefix on one NATS server share signals and presence, and other
    /// prefixes are other deployments. Letters, digits, `_` and `-`.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// How long NATS has to take a message or answer a request before the request fails, and
    /// how long the link may stay silent before it is given up and dialled again (default
    /// [`DEFAULT_REALTIME_LOST_AFTER`]; 1 s at least).
    pub fn lost_after(mut self, deadline: Duration) -> Self {
        self.lost_after = deadline.max(MIN_LOST_AFTER);
        self
    }
}

impl OpenRealtime for Nats {
    fn open(self: Box<Self>, heartbeat_timeout: Duration) -> BoxFuture<'static, Result<Arc<dyn Realtime>>> {
        Box::pin(async move { Ok(Arc::new(Shared::open(*self, heartbeat_timeout).await?) as Arc<dyn Realtime>) })
    }
}

struct Shared {
    link: Link,
    mirror: Mirror,
    /// This instance's presences by entry key, put again every third of the heartbeat timeout.
    local: Local,
    tasks: Vec<tokio::task::AbortHandle>,
}

type Local = Arc<Mutex<HashMap<String, Presence>>>;

impl Drop for Shared {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Shared {
    async fn open(options: Nats, timeout: Duration) -> Result<Self> {
        let Nats { url, prefix, lost_after } = options;
        if prefix.is_empty()
            || prefix.len() > 64
            || !prefix.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-".contains(&b))
        {
            return Err(Error::config(format!(
                "the NATS prefix `{prefix}` names a subject and a key-value bucket: use 1 to 64 letters, digits, `_` or `-`"
            )));
        }
        let (events_tx, events) = mpsc::unbounded_channel();
        let client = async_nats::ConnectOptions::new()
            .name("engine-realtime")
            // Two unanswered pings close the link.
            .ping_interval(lost_after / 2)
            .connection_timeout(lost_after)
            .request_timeout(Some(lost_after))
            .max_reconnects(None)
            .event_callback(move |event| {
                let events_tx = events_tx.clone();
                async move {
                    let _ = events_tx.send(event);
                }
            })
            .connect(url.as_str())
            .await
            .map_err(|e| Error::config_from("cannot connect to NATS for realtime", e))?;
        let bucket = format!("{prefix}_presence");
        let jetstream = async_nats::jetstream::new(client.clone());
        let unopened = |e: BoxError| {
            Error::config_from(
                format!(
                    "cannot open the presence key-value bucket `{bucket}` (NATS needs JetStream: `nats-server -js`)"
                ),
                e,
            )
        };
        // The bucket's stream as `create_key_value` makes it (the key-value layout of NATS'
        // ADR-8), made here because `create_key_value` first reads the account's JetStream
        // information, which async-nats cannot parse from a 2.9 server.
        jetstream
            .create_or_update_stream(stream::Config {
                name: format!("KV_{bucket}"),
                description: Some("engine presence: one entry per connection and bucket".to_owned()),
                subjects: vec![format!("$KV.{bucket}.>")],
                max_messages_per_subject: 1,
                max_age: timeout,
                allow_rollup: true,
                deny_delete: true,
                allow_direct: true,
                discard: stream::DiscardPolicy::New,
                num_replicas: 1,
                ..stream::Config::default()
            })
            .await
            .map_err(|e| unopened(e.into()))?;
        let store = jetstream.get_key_value(&bucket).await.map_err(|e| unopened(e.into()))?;
        let subject = format!("{prefix}.signals");
        let mut subscriber = client
            .subscribe(subject.clone())
            .await
            .map_err(|e| Error::config_from(format!("cannot subscribe to `{subject}`"), e))?;
        let (sender, _) = broadcast::channel(super::in_process::CHANNEL_CAPACITY);
        let mirror = Mirror { held: Arc::default(), sender: sender.clone() };
        let link = Link { client, store, subject, lost_after };
        let local = Local::default();
        let away = Arc::new(AtomicBool::new(false));
        let restart = Arc::new(Notify::new());
        let listening = tokio::spawn(async move {
            while let Some(message) = subscriber.next().await {
                if let Some(signal) = std::str::from_utf8(&message.payload).ok().and_then(decode) {
                    let _ = sender.send(signal);
                }
            }
        });
        let watching = tokio::spawn(watch(link.clone(), mirror.clone(), Arc::clone(&restart)));
        let following =
            tokio::spawn(follow(events, link.clone(), mirror.clone(), Arc::clone(&local), Arc::clone(&away), restart));
        let beating = tokio::spawn(heartbeat(link.clone(), mirror.clone(), Arc::clone(&local), away, timeout));
        let tasks =
            [listening, watching, following, beating].iter().map(tokio::task::JoinHandle::abort_handle).collect();
        Ok(Shared { link, mirror, local, tasks })
    }
}

/// The NATS client and what this instance's prefix names on it.
#[derive(Clone)]
struct Link {
    client: async_nats::Client,
    store: kv::Store,
    subject: String,
    lost_after: Duration,
}

impl Link {
    /// `request`, given [`Nats::lost_after`] to be answered.
    async fn within<T, E: Into<BoxError>>(
        &self,
        what: &str,
        request: impl Future<Output = std::result::Result<T, E>>,
    ) -> Result<T> {
        match tokio::time::timeout(self.lost_after, request).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(err)) => Err(Error::Realtime { what: format!("{what} failed"), source: Some(err.into()) }),
            Err(_) => Err(Error::Realtime {
                what: format!("{what}: NATS did not answer within {} ms", self.lost_after.as_millis()),
                source: None,
            }),
        }
    }

    /// Put `presence` in the bucket, under [`entry_key`].
    async fn put(&self, presence: &Presence) -> Result<()> {
        let key = entry_key(&presence.presence_ref);
        self.within("putting a presence", self.store.put(key, entry_value(presence).to_string().into())).await.map(drop)
    }

    /// Put every presence of `local` again, a few at a time. A presence withdrawn while its put
    /// was on the way is deleted again: the put may have landed after the withdrawal's delete,
    /// and would otherwise stand until it expires.
    async fn announce(&self, local: &Local) {
        let presences: Vec<Presence> = lock(local).values().cloned().collect();
        futures_util::stream::iter(presences)
            .for_each_concurrent(32, |presence| async move {
                if let Err(err) = self.put(&presence).await {
                    tracing::warn!(error = ?crate::error::Chain(&err), "announcing a presence again failed");
                }
                let key = entry_key(&presence.presence_ref);
                if !lock(local).contains_key(&key)
                    && let Err(err) = self.within("withdrawing a presence", self.store.delete(&key)).await
                {
                    tracing::warn!(error = ?crate::error::Chain(&err), "withdrawing a presence again failed");
                }
            })
            .await;
    }
}

/// The key of a presence's entry: its reference in hex, as entry keys take only some
/// characters.
fn entry_key(presence_ref: &str) -> String {
    presence_ref.bytes().map(|b| format!("{b:02x}")).collect()
}

/// What the entry of `presence` holds.
fn entry_value(presence: &Presence) -> Value {
    json!({"b": presence.bucket, "k": presence.key, "r": presence.presence_ref, "m": presence.meta})
}

/// The presence an entry holds; `None` for anything [`entry_value`] does not make.
fn parse(value: &[u8]) -> Option<Presence> {
    let value: Value = serde_json::from_slice(value).ok()?;
    Some(Presence {
        bucket: BucketKey::parse(value.get("b")?.as_str()?).ok()?,
        key: value.get("k")?.as_str()?.to_owned(),
        presence_ref: value.get("r")?.as_str()?.to_owned(),
        meta: value.get("m")?.as_object()?.clone(),
    })
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// This instance's copy of the presence bucket, which turns what changes in it into presence
/// signals for the local sockets.
#[derive(Clone)]
struct Mirror {
    /// Entry key → the presence, and when it was last put.
    held: Arc<Mutex<HashMap<String, (Presence, Instant)>>>,
    sender: broadcast::Sender<Signal>,
}

impl Mirror {
    /// `presence` was put: a join, unless it is held already as it is (a renewal); one held
    /// otherwise under the key leaves first.
    fn put(&self, key: String, presence: Presence) {
        let mut held = lock(&self.held);
        if let Some((same, seen)) = held.get_mut(&key)
            && *same == presence
        {
            *seen = Instant::now();
            return;
        }
        // Signals are sent under the lock, so that a join and the leave after it go out in order.
        if let Some((before, _)) = held.insert(key, (presence.clone(), Instant::now())) {
            self.diff(before, false);
        }
        self.diff(presence, true);
    }

    /// The entry `key` was deleted, or expired: its presence leaves, if it is held in `bucket`
    /// (any bucket: `None`).
    fn remove(&self, key: &str, bucket: Option<&BucketKey>) {
        let mut held = lock(&self.held);
        if held.get(key).is_some_and(|(presence, _)| bucket.is_none_or(|b| presence.bucket == *b))
            && let Some((presence, _)) = held.remove(key)
        {
            self.diff(presence, false);
        }
    }

    /// Presences not put again within `timeout`, except this instance's own, leave.
    fn expire(&self, timeout: Duration, local: &Local) {
        let own = lock(local);
        let mut held = lock(&self.held);
        let gone: Vec<String> = held
            .iter()
            .filter(|(key, (_, seen))| seen.elapsed() > timeout && !own.contains_key(*key))
            .map(|(key, _)| key.clone())
            .collect();
        for key in gone {
            if let Some((presence, _)) = held.remove(&key) {
                self.diff(presence, false);
            }
        }
    }

    /// Every presence counts as put now: after the link was away, expiry starts again from the
    /// reconnection instead of taking every presence for gone.
    fn renew(&self) {
        let now = Instant::now();
        for (_, seen) in lock(&self.held).values_mut() {
            *seen = now;
        }
    }

    fn diff(&self, presence: Presence, join: bool) {
        let mut state = PresenceState::new();
        add_meta(&mut state, &presence.key, presence.meta);
        let (joins, leaves) = if join { (state, PresenceState::new()) } else { (PresenceState::new(), state) };
        let _ = self.sender.send(Signal::Presence { bucket: presence.bucket, joins, leaves });
    }

    fn state(&self, buckets: &[BucketKey]) -> BTreeMap<BucketKey, PresenceState> {
        let held = lock(&self.held);
        let mut presences: Vec<&Presence> =
            held.values().map(|(presence, _)| presence).filter(|p| buckets.contains(&p.bucket)).collect();
        presences.sort_by(|a, b| a.presence_ref.cmp(&b.presence_ref));
        let mut states: BTreeMap<BucketKey, PresenceState> =
            buckets.iter().map(|b| (b.clone(), PresenceState::new())).collect();
        for presence in presences {
            if let Some(state) = states.get_mut(&presence.bucket) {
                add_meta(state, &presence.key, presence.meta.clone());
            }
        }
        states
    }
}

/// Watch the presence bucket into `mirror`, from its current entries on; watch anew when the
/// watch fails or `restart` is notified.
async fn watch(link: Link, mirror: Mirror, restart: Arc<Notify>) {
    loop {
        match link.within("watching presence", link.store.watch_all()).await {
            Ok(mut entries) => loop {
                tokio::select! {
                    () = restart.notified() => break,
                    entry = entries.next() => match entry {
                        Some(Ok(entry)) => match entry.operation {
                            kv::Operation::Put => {
                                if let Some(presence) = parse(&entry.value)
                                    && entry_key(&presence.presence_ref) == entry.key
                                {
                                    mirror.put(entry.key, presence);
                                }
                            }
                            kv::Operation::Delete | kv::Operation::Purge => mirror.remove(&entry.key, None),
                        },
                        Some(Err(err)) => {
                            tracing::warn!(error = ?crate::error::Chain(&err), "watching presence failed; watching anew");
                            break;
                        }
                        None => break,
                    },
                }
            },
            Err(err) => tracing::warn!(error = ?crate::error::Chain(&err), "watching presence failed"),
        }
        tokio::time::sleep(link.lost_after / 10).await;
    }
}

/// Follow the link's connection: when it is back after being away, resubscribed, watch presence
/// anew, announce this instance's presences again, and have every local socket resync.
async fn follow(
    mut events: mpsc::UnboundedReceiver<async_nats::Event>,
    link: Link,
    mirror: Mirror,
    local: Local,
    away: Arc<AtomicBool>,
    restart: Arc<Notify>,
) {
    while let Some(event) = events.recv().await {
        match event {
            async_nats::Event::Disconnected => {
                away.store(true, Ordering::Release);
                tracing::warn!("the realtime link to NATS is lost; dialling again");
            }
            async_nats::Event::Connected if away.swap(false, Ordering::AcqRel) => {
                // The client subscribes again before it takes the flush, so once the flush is
                // answered, every signal published is heard.
                if let Err(err) = link.within("flushing", link.client.flush()).await {
                    tracing::warn!(error = ?crate::error::Chain(&err), "flushing the realtime link failed");
                }
                mirror.renew();
                restart.notify_one();
                link.announce(&local).await;
                // What was published meanwhile is gone.
                let _ = mirror.sender.send(Signal::Resync);
            }
            _ => {}
        }
    }
}

/// Put this instance's presences again every third of `timeout`, and expire the others'
/// presences not put again within it; neither while the link is away.
async fn heartbeat(link: Link, mirror: Mirror, local: Local, away: Arc<AtomicBool>, timeout: Duration) {
    let mut every = tokio::time::interval((timeout / 3).max(Duration::from_millis(100)));
    loop {
        every.tick().await;
        if away.load(Ordering::Acquire) {
            continue;
        }
        link.announce(&local).await;
        if !away.load(Ordering::Acquire) {
            mirror.expire(timeout, &local);
        }
    }
}

impl Realtime for Shared {
    fn publish(&self, signal: Signal) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            match encode(&signal) {
                Some(payload) => {
                    let publishing = self.link.client.publish(self.link.subject.clone(), payload.to_string().into());
                    self.link.within("publishing a signal", publishing).await
                }
                None => {
                    let _ = self.mirror.sender.send(signal);
                    Ok(())
                }
            }
        })
    }

    fn subscribe(&self) -> broadcast::Receiver<Signal> {
        self.mirror.sender.subscribe()
    }

    /// The presence joins locally at once, and in other instances once its entry is put: when
    /// NATS does not take it, the heartbeat puts it when the link is back, so the socket is not
    /// refused for a link that comes and goes.
    fn track(&self, presence: Presence) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            let key = entry_key(&presence.presence_ref);
            lock(&self.local).insert(key.clone(), presence.clone());
            self.mirror.put(key, presence.clone());
            if let Err(err) = self.link.put(&presence).await {
                tracing::warn!(error = ?crate::error::Chain(&err), "putting a presence failed; the heartbeat puts it again");
            }
            Ok(())
        })
    }

    fn untrack<'a>(&'a self, bucket: &'a BucketKey, presence_ref: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let key = entry_key(presence_ref);
            lock(&self.local).remove(&key);
            self.mirror.remove(&key, Some(bucket));
            self.link.within("withdrawing a presence", self.link.store.delete(&key)).await
        })
    }

    fn presence_state<'a>(
        &'a self,
        buckets: &'a [BucketKey],
    ) -> BoxFuture<'a, Result<BTreeMap<BucketKey, PresenceState>>> {
        Box::pin(std::future::ready(Ok(self.mirror.state(buckets))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_holds_its_presence_under_a_key_nats_takes() {
        let presence = Presence {
            bucket: BucketKey::new("shared", &["l 1"]),
            key: "alice".into(),
            presence_ref: "0190a b/é".into(),
            meta: json!({"presenceRef": "0190a b/é", "cursor": 3}).as_object().unwrap().clone(),
        };
        let key = entry_key(&presence.presence_ref);
        assert!(key.bytes().all(|b| b.is_ascii_hexdigit()), "{key}");
        assert_eq!(parse(entry_value(&presence).to_string().as_bytes()), Some(presence));
        assert_eq!(parse(b"{\"b\":\"shared/l1\"}"), None);
    }
}
