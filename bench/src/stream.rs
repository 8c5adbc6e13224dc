//! Fan-out benchmark, as a broadcast: N sockets of N different users on one server process, all
//! members of one shared list, and 20 commits a second into that list (one `add_note` per
//! push). For each commit and each socket, the time from the push being sent to the first ping
//! of the list that socket receives after the push was answered (a ping covers every commit
//! before it, so this errs long, never short); and the server's memory per idle socket: the
//! growth of its resident memory while the last 90% of the sockets connect, per socket (the
//! first 10% warm up what does not grow with sockets: the pool, caches, the allocator's arenas).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::db::{BenchDb, notes_server};
use crate::wire::{ServerProcess, WireClient, cpu_seconds, ms, percentile, resident_kib, token};

/// Commits a second into the shared list, and for how long.
const COMMITS_PER_SECOND: u64 = 20;
const COMMIT_SECONDS: u64 = 10;

/// The server process of the benchmarks (`engine-bench serve`).
pub(crate) async fn serve() {
    let url = std::env::var("DATABASE_URL").expect("DATABASE_URL");
    // The many-bucket actor holds 10,000 shared lists and her own bucket: past the default.
    let limits = engine::storage::StoreLimits::default().buckets_per_actor(20_000);
    let (addr, task) = notes_server(engine::storage::postgres(url).limits(limits)).await;
    println!("listening on {addr}");
    task.await.expect("serve");
}

pub(crate) async fn run(counts: &[usize]) {
    let mut rows = Vec::new();
    for &count in counts {
        rows.push((count, broadcast(count).await));
    }
    println!(
        "\n## Fan-out: N sockets of different users in one shared list, {COMMITS_PER_SECOND} commits/s for {COMMIT_SECONDS} s\n"
    );
    println!(
        "| sockets | pings | p50 push → ping | p99 push → ping | memory per idle socket | load generator CPU share |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    for (count, r) in rows {
        println!(
            "| {count} | {} | {:.1} ms | {:.1} ms | {:.1} KiB | {:.0}% |",
            r.pings,
            ms(r.p50),
            ms(r.p99),
            r.kib_per_socket,
            r.generator_share * 100.0
        );
    }
}

struct Broadcast {
    pings: usize,
    p50: Duration,
    p99: Duration,
    kib_per_socket: f64,
    generator_share: f64,
}

async fn broadcast(count: usize) -> Broadcast {
    let db = BenchDb::new(4).await;
    db.storage(example_notes::app()).await;
    let server = ServerProcess::start(&db).await;
    // user-0 owns the list and shares it with everyone else.
    let mut owner = WireClient::new(&server, "user-0");
    owner.push(&[("create_list", json!({"id": "room", "title": "room"}))]).await;
    let members: Vec<usize> = (1..count).collect();
    for chunk in members.chunks(250) {
        let shares: Vec<(&str, Value)> = chunk
            .iter()
            .map(|u| ("share_list", json!({"list_id": "room", "user_id": format!("user-{u}"), "role": "viewer"})))
            .collect();
        owner.push(&shares).await;
    }

    let addr = server.addr;
    let (pings, mut pinged) = mpsc::unbounded_channel::<(usize, Instant)>();
    let (ready, mut connected) = mpsc::unbounded_channel::<()>();
    let mut sockets = Vec::with_capacity(count);
    let gate = Arc::new(tokio::sync::Semaphore::new(200));
    let warm_up = (count / 10).max(1);
    let mut before = 0;
    for user in 0..count {
        if user == warm_up {
            for _ in 0..warm_up {
                connected.recv().await.unwrap();
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            before = resident_kib(server.pid);
        }
        let (pings, ready, gate) = (pings.clone(), ready.clone(), gate.clone());
        sockets.push(tokio::spawn(async move {
            let permit = gate.acquire_owned().await.unwrap();
            let mut request = format!("ws://{addr}/sync/stream").into_client_request().unwrap();
            request
                .headers_mut()
                .insert("authorization", format!("Bearer {}", token(&format!("user-{user}"))).parse().unwrap());
            request.headers_mut().insert("sec-websocket-protocol", "engine.v1".parse().unwrap());
            let (socket, _) = tokio_tungstenite::connect_async(request).await.expect("connect");
            let (mut sink, mut stream) = socket.split();
            // The first frame (presence of its buckets) says the socket is set up.
            let _ = stream.next().await;
            drop(permit);
            let _ = ready.send(());
            let mut beat = tokio::time::interval(Duration::from_secs(10));
            loop {
                tokio::select! {
                    frame = stream.next() => match frame {
                        Some(Ok(Message::Text(text))) => {
                            if text.contains(r#""ping""#) && text.contains("shared/room") {
                                let _ = pings.send((user, Instant::now()));
                            }
                        }
                        Some(Ok(_)) => {}
                        _ => return,
                    },
                    _ = beat.tick() => {
                        if sink.send(Message::Text(r#"{"type":"heartbeat"}"#.into())).await.is_err() {
                            return;
                        }
                    }
                }
            }
        }));
    }
    for _ in warm_up..count {
        connected.recv().await.unwrap();
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = resident_kib(server.pid);
    while pinged.try_recv().is_ok() {}

    // The commits: (sent, answered).
    let commits: Arc<Mutex<Vec<(Instant, Instant)>>> = Arc::default();
    let (server_cpu, own_cpu) = (cpu_seconds(server.pid), cpu_seconds(std::process::id()));
    let mut every = tokio::time::interval(Duration::from_millis(1000 / COMMITS_PER_SECOND));
    for n in 0..COMMITS_PER_SECOND * COMMIT_SECONDS {
        every.tick().await;
        let sent = Instant::now();
        owner.push(&[("add_note", json!({"list_id": "room", "title": format!("note {n}")}))]).await;
        commits.lock().unwrap().push((sent, Instant::now()));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (server_cpu, own_cpu) = (cpu_seconds(server.pid) - server_cpu, cpu_seconds(std::process::id()) - own_cpu);
    let mut arrivals = Vec::new();
    while let Ok(arrival) = pinged.try_recv() {
        arrivals.push(arrival);
    }
    for socket in &sockets {
        socket.abort();
    }

    // Each ping stands for the commits answered before it that the socket had not yet had.
    let commits = commits.lock().unwrap().clone();
    let mut next_unseen = vec![0usize; count];
    let mut latencies = Vec::with_capacity(commits.len() * count);
    for (user, at) in &arrivals {
        let next = &mut next_unseen[*user];
        while *next < commits.len() && commits[*next].1 <= *at {
            latencies.push(*at - commits[*next].0);
            *next += 1;
        }
    }
    let missed: usize = next_unseen.iter().map(|n| commits.len() - n).sum();
    assert_eq!(missed, 0, "every socket was pinged after every commit");
    latencies.sort();
    db.drop_database().await;
    Broadcast {
        pings: arrivals.len(),
        p50: percentile(&latencies, 0.5),
        p99: percentile(&latencies, 0.99),
        kib_per_socket: (after.saturating_sub(before) as f64) / (count - warm_up) as f64,
        generator_share: own_cpu / (own_cpu + server_cpu).max(f64::EPSILON),
    }
}
