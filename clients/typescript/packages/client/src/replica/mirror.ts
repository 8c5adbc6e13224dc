/**
 * Another tab's store writes applied to this tab's replica (`docs/design.md` §9, "One client
 * across tabs"). The leading tab writes the store and sends each write to the other tabs, and
 * they apply it here; nothing is written back, so nothing is marked dirty, and what the replica
 * knows of the store's outbox and quarantine (`counts.ts`) follows. `replaceWith` makes the
 * replica what the store holds, when a tab takes the lead or a new leader may have written what
 * no message said. Both note the view rows they change, so the app hears of them.
 *
 * Entries a tab queued and no leader has taken yet (`local`) stay after the outbox's other
 * entries, in the order they were made, whatever numbers they carry.
 */

import type { StoredState, StoreWrite } from "../store/types.js";
import { frozen } from "../view.js";
import { written } from "./counts.js";
import { rebase } from "./rebase.js";
import { byQuarantinedAt, sep, withDeclaredColumns, type ReplicaState } from "./state.js";

/** Apply `write`, which a leading tab made to the store; `rebased`: the leader rebased with it. */
export function applyWrite(state: ReplicaState, write: StoreWrite, rebased: boolean, local: ReadonlySet<string>): void {
  if (write.meta) {
    state.meta = { ...write.meta };
    if (write.meta.lastHlc) state.clock.observe(write.meta.lastHlc);
  }
  for (const [table, key] of write.deleteRows) {
    const rows = state.base.get(table);
    if (!rows?.has(key)) continue;
    state.noteView(table, key);
    rows.delete(key);
    state.refilling.delete(table + sep + key);
  }
  for (const stored of write.putRows) {
    if (!state.isLocal(stored.table)) continue;
    state.noteView(stored.table, stored.key);
    const row = withDeclaredColumns(state.tableSchema(stored.table), stored.row);
    const refill = new Set(stored.refill ?? []);
    state.tableRows(stored.table).set(stored.key, { row: frozen(row), buckets: new Set(stored.buckets), refill });
    if (refill.size > 0) state.refilling.add(stored.table + sep + stored.key);
    else state.refilling.delete(stored.table + sep + stored.key);
  }
  for (const bucket of write.deleteBuckets) state.held.delete(bucket);
  for (const bucket of write.putBuckets) state.held.set(bucket.bucket, bucket.leftAt);
  const outboxChanged = write.putOutbox.length + write.deleteOutbox.length > 0;
  if (outboxChanged) {
    const gone = new Set([...write.deleteOutbox, ...write.putOutbox.map((e) => e.clientMutationId)]);
    const kept = state.outbox.filter((e) => !gone.has(e.clientMutationId));
    const leaders = [...kept.filter((e) => !local.has(e.clientMutationId)), ...write.putOutbox.map((e) => ({ ...e }))];
    leaders.sort((a, b) => a.mutationId - b.mutationId);
    state.outbox = [...leaders, ...kept.filter((e) => local.has(e.clientMutationId))];
  }
  // Numbered past the leader's sequence, so that no pull's `syncedMutationId` hides them.
  let next = Math.max(state.meta.lastMutationId, ...state.outbox.filter((e) => !local.has(e.clientMutationId)).map((e) => e.mutationId));
  for (const entry of state.outbox) if (local.has(entry.clientMutationId)) entry.mutationId = ++next;
  if (write.putQuarantine.length + write.deleteQuarantine.length > 0) {
    const gone = new Set([...write.deleteQuarantine, ...write.putQuarantine.map((e) => e.clientMutationId)]);
    state.quarantine = [...state.quarantine.filter((e) => !gone.has(e.clientMutationId)), ...write.putQuarantine.map((e) => ({ ...e }))];
    state.quarantine.sort(byQuarantinedAt);
  }
  written(state, write);
  // The leader's overlay is what its rebases made it: rebase where it did, and where the
  // outbox changed under this tab's own overlay.
  if (rebased || outboxChanged || write.putQuarantine.length > 0) rebase(state);
}

/**
 * Make the replica hold what `stored` holds, keeping the outbox entries `local` names that
 * `stored` lacks: they wait for a leader.
 */
export function replaceWith(state: ReplicaState, stored: StoredState, local: ReadonlySet<string>): void {
  const rowId = (table: string, key: string) => table + sep + key;
  const storedRows = new Set(stored.rows.map((r) => rowId(r.table, r.key)));
  const deleteRows: [string, string][] = [];
  for (const [table, rows] of state.base) for (const key of rows.keys()) if (!storedRows.has(rowId(table, key))) deleteRows.push([table, key]);
  const storedBuckets = new Set(stored.buckets.map((b) => b.bucket));
  const storedOutbox = new Set(stored.outbox.map((e) => e.clientMutationId));
  const storedQuarantine = new Set(stored.quarantine.map((e) => e.clientMutationId));
  applyWrite(
    state,
    {
      meta: stored.meta,
      putRows: stored.rows,
      deleteRows,
      putBuckets: stored.buckets,
      deleteBuckets: [...state.held.keys()].filter((b) => !storedBuckets.has(b)),
      putOutbox: stored.outbox,
      deleteOutbox: state.outbox
        .map((e) => e.clientMutationId)
        .filter((id) => !storedOutbox.has(id) && !(local.has(id) && !storedQuarantine.has(id))),
      putQuarantine: stored.quarantine,
      deleteQuarantine: state.quarantine.map((e) => e.clientMutationId).filter((id) => !storedQuarantine.has(id)),
    },
    true,
    local,
  );
  state.storeHolds(stored);
}
