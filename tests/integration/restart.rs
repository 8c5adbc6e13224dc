//! A rolling restart: three server processes on one database behind a round-robin balancer,
//! each stopped with SIGTERM and started again in turn while clients push and stream. Nothing
//! is lost or applied twice, and every client converges through the stream alone.

use std::time::Duration;

use engine::client::{Client, Reconnect, StoreLocation};
use example_notes::mutators::{AddNote, CreateList, ShareList, ShareRole, add_note, create_list, share_list};
use example_notes::{List, Note};
use tokio::sync::watch;

use crate::support::balancer::Balancer;
use crate::support::client::{eventually, notes_client};
use crate::support::notes::accept;
use crate::support::process::{ServerProcess, free_port};
use crate::support::ws::{Auth, Ws};
use crate::support::{TestDb, TestServer, postgres_only};

const CONVERGE: Duration = Duration::from_secs(60);

async fn notes_in_database(db: &TestDb) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM notes").fetch_one(&db.pool).await.unwrap()
}

/// Wait until the clients' writes have gone through: `more` notes beyond those there now.
async fn writes_go_through(db: &TestDb, more: i64) {
    let before = notes_in_database(db).await;
    eventually(CONVERGE, "the clients' writes go through", || async { notes_in_database(db).await >= before + more })
        .await;
}

/// A client's notes, by id, as its replica holds them.
async fn replica(client: &Client) -> Vec<(String, String, String)> {
    let mut notes: Vec<(String, String, String)> =
        client.collection::<Note>().all().await.unwrap().into_iter().map(|n| (n.id, n.list_id, n.title)).collect();
    notes.sort();
    notes
}

/// Add a note to `list` every 20 ms until `stop`; the ids of the notes added.
fn keep_writing(
    client: Client,
    list: &'static str,
    mut stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<Vec<String>> {
    tokio::spawn(async move {
        let mut ids = Vec::new();
        while !*stop.borrow() {
            let args = AddNote { id: None, list_id: list.into(), title: format!("note {}", ids.len()) };
            let queued = client.mutate::<add_note>(args).await.unwrap();
            ids.push(queued.outcome.server_id.expect("the local run names the note"));
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(20)) => {}
                _ = stop.changed() => {}
            }
        }
        ids
    })
}

#[tokio::test]
async fn a_rolling_restart_loses_nothing_applies_nothing_twice_and_every_client_converges() {
    if postgres_only("several server processes on one database behind a balancer") {
        return;
    }
    let db = TestDb::new().await;
    db.notes().await;
    let ports = [free_port(), free_port(), free_port()];
    let mut servers = Vec::new();
    for port in ports {
        servers.push(ServerProcess::start_on(&db.url, Duration::from_secs(30), port).await);
    }
    let balancer = Balancer::start(servers.iter().map(|s| s.addr).collect()).await;
    let url = balancer.url();
    // No periodic pull: what a client learns after the setup comes through its stream (a ping,
    // or the pull of a new connection), so a socket that did not come back would show.
    let client = |user: &'static str| {
        notes_client(&url, user, StoreLocation::Memory, |b| b.pull_interval(Duration::from_secs(3600)))
    };
    let (alice, bob, carol) = (client("alice").await, client("bob").await, client("carol").await);
    alice.mutate::<create_list>(CreateList { id: Some("shared".into()), title: "shared".into() }).await.unwrap();
    let share = ShareList { list_id: "shared".into(), user_id: "bob".into(), role: ShareRole::Editor };
    alice.mutate::<share_list>(share).await.unwrap();
    accept(&url, "bob", "shared").await;
    carol.mutate::<create_list>(CreateList { id: Some("own".into()), title: "carol's".into() }).await.unwrap();
    eventually(CONVERGE, "bob holds the shared list", || async {
        bob.get::<List>(&"shared".to_owned()).await.unwrap().is_some()
    })
    .await;

    let (stop, stopped) = watch::channel(false);
    let writers = [
        keep_writing(alice.clone(), "shared", stopped.clone()),
        keep_writing(bob.clone(), "shared", stopped.clone()),
        keep_writing(carol.clone(), "own", stopped),
    ];
    for (server, port) in servers.iter_mut().zip(ports) {
        writes_go_through(&db, 15).await;
        server.terminate().await;
        *server = ServerProcess::start_on(&db.url, Duration::from_secs(30), port).await;
    }
    writes_go_through(&db, 15).await;
    stop.send_replace(true);
    let mut written = Vec::new();
    for writer in writers {
        written.push(writer.await.unwrap());
    }

    let clients = [("alice", &alice), ("bob", &bob), ("carol", &carol)];
    for (user, client) in clients {
        eventually(CONVERGE, &format!("{user}'s outbox drains"), || async { client.status().pending == 0 }).await;
        assert!(client.quarantined().await.unwrap().is_empty(), "{user} has nothing quarantined");
    }

    // Every note once, with the id its client chose.
    let mut expected: Vec<String> = written.concat();
    expected.sort();
    let mut stored: Vec<String> = sqlx::query_scalar("SELECT id FROM notes").fetch_all(&db.pool).await.unwrap();
    stored.sort();
    assert_eq!(stored.len(), expected.len(), "as many notes as were added");
    assert_eq!(stored, expected, "every note added, none twice");

    // Every mutation recorded once, applied, in an unbroken sequence per client.
    let setup = [2, 0, 1];
    for (((user, client), notes), setup) in clients.iter().zip(&written).zip(setup) {
        let made = (notes.len() + setup) as i64;
        let (recorded, last, applied): (i64, Option<i64>, i64) = sqlx::query_as(
            "SELECT count(*), max(mutation_id), count(*) FILTER (WHERE status = 'applied')
             FROM _engine_mutations WHERE user_id = $1 AND CAST(client_id AS TEXT) = $2",
        )
        .bind(user)
        .bind(client.client_id().to_string())
        .fetch_one(&db.pool)
        .await
        .unwrap();
        assert_eq!((recorded, last, applied), (made, Some(made), made), "{user}'s mutations");
    }

    // Every replica equals what a fresh client of the same user pulls.
    for (user, client) in clients {
        let fresh = notes_client(&url, user, StoreLocation::Memory, |b| b.background(false)).await;
        fresh.pull().await.unwrap();
        let truth = replica(&fresh).await;
        assert!(!truth.is_empty());
        eventually(CONVERGE, &format!("{user}'s replica equals a fresh pull"), || async {
            replica(client).await == truth
        })
        .await;
    }
    let shared = written[0].len() + written[1].len();
    assert_eq!(replica(&bob).await.len(), shared, "bob holds every note of the shared list");
}

