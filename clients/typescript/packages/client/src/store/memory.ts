/**
 * A store in memory. It outlives the client that wrote it, so a test can build a second client
 * over it as a page reload would; values are copied in and out, as a real store would.
 */

import type { ClientStore, StoredState, StoreWrite } from "./types.js";

/** A store kept in this process's memory, holding `initial` (a copy of it) to begin with. */
export function memoryStore(initial?: StoredState): ClientStore {
  let state: StoredState | undefined = initial === undefined ? undefined : structuredClone(initial);
  const rowId = (table: string, key: string) => JSON.stringify([table, key]);
  return {
    async load() {
      return state === undefined ? undefined : structuredClone(state);
    },
    async write(change: StoreWrite) {
      const copy = structuredClone(change);
      if (copy.meta === undefined && state === undefined) {
        throw new Error("the first write to a store carries its meta");
      }
      const next: StoredState = state ?? {
        meta: copy.meta!,
        rows: [],
        buckets: [],
        outbox: [],
        quarantine: [],
      };
      if (copy.meta) next.meta = copy.meta;
      const rows = new Map(next.rows.map((r) => [rowId(r.table, r.key), r]));
      for (const [table, key] of copy.deleteRows) rows.delete(rowId(table, key));
      for (const row of copy.putRows) rows.set(rowId(row.table, row.key), row);
      next.rows = [...rows.values()];
      const buckets = new Map(next.buckets.map((b) => [b.bucket, b]));
      for (const bucket of copy.deleteBuckets) buckets.delete(bucket);
      for (const bucket of copy.putBuckets) buckets.set(bucket.bucket, bucket);
      next.buckets = [...buckets.values()];
      const outbox = new Map(next.outbox.map((e) => [e.clientMutationId, e]));
      for (const id of copy.deleteOutbox) outbox.delete(id);
      for (const entry of copy.putOutbox) outbox.set(entry.clientMutationId, entry);
      next.outbox = [...outbox.values()];
      const quarantine = new Map(next.quarantine.map((e) => [e.clientMutationId, e]));
      for (const id of copy.deleteQuarantine) quarantine.delete(id);
      for (const entry of copy.putQuarantine) quarantine.set(entry.clientMutationId, entry);
      next.quarantine = [...quarantine.values()];
      state = next;
    },
    async clear() {
      state = undefined;
    },
    async close() {},
  };
}
