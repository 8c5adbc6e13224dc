//! Hostile accounts beside an honest user (issue 37): a notes server process with the notes
//! app's own settings (its store bounds, the default request limits, presence and jobs), an
//! honest user who pushes one `add_note` and catches up its pull ten times a second and
//! bootstraps a new device every second, and phases: unattacked, each attack alone, then all
//! at once. The honest user's pull, bootstrap and push p50 and p99 per phase, and the ratio of
//! each p99 to the unattacked one. Each attack comes from several accounts, each as fast as
//! its account's limits let it (`RELIABILITY.md`, "Hostile accounts beside an honest user",
//! says what each does); the honest user's requests refused `429` or `503` are retried after
//! `Retry-After`, as a client does, and their time counts until the answer that serves them.
//! Every process's CPU over each phase is reported beside, this one's (the load generator:
//! the attackers and the honest user) among them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::db::{Backend, BenchDb, BenchFile};
use crate::soak::rng::Rng;
use crate::wire::{BackendsSpent, CpuSpent, PageRead, ServerProcess, WireClient, ms, percentile, token, write_notes};

/// What a run does: its store, seconds measured per phase, the honest user's notes.
pub(crate) struct Settings {
    pub(crate) backend: Backend,
    pub(crate) seconds: u64,
    pub(crate) notes: usize,
    /// Connections of the slow-bodies attack.
    pub(crate) slow: usize,
    /// The phases to run besides the unattacked one, by name (all when empty).
    pub(crate) phases: Vec<String>,
}

/// One kind of attack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attack {
    BucketFlood,
    CrdtBombs,
    PoolHogs,
    SlowBodies,
}

impl Attack {
    const ALL: [Attack; 4] = [Attack::BucketFlood, Attack::CrdtBombs, Attack::PoolHogs, Attack::SlowBodies];

    fn name(self) -> &'static str {
        match self {
            Attack::BucketFlood => "bucket floods",
            Attack::CrdtBombs => "CRDT bombs",
            Attack::PoolHogs => "pool hogs",
            Attack::SlowBodies => "slow bodies",
        }
    }
}

/// Accounts per attack (the slow bodies' token-less connections besides).
const ACCOUNTS: usize = 4;
/// Lists each flooding stranger shares with the honest user in a phase.
const FLOOD_LISTS: usize = 150;
/// Lists each cursor replayer holds, and the most buckets one replayed pull names.
const REPLAY_LISTS: usize = 300;
const REPLAY_SUBSET: u64 = 100;
/// Notes in each pool hog's list before it starts, and mutations in each of its pushes.
const HOG_NOTES: usize = 5_000;
const HOG_BATCH: usize = 1_000;
/// One-character items in each CRDT bomb (about 560 KB of update, 750 KB of base64).
const BOMB_ITEMS: u64 = 85_000;
/// How long the attacks run before the honest user's figures are taken.
const RAMP: Duration = Duration::from_secs(2);

