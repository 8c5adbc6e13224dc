//! The Rust client against real servers and Postgres: convergence, offline writes across
//! process restarts, lost responses, poison mutations, revocation, and a fault-injecting soak.

use std::time::Duration;

use engine::client::{Client, StoreLocation};
use example_notes::mutators::{
    AddNote, CreateList, EditNoteBody, ShareList, ShareRole, UpdateNote, add_note, create_list, edit_note_body,
    share_list, update_note,
};
use example_notes::{List, Note};

use crate::support::client::{eventually, notes_client};
use crate::support::notes::accept;
use crate::support::process::{ServerProcess, free_port};
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
    share(&alice, "l1", "bob").await;
    accept(&url, "bob", "l1").await;

    // Bob gets the shared list and the note, with the id alice's client chose.
    eventually(SOON, "bob sees the shared note", || async { note(&bob, &note_id).await.is_some() }).await;
    assert_eq!(bob.get::<List>(&"l1".to_owned()).await.unwrap().map(|l| l.title), Some("groceries".into()));

    // Both edit the body at once; both end with the same text holding both edits.
    let mut for_alice = note(&alice, &note_id).await.unwrap();
    let mut for_bob = for_alice.clone();
    let update = for_alice.body.insert(0, "oat ").unwrap();
    alice.mutate::<edit_note_body>(EditNoteBody { id: note_id.clone(), update }).await.unwrap();
    let update = for_bob.body.insert(0, "2 litres of ").unwrap();
    bob.mutate::<edit_note_body>(EditNoteBody { id: note_id.clone(), update }).await.unwrap();
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
    let stored = db.note_body(&note_id).await;
    let server_text = engine::CrdtText::from_state(stored).unwrap().text().unwrap();
    assert_eq!(body_text(&alice, &note_id).await, Some(server_text));
}

