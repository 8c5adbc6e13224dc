//! The realtime source: a WebSocket to `/sync/stream` that reconnects for ever — exponential
//! backoff with full jitter, reset once a connection has stayed up long enough; a connect
//! timeout; a liveness check on idle connections; fresh credentials on every connection; a
//! catch-up pull on every connection. Pings and `buckets_changed` trigger pulls; presence frames
//! keep the presence state. Each connection tells the server the app's subscription and
//! presence, and then only what changes ([`plan`]), paced below the server's frame limit.
//!
//! When the upgrade is refused on the way (a proxy answering `403` or `426`, say) twice in a
//! row, the client long-polls `GET /sync/poll` instead ([`long_poll`]), which brings the same
//! pings and `buckets_changed` without presence, and tries the WebSocket again every
//! [`POLL_BEFORE_RETRY`]. `Status::long_poll` tells the app.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use engine_kernel::wire::{ClientFrame, META_TOO_LARGE, STREAM_SUBPROTOCOL, ServerFrame, TOO_MANY_PRESENCES};
use engine_kernel::{BucketKey, ErrorCode};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Map, Value};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::backoff::Backoff;
use crate::error::{Error, Result};
use crate::presence::{Presence, PresenceEvent};
use crate::settings::SyncScope;
use crate::state::{ClientState, lock};

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Why a session ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    /// The client is shutting down.
    Shutdown,
    /// The connection closed or went silent.
    Lost,
    /// A new connection is wanted at once.
    Reconnect,
    /// The server is restarting (close code 1012): another instance takes a new connection at
    /// once, after a short jitter so that its sockets do not all arrive together.
    Restart,
}

/// The most a reconnection waits after the server closed for a restart.
const RESTART_JITTER: Duration = Duration::from_millis(250);

/// Upgrades refused in a row before the client long-polls instead.
const REFUSALS_BEFORE_POLLING: u32 = 2;

/// How long the client long-polls before it tries the WebSocket again (once: refused again, it
/// goes back to polling).
const POLL_BEFORE_RETRY: Duration = Duration::from_secs(600);

/// How long one poll asks the server to wait.
const POLL_WAIT: Duration = Duration::from_secs(25);

/// Whether `err` is an upgrade refused by something on the way rather than by the engine, which
/// answers an upgrade `101`, or `401`, `429` or `503`: whatever HTTP answered, it is not a
/// WebSocket, and plain HTTP may still pass.
fn upgrade_refused(err: &Error) -> bool {
    matches!(err, Error::Server { status, .. } if (200..500).contains(status) && !matches!(status, 401 | 408 | 429))
}

pub(crate) async fn run(inner: Arc<ClientState>) {
    let reconnect = inner.settings.reconnect.clone();
    let mut backoff = Backoff::new(reconnect.backoff_base, reconnect.backoff_max);
    let mut shutdown = inner.shutdown.subscribe();
    let mut refusals = 0;
    loop {
        if *shutdown.borrow() {
            return;
        }
        if refusals >= REFUSALS_BEFORE_POLLING {
            if long_poll(&inner, &mut shutdown, POLL_BEFORE_RETRY).await == End::Shutdown {
                return;
            }
            refusals = REFUSALS_BEFORE_POLLING - 1;
            backoff.reset();
            continue;
        }
        let started = Instant::now();
        let narrowed = narrowed(&inner);
        match connect(&inner, narrowed).await {
            Ok(socket) => {
                refusals = 0;
                inner.status.send_modify(|status| {
                    status.connected = true;
                    status.long_poll = false;
                });
                inner.wake_pull.notify_one();
                let end = session(&inner, socket, &mut shutdown, narrowed).await;
                inner.status.send_modify(|status| status.connected = false);
                // Who is present comes afresh with the next connection.
                inner.change_presence(Presence::forget_all);
                match end {
                    End::Shutdown => return,
                    End::Reconnect => continue,
                    End::Restart => {
                        backoff.reset();
                        let jitter = Backoff::new(RESTART_JITTER, RESTART_JITTER).next_delay();
                        tokio::select! {
                            () = tokio::time::sleep(jitter) => continue,
                            _ = shutdown.changed() => return,
                        }
                    }
                    End::Lost => {}
                }
                if started.elapsed() >= reconnect.stable_after {
                    backoff.reset();
                }
            }
            Err(err) => {
                let text = engine_kernel::error::chain(&err);
                tracing::debug!(error = ?text, "the stream could not connect");
                refusals = if upgrade_refused(&err) { refusals + 1 } else { 0 };
                if refusals >= REFUSALS_BEFORE_POLLING {
                    tracing::info!(error = ?text, "the WebSocket upgrade is refused on the way: long-polling instead");
                    continue;
                }
                if let Error::Server { status: 401, .. } = err
                    && let Err(refresh) = inner.remote.auth.refresh().await
                {
                    tracing::debug!(error = ?engine_kernel::error::chain(&refresh), "refreshing credentials failed");
                }
                inner.status.send_modify(|status| status.last_error = Some(text));
            }
        }
        tokio::select! {
            () = tokio::time::sleep(backoff.next_delay()) => {}
            _ = shutdown.changed() => return,
        }
    }
}

