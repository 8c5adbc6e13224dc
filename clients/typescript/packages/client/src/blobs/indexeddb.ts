/**
 * A blob store in IndexedDB, for browsers: the bytes a user put or downloaded, and the uploads
 * queued offline, survive a reload. Bytes and queue are two object stores of one database, and
 * a put that queues an upload is one transaction over both.
 */

import { openDB, type DBSchema, type IDBPDatabase } from "idb";

import { queueOrder, type BlobStore, type QueuedUpload, type StoredBlob } from "./store.js";

interface Layout extends DBSchema {
  blobs: { key: string; value: StoredBlob };
  uploads: { key: string; value: QueuedUpload };
}

const DATABASE_VERSION = 1;

/**
 * A blob store in the IndexedDB database `name` (the page's `indexedDB`). Use one name per user
 * and app, as for `indexedDbStore`, and not the same name as the rows' store.
 */
export function indexedDbBlobStore(name: string): BlobStore {
  let database: Promise<IDBPDatabase<Layout>> | undefined;
  const open = () => {
    database ??= openDB<Layout>(name, DATABASE_VERSION, {
      upgrade(db, oldVersion) {
        if (oldVersion < 1) {
          db.createObjectStore("blobs", { keyPath: "key" });
          db.createObjectStore("uploads", { keyPath: "key" });
        }
      },
    });
    return database;
  };
  return {
    async get(key) {
      return (await open()).get("blobs", key);
    },
    async put(blob, upload) {
      const db = await open();
      const tx = db.transaction(["blobs", "uploads"], "readwrite");
      // Requests are queued synchronously: the transaction stays active until they finish.
      const requests: Promise<unknown>[] = [tx.objectStore("blobs").put(blob)];
      if (upload) requests.push(tx.objectStore("uploads").put(upload));
      await Promise.all([...requests, tx.done]);
    },
    async delete(key) {
      await (await open()).delete("blobs", key);
    },
    async keys() {
      return (await open()).getAllKeys("blobs");
    },
    async uploads() {
      return queueOrder(await (await open()).getAll("uploads"));
    },
    async updateUpload(upload) {
      const db = await open();
      const tx = db.transaction("uploads", "readwrite");
      if ((await tx.store.getKey(upload.key)) !== undefined) await tx.store.put(upload);
      await tx.done;
    },
    async dequeue(key) {
      await (await open()).delete("uploads", key);
    },
    async close() {
      if (database) (await database).close();
      database = undefined;
    },
  };
}