/// A port nothing listens on now.
/// A fresh directory for client store files.
fn store_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("engine-client-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test]
async fn offline_writes_survive_the_process_and_apply_exactly_once() {
    let db = TestDb::new().await;
    db.notes().await;
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let dir = store_dir();
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

/// `owner` shares list `list` with `user` as an editor.
async fn share(owner: &Client, list: &str, user: &str) {
    let args = ShareList { list_id: list.into(), user_id: user.into(), role: ShareRole::Editor };
    owner.mutate::<share_list>(args).await.unwrap();
}

/// Alice owns `l1` and shares it with bob; bob has pulled it.
async fn shared_list(url: &str) -> (Client, Client) {
    let alice = notes_client(url, "alice", StoreLocation::Memory, |b| b.background(false)).await;
    let bob = notes_client(url, "bob", StoreLocation::Memory, |b| b.background(false)).await;
    alice.mutate::<create_list>(CreateList { id: Some("l1".into()), title: "shared".into() }).await.unwrap();
    share(&alice, "l1", "bob").await;
    alice.sync().await.unwrap();
    accept(url, "bob", "l1").await;
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

    // Retried while the list is still out of reach, its local run refuses it: it stays put.
    let again = bob.retry_quarantined(poison.client_mutation_id).await;
    assert!(matches!(again, Err(engine::client::Error::Mutation(_))), "{again:?}");
    assert_eq!(bob.quarantined().await.unwrap().len(), 1);
    let notes: i64 = sqlx::query_scalar("SELECT count(*) FROM notes").fetch_one(&db.pool).await.unwrap();
    assert_eq!(notes, 0, "nothing of it reached the server");

    // With the list shared again, the retry goes through.
    share(&alice, "l1", "bob").await;
    alice.sync().await.unwrap();
    accept(&server.url(""), "bob", "l1").await;
    bob.pull().await.unwrap();
    let retried = bob.retry_quarantined(poison.client_mutation_id).await.unwrap().expect("it was quarantined");
    assert_ne!(retried.client_mutation_id, poison.client_mutation_id, "a new mutation");
    assert!(bob.quarantined().await.unwrap().is_empty());
    bob.sync().await.unwrap();
    assert_eq!(note(&bob, "n-bob").await.map(|n| n.title), Some("late".into()));
    assert!(!bob.discard_quarantined(poison.client_mutation_id).await.unwrap(), "nothing left to discard");
}

#[tokio::test]
async fn revoking_a_shared_list_evicts_all_its_rows_even_the_notes_the_member_wrote() {
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
    assert!(note(&bob, "n-bob").await.is_none(), "bob's note is evicted too: notes lie only in their list");
    let count = |sql: &'static str| sqlx::query_scalar::<_, i64>(sql).fetch_one(&db.pool);
    assert_eq!(count("SELECT count(*) FROM notes WHERE id = 'n-bob'").await.unwrap(), 1, "it stays in the list");
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
        accept(&server.url(""), guest, "l-alice").await;
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
                        let update = note.body.clone().insert(0, &format!("[{user}{step}]")).unwrap();
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
    // Every mutation applied exactly once: 3 lists, 2 shares, 2 acceptances, and what the users did.
    let applied: i64 = sqlx::query_scalar("SELECT count(*) FROM _engine_mutations WHERE status = 'applied'")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(applied, 3 + 2 + 2 + queued, "with the two acceptances of the shares");
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

/// A server process on a fresh database and a port it can be started on again.
async fn server_process() -> (TestDb, u16, ServerProcess) {
    let db = TestDb::new().await;
    db.notes().await;
    let port = free_port();
    let server = ServerProcess::start_on(&db.url, Duration::from_secs(30), port).await;
    (db, port, server)
}

/// No pull interval to speak of: only the stream makes the client pull.
fn quiet(builder: engine::client::ClientBuilder) -> engine::client::ClientBuilder {
    builder.pull_interval(Duration::from_secs(3600))
}

#[tokio::test]
async fn pings_drive_pulls_and_the_stream_comes_back_after_the_server_does() {
    let (db, port, mut server) = server_process().await;
    let url = format!("http://127.0.0.1:{port}");
    let alice = notes_client(&url, "alice", StoreLocation::Memory, quiet).await;
    let bob = notes_client(&url, "bob", StoreLocation::Memory, quiet).await;
    eventually(SOON, "both streams connect", || async { alice.status().connected && bob.status().connected }).await;

    alice.mutate::<create_list>(CreateList { id: Some("l1".into()), title: "live".into() }).await.unwrap();
    alice
        .mutate::<share_list>(ShareList { list_id: "l1".into(), user_id: "bob".into(), role: ShareRole::Viewer })
        .await
        .unwrap();
    accept(&url, "bob", "l1").await;
    eventually(SOON, "a ping brings bob the list", || async {
        bob.get::<List>(&"l1".to_owned()).await.unwrap().is_some()
    })
    .await;

    // The server goes away; alice keeps writing; the server comes back on the same address.
    server.kill().await;
    eventually(SOON, "both notice", || async { !alice.status().connected && !bob.status().connected }).await;
    alice
        .mutate::<add_note>(AddNote { id: Some("n1".into()), list_id: "l1".into(), title: "while down".into() })
        .await
        .unwrap();
    let _server = ServerProcess::start_on(&db.url, Duration::from_secs(30), port).await;
    eventually(Duration::from_secs(20), "the streams reconnect", || async {
        alice.status().connected && bob.status().connected
    })
    .await;
    eventually(Duration::from_secs(20), "the note written while down reaches bob", || async {
        note(&bob, "n1").await.is_some()
    })
    .await;
}

#[tokio::test]
async fn presence_reaches_the_other_clients_of_a_bucket() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let url = server.url("");
    let (alice, bob) = {
        let (alice, bob) = shared_list(&url).await;
        drop((alice, bob));
        (
            notes_client(&url, "alice", StoreLocation::Memory, |b| b).await,
            notes_client(&url, "bob", StoreLocation::Memory, |b| b).await,
        )
    };
    let bucket = engine::BucketKey::new("shared", &["l1"]);
    let mut events = bob.presence_events();
    let joined = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    bob.on_presence({
        let (joined, bucket) = (joined.clone(), bucket.clone());
        move |event| {
            if event.bucket == bucket && event.state.contains_key("alice") {
                joined.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
    });
    let meta = serde_json::json!({"editing": "title"}).as_object().unwrap().clone();
    alice.track(bucket.clone(), meta);
    eventually(SOON, "bob sees alice present", || async {
        bob.presence_state(&bucket).get("alice").is_some_and(|metas| metas.iter().any(|m| m["editing"] == "title"))
    })
    .await;
    loop {
        let event = events.recv().await.unwrap();
        if event.bucket == bucket && event.state.contains_key("alice") {
            break;
        }
    }
    eventually(SOON, "the callback hears the join", || async { joined.load(std::sync::atomic::Ordering::SeqCst) })
        .await;
    alice.untrack(&bucket);
    eventually(SOON, "bob sees alice leave", || async { !bob.presence_state(&bucket).contains_key("alice") }).await;

    // A meta over the server's limit is refused once and dropped, not sent on every connection.
    let mut status = alice.status_stream();
    let big = serde_json::json!({"draft": "x".repeat(4096)}).as_object().unwrap().clone();
    alice.track(bucket.clone(), big);
    let refused = tokio::time::timeout(SOON, status.wait_for(|s| !s.connected)).await.is_ok();
    assert!(refused, "the server closes the connection that sent it");
    eventually(SOON, "alice reconnects", || async { alice.status().connected }).await;
    stays_connected(&alice).await;
    assert!(!bob.presence_state(&bucket).contains_key("alice"));
}

/// The client's stream stays up for two seconds.
async fn stays_connected(client: &Client) {
    let mut status = client.status_stream();
    let dropped = tokio::time::timeout(Duration::from_secs(2), status.wait_for(|s| !s.connected)).await.is_ok();
    assert!(!dropped, "the connection stays up: {:?}", client.status().last_error);
}

#[tokio::test]
async fn a_bucket_lost_leaves_the_subscription_and_presence_and_reconnections_are_not_refused() {
    use example_notes::mutators::{UnshareList, unshare_list};
    let (db, port, mut server) = server_process().await;
    let url = format!("http://127.0.0.1:{port}");
    let (owner, _) = shared_list(&url).await;
    let alice = notes_client(&url, "alice", StoreLocation::Memory, quiet).await;
    let bob = notes_client(&url, "bob", StoreLocation::Memory, quiet).await;
    let shared = engine::BucketKey::new("shared", &["l1"]);
    eventually(SOON, "both connect and bob holds the list", || async {
        alice.status().connected && bob.status().connected && bob.buckets().await.unwrap().contains(&shared)
    })
    .await;

    // Bob follows the shared list and his own lists, and is present in the shared one.
    let mut events = bob.presence_events();
    bob.subscribe(Some(vec![shared.clone(), engine::BucketKey::new("own", &["bob"])]));
    bob.track(shared.clone(), serde_json::json!({"editing": "title"}).as_object().unwrap().clone());
    eventually(SOON, "alice and bob see bob present", || async {
        alice.presence_state(&shared).contains_key("bob") && bob.presence_state(&shared).contains_key("bob")
    })
    .await;

    owner.mutate::<unshare_list>(UnshareList { list_id: "l1".into(), user_id: "bob".into() }).await.unwrap();
    owner.sync().await.unwrap();
    eventually(SOON, "bob loses the list", || async { bob.get::<List>(&"l1".to_owned()).await.unwrap().is_none() })
        .await;
    eventually(SOON, "alice sees bob leave", || async { !alice.presence_state(&shared).contains_key("bob") }).await;
    eventually(SOON, "bob follows the list no more", || async { bob.presence_state(&shared).is_empty() }).await;
    let emptied = tokio::time::timeout(SOON, async {
        loop {
            let event = events.recv().await.unwrap();
            if event.bucket == shared && event.state.is_empty() {
                return event;
            }
        }
    })
    .await;
    assert!(emptied.is_ok(), "the app hears that nobody is present in the lost bucket");

    // A new connection asks only for what bob still holds: the server does not refuse it, and
    // bob's own bucket still pings him.
    server.kill().await;
    eventually(SOON, "bob notices", || async { !bob.status().connected }).await;
    let _server = ServerProcess::start_on(&db.url, Duration::from_secs(30), port).await;
    eventually(Duration::from_secs(20), "bob reconnects", || async { bob.status().connected }).await;
    stays_connected(&bob).await;
    let phone = notes_client(&url, "bob", StoreLocation::Memory, |b| b.background(false)).await;
    phone.mutate::<create_list>(CreateList { id: Some("b1".into()), title: "from the phone".into() }).await.unwrap();
    phone.sync().await.unwrap();
    eventually(SOON, "a ping brings bob his new list", || async {
        bob.get::<List>(&"b1".to_owned()).await.unwrap().is_some()
    })
    .await;
    let error = bob.status().last_error.unwrap_or_default();
    assert!(!error.contains("forbidden"), "{error}");

    // Asking for a bucket never held is refused once; from then on the stream asks only for
    // buckets the store holds, and stays up.
    let own = engine::BucketKey::new("own", &["bob"]);
    let mut status = bob.status_stream();
    bob.subscribe(Some(vec![own, engine::BucketKey::new("shared", &["never"])]));
    // (`is_ok` drops the borrow of the status at once: held, it would block the client.)
    let refused = tokio::time::timeout(SOON, status.wait_for(|s| !s.connected)).await.is_ok();
    assert!(refused, "the server closes the connection that asked for it");
    eventually(SOON, "bob reconnects", || async { bob.status().connected }).await;
    stays_connected(&bob).await;
    phone.mutate::<create_list>(CreateList { id: Some("b2".into()), title: "again".into() }).await.unwrap();
    phone.sync().await.unwrap();
    eventually(SOON, "a ping brings bob that list too", || async {
        bob.get::<List>(&"b2".to_owned()).await.unwrap().is_some()
    })
    .await;
}

#[tokio::test]
async fn https_and_wss_server_urls_speak_tls() {
    use tokio::io::AsyncReadExt;
    // A listener that keeps the first bytes of every connection: a TLS handshake starts with
    // 0x16 (plain HTTP, and a plain WebSocket upgrade, with `G` or `P`). The HTTP client offers
    // `http/1.1` by ALPN in its hello; the stream's WebSocket offers none.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (hellos, mut seen) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
    let accept = tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            let hellos = hellos.clone();
            tokio::spawn(async move {
                let mut hello = vec![0u8; 4096];
                let mut read = 0;
                while read < 5 || read < 5 + usize::from(u16::from_be_bytes([hello[3], hello[4]])).min(4091) {
                    match socket.read(&mut hello[read..]).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => read += n,
                    }
                }
                hello.truncate(read);
                let _ = hellos.send(hello);
            });
        }
    });
    let client = notes_client(&format!("https://localhost:{port}"), "alice", StoreLocation::Memory, |b| b).await;
    let pulled = client.pull().await;
    assert!(matches!(pulled, Err(engine::client::Error::Network { .. })), "{pulled:?}");
    let offers_http = |hello: &[u8]| hello.windows(8).any(|w| w == b"http/1.1");
    let (mut https, mut wss) = (0, 0);
    while https < 2 || wss < 2 {
        let hello = tokio::time::timeout(SOON, seen.recv()).await.expect("the client keeps trying").unwrap();
        assert_eq!(hello.first(), Some(&0x16), "a TLS handshake: {:?}", String::from_utf8_lossy(&hello));
        if offers_http(&hello) { https += 1 } else { wss += 1 }
    }
    accept.abort();
}

