//! An S3-compatible server of a test's own: `s3s-fs` (crates.io; `scripts/test` installs it),
//! on a free port of 127.0.0.1 with a directory of its own, checking SigV4 signatures and
//! presigned URLs for real. The binary is `ENGINE_S3S_FS` when set, else `s3s-fs` on the `PATH`.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

use super::process::free_port;

/// The bucket every test server has.
pub(crate) const BUCKET: &str = "blobs";
const ACCESS_KEY: &str = "engine-test";
const SECRET_KEY: &str = "engine-test-secret";

pub(crate) struct S3Server {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
}

impl S3Server {
    /// Start a server with an empty bucket [`BUCKET`], and wait until it takes connections.
    pub(crate) async fn start() -> S3Server {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("engine-s3-{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join(BUCKET)).unwrap();
        let binary = std::env::var("ENGINE_S3S_FS").unwrap_or_else(|_| "s3s-fs".to_owned());
        let child = Command::new(&binary)
            .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--access-key", ACCESS_KEY])
            .args(["--secret-key", SECRET_KEY])
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "start `{binary}` ({e}): install it with `cargo install s3s-fs@0.14.1 --locked --features binary` \
                     (scripts/test does) and name it in ENGINE_S3S_FS"
                )
            });
        tokio::time::timeout(Duration::from_secs(30), async {
            while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("s3s-fs takes connections within 30 s");
        S3Server { child: Some(child), port, dir }
    }

    /// The server's URL.
    pub(crate) fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A blob store on the server's bucket.
    pub(crate) fn store(&self) -> engine::blob::S3 {
        let credentials = engine::blob::Credentials::new(ACCESS_KEY, SECRET_KEY);
        engine::blob::s3(BUCKET, &self.endpoint(), "us-east-1", credentials).unwrap()
    }

    /// The objects in the bucket, by their names.
    pub(crate) fn objects(&self) -> Vec<String> {
        let mut objects = Vec::new();
        let bucket = self.dir.join(BUCKET);
        for entry in walk(&bucket) {
            let name = entry.strip_prefix(&bucket).unwrap().to_string_lossy().into_owned();
            // s3s-fs keeps its own records beside the objects, under names it starts with a dot.
            if !name.split('/').any(|part| part.starts_with('.')) {
                objects.push(name);
            }
        }
        objects.sort();
        objects
    }

    /// Kill the server: the store is down.
    pub(crate) async fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().await.unwrap();
        }
    }
}

fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut files = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        match path.is_dir() {
            true => files.extend(walk(&path)),
            false => files.push(path),
        }
    }
    files
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
