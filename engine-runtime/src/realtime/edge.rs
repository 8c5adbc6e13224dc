//! The edge adapter: the sockets of this process as [`in_process`](mod@super::in_process), and
//! every ping the hub releases also sent to an edge relay (`@engine/edge`, a Worker with a
//! Durable Object per bucket), which holds clients' sockets and long-polls where the server
//! does not (`docs/design.md` §8). Pings go out in batches, `POST <url>/publish`, signed with
//! the secret the relay shares, and carry an expiry and a nonce, so a captured publish is
//! refused once it expires and once its bucket has seen its nonce.
//!
//! The relay keeps no database: a client shows it a ticket per bucket that the server signed
//! with the same secret (`GET /sync/edge-tickets`), good for [`Edge::ticket_lifetime`]. A member
//! whose membership is revoked is issued no ticket for the bucket when it next asks, and the
//! one it has runs out within that lifetime. Presence and membership changes stay on the
//! server's own sockets: the relay carries pings only.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use engine_kernel::wire::{EdgeTicket, EdgeTickets};
use engine_kernel::{BoxFuture, BucketKey};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use tokio::sync::{broadcast, mpsc};

use super::{OpenRealtime, Presence, PresenceState, Realtime, Relay, Signal, in_process};
use crate::error::{Error, Result};

/// How long a ticket works, unless [`Edge::ticket_lifetime`] says otherwise.
pub const DEFAULT_TICKET_LIFETIME: Duration = Duration::from_secs(120);

/// The shortest ticket lifetime: a client asks again at half of it.
pub const MIN_TICKET_LIFETIME: Duration = Duration::from_secs(10);

/// How long after it is signed the relay takes a publish.
pub const PUBLISH_EXPIRY: Duration = Duration::from_secs(30);

/// The header that carries a publish's signature.
pub const SIGNATURE_HEADER: &str = "x-engine-signature";

/// The most buckets in one publish: the relay calls one Durable Object per bucket.
const PUBLISH_BATCH: usize = 100;

/// How long after its first try a publish may still be sent again: a relay that answers slowly
/// or not at all is not waited for again and again while other buckets' pings queue behind.
const PUBLISH_RETRY_BUDGET: Duration = Duration::from_secs(2);

/// The waits before a publish the relay could not take is sent again.
const PUBLISH_RETRIES: [Duration; 3] = [Duration::from_millis(50), Duration::from_millis(250), Duration::from_secs(1)];

/// How many released batches may wait to be sent; past that, pings are dropped (and logged).
const QUEUE: usize = 1024;

/// The shortest secret the relay is given: 16 bytes, as for a token's signing key.
const MIN_SECRET: usize = 16;

/// Realtime in this process, with pings relayed to the edge relay at `url` (`https://…`, the
/// Worker's base URL), signed with `secret`, which the relay is configured with too.
pub fn edge(url: impl Into<String>, secret: impl AsRef<[u8]>) -> Edge {
    Edge {
        url: url.into(),
        client_url: None,
        secret: Arc::from(secret.as_ref()),
        ticket_lifetime: DEFAULT_TICKET_LIFETIME,
        lost_after: super::listen_notify::DEFAULT_REALTIME_LOST_AFTER,
    }
}

/// Realtime in this process, with pings relayed to an edge relay. Build with [`edge()`].
#[derive(Clone)]
#[must_use]
pub struct Edge {
    url: String,
    client_url: Option<String>,
    secret: Arc<[u8]>,
    ticket_lifetime: Duration,
    lost_after: Duration,
}

impl std::fmt::Debug for Edge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Edge").field("url", &self.url).field("client_url", &self.client_url).finish_non_exhaustive()
    }
}

impl Edge {
    /// The relay's URL as clients reach it, when it is not the one the server publishes to (a
    /// server that reaches the relay by an internal address). Given to clients with their tickets.
    pub fn client_url(mut self, url: impl Into<String>) -> Self {
        self.client_url = Some(url.into());
        self
    }

    /// How long a ticket works (default [`DEFAULT_TICKET_LIFETIME`]; at least
    /// [`MIN_TICKET_LIFETIME`]): how long a member whose membership was revoked may still hear
    /// the bucket's pings.
    pub fn ticket_lifetime(mut self, lifetime: Duration) -> Self {
        self.ticket_lifetime = lifetime.max(MIN_TICKET_LIFETIME);
        self
    }

