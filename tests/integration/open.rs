//! Syncing only what is open (`docs/design.md` §3, "Sync what is open"): a client that syncs the
//! buckets of its always-synced rules and the buckets the app opens, pulling nothing else, and
//! letting a released bucket's rows go after the bucket TTL.

use std::time::Duration;

use engine::Bucket as _;
use engine::client::{Client, StoreLocation};
use example_notes::mutators::{
    AddNote, CreateList, NoteId, RenameList, ShareList, ShareRole, create_list, delete_note, rename_list, share_list,
};
use example_notes::rules::Shared;
use example_notes::{List, ListMember, Note};

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

async fn membership(client: &Client, list: &str, user: &str) -> Option<ListMember> {
    client.get::<ListMember>(&(list.to_owned(), user.to_owned())).await.unwrap()
}

#[tokio::test]
async fn a_members_index_of_lists_is_its_own_lists_and_accepted_memberships_with_true_titles() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let url = server.url("");
    two_shared_lists(&url).await;
    // Carol is invited to l1 and has not accepted: not in her index.
    let alice = notes_client(&url, "alice", StoreLocation::Memory, |b| b.background(false)).await;
    alice.pull().await.unwrap();
    let args = ShareList { list_id: "l1".into(), user_id: "carol".into(), role: ShareRole::Viewer };
    alice.mutate::<share_list>(args).await.unwrap();
    alice.sync().await.unwrap();
    let index = |user: &'static str| {
        let url = url.clone();
        async move {
            notes_client(&url, user, StoreLocation::Memory, |b| b.background(false).sync_open(["own", "memberships"]))
                .await
        }
    };
    let bob = index("bob").await;
    bob.pull().await.unwrap();
    for list in ["l1", "l2"] {
        let member = membership(&bob, list, "bob").await.unwrap_or_else(|| panic!("bob's membership of {list}"));
        assert_eq!((member.title.as_str(), member.accepted), (list, true));
    }
    assert!(list(&bob, "b1").await.is_some(), "his own list, from `own`");
    assert!(list(&bob, "l1").await.is_none() && note(&bob, "n1").await.is_none(), "no shared list's bucket");
    assert!(membership(&bob, "l1", "alice").await.is_none(), "nor the other members of the lists");
    let carol = index("carol").await;
    carol.pull().await.unwrap();
    assert!(membership(&carol, "l1", "carol").await.is_none(), "an invitation not accepted is no list of hers");

    // Renamed by its owner, the list's title changes in its members' index too.
    alice.pull().await.unwrap();
    alice.mutate::<rename_list>(RenameList { id: "l1".into(), title: "trip".into() }).await.unwrap();
    let optimistic = membership(&alice, "l1", "bob").await.unwrap();
    assert_eq!(optimistic.title, "trip", "the owner's device renames the memberships it holds at once");
    alice.sync().await.unwrap();
    bob.pull().await.unwrap();
    assert_eq!(membership(&bob, "l1", "bob").await.unwrap().title, "trip");
    assert_eq!(membership(&bob, "l2", "bob").await.unwrap().title, "l2", "the other list keeps its title");
    carol.pull().await.unwrap();
    let invitation = carol.get::<ListMember>(&("l1".to_owned(), "carol".to_owned())).await.unwrap();
    assert!(invitation.is_none(), "still no list of hers");
}
