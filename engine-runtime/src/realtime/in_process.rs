//! The in-process adapter: one broadcast channel and an in-memory presence registry, in one
//! server process.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use engine_kernel::{BoxFuture, BucketKey};
use tokio::sync::broadcast;

use super::{OpenRealtime, Presence, PresenceState, Realtime, Signal, add_meta};
use crate::error::Result;

/// How many signals a slow subscriber may fall behind before it misses some (and is told to
/// resync).
pub const CHANNEL_CAPACITY: usize = 8192;

/// Realtime within one process.
pub fn in_process() -> InProcess {
    InProcess { sender: broadcast::channel(CHANNEL_CAPACITY).0, presence: Arc::default() }
}

/// Realtime within one process. Build with [`in_process`].
#[derive(Debug, Clone)]
pub struct InProcess {
    sender: broadcast::Sender<Signal>,
    /// bucket → presence ref → presence.
    presence: Arc<Mutex<HashMap<BucketKey, BTreeMap<String, Presence>>>>,
}

impl OpenRealtime for InProcess {
    fn open(self: Box<Self>, _heartbeat_timeout: Duration) -> BoxFuture<'static, Result<Arc<dyn Realtime>>> {
        Box::pin(async move { Ok(Arc::new(*self) as Arc<dyn Realtime>) })
    }
}

impl InProcess {
    fn send(&self, signal: Signal) {
        // No subscriber is not an error: nobody is listening.
        let _ = self.sender.send(signal);
    }
}

impl Realtime for InProcess {
    fn publish(&self, signal: Signal) -> BoxFuture<'_, Result<()>> {
        self.send(signal);
        Box::pin(std::future::ready(Ok(())))
    }

    fn subscribe(&self) -> broadcast::Receiver<Signal> {
        self.sender.subscribe()
    }

    fn track(&self, presence: Presence) -> BoxFuture<'_, Result<()>> {
        let mut joins = PresenceState::new();
        add_meta(&mut joins, &presence.key, presence.meta.clone());
        let bucket = presence.bucket.clone();
        self.presence
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(bucket.clone())
            .or_default()
            .insert(presence.presence_ref.clone(), presence);
        self.send(Signal::Presence { bucket, joins, leaves: PresenceState::new() });
        Box::pin(std::future::ready(Ok(())))
    }

    fn untrack<'a>(&'a self, bucket: &'a BucketKey, presence_ref: &'a str) -> BoxFuture<'a, Result<()>> {
        let removed = {
            let mut registry = self.presence.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let removed = registry.get_mut(bucket).and_then(|b| b.remove(presence_ref));
            if registry.get(bucket).is_some_and(BTreeMap::is_empty) {
                registry.remove(bucket);
            }
            removed
        };
        if let Some(presence) = removed {
            let mut leaves = PresenceState::new();
            add_meta(&mut leaves, &presence.key, presence.meta);
            self.send(Signal::Presence { bucket: bucket.clone(), joins: PresenceState::new(), leaves });
        }
        Box::pin(std::future::ready(Ok(())))
    }

    fn presence_state<'a>(
        &'a self,
        buckets: &'a [BucketKey],
    ) -> BoxFuture<'a, Result<BTreeMap<BucketKey, PresenceState>>> {
        let registry = self.presence.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let states = buckets
            .iter()
            .map(|bucket| {
                let mut state = PresenceState::new();
                for presence in registry.get(bucket).into_iter().flat_map(BTreeMap::values) {
                    add_meta(&mut state, &presence.key, presence.meta.clone());
                }
                (bucket.clone(), state)
            })
            .collect();
        Box::pin(std::future::ready(Ok(states)))
    }
}
