//! Blobs over real TCP: signed upload and download URLs of the local-directory store, bytes
//! checked against their key, single-use upload URLs, a quota per actor, and downloads only for
//! actors who can read a row that an uploader of the bytes wrote the key into.

use engine::blob::{BlobStore, Blobs, Upload, local_fs};
use engine::{BlobKey, MutatorCtx, Outcome, Result};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::server::SECRET;
use crate::support::{TestDb, TestServer};

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

async fn server(db: &TestDb, dir: &std::path::Path) -> TestServer {
    server_with(db, Blobs::new(local_fs(dir, BLOB_SECRET)).max_size(1 << 20)).await
}

async fn server_with(db: &TestDb, blobs: Blobs) -> TestServer {
    let server = engine::Server::builder()
        .app(photos::app())
        .storage(db.store(engine::storage::StoreLimits::default()))
        .auth(engine::auth::BearerTokenAuth::new(SECRET))
        .limits(engine::limits::Limits::default().rate(0, 0))
        .blobs(blobs)
        .build()
        .await
        .unwrap();
    TestServer::serve(server.router()).await
}

/// Upload `bytes` as `user`: the ticket's status, then the upload's.
async fn upload(server: &TestServer, user: &str, bytes: &[u8]) -> (StatusCode, Option<StatusCode>) {
    let key = BlobKey::for_bytes(bytes);
    let (status, ticket) = ticket(server, "/blobs/upload", user, json!({"key": key, "size": bytes.len()})).await;
    if status != StatusCode::OK {
        return (status, None);
    }
    let url = ticket["url"].as_str().unwrap();
    (status, Some(send(server, reqwest::Method::PUT, url, bytes.to_vec()).await.0))
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

async fn send(server: &TestServer, method: reqwest::Method, url: &str, body: Vec<u8>) -> (StatusCode, Vec<u8>) {
    let response = server.http.request(method, server.url(url)).body(body).send().await.unwrap();
    (response.status(), response.bytes().await.unwrap().to_vec())
}

#[tokio::test]
async fn blobs_go_up_checked_and_come_down_only_to_readers_of_a_row_that_holds_them() {
    let db = TestDb::new().await;
    let dir = std::env::temp_dir().join(format!("{}-blobs", db.name));
    let server = server(&db, &dir).await;
    let bytes: Vec<u8> = b"a photo of a cat ".repeat(1000);
    let key = BlobKey::for_bytes(&bytes);

    let (status, up) = ticket(&server, "/blobs/upload", "alice", json!({"key": key, "size": bytes.len()})).await;
    assert_eq!(status, StatusCode::OK, "{up}");
    assert_eq!((up["key"].as_str(), up["method"].as_str()), (Some(key.as_str()), Some("PUT")));
    let url = up["url"].as_str().unwrap().to_owned();
    assert!(url.starts_with("/blobs/data/"), "{url}");

    // Other bytes of the same length, a forged signature, a URL for other bytes: refused.
    let mut other = bytes.clone();
    other[0] ^= 1;
    assert_eq!(send(&server, reqwest::Method::PUT, &url, other).await.0, StatusCode::UNPROCESSABLE_ENTITY);
    let forged = format!("{}0000", &url[..url.len() - 4]);
    assert_eq!(send(&server, reqwest::Method::PUT, &forged, bytes.clone()).await.0, StatusCode::FORBIDDEN);
    let short = &bytes[..100];
    assert_eq!(send(&server, reqwest::Method::PUT, &url, short.to_vec()).await.0, StatusCode::BAD_REQUEST);
    let long = [bytes.as_slice(), b"!"].concat();
    assert_eq!(send(&server, reqwest::Method::PUT, &url, long).await.0, StatusCode::PAYLOAD_TOO_LARGE);
    // An expired URL of the same store.
    let past = engine::Timestamp::from(std::time::SystemTime::now() - std::time::Duration::from_secs(5));
    let upload = Upload::new(key.clone(), bytes.len() as u64, "alice", None);
    let expired = local_fs(&dir, BLOB_SECRET).upload_url(&upload, past).unwrap();
    assert_eq!(send(&server, reqwest::Method::PUT, &expired.url, bytes.clone()).await.0, StatusCode::FORBIDDEN);
    assert_eq!(send(&server, reqwest::Method::PUT, &url, bytes.clone()).await.0, StatusCode::NO_CONTENT);
    // An upload URL serves one upload.
    let (status, again) = send(&server, reqwest::Method::PUT, &url, bytes.clone()).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{}", String::from_utf8_lossy(&again));

    // No row holds the key yet: not even the uploader gets it.
    let ask = json!({"key": key});
    assert_eq!(ticket(&server, "/blobs/download", "alice", ask.clone()).await.0, StatusCode::NOT_FOUND);
    sqlx::query("INSERT INTO album_members (album, user_id) VALUES ('holiday', 'alice')")
        .execute(&db.pool)
        .await
        .unwrap();
    let push = json!({"clientId": uuid::Uuid::new_v4(), "mutations": [{"mutationId": 1, "clientMutationId": uuid::Uuid::new_v4(),
        "name": "add_photo", "args": {"id": "p1", "album": "holiday", "blob": key}}]});
    let response = server.post("/sync/push", Some("alice"), push.to_string()).await;
    let pushed: Value = response.json().await.unwrap();
    assert_eq!(pushed["results"][0]["status"], "applied", "{pushed}");

    let (status, down) = ticket(&server, "/blobs/download", "alice", ask.clone()).await;
    assert_eq!(status, StatusCode::OK, "{down}");
    assert_eq!(down["method"], "GET");
    let got = send(&server, reqwest::Method::GET, down["url"].as_str().unwrap(), Vec::new()).await;
    assert_eq!(got, (StatusCode::OK, bytes.clone()));
    // The download URL does not upload, and names only its own blob.
    let down_url = down["url"].as_str().unwrap();
    assert_eq!(send(&server, reqwest::Method::PUT, down_url, bytes.clone()).await.0, StatusCode::FORBIDDEN);
    let elsewhere = down_url.replacen(key.hex(), BlobKey::for_bytes(b"other").hex(), 1);
    assert_eq!(send(&server, reqwest::Method::GET, &elsewhere, Vec::new()).await.0, StatusCode::FORBIDDEN);

    // Bob reads no row that holds it; once a member of the album, he does.
    let (status, problem) = ticket(&server, "/blobs/download", "bob", ask.clone()).await;
    assert_eq!((status, problem["code"].as_str()), (StatusCode::NOT_FOUND, Some("not_found")), "{problem}");
    sqlx::query("INSERT INTO album_members (album, user_id) VALUES ('holiday', 'bob')")
        .execute(&db.pool)
        .await
        .unwrap();
    assert_eq!(ticket(&server, "/blobs/download", "bob", ask.clone()).await.0, StatusCode::OK);

    // Bad requests.
    let (status, _) = ticket(&server, "/blobs/upload", "alice", json!({"key": "sha256:nothex", "size": 1})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = ticket(&server, "/blobs/upload", "alice", json!({"key": key, "size": 2 << 20})).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(server.post("/blobs/upload", None, ask.to_string()).await.status(), StatusCode::UNAUTHORIZED);
    let _ = std::fs::remove_dir_all(&dir);
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

#[tokio::test]
async fn blobs_are_as_private_as_rows() {
    let db = TestDb::new().await;
    let dir = std::env::temp_dir().join(format!("{}-blobs", db.name));
    let server = server(&db, &dir).await;
    let private = b"alice's private photo".to_vec();
    let key = BlobKey::for_bytes(&private);
    assert_eq!(upload(&server, "alice", &private).await, (StatusCode::OK, Some(StatusCode::NO_CONTENT)));
    for album in ["a1", "a2"] {
        member(&db, album, "alice", true).await;
        add_photo(&server, "alice", &format!("p-{album}"), album, &key).await;
    }

    // Mallory knows the key and names it in a row of her own: that gives her nothing, and her
    // refusal is the one for bytes nobody uploaded.
    let never = BlobKey::for_bytes(b"never uploaded");
    member(&db, "m-album", "mallory", true).await;
    add_photo(&server, "mallory", "m1", "m-album", &key).await;
    add_photo(&server, "mallory", "m2", "m-album", &never).await;
    let (status, refused) = download(&server, "mallory", &key).await;
    let (never_status, never_refused) = download(&server, "mallory", &never).await;
    assert_eq!((status, never_status), (StatusCode::NOT_FOUND, StatusCode::NOT_FOUND), "{refused}");
    let without_key = |problem: &Value, key: &BlobKey| problem.to_string().replace(key.as_str(), "KEY");
    assert_eq!(without_key(&refused, &key), without_key(&never_refused, &never), "existence is not told");
    // Asking to upload tells nothing either.
    let (status, ticket) =
        ticket(&server, "/blobs/upload", "mallory", json!({"key": key, "size": private.len()})).await;
    assert_eq!(status, StatusCode::OK, "{ticket}");

    // A member of an album of Alice's reads her row there, and gets the bytes.
    member(&db, "a1", "bob", true).await;
    member(&db, "a2", "bob", true).await;
    member(&db, "a1", "carol", true).await;
    for user in ["bob", "carol"] {
        let (status, down) = download(&server, user, &key).await;
        assert_eq!(status, StatusCode::OK, "{user}: {down}");
        let got = send(&server, reqwest::Method::GET, down["url"].as_str().unwrap(), Vec::new()).await;
        assert_eq!(got, (StatusCode::OK, private.clone()));
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
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn an_actor_s_blobs_stay_within_its_quota_and_come_down_as_streams() {
    let db = TestDb::new().await;
    let dir = std::env::temp_dir().join(format!("{}-blobs", db.name));
    let blobs = Blobs::new(local_fs(&dir, BLOB_SECRET)).max_size(8 << 20).quota_per_actor(Some(3 << 20));
    let server = server_with(&db, blobs).await;
    let big: Vec<u8> = (0..(2 << 20)).map(|i: u32| (i % 251) as u8).collect();
    assert_eq!(upload(&server, "alice", &big).await, (StatusCode::OK, Some(StatusCode::NO_CONTENT)));
    // The same bytes again count once.
    assert_eq!(upload(&server, "alice", &big).await, (StatusCode::OK, Some(StatusCode::NO_CONTENT)));
    let more: Vec<u8> = vec![7; 1536 << 10];
    let (status, problem) =
        ticket(&server, "/blobs/upload", "alice", json!({"key": BlobKey::for_bytes(&more), "size": more.len()})).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{problem}");
    assert!(problem["detail"].as_str().unwrap().contains("quota"), "{problem}");
    // Two tickets that fit alone but not together: the second upload is refused.
    let (a, b) = (vec![1u8; 600 << 10], vec![2u8; 600 << 10]);
    let tickets = [&a, &b].map(|bytes| json!({"key": BlobKey::for_bytes(bytes), "size": bytes.len()}));
    let (_, first) = ticket(&server, "/blobs/upload", "alice", tickets[0].clone()).await;
    let (_, second) = ticket(&server, "/blobs/upload", "alice", tickets[1].clone()).await;
    assert_eq!(send(&server, reqwest::Method::PUT, first["url"].as_str().unwrap(), a).await.0, StatusCode::NO_CONTENT);
    assert_eq!(
        send(&server, reqwest::Method::PUT, second["url"].as_str().unwrap(), b).await.0,
        StatusCode::PAYLOAD_TOO_LARGE
    );
    // Another actor has a quota of its own.
    assert_eq!(upload(&server, "bob", &more).await, (StatusCode::OK, Some(StatusCode::NO_CONTENT)));

    let key = BlobKey::for_bytes(&big);
    member(&db, "a1", "alice", true).await;
    add_photo(&server, "alice", "p1", "a1", &key).await;
    let (_, down) = download(&server, "alice", &key).await;
    let response = server.http.get(server.url(down["url"].as_str().unwrap())).send().await.unwrap();
    assert_eq!(response.headers()["content-length"], (2u64 << 20).to_string().as_str());
    assert_eq!(response.bytes().await.unwrap().to_vec(), big);
    let _ = std::fs::remove_dir_all(&dir);
}
