//! Blobs as files in a directory, served by the engine's router
//! (`docs/protocol.md#blob-data-urls`): `PUT` and `GET /blobs/data/<hex digest>` with URLs signed
//! by HMAC-SHA256 over the method, the digest, the size and the expiry. An upload streams to a
//! temporary file, and becomes the blob only when its bytes hash to the key and their count is
//! the one signed.

use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::put;
use engine_kernel::wire::BlobTicket;
use engine_kernel::{BlobKey, Timestamp};
use hmac::{Hmac, Mac};
use http_body_util::BodyExt;
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use super::BlobStore;
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
    fn mac(&self, method: &str, hex: &str, size: Option<u64>, expires: i64) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.secret).expect("HMAC takes keys of any length");
        let size = size.map_or_else(|| "-".to_owned(), |s| s.to_string());
        mac.update(format!("{method}\n{hex}\n{size}\n{expires}").as_bytes());
        mac
    }

    fn ticket(&self, method: &str, key: &BlobKey, size: Option<u64>, expires_at: Timestamp) -> BlobTicket {
        let expires = expires_at.timestamp();
        let signature: String = self
            .mac(method, key.hex(), size, expires)
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let size = size.map_or_else(String::new, |s| format!("size={s}&"));
        BlobTicket {
            key: key.clone(),
            method: method.into(),
            url: format!("{DATA}/{}?{size}expires={expires}&signature={signature}", key.hex()),
            headers: Default::default(),
            expires_at,
        }
    }

    /// The key of `hex` when the URL's signature holds and has not expired.
    fn check(&self, method: &str, hex: &str, query: &Signed) -> Result<BlobKey> {
        let key: BlobKey = format!("sha256:{hex}").parse().map_err(|_| Error::NotFound("no such blob".into()))?;
        let signature = decode_hex(&query.signature).ok_or_else(invalid_signature)?;
        self.mac(method, hex, query.size, query.expires).verify_slice(&signature).map_err(|_| invalid_signature())?;
        if query.expires < chrono::Utc::now().timestamp() {
            return Err(Error::Forbidden("the URL has expired: ask for a new one".into()));
        }
        Ok(key)
    }

    fn path(&self, key: &BlobKey) -> PathBuf {
        self.dir.join(key.hex())
    }

    async fn receive(&self, key: &BlobKey, size: u64, body: Body) -> Result<()> {
        let io = |e: std::io::Error| Error::internal_from("the blob directory", e);
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
            tokio::fs::rename(&temp, self.path(key)).await.map_err(io)
        }
        .await;
        if result.is_err() {
            let _ = tokio::fs::remove_file(&temp).await;
        }
        result
    }
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
    let size = query.size.ok_or_else(invalid_signature)?;
    store.receive(&key, size, body).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn download(
    State(store): State<Arc<LocalFs>>,
    Path(hex): Path<String>,
    Query(query): Query<Signed>,
) -> Result<Response> {
    let key = store.check("GET", &hex, &query)?;
    match tokio::fs::read(store.path(&key)).await {
        Ok(bytes) => Ok(([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::NotFound("the blob was not uploaded".into())),
        Err(e) => Err(Error::internal_from("reading a blob", e)),
    }
}

impl BlobStore for LocalFs {
    fn upload_url(&self, key: &BlobKey, size: u64, expires_at: Timestamp) -> Result<BlobTicket> {
        Ok(self.ticket("PUT", key, Some(size), expires_at))
    }

    fn download_url(&self, key: &BlobKey, expires_at: Timestamp) -> Result<BlobTicket> {
        Ok(self.ticket("GET", key, None, expires_at))
    }

    fn routes(&self) -> Option<Router> {
        Some(Router::new().route("/{hex}", put(upload).get(download)).with_state(Arc::new(self.clone())))
    }
}
