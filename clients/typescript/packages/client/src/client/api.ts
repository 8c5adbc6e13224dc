/**
 * The client's public shape: how an app builds one (`EngineClientOptions`) and what it offers
 * (`EngineClient`). Only types live here. `createEngineClient` in `client.ts` builds a client
 * from them, and `mutators.ts` types its calls with them without importing the implementation.
 */

import type { AuthInput } from "../auth.js";
import type { PresenceEvent } from "../presence.js";
import type { Fetch } from "../remote.js";
import type { RowChange } from "../replica/changes.js";
import type { Queued } from "../replica/outbox.js";
import type { EngineSchema, KeyInput, MutatorTypes, TableTypes } from "../schema.js";
import type { ClientStore } from "../store/types.js";
import type { Actor, OptimisticMutator } from "../view.js";
import type { RealtimeSource } from "../websocket.js";
import type { BlobDownloadRequest, BlobTicket, BlobUploadRequest, PresenceMeta, PresenceState } from "../wire.js";
import type { OnlineSignal } from "./online.js";
import type { Status } from "./status.js";
import type { TabsOptions } from "./tabs.js";

/** Optimistic functions by mutator name, typed by the app's rows and arguments. */
export type OptimisticMutators<T extends TableTypes, M extends MutatorTypes> = {
  [K in keyof M & string]?: OptimisticMutator<T, M[K]>;
};

/** How to build a client. */
export interface EngineClientOptions<T extends TableTypes, M extends MutatorTypes> {
  /** The server (`http://host:port`, or with the prefix the engine is mounted under). */
  url: string;
  /** The app's schema, as `engine gen` writes it. */
  schema: EngineSchema<T, M>;
  /** A bearer token, or a provider asked afresh for every request and connection. */
  auth: AuthInput;
  /** Who mutations run for locally; read from the token when it is a JWT. */
  actor?: Actor;
  /** Where the client's state lives (memory by default). */
  store?: ClientStore;
  /** Optimistic functions; `createEngineMutators` registers more. */
  optimistic?: OptimisticMutators<T, M>;
  /** The `fetch` to use (the global one by default). */
  fetch?: Fetch;
  /**
   * Realtime: a source, or `false` for none. By default `createRealtimeSource` (a WebSocket
   * falling back to long-poll) over the global `WebSocket`; where there is none, creating the
   * client fails and says what to pass.
   */
  realtime?: RealtimeSource | false;
  /** Sync in the background (default); without it only explicit `pull`, `push` and `sync` talk to the server. */
  background?: boolean;
  /** Pull this often when nothing else asks for it (30,000 ms). */
  pullIntervalMs?: number;
  /** Entries per pull page (1,000). */
  pullPage?: number;
  /** Mutations per push (100). */
  pushBatch?: number;
  /**
   * Sync only what is open: every held bucket of these sync rules (say, the rule of a list
   * index), and the buckets opened with `syncBucket` while they are open. Absent (the default):
   * every bucket the actor holds.
   */
  syncOpen?: readonly string[];
  /** How long rows of buckets the actor lost, or the app released, stay (0: they go at once). */
  bucketTtlMs?: number;
  /** How long one request may take before it counts as lost (30,000 ms). */
  requestTimeoutMs?: number;
  /** Retries of pushes and pulls: backoff from `backoffBaseMs` (500) to `backoffMaxMs` (30,000). */
  retry?: { backoffBaseMs?: number; backoffMaxMs?: number };
  /**
   * The platform's connectivity: when it comes online, waiting retries and the stream's
   * reconnection go at once. Browsers' `online` events by default; `false` for none.
   */
  online?: OnlineSignal | false;
  /**
   * The tabs of a browser that open the same store (`indexedDbStore`) for the same user share
   * one client: one tab leads, with the socket, the pulls and the pushes, and the others send it
   * their mutations (Web Locks and `BroadcastChannel`). On by default where both exist; `false`
   * makes each tab a client of its own. Elsewhere, and over a store of one tab (memory), each
   * client is on its own.
   */
  tabs?: TabsOptions | false;
}