#[tokio::test]
async fn a_stopping_instance_closes_its_sockets_with_1012_and_exits_cleanly() {
    let db = TestDb::new().await;
    db.notes().await;
    let mut server = ServerProcess::start(&db.url, Duration::from_secs(30)).await;
    let token = TestServer::token("alice");
    let mut socket = Ws::connect(server.addr, Auth::Header(&token)).await.unwrap();
    let addr = server.addr;
    let stopping = tokio::spawn(async move {
        server.terminate().await;
    });
    let (code, close) = socket.closed(CONVERGE).await;
    assert_eq!(code.as_deref(), Some("retry_later"), "the socket is told to come back");
    assert_eq!(close, Some(1012), "service restart");
    stopping.await.unwrap();
    assert!(tokio::net::TcpStream::connect(addr).await.is_err(), "the stopped instance takes no connection");
}

#[tokio::test]
async fn a_client_follows_a_restart_to_another_instance_at_once() {
    if postgres_only("two server processes on one database") {
        return;
    }
    let db = TestDb::new().await;
    db.notes().await;
    let mut first = ServerProcess::start(&db.url, Duration::from_secs(30)).await;
    let second_port = free_port();
    let second_addr = std::net::SocketAddr::from(([127, 0, 0, 1], second_port));
    // Until the second instance starts, every connection goes to the first.
    let balancer = Balancer::start(vec![first.addr, second_addr]).await;
    let url = balancer.url();
    // A lost connection would wait up to an hour before the next attempt, and nothing is pulled
    // but what the stream asks for: only the restart's close code brings the client back soon.
    let patient = Reconnect::default().backoff(Duration::from_secs(3600), Duration::from_secs(3600));
    let alice = notes_client(&url, "alice", StoreLocation::Memory, |b| {
        b.reconnect(patient).pull_interval(Duration::from_secs(3600))
    })
    .await;
    let bob = notes_client(&url, "bob", StoreLocation::Memory, |b| b.background(false)).await;
    alice.mutate::<create_list>(CreateList { id: Some("shared".into()), title: "shared".into() }).await.unwrap();
    let share = ShareList { list_id: "shared".into(), user_id: "bob".into(), role: ShareRole::Editor };
    alice.mutate::<share_list>(share).await.unwrap();
    accept(&url, "bob", "shared").await;
    eventually(CONVERGE, "alice's outbox drains", || async { alice.status().pending == 0 }).await;
    eventually(CONVERGE, "alice's stream is up", || async { alice.status().connected }).await;

    let _second = ServerProcess::start_on(&db.url, Duration::from_secs(30), second_port).await;
    first.terminate().await;
    // A transaction of the stopped instance stays open until its database session notices the
    // closed socket, and the horizon holds back what committed after it began until then.
    eventually(CONVERGE, "bob sees the shared list", || async {
        bob.pull().await.unwrap();
        bob.get::<List>(&"shared".to_owned()).await.unwrap().is_some()
    })
    .await;
    let args = AddNote { id: None, list_id: "shared".into(), title: "after the restart".into() };
    let note = bob.mutate::<add_note>(args).await.unwrap().outcome.server_id.unwrap();
    bob.push().await.unwrap();
    eventually(CONVERGE, "bob's note reaches alice through her new stream", || async {
        alice.get::<Note>(&note).await.unwrap().is_some()
    })
    .await;
}