/// Credentials that start out refused and are replaced by good ones on refresh.
#[derive(Clone)]
struct Expiring {
    token: engine::client::BearerToken,
    refreshes: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl engine::client::AuthProvider for Expiring {
    fn headers(&self) -> engine::client::BoxFuture<'_, engine::client::Result<Vec<(String, String)>>> {
        self.token.headers()
    }

    fn refresh(&self) -> engine::client::BoxFuture<'_, engine::client::Result<()>> {
        self.refreshes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.token.set(TestServer::token("alice"));
        Box::pin(async { Ok(()) })
    }

    fn actor(&self) -> Option<engine::Actor> {
        Some(engine::Actor::new("alice", "alice"))
    }
}

#[tokio::test]
async fn a_refused_token_is_refreshed_and_the_request_retried() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    // A token the server refuses (signed with a secret it does not know: revoked, say).
    let refused = engine::auth::issue_bearer_token(
        "alice",
        "alice",
        "an old secret, revoked since, of 32 bytes",
        Duration::from_secs(600),
    )
    .unwrap();
    let auth = Expiring { token: engine::client::BearerToken::new(refused), refreshes: Default::default() };
    let alice = Client::builder(server.url(""))
        .app(example_notes::app())
        .auth(auth.clone())
        .background(false)
        .build()
        .await
        .unwrap();
    alice.mutate::<create_list>(CreateList { id: Some("l1".into()), title: "fresh".into() }).await.unwrap();
    alice.sync().await.unwrap();
    assert_eq!(auth.refreshes.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(alice.status().pending, 0);
}

