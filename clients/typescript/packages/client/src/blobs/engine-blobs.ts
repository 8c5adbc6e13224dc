/**
 * `createEngineBlobs`: files beside the rows (`docs/protocol.md#blobs`, `docs/design.md` §13),
 * put offline and read through the same access rules as rows.
 *
 * `put` hashes the bytes into their key (`keyForBlob`), keeps them in the blob store and queues
 * their upload in the same write, and returns the key for the app to write into a row with a
 * mutator. The row syncs on its own, before the upload ends: readers see the blob `uploading`
 * until the bytes are on the server. The queue is in the blob store, so it survives a reload.
 *
 * The upload loop goes through the queue oldest first, one upload at a time:
 *
 *     queued ── ticket (POST /blobs/upload), PUT to its URL ──▶ uploaded: dequeued, `available`
 *       │  ▲
 *       │  └── no answer, 5xx, 429, 401, or the data URL refused (403: expired): the loop waits
 *       │      (backoff from `retry`, or `Retry-After`), then asks for a new ticket
 *       └──── refused for good (400, 404, 413 over the size limit or the quota, 422 bytes not
 *             hashing to the key, 403 from the ticket route): dequeued, `failed`, reported
 *
 * `get` reads the bytes from the blob store, or asks for a download ticket and keeps what it
 * downloads (checked against the key). The server answers 404 both before the upload and to an
 * actor who may not read the blob; the status tells them apart by the client's rows: a key a row
 * here names is `uploading`, any other `missing`. `watch` tries again, with backoff, while
 * someone watches a key that is not there yet. When the client loses buckets, the bytes no row
 * here names any more leave the store (`prune`), so a member removed from a list keeps no copy.
 */

import { Backoff } from "../backoff.js";
import type { EngineClient } from "../client/api.js";
import type { OnlineSignal } from "../client/online.js";
import { browserOnlineSignal } from "../client/online.js";
import { ServerError } from "../errors.js";
import { SyncLoop } from "../loop.js";
import { describe } from "../remote.js";
import type { AnySchema, MutatorTypes, TableTypes } from "../schema.js";
import { blobBytes, isBlobKey, keyForBlob, type BlobInput } from "./key.js";
import { memoryBlobStore, type BlobStore, type QueuedUpload } from "./store.js";

/** Where a blob stands, as this client knows it. */
export type BlobState =
  /** Nothing asked about it yet. */
  | "unknown"
  /**
   * Not on the server yet: this client's upload is queued (`local`), or a row here names it and
   * the server does not give it yet (its writer's upload is still under way).
   */
  | "uploading"
  /** Being downloaded, or waiting to try again after a download that got no answer (`error`). */
  | "downloading"
  /** On the server, and on this device when `local`. */
  | "available"
  /** The server does not give it to this actor, and no row here names it. */
  | "missing"
  /** Refused for good: the upload (over the size limit or the quota, bytes not hashing to their key), or downloaded bytes that do not hash to the key. `error` says why. */
  | "failed";

/** A blob's status. */
export interface BlobStatus {
  readonly key: string;
  readonly state: BlobState;
  /** Whether the bytes are on this device (`get` returns them at once). */
  readonly local: boolean;
  /** The last failure, in words: why it `failed`, or why the last try got nowhere. */
  readonly error: string | null;
}

/** An upload the server refused for good, taken off the queue. */
export interface BlobFailure {
  readonly key: string;
  /** The problem code (`payload_too_large`, `validation_failed`, …). */
  readonly code: string;
  readonly error: string;
}

/** A blob the client cannot give: not on the server for this actor, or bytes unlike their key. */
export class BlobError extends Error {
  constructor(
    readonly key: string,
    /** `not_found`, `payload_too_large`, `validation_failed`. */
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "BlobError";
  }
}

/** What the blobs need of a client: any `EngineClient`. */
export type BlobsClient<T extends TableTypes = TableTypes, M extends MutatorTypes = MutatorTypes> = Pick<
  EngineClient<T, M>,
  "schema" | "rows" | "blobTicket" | "transferBlob" | "onBuckets"
>;

/** How to build the blobs of a client. */
export interface EngineBlobsOptions {
  /** Where the bytes and the upload queue are kept (memory by default; `indexedDbBlobStore` in a browser). */
  store?: BlobStore;
  /** Upload in the background (default); without it only `upload()` uploads. */
  background?: boolean;
  /** Waits after a failed upload or a download not there yet: backoff from `backoffBaseMs` (500) to `backoffMaxMs` (30,000). */
  retry?: { backoffBaseMs?: number; backoffMaxMs?: number };
  /** The largest blob `put` takes, in bytes: the server's limit, to refuse at once what it would. */
  maxSize?: number;
  /** The platform's connectivity: coming online, the uploads and waiting downloads go at once. */
  online?: OnlineSignal | false;
}

