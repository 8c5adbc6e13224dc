//! Blobs as files in a directory, served by the engine's router
//! (`docs/protocol.md#blob-data-urls`): `PUT` and `GET /blobs/data/<hex digest>` with URLs
//! signed by HMAC-SHA256 over the method, the digest, the size and the expiry (and, for uploads,
//! the uploader and the ticket). An upload first takes its ticket in the ledger
//! ([`Ledger`]), so one URL receives one body at a time, then streams to a temporary file
//! within the upload timeout, and becomes the blob only when its bytes hash to the key and their
//! count is the one signed; the ledger then records it. A download streams the file from disk.
//! Who uploaded what is the ledger's: the directory holds only the blobs.

use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;

use axum::Extension;
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

use super::collect::now_ms;
use super::{BlobStore, Ledger, StoredObject, Upload};
use crate::error::{Error, Result};
use crate::limits::UnauthenticatedConnection;

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
            let (user, ticket) = (or_dash(signed.user.clone()), or_dash(signed.ticket.clone()));
            mac.update(format!("\n{user}\n{ticket}").as_bytes());
        }
        mac
    }

    fn ticket(&self, method: &str, key: &BlobKey, signed: Signed, expires_at: Timestamp) -> BlobTicket {
        let signature = to_hex(&self.mac(method, key.hex(), &signed).finalize().into_bytes());
        let mut query = String::new();
        for (name, value) in
            [("size", signed.size.map(|s| s.to_string())), ("user", signed.user), ("ticket", signed.ticket)]
        {
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

    /// Take the upload's ticket, receive its body, and record the blob; the ticket is given
    /// back when the bytes do not become the blob.
    async fn receive(&self, ledger: &Ledger, key: &BlobKey, signed: &Signed, body: Body) -> Result<()> {
        let size = signed.size.ok_or_else(invalid_signature)?;
        let (Some(user), Some(ticket)) = (signed.user.as_deref(), signed.ticket.as_deref()) else {
            return Err(invalid_signature());
        };
        let user = decode_hex(user).and_then(|b| String::from_utf8(b).ok()).ok_or_else(invalid_signature)?;
        let now = now_ms();
        let until = now.saturating_add(i64::try_from(ledger.upload_timeout.as_millis()).unwrap_or(i64::MAX));
        // Taken before the body is read: a thousand requests on one URL get one body read.
        if !ledger.claim(key, &user, ticket, now, until).await? {
            return Err(Error::Forbidden(
                "this upload URL was used, or receives another upload now: ask for a new one".into(),
            ));
        }
        let temp = self.dir.join(format!(".upload-{}", uuid::Uuid::now_v7()));
        let received = tokio::time::timeout(ledger.upload_timeout, self.store(key, size, body, &temp)).await;
        let received = received.unwrap_or_else(|_| {
            Err(Error::RetryLater {
                retry_after: crate::error::RETRY_AFTER,
                detail: format!("the body did not arrive within {} s", ledger.upload_timeout.as_secs()),
            })
        });
        match received {
            Ok(()) => ledger.mark_stored(key, &user, false).await,
            Err(e) => {
                let _ = tokio::fs::remove_file(&temp).await;
                ledger.release(key, &user, ticket).await?;
                Err(e)
            }
        }
    }

    /// Stream `body` to the temporary file `temp`, and make it blob `key` when it is its `size`
    /// bytes.
    async fn store(&self, key: &BlobKey, size: u64, body: Body, temp: &FsPath) -> Result<()> {
        let io = |e: std::io::Error| Error::internal_from("the blob directory", e);
        tokio::fs::create_dir_all(&self.dir).await.map_err(io)?;
        let mut file = tokio::fs::File::create(temp).await.map_err(io)?;
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
        tokio::fs::rename(temp, self.path(key)).await.map_err(io)
    }
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
    /// The upload's one-time ticket, in hex (uploads only).
    ticket: Option<String>,
    expires: i64,
    signature: String,
}

/// A request whose signed URL holds has authenticated: its connection no longer runs to the
/// deadline of those that have not, and a large body may take its time.
fn authenticated_by_url(connection: Option<Extension<UnauthenticatedConnection>>) {
    if let Some(Extension(connection)) = connection {
        connection.end();
    }
}

async fn upload(
    State((store, ledger)): State<(Arc<LocalFs>, Ledger)>,
    Path(hex): Path<String>,
    Query(query): Query<Signed>,
    connection: Option<Extension<UnauthenticatedConnection>>,
    body: Body,
) -> Result<StatusCode> {
    let key = store.check("PUT", &hex, &query)?;
    authenticated_by_url(connection);
    store.receive(&ledger, &key, &query, body).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn download(
    State((store, _)): State<(Arc<LocalFs>, Ledger)>,
    Path(hex): Path<String>,
    Query(query): Query<Signed>,
    connection: Option<Extension<UnauthenticatedConnection>>,
) -> Result<Response> {
    let key = store.check("GET", &hex, &query)?;
    authenticated_by_url(connection);
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
            ticket: Some(upload.ticket.clone()),
            expires: expires_at.timestamp(),
            signature: String::new(),
        };
        Ok(self.ticket("PUT", &upload.key, signed, expires_at))
    }

    fn download_url(&self, key: &BlobKey, _uploader: &str, expires_at: Timestamp) -> Result<BlobTicket> {
        let signed =
            Signed { size: None, user: None, ticket: None, expires: expires_at.timestamp(), signature: String::new() };
        Ok(self.ticket("GET", key, signed, expires_at))
    }

    fn arrived<'a>(&'a self, _upload: &'a Upload) -> BoxFuture<'a, Result<Option<bool>>> {
        // The data route records each upload it receives.
        Box::pin(async { Ok(None) })
    }

    fn delete<'a>(&'a self, key: &'a BlobKey, _uploaders: &'a [String]) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            match tokio::fs::remove_file(self.path(key)).await {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(Error::internal_from("the blob directory", e)),
            }
        })
    }

    fn objects<'a>(&'a self, after: &'a str, limit: usize) -> BoxFuture<'a, Result<Vec<StoredObject>>> {
        Box::pin(async move {
            let io = |e: std::io::Error| Error::internal_from("the blob directory", e);
            let mut entries = match tokio::fs::read_dir(&self.dir).await {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(e) => return Err(io(e)),
            };
            // The directory is read whole for each page: it has no order of its own. A
            // temporary file of an upload (`.upload-…`) is no blob.
            let mut names = std::collections::BTreeSet::new();
            while let Some(entry) = entries.next_entry().await.map_err(io)? {
                let Ok(name) = entry.file_name().into_string() else { continue };
                if name.as_str() > after && format!("sha256:{name}").parse::<BlobKey>().is_ok() {
                    names.insert(name);
                    if names.len() > limit {
                        names.pop_last();
                    }
                }
            }
            Ok(names
                .into_iter()
                .filter_map(|name| Some(StoredObject::new(name.clone(), format!("sha256:{name}").parse().ok()?)))
                .collect())
        })
    }

    fn delete_object<'a>(&'a self, object: &'a StoredObject) -> BoxFuture<'a, Result<()>> {
        self.delete(&object.key, &[])
    }

    fn routes(&self, ledger: Ledger) -> Option<Router> {
        let state = (Arc::new(self.clone()), ledger);
        Some(Router::new().route("/{hex}", put(upload).get(download)).with_state(state))
    }
}