#[tokio::test]
async fn an_outbox_ahead_of_the_server_is_renumbered_from_its_last_mutation_id() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let alice = notes_client(&server.url(""), "alice", StoreLocation::Memory, |b| b.background(false)).await;
    for i in 0..3 {
        alice.mutate::<create_list>(CreateList { id: Some(format!("l{i}")), title: "x".into() }).await.unwrap();
    }
    alice.sync().await.unwrap();
    // The server forgets this client (restored from an older backup, say).
    sqlx::query("DELETE FROM _engine_clients").execute(&db.pool).await.unwrap();
    sqlx::query("DELETE FROM _engine_mutations").execute(&db.pool).await.unwrap();
    alice.mutate::<create_list>(CreateList { id: Some("l3".into()), title: "after".into() }).await.unwrap();
    alice.sync().await.unwrap();
    assert_eq!(alice.status().pending, 0);
    let recorded: Vec<i64> =
        sqlx::query_scalar("SELECT mutation_id FROM _engine_mutations").fetch_all(&db.pool).await.unwrap();
    assert_eq!(recorded, [1], "numbered on from the server's sequence");
    assert!(alice.get::<List>(&"l3".to_owned()).await.unwrap().is_some());
}

#[tokio::test]
async fn writes_the_server_lost_after_acknowledging_them_are_pushed_again() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let alice = notes_client(&server.url(""), "alice", StoreLocation::Memory, |b| b.background(false)).await;
    alice.mutate::<create_list>(CreateList { id: Some("l0".into()), title: "kept".into() }).await.unwrap();
    alice.sync().await.unwrap();
    alice.mutate::<create_list>(CreateList { id: Some("l1".into()), title: "lost".into() }).await.unwrap();
    alice.push().await.unwrap();
    assert_eq!(alice.status().pending, 1, "acknowledged, not yet shown by a pull");

    // The server is restored from a backup taken between the two.
    sqlx::query("DELETE FROM list_members WHERE list_id = 'l1'").execute(&db.pool).await.unwrap();
    sqlx::query("DELETE FROM lists WHERE id = 'l1'").execute(&db.pool).await.unwrap();
    sqlx::query("DELETE FROM _engine_mutations WHERE mutation_id = 2").execute(&db.pool).await.unwrap();
    sqlx::query("UPDATE _engine_clients SET last_mutation_id = 1").execute(&db.pool).await.unwrap();

    alice.sync().await.unwrap();
    assert_eq!(alice.status().pending, 0);
    assert!(alice.quarantined().await.unwrap().is_empty(), "{:?}", alice.quarantined().await);
    let lists: Vec<String> = sqlx::query_scalar("SELECT id FROM lists ORDER BY id").fetch_all(&db.pool).await.unwrap();
    assert_eq!(lists, ["l0", "l1"], "the lost write is applied again");
    assert!(alice.get::<List>(&"l1".to_owned()).await.unwrap().is_some());
}

