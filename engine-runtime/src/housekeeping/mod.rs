//! What a store does beside pulls and pushes: collecting what is kept only for a while
//! (`retention.rs`) and counting what it holds for operators (`stats.rs`); `sqlite.rs`, both on
//! SQLite.

mod retention;
pub(crate) mod sqlite;
mod stats;

pub(crate) use retention::collect;
pub use retention::{COLLECTION_INTERVAL, Collected, Retention};
pub use stats::{Gauges, HorizonBlocker, Stats};
pub(crate) use stats::{gauges, horizon_blocker, stats};
