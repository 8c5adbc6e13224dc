/**
 * A store in memory. It outlives the client that wrote it, so a test can build a second client
 * over it as a page reload would; values are copied in and out, as a real store would.
 */

import type { ClientStore, StoredState, StoreWrite } from "./types.js";

/** A store kept in this process's memory, holding `initial` (a copy of it) to begin with. */
export function memoryStore(initial?: StoredState): ClientStore {
  let state: StoredState | undefined = initial === undefined ? undefined : structuredClone(initial);
  return {
    async load() {
      return state === undefined ? undefined : structuredClone(state);
    },
    async write(change: StoreWrite) {
      state = withWrite(state, structuredClone(change));
    },
    async clear() {
      state = undefined;
    },
    async close() {},
  };
}

/** `state` (changed in place, or a new state when `undefined`) with `change` applied, as a store would. */
export function withWrite(state: StoredState | undefined, change: StoreWrite): StoredState {
  if (change.meta === undefined && state === undefined) {
    throw new Error("the first write to a store carries its meta");
  }
  const rowId = (table: string, key: string) => JSON.stringify([table, key]);
  const next: StoredState = state ?? { meta: change.meta!, rows: [], buckets: [], outbox: [], quarantine: [] };
  if (change.meta) next.meta = change.meta;
  const rows = new Map(next.rows.map((r) => [rowId(r.table, r.key), r]));
  for (const [table, key] of change.deleteRows) rows.delete(rowId(table, key));
  for (const row of change.putRows) rows.set(rowId(row.table, row.key), row);
  next.rows = [...rows.values()];
  const buckets = new Map(next.buckets.map((b) => [b.bucket, b]));
  for (const bucket of change.deleteBuckets) buckets.delete(bucket);
  for (const bucket of change.putBuckets) buckets.set(bucket.bucket, bucket);
  next.buckets = [...buckets.values()];
  const outbox = new Map(next.outbox.map((e) => [e.clientMutationId, e]));
  for (const id of change.deleteOutbox) outbox.delete(id);
  for (const entry of change.putOutbox) outbox.set(entry.clientMutationId, entry);
  next.outbox = [...outbox.values()];
  const quarantine = new Map(next.quarantine.map((e) => [e.clientMutationId, e]));
  for (const id of change.deleteQuarantine) quarantine.delete(id);
  for (const entry of change.putQuarantine) quarantine.set(entry.clientMutationId, entry);
  next.quarantine = [...quarantine.values()];
  return next;
}
