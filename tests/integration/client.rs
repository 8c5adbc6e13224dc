//! The Rust client against real servers and Postgres: convergence, offline writes across
//! process restarts, lost responses, poison mutations, revocation, and a fault-injecting soak.

use std::time::Duration;

use engine::client::{Client, StoreLocation};
use engine::crdt::update_to_base64;
use example_notes::mutators::{
    AddNote, CreateList, EditNoteBody, ShareList, ShareRole, UpdateNote, add_note, create_list, edit_note_body,
    share_list, update_note,
};
use example_notes::{List, Note};

use crate::support::client::{eventually, notes_client};
use crate::support::{TestDb, TestServer};

const SOON: Duration = Duration::from_secs(10);

async fn note(client: &Client, id: &str) -> Option<Note> {
    client.get::<Note>(&id.to_owned()).await.unwrap()
}

async fn body_text(client: &Client, id: &str) -> Option<String> {
    note(client, id).await.map(|n| n.body.text().unwrap())
}

#[tokio::test]
async fn two_clients_converge_on_lists_notes_membership_and_bodies() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let url = server.url("");
    let alice = notes_client(&url, "alice", StoreLocation::Memory, |b| b).await;
    let bob = notes_client(&url, "bob", StoreLocation::Memory, |b| b).await;

    // Alice's writes show in her view at once, before any server round trip.
    alice.mutate::<create_list>(CreateList { id: Some("l1".into()), title: "groceries".into() }).await.unwrap();
    let queued =
        alice.mutate::<add_note>(AddNote { id: None, list_id: "l1".into(), title: "milk".into() }).await.unwrap();
    let note_id = queued.outcome.server_id.clone().expect("the local run names the note");
    assert_eq!(note(&alice, &note_id).await.map(|n| n.title), Some("milk".into()));
    alice
        .mutate::<share_list>(ShareList { list_id: "l1".into(), user_id: "bob".into(), role: ShareRole::Editor })
        .await
        .unwrap();

    // Bob gets the shared list and the note, with the id alice's client chose.
    eventually(SOON, "bob sees the shared note", || async { note(&bob, &note_id).await.is_some() }).await;
    assert_eq!(bob.get::<List>(&"l1".to_owned()).await.unwrap().map(|l| l.title), Some("groceries".into()));

    // Both edit the body at once; both end with the same text holding both edits.
    let base = note(&alice, &note_id).await.unwrap().body;
    let mut from_alice = base.clone();
    let mut from_bob = base.clone();
    let edit_a = update_to_base64(&from_alice.insert(0, "oat ").unwrap());
    let edit_b = update_to_base64(&from_bob.insert(0, "2 litres of ").unwrap());
    alice.mutate::<edit_note_body>(EditNoteBody { id: note_id.clone(), update: edit_a }).await.unwrap();
    bob.mutate::<edit_note_body>(EditNoteBody { id: note_id.clone(), update: edit_b }).await.unwrap();
    bob.mutate::<update_note>(UpdateNote { id: note_id.clone(), title: None, done: Some(true), position: None })
        .await
        .unwrap();
    eventually(SOON, "both bodies hold both edits", || async {
        let (a, b) = (body_text(&alice, &note_id).await, body_text(&bob, &note_id).await);
        a == b && a.as_deref().is_some_and(|t| t.contains("oat ") && t.contains("2 litres of "))
    })
    .await;
    eventually(SOON, "alice sees bob's done flag", || async { note(&alice, &note_id).await.is_some_and(|n| n.done) })
        .await;
    eventually(SOON, "both outboxes drain", || async { alice.status().pending == 0 && bob.status().pending == 0 })
        .await;

    // What the clients show is what the server has.
    let stored: Vec<u8> =
        sqlx::query_scalar("SELECT body FROM notes WHERE id = $1").bind(&note_id).fetch_one(&db.pool).await.unwrap();
    let server_text = engine::CrdtText::from_state(stored).unwrap().text().unwrap();
    assert_eq!(body_text(&alice, &note_id).await, Some(server_text));
}

