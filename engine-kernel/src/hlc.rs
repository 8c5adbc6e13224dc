//! Hybrid logical clocks: the order of `field`-merged writes.
//!
//! Wire form (`docs/protocol.md#hybrid-logical-clock`): `<physical ms since the Unix epoch,
//! 13 digits>-<logical counter, 4 hex digits>-<node id>`, e.g. `1763700000000-0001-3f2a…`. The
//! byte order of the string is the clock order, so stores compare HLCs as plain text.

use std::fmt;
use std::str::FromStr;

use crate::error::Error;

/// One hybrid-logical-clock reading.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hlc {
    physical_ms: u64,
    counter: u16,
    node: String,
}

/// The largest physical time the 13-digit form can carry (the year 2286).
const MAX_PHYSICAL_MS: u64 = 9_999_999_999_999;

impl Hlc {
    /// The reading `physical_ms`, `counter` on `node`.
    ///
    /// # Errors
    /// If `physical_ms` needs more than 13 digits or `node` is empty or not made of ASCII
    /// letters, digits, `-` and `_`.
    pub fn new(physical_ms: u64, counter: u16, node: impl Into<String>) -> Result<Self, Error> {
        let node = node.into();
        if physical_ms > MAX_PHYSICAL_MS {
            return Err(Error::validation("hlc: physical time needs more than 13 digits"));
        }
        if node.is_empty()
            || node.len() > 64
            || !node.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(Error::validation("hlc: the node id is 1 to 64 ASCII letters, digits, `-` or `_`"));
        }
        Ok(Hlc { physical_ms, counter, node })
    }

    /// Milliseconds since the Unix epoch.
    pub fn physical_ms(&self) -> u64 {
        self.physical_ms
    }

    /// The logical counter within one millisecond.
    pub fn counter(&self) -> u16 {
        self.counter
    }

    /// The node (client or server) that read the clock.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// This reading, held to at most `bound_ms`: a clock far ahead of the server's is pulled back
    /// instead of being refused, so a fast clock never loses a write nor wins forever.
    #[must_use]
    pub fn clamped(self, bound_ms: u64) -> Self {
        if self.physical_ms <= bound_ms {
            self
        } else {
            Hlc { physical_ms: bound_ms, counter: u16::MAX, node: self.node }
        }
    }
}

impl fmt::Display for Hlc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:013}-{:04x}-{}", self.physical_ms, self.counter, self.node)
    }
}

impl FromStr for Hlc {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = || Error::validation(format!("hlc {s:?} is not `<13-digit ms>-<4 hex digits>-<node id>`"));
        let (physical, rest) = s.split_at_checked(13).ok_or_else(bad)?;
        let rest = rest.strip_prefix('-').ok_or_else(bad)?;
        let (counter, rest) = rest.split_at_checked(4).ok_or_else(bad)?;
        let node = rest.strip_prefix('-').ok_or_else(bad)?;
        if !physical.bytes().all(|b| b.is_ascii_digit())
            || !counter.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            return Err(bad());
        }
        let physical_ms = physical.parse().map_err(|_| bad())?;
        let counter = u16::from_str_radix(counter, 16).map_err(|_| bad())?;
        Hlc::new(physical_ms, counter, node)
    }
}

impl serde::Serialize for Hlc {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Hlc {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for Hlc {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Hlc".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^[0-9]{13}-[0-9a-f]{4}-[A-Za-z0-9_-]{1,64}$",
            "description": "hybrid logical clock: <physical ms, 13 digits>-<counter, 4 hex digits>-<node id>; byte order is clock order"
        })
    }
}

/// A node's clock: readings never go backwards and stay ahead of every reading observed.
#[derive(Debug, Clone)]
pub struct HlcClock {
    node: String,
    last_ms: u64,
    counter: u16,
}

impl HlcClock {
    /// A clock for `node`.
    pub fn new(node: impl Into<String>) -> Self {
        HlcClock { node: node.into(), last_ms: 0, counter: 0 }
    }

    /// The next reading at wall time `now_ms`.
    pub fn tick(&mut self, now_ms: u64) -> Hlc {
        if now_ms > self.last_ms {
            self.last_ms = now_ms;
            self.counter = 0;
        } else {
            self.bump();
        }
        self.reading()
    }

    /// The next reading at the current wall time.
    pub fn now(&mut self) -> Hlc {
        self.tick(wall_clock_ms())
    }

    /// Take a remote reading into account so the next local reading orders after it.
    pub fn observe(&mut self, remote: &Hlc) {
        if remote.physical_ms > self.last_ms {
            self.last_ms = remote.physical_ms;
            self.counter = remote.counter;
        } else if remote.physical_ms == self.last_ms && remote.counter > self.counter {
            self.counter = remote.counter;
        }
    }

    fn bump(&mut self) {
        if self.counter == u16::MAX {
            self.last_ms += 1;
            self.counter = 0;
        } else {
            self.counter += 1;
        }
    }

    fn reading(&self) -> Hlc {
        Hlc { physical_ms: self.last_ms.min(MAX_PHYSICAL_MS), counter: self.counter, node: self.node.clone() }
    }
}

/// Milliseconds since the Unix epoch by the system clock.
pub fn wall_clock_ms() -> u64 {
    let now = chrono::Utc::now().timestamp_millis();
    u64::try_from(now).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_orders_like_its_text() {
        let a: Hlc = "1763700000000-0001-3f2a-node".parse().unwrap();
        assert_eq!(a.to_string(), "1763700000000-0001-3f2a-node");
        let b = Hlc::new(1_763_700_000_000, 0x10, "a").unwrap();
        let c = Hlc::new(1_763_700_000_001, 0, "a").unwrap();
        assert!(a < b && b < c);
        assert!(a.to_string() < b.to_string() && b.to_string() < c.to_string());
    }

    #[test]
    fn rejects_malformed_text() {
        for bad in [
            "",
            "1763700000000-0001",
            "1763700000000-0001-",
            "176370000000-0001-n",
            "1763700000000-00g1-n",
            "1763700000000-0A01-n",
            "1763700000000_0001-n",
            "1763700000000-0001-n n",
            "+763700000000-0001-n",
        ] {
            assert!(bad.parse::<Hlc>().is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn clock_is_monotonic_and_follows_remote_readings() {
        let mut clock = HlcClock::new("n");
        let first = clock.tick(100);
        let second = clock.tick(90);
        assert!(second > first, "a wall clock going back must not go back");
        let remote = Hlc::new(500, 7, "m").unwrap();
        clock.observe(&remote);
        let third = clock.tick(200);
        assert_eq!((third.physical_ms(), third.counter()), (500, 8));
    }

    #[test]
    fn clamping_pulls_a_fast_clock_back_to_the_bound() {
        let fast = Hlc::new(9_000_000_000_000, 3, "n").unwrap();
        let clamped = fast.clamped(1_000);
        assert_eq!((clamped.physical_ms(), clamped.counter()), (1_000, u16::MAX));
        let slow = Hlc::new(10, 3, "n").unwrap();
        assert_eq!(slow.clone().clamped(1_000), slow);
    }
}