/** A client of an engine server. */
export interface EngineClient<T extends TableTypes = TableTypes, M extends MutatorTypes = MutatorTypes> {
  readonly clientId: string;
  readonly actor: Actor;
  readonly schema: EngineSchema<T, M>;
  /**
   * Run mutator `name` locally (its optimistic function, if any) and queue it for the server.
   * A local run that throws, or writes what the server would certainly refuse
   * (`ForbiddenError`), queues nothing.
   */
  mutate<K extends keyof M & string>(name: K, args: M[K]): Promise<Queued>;
  /** Add optimistic functions; the view is rebased with them. */
  registerOptimistic(mutators: OptimisticMutators<T, M>): void;
  /** Pull until caught up. */
  pull(): Promise<void>;
  /** Push the outbox until it is drained or a failure stops it. */
  push(): Promise<void>;
  /** Push and pull until the outbox is empty (or a few rounds pass). */
  sync(): Promise<void>;
  /** The live rows of `table` in the view, in key order. */
  rows<K extends keyof T & string>(table: K): T[K][];
  /** The live row of `table` with `key`. */
  get<K extends keyof T & string>(table: K, key: KeyInput): T[K] | undefined;
  /** The buckets holding the confirmed row of `table` with `key`: none when only pending writes
   * made it (or there is no such row). */
  bucketsOf<K extends keyof T & string>(table: K, key: KeyInput): string[];
  /**
   * Whether a mutation the server has not yet confirmed wrote the row of `table` with `key` in
   * its optimistic run: an added, changed or deleted row not yet on the server, for marking it.
   * A mutator with no optimistic function writes nothing locally, so it marks no row.
   */
  isPending<K extends keyof T & string>(table: K, key: KeyInput): boolean;
  /**
   * Whether the actor may update `row` of `table` (show it editable), as the sync rules' write
   * rules say with what the client holds: `"unknown"` where the client cannot tell (the server
   * decides when the mutation reaches it). A mutation writing what this refuses fails locally
   * with `ForbiddenError`.
   */
  canWrite<K extends keyof T & string>(table: K, row: T[K]): boolean | "unknown";
  /** Call `listener` with every change of the view's rows; returns the unsubscribe. */
  onChange(listener: (changes: RowChange[]) => void): () => void;
  /** The buckets the client holds, in key order. */
  buckets(): string[];
  /**
   * Call `listener` with the buckets held whenever a pull ends having changed them (a membership
   * granted or revoked); returns the unsubscribe. A row can leave or enter the actor's buckets
   * without changing, so `onChange` does not say it.
   */
  onBuckets(listener: (buckets: string[]) => void): () => void;
  /** The cursor of the last pull (opaque; `null` before the first). */
  readonly cursor: string | null;
  readonly status: Status;
  onStatus(listener: (status: Status) => void): () => void;
  /** Queue a rejected mutation again, as a new mutation; `undefined` when it is not quarantined. */
  retryQuarantined(clientMutationId: string): Promise<Queued | undefined>;
  /** Drop a rejected mutation; whether it was quarantined. */
  discardQuarantined(clientMutationId: string): Promise<boolean>;
  /**
   * Sync `bucket` until the handle is released, on a client that syncs only what is open
   * (`syncOpen`): the next pull brings it (from its beginning when the client holds none of its
   * rows), and the stream follows it once its rows are in. Released by every handle, pulls leave
   * it out and its rows go after the bucket TTL. A bucket the actor does not hold is left out,
   * not refused. On a client that syncs every bucket held, the handle changes nothing.
   */
  syncBucket(bucket: string): SyncedBucket;
  /** The buckets open through `syncBucket` handles, in key order (the leading tab: of every tab). */
  openBuckets(): string[];
  /** Follow only `buckets` in realtime (`null`: every bucket held, the default). */
  subscribe(buckets: readonly string[] | null): void;
  /** Be present in `bucket` with `meta` (kept across reconnections). */
  track(bucket: string, meta?: PresenceMeta): void;
  untrack(bucket: string): void;
  /** Who is present in `bucket`, as the stream last said. */
  presenceState(bucket: string): PresenceState;
  /** Call `listener` with every presence change; returns the unsubscribe. */
  onPresence(listener: (event: PresenceEvent) => void): () => void;
  /**
   * A blob ticket (`docs/protocol.md#blobs`): a signed URL to upload `{key, size}` to, or to
   * download `{key}` from, asked for as the client's actor. `createEngineBlobs` uses it.
   */
  blobTicket(route: "upload", request: BlobUploadRequest): Promise<BlobTicket>;
  blobTicket(route: "download", request: BlobDownloadRequest): Promise<BlobTicket>;
  /** Send a blob ticket's request with the client's `fetch`: `PUT` `body`, or `GET` the bytes it returns. */
  transferBlob(ticket: BlobTicket, body?: Uint8Array): Promise<Uint8Array>;
  /** Stop syncing and let go of the store. */
  close(): Promise<void>;
}

/** A bucket kept open by `EngineClient.syncBucket`. */
export interface SyncedBucket {
  readonly bucket: string;
  /** Release the bucket (once no other handle holds it, pulls leave it out). */
  release(): void;
}
