//! A socket's queue of events from the hub: bounded, one writer (the hub, under its index's lock)
//! and one reader (the socket's task), which it wakes.
//!
//! A ping to 10,000 sockets is 10,000 pushes, each the wake of a task whose memory is cold, so a
//! push touches little: a lock nobody else holds, the queue's first slot (beside the lock; the
//! rest are for a socket that lags) and the reader's waker. tokio's bounded channel spent a
//! semaphore permit, a slot of its linked list and a waker registration on each, about 9% of
//! the server's time at 10,000 sockets.
//!
//! The reader's task waits on more than its queue (its WebSocket, timers): [`Inbox::others`]
//! is the waker it polls those with, which notes that one of them woke the task, so a task woken
//! by its queue alone polls none of them ([`Inbox::take_others`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;

/// The events: the oldest in `first` when there is one, the rest after it in `rest`.
struct Slots<T> {
    first: Option<T>,
    rest: VecDeque<T>,
}

impl<T> Slots<T> {
    fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.rest.len()
    }

    fn push(&mut self, event: T) {
        if self.first.is_none() && self.rest.is_empty() {
            self.first = Some(event);
        } else {
            self.rest.push_back(event);
        }
    }

    fn pop(&mut self) -> Option<T> {
        self.first.take().or_else(|| self.rest.pop_front())
    }
}

struct Shared<T> {
    events: Mutex<Slots<T>>,
    /// The reader's task, while it waits.
    reader: AtomicWaker,
    /// Set when something other than the queue woke the reader ([`Inbox::others`]).
    others: AtomicBool,
    /// Set when the [`Outbox`] is dropped: nothing more comes.
    closed: AtomicBool,
}

impl<T> Shared<T> {
    fn events(&self) -> MutexGuard<'_, Slots<T>> {
        self.events.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<T: Send + 'static> Wake for Shared<T> {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.others.store(true, Ordering::Release);
        self.reader.wake();
    }
}

/// The hub's end of a socket's queue.
pub(crate) struct Outbox<T> {
    shared: Arc<Shared<T>>,
    capacity: usize,
}

/// The socket's end of its queue.
pub(crate) struct Inbox<T>(Arc<Shared<T>>);

/// A queue holding at most `capacity` events.
pub(crate) fn queue<T>(capacity: usize) -> (Outbox<T>, Inbox<T>) {
    let shared = Arc::new(Shared {
        events: Mutex::new(Slots { first: None, rest: VecDeque::new() }),
        reader: AtomicWaker::new(),
        // The others are polled once before anything has woken the task.
        others: AtomicBool::new(true),
        closed: AtomicBool::new(false),
    });
    (Outbox { shared: Arc::clone(&shared), capacity }, Inbox(shared))
}

impl<T> Outbox<T> {
    /// Queue `event` and wake the reader; `false`, and nothing queued, when the queue is full.
    pub(crate) fn push(&self, event: T) -> bool {
        {
            let mut events = self.shared.events();
            if events.len() >= self.capacity {
                return false;
            }
            events.push(event);
        }
        self.shared.reader.wake();
        true
    }
}

impl<T> Drop for Outbox<T> {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
        self.shared.reader.wake();
    }
}

impl<T: Send + 'static> Inbox<T> {
    /// The waker to poll the reader's other sources with: it wakes the reader's task and notes
    /// that something other than the queue woke it.
    pub(crate) fn others(&self) -> Waker {
        Waker::from(Arc::clone(&self.0))
    }
}

impl<T> Inbox<T> {
    /// Wake the task of `cx` at the next push, close or wake through [`Inbox::others`]. Once per
    /// poll of the task, before it looks at anything.
    pub(crate) fn register(&self, cx: &Context<'_>) {
        self.0.reader.register(cx.waker());
    }

    /// Whether something other than the queue woke the reader since it last asked; the note is
    /// cleared.
    pub(crate) fn take_others(&self) -> bool {
        self.0.others.swap(false, Ordering::AcqRel)
    }

    /// Note that the reader's other sources are to be polled again (one of them was ready, and so
    /// registered no wake).
    pub(crate) fn keep_others(&self) {
        self.0.others.store(true, Ordering::Release);
    }

    /// The next event, if one is queued.
    pub(crate) fn try_recv(&self) -> Option<T> {
        self.0.events().pop()
    }

    /// The next event; `None` once the queue is empty and the hub has dropped its end. The task
    /// is woken as [`Inbox::register`] says, which it has called already.
    pub(crate) fn poll_recv(&self) -> Poll<Option<T>> {
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
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Poll, Wake, Waker};

    use super::queue;

    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A waker that counts its wakes.
    fn counted() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count::default());
        (Arc::clone(&count), Waker::from(count))
    }

    /// The queue keeps its order, holds its capacity and refuses more; a waiting reader is woken
    /// by a push and by the hub's end being dropped, after which it still reads what was queued,
    /// then the end.
    #[test]
    fn a_full_queue_refuses_and_a_waiting_reader_is_woken() {
        let (outbox, inbox) = queue(3);
        let (count, waker) = counted();
        let cx = Context::from_waker(&waker);
        inbox.register(&cx);
        assert!(inbox.poll_recv().is_pending());
        assert!(outbox.push(1) && outbox.push(2));
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "woken once: the waker is taken");
        assert_eq!(inbox.poll_recv(), Poll::Ready(Some(1)));
        assert!(outbox.push(3) && outbox.push(4));
        assert!(!outbox.push(5), "past the capacity");
        assert_eq!(inbox.poll_recv(), Poll::Ready(Some(2)));
        inbox.register(&cx);
        drop(outbox);
        assert_eq!(count.0.load(Ordering::SeqCst), 2, "woken by the close");
        assert_eq!(inbox.poll_recv(), Poll::Ready(Some(3)));
        assert_eq!(inbox.poll_recv(), Poll::Ready(Some(4)));
        assert_eq!(inbox.poll_recv(), Poll::Ready(None));
    }

    /// A wake through `others` wakes the reader and is noted once; a push is not noted.
    #[test]
    fn a_wake_by_the_others_is_told_from_one_by_the_queue() {
        let (outbox, inbox) = queue(4);
        let (count, waker) = counted();
        let cx = Context::from_waker(&waker);
        assert!(inbox.take_others(), "polled once at the start");
        inbox.register(&cx);
        assert!(outbox.push(1));
        assert!(!inbox.take_others(), "a push");
        inbox.register(&cx);
        inbox.others().wake_by_ref();
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
        assert!(inbox.take_others() && !inbox.take_others());
    }
}
