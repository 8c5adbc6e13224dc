//! The messages of wire protocol v1 (`docs/protocol.md`): pull, push, the stream's frames and the
//! problem document. Field names are camelCase and fixed; unknown fields are ignored so newer
//! clients can add some.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::bucket::BucketKey;
use crate::error::ErrorCode;
use crate::table::Row;

/// The protocol version this crate speaks (`x-engine.version`).
pub const PROTOCOL_VERSION: &str = "1";
/// The WebSocket subprotocol of `/sync/stream`.
pub const STREAM_SUBPROTOCOL: &str = "engine.v1";
/// The `error` frame code of a `track` whose meta is over the server's size limit.
pub const META_TOO_LARGE: &str = "meta_too_large";
/// The `error` frame code of a `track` that would make the actor present more often than the
/// server allows.
pub const TOO_MANY_PRESENCES: &str = "too_many_presences";

/// Integers in requests as JSON Schema counts them: `37`, and `37.0` too (a number whose
/// fractional part is zero).
mod integer {
    use serde::Deserialize;
    use serde::de::{Deserializer, Error};

    /// The integer `number` holds, if it holds one a `u64` can.
    fn of(number: &serde_json::Number) -> Option<u64> {
        const TWO_TO_THE_64: f64 = 18_446_744_073_709_551_616.0;
        match (number.as_u64(), number.as_f64()) {
            (Some(n), _) => Some(n),
            // An integral double below 2^64 is an exact integer.
            (None, Some(f)) if f.fract() == 0.0 && (0.0..TWO_TO_THE_64).contains(&f) => Some(f as u64),
            _ => None,
        }
    }

    fn refused<E: Error>(number: &serde_json::Number) -> E {
        E::custom(format!("expected a non-negative integer, got {number}"))
    }

    pub(super) fn required<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
        let number = serde_json::Number::deserialize(deserializer)?;
        of(&number).ok_or_else(|| refused(&number))
    }

    /// An optional bound, where any larger value means as many as may be: taken as `u32::MAX`.
    pub(super) fn optional_bound<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u32>, D::Error> {
        let Some(number) = Option::<serde_json::Number>::deserialize(deserializer)? else { return Ok(None) };
        match number.as_f64() {
            Some(f) if f.fract() == 0.0 && f >= 0.0 => {
                Ok(Some(of(&number).map_or(u32::MAX, |n| u32::try_from(n).unwrap_or(u32::MAX))))
            }
            _ => Err(refused(&number)),
        }
    }
}

/// `POST /sync/pull` request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PullRequest {
    /// The client's id.
    pub client_id: Uuid,
    /// The cursor of the previous response; null or absent to start from the beginning.
    #[serde(default)]
    pub cursor: Option<String>,
    /// A subset of the actor's buckets to sync, each of which the actor must hold; absent (with
    /// `rules` and `open`) for all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buckets: Option<Vec<BucketKey>>,
    /// Sync every bucket of these sync rules the actor holds, besides `buckets` and `open`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<Vec<String>>,
    /// Buckets to sync when the actor holds them, besides `buckets` and `rules`; one it does
    /// not hold is left out, not refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open: Option<Vec<BucketKey>>,
    /// Buckets synced by this pull to deliver from their beginning, whatever the cursor says:
    /// the client dropped its rows of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart: Option<Vec<BucketKey>>,
    /// The most entries (changes plus tombstones) to return.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "integer::optional_bound")]
    #[schemars(range(min = 1))]
    pub limit: Option<u32>,
}

