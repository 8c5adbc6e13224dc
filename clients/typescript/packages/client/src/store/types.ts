/**
 * What a client keeps durably, and the interface of a place that keeps it. A store is written
 * through: the client holds its state in memory and hands every change to the store as one
 * atomic write, so a mutation is durable when `mutate` returns and a pull page is all in or
 * not at all.
 */

import type { Problem, Row } from "../wire.js";

/** The version of the stored state's layout that this client writes. */
export const CLIENT_STORE_VERSION = 1;

/** What the client knows about itself and the server. */
export interface StoreMeta {
  /** The layout version of the stored state ({@link CLIENT_STORE_VERSION} when written). */
  version: number;
  clientId: string;
  /** The user whose data the store holds. */
  userId: string;
  /** The app schema the rows were pulled for; another one starts a pull from the beginning. */
  schemaFingerprint: string;
  /** The cursor of the last page applied. */
  cursor: string | null;
  /** The last mutation id taken (or the server's sequence, when that is further). */
  lastMutationId: number;
  /** The largest mutation id whose writes pulled data holds. */
  syncedMutationId: number;
  /** A pull from the beginning is under way: rows it does not deliver again go at its end. */
  sweeping: boolean;
  /** The clock's last reading, so readings stay ordered across restarts. */
  lastHlc: string | null;
}

/** A confirmed row (the server's), with the buckets it is in. */
export interface StoredRow {
  table: string;
  /** The key's text (`keyText`). */
  key: string;
  row: Row;
  buckets: string[];
  /**
   * Buckets the actor left and holds again that have not yet delivered this row again: when the
   * pull ends, the row leaves them. Absent when there are none.
   */
  refill?: string[];
}

/** A bucket the client has held: `leftAt` is when a pull said the actor lost it. */
export interface StoredBucket {
  bucket: string;
  leftAt: number | null;
}

/** A mutation in the outbox. */
export interface OutboxEntry {
  mutationId: number;
  clientMutationId: string;
  name: string;
  args: unknown;
  hlc: string;
  /** A push has acknowledged it (applied or duplicate); it waits for a pull to show it. */
  pushed: boolean;
  serverId?: string;
  /** The server reported that every write of it lost its merge: it is not replayed. */
  superseded?: boolean;
  createdAt: number;
}

/** A mutation the server rejected. */
export interface QuarantinedEntry {
  clientMutationId: string;
  mutationId: number;
  name: string;
  args: unknown;
  hlc: string;
  /** Why the server rejected it. */
  error: Problem;
  quarantinedAt: number;
}

/** Everything a store holds. */
export interface StoredState {
  meta: StoreMeta;
  rows: StoredRow[];
  buckets: StoredBucket[];
  outbox: OutboxEntry[];
  quarantine: QuarantinedEntry[];
}

/** One atomic change of a store. */
export interface StoreWrite {
  meta?: StoreMeta;
  putRows: StoredRow[];
  /** `[table, key]` pairs. */
  deleteRows: [string, string][];
  putBuckets: StoredBucket[];
  deleteBuckets: string[];
  putOutbox: OutboxEntry[];
  /** `clientMutationId`s. */
  deleteOutbox: string[];
  putQuarantine: QuarantinedEntry[];
  deleteQuarantine: string[];
}

/**
 * A place a client keeps its state: memory for tests, SQLite (`sqliteStore`) on the web's
 * origin-private file system and on phones, IndexedDB in browsers without it.
 */
export interface ClientStore {
  /**
   * The name every tab of the origin opens this store by, where other tabs can open it: the tabs
   * of one user then share one client (`TabsOptions`). Absent for a store of this tab alone.
   */
  readonly sharedName?: string;
  /** What the store holds, as it was written (`undefined` when it holds nothing yet). */
  load(): Promise<StoredState | undefined>;
  /** Apply `change` atomically: all of it or nothing. */
  write(change: StoreWrite): Promise<void>;
  /** Let go of the store's resources. */
  close(): Promise<void>;
  /** Remove everything the store holds (`migrateClientStore` empties the store it moved). */
  clear?(): Promise<void>;
}

/** Whether `change` changes nothing. */
export function isEmptyWrite(change: StoreWrite): boolean {
  return (
    change.meta === undefined &&
    change.putRows.length === 0 &&
    change.deleteRows.length === 0 &&
    change.putBuckets.length === 0 &&
    change.deleteBuckets.length === 0 &&
    change.putOutbox.length === 0 &&
    change.deleteOutbox.length === 0 &&
    change.putQuarantine.length === 0 &&
    change.deleteQuarantine.length === 0
  );
}