/// Long-poll `GET /sync/poll` for `period`, or until the client shuts down: each answer with
/// frames wakes a pull, as the socket's frames do. The first poll names no position and is
/// answered at once with `buckets_changed`: the catch-up pull of a new connection. A failed
/// poll is retried with backoff.
async fn long_poll(inner: &ClientState, shutdown: &mut tokio::sync::watch::Receiver<bool>, period: Duration) -> End {
    let until = Instant::now() + period;
    let reconnect = &inner.settings.reconnect;
    let mut backoff = Backoff::new(reconnect.backoff_base, reconnect.backoff_max);
    let mut position: Option<String> = None;
    while Instant::now() < until {
        let polled = tokio::select! {
            polled = inner.remote.poll(position.as_deref(), POLL_WAIT) => polled,
            _ = shutdown.changed() => return End::Shutdown,
        };
        let delay = match polled {
            Ok(answer) => {
                backoff.reset();
                inner.status.send_modify(|status| {
                    status.connected = true;
                    status.long_poll = true;
                });
                if !answer.frames.is_empty() {
                    inner.wake_pull.notify_one();
                }
                position = Some(answer.position);
                continue;
            }
            Err(err) => {
                let text = engine_kernel::error::chain(&err);
                tracing::debug!(error = ?text, "a poll failed");
                inner.status.send_modify(|status| {
                    status.connected = false;
                    status.last_error = Some(text);
                });
                match err {
                    Error::Server { retry_after: Some(after), .. } => after.max(backoff.next_delay()),
                    _ => backoff.next_delay(),
                }
            }
        };
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            _ = shutdown.changed() => return End::Shutdown,
        }
    }
    inner.status.send_modify(|status| status.connected = false);
    End::Lost
}

/// Whether the stream follows a narrowed list of buckets (the app's subscription, or what the
/// pulls bring when syncing only what is open), rather than every bucket held.
fn narrowed(inner: &ClientState) -> bool {
    matches!(inner.settings.scope, SyncScope::Open { .. }) || lock(&inner.subscription).is_some()
}

