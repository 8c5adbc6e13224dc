//! What the wire benchmarks share: a notes server in a process of its own (this binary's
//! `serve`), clients that speak the protocol over HTTP as apps' clients do, data written through
//! pushes (each mutation its own transaction), and the CPU each process used.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use engine::wire::{PullResponse, PushResponse};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

use crate::db::SECRET;

/// A notes server process on a benchmark's database or file.
pub(crate) struct ServerProcess {
    pub(crate) addr: SocketAddr,
    /// Where its WebSockets are: `addr`, but for the plain broadcaster's (`listening on <addr>
    /// sockets on <sockets>`).
    pub(crate) sockets: SocketAddr,
    pub(crate) pid: u32,
    /// What the process printed as `committed <n> <unix nanoseconds>`: when broadcast `n` of the
    /// stream benchmark committed, by this machine's wall clock (see `stream::serve`).
    committed: Arc<Mutex<HashMap<usize, SystemTime>>>,
    _child: Child,
}

impl ServerProcess {
    /// The server on the database `url` names (`postgres://…` or `sqlite://…`).
    pub(crate) async fn start(url: &str) -> ServerProcess {
        Self::start_with(url, &[]).await
    }

    /// The server on the database `url` names, with more environment (`ENGINE_REALTIME`, …:
    /// see `stream::serve`).
    pub(crate) async fn start_with(url: &str, env: &[(&str, String)]) -> ServerProcess {
        let mut env = env.to_vec();
        env.push(("DATABASE_URL", url.to_owned()));
        Self::spawn("serve", &env).await
    }

