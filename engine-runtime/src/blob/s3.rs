//! Blobs in an S3-compatible object store (Amazon S3, Cloudflare R2, MinIO and others), with
//! presigned URLs (SigV4, signed by `rusty-s3`, which does no I/O): the bytes go straight
//! between the client and the object store, and the engine signs.
//!
//! Each uploader's bytes are an object of their own, `<hex digest>/<hex SHA-256 of the
//! uploader>`: that the object exists proves that this uploader had the bytes, which is what a
//! download asks of the rows an uploader wrote (`docs/design.md` §13). The same bytes uploaded
//! by two actors are stored twice. An upload URL signs the size (`content-length`) and the
//! bytes' SHA-256 (`x-amz-checksum-sha256`, and `x-amz-content-sha256`, which some servers
//! check as the body streams), so no other bytes can be put under it; the ticket names those
//! headers, which the client must send. The engine does not see an upload arrive: it asks the
//! store (`HEAD`) when it needs to know, and checks the object's size and SHA-256 itself
//! (reading the bytes when the store does not tell their checksum) before the upload counts.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use engine_kernel::wire::BlobTicket;
use engine_kernel::{BlobKey, BoxFuture, Timestamp};
use futures_util::StreamExt;
use rusty_s3::{Bucket, S3Action, UrlStyle};
use sha2::{Digest, Sha256};

use super::{BlobStore, StoredObject, Upload};
use crate::error::{Error, Result};

/// An access key and its secret.
#[derive(Clone)]
pub struct Credentials(rusty_s3::Credentials);

impl Credentials {
    /// The access key `key` with its `secret`.
    pub fn new(key: impl Into<String>, secret: impl Into<String>) -> Self {
        Credentials(rusty_s3::Credentials::new(key, secret))
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").field("key", &self.0.key()).finish_non_exhaustive()
    }
}

/// Blobs in `bucket` of the S3-compatible store at `endpoint` (`https://s3.eu-west-1.amazonaws.com`,
/// `http://127.0.0.1:9000`), in `region`, with path-style URLs (`<endpoint>/<bucket>/<object>`).
pub fn s3(bucket: &str, endpoint: &str, region: &str, credentials: Credentials) -> Result<S3> {
    let endpoint = endpoint.parse().map_err(|e| Error::config_from(format!("the S3 endpoint `{endpoint}`"), e))?;
    let bucket = Bucket::new(endpoint, UrlStyle::Path, bucket.to_owned(), region.to_owned())
        .map_err(|e| Error::config(format!("the S3 bucket `{bucket}`: {e:?}")))?;
    let http = reqwest::Client::builder()
        // The `HEAD` of an upload is on a download ticket's path: no request of the server's
        // waits for Nagle's algorithm (reqwest's default, said here so that it stays).
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(60))
        .build()
        .map_err(|e| Error::config_from("the object store's HTTP client", e))?;
    Ok(S3 { bucket, credentials: credentials.0, http })
}

/// Blobs in Cloudflare R2's `bucket`: `account` is the account id (its S3 endpoint is
/// `https://<account>.r2.cloudflarestorage.com`) or an endpoint URL; the region is `auto`.
pub fn r2(account: &str, bucket: &str, credentials: Credentials) -> Result<S3> {
    let endpoint = match account.contains("://") {
        true => account.to_owned(),
        false => format!("https://{account}.r2.cloudflarestorage.com"),
    };
    s3(bucket, &endpoint, "auto", credentials)
}

/// Blobs in an S3-compatible object store. Build with [`s3`] or [`r2`].
#[derive(Clone)]
pub struct S3 {
    bucket: Bucket,
    credentials: rusty_s3::Credentials,
    http: reqwest::Client,
}

impl std::fmt::Debug for S3 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3")
            .field("bucket", &self.bucket.name())
            .field("url", &self.bucket.base_url().as_str())
            .finish()
    }
}

/// When the URL of a request of the server's own expires: a minute from now.
fn own_expiry() -> Timestamp {
    chrono::Utc::now() + chrono::Duration::seconds(60)
}