/// Open the stream. A `narrowed` connection follows nothing until its `subscribe`
/// (`follow=subscription`), so the server does not send the presence of every bucket held first.
async fn connect(inner: &ClientState, narrowed: bool) -> Result<Socket> {
    let mut url = inner.remote.url("sync/stream");
    if narrowed {
        url.query_pairs_mut().append_pair("follow", "subscription");
    }
    let scheme = if url.scheme() == "https" { "wss" } else { "ws" };
    url.set_scheme(scheme).map_err(|()| Error::config(format!("no WebSocket URL for {url}")))?;
    let mut request =
        url.as_str().into_client_request().map_err(|e| Error::config_from(format!("the stream URL {url}"), e))?;
    let headers = request.headers_mut();
    for (name, value) in inner.remote.auth.headers().await? {
        let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| Error::auth_from(format!("header name {name:?}"), e))?;
        let value = value.parse().map_err(|e| Error::auth_from("a header value", e))?;
        headers.insert(name, value);
    }
    headers.insert("sec-websocket-protocol", STREAM_SUBPROTOCOL.parse().expect("a valid header value"));
    let timeout = inner.settings.reconnect.connect_timeout;
    match tokio::time::timeout(timeout, tokio_tungstenite::connect_async(request)).await {
        Err(_) => Err(Error::network(format!("the stream did not open within {timeout:?}"))),
        Ok(Err(tokio_tungstenite::tungstenite::Error::Http(response))) => {
            let status = response.status().as_u16();
            let problem =
                response.body().as_deref().and_then(|body| serde_json::from_slice(body).ok()).unwrap_or_else(|| {
                    engine_kernel::wire::Problem::new(engine_kernel::ErrorCode::Unauthenticated, "refused")
                });
            Err(Error::Server { status, problem, retry_after: None })
        }
        Ok(Err(err)) => Err(Error::network_from("the stream did not open", err)),
        Ok(Ok((socket, _))) => Ok(socket),
    }
}

fn frame_text(frame: &ClientFrame) -> Message {
    Message::Text(serde_json::to_string(frame).expect("frames serialize").into())
}

/// Frames a second the client sends at most, and at once: half the server's default limits
/// (20 a second, 50 at once), so a busy app is paced rather than disconnected.
const FRAMES_PER_SECOND: f64 = 10.0;
const FRAME_BURST: f64 = 25.0;

/// A token bucket for the frames this connection sends.
struct Pace {
    tokens: f64,
    at: Instant,
}

impl Pace {
    fn new() -> Pace {
        Pace { tokens: FRAME_BURST, at: Instant::now() }
    }

    /// Wait until a frame may go.
    async fn ready(&mut self) {
        let now = Instant::now();
        self.tokens = (self.tokens + now.duration_since(self.at).as_secs_f64() * FRAMES_PER_SECOND).min(FRAME_BURST);
        self.at = now;
        if self.tokens < 1.0 {
            let wait = Duration::from_secs_f64((1.0 - self.tokens) / FRAMES_PER_SECOND);
            tokio::time::sleep(wait).await;
            self.tokens = 1.0;
            self.at = Instant::now();
        }
        self.tokens -= 1.0;
    }
}

async fn session(
    inner: &ClientState,
    socket: Socket,
    shutdown: &mut tokio::sync::watch::Receiver<bool>,
    narrowed: bool,
) -> End {
    let (mut sink, mut stream) = socket.split();
    let mut held = inner.held.subscribe();
    // A narrowed connection starts following nothing.
    let mut told = Told { subscription: narrowed.then(BTreeSet::new), ..Told::default() };
    let mut pace = Pace::new();
    let start = Instant::now();
    let heartbeat_every = inner.settings.presence_heartbeat;
    let mut heartbeat = tokio::time::interval_at(start + heartbeat_every, heartbeat_every);
    let liveness_every = inner.settings.reconnect.heartbeat;
    let mut liveness = tokio::time::interval_at(start + liveness_every, liveness_every);
    let mut awaiting_pong: Option<Instant> = None;
    let mut reconcile = true;
    loop {
        if std::mem::take(&mut reconcile) {
            let step = {
                let held = held.borrow_and_update().clone();
                // Syncing only what is open, the stream follows what the pulls bring: the buckets held.
                let open = matches!(inner.settings.scope, SyncScope::Open { .. });
                let wanted = lock(&inner.subscription).clone().or_else(|| open.then(|| held.iter().cloned().collect()));
                let presence = lock(&inner.presence);
                let strict = inner.strict.load(std::sync::atomic::Ordering::Acquire);
                let none = BTreeMap::new();
                let tracked = if presence.refused { &none } else { &presence.tracked };
                plan(wanted.as_deref(), tracked, &held, strict, &mut told)
            };
            let Resubscribe::Frames { frames } = step else {
                let _ = sink.send(Message::Close(None)).await;
                return End::Reconnect;
            };
            for frame in &frames {
                pace.ready().await;
                if sink.send(frame_text(frame)).await.is_err() {
                    return End::Lost;
                }
            }
            if let Some(followed) = &told.subscription {
                inner.change_presence(|presence| presence.keep_only(followed));
            }
        }
        tokio::select! {
            message = stream.next() => match message {
                Some(Ok(Message::Text(text))) => {
                    awaiting_pong = None;
                    handle(inner, &told, &text);
                }
                Some(Ok(Message::Pong(_) | Message::Ping(_) | Message::Binary(_) | Message::Frame(_))) => awaiting_pong = None,
                Some(Ok(Message::Close(Some(frame)))) if frame.code == CloseCode::Restart => return End::Restart,
                Some(Ok(Message::Close(_)) | Err(_)) | None => return End::Lost,
            },
            () = inner.stream_wanted.notified() => reconcile = true,
            Ok(()) = held.changed() => reconcile = true,
            _ = heartbeat.tick() => {
                pace.ready().await;
                if sink.send(frame_text(&ClientFrame::Heartbeat)).await.is_err() {
                    return End::Lost;
                }
            }
            _ = liveness.tick() => {
                if awaiting_pong.is_some_and(|since| since.elapsed() >= inner.settings.reconnect.connect_timeout) {
                    return End::Lost;
                }
                if sink.send(Message::Ping(Vec::new().into())).await.is_err() {
                    return End::Lost;
                }
                awaiting_pong.get_or_insert_with(Instant::now);
            }
            _ = shutdown.changed() => {
                let _ = sink.send(Message::Close(None)).await;
                return End::Shutdown;
            }
        }
        if let Some(since) = awaiting_pong
            && since.elapsed() > inner.settings.reconnect.connect_timeout + Duration::from_secs(1)
        {
            return End::Lost;
        }
    }
}

