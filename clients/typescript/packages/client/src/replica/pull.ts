/**
 * A pull page applied to the replica, as `docs/protocol.md#pull-response` says. A row stays while
 * a bucket still held contains it. Tombstones take rows out of the buckets they name. Rows of
 * buckets the actor lost go after the bucket TTL, except rows pending mutations wrote. A bucket
 * lost and held again is filled anew, and its rows the fill does not bring again go when the pull
 * ends: the server sends the rows it holds now, not the deletes missed meanwhile. A `reset`
 * starts a mark and sweep that ends with the last page. Only the last page of a pull confirms
 * mutations and rebases the view: earlier pages may report a mutation synced whose rows come later.
 */

import { keyText } from "../schema.js";
import { frozen } from "../view.js";
import type { PullResponse } from "../wire.js";
import { rebase } from "./rebase.js";
import { sep, withDeclaredColumns, type ReplicaState } from "./state.js";

/** What applying a pull page did. */
export interface PageApplied {
  /** Outbox entries the page confirmed. */
  confirmed: number;
  /** Acknowledged entries the server no longer has: they go again. */
  requeued: number;
}

/** Apply one pull page. */
export function applyPage(state: ReplicaState, page: PullResponse, now: number, bucketTtlMs: number): PageApplied {
  if (page.serverHlc !== undefined) state.clock.observe(page.serverHlc);
  if (page.reset) {
    // Every row must be delivered again to stay.
    for (const [table, rows] of state.base) {
      for (const [key, base] of rows) {
        if (base.buckets.size === 0 && base.refill.size === 0) continue;
        base.buckets.clear();
        base.refill.clear();
        state.dirtyRows.add(table + sep + key);
      }
    }
    state.refilling.clear();
    state.setMeta({ sweeping: true });
  }
  const sweeping = state.meta.sweeping;

  for (const bucket of page.removedBuckets) state.setBucket(bucket, state.held.get(bucket) ?? now);

  for (const tombstone of page.tombstones) {
    if (!state.isLocal(tombstone.table)) continue;
    const key = keyText(state.tableSchema(tombstone.table), tombstone.key);
    const base = state.base.get(tombstone.table)?.get(key);
    if (!base) continue;
    for (const bucket of tombstone.buckets) base.buckets.delete(bucket);
    state.dirtyRows.add(tombstone.table + sep + key);
    state.dropIfOrphaned(tombstone.table, key);
  }

  if (!sweeping) beginRefills(state, page);
  for (const change of page.changes) {
    if (!state.isLocal(change.table)) continue;
    const table = state.tableSchema(change.table);
    const key = keyText(table, change.row);
    state.touchBase(change.table, key);
    const rows = state.tableRows(change.table);
    const base = rows.get(key);
    const row = withDeclaredColumns(table, change.row);
    if (base) {
      base.row = frozen(row);
      for (const bucket of change.buckets) {
        base.buckets.add(bucket);
        base.refill.delete(bucket);
      }
    } else {
      rows.set(key, { row: frozen(row), buckets: new Set(change.buckets), refill: new Set() });
    }
    for (const bucket of change.buckets) state.setBucket(bucket, null);
  }

  if (!page.hasMore) endRefills(state);
  if (sweeping && !page.hasMore) {
    for (const [table, rows] of state.base) for (const key of [...rows.keys()]) state.dropIfOrphaned(table, key);
    // Buckets no page brought again are held no more.
    const used = usedBuckets(state);
    for (const bucket of [...state.held.keys()]) if (!used.has(bucket)) state.deleteBucket(bucket);
    state.setMeta({ sweeping: false });
  }
  if (!sweeping) evict(state, now - bucketTtlMs);

  const applied: PageApplied = { confirmed: 0, requeued: 0 };
  if (!page.hasMore) {
    const synced = Math.max(page.syncedMutationId ?? page.lastMutationId, state.meta.syncedMutationId);
    state.setMeta({ syncedMutationId: synced });
    applied.confirmed = state.removeOutbox((e) => e.pushed && e.mutationId <= synced);
    if (state.meta.lastMutationId < page.lastMutationId) state.setMeta({ lastMutationId: page.lastMutationId });
    // Acknowledged beyond the server's sequence: the server lost them, they go again.
    for (const entry of state.outbox) {
      if (entry.pushed && entry.mutationId > page.lastMutationId) {
        entry.pushed = false;
        state.dirtyOutbox.add(entry.clientMutationId);
        applied.requeued += 1;
      }
    }
    rebase(state);
  }
  state.setMeta({ cursor: page.cursor });
  return applied;
}

/** Rows of the buckets of `page` the actor had lost wait for the fill to deliver them again. */
function beginRefills(state: ReplicaState, page: PullResponse): void {
  const lost = new Set<string>();
  for (const change of page.changes) {
    for (const bucket of change.buckets) if (state.held.get(bucket) != null) lost.add(bucket);
  }
  if (lost.size === 0) return;
  for (const [table, rows] of state.base) {
    for (const [key, base] of rows) {
      for (const bucket of base.buckets) {
        if (!lost.has(bucket)) continue;
        base.refill.add(bucket);
        state.refilling.add(table + sep + key);
        state.dirtyRows.add(table + sep + key);
      }
    }
  }
}

/** The pull is complete: rows leave the buckets that did not deliver them again. */
function endRefills(state: ReplicaState): void {
  for (const id of state.refilling) {
    const [table, key] = id.split(sep) as [string, string];
    const base = state.base.get(table)?.get(key);
    if (!base) continue;
    for (const bucket of base.refill) base.buckets.delete(bucket);
    base.refill.clear();
    state.dirtyRows.add(id);
    state.dropIfOrphaned(table, key);
  }
  state.refilling.clear();
}

function usedBuckets(state: ReplicaState): Set<string> {
  const used = new Set<string>();
  for (const rows of state.base.values()) for (const base of rows.values()) for (const b of base.buckets) used.add(b);
  return used;
}

/**
 * Forget buckets the actor left before `leftBefore` (ms): their rows go unless another bucket
 * still holds them or a pending mutation wrote them.
 */
function evict(state: ReplicaState, leftBefore: number): void {
  const expired = new Set([...state.held].filter(([, leftAt]) => leftAt !== null && leftAt <= leftBefore).map(([b]) => b));
  if (expired.size === 0) return;
  for (const [table, rows] of state.base) {
    for (const [key, base] of [...rows]) {
      if (state.overlay.wrote(table, key)) continue;
      if (![...base.buckets].some((b) => expired.has(b))) continue;
      for (const bucket of expired) base.buckets.delete(bucket);
      state.dirtyRows.add(table + sep + key);
      state.dropIfOrphaned(table, key);
    }
  }
  const used = usedBuckets(state);
  for (const bucket of expired) if (!used.has(bucket)) state.deleteBucket(bucket);
}
