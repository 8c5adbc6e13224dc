//! Blobs as files in a directory, served by the engine's router
//! (`docs/protocol.md#blob-data-urls`): `PUT` and `GET /blobs/data/<hex digest>` with URLs
//! signed by HMAC-SHA256 over the method, the digest, the size and the expiry (and, for uploads,
//! the uploader, its quota and the ticket). An upload
//! streams to a temporary file, and becomes the blob only when its bytes hash to the key, their
//! count is the one signed, the uploader's blobs stay within its quota, and its ticket was never
//! used. A download streams the file from disk.
//!
//! Beside the blobs, the directory keeps who uploaded what: `.uploads/<digest>/<uploader>` and
//! `.users/<uploader>/<digest>`, each holding the blob's size (the uploader's id in hex), and the
//! tickets used, `.tickets/<expiry>-<ticket>`, until they expire.

use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::put;
use engine_kernel::wire::BlobTicket;
use engine_kernel::{BlobKey, BoxFuture, Timestamp};
use hmac::{Hmac, Mac};
use http_body_util::BodyExt;
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use super::{BlobStore, Upload};
use crate::error::{Error, Result};

/// Blobs in `dir` (created when missing), behind URLs signed with `secret`.
pub fn local_fs(dir: impl Into<PathBuf>, secret: impl AsRef<[u8]>) -> LocalFs {
    LocalFs { dir: dir.into(), secret: secret.as_ref().into() }
}

/// Blobs as files in a directory. Build with [`local_fs`].
#[derive(Clone)]
pub struct LocalFs {
    dir: PathBuf,
    secret: Arc<[u8]>,
}

impl std::fmt::Debug for LocalFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalFs").field("dir", &self.dir).finish_non_exhaustive()
    }
}

/// The path of the data routes in the engine's router.
const DATA: &str = "/blobs/data";