    /// How long the relay has to answer a publish (default 10 s; at least 1 s).
    pub fn lost_after(mut self, deadline: Duration) -> Self {
        self.lost_after = deadline.max(super::listen_notify::MIN_LOST_AFTER);
        self
    }
}

impl OpenRealtime for Edge {
    fn open(self: Box<Self>, heartbeat_timeout: Duration) -> BoxFuture<'static, Result<Arc<dyn Realtime>>> {
        Box::pin(async move {
            let Edge { url, client_url, secret, ticket_lifetime, lost_after } = *self;
            let url = url.trim_end_matches('/').to_owned();
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(Error::config(format!("the edge relay's URL `{url}` is not http:// or https://")));
            }
            if secret.len() < MIN_SECRET {
                return Err(Error::config(format!(
                    "the edge relay's secret has {} bytes: use {MIN_SECRET} at least",
                    secret.len()
                )));
            }
            let client = reqwest::Client::builder()
                .timeout(lost_after)
                .build()
                .map_err(|e| Error::config_from("cannot build the edge relay's HTTP client", e))?;
            let local = Box::new(in_process()).open(heartbeat_timeout).await?;
            let signer = Signer(secret);
            let (sender, queue) = mpsc::channel(QUEUE);
            let task = tokio::spawn(publish(queue, client, format!("{url}/publish"), signer.clone())).abort_handle();
            let client_url = client_url.map_or(url, |u| u.trim_end_matches('/').to_owned());
            Ok(Arc::new(Relayed { local, signer, client_url, ticket_lifetime, sender, task }) as Arc<dyn Realtime>)
        })
    }
}

/// The secret, and what it signs. Each kind of message is signed under a name of its own, so
/// that a ticket is never taken for a publish, nor the other way.
#[derive(Clone)]
struct Signer(Arc<[u8]>);

impl Signer {
    /// Hex HMAC-SHA256 of `<kind>\n<message>`.
    fn sign(&self, kind: &str, message: &str) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        mac.update(kind.as_bytes());
        mac.update(b"\n");
        mac.update(message.as_bytes());
        format!("{:x}", mac.finalize().into_bytes())
    }

    /// The ticket of `bucket` until `expires` (Unix seconds): `<expires>.<signature>`.
    fn ticket(&self, bucket: &BucketKey, expires: i64) -> String {
        format!("{expires}.{}", self.sign("ticket", &format!("{bucket}\n{expires}")))
    }
}

struct Relayed {
    local: Arc<dyn Realtime>,
    signer: Signer,
    client_url: String,
    ticket_lifetime: Duration,
    sender: mpsc::Sender<Vec<BucketKey>>,
    task: tokio::task::AbortHandle,
}

impl Drop for Relayed {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Realtime for Relayed {
    fn publish(&self, signal: Signal) -> BoxFuture<'_, Result<()>> {
        self.local.publish(signal)
    }

    fn subscribe(&self) -> broadcast::Receiver<Signal> {
        self.local.subscribe()
    }

    fn track(&self, presence: Presence) -> BoxFuture<'_, Result<()>> {
        self.local.track(presence)
    }

    fn untrack<'a>(&'a self, bucket: &'a BucketKey, presence_ref: &'a str) -> BoxFuture<'a, Result<()>> {
        self.local.untrack(bucket, presence_ref)
    }

    fn presence_state<'a>(
        &'a self,
        buckets: &'a [BucketKey],
    ) -> BoxFuture<'a, Result<BTreeMap<BucketKey, PresenceState>>> {
        self.local.presence_state(buckets)
    }

    fn relay(&self) -> Option<&dyn Relay> {
        Some(self)
    }
}

impl Relay for Relayed {
    fn send(&self, buckets: Vec<BucketKey>) {
        if let Err(mpsc::error::TrySendError::Full(dropped)) = self.sender.try_send(buckets) {
            tracing::warn!(buckets = dropped.len(), "the edge relay falls behind: pings dropped");
        }
    }

