//! The connections a server accepts, each counted against the address it came from until a
//! request on it authenticates ([`Limits::unauthenticated_per_address`]). hyper reads a request's
//! headers before the router sees anything, however slowly they arrive, and keeps a connection
//! answered 401 open for the next request: without the count, one address could hold any number
//! of connections that never authenticate, each with its buffers. An address at its limit has a
//! new connection answered `503 retry_later` with `Connection: close` at once, nothing of it read
//! but what it sent before the answer. Nor may a connection stay unauthenticated for long
//! ([`Limits::unauthenticated_deadline`]): past its deadline it reads as closed, so a client
//! sending its headers a byte at a time, from however many addresses, is cut off.
//!
//! [`Limits::unauthenticated_per_address`]: crate::Limits::unauthenticated_per_address
//! [`Limits::unauthenticated_deadline`]: crate::Limits::unauthenticated_deadline

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Sleep;

use crate::error::Error;
use crate::limits::{AddressPermit, BUSY_RETRY_AFTER, ByAddress, Peer, UnauthenticatedConnection};

/// A listener whose connections are counted against their address until one of their requests
/// authenticates: what [`Server::serve`](crate::Server::serve) serves on, and what a host app
/// that serves the engine's router itself gets from
/// [`Server::connections`](crate::Server::connections). Serve it with [`Peer`] as the connect
/// info (`into_make_service_with_connect_info::<Peer>()`), so requests can tell their connection
/// that they authenticated. It sets `TCP_NODELAY` on every connection, as
/// [`tcp_nodelay`](crate::tcp_nodelay) does.
pub struct Connections {
    listener: TcpListener,
    limit: usize,
    deadline: Duration,
    unauthenticated: ByAddress,
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connections")
            .field("listener", &self.listener)
            .field("limit", &self.limit)
            .field("deadline", &self.deadline)
            .finish()
    }
}

impl Connections {
    /// `listener`'s connections, at most `limit` of them from one address unauthenticated at
    /// once (0: no limit), each for at most `deadline` (zero: no deadline).
    pub(crate) fn new(listener: TcpListener, limit: usize, deadline: Duration) -> Self {
        Connections { listener, limit, deadline, unauthenticated: ByAddress::default() }
    }

    fn connection(&self, tcp: TcpStream, permit: Option<AddressPermit>) -> Connection {
        let deadline = (!self.deadline.is_zero()).then(|| Box::pin(tokio::time::sleep(self.deadline)));
        Connection { tcp, unauthenticated: UnauthenticatedConnection::new(permit), deadline }
    }
}

impl Listener for Connections {
    type Io = Connection;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Connection, SocketAddr) {
        loop {
            let (mut tcp, address) = Listener::accept(&mut self.listener).await;
            set_nodelay(&mut tcp);
            if self.limit == 0 {
                return (self.connection(tcp, None), address);
            }
            match self.unauthenticated.admit(address.ip(), self.limit) {
                Some(permit) => return (self.connection(tcp, Some(permit)), address),
                None => {
                    tracing::debug!(%address, "a connection refused: its address has too many unauthenticated");
                    tokio::spawn(refuse(tcp, self.limit));
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

/// How long a refused connection is read from after its answer, so that closing it with bytes
/// unread does not reset it before the client has read the answer.
const REFUSAL_LINGER: Duration = Duration::from_secs(1);

/// Answer a connection over its address's limit `503 retry_later` and close it.
async fn refuse(mut tcp: TcpStream, limit: usize) {
    let refusal = Error::RetryLater {
        retry_after: BUSY_RETRY_AFTER,
        detail: format!("{limit} connections from this address have yet to authenticate a request"),
    };
    let problem = refusal.problem();
    let body = serde_json::to_vec(&problem).unwrap_or_default();
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/problem+json\r\nretry-after: {}\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n",
        BUSY_RETRY_AFTER.as_secs().max(1),
        body.len()
    );
    if tcp.write_all(head.as_bytes()).await.is_err() || tcp.write_all(&body).await.is_err() {
        return;
    }
    let _ = tcp.shutdown().await;
    // Bounded: a client that keeps sending is cut off after the linger.
    let mut sink = [0; 4096];
    let drain = async {
        let mut read = 0;
        while read < 64 * 1024 {
            match tcp.read(&mut sink).await {
                Ok(0) | Err(_) => return,
                Ok(n) => read += n,
            }
        }
    };
    let _ = tokio::time::timeout(REFUSAL_LINGER, drain).await;
}

/// A connection accepted by [`Connections`].
pub struct Connection {
    tcp: TcpStream,
    unauthenticated: UnauthenticatedConnection,
    /// When the connection reads as closed unless a request of it has authenticated.
    deadline: Option<Pin<Box<Sleep>>>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").field("tcp", &self.tcp).finish_non_exhaustive()
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // A request of the connection may outlive it (each runs on a task of its own).
        self.unauthenticated.end();
    }
}

impl AsyncRead for Connection {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(deadline) = &mut this.deadline {
            if this.unauthenticated.ended() {
                this.deadline = None;
            } else if deadline.as_mut().poll(cx).is_ready() {
                tracing::debug!("a connection closed: no request of it authenticated before its deadline");
                // Read as the client's close: hyper answers what it has read and closes.
                return Poll::Ready(Ok(()));
            }
        }
        Pin::new(&mut this.tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for Connection {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}

impl Connected<IncomingStream<'_, Connections>> for Peer {
    fn connect_info(stream: IncomingStream<'_, Connections>) -> Self {
        Peer::new(*stream.remote_addr(), stream.io().unauthenticated.clone())
    }
}

/// Set `TCP_NODELAY` on `tcp`, logging a failure.
pub(crate) fn set_nodelay(tcp: &mut TcpStream) {
    if let Err(err) = tcp.set_nodelay(true) {
        tracing::warn!(error = ?crate::error::Chain(&err), "cannot set TCP_NODELAY");
    }
}
