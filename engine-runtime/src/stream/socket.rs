//! One connection of the stream: authenticate (header, `bearer.` subprotocol, or a first `auth`
//! frame within a deadline), follow the actor's bucket set (or an explicit subscription), pass
//! pings on coalesced, keep presence, and close the socket (never anything else) on a
//! malformed, unknown, oversized or too frequent frame, an expired token, or silence (a socket
//! silent for a third of the heartbeat timeout gets a WebSocket ping, which a live client's
//! WebSocket answers by itself).
//!
//! Before it sends anything, a socket settles what it owes (`crate::stream::hub::Owed`): when the
//! actor's memberships may have changed, or signals were lost (its queue overflowed, the hub
//! lagged, the realtime link was re-established), it recomputes the actor's buckets first, so
//! no ping or presence of a bucket the actor has lost goes out after the loss.

use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket};
use engine_kernel::wire::{ClientFrame, ServerFrame};
use engine_kernel::{Actor, BucketKey};
use futures_util::StreamExt;
use governor::{DefaultDirectRateLimiter, Quota};
use serde_json::Value;
use tokio::time::{Instant, Sleep};

use super::hub::{Admitted, BucketFrame, Event, Opening, Owed, Queued, SOCKET_QUEUE, Unauthenticated};
use super::queue::Inbox;
use super::{StreamState, claims};
use crate::error::Error;
use crate::limits::StreamLimits;
use crate::realtime::Presence;

/// Why a socket closes: the `error` frame's code and detail, and the close code.
struct Close {
    code: &'static str,
    detail: String,
    close: u16,
}

impl Close {
    fn policy(code: &'static str, detail: impl Into<String>) -> Close {
        Close { code, detail: detail.into(), close: 1008 }
    }

    /// The client went away: there is nobody left to tell.
    fn gone() -> Close {
        Close { code: "gone", detail: "the socket closed".into(), close: 1001 }
    }
}

/// What woke a socket's loop.
enum Woke {
    Frame(Option<Result<Message, axum::Error>>),
    Expired,
    Draining,
    Silent,
    Event(Option<Queued>),
}

struct Connection {
    /// One value for both directions: a socket split in two locks a shared half at every read
    /// and write, a measurable share of the fan-out at thousands of sockets.
    socket: WebSocket,
    state: Arc<StreamState>,
    actor: Actor,
    id: u64,
    owed: Arc<Owed>,
    subscribed: BTreeSet<BucketKey>,
    /// Whether the client chose its buckets (`subscribe`) rather than following all it holds.
    explicit: bool,
    /// This connection's presence ref in each bucket it is present in.
    presences: BTreeMap<BucketKey, String>,
    /// Pings to send once the events queued so far are read, a bucket's once (a few: they are
    /// sent after at most a queue's worth of events).
    pending: Vec<Arc<BucketFrame>>,
    /// How often the socket has left buckets ([`Queued::left`]).
    left: u64,
    /// When the token expires (far off for a token without expiry), moved by a fresh token.
    expiry: Pin<Box<Sleep>>,
}

/// When `actor`'s token expires: far off for a token without an `exp` claim, and no further
/// off than that for one with a claim past it.
fn expiry(actor: &Actor) -> Instant {
    let left = actor.claims.get("exp").and_then(Value::as_u64).and_then(|exp| {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).ok()?.as_secs();
        Some(exp.saturating_sub(now))
    });
    Instant::now() + Duration::from_secs(left.map_or(FAR, |left| left.min(FAR)))
}

/// Seconds to a deadline that does not come (30 years; tokio's own "far future").
const FAR: u64 = 30 * 365 * 24 * 3600;

async fn send_frame(socket: &mut WebSocket, frame: &ServerFrame) -> bool {
    let text = serde_json::to_string(frame).expect("frames serialize");
    socket.send(Message::Text(text.into())).await.is_ok()
}

async fn close(socket: &mut WebSocket, why: Close) {
    let _ = send_frame(socket, &ServerFrame::Error { code: why.code.to_owned(), detail: why.detail.clone() }).await;
    let _ = socket.send(Message::Close(Some(CloseFrame { code: why.close, reason: why.code.into() }))).await;
}