#[tokio::test]
async fn a_copied_store_numbers_its_writes_on_instead_of_losing_them() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let url = server.url("");
    let dir = store_dir();
    let (original, copy) = (dir.join("laptop.db"), dir.join("restored.db"));
    let background = |b: engine::client::ClientBuilder| b.background(false);
    {
        let laptop = notes_client(&url, "alice", StoreLocation::File(original.clone()), background).await;
        laptop.mutate::<create_list>(CreateList { id: Some("l1".into()), title: "first".into() }).await.unwrap();
        laptop.sync().await.unwrap();
        laptop.close();
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    std::fs::copy(&original, &copy).unwrap();

    // Both go on from the same point under one client id.
    let laptop = notes_client(&url, "alice", StoreLocation::File(original), background).await;
    let restored = notes_client(&url, "alice", StoreLocation::File(copy), background).await;
    assert_eq!(laptop.client_id(), restored.client_id());
    laptop.mutate::<create_list>(CreateList { id: Some("l2".into()), title: "laptop".into() }).await.unwrap();
    laptop.sync().await.unwrap();
    restored.mutate::<create_list>(CreateList { id: Some("l3".into()), title: "restored".into() }).await.unwrap();
    restored.sync().await.unwrap();

    assert!(restored.quarantined().await.unwrap().is_empty(), "{:?}", restored.quarantined().await);
    assert_eq!(restored.status().pending, 0);
    let lists: Vec<String> = sqlx::query_scalar("SELECT id FROM lists ORDER BY id").fetch_all(&db.pool).await.unwrap();
    assert_eq!(lists, ["l1", "l2", "l3"], "both writes applied, once each");
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn rows_of_a_bucket_left_stay_for_its_ttl_and_rows_with_pending_writes_stay_longer() {
    use example_notes::mutators::{UnshareList, unshare_list};
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let url = server.url("");
    let alice = notes_client(&url, "alice", StoreLocation::Memory, |b| b.background(false)).await;
    let bob =
        notes_client(&url, "bob", StoreLocation::Memory, |b| b.background(false).bucket_ttl(Duration::from_secs(1)))
            .await;
    alice.mutate::<create_list>(CreateList { id: Some("l1".into()), title: "shared".into() }).await.unwrap();
    for id in ["n1", "n2"] {
        alice
            .mutate::<add_note>(AddNote { id: Some(id.into()), list_id: "l1".into(), title: id.into() })
            .await
            .unwrap();
    }
    share(&alice, "l1", "bob").await;
    alice.sync().await.unwrap();
    accept(&url, "bob", "l1").await;
    bob.pull().await.unwrap();
    assert!(note(&bob, "n1").await.is_some());

    alice.mutate::<unshare_list>(UnshareList { list_id: "l1".into(), user_id: "bob".into() }).await.unwrap();
    alice.sync().await.unwrap();
    // Bob edits n2 before he hears of it.
    bob.mutate::<update_note>(UpdateNote {
        id: "n2".into(),
        title: Some("mine now".into()),
        done: None,
        position: None,
    })
    .await
    .unwrap();
    bob.pull().await.unwrap();
    assert!(note(&bob, "n1").await.is_some(), "within the TTL the rows stay");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    bob.pull().await.unwrap();
    assert!(note(&bob, "n1").await.is_none(), "after the TTL they go");
    assert_eq!(note(&bob, "n2").await.map(|n| n.title), Some("mine now".into()), "a row with a pending write stays");
    // The server refuses the edit; with it gone, so is the row.
    bob.push().await.unwrap();
    bob.pull().await.unwrap();
    let quarantined = bob.quarantined().await.unwrap();
    assert_eq!(quarantined.len(), 1);
    assert!(note(&bob, "n2").await.is_none());
    // Discarded, it is gone for good.
    assert!(bob.discard_quarantined(quarantined[0].client_mutation_id).await.unwrap());
    assert!(bob.quarantined().await.unwrap().is_empty() && bob.status().quarantined.is_empty());
}

#[tokio::test]
async fn a_list_shared_again_drops_the_notes_deleted_while_it_was_not() {
    use example_notes::mutators::{NoteId, UnshareList, delete_note, unshare_list};
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let url = server.url("");
    let alice = notes_client(&url, "alice", StoreLocation::Memory, |b| b.background(false)).await;
    // Bob keeps the rows of a list he left for an hour; carol keeps them only while she has a
    // pending write to one.
    let bob =
        notes_client(&url, "bob", StoreLocation::Memory, |b| b.background(false).bucket_ttl(Duration::from_secs(3600)))
            .await;
    let carol = notes_client(&url, "carol", StoreLocation::Memory, |b| b.background(false)).await;
    alice.mutate::<create_list>(CreateList { id: Some("l1".into()), title: "shared".into() }).await.unwrap();
    for id in ["n1", "n2"] {
        let args = AddNote { id: Some(id.into()), list_id: "l1".into(), title: id.into() };
        alice.mutate::<add_note>(args).await.unwrap();
    }
    share(&alice, "l1", "bob").await;
    share(&alice, "l1", "carol").await;
    alice.sync().await.unwrap();
    for user in ["bob", "carol"] {
        accept(&url, user, "l1").await;
    }
    for member in [&bob, &carol] {
        member.pull().await.unwrap();
        assert!(note(member, "n1").await.is_some());
    }
    let edit = UpdateNote { id: "n1".into(), title: Some("carol's".into()), done: None, position: None };
    carol.mutate::<update_note>(edit).await.unwrap();

    for user in ["bob", "carol"] {
        let args = UnshareList { list_id: "l1".into(), user_id: user.into() };
        alice.mutate::<unshare_list>(args).await.unwrap();
    }
    alice.sync().await.unwrap();
    for member in [&bob, &carol] {
        member.pull().await.unwrap();
        assert!(note(member, "n1").await.is_some(), "kept: for the TTL, or for the pending write");
    }
    // While they are out, n1 goes and n2 changes; then the list is theirs again.
    alice.mutate::<delete_note>(NoteId { id: "n1".into() }).await.unwrap();
    let edit = UpdateNote { id: "n2".into(), title: Some("renamed".into()), done: None, position: None };
    alice.mutate::<update_note>(edit).await.unwrap();
    share(&alice, "l1", "bob").await;
    share(&alice, "l1", "carol").await;
    alice.sync().await.unwrap();
    for user in ["bob", "carol"] {
        accept(&url, user, "l1").await;
    }

    carol.push().await.unwrap();
    for (member, user) in [(&bob, "bob"), (&carol, "carol")] {
        member.pull().await.unwrap();
        assert!(note(member, "n1").await.is_none(), "the deleted note is gone");
        assert_eq!(note(member, "n2").await.map(|n| n.title), Some("renamed".into()));
        let fresh = notes_client(&url, user, StoreLocation::Memory, |b| b.background(false)).await;
        fresh.pull().await.unwrap();
        assert_eq!(snapshot(member).await, snapshot(&fresh).await, "the replica equals a fresh pull");
    }
    assert_eq!(carol.quarantined().await.unwrap().len(), 1, "carol's edit of the deleted note is refused");
}

/// The notes app as a later version might have it: `notes` gains a column (v2), then changes a
/// column's type (v3).
mod later {
    use engine::{BlobKey, CrdtText, Timestamp};
    use example_notes::{List, ListMember};

    /// Notes with a colour.
    #[engine::table(name = "notes", merge = "field")]
    #[derive(Debug, Clone, PartialEq)]
    pub(crate) struct NoteV2 {
        #[engine(primary_key)]
        pub(crate) id: String,
        #[engine(owner)]
        pub(crate) owner_id: String,
        pub(crate) list_id: String,
        pub(crate) title: String,
        pub(crate) done: bool,
        pub(crate) position: i64,
        pub(crate) body: CrdtText,
        pub(crate) image: Option<BlobKey>,
        #[engine(soft_delete)]
        pub(crate) deleted_at: Option<Timestamp>,
        pub(crate) color: Option<String>,
    }

    /// Notes whose position became text.
    #[engine::table(name = "notes", merge = "field")]
    #[derive(Debug, Clone, PartialEq)]
    pub(crate) struct NoteV3 {
        #[engine(primary_key)]
        pub(crate) id: String,
        #[engine(owner)]
        pub(crate) owner_id: String,
        pub(crate) list_id: String,
        pub(crate) title: String,
        pub(crate) done: bool,
        pub(crate) position: String,
        pub(crate) body: CrdtText,
        pub(crate) image: Option<BlobKey>,
        #[engine(soft_delete)]
        pub(crate) deleted_at: Option<Timestamp>,
    }

    macro_rules! rules_for {
        ($module:ident, $note:ident) => {
            #[engine::sync_rules]
            pub(crate) mod $module {
                use super::{$note, List, ListMember};

                /// What the actor owns.
                #[bucket(name = "own", data(List::owner_id == bucket.owner_id, $note::owner_id == bucket.owner_id, ListMember::owner_id == bucket.owner_id), write(List, $note, ListMember))]
                #[derive(Debug)]
                pub(crate) struct Own {
                    #[param(actor.owner_id)]
                    pub(crate) owner_id: String,
                }

                /// The lists the actor is a member of.
                #[bucket(name = "shared", membership(ListMember::user_id == actor.user_id), data(List::id == bucket.list_id, $note::list_id == bucket.list_id, ListMember::list_id == bucket.list_id), write(List, $note, ListMember))]
                #[derive(Debug)]
                pub(crate) struct Shared {
                    #[param(ListMember::list_id)]
                    pub(crate) list_id: String,
                }
            }
        };
    }
    rules_for!(rules_v2, NoteV2);
    rules_for!(rules_v3, NoteV3);

    pub(crate) fn v2() -> engine::App {
        engine::app! { tables: [List, ListMember, NoteV2], mutators: [], sync_rules: rules_v2 }
    }

    pub(crate) fn v3() -> engine::App {
        engine::app! { tables: [List, ListMember, NoteV3], mutators: [], sync_rules: rules_v3 }
    }
}

#[tokio::test]
async fn the_store_follows_the_app_keeping_rows_and_outbox() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let url = server.url("");
    let dir = store_dir();
    let store = StoreLocation::File(dir.join("alice.db"));
    let open = |app: engine::App| {
        let (url, store) = (url.clone(), store.clone());
        async move { notes_client(&url, "alice", store, |b| b.app(app).background(false)).await }
    };

    let v1 = open(example_notes::app()).await;
    v1.mutate::<create_list>(CreateList { id: Some("l1".into()), title: "kept".into() }).await.unwrap();
    v1.mutate::<add_note>(AddNote { id: Some("n1".into()), list_id: "l1".into(), title: "synced".into() })
        .await
        .unwrap();
    v1.sync().await.unwrap();
    v1.mutate::<add_note>(AddNote { id: Some("n2".into()), list_id: "l1".into(), title: "queued".into() })
        .await
        .unwrap();
    drop(v1);

    // A column added: the rows stay, readable at once; the outbox stays.
    let v2 = open(later::v2()).await;
    let notes = v2.collection::<later::NoteV2>().all().await.unwrap();
    assert_eq!(notes.iter().map(|n| (n.id.as_str(), n.color.clone())).collect::<Vec<_>>(), [("n1", None)]);
    assert_eq!(v2.status().pending, 1);
    v2.sync().await.unwrap();
    assert_eq!(v2.status().pending, 0, "the queued mutation went out under the new app");
    let ids: Vec<String> = v2.collection::<later::NoteV2>().all().await.unwrap().into_iter().map(|n| n.id).collect();
    assert_eq!(ids, ["n1", "n2"]);
    drop(v2);

    // A column's type changed: the table is rebuilt and pulled again.
    let v3 = open(later::v3()).await;
    assert!(v3.collection::<later::NoteV3>().all().await.unwrap().is_empty(), "nothing of the old shape is read");
    v3.pull().await.unwrap();
    let notes = v3.collection::<later::NoteV3>().all().await.unwrap();
    assert_eq!(notes.len(), 2);
    assert!(notes.iter().all(|n| n.position.parse::<i64>().is_ok()), "positions come back as their text");
    assert!(v3.get::<List>(&"l1".to_owned()).await.unwrap().is_some(), "other tables keep their rows");
    drop(v3);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn status_and_collections_tell_a_ui_when_to_render_again() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let alice = notes_client(&server.url(""), "alice", StoreLocation::Memory, |b| b.background(false)).await;
    let mut status = alice.status_stream();
    let mut lists = alice.collection::<List>().changes();
    let mut in_l1 = alice.collection::<Note>().live(Note::list_id.eq("l1"));
    assert!(in_l1.next().await.unwrap().is_empty(), "a live query gives its rows at once");

    alice.mutate::<create_list>(CreateList { id: Some("l1".into()), title: "watched".into() }).await.unwrap();
    tokio::time::timeout(SOON, lists.changed()).await.unwrap().unwrap();
    tokio::time::timeout(SOON, status.wait_for(|s| s.pending == 1)).await.unwrap().unwrap();

    // A note elsewhere changes the table, not the query; a note in l1 changes both.
    alice.mutate::<create_list>(CreateList { id: Some("l2".into()), title: "other".into() }).await.unwrap();
    alice.mutate::<add_note>(AddNote { id: Some("n2".into()), list_id: "l2".into(), title: "x".into() }).await.unwrap();
    alice.mutate::<add_note>(AddNote { id: Some("n1".into()), list_id: "l1".into(), title: "y".into() }).await.unwrap();
    let notes = tokio::time::timeout(SOON, in_l1.next()).await.unwrap().unwrap();
    assert_eq!(notes.iter().map(|n| n.id.as_str()).collect::<Vec<_>>(), ["n1"]);
    alice.mutate::<add_note>(AddNote { id: Some("n3".into()), list_id: "l2".into(), title: "z".into() }).await.unwrap();
    let woken = tokio::time::timeout(Duration::from_millis(300), in_l1.next()).await;
    assert!(woken.is_err(), "a write outside the query gives nothing new: {woken:?}");

    alice.sync().await.unwrap();
    let synced = tokio::time::timeout(SOON, status.wait_for(|s| s.pending == 0 && s.last_pull_at.is_some()))
        .await
        .unwrap()
        .unwrap()
        .clone();
    assert!(!synced.syncing && synced.last_error.is_none(), "{synced:?}");

    // A mutation its local run refuses is not queued, and says why.
    let refused = alice.mutate::<add_note>(AddNote { id: None, list_id: "nope".into(), title: "x".into() }).await;
    assert!(matches!(refused, Err(engine::client::Error::Mutation(engine::Error::MutatorFailed(_)))), "{refused:?}");
    assert_eq!(alice.status().pending, 0);

    // An unreachable server is reported, and the write waits.
    drop(server);
    alice.mutate::<add_note>(AddNote { id: None, list_id: "l1".into(), title: "later".into() }).await.unwrap();
    assert!(alice.push().await.is_err());
    let status = alice.status();
    assert_eq!(status.pending, 1);
    assert!(status.last_error.as_deref().is_some_and(|e| e.starts_with("network")), "{status:?}");
}

