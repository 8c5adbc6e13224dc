//! Syncing only what is open (`docs/design.md` §3, "Sync what is open"): a client that syncs the
//! buckets of its always-synced rules and the buckets the app opens, pulling nothing else, and
//! letting a released bucket's rows go after the bucket TTL.

use std::time::Duration;

use engine::Bucket as _;
use engine::client::{Client, StoreLocation};
use example_notes::mutators::{
    AddNote, CreateList, NoteId, ShareList, ShareRole, create_list, delete_note, share_list,
};
use example_notes::rules::Shared;
use example_notes::{List, Note};

use crate::support::client::notes_client;
use crate::support::notes::accept;
use crate::support::{TestDb, TestServer};

async fn note(client: &Client, id: &str) -> Option<Note> {
    client.get::<Note>(&id.to_owned()).await.unwrap()
}

async fn list(client: &Client, id: &str) -> Option<List> {
    client.get::<List>(&id.to_owned()).await.unwrap()
}

/// Alice owns lists `l1` and `l2`, a note in each (`n1`, `n2`), both shared with bob; bob owns
/// `b1` with note `nb`.
async fn two_shared_lists(url: &str) {
    let alice = notes_client(url, "alice", StoreLocation::Memory, |b| b.background(false)).await;
    for (list, note) in [("l1", "n1"), ("l2", "n2")] {
        alice.mutate::<create_list>(CreateList { id: Some(list.into()), title: list.into() }).await.unwrap();
        let args = AddNote { id: Some(note.into()), list_id: list.into(), title: note.into() };
        alice.mutate::<example_notes::mutators::add_note>(args).await.unwrap();
        let args = ShareList { list_id: list.into(), user_id: "bob".into(), role: ShareRole::Editor };
        alice.mutate::<share_list>(args).await.unwrap();
    }
    alice.sync().await.unwrap();
    for list in ["l1", "l2"] {
        accept(url, "bob", list).await;
    }
    let bob = notes_client(url, "bob", StoreLocation::Memory, |b| b.background(false)).await;
    bob.mutate::<create_list>(CreateList { id: Some("b1".into()), title: "mine".into() }).await.unwrap();
    let args = AddNote { id: Some("nb".into()), list_id: "b1".into(), title: "nb".into() };
    bob.mutate::<example_notes::mutators::add_note>(args).await.unwrap();
    bob.sync().await.unwrap();
}

fn shared(list: &str) -> engine::BucketKey {
    Shared { list_id: list.into() }.key()
}

#[tokio::test]
async fn only_the_always_synced_rules_and_the_open_buckets_are_pulled() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let url = server.url("");
    two_shared_lists(&url).await;
    let hour = Duration::from_secs(3600);
    let bob =
        notes_client(&url, "bob", StoreLocation::Memory, |b| b.background(false).sync_open(["own"]).bucket_ttl(hour))
            .await;

    // Nothing open: his own list only, none of the lists shared with him.
    bob.pull().await.unwrap();
    assert!(list(&bob, "b1").await.is_some(), "the always-synced rule's rows");
    assert!(note(&bob, "nb").await.is_none(), "his own list's notes are in its `shared` bucket, not open");
    assert!(list(&bob, "l1").await.is_none() && note(&bob, "n2").await.is_none(), "no bucket not open");
    assert!(bob.buckets().await.unwrap().iter().all(|b| b.rule() == "own"), "{:?}", bob.buckets().await);

    // Opening l1 pulls it, and only it.
    let open = bob.sync_bucket(shared("l1"));
    bob.pull().await.unwrap();
    assert!(note(&bob, "n1").await.is_some() && list(&bob, "l1").await.is_some());
    assert!(note(&bob, "n2").await.is_none(), "l2 is still not open");
    assert!(bob.buckets().await.unwrap().contains(&shared("l1")));

    // Released, its rows stay for the TTL, and the bucket is no longer synced.
    open.release();
    bob.pull().await.unwrap();
    assert!(note(&bob, "n1").await.is_some(), "kept for the TTL");
    assert!(!bob.buckets().await.unwrap().contains(&shared("l1")), "released");

    // Meanwhile n1 is deleted; opened again, the list comes afresh, without it.
    let alice = notes_client(&url, "alice", StoreLocation::Memory, |b| b.background(false)).await;
    alice.pull().await.unwrap();
    alice.mutate::<delete_note>(NoteId { id: "n1".into() }).await.unwrap();
    alice.sync().await.unwrap();
    let args = AddNote { id: Some("n3".into()), list_id: "l1".into(), title: "n3".into() };
    alice.mutate::<example_notes::mutators::add_note>(args).await.unwrap();
    alice.sync().await.unwrap();
    let _open = bob.sync_bucket(shared("l1"));
    bob.pull().await.unwrap();
    assert!(note(&bob, "n1").await.is_none(), "the note deleted while the list was closed is gone");
    assert!(note(&bob, "n3").await.is_some(), "the note added meanwhile came");
}

#[tokio::test]
async fn a_released_bucket_leaves_after_the_ttl_and_comes_back_whole_when_opened() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let url = server.url("");
    two_shared_lists(&url).await;
    // The TTL is zero: rows of a released bucket go at the pull that releases it.
    let bob = notes_client(&url, "bob", StoreLocation::Memory, |b| b.background(false).sync_open(["own"])).await;
    let open = bob.sync_bucket(shared("l2"));
    // Two handles of one bucket: it stays open until both are gone.
    let again = bob.sync_bucket(shared("l2"));
    bob.pull().await.unwrap();
    assert!(note(&bob, "n2").await.is_some());
    drop(open);
    bob.pull().await.unwrap();
    assert!(note(&bob, "n2").await.is_some(), "still open through the other handle");
    drop(again);
    bob.pull().await.unwrap();
    assert!(note(&bob, "n2").await.is_none() && list(&bob, "l2").await.is_none(), "gone after the TTL");
    assert!(list(&bob, "b1").await.is_some(), "the always-synced rows stay");

    // The cursor kept the bucket parked past its rows: opened again, it restarts from its
    // beginning, so the rows dropped come again.
    let _open = bob.sync_bucket(shared("l2"));
    bob.pull().await.unwrap();
    assert!(note(&bob, "n2").await.is_some() && list(&bob, "l2").await.is_some(), "the whole list again");
    // A bucket the actor does not hold is left out, not refused.
    let _foreign = bob.sync_bucket(shared("nobody's"));
    bob.pull().await.unwrap();
    assert!(note(&bob, "n2").await.is_some());
}
