//! The server's hybrid logical clock (`docs/design.md` §7), shared by every flow of a store.
//! Its lock is taken here only, for one reading at a time.
//!
//! Only the server's own wall clock moves it. A client's reading is pulled back to at most
//! [`MAX_CLOCK_LEAD_MS`] past the clock's current reading and never observed, and neither are
//! the stamps a pull delivers or a server-stamped write meets: a reading after them is made
//! from them alone. A client whose clock runs ahead (or lies) therefore cannot carry the
//! server's readings, nor those of the clients that pull from it, ahead of the wall clock.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use engine_kernel::hlc::wall_clock_ms;
use engine_kernel::{Error as KernelError, Hlc, HlcClock};

/// How far past the server clock's current reading a client's reading may be before it is
/// pulled back, in milliseconds: about a second, more than clocks kept by NTP disagree.
/// Instances of one deployment must keep their wall clocks this close too: a client that pulled
/// from a faster instance writes through a slower one with readings pulled back below what it
/// pulled.
pub const MAX_CLOCK_LEAD_MS: u64 = 1_000;

/// The server's clock: its readings never go back, and only its wall clock moves it.
#[derive(Debug, Clone)]
pub(crate) struct Clock(Arc<Mutex<HlcClock>>);

impl Clock {
    pub(crate) fn new() -> Self {
        Clock(Arc::new(Mutex::new(HlcClock::new("server"))))
    }

    fn lock(&self) -> MutexGuard<'_, HlcClock> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A reading now, ordered after `seen` when given: a reading that orders after what the
    /// caller has met, whichever instance or client stamped it. `seen` is not observed: a reading
    /// past it is made for this caller only, so a stamp ahead of the wall clock (a client's,
    /// pulled back to the lead) moves no later reading of the clock.
    pub(crate) fn tick_after(&self, seen: Option<&Hlc>) -> Hlc {
        let reading = self.lock().tick(wall_clock_ms());
        match seen {
            Some(seen) if *seen >= reading => {
                let mut past = HlcClock::new("server");
                past.observe(seen);
                past.tick(0)
            }
            _ => reading,
        }
    }

    /// A mutation's clock: the client's reading `sent`, pulled back to at most
    /// [`MAX_CLOCK_LEAD_MS`] past the clock's current reading and not observed; or the server's
    /// own reading when the client sent none.
    pub(crate) fn mutation_reading(&self, sent: Option<&str>) -> Result<Hlc, KernelError> {
        let sent = sent.map(str::parse::<Hlc>).transpose()?;
        let now = self.lock().tick(wall_clock_ms());
        Ok(match sent {
            Some(reading) => reading.clamped(now.physical_ms() + MAX_CLOCK_LEAD_MS),
            None => now,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_far_ahead_is_pulled_back_and_moves_no_later_reading() {
        let clock = Clock::new();
        let far = clock.mutation_reading(Some("9999999999999-ffff-mallory")).unwrap();
        let own = clock.tick_after(None);
        assert!(far.physical_ms() <= own.physical_ms() + MAX_CLOCK_LEAD_MS, "{far} is within the lead of {own}");
        assert_eq!((far.counter(), far.node()), (u16::MAX, "mallory"));
        // A reading after the stamp orders after it; the clock itself stays on its wall clock.
        let after = clock.tick_after(Some(&far));
        assert!(after > far && after.node() == "server", "{after}");
        let later = clock.tick_after(None);
        assert!(later.physical_ms() <= wall_clock_ms(), "{later} is not ahead of the wall clock");
        // Pulled back to the clock's reading, not to the last lead: no lead piles on another.
        let again = clock.mutation_reading(Some("9999999999999-ffff-mallory")).unwrap();
        assert!(again.physical_ms() <= wall_clock_ms() + MAX_CLOCK_LEAD_MS, "{again}");
    }

    #[test]
    fn an_honest_reading_is_kept() {
        let clock = Clock::new();
        let honest = Hlc::new(wall_clock_ms(), 3, "alice").unwrap();
        assert_eq!(clock.mutation_reading(Some(&honest.to_string())).unwrap(), honest);
        assert!(clock.mutation_reading(Some("yesterday")).is_err());
        assert_eq!(clock.mutation_reading(None).unwrap().node(), "server");
    }
}