/// After closing, read what the client still sends for a moment: dropping a socket with unread
/// bytes makes the kernel reset the connection, which can destroy the close frame in flight.
async fn linger(socket: &mut WebSocket) {
    let deadline = Instant::now() + Duration::from_millis(500);
    while let Ok(Some(message)) = tokio::time::timeout_at(deadline, socket.next()).await {
        match message {
            Ok(Message::Close(_)) => return,
            Ok(_) => {}
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// Read a client frame: malformed (1008) and unknown (1003) frames are told apart.
fn parse(text: &str) -> Result<ClientFrame, Close> {
    let value: Value =
        serde_json::from_str(text).map_err(|_| Close::policy("malformed_request", "a frame is one JSON object"))?;
    let kind = value
        .get("type")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| Close::policy("malformed_request", "a frame has a string `type`"))?;
    if !matches!(kind.as_str(), "auth" | "subscribe" | "track" | "untrack" | "heartbeat") {
        return Err(Close { code: "unknown_frame", detail: format!("unknown frame type `{kind}`"), close: 1003 });
    }
    serde_json::from_value(value).map_err(|e| Close::policy("malformed_request", format!("a `{kind}` frame: {e}")))
}

/// Run one connection to its end. `unauthenticated` counts a socket that has yet to send its
/// `auth` frame against its address until it has. A socket that `waits_for_subscribe` follows
/// nothing, and is sent no presence, until its first `subscribe`.
pub(crate) async fn run(
    socket: WebSocket,
    state: Arc<StreamState>,
    actor: Option<Actor>,
    unauthenticated: Option<Unauthenticated>,
    opening: Opening,
    waits_for_subscribe: bool,
) {
    let limits = state.stream_limits;
    let mut socket = socket;
    let mut opening = Some(opening);
    // The count is the hub's as well as the socket's: it ends with the socket or its `auth`.
    let unauthenticated = unauthenticated.map(crate::limits::EndOnDrop);
    let actor = match actor {
        Some(actor) => actor,
        None => {
            // A socket that has yet to say who it is is not waited for by a drain.
            drop(opening.take());
            let evicted = unauthenticated.as_ref().map(|counted| &counted.0);
            match authenticate(&state, &mut socket, limits.auth_deadline, evicted).await {
                Ok(actor) => actor,
                Err(why) => {
                    close(&mut socket, why).await;
                    return linger(&mut socket).await;
                }
            }
        }
    };
    drop(unauthenticated);
    let registered = state.hub.register(&actor.user_id, claims(&actor), limits.sockets_per_actor);
    drop(opening);
    let Some((id, events, owed)) = registered else {
        let why =
            Close::policy("too_many_sockets", format!("an actor holds at most {} sockets", limits.sockets_per_actor));
        return close(&mut socket, why).await;
    };
    let expiry = Box::pin(tokio::time::sleep_until(expiry(&actor)));
    let mut connection = Connection {
        socket,
        state: state.clone(),
        actor,
        id,
        owed,
        subscribed: BTreeSet::new(),
        explicit: waits_for_subscribe,
        presences: BTreeMap::new(),
        pending: Vec::new(),
        left: 0,
        expiry,
    };
    let outcome = connection.serve(&events, limits).await;
    if let Err(why) = outcome {
        close(&mut connection.socket, why).await;
        linger(&mut connection.socket).await;
    }
    connection.leave().await;
    state.hub.unregister(id);
}

/// Wait for the `auth` frame of a socket that brought no credentials, unless the socket is
/// `evicted` meanwhile for a newer one of its address (closed `1013`, to connect again).
async fn authenticate(
    state: &StreamState,
    socket: &mut WebSocket,
    deadline: Duration,
    evicted: Option<&Unauthenticated>,
) -> Result<Actor, Close> {
    let eviction = std::future::poll_fn(|cx| match evicted {
        Some(counted) if counted.poll_evicted(cx) => std::task::Poll::Ready(()),
        _ => std::task::Poll::Pending,
    });
    let first = tokio::select! {
        first = tokio::time::timeout(deadline, socket.next()) => first,
        () = eviction => return Err(Close {
            code: "retry_later",
            detail: "closed for a newer socket of this address that has yet to authenticate: connect again".into(),
            close: 1013,
        }),
    };
    let first = first.map_err(|_| Close::policy("unauthenticated", "send `{\"type\":\"auth\",\"token\":…}` first"))?;
    let Some(Ok(Message::Text(text))) = first else {
        return Err(Close::policy("unauthenticated", "the first frame is `{\"type\":\"auth\",\"token\":…}`"));
    };
    let actor = match parse(&text)? {
        ClientFrame::Auth { token } => state.auth.check_token(&token).await.map_err(|refused| match refused {
            Error::Unauthenticated(why) => Close::policy("unauthenticated", why),
            _ => Close::policy("unauthenticated", "the token is not valid"),
        })?,
        _ => return Err(Close::policy("unauthenticated", "the first frame is `{\"type\":\"auth\",\"token\":…}`")),
    };
    // The connection counts against the actor's request rate once it is known.
    if let Some(rate) = &state.rate_limit
        && rate.check(&actor.user_id).is_err()
    {
        return Err(Close::policy("rate_limited", "over the request rate: reconnect after a while"));
    }
    Ok(actor)
}

impl Connection {
    async fn serve(&mut self, events: &Inbox<Queued>, limits: StreamLimits) -> Result<(), Close> {
        // A socket that follows its subscription is sent nothing of a bucket before it asks:
        // the presence of every bucket held could be megabytes that another account made.
        if !self.explicit {
            let held = self.held().await?;
            self.set_subscribed(held).await?;
        }
        let quota = Quota::per_second(NonZeroU32::new(limits.frames_per_second).unwrap_or(NonZeroU32::MIN))
            .allow_burst(NonZeroU32::new(limits.frame_burst).unwrap_or(NonZeroU32::MIN));
        let rate = DefaultDirectRateLimiter::direct(quota);
        let timeout = self.state.presence.heartbeat_timeout;
        let ask_after = timeout / 3;
        let mut last_heard = Instant::now();
        let mut draining = self.state.draining.subscribe();
        // The timers live as long as the loop and are moved rather than made afresh at every
        // frame: at thousands of sockets a timer per frame and socket is a measurable share of
        // the fan-out. The silence timer is moved on only when it fires before its time.
        let silence = tokio::time::sleep_until(last_heard + ask_after);
        let drain = async { draining.wait_for(|draining| *draining).await.map(drop) };
        tokio::pin!(silence, drain);
        // The client's frames, the deadlines and the drain are polled only after one of them
        // woke the task (their wakes go through `others`): a ping wakes the task through its
        // queue alone, and polling the WebSocket's read and the timers at each ping was about 6%
        // of the server's time at 10,000 sockets.
        let others = events.others();
        loop {
            // In this order: the client's frames (rate-limited) and the deadlines are never held up
            // by a stream of events, and a heartbeat waiting to be read is read before silence is
            // judged.
            let woke = std::future::poll_fn(|cx| {
                events.register(cx);
                if events.take_others() {
                    let mut cx = Context::from_waker(&others);
                    let woke = if let Poll::Ready(frame) = self.socket.poll_next_unpin(&mut cx) {
                        Some(Woke::Frame(frame))
                    } else if self.expiry.as_mut().poll(&mut cx).is_ready() {
                        Some(Woke::Expired)
                    } else if drain.as_mut().poll(&mut cx).is_ready() {
                        Some(Woke::Draining)
                    } else if silence.as_mut().poll(&mut cx).is_ready() {
                        Some(Woke::Silent)
                    } else {
                        None
                    };
                    if let Some(woke) = woke {
                        // Ready without registering a wake: polled again next time.
                        events.keep_others();
                        return Poll::Ready(woke);
                    }
                }
                events.poll_recv().map(Woke::Event)
            })
            .await;
            match woke {
                Woke::Frame(frame) => {
                    last_heard = Instant::now();
                    match frame {
                        Some(Ok(Message::Text(text))) => {
                            if text.len() > limits.max_frame_bytes {
                                return Err(Close {
                                    code: "frame_too_large",
                                    detail: format!("a frame is at most {} bytes", limits.max_frame_bytes),
                                    close: 1009,
                                });
                            }
                            if rate.check().is_err() {
                                return Err(Close::policy(
                                    "rate_limited",
                                    format!("at most {} frames a second", limits.frames_per_second),
                                ));
                            }
                            let frame = parse(&text)?;
                            self.settle().await?;
                            self.handle(frame).await?;
                        }
                        Some(Ok(Message::Binary(bytes))) => {
                            if bytes.len() > limits.max_frame_bytes {
                                return Err(Close {
                                    code: "frame_too_large",
                                    detail: format!("a frame is at most {} bytes", limits.max_frame_bytes),
                                    close: 1009,
                                });
                            }
                            return Err(Close {
                                code: "unknown_frame",
                                detail: "binary frames are not part of the protocol".into(),
                                close: 1003,
                            });
                        }
                        Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                        Some(Ok(Message::Close(_))) | None => return Ok(()),
                        Some(Err(_)) => {
                            return Err(Close {
                                code: "protocol_error",
                                detail: "the WebSocket protocol was broken".into(),
                                close: 1002,
                            });
                        }
                    }
                }
                Woke::Expired => {
                    return Err(Close::policy("unauthenticated", "the token expired: reconnect with a fresh one"));
                }
                Woke::Draining => {
                    return Err(Close {
                        code: "retry_later",
                        detail: "the server is restarting: reconnect now".into(),
                        close: 1012,
                    });
                }
                Woke::Silent => {
                    let now = Instant::now();
                    if last_heard + timeout <= now {
                        return Err(Close {
                            code: "heartbeat_timeout",
                            detail: format!("silent for {} ms", timeout.as_millis()),
                            close: 1001,
                        });
                    }
                    // Silent for a third of the timeout: a WebSocket ping asks the client's
                    // WebSocket, not its code, for a sign of life. A client that is there
                    // answers with a pong at once, whatever its heartbeat interval and however
                    // a browser throttles a hidden tab's timers. One that is gone answers
                    // nothing and leaves at the timeout.
                    if last_heard + ask_after <= now {
                        self.send_ping().await?;
                        silence.as_mut().reset(last_heard + timeout);
                    } else {
                        silence.as_mut().reset(last_heard + ask_after);
                    }
                }
                Woke::Event(event) => {
                    let Some(event) = event else { return Ok(()) };
                    self.settle().await?;
                    self.on_event(event).await?;
                    // What queued meanwhile is read too, up to a queue's worth, and the pings go
                    // out after it: a bucket's once.
                    for _ in 1..SOCKET_QUEUE {
                        let Some(event) = events.try_recv() else { break };
                        self.settle().await?;
                        self.on_event(event).await?;
                    }
                    self.settle().await?;
                    self.flush().await?;
                }
            }
        }
    }

    async fn send(&mut self, frame: &ServerFrame) -> Result<(), Close> {
        if send_frame(&mut self.socket, frame).await { Ok(()) } else { Err(Close::gone()) }
    }

    /// Send a frame serialized already.
    async fn send_text(&mut self, text: Utf8Bytes) -> Result<(), Close> {
        self.socket.send(Message::Text(text)).await.map_err(|_| Close::gone())
    }

    async fn send_ping(&mut self) -> Result<(), Close> {
        self.socket.send(Message::Ping(Default::default())).await.map_err(|_| Close::gone())
    }

    /// The actor's buckets now (`&mut self`: the socket in it is not `Sync`).
    async fn held(&mut self) -> Result<BTreeSet<BucketKey>, Close> {
        // Past the bucket bound the store answers the part a full pull serves, never too many.
        self.state.storage.held_buckets(&self.actor).await.map_err(|err| {
            tracing::warn!(error = ?crate::error::Chain(&err), "reading a socket's buckets failed");
            Close { code: "retry_later", detail: "a transient condition; reconnect".into(), close: 1011 }
        })
    }

    /// Subscribe to `buckets`: presence in buckets left is withdrawn, presence of new ones sent.
    async fn set_subscribed(&mut self, buckets: BTreeSet<BucketKey>) -> Result<Vec<BucketKey>, Close> {
        let added = self.follow(buckets).await;
        self.send_presence(&added).await?;
        Ok(added)
    }

    /// Take pings and presence of `buckets` from now on and withdraw presence in the buckets
    /// left, sending nothing; the buckets newly followed.
    async fn follow(&mut self, buckets: BTreeSet<BucketKey>) -> Vec<BucketKey> {
        let added: Vec<BucketKey> = buckets.difference(&self.subscribed).cloned().collect();
        let left: Vec<BucketKey> = self.subscribed.difference(&buckets).cloned().collect();
        for bucket in &left {
            self.withdraw(bucket).await;
        }
        self.pending.retain(|ping| buckets.contains(&ping.bucket));
        self.subscribed = buckets;
        self.left = self.state.hub.subscribe(self.id, &self.subscribed);
        added
    }

    async fn send_presence(&mut self, buckets: &[BucketKey]) -> Result<(), Close> {
        if buckets.is_empty() {
            return Ok(());
        }
        let states = self.state.realtime.presence_state(buckets).await.map_err(|err| {
            tracing::warn!(error = ?crate::error::Chain(&err), "reading presence failed");
            Close { code: "retry_later", detail: "a transient condition; reconnect".into(), close: 1011 }
        })?;
        for (bucket, state) in states {
            self.send(&ServerFrame::PresenceState { bucket, state }).await?;
        }
        Ok(())
    }

    async fn handle(&mut self, frame: ClientFrame) -> Result<(), Close> {
        match frame {
            ClientFrame::Auth { token } => {
                // A fresh token for the same user extends the connection.
                match self.state.auth.resolve_token(&token).await {
                    Some(actor) if actor.user_id == self.actor.user_id => {
                        // Its claims may be other than the old token's: the buckets they give too.
                        self.expiry.as_mut().reset(expiry(&actor));
                        self.state.hub.set_claims(self.id, claims(&actor));
                        self.actor = actor;
                        self.recompute().await
                    }
                    _ => Err(Close::policy("unauthenticated", "the token is not valid for this connection")),
                }
            }
            ClientFrame::Subscribe { buckets } => {
                let held = self.held().await?;
                if let Some(bucket) = buckets.iter().find(|b| !held.contains(b)) {
                    return Err(Close::policy("forbidden", format!("the actor does not hold bucket `{bucket}`")));
                }
                self.explicit = true;
                let buckets: BTreeSet<BucketKey> = buckets.into_iter().collect();
                let kept: Vec<BucketKey> = buckets.intersection(&self.subscribed).cloned().collect();
                self.set_subscribed(buckets).await?;
                // After each subscribe, the state of every subscribed bucket
                // (`docs/protocol.md#subscription`).
                self.send_presence(&kept).await
            }
            ClientFrame::Track { bucket, mut meta } => {
                if !self.subscribed.contains(&bucket) {
                    return Err(Close::policy("forbidden", format!("track a bucket you subscribe to, not `{bucket}`")));
                }
                let size = serde_json::to_vec(&meta).map_or(usize::MAX, |v| v.len());
                if size > self.state.stream_limits.max_meta_bytes {
                    return Err(Close::policy(
                        engine_kernel::wire::META_TOO_LARGE,
                        format!("a presence meta is at most {} bytes", self.state.stream_limits.max_meta_bytes),
                    ));
                }
                let limits = &self.state.stream_limits;
                match self.state.hub.be_present(
                    self.id,
                    &bucket,
                    limits.presences_per_actor,
                    limits.presences_per_bucket,
                ) {
                    Admitted::Yes => {}
                    // The actor's own doing: its socket closes, as for any other bound.
                    Admitted::ActorFull => {
                        return Err(Close::policy(
                            engine_kernel::wire::TOO_MANY_PRESENCES,
                            format!("an actor is present at most {} times on one server", limits.presences_per_actor),
                        ));
                    }
                    // Others filled the bucket: closing would let them shut this actor's stream.
                    Admitted::BucketFull => {
                        tracing::debug!(bucket = ?bucket.as_str(), "a presence in a full bucket is not announced");
                        return Ok(());
                    }
                }
                if let Some(previous) = self.presences.remove(&bucket) {
                    let _ = self.state.realtime.untrack(&bucket, &previous).await;
                }
                let presence_ref = uuid::Uuid::now_v7().simple().to_string();
                meta.insert("presenceRef".into(), presence_ref.clone().into());
                let presence = Presence {
                    bucket: bucket.clone(),
                    key: self.actor.user_id.clone(),
                    presence_ref: presence_ref.clone(),
                    meta,
                };
                self.presences.insert(bucket, presence_ref);
                self.state.realtime.track(presence).await.map_err(|err| {
                    tracing::warn!(error = ?crate::error::Chain(&err), "tracking presence failed");
                    Close { code: "retry_later", detail: "a transient condition; reconnect".into(), close: 1011 }
                })
            }
            ClientFrame::Untrack { bucket } => {
                self.withdraw(&bucket).await;
                Ok(())
            }
            ClientFrame::Heartbeat => Ok(()),
        }
    }

    async fn on_event(&mut self, queued: Queued) -> Result<(), Close> {
        // Queued before the socket last left buckets, it may be of one of them: no longer this
        // socket's. Queued since, it is of a followed bucket.
        let followed = |bucket: &BucketKey| queued.left == self.left || self.subscribed.contains(bucket);
        match queued.event {
            Event::Ping(ping) => {
                if followed(&ping.bucket) && !self.pending.iter().any(|p| p.bucket == ping.bucket) {
                    self.pending.push(ping);
                }
                Ok(())
            }
            Event::Frame(frame) if !followed(&frame.bucket) => Ok(()),
            Event::Frame(frame) => self.send_text(frame.text.clone()).await,
            Event::Wake => Ok(()),
        }
    }

    /// Settle what the hub says this socket owes, before anything else goes out: the actor's
    /// buckets recomputed, then, after lost signals, a ping for every followed bucket and its
    /// presence afresh.
    async fn settle(&mut self) -> Result<(), Close> {
        if self.owed.take_recompute() {
            self.recompute().await?;
        }
        if self.owed.take_resync() {
            // Every followed bucket: the pending ones among them.
            self.pending = self.subscribed.iter().map(|bucket| BucketFrame::ping(bucket.clone())).collect();
            self.flush().await?;
            let all: Vec<BucketKey> = self.subscribed.iter().cloned().collect();
            self.send_presence(&all).await?;
        }
        Ok(())
    }

    /// Follow what the actor holds now (within an explicit subscription); when that changed,
    /// `buckets_changed`, then the presence of each bucket newly followed.
    ///
    /// The hub follows the new buckets *before* `buckets_changed` goes out: a ping the hub
    /// releases before that was released with the horizon past its transaction, so the pull the
    /// client makes on `buckets_changed` starts above it and sees the rows; a ping released after
    /// it reaches this socket. Either way a new member gets the rows of the transaction that
    /// made it one without a later write (`docs/design.md`, "A new member's first rows").
    async fn recompute(&mut self) -> Result<(), Close> {
        let held = self.held().await?;
        let wanted = if self.explicit { self.subscribed.intersection(&held).cloned().collect() } else { held };
        if wanted != self.subscribed {
            let added = self.follow(wanted).await;
            self.send(&ServerFrame::BucketsChanged).await?;
            self.send_presence(&added).await?;
        }
        Ok(())
    }

    /// Send the gathered pings, one per bucket, in the order of their buckets.
    async fn flush(&mut self) -> Result<(), Close> {
        if self.pending.is_empty() {
            return Ok(());
        }
        // Taken and given back, so its buffer serves every flush.
        let mut pending = std::mem::take(&mut self.pending);
        let n = pending.len() as u64;
        pending.sort_by(|a, b| a.bucket.cmp(&b.bucket));
        for ping in pending.drain(..) {
            self.send_text(ping.text.clone()).await?;
        }
        crate::metrics::pings_sent(n);
        self.pending = pending;
        Ok(())
    }

    /// Withdraw this connection's presence in `bucket`, if any.
    async fn withdraw(&mut self, bucket: &BucketKey) {
        self.state.hub.not_present(self.id, bucket);
        if let Some(presence_ref) = self.presences.remove(bucket) {
            let _ = self.state.realtime.untrack(bucket, &presence_ref).await;
        }
    }

    /// Withdraw every presence of this connection.
    async fn leave(&mut self) {
        for (bucket, presence_ref) in std::mem::take(&mut self.presences) {
            self.state.hub.not_present(self.id, &bucket);
            let _ = self.state.realtime.untrack(&bucket, &presence_ref).await;
        }
    }
}
