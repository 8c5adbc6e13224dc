//! A WebSocket client of `/sync/stream` for tests. Authenticated sockets heartbeat in the
//! background, as real clients do, so servers with short heartbeat timeouts keep them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio::sync::Mutex;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How a test socket authenticates.
pub(crate) enum Auth<'a> {
    /// `Authorization: Bearer <token>`.
    Header(&'a str),
    /// The `bearer.<token>` subprotocol.
    Subprotocol(&'a str),
    /// Nothing at the handshake (an `auth` frame must follow).
    None,
    /// A `Cookie` header, for a server whose auth reads cookies.
    Cookie(&'a str),
}

pub(crate) struct Ws {
    sink: Arc<Mutex<SplitSink<Socket, Message>>>,
    stream: SplitStream<Socket>,
    heartbeat: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Ws {
    fn drop(&mut self) {
        if let Some(task) = &self.heartbeat {
            task.abort();
        }
    }
}

impl Ws {
    /// Connect (heartbeating when authenticated at the handshake); the handshake's HTTP status
    /// on refusal.
    pub(crate) async fn connect(addr: SocketAddr, auth: Auth<'_>) -> Result<Ws, u16> {
        Self::connect_at(addr, "/sync/stream", auth).await
    }

    /// Connect to the stream at `path` (an engine nested under a prefix).
    pub(crate) async fn connect_at(addr: SocketAddr, path: &str, auth: Auth<'_>) -> Result<Ws, u16> {
        let heartbeat = !matches!(auth, Auth::None);
        Self::open(addr, path, auth, heartbeat).await
    }

    /// Connect without heartbeating: a socket that falls silent while nothing reads it, and
    /// answers the server's WebSocket pings while something does.
    pub(crate) async fn connect_silent(addr: SocketAddr, auth: Auth<'_>) -> Result<Ws, u16> {
        Self::open(addr, "/sync/stream", auth, false).await
    }

    /// Connect with a receive buffer of a few kilobytes and no heartbeat: a client that stops
    /// reading holds the server's frames back almost at once.
    pub(crate) async fn connect_small_buffer(addr: SocketAddr, auth: Auth<'_>) -> Result<Ws, u16> {
        let tcp = tokio::net::TcpSocket::new_v4().unwrap();
        tcp.set_recv_buffer_size(4096).unwrap();
        let stream = tcp.connect(addr).await.unwrap();
        Self::handshake(addr, "/sync/stream", auth, false, Some(stream)).await
    }

    async fn open(addr: SocketAddr, path: &str, auth: Auth<'_>, heartbeat: bool) -> Result<Ws, u16> {
        Self::handshake(addr, path, auth, heartbeat, None).await
    }

    async fn handshake(
        addr: SocketAddr,
        path: &str,
        auth: Auth<'_>,
        heartbeat: bool,
        stream: Option<TcpStream>,
    ) -> Result<Ws, u16> {
        let mut request = format!("ws://{addr}{path}").into_client_request().unwrap();
        let mut protocols = "engine.v1".to_owned();
        match auth {
            Auth::Header(token) => {
                request
                    .headers_mut()
                    .insert("authorization", HeaderValue::from_str(&format!("Bearer {token}")).unwrap());
            }
            Auth::Subprotocol(token) => protocols.push_str(&format!(", bearer.{token}")),
            Auth::Cookie(cookie) => {
                request.headers_mut().insert("cookie", HeaderValue::from_str(cookie).unwrap());
            }
            Auth::None => {}
        }
        request.headers_mut().insert("sec-websocket-protocol", HeaderValue::from_str(&protocols).unwrap());
        let connected = match stream {
            Some(stream) => tokio_tungstenite::client_async(request, MaybeTlsStream::Plain(stream)).await,
            None => tokio_tungstenite::connect_async(request).await,
        };
        let socket = match connected {
            Ok((socket, response)) => {
                assert_eq!(
                    response.headers().get("sec-websocket-protocol").unwrap(),
                    "engine.v1",
                    "the server selects engine.v1"
                );
                socket
            }
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => return Err(response.status().as_u16()),
            Err(other) => panic!("connecting failed: {other}"),
        };
        let (sink, stream) = socket.split();
        let sink = Arc::new(Mutex::new(sink));
        let heartbeat = heartbeat.then(|| {
            let sink = Arc::clone(&sink);
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(250)).await;
                    if sink.lock().await.send(Message::Text(r#"{"type":"heartbeat"}"#.into())).await.is_err() {
                        return;
                    }
                }
            })
        });
        Ok(Ws { sink, stream, heartbeat })
    }

    pub(crate) async fn send(&mut self, frame: Value) {
        self.sink.lock().await.send(Message::Text(frame.to_string().into())).await.unwrap();
    }

    pub(crate) async fn send_raw(&mut self, message: Message) {
        let _ = self.sink.lock().await.send(message).await;
    }

    /// The next JSON frame within `wait`, or `None`.
    pub(crate) async fn next(&mut self, wait: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let message = tokio::time::timeout_at(deadline, self.stream.next()).await.ok()??.ok()?;
            match message {
                Message::Text(text) => return Some(serde_json::from_str(&text).unwrap()),
                Message::Close(_) => return None,
                _ => {}
            }
        }
    }

    /// The next frame of type `kind` within `wait` (others are skipped).
    pub(crate) async fn expect(&mut self, kind: &str, wait: Duration) -> Value {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next(left).await {
                Some(frame) if frame["type"] == kind => return frame,
                Some(_) => {}
                None => panic!("no `{kind}` frame within {wait:?}"),
            }
        }
    }

    /// Every frame within `wait`.
    pub(crate) async fn drain(&mut self, wait: Duration) -> Vec<Value> {
        let mut frames = Vec::new();
        let deadline = tokio::time::Instant::now() + wait;
        while let Some(frame) = self.next(deadline.saturating_duration_since(tokio::time::Instant::now())).await {
            frames.push(frame);
        }
        frames
    }

    /// The `error` frame's code and the close code, within `wait`.
    pub(crate) async fn closed(&mut self, wait: Duration) -> (Option<String>, Option<u16>) {
        let deadline = tokio::time::Instant::now() + wait;
        let mut error = None;
        loop {
            let Ok(Some(message)) = tokio::time::timeout_at(deadline, self.stream.next()).await else {
                return (error, None);
            };
            match message {
                Ok(Message::Text(text)) => {
                    let frame: Value = serde_json::from_str(&text).unwrap();
                    if frame["type"] == "error" {
                        error = frame["code"].as_str().map(str::to_owned);
                    }
                }
                Ok(Message::Close(frame)) => return (error, frame.map(|f| u16::from(f.code))),
                Ok(_) => {}
                Err(_) => return (error, None),
            }
        }
    }
}
