//! Fan-out benchmark, as a broadcast: N sockets of N different users on one server process, all
//! members of one shared list, and 20 commits a second into that list (one `add_note` per
//! push). For each commit and each socket, the time to the first ping of the list that socket
//! receives after the commit, counted twice: from the push's transaction committing, as the
//! server process prints it by the machine's wall clock, and from the push being sent (which
//! adds the request and the transaction itself). An engine's ping does not say which commit it
//! is for: one of an earlier commit that arrives after a later commit is counted for both, so
//! this errs short where a fan-out takes longer than the time between commits (at 10,000
//! sockets), never long. And the server's memory per idle socket: the
//! growth of its resident memory while the last 90% of the sockets connect, per socket (the
//! first 10% warm up what does not grow with sockets: the pool, caches, the allocator's arenas).
//!
//! Then the same for the plain broadcaster (`crate::plain`), the machine's limit: the same
//! sockets, schedule and load generator, each push replaced by a `POST` that makes it write one
//! frame to every socket; its counterpart of the commit is its `POST` arriving. Its frames name
//! their broadcast, so its latencies are exact.

use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use serde_json::{Value, json};
use tungstenite::client::IntoClientRequest;
use tungstenite::protocol::WebSocketConfig;
use tungstenite::{Message, WebSocket};

use crate::db::{BenchDb, notes_server_with};
use crate::wire::{CpuSpent, ServerProcess, WireClient, ms, percentile, print_commit_mark, resident_kib, token};

/// Commits a second into the shared list, and for how long.
const COMMITS_PER_SECOND: u64 = 20;
const COMMIT_SECONDS: u64 = 10;

/// The server process of the benchmarks (`engine-bench serve`), on the Postgres database or the
/// SQLite file (`sqlite://path`) `DATABASE_URL` names, with the realtime adapter
/// `ENGINE_REALTIME` names (`listen_notify`, or a NATS URL with the prefix `NATS_PREFIX`;
/// in-process otherwise). With `ENGINE_BENCH_SETTINGS=notes`, the notes app's own settings (as
/// its binary serves): its store bounds, the default request limits, its presence and jobs. With
/// `ENGINE_BENCH_COMMITS` set, it prints when each broadcast's push committed ([`CommitMarks`]).
pub(crate) async fn serve() {
    let url = std::env::var("DATABASE_URL").expect("DATABASE_URL");
    let notes = std::env::var("ENGINE_BENCH_SETTINGS").as_deref() == Ok("notes");
    let marks = std::env::var_os("ENGINE_BENCH_COMMITS").is_some();
    let limits = if notes {
        example_notes::store_limits()
    } else {
        // The many-bucket actor holds 10,000 shared lists and her own bucket: past the default.
        engine::storage::StoreLimits::default().buckets_per_actor(20_000)
    };
    let database_url = url.clone();
    let realtime = move |builder: engine::server::ServerBuilder| {
        let builder = if notes {
            builder
                .limits(engine::limits::Limits::default())
                .presence(example_notes::presence())
                .jobs(example_notes::jobs::jobs())
        } else {
            builder
        };
        let builder = if marks { builder.observer(CommitMarks) } else { builder };
        match std::env::var("ENGINE_REALTIME").as_deref() {
            Ok("listen_notify") => builder.realtime(engine::realtime::listen_notify(database_url)),
            Ok(nats) if nats.starts_with("nats://") => {
                let prefix =
                    std::env::var("NATS_PREFIX").unwrap_or_else(|_| engine::realtime::nats::DEFAULT_PREFIX.into());
                builder.realtime(engine::realtime::nats(nats).prefix(prefix))
            }
            _ => builder,
        }
    };
    let (addr, task) = match engine::storage::sqlite_path(&url) {
        Some(path) => notes_server_with(engine::storage::sqlite(path).limits(limits), realtime).await,
        None => notes_server_with(engine::storage::postgres(url).limits(limits), realtime).await,
    };
    println!("listening on {addr}");
    task.await.expect("serve");
}