    /// This binary's hidden subcommand `command` (`serve`, `plain-serve`), which prints where it
    /// listens once it does.
    pub(crate) async fn spawn(command: &str, env: &[(&str, String)]) -> ServerProcess {
        let mut child = tokio::process::Command::new(std::env::current_exe().expect("this binary"))
            .arg(command)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the server process");
        let pid = child.id().expect("a pid");
        let mut lines = BufReader::new(child.stdout.take().expect("its output")).lines();
        let line = lines.next_line().await.expect("its output").expect("the server prints its address");
        let rest = line.strip_prefix("listening on ").expect("`listening on <addr>`");
        let (addr, sockets) = rest.split_once(" sockets on ").unwrap_or((rest, rest));
        let (addr, sockets) = (addr.parse().expect("an address"), sockets.parse().expect("an address"));
        let committed = Arc::new(Mutex::new(HashMap::new()));
        let noting = committed.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some((n, at)) = commit_mark(&line) {
                    noting.lock().expect("the commit marks").insert(n, at);
                }
            }
        });
        ServerProcess { addr, sockets, pid, committed, _child: child }
    }

    /// When broadcast `n` committed, as the process printed it.
    pub(crate) fn committed(&self, n: usize) -> Option<SystemTime> {
        self.committed.lock().expect("the commit marks").get(&n).copied()
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

/// The line a server process prints when broadcast `n` of the stream benchmark committed, `at`
/// by this machine's wall clock: the clock the load generator reads too, so the two processes'
/// instants subtract.
pub(crate) fn print_commit_mark(n: usize, at: SystemTime) {
    let nanos = at.duration_since(SystemTime::UNIX_EPOCH).expect("after 1970").as_nanos();
    println!("committed {n} {nanos}");
}

/// The broadcast and instant of a line of [`print_commit_mark`].
fn commit_mark(line: &str) -> Option<(usize, SystemTime)> {
    let (n, nanos) = line.strip_prefix("committed ")?.split_once(' ')?;
    let nanos: u64 = nanos.parse().ok()?;
    Some((n.parse().ok()?, SystemTime::UNIX_EPOCH + Duration::from_nanos(nanos)))
}

/// A development token of the benchmarks' secret for `user`.
pub(crate) fn token(user: &str) -> String {
    engine::auth::issue_bearer_token(user, user, SECRET, Duration::from_secs(24 * 3600)).expect("a token")
}

/// One client of one user, speaking the protocol over HTTP: its own sequence of mutations.
pub(crate) struct WireClient {
    http: reqwest::Client,
    base: String,
    token: String,
    pub(crate) client_id: uuid::Uuid,
    next: u64,
}

impl WireClient {
    pub(crate) fn new(server: &ServerProcess, user: &str) -> WireClient {
        WireClient {
            http: reqwest::Client::new(),
            base: server.url(""),
            token: token(user),
            client_id: uuid::Uuid::new_v4(),
            next: 1,
        }
    }

    /// Push `mutations` (name and arguments) in one request; every one must apply.
    pub(crate) async fn push(&mut self, mutations: &[(&str, Value)]) -> PushResponse {
        let list: Vec<Value> = mutations
            .iter()
            .map(|(name, args)| {
                let id = self.next;
                self.next += 1;
                json!({"mutationId": id, "clientMutationId": uuid::Uuid::new_v4(), "name": name, "args": args})
            })
            .collect();
        let body = json!({"clientId": self.client_id, "mutations": list});
        let answer = self
            .http
            .post(format!("{}/sync/push", self.base))
            .bearer_auth(&self.token)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .expect("a push is answered");
        assert!(answer.status().is_success(), "push: {}", answer.status());
        let response: PushResponse = answer.json().await.expect("a push response");
        assert!(
            response.results.iter().all(|r| r.error.is_none()),
            "every mutation applies: {:?}",
            response.results.iter().find(|r| r.error.is_some())
        );
        response
    }

    /// One pull page from `cursor`, decoded into the wire types (rows as maps of values, bucket
    /// keys parsed), as the Rust client decodes it.
    pub(crate) async fn pull(&self, cursor: Option<&str>, limit: u32) -> PullResponse {
        self.pull_as(cursor, limit).await
    }

    /// One pull page from `cursor`, read as `T`.
    pub(crate) async fn pull_as<T: serde::de::DeserializeOwned>(&self, cursor: Option<&str>, limit: u32) -> T {
        let body = json!({"clientId": self.client_id, "cursor": cursor, "limit": limit});
        let answer = self
            .http
            .post(format!("{}/sync/pull", self.base))
            .bearer_auth(&self.token)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .expect("a pull is answered");
        assert!(answer.status().is_success(), "pull: {}", answer.status());
        answer.json().await.expect("a pull response")
    }

    /// One pull page from `cursor`, read whole but not built: [`PageRead`].
    pub(crate) async fn pull_read(&self, cursor: Option<&str>, limit: u32) -> PageRead {
        self.pull_as(cursor, limit).await
    }

    /// Pull pages until caught up; the cursor.
    pub(crate) async fn catch_up(&self, mut cursor: Option<String>) -> String {
        loop {
            let page = self.pull(cursor.as_deref(), 1000).await;
            cursor = Some(page.cursor);
            if !page.has_more {
                return cursor.expect("a cursor");
            }
        }
    }
}

/// A pull page read as a load generator reads it: every byte parsed and checked as JSON, each
/// change's table and buckets read as text, the rows' values checked but not built into maps;
/// the fields it does not name (tombstones and the rest) are parsed and checked too.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PageRead {
    pub(crate) changes: Vec<ChangeRead>,
    pub(crate) cursor: String,
    pub(crate) has_more: bool,
}

/// A change of a [`PageRead`].
#[derive(serde::Deserialize)]
pub(crate) struct ChangeRead {
    pub(crate) table: String,
    /// Required, and parsed to its end (serde_json checks what it ignores).
    #[serde(rename = "row")]
    _row: serde::de::IgnoredAny,
    pub(crate) buckets: Vec<String>,
}

