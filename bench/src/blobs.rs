//! Blobs through presigned URLs, against direct transfers to the same S3 server.
//!
//! An S3-compatible server of the benchmark's own (`s3s-fs`, `ENGINE_S3S_FS` or `s3s-fs` on the
//! `PATH`, on a temporary directory) and a notes server whose blobs are in it (`blob::s3`), on a
//! fresh Postgres database. Alice has a note; each round puts new bytes of the size:
//!
//! - engine upload: `POST /blobs/upload` (the ticket, which reserves the bytes), then the `PUT` to
//!   its presigned URL with the headers it names (size and SHA-256, which the store checks);
//! - engine download, after `set_note_image` names the bytes in the note: `POST /blobs/download`
//!   (the first ticket after an upload also confirms it: the server's `HEAD` of the object, whose
//!   size and checksum it checks), then the `GET` of its presigned URL;
//! - direct: a `PUT` and a `GET` of an object of the same size, presigned by the benchmark itself
//!   with the same credentials (no checksum headers), straight to the same server;
//! - direct, checked: the same `PUT` signing the headers the engine's ticket names (length and
//!   SHA-256, which the store checks as the bytes arrive): what an app that wants the store to
//!   check its bytes pays without the engine.
//!
//! The key (the bytes' SHA-256) is computed before the clock starts, as a client does when it
//! keeps the bytes. Engine and direct rounds alternate, after warm-up rounds; medians of the
//! rounds, with the engine's tickets alone beside its transfers. The server has the engine's own
//! Postgres pool.
//!
//! Every transfer goes through one client (`reqwest`, `TCP_NODELAY` set), so the engine's and
//! the direct ones are measured alike. `s3s-fs` 0.14.1 does not set `TCP_NODELAY` on the
//! connections it accepts: when a `GET`'s last piece of body is short and a short one before it
//! is not acknowledged yet, Nagle's algorithm holds it until the client's delayed
//! acknowledgement, about 40 ms later. That falls on some `GET`s of 1 MiB and not others, the
//! engine's and the direct ones alike: a `GET` column's median shows it or not from one run to
//! the next (`BENCHMARKS.md`, Blobs).

use std::process::Stdio;
use std::time::{Duration, Instant};

use engine::BlobKey;
use serde_json::{Value, json};

use crate::db::{BenchDb, SECRET, notes_server_with};

const BUCKET: &str = "blobs";
const ACCESS_KEY: &str = "engine-bench";
const SECRET_KEY: &str = "engine-bench-secret";
/// Rounds run before those measured.
const WARM_UP: usize = 3;

/// An `s3s-fs` of the benchmark's own, killed when dropped.
struct S3Server {
    _child: tokio::process::Child,
    endpoint: String,
    dir: std::path::PathBuf,
}

