//! The fuzz corpus of `crdt_merge` (`engine-kernel/fuzz`), replayed as a regular test: every
//! hostile update it describes merges into a document or is refused as a validation error, and
//! none panics. A few thousand more inputs from a fixed pseudo-random stream go with it, so the
//! test covers more than the committed files.

#[path = "../fuzz/hostile.rs"]
mod hostile;

use std::path::PathBuf;

#[test]
fn the_fuzz_corpus_merges_or_is_refused() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/crdt_merge");
    let mut inputs = 0;
    for entry in std::fs::read_dir(&dir).expect("the corpus is committed") {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        hostile::merge_all(&data);
        inputs += 1;
    }
    assert!(inputs >= 32, "{inputs} inputs in {}", dir.display());
}

#[test]
fn pseudo_random_instructions_merge_or_are_refused() {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..3_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let len = 8 + (state % 120) as usize;
        let data: Vec<u8> = (0..len).map(|i| (state.rotate_left(i as u32 * 7) >> 3) as u8).collect();
        hostile::merge_all(&data);
    }
}

#[test]
fn updates_pointing_at_items_that_are_not_types_are_refused_or_merged() {
    // A string item in the root text, then items whose parent is that string item, whose origin
    // is a deleted item, and an item of a client that does not exist yet.
    let crafted: [&[u8]; 3] =
        [&[0, 6, 0, 0, 0, 6, 0, 0, 0], &[0, 2, 1, 0, 1, 2, 3, 0, 7], &[5, 5, 5, 5, 0, 6, 6, 6, 6]];
    for data in crafted {
        hostile::merge_all(data);
    }
}