impl LocalFs {
    fn mac(&self, method: &str, hex: &str, signed: &Signed) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.secret).expect("HMAC takes keys of any length");
        let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".to_owned());
        let size = or_dash(signed.size.map(|s| s.to_string()));
        let expires = signed.expires;
        mac.update(format!("{method}\n{hex}\n{size}\n{expires}").as_bytes());
        if method == "PUT" {
            let (user, quota) = (or_dash(signed.user.clone()), or_dash(signed.quota.map(|q| q.to_string())));
            let ticket = or_dash(signed.ticket.clone());
            mac.update(format!("\n{user}\n{quota}\n{ticket}").as_bytes());
        }
        mac
    }

    fn ticket(&self, method: &str, key: &BlobKey, signed: Signed, expires_at: Timestamp) -> BlobTicket {
        let signature = to_hex(&self.mac(method, key.hex(), &signed).finalize().into_bytes());
        let mut query = String::new();
        for (name, value) in [
            ("size", signed.size.map(|s| s.to_string())),
            ("user", signed.user),
            ("quota", signed.quota.map(|q| q.to_string())),
            ("ticket", signed.ticket),
        ] {
            if let Some(value) = value {
                query.push_str(&format!("{name}={value}&"));
            }
        }
        BlobTicket {
            key: key.clone(),
            method: method.into(),
            url: format!("{DATA}/{}?{query}expires={}&signature={signature}", key.hex(), signed.expires),
            headers: Default::default(),
            expires_at,
        }
    }

    /// The key of `hex` when the URL's signature holds and has not expired.
    fn check(&self, method: &str, hex: &str, query: &Signed) -> Result<BlobKey> {
        let key: BlobKey = format!("sha256:{hex}").parse().map_err(|_| Error::NotFound("no such blob".into()))?;
        let signature = decode_hex(&query.signature).ok_or_else(invalid_signature)?;
        self.mac(method, hex, query).verify_slice(&signature).map_err(|_| invalid_signature())?;
        if query.expires < chrono::Utc::now().timestamp() {
            return Err(Error::Forbidden("the URL has expired: ask for a new one".into()));
        }
        Ok(key)
    }

    fn path(&self, key: &BlobKey) -> PathBuf {
        self.dir.join(key.hex())
    }

    /// Where the record that `user` (in hex) uploaded blob `hex` goes, in each index.
    fn records(&self, hex: &str, user: &str) -> [PathBuf; 2] {
        [self.dir.join(".uploads").join(hex).join(user), self.dir.join(".users").join(user).join(hex)]
    }

    async fn receive(&self, key: &BlobKey, signed: &Signed, body: Body) -> Result<()> {
        let io = |e: std::io::Error| Error::internal_from("the blob directory", e);
        let size = signed.size.ok_or_else(invalid_signature)?;
        let (Some(user), Some(ticket)) = (signed.user.as_deref(), signed.ticket.as_deref()) else {
            return Err(invalid_signature());
        };
        if decode_hex(user).is_none() || decode_hex(ticket).is_none() {
            return Err(invalid_signature());
        }
        tokio::fs::create_dir_all(&self.dir).await.map_err(io)?;
        let temp = self.dir.join(format!(".upload-{}", uuid::Uuid::now_v7()));
        let result = async {
            let mut file = tokio::fs::File::create(&temp).await.map_err(io)?;
            let mut hash = Sha256::new();
            let mut received = 0u64;
            let mut body = body;
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|e| Error::RetryLater {
                    retry_after: crate::error::RETRY_AFTER,
                    detail: format!("the body could not be read: {e}"),
                })?;
                let Ok(data) = frame.into_data() else { continue };
                received += data.len() as u64;
                if received > size {
                    return Err(Error::PayloadTooLarge { limit: usize::try_from(size).unwrap_or(usize::MAX) });
                }
                hash.update(&data);
                file.write_all(&data).await.map_err(io)?;
            }
            if received != size {
                return Err(Error::MalformedRequest(format!("the body has {received} bytes; the URL is for {size}")));
            }
            if BlobKey::from_digest(hash.finalize().into()) != *key {
                return Err(Error::Kernel(engine_kernel::Error::validation("the bytes do not hash to the blob's key")));
            }
            file.sync_all().await.map_err(io)?;
            let [by_blob, by_user] = self.records(key.hex(), user);
            if let Some(quota) = signed.quota
                && !tokio::fs::try_exists(&by_blob).await.map_err(io)?
            {
                let used = usage_in(&self.dir.join(".users").join(user)).await.map_err(io)?;
                if used + size > quota {
                    return Err(Error::OverQuota { quota, used });
                }
            }
            self.use_ticket(ticket, signed.expires).await?;
            tokio::fs::rename(&temp, self.path(key)).await.map_err(io)?;
            for record in [by_blob, by_user] {
                if let Some(parent) = record.parent() {
                    tokio::fs::create_dir_all(parent).await.map_err(io)?;
                }
                tokio::fs::write(&record, size.to_string()).await.map_err(io)?;
            }
            Ok(())
        }
        .await;
        if result.is_err() {
            let _ = tokio::fs::remove_file(&temp).await;
        }
        result
    }

    /// Mark `ticket` used, refusing one used before; forget tickets whose URLs have expired.
    async fn use_ticket(&self, ticket: &str, expires: i64) -> Result<()> {
        let io = |e: std::io::Error| Error::internal_from("the blob directory", e);
        let tickets = self.dir.join(".tickets");
        tokio::fs::create_dir_all(&tickets).await.map_err(io)?;
        let marker = tickets.join(format!("{expires}-{ticket}"));
        match tokio::fs::OpenOptions::new().write(true).create_new(true).open(&marker).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(Error::Forbidden("this upload URL was used: ask for a new one".into()));
            }
            Err(e) => return Err(io(e)),
        }
        let now = chrono::Utc::now().timestamp();
        let mut entries = tokio::fs::read_dir(&tickets).await.map_err(io)?;
        while let Some(entry) = entries.next_entry().await.map_err(io)? {
            let name = entry.file_name();
            let expired = name
                .to_str()
                .and_then(|n| n.split_once('-'))
                .and_then(|(at, _)| at.parse::<i64>().ok())
                .is_some_and(|at| at < now);
            if expired {
                let _ = tokio::fs::remove_file(entry.path()).await;
            }
        }
        Ok(())
    }
}