/// `POST /sync/pull` response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PullResponse {
    /// Rows written since the cursor.
    pub changes: Vec<Change>,
    /// Rows that left buckets since the cursor.
    pub tombstones: Vec<Tombstone>,
    /// Buckets of the request's cursor that the actor no longer holds.
    pub removed_buckets: Vec<BucketKey>,
    /// The cursor to send next.
    pub cursor: String,
    /// Whether more entries are waiting.
    pub has_more: bool,
    /// Whether the client must drop its rows of these buckets and start afresh from this response.
    pub reset: bool,
    /// The highest mutation id applied for this client of this actor.
    pub last_mutation_id: u64,
    /// The highest mutation id of this client whose writes the pulled data already reflects
    /// (at most `lastMutationId`; lower while a mutation's transaction is above the pull's
    /// horizon). A client keeps a mutation's optimistic effect until this reaches it. Absent
    /// from servers that do not report it: read `lastMutationId` then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synced_mutation_id: Option<u64>,
    /// The server's clock reading, at least every clock stamp of the rows this response
    /// delivers: a client's clock observes it, so a write issued after this pull orders after
    /// every write it delivered, whatever the wall clocks say. Absent from servers that do not
    /// send it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_hlc: Option<crate::hlc::Hlc>,
    /// How far the sync this page belongs to has got, with `hasMore`; absent on its last page
    /// and from servers that do not report it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<PullProgress>,
    /// Present when the actor holds more buckets than the server serves one actor
    /// (`docs/protocol.md#the-bucket-bound`): this pull served a part of them. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bounded: Option<Bounded>,
}

/// How far a sync that takes several pages has got, in steps (one step: the rows of one table
/// in one bucket), counted from the pull's cursor: cheap for the server, and an estimate for
/// the client, since steps differ in size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PullProgress {
    /// The steps of the buckets synced that are delivered.
    pub done: u64,
    /// Every step of the buckets synced.
    pub total: u64,
}

/// `bounded` of a pull: the actor holds more buckets than the server serves one actor, and the
/// pull served `served` of its `held` buckets, the most recently granted. A bucket that leaves
/// the served part is in `removedBuckets`; one that enters it starts afresh. A pull that names
/// its `buckets` (at most the bound) is served them, and says nothing of the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Bounded {
    /// How many buckets the actor holds.
    pub held: u64,
    /// How many of them this pull served: the bound.
    pub served: u64,
}

/// A row written since the cursor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Change {
    /// The table's SQL name.
    pub table: String,
    /// Every synced column of the row.
    pub row: Row,
    /// The buckets synced by this request that contain the row.
    pub buckets: Vec<BucketKey>,
}

/// A row that left buckets (deleted, soft-deleted or moved out).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Tombstone {
    /// The table's SQL name.
    pub table: String,
    /// The row's primary key columns.
    pub key: Row,
    /// The buckets the row left.
    pub buckets: Vec<BucketKey>,
}

/// `POST /sync/push` request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PushRequest {
    /// The client's id.
    pub client_id: Uuid,
    /// Mutations in order, their `mutationId`s consecutive.
    pub mutations: Vec<MutationRequest>,
}

/// One queued mutation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MutationRequest {
    /// The client's sequence number of the mutation, 1 for its first.
    #[serde(deserialize_with = "integer::required")]
    #[schemars(range(max = 9_223_372_036_854_775_807_u64))]
    pub mutation_id: u64,
    /// The client's unique id of the mutation.
    pub client_mutation_id: Uuid,
    /// The mutator's wire name.
    pub name: String,
    /// The mutator's arguments.
    pub args: Value,
    /// The client's hybrid-logical-clock reading; the server stamps its own when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hlc: Option<String>,
}

/// `POST /sync/push` response.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PushResponse {
    /// One result per mutation, in order.
    pub results: Vec<MutationResult>,
    /// The highest mutation id applied for this client of this actor.
    pub last_mutation_id: u64,
}

/// What became of one mutation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MutationResult {
    /// The client's id of the mutation.
    pub client_mutation_id: Uuid,
    /// The client's sequence number of the mutation.
    pub mutation_id: u64,
    /// Applied now, applied before, or refused for good.
    pub status: MutationStatus,
    /// The id the server gave the row the mutation created or addressed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_id: Option<String>,
    /// Client ids mapped to server ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconciliation: Option<BTreeMap<String, String>>,
    /// Why the mutation was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Problem>,
    /// Every write of the mutation lost its merge to a newer write: it was applied, but nothing
    /// of it shows. Sent only when true.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub superseded: bool,
}

