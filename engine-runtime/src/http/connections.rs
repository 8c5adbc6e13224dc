//! The connections a server accepts, each counted against the address it came from until a
//! request on it authenticates ([`Limits::unauthenticated_per_address`]). hyper reads a request's
//! headers before the router sees anything, however slowly they arrive, and keeps a connection
//! answered 401 open for the next request: without the count, one address could hold any number
//! of connections that never authenticate, each with its buffers. An address at its limit that
//! opens another connection has its oldest unauthenticated one closed to make room: what one
//! address holds stays bounded, and a client behind the same address as an attacker (a shared
//! NAT, an office) still gets in, as its requests authenticate within moments of connecting,
//! where the attacker's connections wait to be the oldest. Nor may a connection stay
//! unauthenticated for long ([`Limits::unauthenticated_deadline`]): past its deadline it reads as
//! closed, so a client sending its headers a byte at a time, from however many addresses, is cut
//! off.
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
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Sleep;

use crate::limits::{OldestFirst, Peer, UnauthenticatedConnection};

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
    unauthenticated: OldestFirst,
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connections")
            .field("listener", &self.listener)
            .field("limit", &self.limit)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl Connections {
    /// `listener`'s connections, at most `limit` of them from one address unauthenticated at
    /// once (0: no limit), each for at most `deadline` (zero: no deadline).
    pub(crate) fn new(listener: TcpListener, limit: usize, deadline: Duration) -> Self {
        Connections { listener, limit, deadline, unauthenticated: OldestFirst::default() }
    }

    fn connection(&self, tcp: TcpStream, unauthenticated: UnauthenticatedConnection) -> Connection {
        let deadline = (!self.deadline.is_zero()).then(|| Box::pin(tokio::time::sleep(self.deadline)));
        Connection { tcp, unauthenticated, deadline }
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
                return (self.connection(tcp, UnauthenticatedConnection::new(None)), address);
            }
            // Refused only were the address's count held by no connection to close (it is not):
            // the connection is then dropped, closed.
            if let Some(unauthenticated) = self.unauthenticated.admit(address.ip(), self.limit) {
                return (self.connection(tcp, unauthenticated), address);
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }
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
        if this.unauthenticated.poll_evicted(cx) {
            // Read as the client's close, as at the deadline.
            return Poll::Ready(Ok(()));
        }
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

/// What writing to an evicted connection fails with: hyper may be writing answers to pipelined
/// requests it has yet to read past, and never read the close (its count is given back at once).
fn evicted() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionAborted, "closed for a newer connection of its address")
}

impl AsyncWrite for Connection {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.unauthenticated.poll_evicted(cx) {
            return Poll::Ready(Err(evicted()));
        }
        Pin::new(&mut this.tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.unauthenticated.poll_evicted(cx) {
            return Poll::Ready(Err(evicted()));
        }
        Pin::new(&mut this.tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.unauthenticated.poll_evicted(cx) {
            return Poll::Ready(Err(evicted()));
        }
        Pin::new(&mut this.tcp).poll_flush(cx)
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
