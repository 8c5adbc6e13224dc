//! The notes app's shares are invitations (`invite(ListMember::accepted)`): a list shared with a
//! user reaches them once they accept it. A test whose share means the member to hold the list,
//! as every share did before invitations, follows it with [`accept`].

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::TestServer;

/// `user` accepts its invitation to list `list` on the server at `base` (`http://host:port`):
/// `accept_list` from a device of its own that pushes nothing else, so the test's devices keep
/// their mutation ids. A share pushed by a client in the background may not be there yet: a
/// refusal is tried again, from another fresh device, for up to 30 s.
pub(crate) async fn accept(base: &str, user: &str, list: &str) {
    let http = reqwest::Client::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let body = json!({"clientId": uuid::Uuid::new_v4(), "mutations": [{
            "mutationId": 1,
            "clientMutationId": uuid::Uuid::new_v4(),
            "name": "accept_list",
            "args": {"list_id": list},
        }]});
        let response = http
            .post(format!("{}/sync/push", base.trim_end_matches('/')))
            .bearer_auth(TestServer::token(user))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let result: Value = response.json().await.unwrap();
        let result = &result["results"][0];
        if result["status"] == "applied" {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "{user} could not accept list `{list}`: {result}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}
