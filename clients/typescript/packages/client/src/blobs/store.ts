/**
 * Where a client keeps blobs: the bytes it put or downloaded (a cache), and the queue of the
 * uploads it owes the server. The queue is durable with the bytes, so an upload queued offline
 * survives a reload and goes when the client is online again; a bytes-and-queue write is
 * atomic, so the queue never names bytes that are not there.
 *
 * A blob store holds one user's blobs, as a `ClientStore` holds one user's rows: the queued
 * uploads count against that user's quota. `memoryBlobStore` outlives the `EngineBlobs` that
 * used it, so a test can open a second one over it as a reload would; `indexedDbBlobStore`
 * (`indexeddb.ts`) is the browser's.
 */

/** Bytes kept on this device. */
export interface StoredBlob {
  key: string;
  bytes: Uint8Array;
  /** The media type the bytes were put with (`image/png`), `""` when unknown. */
  type: string;
}

/** An upload the server is owed. */
export interface QueuedUpload {
  key: string;
  size: number;
  /** When it was queued (Unix milliseconds): the queue goes oldest first. */
  queuedAt: number;
  /** Attempts that failed so far (the network, or the server for now). */
  attempts: number;
  /** The last failure, in words, `null` before any. */
  lastError: string | null;
}

/** A place that keeps blobs and the upload queue. */
export interface BlobStore {
  /** The bytes of `key`, when kept. */
  get(key: string): Promise<StoredBlob | undefined>;
  /** Keep `blob`; with `upload`, queue its upload in the same write. */
  put(blob: StoredBlob, upload?: QueuedUpload): Promise<void>;
  /** Forget the bytes of `key` (not its queued upload). */
  delete(key: string): Promise<void>;
  /** The keys of the bytes kept. */
  keys(): Promise<string[]>;
  /** The queued uploads, oldest first. */
  uploads(): Promise<QueuedUpload[]>;
  /** Change a queued upload (its attempts); nothing when it is no longer queued. */
  updateUpload(upload: QueuedUpload): Promise<void>;
  /** Take `key`'s upload off the queue (it is done, or refused for good). */
  dequeue(key: string): Promise<void>;
  close(): Promise<void>;
}

/** The queue in the order it goes: oldest first, then by key. */
export function queueOrder(uploads: QueuedUpload[]): QueuedUpload[] {
  return uploads.sort((a, b) => a.queuedAt - b.queuedAt || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

const copyBlob = (blob: StoredBlob): StoredBlob => ({ key: blob.key, bytes: blob.bytes.slice(), type: blob.type });

/**
 * A blob store in this process's memory. It outlives the `EngineBlobs` that used it; bytes are
 * copied in and out, as a real store would.
 */
export function memoryBlobStore(): BlobStore {
  const blobs = new Map<string, StoredBlob>();
  const queue = new Map<string, QueuedUpload>();
  return {
    async get(key) {
      const blob = blobs.get(key);
      return blob && copyBlob(blob);
    },
    async put(blob, upload) {
      blobs.set(blob.key, copyBlob(blob));
      if (upload) queue.set(upload.key, { ...upload });
    },
    async delete(key) {
      blobs.delete(key);
    },
    async keys() {
      return [...blobs.keys()];
    },
    async uploads() {
      return queueOrder([...queue.values()].map((upload) => ({ ...upload })));
    },
    async updateUpload(upload) {
      if (queue.has(upload.key)) queue.set(upload.key, { ...upload });
    },
    async dequeue(key) {
      queue.delete(key);
    },
    async close() {},
  };
}