/// What this connection has told the server.
#[derive(Debug, Default)]
struct Told {
    /// The subscription sent (`None`: the connection's default, every bucket the actor holds).
    subscription: Option<BTreeSet<BucketKey>>,
    /// The presence announced, by bucket.
    tracks: BTreeMap<BucketKey, Map<String, Value>>,
}

impl Told {
    /// Whether the server sends this connection the presence of `bucket`.
    fn follows(&self, bucket: &BucketKey) -> bool {
        self.subscription.as_ref().is_none_or(|s| s.contains(bucket))
    }
}

/// How to bring the server to what the app wants.
#[derive(Debug, PartialEq)]
enum Resubscribe {
    /// Send these frames.
    Frames { frames: Vec<ClientFrame> },
    /// The protocol has no frame for "every bucket again": a new connection starts that way.
    Reconnect,
}

/// The frames that take the server from what it was `told` to the app's subscription (`wanted`,
/// `None` for every bucket) and presence (`tracked`). Presence goes only to followed buckets
/// the store holds rows of (`held`); the subscription too once the server has refused one
/// (`strict`), since a bucket held without rows cannot be told from one never held. Untracks go
/// first, a subscription next, tracks last: the server refuses presence in a bucket the
/// connection does not follow.
fn plan(
    wanted: Option<&[BucketKey]>,
    tracked: &BTreeMap<BucketKey, Map<String, Value>>,
    held: &BTreeSet<BucketKey>,
    strict: bool,
    told: &mut Told,
) -> Resubscribe {
    let wanted: Option<BTreeSet<BucketKey>> =
        wanted.map(|w| w.iter().filter(|b| !strict || held.contains(*b)).cloned().collect());
    if wanted.is_none() && told.subscription.is_some() {
        return Resubscribe::Reconnect;
    }
    let follows = |bucket: &BucketKey| held.contains(bucket) && wanted.as_ref().is_none_or(|w| w.contains(bucket));
    let mut frames = Vec::new();
    told.tracks.retain(|bucket, _| {
        let keep = tracked.contains_key(bucket) && follows(bucket);
        if !keep {
            frames.push(ClientFrame::Untrack { bucket: bucket.clone() });
        }
        keep
    });
    if let Some(wanted) = &wanted
        && told.subscription.as_ref() != Some(wanted)
    {
        frames.push(ClientFrame::Subscribe { buckets: wanted.iter().cloned().collect() });
        told.subscription = Some(wanted.clone());
    }
    for (bucket, meta) in tracked {
        if follows(bucket) && told.tracks.get(bucket) != Some(meta) {
            frames.push(ClientFrame::Track { bucket: bucket.clone(), meta: meta.clone() });
            told.tracks.insert(bucket.clone(), meta.clone());
        }
    }
    Resubscribe::Frames { frames }
}

