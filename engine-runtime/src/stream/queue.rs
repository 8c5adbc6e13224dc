//! A socket's queue of events from the hub: bounded, one writer (the hub, under its index's lock)
//! and one reader (the socket's task).
//!
//! A ping to 10,000 sockets is 10,000 pushes, so a push is kept to a lock nobody else holds, a
//! `VecDeque` and the wake of the reader's task (which costs nothing when the task is awake
//! already): tokio's bounded channel spent a semaphore permit, a slot of its linked list and a
//! waker registration on each, about a tenth of the server's time at 10,000 sockets.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use futures_util::task::AtomicWaker;

use super::hub::Event;

struct Shared {
    events: Mutex<VecDeque<Event>>,
    /// The reader's task, while it waits.
    reader: AtomicWaker,
    /// Set when the [`Outbox`] is dropped: nothing more comes.
    closed: AtomicBool,
}

impl Shared {
    fn events(&self) -> MutexGuard<'_, VecDeque<Event>> {
        self.events.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The hub's end of a socket's queue.
pub(crate) struct Outbox {
    shared: Arc<Shared>,
    capacity: usize,
}

/// The socket's end of its queue.
pub(crate) struct Inbox(Arc<Shared>);

/// A queue holding at most `capacity` events.
pub(crate) fn queue(capacity: usize) -> (Outbox, Inbox) {
    let shared =
        Arc::new(Shared { events: Mutex::default(), reader: AtomicWaker::new(), closed: AtomicBool::new(false) });
    (Outbox { shared: Arc::clone(&shared), capacity }, Inbox(shared))
}

impl Outbox {
    /// Queue `event` and wake the reader; `false`, and nothing queued, when the queue is full.
    pub(crate) fn push(&self, event: Event) -> bool {
        {
            let mut events = self.shared.events();
            if events.len() >= self.capacity {
                return false;
            }
            events.push_back(event);
        }
        self.shared.reader.wake();
        true
    }
}

impl Drop for Outbox {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
        self.shared.reader.wake();
    }
}

impl Inbox {
    /// The next event, if one is queued.
    pub(crate) fn try_recv(&self) -> Option<Event> {
        self.0.events().pop_front()
    }

    /// The next event; `None` once the queue is empty and the hub has dropped its end.
    pub(crate) fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        if let Some(event) = self.try_recv() {
            return Poll::Ready(Some(event));
        }
        self.0.reader.register(cx.waker());
        // Pushed between the look and the registration: its wake found no waker.
        if let Some(event) = self.try_recv() {
            return Poll::Ready(Some(event));
        }
        if self.0.closed.load(Ordering::Acquire) {
            // Pushed before the close, after the look above.
            return Poll::Ready(self.try_recv());
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake, Waker};

    use super::queue;
    use crate::stream::hub::Event;

    #[derive(Default)]
    struct Count(std::sync::atomic::AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// The queue holds its capacity and refuses more; a waiting reader is woken by a push and by
    /// the hub's end being dropped, after which it still reads what was queued, then the end.
    #[test]
    fn a_full_queue_refuses_and_a_waiting_reader_is_woken() {
        let (outbox, inbox) = queue(2);
        let count = Arc::new(Count::default());
        let waker = Waker::from(Arc::clone(&count));
        let mut cx = Context::from_waker(&waker);
        assert!(inbox.poll_recv(&mut cx).is_pending());
        assert!(outbox.push(Event::Wake) && outbox.push(Event::Wake));
        assert!(!outbox.push(Event::Wake), "past the capacity");
        assert_eq!(count.0.load(std::sync::atomic::Ordering::SeqCst), 1, "woken once: the waker is taken");
        assert!(matches!(inbox.poll_recv(&mut cx), Poll::Ready(Some(Event::Wake))));
        drop(outbox);
        assert!(matches!(inbox.poll_recv(&mut cx), Poll::Ready(Some(Event::Wake))));
        assert!(matches!(inbox.poll_recv(&mut cx), Poll::Ready(None)));
    }
}
