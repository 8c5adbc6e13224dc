//! The notes app's `memberships` rule, as a hostile user would try it (`docs/design.md` §4, the
//! notes app's index of a user's lists): a user's index holds the lists it is an accepted member
//! of and no other, with their titles as renamed; a member removed, gone or declining reads no
//! later title there; an invitation carries the title as renamed and enters the index only once
//! accepted; and a rename pings the index of the list's members only.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::actors::{applied, device, pulled, push};
use crate::support::ws::{Auth, Ws};
use crate::support::{TestDb, TestServer};

/// Every row a pull from scratch of `user`'s `memberships` rule alone brings, each with the
/// buckets it lies in.
async fn index(server: &TestServer, user: &str) -> Vec<(Value, Vec<String>)> {
    server.settle().await;
    let mut rows = Vec::new();
    let mut cursor = Value::Null;
    loop {
        let body = json!({"clientId": device(user).1, "cursor": cursor, "rules": ["memberships"], "open": []});
        let response = server.post("/sync/pull", Some(user), body.to_string()).await;
        assert_eq!(response.status(), reqwest::StatusCode::OK);
        let page: Value = response.json().await.unwrap();
        for change in page["changes"].as_array().unwrap() {
            let buckets = change["buckets"].as_array().unwrap().iter().map(|b| b.as_str().unwrap().to_owned());
            rows.push((change["row"].clone(), buckets.collect()));
        }
        if page["hasMore"] != true {
            return rows;
        }
        cursor = page["cursor"].clone();
    }
}

/// The titles `user`'s index gives its lists: `(list, title)`, in list order.
async fn titles(server: &TestServer, user: &str) -> Vec<(String, String)> {
    let mut titles: Vec<_> = index(server, user)
        .await
        .into_iter()
        .map(|(row, buckets)| {
            assert_eq!(row["user_id"], user, "only the user's own memberships: {row}");
            assert_eq!(row["accepted"], true, "only accepted ones: {row}");
            assert!(buckets.contains(&format!("memberships/{user}")), "{row} in {buckets:?}");
            (row["list_id"].as_str().unwrap().to_owned(), row["title"].as_str().unwrap().to_owned())
        })
        .collect();
    titles.sort();
    titles
}

/// Whether any row `user` may read at all (a full pull from scratch) holds `text`.
async fn reads(server: &TestServer, user: &str, text: &str) -> bool {
    pulled(server, user).await.iter().any(|(_, row)| row.to_string().contains(text))
}

fn pair(list: &str, title: &str) -> (String, String) {
    (list.to_owned(), title.to_owned())
}

#[tokio::test]
async fn a_member_removed_gone_or_declining_reads_no_later_title_of_the_list() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    // Alice's `l1` is shared with bob, carol and erin, `l2` with dave; all but erin accept.
    applied(&push(&server, "alice", 1, "create_list", json!({"id": "l1", "title": "plans"})).await);
    applied(&push(&server, "alice", 2, "create_list", json!({"id": "l2", "title": "other"})).await);
    let mut id = 2;
    for (list, user) in [("l1", "bob"), ("l1", "carol"), ("l1", "erin"), ("l2", "dave")] {
        id += 1;
        let args = json!({"list_id": list, "user_id": user, "role": "editor"});
        applied(&push(&server, "alice", id, "share_list", args).await);
    }
    for (user, list) in [("bob", "l1"), ("carol", "l1"), ("dave", "l2")] {
        applied(&push(&server, user, 1, "accept_list", json!({"list_id": list})).await);
    }
    for user in ["bob", "carol"] {
        assert_eq!(titles(&server, user).await, [pair("l1", "plans")], "{user}'s index");
    }
    assert_eq!(titles(&server, "dave").await, [pair("l2", "other")], "a member of another list of alice's");
    assert_eq!(titles(&server, "erin").await, [], "an invitation is no list of the index");

    // Bob is removed, carol leaves, erin declines.
    applied(&push(&server, "alice", 7, "unshare_list", json!({"list_id": "l1", "user_id": "bob"})).await);
    applied(&push(&server, "carol", 2, "leave_list", json!({"list_id": "l1"})).await);
    applied(&push(&server, "erin", 1, "leave_list", json!({"list_id": "l1"})).await);
    for user in ["bob", "carol", "erin"] {
        assert_eq!(titles(&server, user).await, [], "{user}'s index no longer holds the list");
    }

    // Renamed, the list's new title reaches none of them, nor dave, by any bucket.
    applied(&push(&server, "alice", 8, "rename_list", json!({"id": "l1", "title": "surprise party"})).await);
    for user in ["bob", "carol", "erin", "dave"] {
        assert!(!reads(&server, user, "surprise party").await, "{user} read the new title");
    }
    assert_eq!(titles(&server, "dave").await, [pair("l2", "other")]);
    assert_eq!(titles(&server, "alice").await, [pair("l1", "surprise party"), pair("l2", "other")]);
}