/** A client's blobs. */
export interface EngineBlobs {
  /**
   * Keep `input` on this device and queue its upload; the key, to write into a row. Works
   * offline. `type` is the media type kept with the bytes (a `File`'s own by default).
   */
  put(input: BlobInput, options?: { type?: string }): Promise<string>;
  /** The bytes of `key`: from this device, or downloaded (and kept). Fails with `BlobError` when the server does not give them. */
  get(key: string): Promise<Uint8Array>;
  /** The media type `key` was put with on this device, `""` when unknown. */
  type(key: string): Promise<string>;
  /** Where `key` stands now. */
  status(key: string): BlobStatus;
  /**
   * Call `listener` with `key`'s status now and after every change; returns the unsubscribe.
   * While watched, a blob not on this device is fetched, and tried again (with backoff) until it is.
   */
  watch(key: string, listener: (status: BlobStatus) => void): () => void;
  /** Call `listener` with every status change of any blob; returns the unsubscribe. */
  onStatus(listener: (status: BlobStatus) => void): () => void;
  /** The queued uploads, oldest first. */
  queued(): Promise<QueuedUpload[]>;
  /** The uploads refused for good since these blobs were made, oldest first. */
  readonly failures: readonly BlobFailure[];
  /** Upload the queue now: resolves when it is empty, rejects with the failure that stopped it. */
  upload(): Promise<void>;
  /** Forget the bytes no row of the client names and no upload needs; the keys forgotten. */
  prune(): Promise<string[]>;
  /** Stop, and let go of the blob store. */
  close(): Promise<void>;
}

/** The blobs of `client`: put offline, uploaded when online, downloaded as the rows allow. */
export function createEngineBlobs<T extends TableTypes, M extends MutatorTypes>(
  client: BlobsClient<T, M>,
  options: EngineBlobsOptions = {},
): EngineBlobs {
  return new Blobs(client as unknown as BlobsClient, options);
}

/** Whether `err` refuses an upload for good, from the ticket route or the data URL. */
function refusedForGood(err: unknown, from: "ticket" | "data"): err is ServerError {
  if (!(err instanceof ServerError) || err.status < 400 || err.status >= 500) return false;
  // A token to renew, a wait asked for: the same upload can go later.
  if (err.status === 401 || err.status === 408 || err.status === 429) return false;
  // A data URL that expired or was used: a new ticket will do.
  return !(err.status === 403 && from === "data");
}

/** A watched key's next try. */
interface Retrying {
  backoff: Backoff;
  timer: ReturnType<typeof setTimeout> | undefined;
}

class Blobs implements EngineBlobs {
  private readonly store: BlobStore;
  private readonly statuses = new Map<string, BlobStatus>();
  private readonly watchers = new Map<string, Set<(status: BlobStatus) => void>>();
  private readonly listeners = new Set<(status: BlobStatus) => void>();
  private readonly downloads = new Map<string, Promise<Uint8Array>>();
  private readonly retrying = new Map<string, Retrying>();
  private readonly failed: BlobFailure[] = [];
  private readonly loop: SyncLoop;
  private readonly ready: Promise<void>;
  private readonly unsubscribe: (() => void)[] = [];
  private readonly backoffBaseMs: number;
  private readonly backoffMaxMs: number;
  private closed = false;
  private draining: Promise<void> | undefined;

  constructor(
    private readonly client: BlobsClient,
    private readonly options: EngineBlobsOptions,
  ) {
    this.store = options.store ?? memoryBlobStore();
    this.backoffBaseMs = options.retry?.backoffBaseMs ?? 500;
    this.backoffMaxMs = options.retry?.backoffMaxMs ?? 30_000;
    this.loop = new SyncLoop(
      () => this.drain(),
      { idleMs: 60_000, backoffBaseMs: this.backoffBaseMs, backoffMaxMs: this.backoffMaxMs },
      // The waiting upload's status says why (`uploadOne`).
      () => undefined,
    );
    // Uploads queued before a reload are `uploading` from the start.
    this.ready = this.store.uploads().then((uploads) => {
      for (const upload of uploads) this.set(upload.key, { state: "uploading", local: true, error: upload.lastError });
    });
    const online = options.online === false ? undefined : (options.online ?? browserOnlineSignal());
    const offOnline = online?.subscribe((up) => {
      if (!up || this.closed) return;
      this.loop.wake(true);
      for (const key of this.watchers.keys()) this.retrySoon(key, 0);
    });
    if (offOnline) this.unsubscribe.push(offOnline);
    this.unsubscribe.push(client.onBuckets(() => void this.prune().catch(() => undefined)));
    if (options.background ?? true) void this.ready.then(() => this.loop.wake());
  }