#[tokio::test]
async fn scope_helpers_and_a_narrowed_subscription() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let url = server.url("");
    let (alice, _) = shared_list(&url).await;
    let bob = notes_client(&url, "bob", StoreLocation::Memory, |b| b.pull_interval(Duration::from_secs(3600))).await;
    eventually(SOON, "bob connects and pulls", || async {
        bob.status().connected && bob.status().last_pull_at.is_some()
    })
    .await;
    let shared = engine::BucketKey::new("shared", &["l1"]);
    assert_eq!(bob.buckets_for_rule("shared").await.unwrap(), std::slice::from_ref(&shared));
    assert!(bob.buckets().await.unwrap().contains(&shared));
    assert!(bob.cursor().await.unwrap().is_some());

    // Following only his own bucket, bob is not pinged for the shared list.
    bob.subscribe(Some(vec![engine::BucketKey::new("own", &["bob"])]));
    tokio::time::sleep(Duration::from_millis(300)).await;
    alice
        .mutate::<add_note>(AddNote { id: Some("quiet".into()), list_id: "l1".into(), title: "unheard".into() })
        .await
        .unwrap();
    alice.sync().await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(note(&bob, "quiet").await.is_none(), "no ping, no pull");
    // Back to everything: the next connection follows all buckets and catches up.
    bob.subscribe(None);
    eventually(SOON, "bob catches up", || async { note(&bob, "quiet").await.is_some() }).await;
}