/// The fate of a mutation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MutationStatus {
    /// Applied by this push.
    Applied,
    /// Applied (or rejected) by an earlier push; the stored outcome is repeated.
    Duplicate,
    /// Refused for good: recorded, and the sequence moved past it.
    Rejected,
}

/// `POST /blobs/upload`: where to upload the blob `key` of `size` bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BlobUploadRequest {
    /// The blob's key: the SHA-256 of its bytes.
    pub key: crate::BlobKey,
    /// Its size in bytes.
    pub size: u64,
    /// Its media type (`image/png`), which a server that allows only some types checks, and an
    /// object store keeps with the bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
}

/// `POST /blobs/download`: where to download the blob `key`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BlobDownloadRequest {
    /// The blob's key.
    pub key: crate::BlobKey,
}

/// The answer to a blob request: a signed URL to send the bytes to (`PUT`) or fetch them from
/// (`GET`), with the headers to send, until `expiresAt`. A URL that starts with `/` is relative
/// to the server's base URL (the one `/sync/pull` is under).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlobTicket {
    /// The blob's key.
    pub key: crate::BlobKey,
    /// `PUT` or `GET`.
    pub method: String,
    /// Where.
    pub url: String,
    /// Headers the request must carry.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// When the URL stops working.
    pub expires_at: crate::Timestamp,
}

/// A problem document (`application/problem+json`), the body of every error response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    /// A URI naming the problem type.
    #[serde(rename = "type")]
    pub kind: String,
    /// A short summary of the problem type.
    pub title: String,
    /// The HTTP status.
    pub status: u16,
    /// The stable code.
    pub code: ErrorCode,
    /// What went wrong, for humans.
    pub detail: String,
    /// With `mutation_out_of_order`: the last mutation id applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_mutation_id: Option<u64>,
}

impl Problem {
    /// The problem for `code` with `detail`.
    ///
    /// The detail is made safe to store and show: a NUL becomes the text `\u0000` (JSON
    /// stores may refuse the character itself), and a detail over [`Problem::MAX_DETAIL`] bytes
    /// is cut at a character boundary and ends with `…`.
    pub fn new(code: ErrorCode, detail: impl Into<String>) -> Self {
        Problem {
            kind: format!("urn:engine:problem:{}", code.as_str()),
            title: code.title().to_owned(),
            status: code.http_status(),
            code,
            detail: safe_detail(detail.into()),
            last_mutation_id: None,
        }
    }

    /// The longest detail a problem carries, in bytes.
    pub const MAX_DETAIL: usize = 1024;
}

fn safe_detail(detail: String) -> String {
    let mut detail = if detail.contains('\0') { detail.replace('\0', "\\u0000") } else { detail };
    if detail.len() > Problem::MAX_DETAIL {
        let mut end = Problem::MAX_DETAIL - '…'.len_utf8();
        while !detail.is_char_boundary(end) {
            end -= 1;
        }
        detail.truncate(end);
        detail.push('…');
    }
    detail
}

/// A frame a client sends on `/sync/stream`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ClientFrame {
    /// Authenticate (for clients that cannot set headers); only as the first frame.
    Auth {
        /// The bearer token.
        token: String,
    },
    /// Subscribe to these buckets instead of all the actor holds.
    Subscribe {
        /// Bucket keys the actor holds.
        buckets: Vec<BucketKey>,
    },
    /// Announce presence in a bucket.
    Track {
        /// The bucket.
        bucket: BucketKey,
        /// What to show others.
        #[serde(default)]
        meta: Map<String, Value>,
    },
    /// Withdraw presence from a bucket.
    Untrack {
        /// The bucket.
        bucket: BucketKey,
    },
    /// Keep presence alive.
    Heartbeat,
}

