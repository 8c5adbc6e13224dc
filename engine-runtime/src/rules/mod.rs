//! The sync rules at work: which buckets a row is in and which an actor holds, decided in Rust
//! (`buckets.rs`) and in SQL (`selection.rs`, the selection compiler; `held.rs`, the membership
//! queries). Both produce the same canonical bucket keys, and a property test holds the two
//! to each other (`selection/tests.rs`).

pub(crate) mod buckets;
pub(crate) mod held;
pub(crate) mod selection;

pub(crate) use buckets::{RuleIndex, param_text};
