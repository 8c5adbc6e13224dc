//! The server's hybrid logical clock (`docs/design.md` §7), shared by every flow of a store.
//! Its lock is taken here only, for one reading at a time.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use engine_kernel::hlc::wall_clock_ms;
use engine_kernel::{Error as KernelError, Hlc, HlcClock};

/// How far ahead of the server's clock a client's clock may read before it is pulled back.
pub const MAX_CLOCK_LEAD_MS: u64 = 60_000;

/// The server's clock: a reading ticks past every reading it has observed.
#[derive(Debug, Clone)]
pub(crate) struct Clock(Arc<Mutex<HlcClock>>);

impl Clock {
    pub(crate) fn new() -> Self {
        Clock(Arc::new(Mutex::new(HlcClock::new("server"))))
    }

    fn lock(&self) -> MutexGuard<'_, HlcClock> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A reading now, after `seen` when given: a reading that orders after what the caller
    /// has met, whichever instance stamped it.
    pub(crate) fn tick_after(&self, seen: Option<&Hlc>) -> Hlc {
        let mut clock = self.lock();
        if let Some(seen) = seen {
            clock.observe(seen);
        }
        clock.tick(wall_clock_ms())
    }

    /// A mutation's clock: the client's reading `sent`, pulled back to at most
    /// [`MAX_CLOCK_LEAD_MS`] ahead of the wall clock and observed, so that the server's own
    /// readings (and those of the clients that pull from it) order after it; or the server's own
    /// reading when the client sent none.
    pub(crate) fn mutation_reading(&self, sent: Option<&str>) -> Result<Hlc, KernelError> {
        let now = wall_clock_ms();
        let mut clock = self.lock();
        match sent {
            Some(text) => {
                let reading = text.parse::<Hlc>()?.clamped(now + MAX_CLOCK_LEAD_MS);
                clock.observe(&reading);
                Ok(reading)
            }
            None => Ok(clock.tick(now)),
        }
    }
}