fn handle(inner: &ClientState, told: &Told, text: &str) {
    let frame: ServerFrame = match serde_json::from_str(text) {
        Ok(frame) => frame,
        Err(err) => {
            tracing::debug!(error = ?err.to_string(), "an unreadable frame from the server");
            return;
        }
    };
    match frame {
        ServerFrame::Ping { .. } | ServerFrame::BucketsChanged => inner.wake_pull.notify_one(),
        // Presence of buckets not followed (sent before a narrowing reached the server) is left
        // out. Events go out under the lock, in the order of the changes.
        ServerFrame::PresenceState { bucket, state } if told.follows(&bucket) => {
            let mut presence = lock(&inner.presence);
            let state = presence.replace(&bucket, state);
            let _ = inner.presence_events.send(PresenceEvent { bucket, state });
        }
        ServerFrame::PresenceDiff { bucket, joins, leaves } if told.follows(&bucket) => {
            let mut presence = lock(&inner.presence);
            if let Some(state) = presence.diff(&bucket, joins, leaves) {
                let _ = inner.presence_events.send(PresenceEvent { bucket, state });
            }
        }
        ServerFrame::PresenceState { .. } | ServerFrame::PresenceDiff { .. } => {}
        ServerFrame::Error { code, detail } => {
            if code == ErrorCode::Forbidden.as_str() {
                // A bucket refused: ask only for buckets held from now on, and pull to learn
                // what the actor holds now.
                inner.strict.store(true, std::sync::atomic::Ordering::Release);
                inner.wake_pull.notify_one();
            } else if code == META_TOO_LARGE {
                // The largest meta announced goes: the app hears of it in the status.
                let largest =
                    told.tracks.iter().max_by_key(|(_, meta)| serde_json::to_vec(meta).map_or(0, |v| v.len()));
                if let Some((bucket, _)) = largest {
                    lock(&inner.presence).tracked.remove(bucket);
                }
            } else if code == TOO_MANY_PRESENCES {
                // The actor is present too often on the server: hold presence back until the app
                // changes it, rather than have every connection closed as this one is.
                lock(&inner.presence).refused = true;
                inner.status.send_modify(|status| status.presence_refused = true);
            }
            inner.status.send_modify(|status| status.last_error = Some(format!("stream: {code}: {detail}")));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bucket(list: &str) -> BucketKey {
        BucketKey::new("shared", &[list])
    }

    fn meta(at: &str) -> Map<String, Value> {
        json!({ "at": at }).as_object().cloned().unwrap()
    }

    fn frames(step: Resubscribe) -> Vec<ClientFrame> {
        match step {
            Resubscribe::Frames { frames } => frames,
            Resubscribe::Reconnect => panic!("a reconnection where frames were expected"),
        }
    }

    #[test]
    fn presence_is_announced_once_and_again_when_its_meta_changes() {
        let (a, b) = (bucket("a"), bucket("b"));
        let held = BTreeSet::from([a.clone(), b.clone()]);
        let mut tracked = BTreeMap::from([(a.clone(), meta("title"))]);
        let mut told = Told::default();
        assert_eq!(
            frames(plan(None, &tracked, &held, false, &mut told)),
            vec![ClientFrame::Track { bucket: a.clone(), meta: meta("title") }]
        );
        assert_eq!(frames(plan(None, &tracked, &held, false, &mut told)), Vec::new(), "nothing changed");

        tracked.insert(a.clone(), meta("body"));
        tracked.insert(b.clone(), meta("title"));
        assert_eq!(
            frames(plan(None, &tracked, &held, false, &mut told)),
            vec![
                ClientFrame::Track { bucket: a.clone(), meta: meta("body") },
                ClientFrame::Track { bucket: b.clone(), meta: meta("title") },
            ]
        );

        tracked.remove(&a);
        assert_eq!(frames(plan(None, &tracked, &held, false, &mut told)), vec![ClientFrame::Untrack { bucket: a }]);
    }

    #[test]
    fn presence_waits_for_the_store_to_hold_its_bucket() {
        let (a, b) = (bucket("a"), bucket("b"));
        let tracked = BTreeMap::from([(a.clone(), meta("title")), (b.clone(), meta("title"))]);
        let mut told = Told::default();
        let sent = frames(plan(None, &tracked, &BTreeSet::from([a.clone()]), false, &mut told));
        assert_eq!(sent, vec![ClientFrame::Track { bucket: a.clone(), meta: meta("title") }], "b is not held");

        // A pull brings b and loses a.
        let sent = frames(plan(None, &tracked, &BTreeSet::from([b.clone()]), false, &mut told));
        assert_eq!(
            sent,
            vec![ClientFrame::Untrack { bucket: a }, ClientFrame::Track { bucket: b, meta: meta("title") }]
        );
    }

    #[test]
    fn a_narrowed_subscription_goes_between_untracks_and_tracks() {
        let (a, b) = (bucket("a"), bucket("b"));
        let held = BTreeSet::from([a.clone(), b.clone()]);
        let tracked = BTreeMap::from([(a.clone(), meta("title")), (b.clone(), meta("title"))]);
        let mut told = Told::default();
        assert_eq!(
            frames(plan(Some(std::slice::from_ref(&a)), &tracked, &held, false, &mut told)),
            vec![
                ClientFrame::Subscribe { buckets: vec![a.clone()] },
                ClientFrame::Track { bucket: a.clone(), meta: meta("title") },
            ]
        );

        // Narrowed to b: presence in a is withdrawn before the subscription changes.
        assert_eq!(
            frames(plan(Some(std::slice::from_ref(&b)), &tracked, &held, false, &mut told)),
            vec![
                ClientFrame::Untrack { bucket: a.clone() },
                ClientFrame::Subscribe { buckets: vec![b.clone()] },
                ClientFrame::Track { bucket: b.clone(), meta: meta("title") },
            ]
        );
        assert_eq!(frames(plan(Some(&[b]), &tracked, &held, false, &mut told)), Vec::new(), "nothing changed");
        assert_eq!(plan(None, &tracked, &held, false, &mut told), Resubscribe::Reconnect, "no frame widens again");
    }

    /// What something on the way answers an upgrade with counts towards long-polling; the
    /// engine's own refusals (a token, the actor's limits, a restart) and lost connections do not.
    #[test]
    fn only_an_upgrade_refused_on_the_way_counts_towards_polling() {
        let answered = |status| Error::Server {
            status,
            problem: engine_kernel::wire::Problem::new(ErrorCode::Unauthenticated, "refused"),
            retry_after: None,
        };
        for status in [200, 400, 403, 404, 405, 426] {
            assert!(upgrade_refused(&answered(status)), "{status}");
        }
        for status in [401, 408, 429, 502, 503] {
            assert!(!upgrade_refused(&answered(status)), "{status}");
        }
        assert!(!upgrade_refused(&Error::network("the stream did not open")));
    }

    #[test]
    fn after_a_refusal_the_subscription_asks_only_for_buckets_held() {
        let (a, own) = (bucket("a"), BucketKey::new("own", &["bob"]));
        let wanted = [a.clone(), own.clone()];
        let held = BTreeSet::from([a.clone()]);
        // A bucket held without rows (an empty `own`) is asked for until the server refuses.
        let sent = frames(plan(Some(&wanted), &BTreeMap::new(), &held, false, &mut Told::default()));
        assert_eq!(sent, vec![ClientFrame::Subscribe { buckets: vec![own, a.clone()] }]);
        let sent = frames(plan(Some(&wanted), &BTreeMap::new(), &held, true, &mut Told::default()));
        assert_eq!(sent, vec![ClientFrame::Subscribe { buckets: vec![a] }]);
    }
}
