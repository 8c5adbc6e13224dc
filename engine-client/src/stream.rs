//! The realtime source: a WebSocket to `/sync/stream` that reconnects for ever — exponential
//! backoff with full jitter, reset once a connection has stayed up long enough; a connect
//! timeout; a liveness check on idle connections; fresh credentials on every connection; a
//! catch-up pull on every connection. Pings and `buckets_changed` trigger pulls; presence frames
//! keep the presence state.

use std::sync::Arc;
use std::time::Duration;

use engine_kernel::wire::{ClientFrame, STREAM_SUBPROTOCOL, ServerFrame};
use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::backoff::Backoff;
use crate::error::{Error, Result};
use crate::presence::PresenceEvent;
use crate::sync::Inner;

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Why a session ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    /// The client is shutting down.
    Shutdown,
    /// The connection closed or went silent.
    Lost,
}

pub(crate) async fn run(inner: Arc<Inner>) {
    let reconnect = inner.settings.reconnect.clone();
    let mut backoff = Backoff::new(reconnect.backoff_base, reconnect.backoff_max);
    let mut shutdown = inner.shutdown.subscribe();
    let Some(mut outgoing) = inner.take_outgoing() else { return };
    loop {
        if *shutdown.borrow() {
            return;
        }
        let started = Instant::now();
        match connect(&inner).await {
            Ok(socket) => {
                // Frames queued while disconnected are superseded by the tracked set.
                while outgoing.try_recv().is_ok() {}
                inner.status.send_modify(|status| status.connected = true);
                inner.wake_pull.notify_one();
                let end = session(&inner, socket, &mut outgoing, &mut shutdown).await;
                inner.status.send_modify(|status| status.connected = false);
                inner.presence.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear_states();
                if end == End::Shutdown {
                    return;
                }
                if started.elapsed() >= reconnect.stable_after {
                    backoff.reset();
                }
            }
            Err(err) => {
                tracing::debug!(error = %err, "the stream could not connect");
                if let Error::Server { status: 401, .. } = err
                    && let Err(refresh) = inner.remote.auth.refresh().await
                {
                    tracing::debug!(error = %refresh, "refreshing credentials failed");
                }
                inner.status.send_modify(|status| status.last_error = Some(err.to_string()));
            }
        }
        tokio::select! {
            () = tokio::time::sleep(backoff.next_delay()) => {}
            _ = shutdown.changed() => return,
        }
    }
}

async fn connect(inner: &Inner) -> Result<Socket> {
    let mut url = inner.remote.url("sync/stream");
    let scheme = if url.scheme() == "https" { "wss" } else { "ws" };
    url.set_scheme(scheme).map_err(|()| Error::Config(format!("no WebSocket URL for {url}")))?;
    let mut request =
        url.as_str().into_client_request().map_err(|e| Error::Config(format!("the stream URL {url}: {e}")))?;
    let headers = request.headers_mut();
    for (name, value) in inner.remote.auth.headers().await? {
        let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| Error::Auth(format!("header name {name:?}: {e}")))?;
        let value = value.parse().map_err(|e| Error::Auth(format!("header value: {e}")))?;
        headers.insert(name, value);
    }
    headers.insert("sec-websocket-protocol", STREAM_SUBPROTOCOL.parse().expect("a valid header value"));
    let timeout = inner.settings.reconnect.connect_timeout;
    match tokio::time::timeout(timeout, tokio_tungstenite::connect_async(request)).await {
        Err(_) => Err(Error::Network(format!("the stream did not open within {timeout:?}"))),
        Ok(Err(tokio_tungstenite::tungstenite::Error::Http(response))) => {
            let status = response.status().as_u16();
            let problem =
                response.body().as_deref().and_then(|body| serde_json::from_slice(body).ok()).unwrap_or_else(|| {
                    engine_kernel::wire::Problem::new(engine_kernel::ErrorCode::Unauthenticated, "refused")
                });
            Err(Error::Server { status, problem, retry_after: None })
        }
        Ok(Err(err)) => Err(Error::Network(err.to_string())),
        Ok(Ok((socket, _))) => Ok(socket),
    }
}

fn frame_text(frame: &ClientFrame) -> Message {
    Message::Text(serde_json::to_string(frame).expect("frames serialize").into())
}

async fn session(
    inner: &Inner,
    socket: Socket,
    outgoing: &mut tokio::sync::mpsc::UnboundedReceiver<ClientFrame>,
    shutdown: &mut tokio::sync::watch::Receiver<bool>,
) -> End {
    let (mut sink, mut stream) = socket.split();
    let subscription = inner.subscription.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    if let Some(buckets) = subscription
        && sink.send(frame_text(&ClientFrame::Subscribe { buckets })).await.is_err()
    {
        return End::Lost;
    }
    let tracked: Vec<ClientFrame> = inner
        .presence
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .tracked
        .iter()
        .map(|(bucket, meta)| ClientFrame::Track { bucket: bucket.clone(), meta: meta.clone() })
        .collect();
    for frame in &tracked {
        if sink.send(frame_text(frame)).await.is_err() {
            return End::Lost;
        }
    }
    let start = Instant::now();
    let mut heartbeat =
        tokio::time::interval_at(start + inner.settings.presence_heartbeat, inner.settings.presence_heartbeat);
    let liveness_every = inner.settings.reconnect.heartbeat;
    let mut liveness = tokio::time::interval_at(start + liveness_every, liveness_every);
    let mut awaiting_pong: Option<Instant> = None;
    loop {
        tokio::select! {
            message = stream.next() => match message {
                Some(Ok(Message::Text(text))) => {
                    awaiting_pong = None;
                    handle(inner, &text);
                }
                Some(Ok(Message::Pong(_) | Message::Ping(_) | Message::Binary(_) | Message::Frame(_))) => awaiting_pong = None,
                Some(Ok(Message::Close(_)) | Err(_)) | None => return End::Lost,
            },
            Some(frame) = outgoing.recv() => {
                if sink.send(frame_text(&frame)).await.is_err() {
                    return End::Lost;
                }
            }
            _ = heartbeat.tick() => {
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
            () = inner.restart_stream.notified() => {
                let _ = sink.send(Message::Close(None)).await;
                return End::Lost;
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

fn handle(inner: &Inner, text: &str) {
    let frame: ServerFrame = match serde_json::from_str(text) {
        Ok(frame) => frame,
        Err(err) => {
            tracing::debug!(error = %err, "an unreadable frame from the server");
            return;
        }
    };
    let event = match frame {
        ServerFrame::Ping { .. } | ServerFrame::BucketsChanged => {
            inner.wake_pull.notify_one();
            None
        }
        ServerFrame::PresenceState { bucket, state } => {
            let state =
                inner.presence.lock().unwrap_or_else(std::sync::PoisonError::into_inner).replace(&bucket, state);
            Some(PresenceEvent { bucket, state })
        }
        ServerFrame::PresenceDiff { bucket, joins, leaves } => {
            let state =
                inner.presence.lock().unwrap_or_else(std::sync::PoisonError::into_inner).diff(&bucket, joins, leaves);
            Some(PresenceEvent { bucket, state })
        }
        ServerFrame::Error { code, detail } => {
            inner.status.send_modify(|status| status.last_error = Some(format!("stream: {code}: {detail}")));
            None
        }
    };
    if let Some(event) = event {
        let _ = inner.presence_events.send(event);
    }
}
