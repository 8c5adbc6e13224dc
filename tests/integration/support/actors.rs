//! Actors of a test app over real HTTP: each user with one device, pushing mutations one at a
//! time and pulling everything from scratch, as the authorization attacks need.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{TestDb, TestServer};

/// The one device of `user`: its pushes, and its pulls, which therefore read its own writes.
pub(crate) fn device(user: &str) -> (u64, String) {
    let tag = user.bytes().fold(0_u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b))) & 0xffff_ffff_ffff;
    (tag, format!("0192f0e0-0000-7000-8000-{tag:012x}"))
}

/// Push one mutation as `user` (its id is `id`, its client the user's own); its result.
pub(crate) async fn push(server: &TestServer, user: &str, id: u64, name: &str, args: Value) -> Value {
    let (tag, client) = device(user);
    let body = json!({"clientId": client, "mutations": [{
        "mutationId": id,
        "clientMutationId": format!("0192f0e1-{id:04x}-7000-8000-{tag:012x}"),
        "name": name,
        "args": args,
    }]});
    let response = server.post("/sync/push", Some(user), body.to_string()).await;
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = response.json().await.unwrap();
    body["results"][0].clone()
}

/// The result is `applied`.
pub(crate) fn applied(result: &Value) {
    assert_eq!(result["status"], "applied", "{result}");
}

/// The result is a `forbidden` rejection whose detail names none of `secrets`; the detail.
pub(crate) fn forbidden(result: &Value, secrets: &[&str]) -> String {
    assert_eq!(result["status"], "rejected", "{result}");
    assert_eq!(result["error"]["code"], "forbidden", "{result}");
    let detail = result["error"]["detail"].as_str().unwrap().to_owned();
    for secret in secrets {
        assert!(!detail.contains(secret), "the refusal names `{secret}`: {detail}");
    }
    detail
}

/// Every row `user`'s device pulls from scratch once every commit so far is visible to pulls,
/// its own writes included: `(table, row)`.
pub(crate) async fn pulled(server: &TestServer, user: &str) -> Vec<(String, Value)> {
    server.settle().await;
    let mut rows = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut body = json!({"clientId": device(user).1});
        if let Some(cursor) = &cursor {
            body["cursor"] = cursor.clone().into();
        }
        let response = server.post("/sync/pull", Some(user), body.to_string()).await;
        assert_eq!(response.status(), StatusCode::OK);
        let page: Value = response.json().await.unwrap();
        for change in page["changes"].as_array().unwrap() {
            rows.push((change["table"].as_str().unwrap().to_owned(), change["row"].clone()));
        }
        if page["hasMore"] != true {
            return rows;
        }
        cursor = page["cursor"].as_str().map(str::to_owned);
    }
}

/// Whether `rows` hold a row of `table` with id `id`.
pub(crate) fn has(rows: &[(String, Value)], table: &str, id: &str) -> bool {
    rows.iter().any(|(t, row)| t == table && row["id"] == id)
}

/// The one number `sql` selects.
pub(crate) async fn count(db: &TestDb, sql: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned())).fetch_one(&db.pool).await.unwrap()
}
