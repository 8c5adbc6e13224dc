//! Fuzz the decoding of collaborative-column updates received from clients: whatever the bytes,
//! decoding and merging must fail cleanly or succeed, within memory and stack.
//!
//! Run: `cd engine-kernel/fuzz && cargo +nightly fuzz run crdt_update -- -rss_limit_mb=256`
#![no_main]

use engine_kernel::{CrdtMap, CrdtText};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = engine_kernel::crdt::decode_update(data);
    let mut text = CrdtText::from_text("seed");
    let _ = text.merge(data);
    let _ = text.text();
    let mut map = CrdtMap::new();
    let _ = map.merge(data);
    let _ = map.to_json();
});