impl S3Server {
    async fn start() -> S3Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = std::env::temp_dir().join(format!("engine-bench-s3-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(dir.join(BUCKET)).unwrap();
        let binary = std::env::var("ENGINE_S3S_FS").unwrap_or_else(|_| "s3s-fs".to_owned());
        let child = tokio::process::Command::new(&binary)
            .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--access-key", ACCESS_KEY])
            .args(["--secret-key", SECRET_KEY])
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("start `{binary}` ({e}): `cargo install s3s-fs@0.14.1 --locked --features binary`")
            });
        while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        S3Server { _child: child, endpoint: format!("http://127.0.0.1:{port}"), dir }
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Milliseconds of `elapsed`.
fn ms(elapsed: Duration) -> f64 {
    elapsed.as_secs_f64() * 1000.0
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The URL a ticket names, made absolute against the server's.
fn absolute(server: &str, url: &str) -> String {
    match url.starts_with('/') {
        true => format!("{server}{url}"),
        false => url.to_owned(),
    }
}

struct Bench {
    http: reqwest::Client,
    server: String,
    token: String,
    bucket: rusty_s3::Bucket,
    credentials: rusty_s3::Credentials,
    mutation: u64,
    client_id: uuid::Uuid,
}

impl Bench {
    async fn post(&self, path: &str, body: Value) -> Value {
        let response = self
            .http
            .post(format!("{}{path}", self.server))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .expect("the server answers");
        assert!(response.status().is_success(), "{path}: {}", response.status());
        response.json().await.unwrap()
    }

    /// `PUT` `bytes` to `url` with `headers`.
    async fn put(&self, url: &str, headers: &serde_json::Map<String, Value>, bytes: Vec<u8>) {
        let mut request = self.http.put(url).body(bytes);
        for (name, value) in headers {
            request = request.header(name, value.as_str().unwrap());
        }
        let response = request.send().await.expect("the store answers");
        assert!(response.status().is_success(), "PUT: {} {}", response.status(), response.text().await.unwrap());
    }

    async fn get(&self, url: &str, size: usize) {
        let bytes = self.http.get(url).send().await.expect("the store answers").bytes().await.unwrap();
        assert_eq!(bytes.len(), size);
    }

    /// The engine's upload of `bytes` (ticket and `PUT`), and its ticket alone, in ms.
    async fn engine_upload(&self, key: &BlobKey, bytes: Vec<u8>) -> (f64, f64) {
        let started = Instant::now();
        let ticket = self.post("/blobs/upload", json!({"key": key, "size": bytes.len()})).await;
        let ticketed = ms(started.elapsed());
        let url = absolute(&self.server, ticket["url"].as_str().unwrap());
        self.put(&url, ticket["headers"].as_object().unwrap_or(&Default::default()), bytes).await;
        (ms(started.elapsed()), ticketed)
    }

    /// Name `key` in alice's note, through a mutation.
    async fn name_in_note(&mut self, key: &BlobKey) {
        self.mutation += 1;
        let push = json!({"clientId": self.client_id, "mutations": [{"mutationId": self.mutation,
            "clientMutationId": uuid::Uuid::new_v4(), "name": "set_note_image", "args": {"id": "n1", "image": key}}]});
        let pushed = self.post("/sync/push", push).await;
        assert_eq!(pushed["results"][0]["status"], "applied", "{pushed}");
    }

    /// The engine's download of `key` (ticket and `GET`), and its ticket alone, in ms.
    async fn engine_download(&self, key: &BlobKey, size: usize) -> (f64, f64) {
        let started = Instant::now();
        let ticket = self.post("/blobs/download", json!({"key": key})).await;
        let ticketed = ms(started.elapsed());
        self.get(&absolute(&self.server, ticket["url"].as_str().unwrap()), size).await;
        (ms(started.elapsed()), ticketed)
    }

    /// A direct `PUT` of `bytes` to object `name`, then its `GET`, presigned here: in ms each.
    /// `key` given, the `PUT` signs the length and SHA-256 as the engine's ticket does.
    async fn direct(&self, name: &str, bytes: Vec<u8>, key: Option<&BlobKey>) -> (f64, f64) {
        use base64::Engine;
        use rusty_s3::S3Action;
        let size = bytes.len();
        let started = Instant::now();
        let mut headers = serde_json::Map::new();
        if let Some(key) = key {
            let digest: Vec<u8> = (0..key.hex().len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&key.hex()[i..i + 2], 16).unwrap())
                .collect();
            let checksum = base64::engine::general_purpose::STANDARD.encode(digest);
            headers.insert("x-amz-checksum-sha256".into(), checksum.into());
            headers.insert("x-amz-content-sha256".into(), key.hex().into());
        }
        let mut action = self.bucket.put_object(Some(&self.credentials), name);
        let length = size.to_string();
        if key.is_some() {
            action.headers_mut().insert("content-length", length.as_str());
        }
        for (name, value) in &headers {
            action.headers_mut().insert(name.as_str(), value.as_str().unwrap());
        }
        let url = action.sign(Duration::from_secs(900));
        self.put(url.as_str(), &headers, bytes).await;
        let put = ms(started.elapsed());
        let started = Instant::now();
        let url = self.bucket.get_object(Some(&self.credentials), name).sign(Duration::from_secs(900));
        self.get(url.as_str(), size).await;
        (put, ms(started.elapsed()))
    }
}

pub(crate) async fn run(sizes_mib: &[usize], rounds: usize) {
    let s3 = S3Server::start().await;
    let db = BenchDb::new(8).await;
    let credentials = engine::blob::Credentials::new(ACCESS_KEY, SECRET_KEY);
    let store = engine::blob::s3(BUCKET, &s3.endpoint, "us-east-1", credentials).expect("the S3 store");
    let largest = sizes_mib.iter().max().copied().unwrap_or(1) as u64;
    let blobs = engine::blob::Blobs::new(store).max_size(largest << 20).quota_per_actor(None);
    // The engine's own pool (no round trip to check a session as it is lent), as a server has.
    let storage = engine::storage::postgres(&db.url);
    let (addr, _task) = notes_server_with(storage, |builder| builder.blobs(blobs)).await;
    sqlx::raw_sql(
        "INSERT INTO lists VALUES ('l1', 'alice', 'bench', false);
         INSERT INTO list_members VALUES ('l1', 'alice', 'alice', 'owner', true, 'alice', 'bench');
         INSERT INTO notes (id, owner_id, list_id, title, done, position) VALUES ('n1', 'alice', 'l1', 'photo', false, 1);",
    )
    .execute(&db.pool)
    .await
    .expect("seed");
    let endpoint = s3.endpoint.parse().unwrap();
    let mut bench = Bench {
        http: reqwest::Client::new(),
        server: format!("http://{addr}"),
        token: engine::auth::issue_bearer_token("alice", "alice", SECRET, Duration::from_secs(3600)).unwrap(),
        bucket: rusty_s3::Bucket::new(endpoint, rusty_s3::UrlStyle::Path, BUCKET.to_owned(), "us-east-1".to_owned())
            .unwrap(),
        credentials: rusty_s3::Credentials::new(ACCESS_KEY, SECRET_KEY),
        mutation: 0,
        client_id: uuid::Uuid::new_v4(),
    };

    println!("\n## Blobs: presigned URLs against direct transfers to the same S3 server (s3s-fs, loopback)\n");
    println!("Median of {rounds} rounds, in ms; ratio = direct / engine (1.0: the engine adds nothing).\n");
    println!(
        "| size | engine upload | its ticket | direct PUT | ratio | direct PUT, checked | ratio | engine download | its \
         ticket | direct GET | ratio |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &mib in sizes_mib {
        let (mut up, mut down, mut put, mut get) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut checked, mut up_ticket, mut down_ticket) = (Vec::new(), Vec::new(), Vec::new());
        // Warm-up rounds, not counted: each of the server's sessions prepares a statement the
        // first time it runs it, and the pool lends its sessions in turn.
        for round in 0..WARM_UP + rounds {
            let mut bytes = vec![0u8; mib << 20];
            for (i, byte) in bytes.iter_mut().enumerate() {
                *byte = (i % 251) as u8;
            }
            bytes[..8].copy_from_slice(&(round as u64 + ((mib as u64) << 32)).to_le_bytes());
            let key = BlobKey::for_bytes(&bytes);
            let (engine_up, engine_up_ticket) = bench.engine_upload(&key, bytes.clone()).await;
            bench.name_in_note(&key).await;
            let (engine_down, engine_down_ticket) = bench.engine_download(&key, bytes.len()).await;
            let (direct_checked, _) = bench.direct(&format!("checked/{mib}-{round}"), bytes.clone(), Some(&key)).await;
            let (direct_put, direct_get) = bench.direct(&format!("direct/{mib}-{round}"), bytes, None).await;
            if round >= WARM_UP {
                checked.push(direct_checked);
                up.push(engine_up);
                up_ticket.push(engine_up_ticket);
                down.push(engine_down);
                down_ticket.push(engine_down_ticket);
                put.push(direct_put);
                get.push(direct_get);
            }
        }
        let (up, down, put, get, checked) = (median(up), median(down), median(put), median(get), median(checked));
        let (up_ticket, down_ticket) = (median(up_ticket), median(down_ticket));
        println!(
            "| {mib} MiB | {up:.1} | {up_ticket:.1} | {put:.1} | {:.2} | {checked:.1} | {:.2} | {down:.1} | \
             {down_ticket:.1} | {get:.1} | {:.2} |",
            put / up,
            checked / up,
            get / down
        );
    }
    drop(db);
}
