//! Blob keys as the TypeScript client must compute them: the vectors committed in
//! `clients/typescript/packages/client/test/vectors/blob-keys.json` are the keys
//! [`BlobKey::for_bytes`] gives, and the client's `keyForBlob` is tested against the same file,
//! so the two compute the same key for the same bytes. `UPDATE_SNAPSHOTS=1` writes the file.

use std::path::PathBuf;

use engine_kernel::BlobKey;
use serde_json::{Value, json};

const VECTORS: &str = "clients/typescript/packages/client/test/vectors/blob-keys.json";

/// Bytes `0, 1, …, 255, 0, 1, …` up to `length`: the input of a vector too long to commit.
fn counting(length: usize) -> Vec<u8> {
    (0..length).map(|i| (i % 256) as u8).collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn vectors() -> String {
    let given: [(&str, Vec<u8>); 5] = [
        ("empty", Vec::new()),
        ("the text `hello`", b"hello".to_vec()),
        ("one zero byte", vec![0]),
        ("every byte value once", counting(256)),
        ("UTF-8 text beyond ASCII", "Grüße, 世界 🌍".as_bytes().to_vec()),
    ];
    let mut entries: Vec<Value> = given
        .iter()
        .map(|(what, bytes)| json!({"what": what, "hex": hex(bytes), "key": BlobKey::for_bytes(bytes)}))
        .collect();
    // Past SHA-256's 64-byte block and a power of two, so padding across blocks is covered.
    for length in [55, 56, 64, 65, 1 << 20, (1 << 20) + 1] {
        entries.push(json!({
            "what": format!("{length} counting bytes"),
            "counting": length,
            "key": BlobKey::for_bytes(&counting(length)),
        }));
    }
    serde_json::to_string_pretty(&json!({
        "about": "Blob keys computed by engine_kernel::BlobKey::for_bytes (engine-kernel/tests/blob_keys.rs). \
                  An input is `hex`, or `counting`: that many bytes 0, 1, …, 255, 0, 1, …",
        "vectors": entries,
    }))
    .expect("the vectors serialize")
        + "\n"
}

#[test]
fn the_committed_vectors_are_the_keys_the_kernel_computes() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(VECTORS);
    let fresh = vectors();
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(path.parent().expect("a directory")).expect("create the vectors' directory");
        std::fs::write(&path, &fresh).expect("write the vectors");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(fresh == committed, "{VECTORS} is not what the kernel computes: run this test with UPDATE_SNAPSHOTS=1");
}
