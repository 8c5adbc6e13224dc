//! Locks by name, held by tasks of this process, shared or alone: on SQLite what Postgres'
//! advisory locks are. One process serves a SQLite file (`lock_file`), so a lock of this
//! process is the file's. Unlike the writer, such a lock may be held across a network call
//! without stopping the store's writes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};

/// The locks taken or waited for, by name; a name none holds or waits for has no entry.
#[derive(Debug, Default)]
pub(crate) struct NamedLocks {
    locks: Mutex<HashMap<String, Arc<RwLock<()>>>>,
}

/// A lock held until dropped.
#[derive(Debug)]
pub(crate) struct Held<'a> {
    locks: &'a NamedLocks,
    name: String,
    guard: Option<Guard>,
}

#[derive(Debug)]
enum Guard {
    Shared(#[allow(dead_code)] OwnedRwLockReadGuard<()>),
    Alone(#[allow(dead_code)] OwnedRwLockWriteGuard<()>),
}

impl NamedLocks {
    fn entry(&self, name: &str) -> Arc<RwLock<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
        locks.entry(name.to_owned()).or_default().clone()
    }

    /// Wait for the lock `name`, `shared` with other shared holders or alone.
    pub(crate) async fn lock(&self, name: &str, shared: bool) -> Held<'_> {
        let lock = self.entry(name);
        let guard = match shared {
            true => Guard::Shared(lock.read_owned().await),
            false => Guard::Alone(lock.write_owned().await),
        };
        Held { locks: self, name: name.to_owned(), guard: Some(guard) }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        let mut locks = self.locks.locks.lock().unwrap_or_else(PoisonError::into_inner);
        // The map's is the last reference once no one holds or waits for the lock.
        if locks.get(&self.name).is_some_and(|lock| Arc::strong_count(lock) == 1) {
            locks.remove(&self.name);
        }
    }
}

#[cfg(test)]
mod tests {
    use futures_util::FutureExt;

    use super::NamedLocks;

    #[tokio::test]
    async fn a_lock_alone_waits_for_shared_holders_and_leaves_no_entry() {
        let locks = NamedLocks::default();
        let first = locks.lock("a", true).await;
        let second = locks.lock("a", true).await;
        let _other = locks.lock("b", false).await;
        let mut alone = Box::pin(locks.lock("a", false));
        assert!(alone.as_mut().now_or_never().is_none(), "shared holders keep it waiting");
        drop(first);
        assert!(alone.as_mut().now_or_never().is_none());
        drop(second);
        let held = alone.await;
        drop(held);
        assert_eq!(locks.locks.lock().unwrap().len(), 1, "only b's entry is left");
    }
}
