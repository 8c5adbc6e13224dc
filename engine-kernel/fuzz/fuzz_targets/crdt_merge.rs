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

// The merge catches a panic inside yrs and answers it as a refusal; libFuzzer's panic hook would
// abort at the panic itself, before the merge can catch it, so this hook only prints it. A panic
// that escapes the merge, or one while unwinding, still aborts: that is a finding, and so is
// anything the address sanitizer reports.
fuzz_target!(init: std::panic::set_hook(Box::new(|info| eprintln!("panic (the merge may catch it): {info}"))), |data: &[u8]| hostile::merge_all(data));
