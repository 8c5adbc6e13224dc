//! Hostile collaborative updates: arbitrary bytes read as instructions that build updates which
//! are well-formed yrs v1 encodings (they pass the kernel's structural check) but whose items
//! point where a real replica never would: origins and parents at items that are not types, at
//! items of other clients or of the future, clocks that overlap, delete sets over anything. Each
//! is merged into documents the way every store merges a column assignment
//! (`engine_kernel::crdt::merged_column`); the merge must answer `Ok` or a validation error,
//! never panic, hang or run out of memory.
//!
//! Shared by the fuzz target (`fuzz_targets/crdt_merge.rs`) and the kernel's test that replays
//! the corpus (`engine-kernel/tests/crdt_corpus.rs`).

use engine_kernel::{CrdtText, ErrorCode, SqlType};

/// Reads instructions off the input; past its end it reads zeros.
struct Input<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.bytes.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }

    fn below(&mut self, n: u8) -> u64 {
        u64::from(self.byte() % n)
    }

    fn done(&self) -> bool {
        self.at >= self.bytes.len()
    }
}

/// Writes the v1 encoding.
#[derive(Default)]
struct Encoder(Vec<u8>);

impl Encoder {
    fn var(&mut self, mut n: u64) {
        loop {
            let low = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                self.0.push(low);
                return;
            }
            self.0.push(low | 0x80);
        }
    }

    fn string(&mut self, s: &str) {
        self.var(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
    }

    fn id(&mut self, input: &mut Input<'_>) {
        // Few clients and small clocks, so that ids meet items that exist.
        self.var(input.below(4));
        self.var(input.below(16));
    }
}

const HAS_ORIGIN: u8 = 0b1000_0000;
const HAS_RIGHT_ORIGIN: u8 = 0b0100_0000;
const HAS_PARENT_SUB: u8 = 0b0010_0000;

/// One block: an item with some content and some way of saying where it goes.
fn block(input: &mut Input<'_>, out: &mut Encoder) {
    let content: u8 = match input.below(6) {
        0 => 4, // a string
        1 => 1, // deleted
        2 => 7, // a type
        3 => 8, // `Any` values
        4 => 6, // a format
        _ => 3, // binary
    };
    match input.below(8) {
        // Garbage-collected and skipped ranges.
        0 => {
            out.0.push(0);
            out.var(input.below(8) + 1);
            return;
        }
        1 => {
            out.0.push(10);
            out.var(input.below(8) + 1);
            return;
        }
        // After some item, before some item, or both: items that may be no neighbour at all.
        2 => {
            out.0.push(HAS_ORIGIN | content);
            out.id(input);
        }
        3 => {
            out.0.push(HAS_RIGHT_ORIGIN | content);
            out.id(input);
        }
        4 => {
            out.0.push(HAS_ORIGIN | HAS_RIGHT_ORIGIN | content);
            out.id(input);
            out.id(input);
        }
        // In a root type, as a list element or as a map entry.
        5 => {
            let sub = input.below(2) == 1;
            out.0.push(if sub { HAS_PARENT_SUB | content } else { content });
            out.var(1);
            out.string(["text", "map", "other"][input.below(3) as usize]);
            if sub {
                out.string(["k", "key", ""][input.below(3) as usize]);
            }
        }
        // Inside some item, as if it were a type: it may be a string or a deleted item.
        _ => {
            let sub = input.below(2) == 1;
            out.0.push(if sub { HAS_PARENT_SUB | content } else { content });
            out.var(0);
            out.id(input);
            if sub {
                out.string("k");
            }
        }
    }
    match content {
        4 => out.string(["a", "hé", "", "text"][input.below(4) as usize]),
        1 => out.var(input.below(8) + 1),
        7 => {
            let type_ref = [0u8, 1, 2, 3, 4, 5, 6, 9, 15][input.below(9) as usize];
            out.0.push(type_ref);
            if type_ref == 3 {
                out.string("p");
            }
        }
        8 => {
            let n = input.below(3);
            out.var(n);
            for _ in 0..n {
                // Integers, strings and an empty array.
                match input.below(3) {
                    0 => {
                        out.0.push(125);
                        out.var(input.below(100));
                    }
                    1 => {
                        out.0.push(119);
                        out.string("v");
                    }
                    _ => {
                        out.0.push(117);
                        out.var(0);
                    }
                }
            }
        }
        6 => {
            out.string("bold");
            out.string(["true", "null", "{}"][input.below(3) as usize]);
        }
        _ => {
            out.var(2);
            out.0.extend_from_slice(&[input.byte(), input.byte()]);
        }
    }
}

/// One update built from `input`.
fn update(input: &mut Input<'_>) -> Vec<u8> {
    let mut out = Encoder::default();
    let clients = input.below(3) + 1;
    out.var(clients);
    for _ in 0..clients {
        let blocks = input.below(6) + 1;
        out.var(blocks);
        out.var(input.below(4));
        out.var(input.below(16));
        for _ in 0..blocks {
            block(input, &mut out);
        }
    }
    let deleting = input.below(3);
    out.var(deleting);
    for _ in 0..deleting {
        out.var(input.below(4));
        let ranges = input.below(3) + 1;
        out.var(ranges);
        for _ in 0..ranges {
            out.var(input.below(16));
            out.var(input.below(8) + 1);
        }
    }
    out.0
}

/// The updates `data` describes, one after the other, until it is used up (at most 8).
pub(crate) fn updates(data: &[u8]) -> Vec<Vec<u8>> {
    let mut input = Input { bytes: data, at: 0 };
    let mut updates = vec![update(&mut input)];
    while !input.done() && updates.len() < 8 {
        updates.push(update(&mut input));
    }
    updates
}

/// Merge every update `data` describes into documents, as column assignments and as replica
/// merges; panics only when a merge fails otherwise than by refusing the update.
pub(crate) fn merge_all(data: &[u8]) {
    use base64::Engine as _;
    let base64 = |bytes: &[u8]| serde_json::Value::String(base64::engine::general_purpose::STANDARD.encode(bytes));
    for sql_type in [SqlType::CrdtText, SqlType::CrdtMap] {
        let mut stored: Option<serde_json::Value> = None;
        for update in updates(data) {
            assert_eq!(engine_kernel::crdt::check_update(&update), Ok(()), "the generator writes well-formed updates");
            match engine_kernel::crdt::merged_column(sql_type, stored.as_ref(), &base64(&update)) {
                Ok(merged) => stored = Some(merged),
                Err(err) => assert_eq!(err.code(), ErrorCode::ValidationFailed, "{err}"),
            }
        }
    }
    // A document with content of its own, which the updates' ids may meet.
    let mut stored = engine_kernel::ColumnType::to_json(&CrdtText::from_text("seed"));
    for update in updates(data) {
        match engine_kernel::crdt::merged_column(SqlType::CrdtText, Some(&stored), &base64(&update)) {
            Ok(merged) => stored = merged,
            Err(err) => assert_eq!(err.code(), ErrorCode::ValidationFailed, "{err}"),
        }
    }
}
