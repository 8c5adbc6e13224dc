//! Exponential backoff with full jitter: the `n`-th wait is uniform in `[0, min(max, base·2ⁿ)]`,
//! so many clients that failed together do not come back together.

use std::time::Duration;

/// Backoff settings and state.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    base: Duration,
    max: Duration,
    attempt: u32,
    rng: u64,
}

impl Backoff {
    pub(crate) fn new(base: Duration, max: Duration) -> Self {
        let seed = uuid::Uuid::new_v4().as_u64_pair().0 | 1;
        Backoff { base, max, attempt: 0, rng: seed }
    }

    /// Start over after a success.
    pub(crate) fn reset(&mut self) {
        self.attempt = 0;
    }

    /// The next wait.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let ceiling = self.base.saturating_mul(1u32 << self.attempt.min(20)).min(self.max);
        self.attempt = self.attempt.saturating_add(1);
        // xorshift64*
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let unit = (self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64;
        ceiling.mul_f64(unit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_grow_to_the_ceiling_and_stay_jittered() {
        let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
        let waits: Vec<Duration> = (0..12).map(|_| backoff.next_delay()).collect();
        for (n, wait) in waits.iter().enumerate() {
            let ceiling = Duration::from_millis(500).saturating_mul(1 << n).min(Duration::from_secs(30));
            assert!(*wait <= ceiling, "wait {n} is {wait:?}, over {ceiling:?}");
        }
        assert!(waits[6..].iter().any(|w| *w > Duration::from_secs(1)), "waits grow: {waits:?}");
        let distinct: std::collections::BTreeSet<_> = waits.iter().collect();
        assert!(distinct.len() > 6, "jittered: {waits:?}");
        backoff.reset();
        assert!(backoff.next_delay() <= Duration::from_millis(500));
    }
}
