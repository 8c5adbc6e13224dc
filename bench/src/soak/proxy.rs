//! A fault-injecting TCP proxy in front of the instances, as a flaky network and a load balancer
//! are: each connection goes to the next instance that accepts it. As seeded draws decide, a
//! connection is refused, answered 503 by the proxy itself, or duplicated (everything the client
//! sends goes to a second instance too, whose answers are dropped); and at any answer the server
//! sends on it, the connection is cut before the answer is passed on (the server did the work;
//! the client never hears of it), or the answer is slowed. HTTP and WebSocket alike, since it
//! works below them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::rng::Rng;

/// A fault the proxy injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// A connection closed before reaching any instance.
    Refuse,
    /// A connection answered `503 Service Unavailable` (`Retry-After: 1`) by the proxy, as a
    /// load balancer without a healthy instance answers.
    Unavailable,
    /// A connection whose every byte from the client also goes to another instance: each
    /// request runs twice, at once, on two instances.
    Duplicate,
    /// A connection closed as the server's answer starts, unread: the server did the work and
    /// the client never hears of it.
    CutAfter,
    /// A chunk held back up to 200 ms.
    Slow,
}

const FAULTS: [Fault; 5] = [Fault::Refuse, Fault::Unavailable, Fault::Duplicate, Fault::CutAfter, Fault::Slow];

/// How many times each fault was injected.
#[derive(Debug, Default)]
pub(crate) struct Tally([AtomicU64; 5]);

impl Tally {
    fn count(&self, fault: Fault) {
        let index = FAULTS.iter().position(|f| *f == fault).expect("a known fault");
        self.0[index].fetch_add(1, Ordering::Relaxed);
    }

    /// Injections by fault, in the order of [`Fault`].
    pub(crate) fn counts(&self) -> Vec<(Fault, u64)> {
        FAULTS.iter().zip(&self.0).map(|(f, n)| (*f, n.load(Ordering::Relaxed))).collect()
    }
}

pub(crate) struct FaultProxy {
    pub(crate) addr: SocketAddr,
    pub(crate) tally: Arc<Tally>,
    faulty: Arc<AtomicBool>,
    accept: tokio::task::AbortHandle,
}

impl FaultProxy {
    /// Proxy to `backends`, injecting faults into `rate` of the connections (drawn from `seed`).
    pub(crate) async fn start(backends: Vec<SocketAddr>, rate: f64, seed: u64) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let addr = listener.local_addr().expect("an address");
        let tally = Arc::new(Tally::default());
        let faulty = Arc::new(AtomicBool::new(true));
        let (counted, on) = (tally.clone(), faulty.clone());
        let backends = Arc::new(backends);
        let next = Arc::new(AtomicUsize::new(0));
        let accept = tokio::spawn(async move {
            let mut rng = Rng::new(seed);
            while let Ok((inbound, _)) = listener.accept().await {
                let mut draws =
                    Draws { rate, on: on.clone(), tally: counted.clone(), seed: rng.next(), duplicate: false };
                if on.load(Ordering::Relaxed) {
                    let draw = rng.below(1_000_000) as f64 / 1_000_000.0;
                    if draw < rate / 3.0 {
                        counted.count(Fault::Refuse);
                        continue;
                    }
                    if draw < 2.0 * rate / 3.0 {
                        counted.count(Fault::Unavailable);
                        tokio::spawn(unavailable(inbound));
                        continue;
                    }
                    if draw < rate {
                        counted.count(Fault::Duplicate);
                        draws.duplicate = true;
                    }
                }
                let first = next.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(forward(inbound, backends.clone(), first, draws));
            }
        })
        .abort_handle();
        FaultProxy { addr, tally, faulty, accept }
    }

    /// Stop injecting faults (connections from now on pass).
    pub(crate) fn heal(&self) {
        self.faulty.store(false, Ordering::Relaxed);
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// The faults of one connection: each answer chunk is cut or slowed with a share of `rate`.
struct Draws {
    rate: f64,
    on: Arc<AtomicBool>,
    tally: Arc<Tally>,
    seed: u64,
    /// Whether the client's bytes also go to a second instance.
    duplicate: bool,
}

/// Answer the connection's first request 503, as a load balancer with no instance to send it to.
async fn unavailable(mut inbound: TcpStream) {
    let mut head = vec![0u8; 16 * 1024];
    let _ = inbound.read(&mut head).await;
    let answer = "HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
    let _ = inbound.write_all(answer.as_bytes()).await;
    let _ = inbound.shutdown().await;
}

/// A second connection to the instance after `first`, whose answers are read and dropped.
async fn shadow(backends: &[SocketAddr], first: usize) -> Option<tokio::net::tcp::OwnedWriteHalf> {
    let stream = TcpStream::connect(backends[(first + 1) % backends.len()]).await.ok()?;
    let (mut read, write) = stream.into_split();
    tokio::spawn(async move {
        let mut sink = vec![0u8; 16 * 1024];
        while matches!(read.read(&mut sink).await, Ok(n) if n > 0) {}
    });
    Some(write)
}

async fn forward(inbound: TcpStream, backends: Arc<Vec<SocketAddr>>, first: usize, draws: Draws) {
    let _ = inbound.set_nodelay(true);
    let mut outbound = None;
    for i in 0..backends.len() {
        if let Ok(stream) = TcpStream::connect(backends[(first + i) % backends.len()]).await {
            outbound = Some(stream);
            break;
        }
    }
    let Some(outbound) = outbound else { return };
    let _ = outbound.set_nodelay(true);
    let (mut client_read, mut client_write) = inbound.into_split();
    let (mut server_read, mut server_write) = outbound.into_split();
    let mut twin = if draws.duplicate { shadow(&backends, first).await } else { None };
    let upstream = async {
        let mut buffer = vec![0u8; 16 * 1024];
        loop {
            let n = match client_read.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if let Some(write) = twin.as_mut()
                && write.write_all(&buffer[..n]).await.is_err()
            {
                twin = None;
            }
            if server_write.write_all(&buffer[..n]).await.is_err() {
                return;
            }
        }
    };
    let downstream = async {
        let mut rng = Rng::new(draws.seed);
        let mut buffer = vec![0u8; 16 * 1024];
        loop {
            let n = match server_read.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if draws.on.load(Ordering::Relaxed) && rng.chance(draws.rate) {
                match rng.chance(0.5) {
                    true => {
                        draws.tally.count(Fault::CutAfter);
                        return;
                    }
                    false => {
                        draws.tally.count(Fault::Slow);
                        tokio::time::sleep(Duration::from_millis(rng.below(200))).await;
                    }
                }
            }
            if client_write.write_all(&buffer[..n]).await.is_err() {
                return;
            }
        }
    };
    // Either side ending ends the connection: both halves are dropped.
    tokio::select! {
        () = upstream => {}
        () = downstream => {}
    }
}
