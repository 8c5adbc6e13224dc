//! Blobs over real TCP: signed upload and download URLs of the local-directory store, bytes
//! checked against their key, and downloads only for actors who can read a row that refers to
//! the blob.

use engine::blob::{BlobStore, Blobs, local_fs};
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
        #[bucket(data(Photo::owner_id == bucket.owner))]
        #[derive(Debug)]
        pub(crate) struct Own {
            #[param(actor.owner_id)]
            pub owner: String,
        }

        /// The photos of the albums the actor is a member of.
        #[bucket(
            membership(AlbumMember::user_id == actor.user_id),
            data(Photo::album == bucket.album, AlbumMember::album == bucket.album),
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
    let server = engine::Server::builder()
        .app(photos::app())
        .storage(engine::storage::postgres("unused").pool(db.pool.clone()))
        .auth(engine::auth::BearerTokenAuth::new(SECRET))
        .limits(engine::limits::Limits::default().rate(0, 0))
        .blobs(Blobs::new(local_fs(dir, BLOB_SECRET)).max_size(1 << 20))
        .build()
        .await
        .unwrap();
    TestServer::serve(server.router()).await
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
    let expired = local_fs(&dir, BLOB_SECRET).upload_url(&key, bytes.len() as u64, past).unwrap();
    assert_eq!(send(&server, reqwest::Method::PUT, &expired.url, bytes.clone()).await.0, StatusCode::FORBIDDEN);
    assert_eq!(send(&server, reqwest::Method::PUT, &url, bytes.clone()).await.0, StatusCode::NO_CONTENT);

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
