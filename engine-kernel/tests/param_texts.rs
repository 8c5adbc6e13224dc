//! The canonical text of a value as a bucket parameter or claim, as the TypeScript client must
//! compute it too: each case of `clients/typescript/packages/client/test/vectors/param-texts.json`
//! (a JSON input and its text) holds for [`param_text`], and the client is tested against the
//! same file.

use engine_kernel::rules::buckets::param_text;
use serde_json::Value;

const VECTORS: &str = "clients/typescript/packages/client/test/vectors/param-texts.json";

#[test]
fn param_text_gives_the_committed_texts() {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(VECTORS);
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("read the vectors")).expect("JSON");
    let cases = file["cases"].as_array().expect("cases");
    assert!(cases.len() >= 20);
    for case in cases {
        let json = case["json"].as_str().expect("json");
        let value: Value = serde_json::from_str(json).expect("a case's input is JSON");
        assert_eq!(param_text(&value).as_deref(), case["text"].as_str(), "{}: {json}", case["what"]);
    }
}
