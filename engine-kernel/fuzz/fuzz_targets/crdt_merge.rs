//! Fuzz the merge of collaborative-column updates that are well-formed encodings but hostile in
//! what their items point at (`../hostile.rs`): every merge answers, refusing what yrs cannot
//! apply, and never panics.
//!
//! Run: `cd engine-kernel/fuzz && cargo +nightly fuzz run crdt_merge corpus/crdt_merge -- -rss_limit_mb=256`.
//! The corpus in `corpus/crdt_merge` is replayed by `cargo test -p engine-kernel`.
#![no_main]

#[path = "../hostile.rs"]
mod hostile;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hostile::merge_all(data));
