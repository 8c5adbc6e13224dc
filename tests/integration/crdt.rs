//! Collaborative columns over real HTTP: an update that is a well-formed encoding but breaks the
//! CRDT library, or that would make a document past its bound, is rejected `validation_failed`,
//! recorded, and the mutations after it go on.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{TestDb, TestServer};

const CLIENT: &str = "0192f0e0-0000-7000-8000-0000000000cc";

fn mutation(id: u64, name: &str, args: Value) -> Value {
    json!({"mutationId": id, "clientMutationId": format!("0192f0e0-0000-7000-8000-{id:012x}"), "name": name, "args": args})
}

async fn push(server: &TestServer, mutations: &[Value]) -> Vec<Value> {
    let body = json!({"clientId": CLIENT, "mutations": mutations});
    let response = server.post("/sync/push", Some("alice"), body.to_string()).await;
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = response.json().await.unwrap();
    body["results"].as_array().unwrap().clone()
}

#[tokio::test]
async fn an_update_that_breaks_the_crdt_library_is_rejected_and_the_next_goes_on() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let setup = push(
        &server,
        &[
            mutation(1, "create_list", json!({"id": "l1", "title": "t"})),
            mutation(2, "add_note", json!({"id": "n1", "list_id": "l1", "title": "t"})),
        ],
    )
    .await;
    assert!(setup.iter().all(|r| r["status"] == "applied"), "{setup:?}");

    // Items whose parent and origins point at items that are not types: yrs panics on it.
    let breaking = "AwQBDwcAAAsGIQAABwFrBQQBBHRleHQEdGV4dAAEBQACCgQAAgACAAYABQEAAAAHAQADDAEABwAI";
    // A document past the merge's bound of 1 MiB, in an update the body limit still admits.
    let mut big = engine::CrdtText::new();
    let huge = big.insert(0, &"x".repeat(700 * 1024)).unwrap();
    let huge = engine::crdt::update_to_base64(&huge);
    let edits = [
        mutation(3, "edit_note_body", json!({"id": "n1", "update": breaking})),
        mutation(4, "edit_note_body", json!({"id": "n1", "update": huge})),
        mutation(5, "edit_note_body", json!({"id": "n1", "update": huge})),
        mutation(6, "update_note", json!({"id": "n1", "title": "still editable"})),
    ];
    let mut results = Vec::new();
    for edit in &edits {
        results.extend(push(&server, std::slice::from_ref(edit)).await);
    }
    let shown: Vec<String> = results.iter().map(|r| r.to_string().chars().take(300).collect()).collect();
    assert_eq!(results[0]["status"], "rejected", "{shown:?}");
    assert_eq!(results[0]["error"]["code"], "validation_failed", "{shown:?}");
    assert_eq!(results[1]["status"], "applied", "a document within the bound merges: {shown:?}");
    assert_eq!(results[2]["status"], "rejected", "{shown:?}");
    assert_eq!(results[2]["error"]["code"], "validation_failed", "{shown:?}");
    assert!(results[2]["error"]["detail"].as_str().unwrap().contains("at most"), "{shown:?}");
    assert_eq!(results[3]["status"], "applied", "{shown:?}");
    let again = push(&server, &edits[..1]).await;
    assert_eq!(again[0], results[0], "the rejection is replayed the same");
}
