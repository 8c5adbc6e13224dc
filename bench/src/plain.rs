//! The plain broadcaster the fan-out is measured against (`engine-bench plain-serve`, a process
//! of its own as the engine's server is, on the same tokio runtime): WebSockets accepted by
//! tokio-tungstenite on bare TCP, and for each `POST /broadcast/{n}` one prepared frame, as long
//! as the engine's ping, written to every socket. Nothing else: no authentication, buckets,
//! queues, horizon or reading of what clients send.
//!
//! The sockets are dealt to one shard per core, each a task that holds its sockets and writes
//! the frame to them one after another (one `sendto` each, no task woken per socket). A shard
//! still writing when the next broadcast comes writes the latest frame once it is done: it covers
//! the ones before, as the engine's coalesced pings do. It prints when each `POST` came, as the
//! engine's server prints when each push committed.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use futures_util::SinkExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::server::{Callback, ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

/// The frame of broadcast `n`: the engine's ping of `shared/room` with `room` replaced by `n` in
/// four digits, so it is as long and the load generator knows which broadcast it has.
pub(crate) fn frame(n: usize) -> String {
    format!(r#"{{"type":"ping","bucket":"shared/{n:04}"}}"#)
}

/// What a socket is sent once it joins a shard, as the engine sends its buckets' presence: the
/// load generator counts a socket as connected once it has read it.
const HELLO: &str = r#"{"type":"presence_state","bucket":"shared/room","state":{}}"#;

pub(crate) async fn serve() {
    let shards = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    let (mut joins, mut broadcasts) = (Vec::new(), Vec::new());
    for _ in 0..shards {
        let (join, joined) = mpsc::unbounded_channel();
        let (broadcast, frames) = watch::channel(Message::Text(Utf8Bytes::default()));
        tokio::spawn(shard(joined, frames));
        joins.push(join);
        broadcasts.push(broadcast);
    }
    let sockets = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let http = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    println!(
        "listening on {} sockets on {}",
        http.local_addr().expect("an address"),
        sockets.local_addr().expect("an address")
    );
    tokio::spawn(async move {
        let mut next = 0;
        loop {
            let Ok((stream, _)) = sockets.accept().await else { continue };
            let join = joins[next % joins.len()].clone();
            next += 1;
            tokio::spawn(async move {
                if let Some(socket) = accept(stream).await {
                    let _ = join.send(socket);
                }
            });
        }
    });
    let app = axum::Router::new().route("/broadcast/{n}", post(broadcast)).with_state(std::sync::Arc::new(broadcasts));
    axum::serve(http, app).await.expect("serve");
}

/// The handshake, with the engine's subprotocol and its socket settings (small read buffer,
/// frames written as they are sent).
async fn accept(stream: TcpStream) -> Option<WebSocketStream<TcpStream>> {
    stream.set_nodelay(true).ok()?;
    let config = WebSocketConfig::default().read_buffer_size(1024).write_buffer_size(0);
    tokio_tungstenite::accept_hdr_async_with_config(stream, Subprotocol, Some(config)).await.ok()
}

/// Answers the handshake with the engine's subprotocol, which the load generator asks for.
struct Subprotocol;

impl Callback for Subprotocol {
    fn on_request(self, _: &Request, mut response: Response) -> Result<Response, ErrorResponse> {
        response.headers_mut().insert("sec-websocket-protocol", "engine.v1".parse().expect("a header value"));
        Ok(response)
    }
}

async fn broadcast(
    State(shards): State<std::sync::Arc<Vec<watch::Sender<Message>>>>,
    Path(n): Path<usize>,
) -> StatusCode {
    // Its counterpart of the engine's commit: nothing before it is the broadcaster's work.
    let at = std::time::SystemTime::now();
    let frame = Message::Text(frame(n).into());
    for shard in shards.iter() {
        shard.send_replace(frame.clone());
    }
    crate::wire::print_commit_mark(n, at);
    StatusCode::NO_CONTENT
}

async fn shard(mut joined: mpsc::UnboundedReceiver<WebSocketStream<TcpStream>>, mut frames: watch::Receiver<Message>) {
    let mut sockets = Vec::new();
    loop {
        tokio::select! {
            socket = joined.recv() => {
                let Some(mut socket) = socket else { return };
                if socket.send(Message::Text(HELLO.into())).await.is_ok() {
                    sockets.push(socket);
                }
            }
            changed = frames.changed() => {
                if changed.is_err() {
                    return;
                }
                let frame = frames.borrow_and_update().clone();
                let mut n = 0;
                while n < sockets.len() {
                    if sockets[n].send(frame.clone()).await.is_ok() {
                        n += 1;
                    } else {
                        sockets.swap_remove(n);
                    }
                }
            }
        }
    }
}