/// Prints, for each push of an `add_note` titled `note <n>`, when it committed: broadcast `n`'s
/// start, from which its commit-to-ping times are counted. The hook runs once the push's
/// transaction has committed and its pings were handed to realtime (in process, a channel send
/// of microseconds, and the hub may already be at work on them), so the instant errs late by
/// that, never early; the printing comes after it and holds up only the push's answer.
struct CommitMarks;

impl engine::observer::Observer for CommitMarks {
    fn on_push(&self, _: &engine::Actor, request: &engine::wire::PushRequest, _: &engine::wire::PushResponse) {
        let at = SystemTime::now();
        for mutation in request.mutations.iter().filter(|m| m.name == "add_note") {
            let title = mutation.args.get("title").and_then(Value::as_str);
            if let Some(n) = title.and_then(|t| t.strip_prefix("note ")).and_then(|n| n.parse().ok()) {
                print_commit_mark(n, at);
            }
        }
    }
}

pub(crate) async fn run(counts: &[usize]) {
    let mut rows = Vec::new();
    for &count in counts {
        rows.push((count, "engine", engine(count).await));
        rows.push((count, "plain broadcaster", plain(count).await));
    }
    println!(
        "\n## Fan-out: N sockets of different users in one shared list, {COMMITS_PER_SECOND} commits/s for {COMMIT_SECONDS} s\n"
    );
    println!(
        "| sockets | server | pings | pings/s | p50 commit → ping | p99 commit → ping | p50 push → ping | p99 push → ping | memory per idle socket | load generator CPU share |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (count, server, r) in &rows {
        println!(
            "| {count} | {server} | {} | {:.0} | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} KiB | {:.0}% |",
            r.pings,
            r.pings_per_second,
            ms(r.from_commit.p50),
            ms(r.from_commit.p99),
            ms(r.from_push.p50),
            ms(r.from_push.p99),
            r.kib_per_socket,
            r.generator_share * 100.0
        );
    }
    println!("\n| sockets | engine ÷ plain: p99 commit → ping | p99 push → ping | pings/s |");
    println!("|---:|---:|---:|---:|");
    for pair in rows.chunks(2) {
        let [(count, _, engine), (_, _, plain)] = pair else { continue };
        println!(
            "| {count} | {:.2} | {:.2} | {:.2} |",
            engine.from_commit.p99.as_secs_f64() / plain.from_commit.p99.as_secs_f64(),
            engine.from_push.p99.as_secs_f64() / plain.from_push.p99.as_secs_f64(),
            engine.pings_per_second / plain.pings_per_second
        );
    }
}

struct Broadcast {
    pings: usize,
    pings_per_second: f64,
    /// From the push's transaction committing (the plain broadcaster: its `POST` arriving).
    from_commit: Latency,
    /// From the push (the `POST`) being sent.
    from_push: Latency,
    kib_per_socket: f64,
    generator_share: f64,
}

/// The median and 99th percentile of a broadcast's latencies.
struct Latency {
    p50: Duration,
    p99: Duration,
}

impl Latency {
    fn of(mut latencies: Vec<Duration>) -> Latency {
        latencies.sort();
        Latency { p50: percentile(&latencies, 0.5), p99: percentile(&latencies, 0.99) }
    }
}

/// What starts a broadcast: a push into the shared list, or the plain broadcaster's `POST`.
enum Trigger {
    Push(WireClient),
    Post(reqwest::Client, String),
}

impl Trigger {
    async fn fire(&mut self, n: u64) {
        match self {
            Trigger::Push(owner) => {
                owner.push(&[("add_note", json!({"list_id": "room", "title": format!("note {n}")}))]).await;
            }
            Trigger::Post(http, base) => {
                let answer = http.post(format!("{base}/broadcast/{n}")).send().await.expect("a broadcast is answered");
                assert!(answer.status().is_success(), "broadcast: {}", answer.status());
            }
        }
    }
}

async fn engine(count: usize) -> Broadcast {
    let db = BenchDb::new(4).await;
    db.storage(example_notes::app()).await;
    let server = ServerProcess::start_with(&db.url, &[("ENGINE_BENCH_COMMITS", "1".into())]).await;
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
    // A share is an invitation: each member accepts it.
    for u in &members {
        WireClient::new(&server, &format!("user-{u}")).push(&[("accept_list", json!({"list_id": "room"}))]).await;
    }
    let measured = broadcast(&server, count, Trigger::Push(owner)).await;
    db.drop_database().await;
    measured
}

