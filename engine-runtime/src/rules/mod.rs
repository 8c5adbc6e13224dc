//! The sync rules at work in the store: which buckets a row is in and which an actor holds,
//! decided in SQL (`selection.rs`, the selection compiler; `held.rs`, the membership queries).
//! The same decided in Rust is the kernel's (`engine_kernel::rules::buckets`). Both produce the
//! same canonical bucket keys, and a property test holds the two to each other
//! (`selection/tests.rs`).

pub(crate) mod held;
pub(crate) mod selection;