#[tokio::test]
async fn a_write_after_a_pull_wins_over_what_a_fast_clock_wrote_before() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let url = server.url("");
    let alice = notes_client(&url, "alice", StoreLocation::Memory, |b| b).await;
    alice.mutate::<create_list>(CreateList { id: Some("l1".into()), title: "groceries".into() }).await.unwrap();
    alice
        .mutate::<add_note>(AddNote { id: Some("n1".into()), list_id: "l1".into(), title: "milk".into() })
        .await
        .unwrap();
    eventually(SOON, "the note reaches the server", || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM notes").fetch_one(&db.pool).await.unwrap() == 1
    })
    .await;

    // Another device of alice's, its clock 59 s ahead, renames the note.
    let ahead = engine::hlc::wall_clock_ms() + 59_000;
    let fast = serde_json::json!({"clientId": "0192f0e0-0000-7000-8000-0000000000fa", "mutations": [{
        "mutationId": 1, "clientMutationId": "0192f0e0-0000-7000-8000-00000000fa01", "name": "update_note",
        "args": {"id": "n1", "title": "from the fast clock"}, "hlc": format!("{ahead:013}-0000-fast")}]});
    let response = server.post("/sync/push", Some("alice"), fast.to_string()).await;
    assert_eq!(response.status(), reqwest::StatusCode::OK);
    eventually(SOON, "the client pulls the fast write", || async {
        note(&alice, "n1").await.is_some_and(|n| n.title == "from the fast clock")
    })
    .await;

    // The client's clock is behind that stamp (pulled back to a second past the server's);
    // having pulled it, its rename still wins.
    alice
        .mutate::<update_note>(UpdateNote {
            id: "n1".into(),
            title: Some("after the pull".into()),
            done: None,
            position: None,
        })
        .await
        .unwrap();
    eventually(SOON, "the later write is the one that stays", || async {
        let title: String =
            sqlx::query_scalar("SELECT title FROM notes WHERE id = 'n1'").fetch_one(&db.pool).await.unwrap();
        title == "after the pull"
    })
    .await;
}

/// A mutator that retitles notes and goes on past every error: a refused write still fails it.
mod quietly {
    use engine::{MutatorCtx, Outcome, Result};
    use example_notes::Note;

    #[engine::args]
    pub(crate) struct Retitle {
        pub ids: Vec<String>,
        pub title: String,
    }

    /// Retitle each of `ids`, ignoring what fails.
    #[engine::mutator]
    pub(crate) async fn retitle_quietly(ctx: &mut MutatorCtx<'_>, args: Retitle) -> Result<Outcome> {
        for id in &args.ids {
            let _ignored = ctx.update::<Note>(id, [Note::title.set(args.title.clone())]).await;
        }
        Ok(Outcome::new())
    }

    /// The notes app with `retitle_quietly`, which only the client knows: a mutation of it that
    /// reached the server would be rejected as unknown, not `forbidden`.
    pub(crate) fn app() -> engine::App {
        use example_notes::mutators::*;
        engine::app! {
            tables: [example_notes::List, example_notes::ListMember, Note],
            mutators: [create_list, share_list, accept_list, unshare_list, add_note, update_note, edit_note_body, move_note, delete_note, purge_note, retitle_quietly],
            sync_rules: example_notes::rules,
        }
    }
}