    fn tickets(&self, buckets: &BTreeSet<BucketKey>) -> EdgeTickets {
        // Whole seconds, as the tickets carry them.
        let lifetime = i64::try_from(self.ticket_lifetime.as_secs()).unwrap_or(i64::MAX / 4);
        let expires = chrono::Utc::now().timestamp().saturating_add(lifetime);
        let expires_at =
            chrono::DateTime::from_timestamp(expires, 0).unwrap_or(chrono::DateTime::<chrono::Utc>::MAX_UTC);
        let tickets = buckets
            .iter()
            .map(|bucket| EdgeTicket { bucket: bucket.clone(), ticket: self.signer.ticket(bucket, expires) })
            .collect();
        EdgeTickets { url: self.client_url.clone(), expires_at, tickets }
    }
}

/// Send what the hub releases to `url`, one publish per batch of up to [`PUBLISH_BATCH`] buckets,
/// the batches that waited meanwhile merged. A publish that still fails after its retries is
/// logged: its clients pull on their timer.
async fn publish(mut queue: mpsc::Receiver<Vec<BucketKey>>, client: reqwest::Client, url: String, signer: Signer) {
    while let Some(first) = queue.recv().await {
        let mut buckets: BTreeSet<BucketKey> = first.into_iter().collect();
        while let Ok(more) = queue.try_recv() {
            buckets.extend(more);
        }
        let buckets: Vec<BucketKey> = buckets.into_iter().collect();
        for batch in buckets.chunks(PUBLISH_BATCH) {
            let expires =
                chrono::Utc::now().timestamp_millis() + i64::try_from(PUBLISH_EXPIRY.as_millis()).unwrap_or(i64::MAX);
            let nonce = uuid::Uuid::new_v4().simple().to_string();
            let body = serde_json::json!({"buckets": batch, "expires": expires, "nonce": nonce}).to_string();
            let signature = signer.sign("publish", &body);
            send_publish(&client, &url, &signature, body, batch.len()).await;
        }
    }
}

/// Post one signed publish, sent again after each of [`PUBLISH_RETRIES`] while the relay could not
/// take it (a connection refused or closed before the answer, a `5xx`) and the first try was less
/// than [`PUBLISH_RETRY_BUDGET`] ago, not after a refusal (`4xx`) or a timeout. The same body again is safe: each bucket's object takes a nonce once.
async fn send_publish(client: &reqwest::Client, url: &str, signature: &str, body: String, buckets: usize) {
    let mut retries = PUBLISH_RETRIES.iter();
    let first = tokio::time::Instant::now();
    loop {
        let sent = client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(SIGNATURE_HEADER, signature)
            .body(body.clone())
            .send()
            .await;
        let again = match &sent {
            Ok(answer) if answer.status().is_success() => return,
            Ok(answer) => answer.status().is_server_error(),
            Err(err) => !err.is_timeout(),
        };
        // Within a budget: the publishes queued behind this one wait for it.
        let in_budget = first.elapsed() < PUBLISH_RETRY_BUDGET;
        if let (true, true, Some(wait)) = (again, in_budget, retries.next()) {
            tokio::time::sleep(*wait).await;
            continue;
        }
        match sent {
            Ok(answer) => tracing::warn!(status = %answer.status(), buckets, "the edge relay refused a publish"),
            Err(err) => tracing::warn!(error = %err, buckets, "publishing to the edge relay failed"),
        }
        return;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ticket names its bucket and expiry under the `ticket` kind: the relay
    /// (`clients/typescript/packages/edge/src/signing.ts`) checks the same bytes, and a
    /// publish's signature over the same text differs.
    #[test]
    fn a_ticket_signs_its_bucket_and_expiry() {
        let signer = Signer(Arc::from(&b"0123456789abcdef"[..]));
        let bucket = BucketKey::new("shared", &["l1"]);
        let ticket = signer.ticket(&bucket, 1_900_000_000);
        let (expires, signature) = ticket.split_once('.').unwrap();
        assert_eq!(expires, "1900000000");
        // The same vector as `clients/typescript/packages/edge/test/signing.test.ts`.
        assert_eq!(signature, "04157a8fb84d5573706ce7857f86dcd3c569ed370928ef426a6474aa64600c77");
        assert_eq!(signature.len(), 64);
        assert_ne!(signature, signer.sign("publish", "shared/l1\n1900000000"));
        assert_ne!(ticket, signer.ticket(&BucketKey::new("shared", &["l2"]), 1_900_000_000));
    }
}