/// A frame the server sends on `/sync/stream`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerFrame {
    /// Something in the bucket changed: pull.
    Ping {
        /// The bucket.
        bucket: BucketKey,
    },
    /// The actor's bucket set changed: pull.
    BucketsChanged,
    /// Everyone present in a bucket.
    PresenceState {
        /// The bucket.
        bucket: BucketKey,
        /// Presence key (user id) → metas, one per connection.
        state: BTreeMap<String, Vec<Map<String, Value>>>,
    },
    /// Who joined and left a bucket.
    PresenceDiff {
        /// The bucket.
        bucket: BucketKey,
        /// Metas that joined, by presence key.
        joins: BTreeMap<String, Vec<Map<String, Value>>>,
        /// Metas that left, by presence key.
        leaves: BTreeMap<String, Vec<Map<String, Value>>>,
    },
    /// Why the server is about to close the socket.
    Error {
        /// The stable code.
        code: String,
        /// What went wrong.
        detail: String,
    },
}

/// The `GET /sync/poll` answer: the frames of the actor's buckets since `position`, and the
/// position to pass to the next poll.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PollAnswer {
    /// Where the next poll starts: everything before it is in `frames` or in an earlier answer.
    pub position: String,
    /// `ping` and `buckets_changed` frames, as the stream sends them; empty when the wait ran out.
    pub frames: Vec<ServerFrame>,
}

/// The `GET /sync/edge-tickets` answer: where the edge relay is, and a ticket for each bucket the
/// actor holds, which the relay checks without a database (`docs/protocol.md#get-syncedge-tickets`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EdgeTickets {
    /// The relay's base URL: `<url>/buckets/<bucket>/socket` and `<url>/poll`.
    pub url: String,
    /// When every ticket of the answer stops working.
    pub expires_at: crate::Timestamp,
    /// One ticket per bucket the actor holds.
    pub tickets: Vec<EdgeTicket>,
}

/// A bucket's ticket for the edge relay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EdgeTicket {
    /// The bucket.
    pub bucket: BucketKey,
    /// `<expiry, Unix seconds>.<hex HMAC-SHA256>`, good for this bucket only.
    pub ticket: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_put_their_type_first() {
        let frame = ServerFrame::Ping { bucket: BucketKey::new("own", &["alice"]) };
        assert_eq!(serde_json::to_string(&frame).unwrap(), r#"{"type":"ping","bucket":"own/alice"}"#);
        let parsed: ClientFrame = serde_json::from_str(r#"{"type":"heartbeat"}"#).unwrap();
        assert_eq!(parsed, ClientFrame::Heartbeat);
    }

    #[test]
    fn a_problem_detail_is_safe_to_store() {
        let nul = Problem::new(ErrorCode::ValidationFailed, "role `a\0b` is unknown");
        assert_eq!(nul.detail, "role `a\\u0000b` is unknown");
        let long = Problem::new(ErrorCode::ValidationFailed, "é".repeat(2000));
        assert!(long.detail.len() <= Problem::MAX_DETAIL, "{}", long.detail.len());
        assert!(long.detail.ends_with("é…"));
        let short = Problem::new(ErrorCode::Conflict, "plain");
        assert_eq!(short.detail, "plain");
    }

    #[test]
    fn problems_carry_the_fixed_field_names() {
        let mut problem = Problem::new(ErrorCode::MutationOutOfOrder, "expected mutation 3");
        problem.last_mutation_id = Some(2);
        let json = serde_json::to_value(&problem).unwrap();
        assert_eq!(json["type"], "urn:engine:problem:mutation_out_of_order");
        assert_eq!(json["status"], 409);
        assert_eq!(json["code"], "mutation_out_of_order");
        assert_eq!(json["lastMutationId"], 2);
    }

    #[test]
    fn a_pull_request_needs_its_client_id() {
        assert!(serde_json::from_str::<PullRequest>("{}").is_err());
        let request: PullRequest =
            serde_json::from_str(r#"{"clientId":"0192f0e0-0000-7000-8000-000000000000","extra":1}"#).unwrap();
        assert_eq!(request.cursor, None);
    }
}