fn unreachable_store(e: impl std::fmt::Display) -> Error {
    Error::RetryLater {
        retry_after: crate::error::RETRY_AFTER,
        detail: format!("the object store cannot be reached: {e}"),
    }
}

impl S3 {
    /// The object holding the bytes of `key` that `uploader` uploaded.
    fn object(key: &BlobKey, uploader: &str) -> String {
        let uploader: [u8; 32] = Sha256::digest(uploader.as_bytes()).into();
        format!("{}/{}", key.hex(), uploader.iter().map(|b| format!("{b:02x}")).collect::<String>())
    }

    /// `action`'s URL, signed to work until `expires_at` (a time past gives a URL that has
    /// expired already).
    fn sign<'a>(action: &impl S3Action<'a>, expires_at: Timestamp) -> String {
        let now = jiff::Timestamp::now();
        let left = expires_at.timestamp() - now.as_second();
        let (time, seconds) = match left > 0 {
            true => (now, left),
            false => (jiff::Timestamp::from_second(expires_at.timestamp() - 1).unwrap_or(now), 1),
        };
        action.sign_with_time(Duration::from_secs(u64::try_from(seconds).unwrap_or(1)), &time).to_string()
    }

    /// Whether the object `upload` names holds its bytes; one that holds others is deleted.
    async fn check(&self, upload: &Upload) -> Result<bool> {
        let object = Self::object(&upload.key, &upload.uploader);
        let mut head = self.bucket.head_object(Some(&self.credentials), &object);
        head.headers_mut().insert("x-amz-checksum-mode", "ENABLED");
        let url = Self::sign(&head, own_expiry());
        let response =
            self.http.head(url).header("x-amz-checksum-mode", "ENABLED").send().await.map_err(unreachable_store)?;
        match response.status() {
            reqwest::StatusCode::NOT_FOUND => return Ok(false),
            status if !status.is_success() => {
                return Err(unreachable_store(format!("HEAD of an object answered {status}")));
            }
            _ => {}
        }
        let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let size = header("content-length").and_then(|v| v.parse::<u64>().ok());
        let expected = checksum(&upload.key);
        let good = match (size == Some(upload.size), header("x-amz-checksum-sha256")) {
            (false, _) => false,
            (true, Some(told)) => told == expected,
            // The store does not tell the checksum: the bytes are read and hashed.
            (true, None) => self.hash_of(&object).await? == Some(upload.key.clone()),
        };
        if !good {
            self.remove(&object).await?;
        }
        Ok(good)
    }

    /// The key of the bytes of `object` (none when it is gone).
    async fn hash_of(&self, object: &str) -> Result<Option<BlobKey>> {
        let get = self.bucket.get_object(Some(&self.credentials), object);
        let response = self.http.get(Self::sign(&get, own_expiry())).send().await;
        let response = response.map_err(unreachable_store)?;
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !response.status().is_success() {
            return Err(unreachable_store(format!("GET of an object answered {}", response.status())));
        }
        let mut hash = Sha256::new();
        let mut body = response.bytes_stream();
        while let Some(chunk) = body.next().await {
            hash.update(chunk.map_err(unreachable_store)?);
        }
        Ok(Some(BlobKey::from_digest(hash.finalize().into())))
    }

    /// The objects after `after` in name order, at most `limit` (a page of `ListObjectsV2`).
    /// Objects not named `<hex digest>/…` are not the engine's, and left out.
    async fn list(&self, after: &str, limit: usize) -> Result<Vec<StoredObject>> {
        // Signed here: `rusty-s3` has the action only with its XML parser, and the one field
        // read (`Key`) needs none.
        let max_keys = limit.clamp(1, 1000).to_string();
        let mut query = vec![("list-type", "2"), ("max-keys", max_keys.as_str())];
        if !after.is_empty() {
            query.push(("start-after", after));
        }
        let url = rusty_s3::signing::sign(
            &jiff::Timestamp::now(),
            rusty_s3::Method::Get,
            self.bucket.base_url().clone(),
            self.credentials.key(),
            self.credentials.secret(),
            self.credentials.token(),
            self.bucket.region(),
            60,
            query.iter().copied(),
            std::iter::empty(),
        );
        let response = self.http.get(url.to_string()).send().await.map_err(unreachable_store)?;
        if !response.status().is_success() {
            return Err(unreachable_store(format!("the listing of objects answered {}", response.status())));
        }
        let text = response.text().await.map_err(unreachable_store)?;
        Ok(listed_keys(&text)
            .filter_map(|name| {
                let (hex, _) = name.split_once('/')?;
                let key = format!("sha256:{hex}").parse().ok()?;
                Some(StoredObject::new(name, key))
            })
            .collect())
    }

    async fn remove(&self, object: &str) -> Result<()> {
        let delete = self.bucket.delete_object(Some(&self.credentials), object);
        let response = self.http.delete(Self::sign(&delete, own_expiry())).send().await;
        let status = response.map_err(unreachable_store)?.status();
        match status.is_success() || status == reqwest::StatusCode::NOT_FOUND {
            true => Ok(()),
            false => Err(unreachable_store(format!("DELETE of an object answered {status}"))),
        }
    }
}