  get failures(): readonly BlobFailure[] {
    return this.failed;
  }

  // --- Statuses --------------------------------------------------------------------------------

  status(key: string): BlobStatus {
    return this.statuses.get(key) ?? { key, state: "unknown", local: false, error: null };
  }

  private set(key: string, status: Omit<BlobStatus, "key">): void {
    const before = this.statuses.get(key);
    if (before && before.state === status.state && before.local === status.local && before.error === status.error) return;
    const now: BlobStatus = { key, ...status };
    this.statuses.set(key, now);
    for (const listener of this.watchers.get(key) ?? []) listener(now);
    for (const listener of this.listeners) listener(now);
  }

  watch(key: string, listener: (status: BlobStatus) => void): () => void {
    let watchers = this.watchers.get(key);
    if (!watchers) this.watchers.set(key, (watchers = new Set()));
    watchers.add(listener);
    listener(this.status(key));
    if (this.status(key).state === "unknown") void this.get(key).catch(() => undefined);
    return () => {
      watchers.delete(listener);
      if (watchers.size > 0) return;
      this.watchers.delete(key);
      const retrying = this.retrying.get(key);
      clearTimeout(retrying?.timer);
      this.retrying.delete(key);
    };
  }

  onStatus(listener: (status: BlobStatus) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  // --- Putting and uploading -------------------------------------------------------------------

  async put(input: BlobInput, options: { type?: string } = {}): Promise<string> {
    this.ensureOpen();
    const bytes = await blobBytes(input);
    const key = await keyForBlob(bytes);
    const maxSize = this.options.maxSize;
    if (maxSize !== undefined && bytes.byteLength > maxSize) {
      throw new BlobError(
        key,
        "payload_too_large",
        `the file is ${bytes.byteLength} bytes, more than the ${maxSize} bytes a blob may have`,
      );
    }
    const type = options.type ?? (typeof Blob !== "undefined" && input instanceof Blob ? input.type : "");
    await this.ready;
    const upload: QueuedUpload = { key, size: bytes.byteLength, queuedAt: Date.now(), attempts: 0, lastError: null };
    await this.store.put({ key, bytes, type }, upload);
    this.set(key, { state: "uploading", local: true, error: null });
    this.loop.wake();
    return key;
  }

  async queued(): Promise<QueuedUpload[]> {
    await this.ready;
    return this.store.uploads();
  }

  async upload(): Promise<void> {
    this.ensureOpen();
    await this.ready;
    await this.drain();
  }

  /** Upload the queue, oldest first, until it is empty or an upload must wait (thrown). One drain at a time. */
  private drain(): Promise<void> {
    this.draining ??= this.drainQueue().finally(() => (this.draining = undefined));
    return this.draining;
  }

  private async drainQueue(): Promise<void> {
    for (;;) {
      if (this.closed) return;
      const [next] = await this.store.uploads();
      if (!next) return;
      await this.uploadOne(next);
    }
  }

  private async uploadOne(upload: QueuedUpload): Promise<void> {
    const { key } = upload;
    const stored = await this.store.get(key);
    if (!stored) return this.refuse(upload, "gone", "the bytes are no longer on this device");
    this.set(key, { state: "uploading", local: true, error: upload.lastError });
    let from: "ticket" | "data" = "ticket";
    try {
      const ticket = await this.client.blobTicket("upload", { key, size: stored.bytes.byteLength });
      from = "data";
      await this.client.transferBlob(ticket, stored.bytes);
    } catch (err) {
      if (refusedForGood(err, from)) return this.refuse(upload, err.code, `the server refused the upload: ${err.message}`);
      const error = describe(err);
      await this.store.updateUpload({ ...upload, attempts: upload.attempts + 1, lastError: error });
      this.set(key, { state: "uploading", local: true, error });
      throw err;
    }
    await this.store.dequeue(key);
    this.set(key, { state: "available", local: true, error: null });
  }

  /** Take `upload` off the queue for good, and say why. */
  private async refuse(upload: QueuedUpload, code: string, error: string): Promise<void> {
    await this.store.dequeue(upload.key);
    this.failed.push({ key: upload.key, code, error });
    this.set(upload.key, { state: "failed", local: (await this.store.get(upload.key)) !== undefined, error });
  }

  // --- Getting ---------------------------------------------------------------------------------

  async get(key: string): Promise<Uint8Array> {
    this.ensureOpen();
    if (!isBlobKey(key)) throw new BlobError(key, "not_found", `\`${key}\` is not a blob key: \`sha256:\` and 64 lowercase hex digits`);
    await this.ready;
    const stored = await this.store.get(key);
    if (stored) {
      // Bytes here are `available`, unless this client's upload of them is queued or refused.
      const now = this.status(key);
      const state = now.state === "uploading" || now.state === "failed" ? now.state : "available";
      this.set(key, { state, local: true, error: state === "available" ? null : now.error });
      return stored.bytes;
    }
    let download = this.downloads.get(key);
    if (!download) {
      download = this.download(key).finally(() => this.downloads.delete(key));
      this.downloads.set(key, download);
    }
    return download;
  }

  async type(key: string): Promise<string> {
    return (await this.store.get(key))?.type ?? "";
  }

  private async download(key: string): Promise<Uint8Array> {
    this.set(key, { state: "downloading", local: false, error: null });
    let bytes: Uint8Array;
    try {
      const ticket = await this.client.blobTicket("download", { key });
      bytes = await this.client.transferBlob(ticket);
    } catch (err) {
      if (err instanceof ServerError && err.status === 404) {
        // Not 403, and the same before the upload as for a blob the actor may not read: the
        // rows here tell which.
        const named = this.namedKeys().has(key);
        const error = named
          ? "not on the server yet: its upload is under way"
          : "no row this user can read names it (or it was never uploaded)";
        this.set(key, { state: named ? "uploading" : "missing", local: false, error });
        this.retrySoon(key);
        throw new BlobError(key, "not_found", `blob ${key}: ${error}`);
      }
      this.set(key, { state: "downloading", local: false, error: describe(err) });
      this.retrySoon(key);
      throw err;
    }
    if ((await keyForBlob(bytes)) !== key) {
      const error = `the bytes downloaded for ${key} do not hash to it`;
      this.set(key, { state: "failed", local: false, error });
      throw new BlobError(key, "validation_failed", error);
    }
    await this.store.put({ key, bytes, type: "" });
    this.retrying.delete(key);
    this.set(key, { state: "available", local: true, error: null });
    return bytes;
  }

  /** Try `key` again after the backoff (or `ms`), if someone watches it. */
  private retrySoon(key: string, ms?: number): void {
    if (this.closed || !this.watchers.has(key)) return;
    const state = this.status(key).state;
    if (state === "available" || state === "failed" || (state === "uploading" && this.status(key).local)) return;
    let retrying = this.retrying.get(key);
    if (!retrying) this.retrying.set(key, (retrying = { backoff: new Backoff(this.backoffBaseMs, this.backoffMaxMs), timer: undefined }));
    clearTimeout(retrying.timer);
    retrying.timer = setTimeout(() => {
      retrying.timer = undefined;
      if (this.watchers.has(key)) void this.get(key).catch(() => undefined);
    }, ms ?? retrying.backoff.next());
  }

  /** The blob keys the client's rows name, in every blob column. */
  private namedKeys(): Set<string> {
    const keys = new Set<string>();
    for (const [table, schema] of Object.entries(this.client.schema.tables as AnySchema["tables"])) {
      const columns = schema.columns.filter((column) => column.blob).map((column) => column.name);
      if (columns.length === 0 || !schema.synced) continue;
      for (const row of this.client.rows(table as never) as Record<string, unknown>[]) {
        for (const column of columns) if (isBlobKey(row[column])) keys.add(row[column] as string);
      }
    }
    return keys;
  }

  async prune(): Promise<string[]> {
    await this.ready;
    // The keys before the queue: a blob put in between is not among the keys, one put before is
    // in the queue.
    const kept = await this.store.keys();
    const keep = this.namedKeys();
    for (const upload of await this.store.uploads()) keep.add(upload.key);
    const gone: string[] = [];
    for (const key of kept) {
      if (keep.has(key)) continue;
      await this.store.delete(key);
      gone.push(key);
      const now = this.statuses.get(key);
      if (now) this.set(key, { ...now, state: now.state === "failed" ? "failed" : "unknown", local: false });
      // A watched blob is asked for again: the server says whether the rows still give it.
      if (this.watchers.has(key)) void this.get(key).catch(() => undefined);
    }
    return gone;
  }

  // --- Closing ---------------------------------------------------------------------------------

  private ensureOpen(): void {
    if (this.closed) throw new BlobError("", "closed", "the blobs are closed");
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.loop.stop();
    for (const stop of this.unsubscribe) stop();
    for (const retrying of this.retrying.values()) clearTimeout(retrying.timer);
    this.retrying.clear();
    await Promise.allSettled([this.ready, this.draining, ...this.downloads.values()]);
    await this.store.close();
  }
}
