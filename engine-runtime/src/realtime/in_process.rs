//! The in-process adapter: one broadcast channel in one server process, the default.

use engine_kernel::BoxFuture;
use tokio::sync::broadcast;

use super::{Realtime, Signal};
use crate::error::Result;

/// How many signals a slow subscriber may fall behind before it misses some (and is told to
/// pull everything).
pub const CHANNEL_CAPACITY: usize = 4096;

/// Realtime within one process.
pub fn in_process() -> InProcess {
    InProcess { sender: broadcast::channel(CHANNEL_CAPACITY).0 }
}

/// Realtime within one process. Build with [`in_process`].
#[derive(Debug, Clone)]
pub struct InProcess {
    sender: broadcast::Sender<Signal>,
}

impl Realtime for InProcess {
    fn publish(&self, signal: Signal) -> BoxFuture<'_, Result<()>> {
        // No subscriber is not an error: nobody is listening.
        let _ = self.sender.send(signal);
        Box::pin(std::future::ready(Ok(())))
    }

    fn subscribe(&self) -> broadcast::Receiver<Signal> {
        self.sender.subscribe()
    }
}
