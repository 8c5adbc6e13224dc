/**
 * A store in IndexedDB, for browsers: the outbox, the quarantine and the confirmed rows survive
 * a reload. One object store per kind of record; every write is one IndexedDB transaction over
 * all of them, so it is atomic.
 */

import { openDB, type DBSchema, type IDBPDatabase } from "idb";

import type { ClientStore, OutboxEntry, QuarantinedEntry, StoredBucket, StoredRow, StoredState, StoreMeta, StoreWrite } from "./types.js";

/** The object stores of the database, and how they are keyed. */
interface Layout extends DBSchema {
  meta: { key: string; value: StoreMeta };
  rows: { key: [string, string]; value: StoredRow };
  buckets: { key: string; value: StoredBucket };
  outbox: { key: string; value: OutboxEntry };
  quarantine: { key: string; value: QuarantinedEntry };
}

/** The IndexedDB version of the object stores' layout (the records' own is in their meta). */
const DATABASE_VERSION = 1;
const META_KEY = "meta";
const ALL = ["meta", "rows", "buckets", "outbox", "quarantine"] as const;

/**
 * A store in the IndexedDB database `name`. Use one name per user and app: the client refuses
 * a store that holds another user's data. The page's `indexedDB` is used.
 */
export function indexedDbStore(name: string): ClientStore {
  let database: Promise<IDBPDatabase<Layout>> | undefined;
  const open = () => {
    database ??= openDB<Layout>(name, DATABASE_VERSION, {
        upgrade(db, oldVersion) {
          if (oldVersion < 1) {
            db.createObjectStore("meta");
            db.createObjectStore("rows", { keyPath: ["table", "key"] });
            db.createObjectStore("buckets", { keyPath: "bucket" });
            db.createObjectStore("outbox", { keyPath: "clientMutationId" });
            db.createObjectStore("quarantine", { keyPath: "clientMutationId" });
          }
        },
      });
    return database;
  };
  return {
    sharedName: `indexeddb ${name}`,
    async load(): Promise<StoredState | undefined> {
      const db = await open();
      const tx = db.transaction(ALL, "readonly");
      const [meta, rows, buckets, outbox, quarantine] = await Promise.all([
        tx.objectStore("meta").get(META_KEY),
        tx.objectStore("rows").getAll(),
        tx.objectStore("buckets").getAll(),
        tx.objectStore("outbox").getAll(),
        tx.objectStore("quarantine").getAll(),
      ]);
      await tx.done;
      if (meta === undefined) return undefined;
      return { meta, rows, buckets, outbox, quarantine };
    },
    async write(change: StoreWrite): Promise<void> {
      const db = await open();
      const tx = db.transaction(ALL, "readwrite");
      const rows = tx.objectStore("rows");
      const buckets = tx.objectStore("buckets");
      const outbox = tx.objectStore("outbox");
      const quarantine = tx.objectStore("quarantine");
      // Requests are queued synchronously: the transaction stays active until they finish.
      const requests: Promise<unknown>[] = [];
      if (change.meta) requests.push(tx.objectStore("meta").put(change.meta, META_KEY));
      for (const [table, key] of change.deleteRows) requests.push(rows.delete([table, key]));
      for (const row of change.putRows) requests.push(rows.put(row));
      for (const bucket of change.deleteBuckets) requests.push(buckets.delete(bucket));
      for (const bucket of change.putBuckets) requests.push(buckets.put(bucket));
      for (const id of change.deleteOutbox) requests.push(outbox.delete(id));
      for (const entry of change.putOutbox) requests.push(outbox.put(entry));
      for (const id of change.deleteQuarantine) requests.push(quarantine.delete(id));
      for (const entry of change.putQuarantine) requests.push(quarantine.put(entry));
      await Promise.all([...requests, tx.done]);
    },
    async clear(): Promise<void> {
      const db = await open();
      const tx = db.transaction(ALL, "readwrite");
      await Promise.all([...ALL.map((store) => tx.objectStore(store).clear()), tx.done]);
    },
    async close(): Promise<void> {
      if (database) (await database).close();
      database = undefined;
    },
  };
}
