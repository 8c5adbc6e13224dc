//! Integration tests live in `integration/`. This library holds only the README, so that
//! `cargo test` compiles its Rust snippets (and runs those that run alone) as doctests.

/// The README: its Rust snippets are doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct Readme;