async fn plain(count: usize) -> Broadcast {
    let server = ServerProcess::spawn("plain-serve", &[]).await;
    broadcast(&server, count, Trigger::Post(reqwest::Client::new(), server.url(""))).await
}

async fn broadcast(server: &ServerProcess, count: usize, mut trigger: Trigger) -> Broadcast {
    let addr = server.sockets;
    let warm_up = (count / 10).max(1);
    let connecting = Instant::now();
    let mut sockets = connect(addr, 0..warm_up).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = resident_kib(server.pid);
    sockets.extend(connect(addr, warm_up..count).await);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = resident_kib(server.pid);
    let reader = Reader::start(sockets);
    eprintln!("{count} sockets connected in {:.1} s", connecting.elapsed().as_secs_f64());

    // The commits: (sent, answered).
    let mut commits: Vec<(Instant, Instant)> = Vec::new();
    let cpu = CpuSpent::start(server.pid);
    let mut every = tokio::time::interval(Duration::from_millis(1000 / COMMITS_PER_SECOND));
    for n in 0..COMMITS_PER_SECOND * COMMIT_SECONDS {
        every.tick().await;
        let sent = Instant::now();
        trigger.fire(n).await;
        commits.push((sent, Instant::now()));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let cpu = cpu.stop();
    let arrivals = reader.stop().await;

    // An engine's ping stands for the commits before it, by the wall clock the server printed
    // them on (the same machine's), that the socket had not yet had; a plain broadcaster's names
    // the last broadcast it covers. Not the commits whose answers this process had noted before
    // the ping: a ping may come first, and under load many did (39,157 of 200,100 at 1,000
    // sockets beside a busy core), each then counted for the next commit, 50 ms late. Both
    // latencies of a commit end at the same ping.
    let committed: Vec<SystemTime> = (0..commits.len())
        .map(|n| server.committed(n).unwrap_or_else(|| panic!("the server printed when broadcast {n} committed")))
        .collect();
    let mut next_unseen = vec![0usize; count];
    let (mut from_push, mut from_commit) = (Vec::new(), Vec::new());
    for (user, at, wall, covers) in &arrivals {
        let next = &mut next_unseen[*user];
        while *next < commits.len() && covers.map_or(committed[*next] <= *wall, |last| *next <= last) {
            from_push.push(*at - commits[*next].0);
            from_commit.push(wall.duration_since(committed[*next]).expect("a ping comes after its commit"));
            *next += 1;
        }
    }
    let missed: usize = next_unseen.iter().map(|n| commits.len() - n).sum();
    assert_eq!(missed, 0, "every socket was pinged after every commit");
    let last = arrivals.iter().map(|(_, at, _, _)| *at).max().unwrap_or(commits[0].0);
    Broadcast {
        pings: arrivals.len(),
        pings_per_second: arrivals.len() as f64 / (last - commits[0].0).as_secs_f64(),
        from_commit: Latency::of(from_commit),
        from_push: Latency::of(from_push),
        kib_per_socket: (after.saturating_sub(before) as f64) / (count - warm_up) as f64,
        generator_share: cpu.generator_share(),
    }
}

/// Open the sockets of `users`, each past its first frame (the presence of its buckets, which
/// says it is set up), a few at a time.
async fn connect(addr: SocketAddr, users: std::ops::Range<usize>) -> Vec<(usize, WebSocket<TcpStream>)> {
    const AT_ONCE: usize = 16;
    tokio::task::spawn_blocking(move || {
        let users: Vec<usize> = users.collect();
        std::thread::scope(|scope| {
            let handles: Vec<_> = users
                .chunks(users.len().div_ceil(AT_ONCE).max(1))
                .map(|chunk| {
                    scope.spawn(move || chunk.iter().map(|&user| (user, open(addr, user))).collect::<Vec<_>>())
                })
                .collect();
            handles.into_iter().flat_map(|h| h.join().expect("a connecting thread")).collect()
        })
    })
    .await
    .expect("connecting")
}

fn open(addr: SocketAddr, user: usize) -> WebSocket<TcpStream> {
    let mut request = format!("ws://{addr}/sync/stream").into_client_request().unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {}", token(&format!("user-{user}"))).parse().unwrap());
    request.headers_mut().insert("sec-websocket-protocol", "engine.v1".parse().unwrap());
    let stream = TcpStream::connect(addr).expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    // A read buffer the size of a page: tungstenite zeroes the whole buffer before each read
    // (128 KiB by default), which took two thirds of the load generator's time.
    let config = WebSocketConfig::default().read_buffer_size(4096);
    let (mut socket, _) = tungstenite::client::client_with_config(request, stream, Some(config)).expect("handshake");
    socket.get_ref().set_read_timeout(Some(Duration::from_secs(30))).expect("a timeout");
    socket.read().expect("the first frame");
    socket.get_ref().set_nonblocking(true).expect("non-blocking");
    socket
}

/// A ping received: by which user, when (by this process's clock and by the wall clock), and
/// the broadcast it covers, when it says.
type Arrival = (usize, Instant, SystemTime, Option<usize>);

/// Every socket read by one thread, as cheaply as a load generator can (readiness from `epoll`,
/// tungstenite's frame reader, a heartbeat every 10 s): the 10,000 devices it stands for would
/// cost the server's machine nothing, so the less of the two cores it takes, the closer the
/// figures are to the server's own.
struct Reader {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<Arrival>>,
}

impl Reader {
    fn start(mut sockets: Vec<(usize, WebSocket<TcpStream>)>) -> Reader {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut poll = Poll::new().expect("a poll");
            for (n, (_, socket)) in sockets.iter().enumerate() {
                let fd = socket.get_ref().as_raw_fd();
                poll.registry().register(&mut SourceFd(&fd), Token(n), Interest::READABLE).expect("register");
            }
            let mut events = Events::with_capacity(1024);
            let mut arrivals = Vec::new();
            // The first heartbeat at once: the first sockets have been silent since they connected.
            let mut beat: Option<Instant> = None;
            while !stopping.load(Ordering::Relaxed) {
                poll.poll(&mut events, Some(Duration::from_millis(50))).expect("poll");
                for event in &events {
                    let (user, socket) = &mut sockets[event.token().0];
                    loop {
                        match socket.read() {
                            Ok(Message::Text(text)) => {
                                if let Some(covers) = ping(&text) {
                                    arrivals.push((*user, Instant::now(), SystemTime::now(), covers));
                                }
                            }
                            Ok(_) => {}
                            Err(tungstenite::Error::Io(e)) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                            Err(e) => panic!("socket of user-{user}: {e}"),
                        }
                    }
                }
                if beat.is_none_or(|at| at.elapsed() >= Duration::from_secs(10)) {
                    beat = Some(Instant::now());
                    for (_, socket) in &mut sockets {
                        match socket.send(Message::Text(r#"{"type":"heartbeat"}"#.into())) {
                            Ok(()) => {}
                            Err(tungstenite::Error::Io(e)) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                            Err(e) => panic!("heartbeat: {e}"),
                        }
                    }
                }
            }
            arrivals
        });
        Reader { stop, thread }
    }

    /// Stop reading; the pings received.
    async fn stop(self) -> Vec<Arrival> {
        self.stop.store(true, Ordering::Relaxed);
        tokio::task::spawn_blocking(move || self.thread.join().expect("the reading thread")).await.expect("joined")
    }
}

/// Whether `text` is a ping of the shared list: `Some(None)` for the engine's, `Some(Some(n))`
/// for broadcast `n` of the plain broadcaster.
fn ping(text: &str) -> Option<Option<usize>> {
    let bucket = text.strip_prefix(r#"{"type":"ping","bucket":"shared/"#)?.strip_suffix(r#""}"#)?;
    match bucket {
        "room" => Some(None),
        n => n.parse().ok().map(Some),
    }
}