#[tokio::test]
async fn an_invitation_carries_the_title_as_renamed_and_enters_the_index_once_accepted() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    applied(&push(&server, "alice", 1, "create_list", json!({"id": "l1", "title": "plans"})).await);
    let share = json!({"list_id": "l1", "user_id": "carol", "role": "viewer"});
    applied(&push(&server, "alice", 2, "share_list", share).await);
    applied(&push(&server, "alice", 3, "rename_list", json!({"id": "l1", "title": "trip"})).await);

    // Pending, the invitation is all carol reads of the list, outside her index, with the title
    // she is asked to accept as it is now.
    assert_eq!(titles(&server, "carol").await, [], "no list of her index yet");
    let rows = pulled(&server, "carol").await;
    let invitation: Vec<_> = rows.iter().filter(|(table, _)| table == "list_members").map(|(_, row)| row).collect();
    assert_eq!(invitation.len(), 1, "{rows:?}");
    assert_eq!((&invitation[0]["title"], &invitation[0]["accepted"]), (&json!("trip"), &json!(false)));
    assert!(!rows.iter().any(|(table, _)| table != "list_members"), "nothing of the list: {rows:?}");

    // Accepted, the index gives the list its true title.
    applied(&push(&server, "carol", 1, "accept_list", json!({"list_id": "l1"})).await);
    assert_eq!(titles(&server, "carol").await, [pair("l1", "trip")]);
}

#[tokio::test]
async fn a_rename_pings_the_index_of_the_lists_members_only() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    applied(&push(&server, "alice", 1, "create_list", json!({"id": "l1", "title": "plans"})).await);
    applied(&push(&server, "alice", 2, "create_list", json!({"id": "l2", "title": "other"})).await);
    applied(
        &push(&server, "alice", 3, "share_list", json!({"list_id": "l1", "user_id": "bob", "role": "viewer"})).await,
    );
    applied(
        &push(&server, "alice", 4, "share_list", json!({"list_id": "l2", "user_id": "dave", "role": "viewer"})).await,
    );
    applied(&push(&server, "bob", 1, "accept_list", json!({"list_id": "l1"})).await);
    applied(&push(&server, "dave", 1, "accept_list", json!({"list_id": "l2"})).await);
    // Dave holds a list of his own, whose note marks the end of what his socket is read for.
    applied(&push(&server, "dave", 2, "create_list", json!({"id": "d1", "title": "mine"})).await);
    server.settle().await;
    let connect = |user: &'static str, last: &'static str| {
        let addr = server.addr;
        async move {
            let token = TestServer::token(user);
            let mut socket = Ws::connect(addr, Auth::Header(&token)).await.unwrap();
            // The socket has read the user's buckets once it sends the presence of `last`.
            while socket.expect("presence_state", Duration::from_secs(5)).await["bucket"] != last {}
            socket
        }
    };
    let mut bob = connect("bob", "shared/l1").await;
    let mut dave = connect("dave", "shared/d1").await;
    // Pings of the writes before the socket (held until the pull horizon passes them) come
    // before that of a note written after it.
    applied(&push(&server, "dave", 3, "add_note", json!({"id": "n1", "list_id": "d1", "title": "n"})).await);
    while dave.expect("ping", Duration::from_secs(5)).await["bucket"] != "shared/d1" {}

    applied(&push(&server, "alice", 5, "rename_list", json!({"id": "l1", "title": "trip"})).await);
    // Bob's ping of it is out: so is any other of the rename.
    while bob.expect("ping", Duration::from_secs(5)).await["bucket"] != "memberships/bob" {}
    applied(&push(&server, "dave", 4, "add_note", json!({"id": "n2", "list_id": "d1", "title": "n"})).await);
    loop {
        let ping = dave.expect("ping", Duration::from_secs(5)).await;
        assert_ne!(ping["bucket"], "memberships/dave", "a rename of a list he is no member of pinged his index");
        if ping["bucket"] == "shared/d1" {
            break;
        }
    }
}
