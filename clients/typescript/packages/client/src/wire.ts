/**
 * The messages of wire protocol v1 (`docs/protocol.md`): pull, push, the stream's frames and
 * the problem document. Field names are the protocol's; a server may add fields, and the
 * client ignores those it does not know.
 */

/** The protocol version this client speaks (`x-engine.version`). */
export const PROTOCOL_VERSION = "1";
/** The WebSocket subprotocol of `/sync/stream`. */
export const STREAM_SUBPROTOCOL = "engine.v1";

/** A row: column name (the SQL name) to value, as `docs/protocol.md#row-values` says. */
export type Row = Record<string, unknown>;

/** `POST /sync/pull` request. */
export interface PullRequest {
  clientId: string;
  cursor?: string | null;
  /** Exactly these buckets, each held; absent (with `rules` and `open`) for every bucket held. */
  buckets?: string[];
  /** Every held bucket of these sync rules, besides `buckets` and `open`. */
  rules?: string[];
  /** These buckets when the actor holds them; one it does not hold is left out. */
  open?: string[];
  /** Buckets of this pull to deliver from their beginning, whatever the cursor says. */
  restart?: string[];
  limit?: number;
}

/**
 * How far a sync that takes several pages has got, in steps (one step: the rows of one table in
 * one bucket): an estimate, since steps differ in size.
 */
export interface PullProgress {
  /** The steps of the buckets synced that are delivered. */
  done: number;
  /** Every step of the buckets synced. */
  total: number;
}

/** A row written since the cursor. */
export interface Change {
  table: string;
  row: Row;
  buckets: string[];
}

/** A row that left buckets: deleted, soft-deleted or moved out. */
export interface Tombstone {
  table: string;
  key: Row;
  buckets: string[];
}

/** `POST /sync/pull` response. */
export interface PullResponse {
  changes: Change[];
  tombstones: Tombstone[];
  removedBuckets: string[];
  cursor: string;
  hasMore: boolean;
  reset: boolean;
  lastMutationId: number;
  /** Absent from servers that do not send it: `lastMutationId` stands in for it then. */
  syncedMutationId?: number;
  /** Reserved: the server's clock reading, which the client's clock observes when present. */
  serverHlc?: string;
  /** How far the sync has got, with `hasMore`; absent on its last page and from older servers. */
  progress?: PullProgress;
}

/** One queued mutation, as a push carries it. */
export interface MutationRequest {
  mutationId: number;
  clientMutationId: string;
  name: string;
  args: unknown;
  hlc?: string;
}

/** `POST /sync/push` request. */
export interface PushRequest {
  clientId: string;
  mutations: MutationRequest[];
}

/** What became of one mutation. */
export interface MutationResult {
  clientMutationId: string;
  mutationId: number;
  status: "applied" | "duplicate" | "rejected";
  serverId?: string;
  reconciliation?: Record<string, string>;
  error?: Problem;
  /** Reserved: every write of the mutation lost its field merge to a newer write. */
  superseded?: boolean;
}

/** `POST /sync/push` response. */
export interface PushResponse {
  results: MutationResult[];
  lastMutationId: number;
}

/** A problem document (`application/problem+json`): the body of every error of the engine. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  /** The stable code clients decide on. */
  code: string;
  detail: string;
  /** With `mutation_out_of_order`: the server's sequence for the client. */
  lastMutationId?: number;
}

/** A presence meta: an object, with the server's `presenceRef` once it has gone through it. */
export type PresenceMeta = Record<string, unknown>;
/** Presence key (user id) to one meta per connection. */
export type PresenceState = Record<string, PresenceMeta[]>;

/** A frame a client sends on `/sync/stream`. */
export type ClientFrame =
  | { type: "auth"; token: string }
  | { type: "subscribe"; buckets: string[] }
  | { type: "track"; bucket: string; meta: PresenceMeta }
  | { type: "untrack"; bucket: string }
  | { type: "heartbeat" };

/** A frame the server sends on `/sync/stream`. */
export type ServerFrame =
  | { type: "ping"; bucket: string }
  | { type: "buckets_changed" }
  | { type: "presence_state"; bucket: string; state: PresenceState }
  | { type: "presence_diff"; bucket: string; joins: PresenceState; leaves: PresenceState }
  | { type: "error"; code: string; detail: string };

/** `POST /blobs/upload`: where to upload `size` bytes hashing to `key` (`docs/protocol.md#blobs`). */
export interface BlobUploadRequest {
  key: string;
  size: number;
}

/** `POST /blobs/download`: where to download blob `key`. */
export interface BlobDownloadRequest {
  key: string;
}

/** The answer to a blob request: a signed URL to `PUT` the bytes to or `GET` them from, until `expiresAt`. */
export interface BlobTicket {
  key: string;
  method: "PUT" | "GET";
  /** A URL that starts with `/` is relative to the server's base URL. */
  url: string;
  /** Headers the request must carry. */
  headers?: Record<string, string>;
  expiresAt: string;
}

/** Whether `value` has the shape of a problem document. */
export function isProblem(value: unknown): value is Problem {
  if (typeof value !== "object" || value === null) return false;
  const problem = value as Record<string, unknown>;
  return typeof problem.code === "string" && typeof problem.status === "number";
}

/** The server frame in `text`, or `undefined` when it is not one this client knows. */
export function parseServerFrame(text: string): ServerFrame | undefined {
  let frame: unknown;
  try {
    frame = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof frame !== "object" || frame === null) return undefined;
  const type = (frame as { type?: unknown }).type;
  switch (type) {
    case "ping":
    case "buckets_changed":
    case "presence_state":
    case "presence_diff":
    case "error":
      return frame as ServerFrame;
    default:
      return undefined;
  }
}