/// Write `count` notes into `list` as `user` through pushes of `batch` `add_note` mutations from
/// `devices` clients at once, as an app's clients write them (each mutation its own
/// transaction); the list is created first when `create`.
pub(crate) async fn write_notes(
    server: &ServerProcess,
    user: &str,
    list: &str,
    count: usize,
    devices: usize,
    create: bool,
) {
    const BATCH: usize = 250;
    if create {
        WireClient::new(server, user).push(&[("create_list", json!({"id": list, "title": list}))]).await;
    }
    let mut tasks = Vec::new();
    for d in 0..devices {
        let share = count / devices + usize::from(d < count % devices);
        let mut client = WireClient::new(server, user);
        let list = list.to_owned();
        tasks.push(tokio::spawn(async move {
            let mut left = share;
            while left > 0 {
                let n = left.min(BATCH);
                let adds: Vec<(&str, Value)> = (0..n)
                    .map(|i| {
                        (
                            "add_note",
                            json!({"list_id": list, "title": format!("note {} of device {d}", share - left + i)}),
                        )
                    })
                    .collect();
                client.push(&adds).await;
                left -= n;
            }
        }));
    }
    for task in tasks {
        task.await.expect("a writer");
    }
}

/// CPU seconds (user and system) the server process and this process used over a span.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Cpu {
    pub(crate) server: f64,
    pub(crate) own: f64,
}

impl Cpu {
    /// This process's share (the load generator's) of what the two used.
    pub(crate) fn generator_share(&self) -> f64 {
        self.own / (self.own + self.server).max(f64::EPSILON)
    }
}

/// A span of CPU use being watched, from [`CpuSpent::start`] to [`CpuSpent::stop`].
pub(crate) struct CpuSpent {
    server_pid: u32,
    at: Cpu,
}

impl CpuSpent {
    /// Watch the process `server_pid` and this one from now.
    pub(crate) fn start(server_pid: u32) -> CpuSpent {
        CpuSpent { server_pid, at: Cpu { server: cpu_seconds(server_pid), own: cpu_seconds(std::process::id()) } }
    }

    /// What each used since the start.
    pub(crate) fn stop(self) -> Cpu {
        Cpu {
            server: cpu_seconds(self.server_pid) - self.at.server,
            own: cpu_seconds(std::process::id()) - self.at.own,
        }
    }
}

/// CPU seconds the Postgres backends of one database used over a span, from `/proc` (the
/// benchmarks' Postgres runs on this machine): the sessions of the engine's server and of the
/// baselines alike, and nothing of other databases. A session that ends within the span takes
/// its time with it; the benchmarks' sessions live as long as their pools.
pub(crate) struct BackendsSpent {
    at: std::collections::HashMap<u32, f64>,
}

impl BackendsSpent {
    /// Watch the backends of `pool`'s database from now.
    pub(crate) async fn start(pool: &sqlx::PgPool) -> BackendsSpent {
        BackendsSpent { at: backends(pool).await.into_iter().map(|pid| (pid, cpu_seconds(pid))).collect() }
    }

    /// What they used since the start, a backend that began meanwhile all of its time.
    pub(crate) async fn stop(self, pool: &sqlx::PgPool) -> f64 {
        let now = backends(pool).await;
        now.into_iter().map(|pid| cpu_seconds(pid) - self.at.get(&pid).copied().unwrap_or(0.0)).sum()
    }
}

/// The process ids of the sessions on `pool`'s database.
async fn backends(pool: &sqlx::PgPool) -> Vec<u32> {
    let pids: Vec<i32> = sqlx::query_scalar("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
        .fetch_all(pool)
        .await
        .expect("the database's sessions");
    pids.into_iter().filter_map(|pid| u32::try_from(pid).ok()).collect()
}

/// CPU seconds (user and system) a process has used, its threads' together.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command's closing parenthesis; utime and stime are the 12th and 13th.
    let fields: Vec<&str> =
        stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
    let ticks: u64 = fields.get(11..13).map_or(0, |f| f.iter().filter_map(|v| v.parse::<u64>().ok()).sum());
    ticks as f64 / 100.0
}

/// Resident memory of a process, in KiB.
pub(crate) fn resident_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The `p`-quantile of sorted durations.
pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

/// Milliseconds, for tables.
pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
