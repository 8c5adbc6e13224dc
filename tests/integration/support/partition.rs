//! A TCP proxy in front of Postgres that can cut the connections through it without closing
//! them: after [`Partition::cut`], what either side of a connection open at that moment sends is
//! taken (so the kernel acknowledges it) and never passed on, and neither side hears of a close,
//! as when a network partition or a vanished host leaves a connection open at both ends.
//! Connections made after the cut pass; while the proxy [holds](Partition::hold), they are cut
//! as they are made, as when the host stays unreachable.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

pub(crate) struct Partition {
    addr: SocketAddr,
    database_url: String,
    /// How many cuts were made: a connection made before the latest one is cut.
    cuts: watch::Sender<u64>,
    /// Whether connections are cut as they are made.
    holding: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Partition {
    /// A proxy to the Postgres server of `database_url`.
    pub(crate) async fn start(database_url: &str) -> Partition {
        let authority = authority(database_url);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (cuts, _) = watch::channel(0);
        let watching = cuts.clone();
        let holding = Arc::new(AtomicBool::new(false));
        let held = holding.clone();
        let upstream = authority.to_owned();
        let task = tokio::spawn(async move {
            // Dropped with the accepting task: every connection ends with the proxy.
            let mut connections = JoinSet::new();
            while let Ok((client, _)) = listener.accept().await {
                while connections.try_join_next().is_some() {}
                let Ok(server) = TcpStream::connect(&upstream).await else { continue };
                let made_after = *watching.borrow();
                let (client_reads, client_writes) = client.into_split();
                let (server_reads, server_writes) = server.into_split();
                connections.spawn(pass(client_reads, server_writes, watching.subscribe(), made_after));
                connections.spawn(pass(server_reads, client_writes, watching.subscribe(), made_after));
                if held.load(Ordering::SeqCst) {
                    watching.send_modify(|cuts| *cuts += 1);
                }
            }
        });
        Partition { addr, database_url: database_url.to_owned(), cuts, holding, task }
    }

    /// The URL of the database through the proxy.
    pub(crate) fn url(&self) -> String {
        self.database_url.replacen(authority(&self.database_url), &self.addr.to_string(), 1)
    }

    /// Cut every connection open now, for good.
    pub(crate) fn cut(&self) {
        self.cuts.send_modify(|cuts| *cuts += 1);
    }

    /// Cut every connection open now, and every one made until [`release`](Self::release).
    pub(crate) fn hold(&self) {
        self.holding.store(true, Ordering::SeqCst);
        self.cut();
    }

    /// Let connections made from now on pass.
    pub(crate) fn release(&self) {
        self.holding.store(false, Ordering::SeqCst);
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `host:port` of a `postgres://user@host:port/database` URL.
fn authority(url: &str) -> &str {
    let after_user = url.split_once('@').map_or(url, |(_, rest)| rest);
    after_user.split(['/', '?']).next().unwrap()
}

/// Pass what `from` reads on to `to` until the connection is cut; after that, take it and keep
/// both ends open.
async fn pass(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut cuts: watch::Receiver<u64>, made_after: u64) {
    let mut buffer = vec![0; 16 * 1024];
    loop {
        let read = tokio::select! {
            read = from.read(&mut buffer) => read,
            changed = cuts.changed() => match changed {
                Ok(()) => continue,
                // The proxy is gone.
                Err(_) => return,
            },
        };
        let cut = *cuts.borrow() > made_after;
        match read {
            Ok(0) | Err(_) if cut => return std::future::pending::<()>().await,
            Ok(0) | Err(_) => return,
            Ok(_) if cut => {}
            Ok(n) => {
                if to.write_all(&buffer[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
}