#[tokio::test]
async fn a_viewers_edit_is_refused_offline_in_the_servers_words_and_an_editors_goes_through() {
    use crate::support::actors;
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let url = server.url("");
    let alice = notes_client(&url, "alice", StoreLocation::Memory, |b| b.background(false)).await;
    alice.mutate::<create_list>(CreateList { id: Some("l1".into()), title: "shared".into() }).await.unwrap();
    alice
        .mutate::<add_note>(AddNote { id: Some("n1".into()), list_id: "l1".into(), title: "milk".into() })
        .await
        .unwrap();
    share(&alice, "l1", "bob").await;
    let viewer = ShareList { list_id: "l1".into(), user_id: "carol".into(), role: ShareRole::Viewer };
    alice.mutate::<share_list>(viewer).await.unwrap();
    alice.sync().await.unwrap();
    for user in ["bob", "carol"] {
        accept(&url, user, "l1").await;
    }
    let bob = notes_client(&url, "bob", StoreLocation::Memory, |b| b.background(false)).await;
    let carol = notes_client(&url, "carol", StoreLocation::Memory, |b| b.background(false).app(quietly::app())).await;
    bob.pull().await.unwrap();
    carol.pull().await.unwrap();
    let seen = note(&carol, "n1").await.expect("carol sees the note");

    // The server's words for carol's edit, pushed raw from another device of hers.
    let edit = UpdateNote { id: "n1".into(), title: Some("carol's".into()), done: None, position: None };
    let raw = actors::push(&server, "carol", 1, "update_note", serde_json::to_value(&edit).unwrap()).await;
    let words = actors::forbidden(&raw, &[]);

    // Her client refuses the same write offline, in those words: nothing written, nothing queued.
    let refused = carol.mutate::<update_note>(edit).await;
    match &refused {
        Err(engine::client::Error::Mutation(error @ engine::Error::Forbidden(_))) => {
            assert_eq!(error.to_string(), words);
        }
        other => panic!("not refused as `forbidden`: {other:?}"),
    }
    // Also when the mutator goes on past the refusal, as the server fails the whole mutation.
    let quiet = quietly::Retitle { ids: vec!["n1".into()], title: "carol's".into() };
    let refused = carol.mutate_named("retitle_quietly", serde_json::to_value(&quiet).unwrap()).await;
    assert!(
        matches!(&refused, Err(engine::client::Error::Mutation(error @ engine::Error::Forbidden(_))) if error.to_string() == words),
        "{refused:?}"
    );
    assert_eq!(carol.status().pending, 0);
    assert_eq!(note(&carol, "n1").await.map(|n| n.title), Some("milk".into()));
    assert_eq!(carol.may_update(&seen).await.unwrap(), Some(false));

    // Bob, an editor, edits it: it goes through.
    assert_eq!(bob.may_update(&seen).await.unwrap(), Some(true));
    let edit = UpdateNote { id: "n1".into(), title: Some("oat milk".into()), done: None, position: None };
    bob.mutate::<update_note>(edit).await.unwrap();
    bob.sync().await.unwrap();
    alice.pull().await.unwrap();
    assert_eq!(note(&alice, "n1").await.map(|n| n.title), Some("oat milk".into()));
    assert!(bob.quarantined().await.unwrap().is_empty());
}

#[tokio::test]
async fn the_status_tells_how_far_a_first_sync_has_got() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let url = server.url("");
    let alice = notes_client(&url, "alice", StoreLocation::Memory, |b| b.background(false)).await;
    for list in 0..8 {
        let id = format!("l{list}");
        alice.mutate::<create_list>(CreateList { id: Some(id.clone()), title: id.clone() }).await.unwrap();
        for note in 0..3 {
            let args = AddNote { id: Some(format!("{id}-{note}")), list_id: id.clone(), title: "n".into() };
            alice.mutate::<add_note>(args).await.unwrap();
        }
    }
    alice.sync().await.unwrap();

    // A fresh client of the same user, five entries a page: its status says where each page is.
    let fresh = notes_client(&url, "alice", StoreLocation::Memory, |b| b.background(false).pull_page(5)).await;
    let mut status = fresh.status_stream();
    let seen = tokio::spawn(async move {
        let mut seen = Vec::new();
        // Until the client is gone.
        while status.changed().await.is_ok() {
            seen.push(status.borrow_and_update().progress);
        }
        seen
    });
    fresh.pull().await.unwrap();
    assert_eq!(fresh.status().progress, None, "no pull runs");
    drop(fresh);
    let seen: Vec<_> = seen.await.unwrap().into_iter().flatten().collect();
    assert!(seen.iter().any(|p| p.done > 0 && p.done < p.total), "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0].done <= w[1].done), "{seen:?}");
}

/// Issue 37: a client whose presence the server refused as too many (`too_many_presences`)
/// announced the same presences on every connection, and had each closed in turn. It holds them
/// back, says so in its status, and stays connected; a change of presence is announced again.
#[tokio::test]
async fn presence_refused_as_too_many_is_held_back_and_the_stream_stays_up() {
    let db = TestDb::new().await;
    let mut limits = engine::server::StreamLimits::default();
    limits.presences_per_actor = 1;
    let server = TestServer::start(&db, move |b| b.stream_limits(limits)).await;
    let url = server.url("");
    drop(shared_list(&url).await);
    let alice = notes_client(&url, "alice", StoreLocation::Memory, |b| b).await;
    let (own, shared) = (engine::BucketKey::new("own", &["alice"]), engine::BucketKey::new("shared", &["l1"]));
    eventually(SOON, "alice connects and holds the list", || async {
        alice.status().connected && alice.buckets().await.unwrap().contains(&shared)
    })
    .await;
    let mut status = alice.status_stream();
    let meta = serde_json::json!({"at": "list"}).as_object().unwrap().clone();
    alice.track(own.clone(), meta.clone());
    alice.track(shared.clone(), meta.clone());
    let refused = tokio::time::timeout(SOON, status.wait_for(|s| s.presence_refused)).await.is_ok();
    assert!(refused, "the server refuses the second presence: {:?}", alice.status());
    eventually(SOON, "alice reconnects", || async { alice.status().connected }).await;
    stays_connected(&alice).await;
    // The same meta tracked again changes nothing; an untrack announces what is left.
    alice.track(shared.clone(), meta.clone());
    assert!(alice.status().presence_refused);
    alice.untrack(&own);
    assert!(!alice.status().presence_refused);
    stays_connected(&alice).await;
}
