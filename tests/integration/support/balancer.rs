//! A round-robin TCP balancer in front of several server processes, as a load balancer stands
//! in front of a rolling deploy: each connection goes to the next instance that accepts it, and
//! bytes are copied both ways until either side closes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::net::{TcpListener, TcpStream};

pub(crate) struct Balancer {
    addr: SocketAddr,
    accept: tokio::task::AbortHandle,
}

impl Balancer {
    /// Balance over `backends`; an instance that refuses a connection is skipped for it.
    pub(crate) async fn start(backends: Vec<SocketAddr>) -> Balancer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let backends = Arc::new(backends);
        let next = Arc::new(AtomicUsize::new(0));
        let accept = tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let first = next.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(forward(inbound, backends.clone(), first));
            }
        })
        .abort_handle();
        Balancer { addr, accept }
    }

    /// The balancer's base URL.
    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Connect `inbound` to the first backend, from the `first`-th on, that accepts.
async fn forward(mut inbound: TcpStream, backends: Arc<Vec<SocketAddr>>, first: usize) {
    let _ = inbound.set_nodelay(true);
    for i in 0..backends.len() {
        if let Ok(mut outbound) = TcpStream::connect(backends[(first + i) % backends.len()]).await {
            let _ = outbound.set_nodelay(true);
            let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            return;
        }
    }
}
