/**
 * What the replica changed since it was last asked, in two forms. `flush` gives the store one
 * write with every changed row, bucket, outbox and quarantine entry and the meta. `takeViewChanges`
 * gives the app the live view rows that were inserted, updated or deleted. The client calls both
 * after each operation: it writes the one and announces the other. A write the store failed is
 * handed back (`unwritten`): what it held goes again with the next flush, as it is by then.
 */

import type { StoredRow, StoreWrite } from "../store/types.js";
import { sameValue } from "../view.js";
import type { Row } from "../wire.js";
import { sep, type ReplicaState } from "./state.js";

/** A change of a live row of the view, as the app sees it. */
export interface RowChange {
  table: string;
  /** The key's text (the JSON of the key columns' values, in key order). */
  key: string;
  type: "insert" | "update" | "delete";
  /** The row now (absent for a delete). */
  row?: Row;
  /** The row before (absent for an insert). */
  previous?: Row;
}

/** The changes of the view since the last call. */
export function takeViewChanges(state: ReplicaState): RowChange[] {
  const changes: RowChange[] = [];
  for (const [id, previous] of state.viewBefore) {
    const [table, key] = id.split(sep) as [string, string];
    const row = state.viewRow(table, key);
    if (previous === undefined && row !== undefined) changes.push({ table, key, type: "insert", row });
    else if (previous !== undefined && row === undefined) changes.push({ table, key, type: "delete", previous });
    else if (previous !== undefined && row !== undefined && !sameValue(previous, row)) {
      changes.push({ table, key, type: "update", row, previous });
    }
  }
  state.viewBefore.clear();
  return changes;
}

/** Whether something changed since the last flush. */
export function unflushed(state: ReplicaState): boolean {
  return (
    state.dirtyMeta ||
    state.dirtyRows.size + state.dirtyBuckets.size + state.dirtyOutbox.size + state.dirtyQuarantine.size > 0
  );
}

/** Everything changed since the last flush, as one store write. */
export function flush(state: ReplicaState): StoreWrite {
  const change: StoreWrite = {
    putRows: [],
    deleteRows: [],
    putBuckets: [],
    deleteBuckets: [],
    putOutbox: [],
    deleteOutbox: [],
    putQuarantine: [],
    deleteQuarantine: [],
  };
  if (state.dirtyMeta) change.meta = { ...state.meta };
  for (const id of state.dirtyRows) {
    const [table, key] = id.split(sep) as [string, string];
    const base = state.base.get(table)?.get(key);
    if (base) {
      const stored: StoredRow = { table, key, row: base.row, buckets: [...base.buckets].sort() };
      if (base.refill.size > 0) stored.refill = [...base.refill].sort();
      change.putRows.push(stored);
    }
    else change.deleteRows.push([table, key]);
  }
  for (const bucket of state.dirtyBuckets) {
    const leftAt = state.held.get(bucket);
    if (leftAt === undefined) change.deleteBuckets.push(bucket);
    else change.putBuckets.push({ bucket, leftAt });
  }
  for (const id of state.dirtyOutbox) {
    const entry = state.outbox.find((e) => e.clientMutationId === id);
    if (entry) change.putOutbox.push({ ...entry });
    else change.deleteOutbox.push(id);
  }
  for (const id of state.dirtyQuarantine) {
    const entry = state.quarantine.find((e) => e.clientMutationId === id);
    if (entry) change.putQuarantine.push({ ...entry });
    else change.deleteQuarantine.push(id);
  }
  state.dirtyMeta = false;
  state.dirtyRows.clear();
  state.dirtyBuckets.clear();
  state.dirtyOutbox.clear();
  state.dirtyQuarantine.clear();
  return change;
}

/** `change` did not reach the store: everything it held is flushed again, as it is then. */
export function unwritten(state: ReplicaState, change: StoreWrite): void {
  if (change.meta !== undefined) state.dirtyMeta = true;
  for (const { table, key } of change.putRows) state.dirtyRows.add(table + sep + key);
  for (const [table, key] of change.deleteRows) state.dirtyRows.add(table + sep + key);
  for (const { bucket } of change.putBuckets) state.dirtyBuckets.add(bucket);
  for (const bucket of change.deleteBuckets) state.dirtyBuckets.add(bucket);
  for (const { clientMutationId } of change.putOutbox) state.dirtyOutbox.add(clientMutationId);
  for (const id of change.deleteOutbox) state.dirtyOutbox.add(id);
  for (const { clientMutationId } of change.putQuarantine) state.dirtyQuarantine.add(clientMutationId);
  for (const id of change.deleteQuarantine) state.dirtyQuarantine.add(id);
}
