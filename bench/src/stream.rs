//! Stream benchmark: with N sockets connected to one server instance (each a different user,
//! each following its own buckets), a push by one user and the time until that user's socket
//! gets the ping, sampled across users; and the server's memory per idle socket: the growth of
//! its resident memory while the last 90% of the sockets connect, per socket (the first 10% warm
//! up what does not grow with sockets: the database pool, caches, the allocator's arenas).

use std::process::Stdio;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::db::{BenchDb, SECRET, notes_server};

const SAMPLES: usize = 200;

/// The server process of the benchmark.
pub(crate) async fn serve() {
    let url = std::env::var("DATABASE_URL").expect("DATABASE_URL");
    let (addr, task) = notes_server(engine::storage::postgres(url)).await;
    println!("listening on {addr}");
    task.await.expect("serve");
}

fn resident_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn token(user: usize) -> String {
    let name = format!("user-{user}");
    engine::auth::issue_bearer_token(&name, &name, SECRET, Duration::from_secs(3600)).unwrap()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

pub(crate) async fn run(counts: &[usize]) {
    println!("\n## Stream: push to ping with N sockets connected to one instance ({SAMPLES} samples)\n");
    println!("| sockets | p50 push → ping | p99 push → ping | server memory per idle socket |");
    println!("|---:|---:|---:|---:|");
    for &count in counts {
        let db = BenchDb::new(8).await;
        let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
            .arg("serve")
            .env("DATABASE_URL", &db.url)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the server process");
        let pid = child.id().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let line = lines.next_line().await.unwrap().expect("the server prints its address");
        let addr: std::net::SocketAddr = line.strip_prefix("listening on ").unwrap().parse().unwrap();
        // Connect every socket; each reports the pings of its own bucket.
        let (pings, mut pinged) = mpsc::unbounded_channel::<(usize, Instant)>();
        let (ready, mut connected) = mpsc::unbounded_channel::<()>();
        let mut sockets = Vec::with_capacity(count);
        let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(200));
        let warm_up = (count / 10).max(1);
        let mut before = 0;
        for user in 0..count {
            if user == warm_up {
                for _ in 0..warm_up {
                    connected.recv().await.unwrap();
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
                before = resident_kib(pid);
            }
            let (pings, ready, gate) = (pings.clone(), ready.clone(), gate.clone());
            sockets.push(tokio::spawn(async move {
                let permit = gate.acquire_owned().await.unwrap();
                let mut request = format!("ws://{addr}/sync/stream").into_client_request().unwrap();
                request.headers_mut().insert("authorization", format!("Bearer {}", token(user)).parse().unwrap());
                request.headers_mut().insert("sec-websocket-protocol", "engine.v1".parse().unwrap());
                let (socket, _) = tokio_tungstenite::connect_async(request).await.expect("connect");
                let (mut sink, mut stream) = socket.split();
                // The first frame (presence of its bucket) says the socket is set up.
                let _ = stream.next().await;
                drop(permit);
                let _ = ready.send(());
                let own = format!("own/user-{user}");
                let mut beat = tokio::time::interval(Duration::from_secs(10));
                loop {
                    tokio::select! {
                        frame = stream.next() => match frame {
                            Some(Ok(Message::Text(text))) => {
                                if text.contains(r#""ping""#) && text.contains(&own) {
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
        let after = resident_kib(pid);

        let http = reqwest::Client::new();
        let mut latencies = Vec::with_capacity(SAMPLES);
        for sample in 0..SAMPLES {
            let user = sample * count / SAMPLES;
            let body = json!({"clientId": uuid::Uuid::new_v4(), "mutations": [{
                "mutationId": 1, "clientMutationId": uuid::Uuid::new_v4(), "name": "create_list",
                "args": {"id": format!("list-{sample}"), "title": "bench"}}]});
            let start = Instant::now();
            let response = http
                .post(format!("http://{addr}/sync/push"))
                .bearer_auth(token(user))
                .body(body.to_string())
                .send()
                .await
                .unwrap();
            assert!(response.status().is_success());
            let arrived = loop {
                let (who, at) = tokio::time::timeout(Duration::from_secs(5), pinged.recv())
                    .await
                    .expect("a ping within 5 s")
                    .unwrap();
                if who == user {
                    break at;
                }
            };
            latencies.push(arrived - start);
        }
        latencies.sort();
        let per_socket = (after.saturating_sub(before) as f64) / (count - warm_up) as f64;
        println!(
            "| {count} | {:.1} ms | {:.1} ms | {per_socket:.1} KiB |",
            percentile(&latencies, 0.5).as_secs_f64() * 1000.0,
            percentile(&latencies, 0.99).as_secs_f64() * 1000.0,
        );
        for socket in sockets {
            socket.abort();
        }
        drop(child);
        db.drop_database().await;
    }
}