/// The bytes of the blobs recorded in `dir` (one file per blob, holding its size).
async fn usage_in(dir: &FsPath) -> std::io::Result<u64> {
    let mut entries = match tokio::fs::read_dir(dir).await {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let mut used = 0u64;
    while let Some(entry) = entries.next_entry().await? {
        let size = tokio::fs::read_to_string(entry.path()).await?;
        used += size.trim().parse::<u64>().unwrap_or(0);
    }
    Ok(used)
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn invalid_signature() -> Error {
    Error::Forbidden("the URL's signature is not valid".into())
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

/// The signed part of a data URL.
#[derive(serde::Deserialize)]
struct Signed {
    size: Option<u64>,
    /// The uploader's user id, in hex (uploads only).
    user: Option<String>,
    /// The most bytes the uploader's blobs may take (uploads only).
    quota: Option<u64>,
    /// The upload's one-time ticket, in hex (uploads only).
    ticket: Option<String>,
    expires: i64,
    signature: String,
}

async fn upload(
    State(store): State<Arc<LocalFs>>,
    Path(hex): Path<String>,
    Query(query): Query<Signed>,
    body: Body,
) -> Result<StatusCode> {
    let key = store.check("PUT", &hex, &query)?;
    store.receive(&key, &query, body).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn download(
    State(store): State<Arc<LocalFs>>,
    Path(hex): Path<String>,
    Query(query): Query<Signed>,
) -> Result<Response> {
    let key = store.check("GET", &hex, &query)?;
    let file = match tokio::fs::File::open(store.path(&key)).await {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::NotFound("the blob was not uploaded".into()));
        }
        Err(e) => return Err(Error::internal_from("reading a blob", e)),
    };
    let length = file.metadata().await.map_err(|e| Error::internal_from("reading a blob", e))?.len();
    // The bytes go out as they are read, a chunk at a time, whatever the blob's size.
    let body = Body::from_stream(tokio_util::io::ReaderStream::new(file));
    Ok((
        [(header::CONTENT_TYPE, "application/octet-stream".to_owned()), (header::CONTENT_LENGTH, length.to_string())],
        body,
    )
        .into_response())
}

impl BlobStore for LocalFs {
    fn upload_url(&self, upload: &Upload, expires_at: Timestamp) -> Result<BlobTicket> {
        let signed = Signed {
            size: Some(upload.size),
            user: Some(to_hex(upload.uploader.as_bytes())),
            quota: upload.quota,
            ticket: Some(uuid::Uuid::new_v4().simple().to_string()),
            expires: expires_at.timestamp(),
            signature: String::new(),
        };
        Ok(self.ticket("PUT", &upload.key, signed, expires_at))
    }

    fn download_url(&self, key: &BlobKey, expires_at: Timestamp) -> Result<BlobTicket> {
        let signed = Signed {
            size: None,
            user: None,
            quota: None,
            ticket: None,
            expires: expires_at.timestamp(),
            signature: String::new(),
        };
        Ok(self.ticket("GET", key, signed, expires_at))
    }

    fn uploaders<'a>(&'a self, key: &'a BlobKey) -> BoxFuture<'a, Result<Vec<String>>> {
        Box::pin(async move {
            let mut entries = match tokio::fs::read_dir(self.dir.join(".uploads").join(key.hex())).await {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(e) => return Err(Error::internal_from("the blob directory", e)),
            };
            let mut uploaders = Vec::new();
            while let Some(entry) =
                entries.next_entry().await.map_err(|e| Error::internal_from("the blob directory", e))?
            {
                let user = entry.file_name().to_str().and_then(decode_hex).and_then(|b| String::from_utf8(b).ok());
                uploaders.extend(user);
            }
            Ok(uploaders)
        })
    }

    fn usage<'a>(&'a self, user: &'a str) -> BoxFuture<'a, Result<u64>> {
        Box::pin(async move {
            usage_in(&self.dir.join(".users").join(to_hex(user.as_bytes())))
                .await
                .map_err(|e| Error::internal_from("the blob directory", e))
        })
    }

    fn routes(&self) -> Option<Router> {
        Some(Router::new().route("/{hex}", put(upload).get(download)).with_state(Arc::new(self.clone())))
    }
}