/// A port nothing listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[tokio::test]
async fn offline_writes_survive_the_process_and_apply_exactly_once() {
    use crate::support::process::ServerProcess;
    let db = TestDb::new().await;
    db.notes().await;
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let dir = std::env::temp_dir().join(format!("engine-client-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let store = dir.join("alice.db");

    // The server is down: a client process queues a list and 20 notes, and exits.
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_engine-test-client"))
        .args([&url, store.to_str().unwrap(), &TestServer::token("alice"), "offline", "20"])
        .env("RUST_LOG", "off")
        .output()
        .await
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let ids: Vec<String> = String::from_utf8(output.stdout).unwrap().lines().map(str::to_owned).collect();
    assert_eq!(ids.len(), 20);
    let notes: i64 = sqlx::query_scalar("SELECT count(*) FROM notes").fetch_one(&db.pool).await.unwrap();
    assert_eq!(notes, 0, "nothing reached the server");

    // A new process (here: a new client) opens the store; the server comes back.
    let client = notes_client(&url, "alice", StoreLocation::File(store.clone()), |b| b).await;
    assert_eq!(client.status().pending, 21, "every queued mutation is still queued");
    assert_eq!(client.collection::<Note>().all().await.unwrap().len(), 20, "and still shows");
    let _server = ServerProcess::start_on(&db.url, Duration::from_secs(30), port).await;
    eventually(Duration::from_secs(20), "the outbox drains", || async { client.status().pending == 0 }).await;

    let stored: Vec<String> = sqlx::query_scalar("SELECT id FROM notes ORDER BY id").fetch_all(&db.pool).await.unwrap();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(stored, expected, "every note once, with the id the offline client chose");
    let applied: i64 = sqlx::query_scalar("SELECT count(*) FROM _engine_mutations WHERE status = 'applied'")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(applied, 21);
    assert!(client.quarantined().await.unwrap().is_empty());
    drop(client);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_push_whose_answer_is_lost_applies_once() {
    use crate::support::proxy::{Fault, FaultProxy};
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let proxy = FaultProxy::start(&server.url("")).await;
    let alice = notes_client(&proxy.url(), "alice", StoreLocation::Memory, |b| b.background(false)).await;

    alice.mutate::<create_list>(CreateList { id: Some("l1".into()), title: "once".into() }).await.unwrap();
    // The server applies the push; the client hears a 503, then a dropped connection.
    proxy.script("/sync/push", Fault::FailAfter);
    assert!(alice.push().await.is_err());
    proxy.script("/sync/push", Fault::DropAfter);
    assert!(alice.push().await.is_err());
    assert_eq!(alice.status().pending, 1);
    alice.push().await.unwrap();
    alice.pull().await.unwrap();
    assert_eq!(alice.status().pending, 0);
    assert_eq!(proxy.injected(), [Fault::FailAfter, Fault::DropAfter]);

    let mutations: Vec<(i64, String)> =
        sqlx::query_as("SELECT mutation_id, status FROM _engine_mutations").fetch_all(&db.pool).await.unwrap();
    assert_eq!(mutations, [(1, "applied".to_owned())], "applied once, recorded once");
    let lists: i64 = sqlx::query_scalar("SELECT count(*) FROM lists").fetch_one(&db.pool).await.unwrap();
    assert_eq!(lists, 1);
    assert!(alice.get::<List>(&"l1".to_owned()).await.unwrap().is_some());
}

/// Alice owns `l1` and shares it with bob; bob has pulled it.
async fn shared_list(url: &str) -> (Client, Client) {
    let alice = notes_client(url, "alice", StoreLocation::Memory, |b| b.background(false)).await;
    let bob = notes_client(url, "bob", StoreLocation::Memory, |b| b.background(false)).await;
    alice.mutate::<create_list>(CreateList { id: Some("l1".into()), title: "shared".into() }).await.unwrap();
    alice
        .mutate::<share_list>(ShareList { list_id: "l1".into(), user_id: "bob".into(), role: ShareRole::Editor })
        .await
        .unwrap();
    alice.sync().await.unwrap();
    bob.pull().await.unwrap();
    assert!(bob.get::<List>(&"l1".to_owned()).await.unwrap().is_some());
    (alice, bob)
}

#[tokio::test]
async fn a_poison_mutation_is_quarantined_while_later_ones_apply() {
    use example_notes::mutators::{UnshareList, unshare_list};
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let (alice, bob) = shared_list(&server.url("")).await;

    // Alice takes the list away; bob, not knowing, adds a note to it, then makes a list of his.
    alice.mutate::<unshare_list>(UnshareList { list_id: "l1".into(), user_id: "bob".into() }).await.unwrap();
    alice.sync().await.unwrap();
    let poison = bob
        .mutate::<add_note>(AddNote { id: Some("n-bob".into()), list_id: "l1".into(), title: "late".into() })
        .await
        .unwrap();
    bob.mutate::<create_list>(CreateList { id: Some("b1".into()), title: "mine".into() }).await.unwrap();
    assert!(note(&bob, "n-bob").await.is_some(), "the optimistic note shows");

    bob.push().await.unwrap();
    let quarantined = bob.quarantined().await.unwrap();
    assert_eq!(quarantined.len(), 1);
    assert_eq!(quarantined[0].client_mutation_id, poison.client_mutation_id);
    // On the server the list is out of bob's reach: the mutator finds no such list.
    assert_eq!(quarantined[0].error.code, engine::ErrorCode::MutatorFailed, "{:?}", quarantined[0].error);
    assert_eq!(bob.status().quarantined, quarantined);
    assert!(note(&bob, "n-bob").await.is_none(), "its optimistic effect is gone");

    bob.pull().await.unwrap();
    assert!(bob.get::<List>(&"b1".to_owned()).await.unwrap().is_some(), "the later mutation applied");
    assert!(bob.get::<List>(&"l1".to_owned()).await.unwrap().is_none(), "the revoked list left the store");
    assert_eq!(bob.status().pending, 0);

    // Discarded, it is gone for good; nothing of it ever reached the server.
    assert!(bob.discard_quarantined(poison.client_mutation_id).await.unwrap());
    assert!(bob.quarantined().await.unwrap().is_empty());
    let notes: i64 = sqlx::query_scalar("SELECT count(*) FROM notes").fetch_one(&db.pool).await.unwrap();
    assert_eq!(notes, 0);
}

#[tokio::test]
async fn revoking_a_shared_list_evicts_its_rows_but_not_the_members_own_notes() {
    use example_notes::mutators::{UnshareList, unshare_list};
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let (alice, bob) = shared_list(&server.url("")).await;
    alice
        .mutate::<add_note>(AddNote { id: Some("n-alice".into()), list_id: "l1".into(), title: "hers".into() })
        .await
        .unwrap();
    bob.mutate::<add_note>(AddNote { id: Some("n-bob".into()), list_id: "l1".into(), title: "his".into() })
        .await
        .unwrap();
    alice.sync().await.unwrap();
    bob.sync().await.unwrap();
    assert!(note(&bob, "n-alice").await.is_some() && note(&bob, "n-bob").await.is_some());

    alice.mutate::<unshare_list>(UnshareList { list_id: "l1".into(), user_id: "bob".into() }).await.unwrap();
    alice.sync().await.unwrap();
    bob.pull().await.unwrap();
    assert!(bob.get::<List>(&"l1".to_owned()).await.unwrap().is_none(), "the list is evicted");
    assert!(note(&bob, "n-alice").await.is_none(), "alice's note is evicted");
    assert!(note(&bob, "n-bob").await.is_some(), "bob's own note stays: the `own` bucket holds it");
}

/// A small deterministic random sequence for the soak.
struct Dice(u64);

impl Dice {
    fn roll(&mut self, sides: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % sides
    }
}

/// The rows a client shows, in a form to compare: lists, members and notes with body text.
async fn snapshot(client: &Client) -> (Vec<List>, Vec<example_notes::ListMember>, Vec<(Note, String)>) {
    let notes = client.collection::<Note>().all().await.unwrap();
    let notes = notes
        .into_iter()
        .map(|n| {
            let text = n.body.text().unwrap();
            (n, text)
        })
        .collect();
    (
        client.collection::<List>().all().await.unwrap(),
        client.collection::<example_notes::ListMember>().all().await.unwrap(),
        notes,
    )
}

#[tokio::test]
async fn clients_behind_a_faulty_network_converge_and_apply_everything_once() {
    use crate::support::proxy::{Fault, FaultProxy};
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let proxy = FaultProxy::start(&server.url("")).await;
    let users = ["alice", "bob", "carol"];
    let mut clients = Vec::new();
    for user in users {
        let client = notes_client(&proxy.url(), user, StoreLocation::Memory, |b| {
            b.realtime(false).pull_interval(Duration::from_millis(100)).push_batch(3)
        })
        .await;
        client.mutate::<create_list>(CreateList { id: Some(format!("l-{user}")), title: user.into() }).await.unwrap();
        clients.push(client);
    }
    for guest in ["bob", "carol"] {
        let share = ShareList { list_id: "l-alice".into(), user_id: guest.into(), role: ShareRole::Editor };
        clients[0].mutate::<share_list>(share).await.unwrap();
    }
    for client in &clients[1..] {
        eventually(SOON, "the shared list arrives", || async {
            client.get::<List>(&"l-alice".to_owned()).await.unwrap().is_some()
        })
        .await;
    }

    proxy.random(0x5eed, 0.3);
    let mut tasks = Vec::new();
    for (n, (user, client)) in users.iter().zip(&clients).enumerate() {
        let (user, client) = (user.to_string(), client.clone());
        tasks.push(tokio::spawn(async move {
            let mut dice = Dice(0x9e37_79b9_7f4a_7c15 ^ (n as u64 + 1));
            let mut queued = 0;
            let mut added = 0;
            for step in 0..25 {
                let lists = [format!("l-{user}"), "l-alice".to_owned()];
                let notes = client.collection::<Note>().all().await.unwrap();
                match dice.roll(4) {
                    0 | 1 => {
                        let list = lists[dice.roll(2) as usize].clone();
                        let args = AddNote { id: None, list_id: list, title: format!("{user} {step}") };
                        client.mutate::<add_note>(args).await.unwrap();
                        added += 1;
                    }
                    2 if !notes.is_empty() => {
                        let note = &notes[dice.roll(notes.len() as u64) as usize];
                        let mut body = note.body.clone();
                        let update = update_to_base64(&body.insert(0, &format!("[{user}{step}]")).unwrap());
                        client.mutate::<edit_note_body>(EditNoteBody { id: note.id.clone(), update }).await.unwrap();
                    }
                    _ => {
                        let Some(note) = notes.iter().find(|n| n.owner_id == user) else { continue };
                        let args = UpdateNote {
                            id: note.id.clone(),
                            title: Some(format!("{user} renamed {step}")),
                            done: Some(step % 2 == 0),
                            position: None,
                        };
                        client.mutate::<update_note>(args).await.unwrap();
                    }
                }
                queued += 1;
                tokio::time::sleep(Duration::from_millis(dice.roll(40))).await;
            }
            (queued, added)
        }));
    }
    let (mut queued, mut added) = (0, 0);
    for task in tasks {
        let (q, a) = task.await.unwrap();
        queued += q;
        added += a;
    }
    proxy.calm();
    for client in &clients {
        eventually(Duration::from_secs(30), "every outbox drains", || async { client.status().pending == 0 }).await;
        assert!(client.quarantined().await.unwrap().is_empty(), "nothing was rejected");
    }

    let injected = proxy.injected();
    assert!(injected.iter().any(|f| matches!(f, Fault::FailAfter | Fault::DropAfter)), "{injected:?}");
    assert!(injected.contains(&Fault::Duplicate), "{injected:?}");
    // Every mutation applied exactly once: 3 lists, 2 shares, and what the users did.
    let applied: i64 = sqlx::query_scalar("SELECT count(*) FROM _engine_mutations WHERE status = 'applied'")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(applied, 3 + 2 + queued);
    let notes: i64 = sqlx::query_scalar("SELECT count(*) FROM notes").fetch_one(&db.pool).await.unwrap();
    assert_eq!(notes, added);
    // Each client comes to show exactly what a fresh client of the same user pulls.
    for (user, client) in users.iter().zip(&clients) {
        let oracle = notes_client(&server.url(""), user, StoreLocation::Memory, |b| b.background(false)).await;
        eventually(SOON, &format!("{user} converges"), || async {
            client.pull().await.unwrap();
            oracle.pull().await.unwrap();
            snapshot(client).await == snapshot(&oracle).await
        })
        .await;
        let (_, _, notes) = snapshot(&oracle).await;
        assert!(notes.len() > 10, "{user} sees the shared notes");
    }
}