/// The object names (`<Key>`) of a `ListObjectsV2` answer, in its order. The engine's names
/// hold only hex digits and `/`, which XML does not escape.
fn listed_keys(xml: &str) -> impl Iterator<Item = &str> {
    xml.split("<Key>").skip(1).filter_map(|rest| rest.split_once("</Key>").map(|(name, _)| name))
}

/// The `x-amz-checksum-sha256` of the bytes of `key`: their digest in base64.
fn checksum(key: &BlobKey) -> String {
    let digest: Vec<u8> =
        (0..key.hex().len()).step_by(2).filter_map(|i| u8::from_str_radix(key.hex().get(i..i + 2)?, 16).ok()).collect();
    base64::engine::general_purpose::STANDARD.encode(digest)
}

impl BlobStore for S3 {
    fn upload_url(&self, upload: &Upload, expires_at: Timestamp) -> Result<BlobTicket> {
        let object = Self::object(&upload.key, &upload.uploader);
        let mut headers = BTreeMap::from([
            ("x-amz-checksum-sha256".to_owned(), checksum(&upload.key)),
            ("x-amz-content-sha256".to_owned(), upload.key.hex().to_owned()),
        ]);
        if let Some(content_type) = &upload.content_type {
            headers.insert("content-type".to_owned(), content_type.clone());
        }
        let size = upload.size.to_string();
        let mut put = self.bucket.put_object(Some(&self.credentials), &object);
        // The length is signed too; a client sends it with the body, so the ticket does not
        // name it (browsers refuse to set it).
        put.headers_mut().insert("content-length", size.as_str());
        for (name, value) in &headers {
            put.headers_mut().insert(name.as_str(), value.as_str());
        }
        Ok(BlobTicket {
            key: upload.key.clone(),
            method: "PUT".into(),
            url: Self::sign(&put, expires_at),
            headers,
            expires_at,
        })
    }

    fn download_url(&self, key: &BlobKey, uploader: &str, expires_at: Timestamp) -> Result<BlobTicket> {
        let object = Self::object(key, uploader);
        let get = self.bucket.get_object(Some(&self.credentials), &object);
        Ok(BlobTicket {
            key: key.clone(),
            method: "GET".into(),
            url: Self::sign(&get, expires_at),
            headers: Default::default(),
            expires_at,
        })
    }

    fn arrived<'a>(&'a self, upload: &'a Upload) -> BoxFuture<'a, Result<Option<bool>>> {
        Box::pin(async move { self.check(upload).await.map(Some) })
    }

    fn delete<'a>(&'a self, key: &'a BlobKey, uploaders: &'a [String]) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            for uploader in uploaders {
                self.remove(&Self::object(key, uploader)).await?;
            }
            Ok(())
        })
    }

    fn objects<'a>(&'a self, after: &'a str, limit: usize) -> BoxFuture<'a, Result<Vec<StoredObject>>> {
        Box::pin(async move { self.list(after, limit).await })
    }

    fn holds(&self, object: &StoredObject, uploader: &str) -> bool {
        object.name == Self::object(&object.key, uploader)
    }

    fn delete_object<'a>(&'a self, object: &'a StoredObject) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move { self.remove(&object.name).await })
    }
}
