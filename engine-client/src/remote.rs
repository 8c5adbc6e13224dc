//! The server, over HTTP: `POST /sync/pull`, `POST /sync/push`, `GET /sync/poll` and the blob
//! tickets with fresh credentials each time, one refresh and retry on 401, and every answer read
//! as `docs/protocol.md` says; and the transfers of blob bytes to and from the URLs of tickets.

use std::sync::Arc;
use std::time::Duration;

use engine_kernel::wire::{
    BlobDownloadRequest, BlobTicket, BlobUploadRequest, PollAnswer, Problem, PullRequest, PullResponse, PushRequest,
    PushResponse,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::auth::AuthProvider;
use crate::error::{Error, Result};

/// How long one request may take before it counts as lost.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Clone)]
pub(crate) struct Remote {
    http: reqwest::Client,
    base: reqwest::Url,
    pub(crate) auth: Arc<dyn AuthProvider>,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote").field("base", &self.base.as_str()).finish_non_exhaustive()
    }
}

impl Remote {
    pub(crate) fn new(base: &str, auth: Arc<dyn AuthProvider>) -> Result<Remote> {
        let mut base =
            reqwest::Url::parse(base).map_err(|e| Error::config_from(format!("the server URL {base:?}"), e))?;
        if !base.path().ends_with('/') {
            base.set_path(&format!("{}/", base.path()));
        }
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| Error::config_from("an HTTP client", e))?;
        Ok(Remote { http, base, auth })
    }

    /// The URL of `path` (relative, `sync/pull`) on the server.
    pub(crate) fn url(&self, path: &str) -> reqwest::Url {
        self.base.join(path).expect("relative paths join")
    }

    pub(crate) async fn pull(&self, request: &PullRequest) -> Result<PullResponse> {
        self.post("sync/pull", request).await
    }

    pub(crate) async fn push(&self, request: &PushRequest) -> Result<PushResponse> {
        self.post("sync/push", request).await
    }

    /// A ticket to upload a blob.
    pub(crate) async fn upload_ticket(&self, request: &BlobUploadRequest) -> Result<BlobTicket> {
        self.post("blobs/upload", request).await
    }

    /// A ticket to download a blob.
    pub(crate) async fn download_ticket(&self, request: &BlobDownloadRequest) -> Result<BlobTicket> {
        self.post("blobs/download", request).await
    }

    /// Send the ticket's request, with `body` when it uploads; the bytes answered. Its URL, when
    /// it starts with `/`, is relative to the server's base URL; no credentials go with it (its
    /// signature is its credential).
    pub(crate) async fn transfer(&self, ticket: &BlobTicket, body: Option<Vec<u8>>) -> Result<Vec<u8>> {
        let url = match ticket.url.strip_prefix('/') {
            Some(relative) => self.url(relative),
            None => reqwest::Url::parse(&ticket.url)
                .map_err(|e| Error::network_from("a blob ticket's URL is not a URL", e))?,
        };
        let method = reqwest::Method::from_bytes(ticket.method.as_bytes())
            .map_err(|e| Error::network_from("a blob ticket's method is not a method", e))?;
        let mut request = self.http.request(method, url);
        for (name, value) in &ticket.headers {
            request = request.header(name, value);
        }
        if let Some(body) = body {
            request = request.body(body);
        }
        let what = format!("{} of blob {}", ticket.method, ticket.key);
        let response =
            request.send().await.map_err(|e| Error::network_from(format!("the {what} could not be sent"), e))?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|e| Error::network_from(format!("the {what} did not end"), e))?;
        if status.is_success() {
            return Ok(bytes.to_vec());
        }
        match serde_json::from_slice::<Problem>(&bytes) {
            Ok(problem) => Err(Error::Server { status: status.as_u16(), problem, retry_after: None }),
            // An object store answers in its own words (XML).
            Err(_) => Err(Error::network(format!("the {what} was answered HTTP {status}"))),
        }
    }

    /// The frames since `position` (none on the first poll), waiting up to `wait` for them.
    pub(crate) async fn poll(&self, position: Option<&str>, wait: Duration) -> Result<PollAnswer> {
        let mut url = self.url("sync/poll");
        url.query_pairs_mut().append_pair("wait", &wait.as_secs().to_string());
        if let Some(position) = position {
            url.query_pairs_mut().append_pair("position", position);
        }
        // The wait is the server's; the request is lost only some time after it.
        let request = || self.http.get(url.clone()).timeout(wait + REQUEST_TIMEOUT);
        match self.send("sync/poll", request()).await {
            Err(Error::Server { status: 401, .. }) => {
                self.auth.refresh().await?;
                self.send("sync/poll", request()).await
            }
            other => other,
        }
    }

    async fn post<B: Serialize, R: DeserializeOwned>(&self, path: &str, body: &B) -> Result<R> {
        let body = serde_json::to_vec(body).expect("requests serialize");
        let request = |body| self.http.post(self.url(path)).header("content-type", "application/json").body(body);
        match self.send(path, request(body.clone())).await {
            Err(Error::Server { status: 401, .. }) => {
                self.auth.refresh().await?;
                self.send(path, request(body)).await
            }
            other => other,
        }
    }

    async fn send<R: DeserializeOwned>(&self, path: &str, mut request: reqwest::RequestBuilder) -> Result<R> {
        for (name, value) in self.auth.headers().await? {
            request = request.header(name, value);
        }
        let response = request.send().await.map_err(|e| Error::network_from(format!("{path} could not be sent"), e))?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .map(Duration::from_secs);
        let bytes = response
            .bytes()
            .await
            .map_err(|e| Error::network_from(format!("the answer to {path} did not arrive"), e))?;
        if status.is_success() {
            return serde_json::from_slice(&bytes)
                .map_err(|e| Error::network_from(format!("the server's answer to {path} is not the protocol"), e));
        }
        match serde_json::from_slice::<Problem>(&bytes) {
            Ok(problem) => Err(Error::Server { status: status.as_u16(), problem, retry_after }),
            // Not a problem document: a proxy or a load balancer answered, not the engine. Try
            // again later; never conclude anything about the mutations from it.
            Err(_) => Err(Error::network(format!("HTTP {status} from {path} without a problem document"))),
        }
    }
}
