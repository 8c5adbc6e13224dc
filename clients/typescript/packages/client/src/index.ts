/**
 * `@engine/client`: the engine's TypeScript client, with no framework dependency.
 *
 * - `createEngineClient`: a durable local copy of the actor's buckets that takes writes
 *   offline and converges when it reconnects (pull, push, outbox, quarantine, rebase, status);
 *   the tabs of a browser share one (`TabsOptions`).
 * - `createEngineMutators`: the app's optimistic functions and a call per mutator.
 * - `createEngineStatus`: the sync status and the quarantined mutations, for a UI.
 * - `createWebSocketSource`: realtime over any WHATWG WebSocket, reconnecting.
 * - `track`, `untrack`, `presenceState`, `onPresence`, `subscribePresence`, `presence`: who is
 *   present in a bucket, as functions of a client.
 * - `createLongPollSource`: realtime over plain HTTP (`GET /sync/poll`), for networks that refuse
 *   WebSocket upgrades; `createRealtimeSource` (the default) falls back to it by itself.
 * - Stores: `memoryStore`, `indexedDbStore`, `webSqlitePersistence` (SQLite on the origin-private
 *   file system, in a worker; IndexedDB where that is missing), `sqliteStore` over any
 *   `SqlExecutor`, `upgradeStoredState` for their layout versions, and `migrateClientStore` to
 *   move one store into another.
 * - Blobs: `createEngineBlobs` (files put offline, uploaded when online, downloaded as the rows
 *   allow), `keyForBlob` (a file's key, as the server computes it), and the blob stores
 *   `memoryBlobStore` and `indexedDbBlobStore` that keep the bytes and the upload queue.
 * - `defineSchema`, `bucketKey` and `Mutate`: what modules written by `engine gen` use.
 * - `authorizeWrite`: the write rules evaluated offline, as `mutate` and `canWrite` use them.
 * - The wire protocol's messages, its clock and its ids.
 */

export { createEngineClient } from "./client.js";
export type { EngineClient, EngineClientOptions, OptimisticMutators, SyncedBucket } from "./client/api.js";
export { browserOnlineSignal } from "./client/online.js";
export type { OnlineSignal } from "./client/online.js";
export type { Status } from "./client/status.js";
export type { TabChannel, TabLocks, TabsOptions } from "./client/tabs.js";
export { createEngineStatus } from "./client/engine-status.js";
export type { EngineStatus, StatusClient } from "./client/engine-status.js";
export { createEngineMutators } from "./mutators.js";
export type { MutatorCalls } from "./mutators.js";
export type { RowChange } from "./replica/changes.js";
export type { Queued } from "./replica/outbox.js";
export { UnknownMutatorError } from "./replica/outbox.js";
export type { PageApplied } from "./replica/pull.js";
export { StoreMismatchError } from "./replica/state.js";
export type { Actor, MutationTx, OptimisticMutator } from "./view.js";
export { timestampText } from "./view.js";

export { createWebSocketSource } from "./websocket.js";
export { createLongPollSource } from "./longpoll.js";
export type { LongPollSourceOptions } from "./longpoll.js";
export { createRealtimeSource } from "./fallback.js";
export type { RealtimeSourceOptions } from "./fallback.js";
export type {
  CloseInfo,
  RealtimeSession,
  RealtimeSource,
  ReconnectOptions,
  WebSocketFactory,
  WebSocketLike,
  WebSocketSourceOptions,
} from "./websocket.js";
export type { PresenceEvent } from "./presence.js";
export { onPresence, presence, presenceState, subscribePresence, track, untrack } from "./client/presence.js";
export type { BucketPresence, PresenceClient } from "./client/presence.js";

export { memoryStore } from "./store/memory.js";
export { indexedDbStore } from "./store/indexeddb.js";
export { sqliteStore } from "./store/sqlite.js";
export type { SqlExecutor, SqlStatement, SqlValue } from "./store/sqlite.js";
export { StoreBusyError, webSqlitePersistence } from "./store/web-sqlite.js";
export type { WebSqliteOptions, WebSqliteStore } from "./store/web-sqlite.js";
export { CLIENT_STORE_MIGRATIONS, ClientStoreVersionError, migrateClientStore, upgradeStoredState } from "./store/migrate.js";
export type { ClientStoreMigration } from "./store/migrate.js";
export { CLIENT_STORE_VERSION } from "./store/types.js";
export type {
  ClientStore,
  OutboxEntry,
  QuarantinedEntry,
  StoredBucket,
  StoredRow,
  StoredState,
  StoreMeta,
  StoreWrite,
} from "./store/types.js";

export { BlobError, createEngineBlobs } from "./blobs/engine-blobs.js";
export type { BlobFailure, BlobsClient, BlobState, BlobStatus, EngineBlobs, EngineBlobsOptions } from "./blobs/engine-blobs.js";
export { isBlobKey, keyForBlob } from "./blobs/key.js";
export type { BlobInput } from "./blobs/key.js";
export { memoryBlobStore } from "./blobs/store.js";
export type { BlobStore, QueuedUpload, StoredBlob } from "./blobs/store.js";
export { indexedDbBlobStore } from "./blobs/indexeddb.js";

export { defineSchema, keyRow, keyText } from "./schema.js";
export type {
  ColumnSchema,
  ConstTerm,
  ConstValue,
  EngineSchema,
  KeyInput,
  MembershipFilterSchema,
  MembershipSchema,
  Mutate,
  MutatorTypes,
  SelectionSchema,
  SyncRuleSchema,
  TableSchema,
  TableTypes,
  WriteAlternative,
} from "./schema.js";
export { bucketKey, bucketRule, encodeBucketParam } from "./bucket.js";
export type { BucketParam } from "./bucket.js";

export { actorOfToken, BearerToken, tokenClaims } from "./auth.js";
export type { AuthInput, AuthProvider } from "./auth.js";
export { ClosedError, ForbiddenError, NetworkError, ServerError } from "./errors.js";
export { authorizeWrite } from "./authorize.js";
export type { Permission, Verdict, Write, WriteContext } from "./authorize.js";
export { retryAfterMs } from "./remote.js";
export type { Fetch } from "./remote.js";
export { formatHlc, HlcClock, parseHlc } from "./hlc.js";
export type { HlcReading } from "./hlc.js";
export { derivedId, newUuid } from "./ids.js";
export { PROTOCOL_VERSION, STREAM_SUBPROTOCOL } from "./wire.js";
export type * from "./wire.js";
