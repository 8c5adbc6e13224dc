//! Blobs over real TCP, each behaviour on the local-directory store and on an S3-compatible
//! server of the test's own (`s3s-fs`, support/s3.rs): signed upload and download URLs, bytes
//! checked against their key, tickets that reserve the quota and the actor's places in flight,
//! downloads only for actors who can read a row that an uploader of the bytes wrote the key
//! into, and collection of blobs no row names.

use std::time::Duration;

use engine::blob::{BlobStore, Blobs, Upload, local_fs};
use engine::{BlobKey, MutatorCtx, Outcome, Result};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::s3::S3Server;
use crate::support::server::SECRET;
use crate::support::{Backend, TestDb, TestServer, backend};

mod photos {
    use super::*;

    /// A photo in an album.
    #[engine::table]
    #[derive(Debug, Clone)]
    pub(crate) struct Photo {
        #[engine(primary_key)]
        pub id: String,
        #[engine(owner)]
        pub owner_id: String,
        pub album: String,
        pub blob: BlobKey,
        pub thumbnail: Option<BlobKey>,
    }

    /// Who sees which album.
    #[engine::table]
    #[derive(Debug, Clone)]
    pub(crate) struct AlbumMember {
        #[engine(primary_key)]
        pub album: String,
        #[engine(primary_key)]
        pub user_id: String,
    }

    #[engine::sync_rules]
    pub(crate) mod rules {
        use super::{AlbumMember, Photo};

        /// The actor's own photos.
        #[bucket(data(Photo::owner_id == bucket.owner), write(Photo))]
        #[derive(Debug)]
        pub(crate) struct Own {
            #[param(actor.owner_id)]
            pub owner: String,
        }

        /// The photos of the albums the actor is a member of.
        #[bucket(
            membership(AlbumMember::user_id == actor.user_id),
            data(Photo::album == bucket.album, AlbumMember::album == bucket.album),
            write(Photo, AlbumMember),
        )]
        #[derive(Debug)]
        pub(crate) struct Album {
            #[param(AlbumMember::album)]
            pub album: String,
        }
    }

    #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    pub(crate) struct AddPhoto {
        pub id: String,
        pub album: String,
        pub blob: BlobKey,
    }

    /// Add a photo of the actor's.
    #[engine::mutator]
    pub(crate) async fn add_photo(ctx: &mut MutatorCtx<'_>, args: AddPhoto) -> Result<Outcome> {
        let owner_id = ctx.actor().owner_id.clone();
        ctx.insert(&Photo { id: args.id, owner_id, album: args.album, blob: args.blob, thumbnail: None }).await?;
        Ok(Outcome::new())
    }

    pub(crate) fn app() -> engine::App {
        engine::app! { tables: [Photo, AlbumMember], mutators: [add_photo], sync_rules: rules }
    }
}

const BLOB_SECRET: &str = "blob-secret";

/// Which blob store a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    LocalFs,
    S3,
}

/// Each behaviour test, once per store: `<test>::local_fs` and `<test>::s3`.
macro_rules! on_every_store {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn local_fs() {
                super::$name(super::Kind::LocalFs).await
            }

            #[tokio::test]
            async fn s3() {
                super::$name(super::Kind::S3).await
            }
        }
    )*};
}

on_every_store!(
    uploads_are_checked_and_downloads_go_only_to_readers_of_a_row,
    blobs_are_as_private_as_rows,
    quota_and_uploads_in_flight_are_reserved_by_tickets,
    tickets_asked_for_together_never_pass_the_quota,
    a_ticket_long_expired_unused_gives_way_to_a_new_one,
    content_types_are_the_server_s_setting,
    blobs_no_row_names_are_collected_after_the_grace,
    bytes_that_land_after_their_reservation_was_dropped_are_collected,
    a_rust_client_puts_offline_uploads_after_a_restart_and_another_downloads,
);

/// A blob store of a test's own.
struct Store {
    kind: Kind,
    dir: std::path::PathBuf,
    s3: Option<S3Server>,
}

impl Store {
    async fn start(kind: Kind, db: &TestDb) -> Store {
        let dir = std::env::temp_dir().join(format!("{}-blobs", db.name));
        let s3 = match kind {
            Kind::LocalFs => None,
            Kind::S3 => Some(S3Server::start().await),
        };
        Store { kind, dir, s3 }
    }

    fn blob_store(&self) -> Box<dyn Fn() -> Blobs> {
        match &self.s3 {
            None => {
                let dir = self.dir.clone();
                Box::new(move || Blobs::new(local_fs(&dir, BLOB_SECRET)))
            }
            Some(s3) => {
                let store = s3.store();
                Box::new(move || Blobs::new(store.clone()))
            }
        }
    }

    /// An upload URL of this store for `upload`, expiring at `at`.
    fn upload_url(&self, upload: &Upload, at: engine::Timestamp) -> Value {
        let ticket = match &self.s3 {
            None => local_fs(&self.dir, BLOB_SECRET).upload_url(upload, at).unwrap(),
            Some(s3) => s3.store().upload_url(upload, at).unwrap(),
        };
        serde_json::to_value(ticket).unwrap()
    }

    /// Whether the store holds bytes of `key`.
    fn holds(&self, key: &BlobKey) -> bool {
        match &self.s3 {
            None => self.dir.join(key.hex()).exists(),
            Some(s3) => s3.objects().iter().any(|object| object.starts_with(key.hex())),
        }
    }