pub(crate) async fn run(settings: Settings) {
    let env = [("ENGINE_BENCH_SETTINGS", "notes".to_owned())];
    let (server, db, file) = match settings.backend {
        Backend::Postgres => {
            let db = BenchDb::new(4).await;
            (ServerProcess::start_with(&db.url, &env).await, Some(db), None)
        }
        Backend::Sqlite => {
            let file = BenchFile::new();
            (ServerProcess::start_with(&file.url, &env).await, None, Some(file))
        }
    };
    let server = Arc::new(server);
    let started = Instant::now();
    let accounts = Accounts::set_up(&server, settings.notes, settings.slow).await;
    eprintln!("set up in {:.0} s", started.elapsed().as_secs_f64());

    let phases: Vec<(String, Vec<Attack>)> = std::iter::once(("unattacked".to_owned(), vec![]))
        .chain(Attack::ALL.iter().map(|a| (a.name().to_owned(), vec![*a])))
        .chain(std::iter::once(("all at once".to_owned(), Attack::ALL.to_vec())))
        .filter(|(name, attacks)| {
            attacks.is_empty() || settings.phases.is_empty() || settings.phases.iter().any(|p| p == name)
        })
        .collect();
    let mut rows = Vec::new();
    for (n, (name, attacks)) in phases.iter().enumerate() {
        let stop = Arc::new(AtomicBool::new(false));
        let tally = Arc::new(Tally::default());
        let mut tasks = Vec::new();
        for attack in attacks {
            tasks.extend(accounts.start(*attack, n, &server, &stop, &tally));
        }
        tokio::time::sleep(RAMP).await;
        let backends = match &db {
            Some(db) => Some(BackendsSpent::start(&db.pool).await),
            None => None,
        };
        let cpu = CpuSpent::start(server.pid);
        let honest = honest(&server, n, settings.seconds).await;
        let cpu = cpu.stop();
        let database = match (&db, backends) {
            (Some(db), Some(backends)) => Some(backends.stop(&db.pool).await),
            _ => None,
        };
        stop.store(true, Ordering::Relaxed);
        for task in tasks {
            task.await.expect("an attacker");
        }
        eprintln!(
            "{name}: attackers' requests {}; the honest user's pulls {}, bootstraps {}, pushes {}",
            tally.line(),
            honest.pulls.len(),
            honest.bootstraps.len(),
            honest.pushes.len()
        );
        accounts.clean_up(attacks, n, &server, &honest.added).await;
        rows.push((name.clone(), honest, cpu, database, tally));
    }

    println!(
        "\n## Hostile accounts beside an honest user ({}, {} s per phase, the honest user's {} notes)\n",
        match settings.backend {
            Backend::Postgres => "Postgres",
            Backend::Sqlite => "SQLite",
        },
        settings.seconds,
        settings.notes
    );
    println!(
        "| phase | pull p50 / p99 | ratio | bootstrap p50 / p99 | ratio | push p50 / p99 | ratio | honest refused | attackers' requests: served / refused | CPU: server + database, load generator | load generator CPU share |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let base = rows[0].1.p99s();
    for (name, honest, cpu, database, tally) in &mut rows {
        let [pull, bootstrap, push] = honest.quantiles();
        let p99 = honest.p99s();
        let database = database.map_or(String::new(), |d| format!(" + {d:.1}"));
        println!(
            "| {name} | {:.1} / {:.1} ms | {:.2} | {:.1} / {:.1} ms | {:.2} | {:.1} / {:.1} ms | {:.2} | {} | {} / {} | {:.1}{database} s, {:.1} s | {:.0}% |",
            ms(pull.0),
            ms(pull.1),
            p99[0] / base[0],
            ms(bootstrap.0),
            ms(bootstrap.1),
            p99[1] / base[1],
            ms(push.0),
            ms(push.1),
            p99[2] / base[2],
            honest.refused,
            tally.served.load(Ordering::Relaxed),
            tally.refused.load(Ordering::Relaxed),
            cpu.server,
            cpu.own,
            cpu.generator_share() * 100.0
        );
    }
    drop(server);
    if let Some(db) = db {
        db.drop_database().await;
    }
    if let Some(file) = file {
        file.remove();
    }
}

/// What the honest user saw in one phase.
struct Honest {
    pulls: Vec<Duration>,
    bootstraps: Vec<Duration>,
    pushes: Vec<Duration>,
    /// Its requests refused (`429`, `503`) and retried.
    refused: u64,
    /// How long the phase ran.
    phase: Duration,
    /// The notes it added, taken away after the phase so each phase bootstraps as many.
    added: Vec<String>,
}

impl Honest {
    /// (p50, p99) of pulls, bootstraps and pushes. A kind of which none was answered within the
    /// phase counts as one request that took the whole phase (it took longer); the puller's first
    /// catch-up, when it outlasts the phase, counts as its pull.
    fn quantiles(&mut self) -> [(Duration, Duration); 3] {
        let phase = self.phase;
        [&mut self.pulls, &mut self.bootstraps, &mut self.pushes].map(|samples| {
            if samples.is_empty() {
                samples.push(phase);
            }
            samples.sort();
            (percentile(samples, 0.5), percentile(samples, 0.99))
        })
    }

    /// The p99s in milliseconds, in the order of [`Honest::quantiles`].
    fn p99s(&mut self) -> [f64; 3] {
        self.quantiles().map(|q| ms(q.1))
    }
}

/// The honest user's protocol requests: each retried after a refusal as a client does.
#[derive(Clone)]
struct HonestClient {
    http: reqwest::Client,
    base: String,
    token: String,
    refused: Arc<AtomicU64>,
}

impl HonestClient {
    /// `body` posted to `path` until it is served: the answer's bytes.
    async fn post(&self, path: &str, body: &Value) -> Vec<u8> {
        loop {
            let sent = self
                .http
                .post(format!("{}{path}", self.base))
                .bearer_auth(&self.token)
                .header("content-type", "application/json")
                .body(body.to_string())
                .send()
                .await;
            let wait = match sent {
                Ok(answer) if answer.status().is_success() => return answer.bytes().await.expect("an answer").to_vec(),
                Ok(answer) if [429, 503].contains(&answer.status().as_u16()) => {
                    let after = answer.headers().get("retry-after").and_then(|v| v.to_str().ok()?.parse().ok());
                    Duration::from_secs(after.unwrap_or(1).min(30))
                }
                Ok(answer) => panic!("{path} answered {}", answer.status()),
                Err(e) => {
                    eprintln!("{path}: {e}");
                    Duration::from_secs(1)
                }
            };
            self.refused.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(wait).await;
        }
    }

    /// Pull pages from `cursor` until caught up: the last cursor.
    async fn catch_up(&self, client_id: uuid::Uuid, mut cursor: Option<String>) -> String {
        loop {
            let body = json!({"clientId": client_id, "cursor": cursor, "limit": 1000});
            let page: PageRead = serde_json::from_slice(&self.post("/sync/pull", &body).await).expect("a page");
            cursor = Some(page.cursor);
            if !page.has_more {
                return cursor.expect("a cursor");
            }
        }
    }
}

/// The honest user `alice` for `seconds`: a push of one `add_note` every 100 ms, a catch-up of
/// her pull every 100 ms, and a new device's bootstrap (a client and connection of its own)
/// every second, each waiting for the one before.
async fn honest(server: &ServerProcess, phase: usize, seconds: u64) -> Honest {
    let refused = Arc::new(AtomicU64::new(0));
    let client = HonestClient {
        http: reqwest::Client::new(),
        base: server.url(""),
        token: token("alice"),
        refused: refused.clone(),
    };
    let until = Instant::now() + Duration::from_secs(seconds);
    let every = |period: Duration| {
        let mut interval = tokio::time::interval(period);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        interval
    };
    let pusher = {
        let client = client.clone();
        tokio::spawn(async move {
            let (mut samples, mut added) = (Vec::new(), Vec::new());
            let client_id = uuid::Uuid::new_v4();
            let mut tick = every(Duration::from_millis(100));
            while Instant::now() < until {
                tick.tick().await;
                let id = format!("honest-{phase}-{}", added.len());
                let mutation = json!({"mutationId": added.len() + 1, "clientMutationId": uuid::Uuid::new_v4(),
                    "name": "add_note", "args": {"id": id, "list_id": "honest", "title": "a note"}});
                let body = json!({"clientId": client_id, "mutations": [mutation]});
                let start = Instant::now();
                let answer: Value = serde_json::from_slice(&client.post("/sync/push", &body).await).unwrap();
                samples.push(start.elapsed());
                // `duplicate`: applied by a try whose answer was lost.
                let status = &answer["results"][0]["status"];
                assert!(status == "applied" || status == "duplicate", "{answer}");
                added.push(id);
            }
            (samples, added)
        })
    };
    let puller = {
        let client = client.clone();
        tokio::spawn(async move {
            let mut samples = Vec::new();
            let client_id = uuid::Uuid::new_v4();
            let first = Instant::now();
            let mut cursor = Some(client.catch_up(client_id, None).await);
            // A first catch-up that outlasted the phase is the wait for her first pull: counted,
            // rather than no pull at all.
            if Instant::now() >= until {
                samples.push(first.elapsed());
            }
            let mut tick = every(Duration::from_millis(100));
            while Instant::now() < until {
                tick.tick().await;
                let start = Instant::now();
                cursor = Some(client.catch_up(client_id, cursor).await);
                samples.push(start.elapsed());
            }
            samples
        })
    };
    let bootstrapper = {
        let client = client.clone();
        tokio::spawn(async move {
            let mut samples = Vec::new();
            let mut tick = every(Duration::from_secs(1));
            while Instant::now() < until {
                tick.tick().await;
                let device = HonestClient { http: reqwest::Client::new(), ..client.clone() };
                let start = Instant::now();
                device.catch_up(uuid::Uuid::new_v4(), None).await;
                samples.push(start.elapsed());
            }
            samples
        })
    };
    let (pushes, added) = pusher.await.expect("the pusher");
    Honest {
        pulls: puller.await.expect("the puller"),
        bootstraps: bootstrapper.await.expect("the bootstrapper"),
        pushes,
        refused: refused.load(Ordering::Relaxed),
        phase: Duration::from_secs(seconds),
        added,
    }
}

/// The attackers' requests, answered or refused, in one phase.
#[derive(Default)]
struct Tally {
    served: AtomicU64,
    refused: AtomicU64,
    /// Requests that got no answer (a connection cut, a slow body given up).
    unanswered: AtomicU64,
}

impl Tally {
    fn count(&self, status: Option<u16>) {
        let counter = match status {
            Some(200..=299) => &self.served,
            Some(_) => &self.refused,
            None => &self.unanswered,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn line(&self) -> String {
        format!(
            "{} served, {} refused, {} unanswered",
            self.served.load(Ordering::Relaxed),
            self.refused.load(Ordering::Relaxed),
            self.unanswered.load(Ordering::Relaxed)
        )
    }
}

/// What the attackers hold before the phases: the CRDT bombers' notes and the bomb, the pool
/// hogs' lists, the cursor replayers' lists and cursors.
struct Accounts {
    /// Base64 of the bomb's update.
    bomb: Arc<String>,
    /// Each replayer's old cursor and its buckets.
    replays: Vec<(String, Arc<Vec<String>>)>,
    /// Connections of the slow-bodies attack.
    slow: usize,
}

impl Accounts {
    async fn set_up(server: &ServerProcess, notes: usize, slow: usize) -> Accounts {
        write_notes(server, "alice", "honest", notes, 1, true).await;
        for a in 0..ACCOUNTS {
            let mut bomber = WireClient::new(server, &format!("bomber-{a}"));
            bomber
                .push(&[
                    ("create_list", json!({"id": format!("bomber-{a}"), "title": "b"})),
                    ("add_note", json!({"id": format!("bomb-{a}"), "list_id": format!("bomber-{a}"), "title": "b"})),
                ])
                .await;
            write_notes(server, &format!("hog-{a}"), &format!("hog-{a}"), HOG_NOTES, 2, true).await;
        }
        let mut replays = Vec::new();
        for a in 0..2 {
            let user = format!("replayer-{a}");
            let mut replayer = WireClient::new(server, &user);
            // Ids long enough that a cursor names the buckets by a stored set.
            let ids: Vec<String> =
                (0..REPLAY_LISTS).map(|i| format!("a-list-with-a-long-enough-id-{a}-{i:04}")).collect();
            let lists: Vec<(&str, Value)> =
                ids.iter().map(|id| ("create_list", json!({"id": id, "title": "r"}))).collect();
            replayer.push(&lists).await;
            let cursor = replayer.catch_up(None).await;
            replays.push((cursor, Arc::new(ids.iter().map(|id| format!("shared/{id}")).collect())));
        }
        let bomb = engine::crdt::update_to_base64(&items_one_by_one(7, BOMB_ITEMS, 100));
        Accounts { bomb: Arc::new(bomb), replays, slow }
    }

    /// The tasks of `attack` in phase `phase`, until `stop`.
    fn start(
        &self,
        attack: Attack,
        phase: usize,
        server: &ServerProcess,
        stop: &Arc<AtomicBool>,
        tally: &Arc<Tally>,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let mut tasks = Vec::new();
        let base = server.url("");
        let hammer = |user: String, mut body: Request| {
            let (stop, tally) = (stop.clone(), tally.clone());
            let mut sender = Sender::new(&base, &user);
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let (path, body) = body(&mut sender);
                    let status = sender.send(path, body).await;
                    tally.count(status);
                    if status != Some(200) {
                        // A refused attacker comes back at once, but not in a spin.
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                }
            })
        };
        match attack {
            Attack::CrdtBombs => {
                // Four pushes of the bomb at once from each account (its limit of requests in
                // progress), each into its own note.
                for a in 0..ACCOUNTS {
                    for _ in 0..4 {
                        let bomb = self.bomb.clone();
                        tasks.push(hammer(
                            format!("bomber-{a}"),
                            Box::new(move |s| {
                                let args = format!(r#"{{"id":"bomb-{a}","update":"{bomb}"}}"#);
                                ("/sync/push", s.push_body("edit_note_body", &[args]))
                            }),
                        ));
                    }
                }
            }
            Attack::PoolHogs => {
                // Two pushes of a thousand `add_note`s and two bootstraps of its own list at
                // once from each account.
                for a in 0..ACCOUNTS {
                    for _ in 0..2 {
                        tasks.push(hammer(
                            format!("hog-{a}"),
                            Box::new(move |s| {
                                let args: Vec<String> = (0..HOG_BATCH)
                                    .map(|_| format!(r#"{{"list_id":"hog-{a}","title":"a hog's note"}}"#))
                                    .collect();
                                ("/sync/push", s.push_body("add_note", &args))
                            }),
                        ));
                        tasks.push(hammer(
                            format!("hog-{a}"),
                            Box::new(|_| {
                                let body = json!({"clientId": uuid::Uuid::new_v4(), "limit": 10_000});
                                ("/sync/pull", body.to_string())
                            }),
                        ));
                    }
                }
            }
            Attack::BucketFlood => {
                // Strangers share lists with the honest user, fifty in a push (the list, the
                // share, a note), FLOOD_LISTS each; whether a share makes her a member or invites
                // her, the pushes go on (their results are not read).
                for a in 0..ACCOUNTS {
                    let shared = Arc::new(AtomicU64::new(0));
                    tasks.push(hammer(
                        format!("stranger-{a}"),
                        Box::new(move |s| {
                            let first = shared.fetch_add(50, Ordering::Relaxed) as usize;
                            if first >= FLOOD_LISTS {
                                // Done sharing: a pull of what it holds, at its pace.
                                let body = json!({"clientId": uuid::Uuid::new_v4()});
                                return ("/sync/pull", body.to_string());
                            }
                            let mut mutations = Vec::new();
                            for k in first..first + 50 {
                                let list = format!("flood-{phase}-{a}-{k}");
                                mutations.push(("create_list", format!(r#"{{"id":"{list}","title":"open me"}}"#)));
                                mutations.push((
                                    "share_list",
                                    format!(r#"{{"list_id":"{list}","user_id":"alice","role":"editor"}}"#),
                                ));
                                mutations.push(("add_note", format!(r#"{{"list_id":"{list}","title":"hello"}}"#)));
                            }
                            ("/sync/push", s.push_of(&mutations))
                        }),
                    ));
                }
                // Replayers: an old cursor again and again, each time with another subset of
                // their buckets, four at once each.
                for (a, (cursor, buckets)) in self.replays.iter().enumerate() {
                    for t in 0..4 {
                        let (cursor, buckets) = (cursor.clone(), buckets.clone());
                        let mut rng = Rng::new((phase * 100 + a * 10 + t) as u64 + 1);
                        tasks.push(hammer(
                            format!("replayer-{a}"),
                            Box::new(move |_| {
                                let size = 1 + rng.below(REPLAY_SUBSET) as usize;
                                let at = rng.below((buckets.len() - size) as u64) as usize;
                                let body = json!({"clientId": uuid::Uuid::new_v4(), "cursor": cursor,
                                    "buckets": buckets[at..at + size]});
                                ("/sync/pull", body.to_string())
                            }),
                        ));
                    }
                }
            }
            Attack::SlowBodies => {
                for c in 0..self.slow {
                    let (stop, tally, addr) = (stop.clone(), tally.clone(), server.addr);
                    let kind = match c % 3 {
                        0 => Slow::Headers,
                        1 => Slow::AnonymousBody,
                        _ => Slow::Body(token(&format!("slow-{}", c % ACCOUNTS))),
                    };
                    tasks.push(tokio::spawn(async move {
                        while !stop.load(Ordering::Relaxed) {
                            tally.count(kind.once(addr, &stop).await);
                            // Answered (token-less headers are, at once): again a second later.
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        }
                    }));
                }
            }
        }
        tasks
    }

    /// Put things back after a phase: the honest user's added notes purged (each phase
    /// bootstraps as many), the strangers' shares taken back.
    async fn clean_up(&self, attacks: &[Attack], phase: usize, server: &ServerProcess, added: &[String]) {
        let mut alice = WireClient::new(server, "alice");
        for chunk in added.chunks(500) {
            let purges: Vec<(&str, Value)> = chunk.iter().map(|id| ("purge_note", json!({"id": id}))).collect();
            alice.push(&purges).await;
        }
        if attacks.contains(&Attack::BucketFlood) {
            for a in 0..ACCOUNTS {
                let mut sender = Sender::new(&server.url(""), &format!("stranger-{a}"));
                let unshares: Vec<(&str, String)> = (0..FLOOD_LISTS)
                    .map(|k| ("unshare_list", format!(r#"{{"list_id":"flood-{phase}-{a}-{k}","user_id":"alice"}}"#)))
                    .collect();
                let body = sender.push_of(&unshares);
                sender.send("/sync/push", body).await;
            }
        }
    }
}

/// One slow connection's kind.
enum Slow {
    /// Headers sent a byte every 500 ms, never finished.
    Headers,
    /// Token-less headers, then a body a byte every 200 ms.
    AnonymousBody,
    /// Headers with this token, then a body a byte every 200 ms.
    Body(String),
}

impl Slow {
    /// One connection of this kind, until the server answers or closes it, or `stop`: the
    /// status it answered.
    async fn once(&self, addr: std::net::SocketAddr, stop: &AtomicBool) -> Option<u16> {
        let mut socket = tokio::net::TcpStream::connect(addr).await.ok()?;
        let auth = match self {
            Slow::Body(token) => format!("authorization: Bearer {token}\r\n"),
            _ => String::new(),
        };
        let head = format!(
            "POST /sync/push HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n{auth}content-length: 1000000\r\n\r\n"
        );
        let (dribbled, pace) = match self {
            Slow::Headers => (head.into_bytes(), Duration::from_millis(500)),
            _ => {
                socket.write_all(head.as_bytes()).await.ok()?;
                (b"{\"clientId\":\"".repeat(1000), Duration::from_millis(200))
            }
        };
        let mut answer = Vec::new();
        for byte in dribbled {
            if stop.load(Ordering::Relaxed) {
                return None;
            }
            let mut buffer = [0; 1024];
            tokio::select! {
                read = socket.read(&mut buffer) => match read {
                    Ok(0) | Err(_) => break,
                    Ok(n) => { answer.extend_from_slice(&buffer[..n]); break }
                },
                () = tokio::time::sleep(pace) => {}
            }
            if socket.write_all(&[byte]).await.is_err() {
                break;
            }
        }
        let status = std::str::from_utf8(answer.get(9..12)?).ok()?;
        status.parse().ok()
    }
}

/// What an attacker sends next: the path and the body.
type Request = Box<dyn FnMut(&mut Sender) -> (&'static str, String) + Send>;

/// An attacker's requests, of one account and one client: raw bodies, the status read and the
/// answer drained.
struct Sender {
    http: reqwest::Client,
    base: String,
    token: String,
    client_id: uuid::Uuid,
    next: u64,
}

impl Sender {
    fn new(base: &str, user: &str) -> Sender {
        Sender {
            http: reqwest::Client::new(),
            base: base.to_owned(),
            token: token(user),
            client_id: uuid::Uuid::new_v4(),
            next: 1,
        }
    }

    /// A push of one `name` mutation with each of `args` (JSON objects).
    fn push_body(&mut self, name: &str, args: &[String]) -> String {
        let mutations: Vec<(&str, String)> = args.iter().map(|a| (name, a.clone())).collect();
        self.push_of(&mutations)
    }

    /// A push of `mutations` (names and JSON arguments), numbered on from the last.
    fn push_of(&mut self, mutations: &[(&str, String)]) -> String {
        let mut body = format!(r#"{{"clientId":"{}","mutations":["#, self.client_id);
        for (i, (name, args)) in mutations.iter().enumerate() {
            if i > 0 {
                body.push(',');
            }
            body.push_str(&format!(
                r#"{{"mutationId":{},"clientMutationId":"{}","name":"{name}","args":{args}}}"#,
                self.next,
                uuid::Uuid::new_v4()
            ));
            self.next += 1;
        }
        body.push_str("]}");
        body
    }

    /// Post `body` to `path`: the status, `None` without an answer.
    async fn send(&self, path: &str, body: String) -> Option<u16> {
        let answer = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .ok()?;
        let status = answer.status().as_u16();
        answer.bytes().await.ok()?;
        Some(status)
    }
}

/// `n` as yrs writes a variable-length integer.
fn var(mut n: u64, out: &mut Vec<u8>) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// A yrs v1 update of `items` one-character items of replica `client`, each placed after the
/// one before it, but every `every`th after the one before that: well formed and fitting an
/// empty document, but written item by item where a replica's own encoding joins them (as
/// `tests/integration/crdt.rs` builds it; every item costs the merge, where the encoding's few
/// bytes cost the sender nothing).
fn items_one_by_one(client: u8, items: u64, every: u64) -> Vec<u8> {
    let mut bytes = vec![1];
    var(items, &mut bytes);
    bytes.extend_from_slice(&[client, 0, 4, 1, 4, b't', b'e', b'x', b't', 1, b'x']);
    for clock in 1..items {
        bytes.extend_from_slice(&[0x84, client]);
        var(if clock % every == 0 && clock >= 2 { clock - 2 } else { clock - 1 }, &mut bytes);
        bytes.extend_from_slice(&[1, b'x']);
    }
    bytes.push(0);
    bytes
}