    /// `url`, an upload URL of `from`'s, made to name `to` as the uploader instead.
    fn as_other_actor(&self, url: &str, from: &str, to: &str) -> String {
        let (from, to) = match self.kind {
            Kind::LocalFs => (hex(from.as_bytes()), hex(to.as_bytes())),
            Kind::S3 => (
                BlobKey::for_bytes(from.as_bytes()).hex().to_owned(),
                BlobKey::for_bytes(to.as_bytes()).hex().to_owned(),
            ),
        };
        assert!(url.contains(&from), "{url}");
        url.replace(&from, &to)
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A server of the photos app on `db` with `blobs`; the engine's `Server` too, for collection.
async fn server_with(db: &TestDb, blobs: Blobs) -> (TestServer, engine::Server) {
    server_with_limits(db, blobs, engine::limits::Limits::default().rate(0, 0).concurrent_per_actor(0)).await
}

async fn server_with_limits(db: &TestDb, blobs: Blobs, limits: engine::limits::Limits) -> (TestServer, engine::Server) {
    let server = engine::Server::builder()
        .app(photos::app())
        .storage(db.store(engine::storage::StoreLimits::default()))
        .auth(engine::auth::BearerTokenAuth::new(SECRET))
        .limits(limits)
        .blobs(blobs)
        .build()
        .await
        .unwrap();
    (TestServer::serve_engine(&server).await, server)
}

/// Upload `bytes` as `user`: the ticket's status, then the upload's.
async fn upload(server: &TestServer, user: &str, bytes: &[u8]) -> (StatusCode, Option<StatusCode>) {
    let key = BlobKey::for_bytes(bytes);
    let (status, ticket) = ticket(server, "/blobs/upload", user, json!({"key": key, "size": bytes.len()})).await;
    if status != StatusCode::OK {
        return (status, None);
    }
    (status, Some(put(server, &ticket, bytes.to_vec()).await.0))
}

/// `PUT` `body` to the ticket's URL with the ticket's headers.
async fn put(server: &TestServer, ticket: &Value, body: impl Into<reqwest::Body>) -> (StatusCode, String) {
    put_to(server, ticket["url"].as_str().unwrap(), ticket, body).await
}

async fn put_to(
    server: &TestServer,
    url: &str,
    ticket: &Value,
    body: impl Into<reqwest::Body>,
) -> (StatusCode, String) {
    let mut request = server.http.put(absolute(server, url)).body(body);
    for (name, value) in ticket["headers"].as_object().into_iter().flatten() {
        request = request.header(name, value.as_str().unwrap());
    }
    let response = request.send().await.unwrap();
    (response.status(), response.text().await.unwrap())
}

async fn get(server: &TestServer, url: &str) -> (StatusCode, Vec<u8>) {
    let response = server.http.get(absolute(server, url)).send().await.unwrap();
    (response.status(), response.bytes().await.unwrap().to_vec())
}

/// A URL a ticket names: relative to the server's, or one of the object store's.
fn absolute(server: &TestServer, url: &str) -> String {
    match url.starts_with('/') {
        true => server.url(url),
        false => url.to_owned(),
    }
}

/// Push `add_photo` as `user`, asserting it applied.
async fn add_photo(server: &TestServer, user: &str, id: &str, album: &str, key: &BlobKey) {
    let push = json!({"clientId": uuid::Uuid::new_v4(), "mutations": [{"mutationId": 1, "clientMutationId": uuid::Uuid::new_v4(),
        "name": "add_photo", "args": {"id": id, "album": album, "blob": key}}]});
    let pushed: Value = server.post("/sync/push", Some(user), push.to_string()).await.json().await.unwrap();
    assert_eq!(pushed["results"][0]["status"], "applied", "{pushed}");
}

async fn member(db: &TestDb, album: &str, user: &str, member: bool) {
    let sql = match member {
        true => "INSERT INTO album_members (album, user_id) VALUES ($1, $2)",
        false => "DELETE FROM album_members WHERE album = $1 AND user_id = $2",
    };
    sqlx::query(sql).bind(album).bind(user).execute(&db.pool).await.unwrap();
}

/// The status and problem of a download ticket for `key` as `user`.
async fn download(server: &TestServer, user: &str, key: &BlobKey) -> (StatusCode, Value) {
    ticket(server, "/blobs/download", user, json!({"key": key})).await
}

async fn ticket(server: &TestServer, route: &str, user: &str, body: Value) -> (StatusCode, Value) {
    let response = server.post(route, Some(user), body.to_string()).await;
    (response.status(), response.json().await.unwrap())
}

async fn uploads_are_checked_and_downloads_go_only_to_readers_of_a_row(kind: Kind) {
    let db = TestDb::new().await;
    let store = Store::start(kind, &db).await;
    let (server, _engine) = server_with(&db, store.blob_store()().max_size(1 << 20)).await;
    let bytes: Vec<u8> = b"a photo of a cat ".repeat(1000);
    let key = BlobKey::for_bytes(&bytes);

    let (status, up) = ticket(&server, "/blobs/upload", "alice", json!({"key": key, "size": bytes.len()})).await;
    assert_eq!(status, StatusCode::OK, "{up}");
    assert_eq!((up["key"].as_str(), up["method"].as_str()), (Some(key.as_str()), Some("PUT")));
    let url = up["url"].as_str().unwrap().to_owned();
    match kind {
        Kind::LocalFs => assert!(url.starts_with("/blobs/data/"), "{url}"),
        Kind::S3 => assert!(url.starts_with(&store.s3.as_ref().unwrap().endpoint()), "{url}"),
    }

    // Other bytes of the same length, a forged signature, a URL made to name another
    // uploader, too few or too many bytes, an expired URL of the same store: each refused.
    let mut other = bytes.clone();
    other[0] ^= 1;
    // (s3s-fs answers a body unlike its signed `x-amz-content-sha256` with a 500, and keeps
    // nothing of it.)
    let (status, answer) = put(&server, &up, other).await;
    assert!(!status.is_success(), "{status} {answer}");
    assert!(!store.holds(&key));
    let forged = format!("{}0000", &url[..url.len() - 4]);
    assert_eq!(put_to(&server, &forged, &up, bytes.clone()).await.0, StatusCode::FORBIDDEN);
    let as_bob = store.as_other_actor(&url, "alice", "bob");
    assert_eq!(put_to(&server, &as_bob, &up, bytes.clone()).await.0, StatusCode::FORBIDDEN);
    let (short, long) = (bytes[..100].to_vec(), [bytes.as_slice(), b"!"].concat());
    let (short, long) = (put(&server, &up, short).await, put(&server, &up, long).await);
    assert!(short.0.is_client_error() && long.0.is_client_error(), "{short:?} {long:?}");
    if kind == Kind::LocalFs {
        assert_eq!((short.0, long.0), (StatusCode::BAD_REQUEST, StatusCode::PAYLOAD_TOO_LARGE));
        let mismatch = put(&server, &up, [&[bytes[0] ^ 1], &bytes[1..]].concat()).await;
        assert_eq!(mismatch.0, StatusCode::UNPROCESSABLE_ENTITY, "{}", mismatch.1);
    }
    let past = engine::Timestamp::from(std::time::SystemTime::now() - Duration::from_secs(5));
    let expired = store.upload_url(&Upload::new(key.clone(), bytes.len() as u64, "alice"), past);
    assert_eq!(put(&server, &expired, bytes.clone()).await.0, StatusCode::FORBIDDEN);
    let (status, answer) = put(&server, &up, bytes.clone()).await;
    assert!(status.is_success(), "{status} {answer}");
    // The engine's route serves one upload per URL. An object store takes the same bytes again
    // under it until it expires, into the same object: nothing changes.
    let again = put(&server, &up, bytes.clone()).await.0;
    match kind {
        Kind::LocalFs => assert_eq!(again, StatusCode::FORBIDDEN),
        Kind::S3 => assert!(again.is_success(), "{again}"),
    }

    // No row holds the key yet: not even the uploader gets it.
    assert_eq!(download(&server, "alice", &key).await.0, StatusCode::NOT_FOUND);
    member(&db, "holiday", "alice", true).await;
    add_photo(&server, "alice", "p1", "holiday", &key).await;
    let (status, down) = download(&server, "alice", &key).await;
    assert_eq!(status, StatusCode::OK, "{down}");
    assert_eq!(down["method"], "GET");
    let down_url = down["url"].as_str().unwrap();
    assert_eq!(get(&server, down_url).await, (StatusCode::OK, bytes.clone()));
    // The download URL does not upload, and names only its own blob.
    assert_eq!(put_to(&server, down_url, &json!({}), bytes.clone()).await.0, StatusCode::FORBIDDEN);
    let elsewhere = down_url.replacen(key.hex(), BlobKey::for_bytes(b"other").hex(), 1);
    assert_eq!(get(&server, &elsewhere).await.0, StatusCode::FORBIDDEN);

    // Bob reads no row that holds it; once a member of the album, he does.
    let (status, problem) = download(&server, "bob", &key).await;
    assert_eq!((status, problem["code"].as_str()), (StatusCode::NOT_FOUND, Some("not_found")), "{problem}");
    member(&db, "holiday", "bob", true).await;
    assert_eq!(download(&server, "bob", &key).await.0, StatusCode::OK);

    // Bad requests.
    let (status, _) = ticket(&server, "/blobs/upload", "alice", json!({"key": "sha256:nothex", "size": 1})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = ticket(&server, "/blobs/upload", "alice", json!({"key": key, "size": 1, "other": 1})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, problem) = ticket(&server, "/blobs/upload", "alice", json!({"key": key, "size": 2 << 20})).await;
    assert_eq!((status, problem["code"].as_str()), (StatusCode::PAYLOAD_TOO_LARGE, Some("payload_too_large")));
    let ask = json!({"key": key});
    assert_eq!(server.post("/blobs/upload", None, ask.to_string()).await.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_server_without_blobs_says_so() {
    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b).await;
    let key = BlobKey::for_bytes(b"x");
    for (route, body) in [("/blobs/upload", json!({"key": key, "size": 1})), ("/blobs/download", json!({"key": key}))] {
        let response = server.post(route, Some("alice"), body.to_string()).await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{route}");
        let problem: Value = response.json().await.unwrap();
        assert_eq!(problem["code"], "not_found", "{problem}");
    }
}

async fn blobs_are_as_private_as_rows(kind: Kind) {
    let db = TestDb::new().await;
    let store = Store::start(kind, &db).await;
    let (server, _engine) = server_with(&db, store.blob_store()()).await;
    let private = b"alice's private photo".to_vec();
    let key = BlobKey::for_bytes(&private);
    let (status, uploaded) = upload(&server, "alice", &private).await;
    assert!(status == StatusCode::OK && uploaded.is_some_and(|s| s.is_success()), "{status} {uploaded:?}");
    for album in ["a1", "a2"] {
        member(&db, album, "alice", true).await;
        add_photo(&server, "alice", &format!("p-{album}"), album, &key).await;
    }

    // Mallory knows the key, asks to upload it and names it in a row of her own: that gives
    // her nothing (she never sent the bytes), and her refusal is the one for bytes nobody
    // uploaded.
    let never = BlobKey::for_bytes(b"never uploaded");
    member(&db, "m-album", "mallory", true).await;
    let (status, ticket) =
        ticket(&server, "/blobs/upload", "mallory", json!({"key": key, "size": private.len()})).await;
    assert_eq!(status, StatusCode::OK, "{ticket}");
    add_photo(&server, "mallory", "m1", "m-album", &key).await;
    add_photo(&server, "mallory", "m2", "m-album", &never).await;
    let (status, refused) = download(&server, "mallory", &key).await;
    let (never_status, never_refused) = download(&server, "mallory", &never).await;
    assert_eq!((status, never_status), (StatusCode::NOT_FOUND, StatusCode::NOT_FOUND), "{refused}");
    let without_key = |problem: &Value, key: &BlobKey| problem.to_string().replace(key.as_str(), "KEY");
    assert_eq!(without_key(&refused, &key), without_key(&never_refused, &never), "existence is not told");

    // A member of an album of Alice's reads her row there, and gets the bytes.
    member(&db, "a1", "bob", true).await;
    member(&db, "a2", "bob", true).await;
    member(&db, "a1", "carol", true).await;
    for user in ["bob", "carol"] {
        let (status, down) = download(&server, user, &key).await;
        assert_eq!(status, StatusCode::OK, "{user}: {down}");
        assert_eq!(get(&server, down["url"].as_str().unwrap()).await, (StatusCode::OK, private.clone()));
    }
    // Removed from a1, Carol loses what a1 gave; Bob keeps what a2 gives, until he leaves it too.
    member(&db, "a1", "carol", false).await;
    member(&db, "a1", "bob", false).await;
    assert_eq!(download(&server, "carol", &key).await.0, StatusCode::NOT_FOUND);
    assert_eq!(download(&server, "bob", &key).await.0, StatusCode::OK);
    member(&db, "a2", "bob", false).await;
    assert_eq!(download(&server, "bob", &key).await.0, StatusCode::NOT_FOUND);

    // Mallory, once a member of a1, reads a row of Alice's naming the key: now she may.
    member(&db, "a1", "mallory", true).await;
    assert_eq!(download(&server, "mallory", &key).await.0, StatusCode::OK);
}

async fn quota_and_uploads_in_flight_are_reserved_by_tickets(kind: Kind) {
    let db = TestDb::new().await;
    let store = Store::start(kind, &db).await;
    let blobs = store.blob_store()().max_size(8 << 20).quota_per_actor(Some(3 << 20)).uploads_in_flight(2);
    let (server, _engine) = server_with(&db, blobs).await;
    let ok = |(status, uploaded): (StatusCode, Option<StatusCode>)| {
        status == StatusCode::OK && uploaded.is_some_and(|s| s.is_success())
    };
    let big: Vec<u8> = (0..(2 << 20)).map(|i: u32| (i % 251) as u8).collect();
    assert!(ok(upload(&server, "alice", &big).await));
    // The same bytes again count once.
    assert!(ok(upload(&server, "alice", &big).await));
    let more: Vec<u8> = vec![7; 1536 << 10];
    let (status, problem) =
        ticket(&server, "/blobs/upload", "alice", json!({"key": BlobKey::for_bytes(&more), "size": more.len()})).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{problem}");
    assert!(problem["detail"].as_str().unwrap().contains("quota"), "{problem}");
    // Two tickets that fit alone but not together: the first reserves its bytes, so the second
    // is refused before any byte moves.
    let (a, b) = (vec![1u8; 600 << 10], vec![2u8; 600 << 10]);
    let tickets = [&a, &b].map(|bytes| json!({"key": BlobKey::for_bytes(bytes), "size": bytes.len()}));
    let (status, first) = ticket(&server, "/blobs/upload", "alice", tickets[0].clone()).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let (status, problem) = ticket(&server, "/blobs/upload", "alice", tickets[1].clone()).await;
    assert_eq!((status, problem["code"].as_str()), (StatusCode::PAYLOAD_TOO_LARGE, Some("payload_too_large")));
    assert!(put(&server, &first, a).await.0.is_success());

    // Another actor has a quota of its own, and two uploads in flight at most: a third ticket
    // waits until one of them is done.
    let small = |n: u8| vec![n; 1000];
    let mut open = Vec::new();
    for n in 0..2 {
        let (status, ticket) =
            ticket(&server, "/blobs/upload", "bob", json!({"key": BlobKey::for_bytes(&small(n)), "size": 1000})).await;
        assert_eq!(status, StatusCode::OK, "{ticket}");
        open.push(ticket);
    }
    let third = json!({"key": BlobKey::for_bytes(&small(2)), "size": 1000});
    let response = server.post("/blobs/upload", Some("bob"), third.to_string()).await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(response.headers().contains_key("retry-after"));
    let problem: Value = response.json().await.unwrap();
    assert_eq!(problem["code"], "rate_limited", "{problem}");
    assert!(problem["detail"].as_str().unwrap().contains("in flight"), "{problem}");
    assert!(put(&server, &open[0], small(0)).await.0.is_success());
    let (status, problem) = ticket(&server, "/blobs/upload", "bob", third).await;
    assert_eq!(status, StatusCode::OK, "{problem}");

    let key = BlobKey::for_bytes(&big);
    member(&db, "a1", "alice", true).await;
    add_photo(&server, "alice", "p1", "a1", &key).await;
    let (_, down) = download(&server, "alice", &key).await;
    let response = server.http.get(absolute(&server, down["url"].as_str().unwrap())).send().await.unwrap();
    assert_eq!(response.headers()["content-length"], (2u64 << 20).to_string().as_str());
    assert_eq!(response.bytes().await.unwrap().to_vec(), big);
}

async fn tickets_asked_for_together_never_pass_the_quota(kind: Kind) {
    let db = TestDb::new().await;
    let store = Store::start(kind, &db).await;
    let blobs = store.blob_store()().quota_per_actor(Some(5 << 20)).uploads_in_flight(100);
    let (server, _engine) = server_with(&db, blobs).await;
    let files: Vec<Vec<u8>> = (0..12u8).map(|n| vec![n; 1 << 20]).collect();
    let asked = files.iter().map(|bytes| {
        let body = json!({"key": BlobKey::for_bytes(bytes), "size": bytes.len()});
        ticket(&server, "/blobs/upload", "alice", body)
    });
    let answers = futures_util::future::join_all(asked).await;
    let granted: Vec<usize> = (0..files.len()).filter(|i| answers[*i].0 == StatusCode::OK).collect();
    assert_eq!(granted.len(), 5, "{answers:?}");
    assert!(answers.iter().all(|(status, _)| [StatusCode::OK, StatusCode::PAYLOAD_TOO_LARGE].contains(status)));
    // The five go up together, and all fit.
    let sent = granted.iter().map(|i| put(&server, &answers[*i].1, files[*i].clone()));
    for (status, answer) in futures_util::future::join_all(sent).await {
        assert!(status.is_success(), "{status} {answer}");
    }
    let more = json!({"key": BlobKey::for_bytes(b"one byte more"), "size": 13});
    assert_eq!(ticket(&server, "/blobs/upload", "alice", more).await.0, StatusCode::PAYLOAD_TOO_LARGE);
}

async fn a_ticket_long_expired_unused_gives_way_to_a_new_one(kind: Kind) {
    let db = TestDb::new().await;
    let store = Store::start(kind, &db).await;
    let blobs = store.blob_store()().quota_per_actor(Some(1 << 20)).uploads_in_flight(1);
    let (server, _engine) = server_with(&db, blobs).await;
    let (unused, wanted) = (vec![1u8; 800 << 10], vec![2u8; 800 << 10]);
    let asked = |bytes: &[u8]| json!({"key": BlobKey::for_bytes(bytes), "size": bytes.len()});
    let (status, first) = ticket(&server, "/blobs/upload", "alice", asked(&unused)).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    // The open ticket holds the one upload in flight, and most of the quota.
    let (status, problem) = ticket(&server, "/blobs/upload", "alice", asked(&wanted)).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{problem}");
    // As the ledger sees it the first ticket expired long ago, and nothing arrived: the next
    // ticket drops its reservation, and takes the place and the bytes it held.
    sqlx::query("UPDATE _engine_blobs SET expires_at = 0 WHERE blob_key = $1")
        .bind(BlobKey::for_bytes(&unused).as_str())
        .execute(&db.pool)
        .await
        .unwrap();
    let (status, second) = ticket(&server, "/blobs/upload", "alice", asked(&wanted)).await;
    assert_eq!(status, StatusCode::OK, "{second}");
    assert!(put(&server, &second, wanted).await.0.is_success());
}

async fn content_types_are_the_server_s_setting(kind: Kind) {
    let db = TestDb::new().await;
    let store = Store::start(kind, &db).await;
    let blobs = store.blob_store()().content_types(Some(["image/png", "image/jpeg"]));
    let (server, _engine) = server_with(&db, blobs).await;
    let bytes = b"\x89PNG not really".to_vec();
    let key = BlobKey::for_bytes(&bytes);
    for body in
        [json!({"key": key, "size": bytes.len()}), json!({"key": key, "size": bytes.len(), "contentType": "text/html"})]
    {
        let (status, problem) = ticket(&server, "/blobs/upload", "alice", body).await;
        assert_eq!((status, problem["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("validation_failed")));
        assert!(problem["detail"].as_str().unwrap().contains("image/png, image/jpeg"), "{problem}");
    }
    let body = json!({"key": key, "size": bytes.len(), "contentType": "image/png"});
    let (status, up) = ticket(&server, "/blobs/upload", "alice", body).await;
    assert_eq!(status, StatusCode::OK, "{up}");
    assert!(put(&server, &up, bytes.clone()).await.0.is_success());
    if kind == Kind::S3 {
        // The object store keeps the type, signed into the URL, and serves it.
        assert_eq!(up["headers"]["content-type"], "image/png", "{up}");
        member(&db, "a1", "alice", true).await;
        add_photo(&server, "alice", "p1", "a1", &key).await;
        let (_, down) = download(&server, "alice", &key).await;
        let response = server.http.get(down["url"].as_str().unwrap()).send().await.unwrap();
        assert_eq!(response.headers()["content-type"], "image/png");
    }
}

async fn blobs_no_row_names_are_collected_after_the_grace(kind: Kind) {
    let db = TestDb::new().await;
    let store = Store::start(kind, &db).await;
    let (server, engine) = server_with(&db, store.blob_store()().unused_grace(Duration::ZERO)).await;
    let [kept, never_named, unnamed] = [b"kept".to_vec(), b"never named".to_vec(), b"named, then not".to_vec()];
    for bytes in [&kept, &never_named, &unnamed] {
        let (status, uploaded) = upload(&server, "alice", bytes).await;
        assert!(status == StatusCode::OK && uploaded.is_some_and(|s| s.is_success()));
    }
    let keys = [&kept, &never_named, &unnamed].map(|bytes| BlobKey::for_bytes(bytes));
    member(&db, "a1", "alice", true).await;
    add_photo(&server, "alice", "p1", "a1", &keys[0]).await;
    add_photo(&server, "alice", "p3", "a1", &keys[2]).await;
    sqlx::query("DELETE FROM photos WHERE id = 'p3'").execute(&db.pool).await.unwrap();

    // The first pass notes the blobs no row names; one a grace period later deletes them, a
    // batch of one blob at a time.
    let first = engine.collect_blobs(1).await.unwrap();
    assert_eq!((first.noted, first.deleted), (2, 0), "{first:?}");
    assert!(keys.iter().all(|key| store.holds(key)));
    let second = engine.collect_blobs(1).await.unwrap();
    assert_eq!((second.noted, second.deleted), (0, 2), "{second:?}");
    assert!(second.steps > 3, "{second:?}");
    assert_eq!(keys.each_ref().map(|key| store.holds(key)), [true, false, false]);
    assert_eq!(download(&server, "alice", &keys[0]).await.0, StatusCode::OK);
    // Deleted bytes count no more, and can come again.
    let (status, uploaded) = upload(&server, "alice", &never_named).await;
    assert!(status == StatusCode::OK && uploaded.is_some_and(|s| s.is_success()));
    add_photo(&server, "alice", "p2", "a1", &keys[1]).await;
    assert_eq!(download(&server, "alice", &keys[1]).await.0, StatusCode::OK);
    let third = engine.collect_blobs(10).await.unwrap();
    assert_eq!((third.noted, third.deleted), (0, 0), "{third:?}");
    assert!(store.holds(&keys[1]));
}

async fn bytes_that_land_after_their_reservation_was_dropped_are_collected(kind: Kind) {
    let db = TestDb::new().await;
    let store = Store::start(kind, &db).await;
    let (server, engine) = server_with(&db, store.blob_store()()).await;
    let kept = b"a photo in an album".to_vec();
    let (status, uploaded) = upload(&server, "alice", &kept).await;
    assert!(status == StatusCode::OK && uploaded.is_some_and(|s| s.is_success()));
    member(&db, "a1", "alice", true).await;
    add_photo(&server, "alice", "p1", "a1", &BlobKey::for_bytes(&kept)).await;

    let late = b"bytes that came too late".to_vec();
    let key = BlobKey::for_bytes(&late);
    let (status, up) = ticket(&server, "/blobs/upload", "alice", json!({"key": key, "size": late.len()})).await;
    assert_eq!(status, StatusCode::OK, "{up}");
    // As the ledger sees it the ticket expired long ago, and nothing arrived: collection drops
    // the reservation.
    sqlx::query("UPDATE _engine_blobs SET expires_at = 0 WHERE blob_key = $1")
        .bind(key.as_str())
        .execute(&db.pool)
        .await
        .unwrap();
    let first = engine.collect_blobs(10).await.unwrap();
    assert_eq!((first.dropped, first.orphans), (1, 0), "{first:?}");
    // Then the bytes land: an object store takes them under the URL, good by its signature
    // still; the directory gets them from a body received as the reservation was dropped.
    match kind {
        Kind::S3 => assert!(put(&server, &up, late.clone()).await.0.is_success()),
        Kind::LocalFs => std::fs::write(store.dir.join(key.hex()), &late).unwrap(),
    }
    assert!(store.holds(&key));

    // No upload in the ledger accounts for them: the next collection deletes them, a batch of
    // one object at a time, and keeps the blob a row names.
    let second = engine.collect_blobs(1).await.unwrap();
    assert_eq!((second.orphans, second.deleted), (1, 0), "{second:?}");
    assert!(!store.holds(&key));
    assert!(store.holds(&BlobKey::for_bytes(&kept)));
    assert_eq!(download(&server, "alice", &BlobKey::for_bytes(&kept)).await.0, StatusCode::OK);
    let third = engine.collect_blobs(1).await.unwrap();
    assert_eq!(third.orphans, 0, "{third:?}");
}

/// Whether a session of the test's database waits for an advisory lock (Postgres).
async fn waits_for_a_blob_lock(db: &TestDb) -> bool {
    let waiting: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
           AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
    )
    .fetch_one(db.pg())
    .await
    .unwrap();
    waiting > 0
}

/// Wait until a session of the test's database waits for an advisory lock.
async fn until_a_blob_lock_is_awaited(db: &TestDb) {
    for _ in 0..1000 {
        if waits_for_a_blob_lock(db).await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("nothing waits for a blob's lock");
}

/// A write naming a blob and collection deleting it take turns on the blob's lock: the write
/// clears the blob's note of disuse, and collection decides with the rows committed before it.
#[tokio::test]
async fn a_write_naming_a_blob_and_its_collection_take_turns() {
    let db = TestDb::new().await;
    let store = Store::start(Kind::LocalFs, &db).await;
    let (server, engine) = server_with(&db, store.blob_store()().unused_grace(Duration::ZERO)).await;
    let engine = std::sync::Arc::new(engine);
    let (first, second) = (b"a photo noted unused".to_vec(), b"another photo noted unused".to_vec());
    for bytes in [&first, &second] {
        let (status, uploaded) = upload(&server, "alice", bytes).await;
        assert!(status == StatusCode::OK && uploaded.is_some_and(|s| s.is_success()));
    }
    let keys = [&first, &second].map(|bytes| BlobKey::for_bytes(bytes));
    member(&db, "a1", "alice", true).await;
    let noted = engine.collect_blobs(10).await.unwrap();
    assert_eq!(noted.noted, 2, "{noted:?}");
    let unused_since = |key: &BlobKey| {
        sqlx::query_scalar::<_, Option<i64>>("SELECT unused_since FROM _engine_blobs WHERE blob_key = $1")
            .bind(key.as_str().to_owned())
            .fetch_one(&db.pool)
    };

    if backend() == Backend::Postgres {
        // A collection deciding about the first blob holds its lock: a push naming it waits.
        let mut deciding = db.pg().begin().await.unwrap();
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
            .bind(format!("_engine_blobs/key:{}", keys[0]))
            .execute(&mut *deciding)
            .await
            .unwrap();
        let push = json!({"clientId": uuid::Uuid::new_v4(), "mutations": [{"mutationId": 1,
            "clientMutationId": uuid::Uuid::new_v4(), "name": "add_photo",
            "args": {"id": "p1", "album": "a1", "blob": keys[0]}}]});
        let request = server
            .http
            .post(server.url("/sync/push"))
            .bearer_auth(TestServer::token("alice"))
            .header("content-type", "application/json")
            .body(push.to_string());
        let pushed = tokio::spawn(request.send());
        until_a_blob_lock_is_awaited(&db).await;
        deciding.commit().await.unwrap();
        let pushed: Value = pushed.await.unwrap().unwrap().json().await.unwrap();
        assert_eq!(pushed["results"][0]["status"], "applied", "{pushed}");
    } else {
        add_photo(&server, "alice", "p1", "a1", &keys[0]).await;
    }
    // The write cleared the note in its transaction.
    assert_eq!(unused_since(&keys[0]).await.unwrap(), None);

    if backend() == Backend::Postgres {
        // A write naming the second blob, as a mutation makes it (the row, then the blob's lock),
        // not committed yet: the collection waits for it, then sees its row, and keeps the blob.
        let mut writing = db.pg().begin().await.unwrap();
        sqlx::query("INSERT INTO photos (id, owner_id, album, blob) VALUES ('p2', 'alice', 'a1', $1)")
            .bind(keys[1].as_str())
            .execute(&mut *writing)
            .await
            .unwrap();
        sqlx::query("SELECT pg_advisory_xact_lock_shared(hashtextextended($1, 0))")
            .bind(format!("_engine_blobs/key:{}", keys[1]))
            .execute(&mut *writing)
            .await
            .unwrap();
        let collecting = tokio::spawn({
            let engine = engine.clone();
            async move { engine.collect_blobs(10).await }
        });
        until_a_blob_lock_is_awaited(&db).await;
        writing.commit().await.unwrap();
        let collected = collecting.await.unwrap().unwrap();
        assert_eq!(collected.deleted, 0, "{collected:?}");
    } else {
        add_photo(&server, "alice", "p2", "a1", &keys[1]).await;
    }
    assert!(keys.iter().all(|key| store.holds(key)));
    assert_eq!(download(&server, "alice", &keys[0]).await.0, StatusCode::OK);
    let again = engine.collect_blobs(10).await.unwrap();
    assert_eq!((again.noted, again.deleted), (0, 0), "{again:?}");
}

/// One upload URL of the engine's own route receives one body at a time: a second request on
/// it while a body arrives is refused before its body is read.
#[tokio::test]
async fn one_upload_url_receives_one_body_at_a_time() {
    let db = TestDb::new().await;
    let store = Store::start(Kind::LocalFs, &db).await;
    let (server, _engine) = server_with(&db, store.blob_store()()).await;
    let bytes = vec![5u8; 64 << 10];
    let key = BlobKey::for_bytes(&bytes);
    let (_, up) = ticket(&server, "/blobs/upload", "alice", json!({"key": key, "size": bytes.len()})).await;

    let (send, body) = streamed_body();
    let first = {
        let (url, http) = (absolute(&server, up["url"].as_str().unwrap()), server.http.clone());
        tokio::spawn(async move { http.put(url).body(body).send().await.unwrap().status() })
    };
    send.send(bytes[..1000].to_vec()).await.unwrap();
    // The first body holds the ticket once the ledger says so.
    loop {
        let receiving: Option<i64> =
            sqlx::query_scalar("SELECT receiving_until FROM _engine_blobs WHERE blob_key = $1")
                .bind(key.as_str())
                .fetch_one(&db.pool)
                .await
                .unwrap();
        if receiving.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (status, problem) = put(&server, &up, bytes.clone()).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{problem}");
    send.send(bytes[1000..].to_vec()).await.unwrap();
    drop(send);
    assert_eq!(first.await.unwrap(), StatusCode::NO_CONTENT);
    assert_eq!(put(&server, &up, bytes.clone()).await.0, StatusCode::FORBIDDEN);
}

/// A request body sent as the test sends its chunks, ending when the sender is dropped.
fn streamed_body() -> (tokio::sync::mpsc::Sender<Vec<u8>>, reqwest::Body) {
    let (send, receive) = tokio::sync::mpsc::channel::<Vec<u8>>(1);
    let chunks = futures_util::stream::unfold(receive, |mut receive| async move {
        receive.recv().await.map(|chunk| (Ok::<_, std::io::Error>(chunk), receive))
    });
    (send, reqwest::Body::wrap_stream(chunks))
}

/// A body that stops arriving is cut at the upload timeout, and its URL works again.
#[tokio::test]
async fn a_stalled_upload_times_out_and_leaves_its_url_usable() {
    let db = TestDb::new().await;
    let store = Store::start(Kind::LocalFs, &db).await;
    let (server, _engine) = server_with(&db, store.blob_store()().upload_timeout(Duration::from_millis(300))).await;
    let bytes = vec![9u8; 10_000];
    let key = BlobKey::for_bytes(&bytes);
    let (_, up) = ticket(&server, "/blobs/upload", "alice", json!({"key": key, "size": bytes.len()})).await;
    let (send, body) = streamed_body();
    send.send(bytes[..10].to_vec()).await.unwrap();
    let response = server.http.put(server.url(up["url"].as_str().unwrap())).body(body);
    let response = response.send().await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    let problem: Value = response.json().await.unwrap();
    assert_eq!(problem["code"], "retry_later", "{problem}");
    drop(send);
    assert_eq!(put(&server, &up, bytes).await.0, StatusCode::NO_CONTENT);
}

/// A signed URL authenticates its request: a body slower than the deadline of connections that
/// have not authenticated (`Limits::unauthenticated_deadline`) is received whole.
#[tokio::test]
async fn an_upload_to_a_signed_url_may_outlast_the_unauthenticated_deadline() {
    let db = TestDb::new().await;
    let store = Store::start(Kind::LocalFs, &db).await;
    let deadline = Duration::from_millis(300);
    let limits = engine::limits::Limits::default().rate(0, 0).unauthenticated_deadline(deadline);
    let (server, _engine) = server_with_limits(&db, store.blob_store()(), limits).await;
    let bytes = vec![7u8; 10_000];
    let key = BlobKey::for_bytes(&bytes);
    let (_, up) = ticket(&server, "/blobs/upload", "alice", json!({"key": key, "size": bytes.len()})).await;
    let (send, body) = streamed_body();
    let (url, http) = (absolute(&server, up["url"].as_str().unwrap()), reqwest::Client::new());
    let uploading = tokio::spawn(async move { http.put(url).body(body).send().await });
    send.send(bytes[..10].to_vec()).await.unwrap();
    tokio::time::sleep(deadline * 3).await;
    send.send(bytes[10..].to_vec()).await.unwrap();
    drop(send);
    let response = uploading.await.unwrap().expect("the upload is answered");
    assert_eq!(response.status(), StatusCode::NO_CONTENT, "{:?}", response.text().await);
}

/// An object store that is down: a download whose upload must be looked for there is
/// `503 retry_later`.
#[tokio::test]
async fn an_object_store_that_is_down_is_a_retry_later() {
    let db = TestDb::new().await;
    let mut store = Store::start(Kind::S3, &db).await;
    let (server, _engine) = server_with(&db, store.blob_store()()).await;
    let bytes = b"a photo taken offline".to_vec();
    let key = BlobKey::for_bytes(&bytes);
    let (status, uploaded) = upload(&server, "alice", &bytes).await;
    assert!(status == StatusCode::OK && uploaded.is_some_and(|s| s.is_success()));
    member(&db, "a1", "alice", true).await;
    add_photo(&server, "alice", "p1", "a1", &key).await;
    store.s3.as_mut().unwrap().stop().await;
    let response = server.post("/blobs/download", Some("alice"), json!({"key": key}).to_string()).await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(response.headers().contains_key("retry-after"));
    let problem: Value = response.json().await.unwrap();
    assert_eq!(problem["code"], "retry_later", "{problem}");
}

/// A Rust client of the photos app at `url` for `user`, syncing only when told.
async fn photos_client(url: &str, user: &str, store: engine::client::StoreLocation) -> engine::client::Client {
    engine::client::Client::builder(url)
        .app(photos::app())
        .auth(engine::client::BearerToken::new(TestServer::token(user)))
        .store(store)
        .background(false)
        .build()
        .await
        .unwrap()
}

async fn a_rust_client_puts_offline_uploads_after_a_restart_and_another_downloads(kind: Kind) {
    let db = TestDb::new().await;
    let store = Store::start(kind, &db).await;
    let (server, _engine) = server_with(&db, store.blob_store()()).await;
    member(&db, "a1", "alice", true).await;
    member(&db, "a1", "bob", true).await;
    let file = std::env::temp_dir().join(format!("{}-alice.db", db.name));
    let bytes = b"a photo taken on a plane".repeat(500);

    // Offline (no server at that address): the bytes are kept and queued, and the row naming
    // them is queued too.
    let offline = format!("http://127.0.0.1:{}", crate::support::process::free_port());
    let alice = photos_client(&offline, "alice", engine::client::StoreLocation::File(file.clone())).await;
    let key = alice.put_blob(&bytes, Some("image/jpeg")).await.unwrap();
    assert_eq!(key, BlobKey::for_bytes(&bytes));
    let args = photos::AddPhoto { id: "p1".into(), album: "a1".into(), blob: key.clone() };
    alice.mutate::<photos::add_photo>(args).await.unwrap();
    assert!(alice.upload_blobs().await.is_err());
    assert_eq!(alice.blob(&key).await.unwrap(), bytes, "the bytes are on the device");
    drop(alice);

    // After a restart, online: the queue is still there, and goes up.
    let alice = photos_client(&server.url(""), "alice", engine::client::StoreLocation::File(file.clone())).await;
    let queued = alice.queued_blobs().await.unwrap();
    assert_eq!(queued.iter().map(|q| (&q.key, q.size)).collect::<Vec<_>>(), [(&key, bytes.len() as u64)]);
    alice.sync().await.unwrap();
    alice.upload_blobs().await.unwrap();
    assert!(alice.queued_blobs().await.unwrap().is_empty());
    assert!(store.holds(&key));

    // Bob syncs the row, and downloads the bytes it names.
    let bob = photos_client(&server.url(""), "bob", engine::client::StoreLocation::Memory).await;
    bob.sync().await.unwrap();
    let photo = bob.get::<photos::Photo>(&"p1".to_owned()).await.unwrap().expect("the row synced");
    assert_eq!(bob.blob(&photo.blob).await.unwrap(), bytes);
    // Carol reads no row naming it.
    let carol = photos_client(&server.url(""), "carol", engine::client::StoreLocation::Memory).await;
    let refused = carol.blob(&key).await.unwrap_err();
    assert!(matches!(refused, engine::client::Error::Server { status: 404, .. }), "{refused:?}");
    let _ = std::fs::remove_file(&file);
}

/// A Rust client tells where each blob stands, and a watcher sees it change: queued, then
/// cached once uploaded; for a reader, uploading while a row it holds names bytes the server
/// does not give yet, missing when no row names them; cached once downloaded. A member removed
/// from the album loses the rows, and with them the bytes it kept.
#[tokio::test]
async fn a_rust_client_watches_its_blobs_and_prunes_those_no_row_names() {
    use engine::client::{BlobState, StoreLocation};
    let db = TestDb::new().await;
    let store = Store::start(Kind::LocalFs, &db).await;
    let (server, _engine) = server_with(&db, store.blob_store()()).await;
    member(&db, "a1", "alice", true).await;
    member(&db, "a1", "bob", true).await;
    let bytes = b"a photo of the harbour".repeat(100);

    let alice = photos_client(&server.url(""), "alice", StoreLocation::Memory).await;
    let key = alice.put_blob(&bytes, None).await.unwrap();
    let mut uploaded = alice.watch_blob(&key).await.unwrap();
    assert_eq!(*uploaded.borrow_and_update(), BlobState::Queued);
    let args = photos::AddPhoto { id: "p1".into(), album: "a1".into(), blob: key.clone() };
    alice.mutate::<photos::add_photo>(args).await.unwrap();
    alice.sync().await.unwrap();

    // The row is on the server, the bytes not yet: Bob, who reads the row, sees them uploading;
    // Carol, who reads no row naming them, missing.
    let bob = photos_client(&server.url(""), "bob", StoreLocation::Memory).await;
    bob.sync().await.unwrap();
    assert_eq!(bob.blob_state(&key).await.unwrap(), BlobState::Unknown);
    let mut downloaded = bob.watch_blob(&key).await.unwrap();
    assert!(bob.blob(&key).await.is_err());
    downloaded.changed().await.unwrap();
    assert_eq!(*downloaded.borrow_and_update(), BlobState::Uploading);
    let carol = photos_client(&server.url(""), "carol", StoreLocation::Memory).await;
    assert!(carol.blob(&key).await.is_err());
    assert_eq!(carol.blob_state(&key).await.unwrap(), BlobState::Missing);

    alice.upload_blobs().await.unwrap();
    uploaded.changed().await.unwrap();
    assert_eq!(*uploaded.borrow_and_update(), BlobState::Cached);
    assert_eq!(bob.blob(&key).await.unwrap(), bytes);
    downloaded.changed().await.unwrap();
    assert_eq!(*downloaded.borrow_and_update(), BlobState::Cached);

    // Bob leaves the album: the pull takes its rows away, and the bytes no row names go too.
    member(&db, "a1", "bob", false).await;
    bob.sync().await.unwrap();
    assert!(bob.get::<photos::Photo>(&"p1".to_owned()).await.unwrap().is_none());
    downloaded.changed().await.unwrap();
    assert_eq!(*downloaded.borrow_and_update(), BlobState::Unknown);
    assert_eq!(bob.blob_state(&key).await.unwrap(), BlobState::Unknown);
    assert!(bob.blob(&key).await.is_err(), "the bytes are gone from Bob's device, and the server refuses them");
    assert_eq!(bob.blob_state(&key).await.unwrap(), BlobState::Missing);
    // Alice's own rows still name them: hers stay.
    alice.sync().await.unwrap();
    assert_eq!(alice.blob_state(&key).await.unwrap(), BlobState::Cached);
    assert_eq!(alice.blob(&key).await.unwrap(), bytes);
}
