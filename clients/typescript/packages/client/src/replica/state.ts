/**
 * The replica's state and the small steps every flow takes on it. `ReplicaState` holds the
 * confirmed base (the server's rows, each with the buckets it is in), the buckets held and lost,
 * the outbox, the quarantine and the overlay of the optimistic view. Each step records what it
 * changed twice: in the `dirty*` sets, which `flush` turns into a store write, and in
 * `viewBefore`, which `takeViewChanges` turns into the app's row changes.
 *
 * The flows (`rebase.ts`, `outbox.ts`, `pull.ts`, `changes.ts`) read and write this state, and it
 * imports none of them. So the constructor leaves the overlay empty, and `Replica` rebuilds it.
 */

import { HlcClock } from "../hlc.js";
import { newUuid } from "../ids.js";
import type { AnySchema, TableSchema } from "../schema.js";
import type { OutboxEntry, QuarantinedEntry, StoredState, StoreMeta } from "../store/types.js";
import { CLIENT_STORE_VERSION } from "../store/types.js";
import { frozen, Layer, isSoftDeleted, type Actor, type OptimisticMutator, type RowSource } from "../view.js";
import type { Row } from "../wire.js";

/** A confirmed row, the buckets holding it, and those of them waiting to deliver it again. */
export interface BaseRow {
  row: Row;
  buckets: Set<string>;
  refill: Set<string>;
}

/** The quarantine's order: by when each entry went there, then by mutation. */
export function byQuarantinedAt(a: QuarantinedEntry, b: QuarantinedEntry): number {
  return a.quarantinedAt - b.quarantinedAt || a.mutationId - b.mutationId;
}

/** Joins a table's name and a key text into one id (`table␀key`). */
export const sep = "\u0000";

/** A fingerprint of what the stored rows depend on in the schema. */
export function schemaFingerprint(schema: AnySchema): string {
  const tables = Object.keys(schema.tables)
    .sort()
    .map((name) => [name, schema.tables[name]]);
  return JSON.stringify([schema.version, tables]);
}

/**
 * `row` with every nullable column the schema declares and the row lacks set to `null`: a row
 * stored, or served, before the app added the column. Columns the schema does not declare (a
 * newer server's) are kept and ignored.
 */
export function withDeclaredColumns(table: TableSchema, row: Row): Row {
  const missing = table.columns.filter((column) => column.nullable && !(column.name in row));
  if (missing.length === 0) return row;
  const filled: Row = { ...row };
  for (const column of missing) filled[column.name] = null;
  return filled;
}

export class ReplicaState implements RowSource {
  meta: StoreMeta;
  readonly base = new Map<string, Map<string, BaseRow>>();
  readonly held = new Map<string, number | null>();
  outbox: OutboxEntry[] = [];
  quarantine: QuarantinedEntry[] = [];
  /** The outbox's `clientMutationId`s as the store holds them (`counts.ts`). */
  storedOutbox = new Set<string>();
  /** The quarantine as the store holds it, by `clientMutationId` (`counts.ts`). */
  storedQuarantine = new Map<string, QuarantinedEntry>();
  overlay: Layer;
  optimistic: Record<string, OptimisticMutator<never, never>> = {};
  readonly clock: HlcClock;

  dirtyRows = new Set<string>();
  dirtyBuckets = new Set<string>();
  dirtyOutbox = new Set<string>();
  dirtyQuarantine = new Set<string>();
  dirtyMeta = false;
  /** Rows waiting for a bucket's fill to deliver them again, by `table␀key`. */
  refilling = new Set<string>();
  /** Live view rows as they were before the current operation, by `table␀key`. */
  viewBefore = new Map<string, Row | undefined>();
  /** Rebases made so far (`rebase.ts`). */
  rebases = 0;

  constructor(
    readonly schema: AnySchema,
    readonly actor: Actor,
    stored: StoredState | undefined,
  ) {
    const fingerprint = schemaFingerprint(schema);
    if (stored && stored.meta.userId !== actor.userId) {
      throw new StoreMismatchError(stored.meta.userId, actor.userId);
    }
    this.meta = stored?.meta ?? {
      version: CLIENT_STORE_VERSION,
      clientId: newUuid(),
      userId: actor.userId,
      schemaFingerprint: fingerprint,
      cursor: null,
      lastMutationId: 0,
      syncedMutationId: 0,
      sweeping: false,
      lastHlc: null,
    };
    this.dirtyMeta = stored === undefined;
    for (const storedRow of stored?.rows ?? []) {
      if (!this.isLocal(storedRow.table)) continue;
      const row = withDeclaredColumns(this.tableSchema(storedRow.table), storedRow.row);
      const refill = new Set(storedRow.refill ?? []);
      this.tableRows(storedRow.table).set(storedRow.key, { row: frozen(row), buckets: new Set(storedRow.buckets), refill });
      if (refill.size > 0) this.refilling.add(storedRow.table + sep + storedRow.key);
    }
    for (const bucket of stored?.buckets ?? []) this.held.set(bucket.bucket, bucket.leftAt);
    this.outbox = [...(stored?.outbox ?? [])].sort((a, b) => a.mutationId - b.mutationId);
    this.quarantine = [...(stored?.quarantine ?? [])].sort(byQuarantinedAt);
    if (stored) this.storeHolds(stored);
    this.clock = new HlcClock(this.meta.clientId);
    if (this.meta.lastHlc) this.clock.observe(this.meta.lastHlc);
    if (this.meta.schemaFingerprint !== fingerprint) {
      // Rows were pulled for another schema: pull everything again, keeping the old rows
      // visible until the new ones are in.
      this.meta = { ...this.meta, schemaFingerprint: fingerprint, cursor: null, sweeping: true };
      this.dirtyMeta = true;
      for (const [table, rows] of this.base) {
        for (const [key, base] of rows) {
          base.buckets.clear();
          base.refill.clear();
          this.dirtyRows.add(table + sep + key);
        }
      }
      this.refilling.clear();
    }
    this.overlay = new Layer(this);
  }

  get clientId(): string {
    return this.meta.clientId;
  }

  isLocal(table: string): boolean {
    return this.schema.tables[table]?.synced === true;
  }

  tableSchema(table: string): TableSchema {
    return this.schema.tables[table]!;
  }

  tableRows(table: string): Map<string, BaseRow> {
    let rows = this.base.get(table);
    if (!rows) this.base.set(table, (rows = new Map()));
    return rows;
  }

  // RowSource over the confirmed base.
  get(table: string, key: string): Row | undefined {
    return this.base.get(table)?.get(key)?.row;
  }

  keys(table: string): Iterable<string> {
    return this.base.get(table)?.keys() ?? [];
  }

  // --- Reads -------------------------------------------------------------------------------

  /** The live row of the view, or `undefined`. */
  viewRow(table: string, key: string): Row | undefined {
    const row = this.overlay.get(table, key);
    return row && !isSoftDeleted(this.tableSchema(table), row) ? row : undefined;
  }

  /** The buckets holding the confirmed row of `table` with key text `key` (none for a row only
   * pending writes made). */
  rowBuckets(table: string, key: string): readonly string[] {
    return [...(this.base.get(table)?.get(key)?.buckets ?? [])].sort();
  }

  /** Whether a pending mutation's optimistic run wrote the row of `table` with key text `key`. */
  pendingOn(table: string, key: string): boolean {
    return this.overlay.wrote(table, key);
  }

  /** Every live row of `table` in the view, by key text. */
  *viewRows(table: string): Iterable<[string, Row]> {
    const seen = new Set<string>();
    for (const key of this.overlay.keys(table)) {
      if (seen.has(key)) continue;
      seen.add(key);
      const row = this.viewRow(table, key);
      if (row) yield [key, row];
    }
  }

  /** The buckets the replica holds (not those the actor lost), in key order. */
  heldBuckets(): string[] {
    return [...this.held].filter(([, leftAt]) => leftAt === null).map(([bucket]) => bucket).sort();
  }

  /** Mutations a pull has not yet shown. */
  get pendingCount(): number {
    return this.outbox.length;
  }

  get quarantined(): readonly QuarantinedEntry[] {
    return this.quarantine;
  }

  // --- Recorded changes --------------------------------------------------------------------

  /** Note the live view row of `key` before it may change. */
  noteView(table: string, key: string): void {
    const id = table + sep + key;
    if (!this.viewBefore.has(id)) this.viewBefore.set(id, this.viewRow(table, key));
  }

  /** The store holds `stored`'s outbox and quarantine: read at the start, or when a tab takes the lead. */
  storeHolds(stored: StoredState): void {
    this.storedOutbox = new Set(stored.outbox.map((e) => e.clientMutationId));
    this.storedQuarantine = new Map(stored.quarantine.map((e) => [e.clientMutationId, e]));
  }

  setMeta(change: Partial<StoreMeta>): void {
    this.meta = { ...this.meta, ...change };
    this.dirtyMeta = true;
  }

  removeOutbox(predicate: (entry: OutboxEntry) => boolean): number {
    const before = this.outbox.length;
    this.outbox = this.outbox.filter((entry) => {
      if (!predicate(entry)) return true;
      this.dirtyOutbox.add(entry.clientMutationId);
      return false;
    });
    return before - this.outbox.length;
  }

  setBucket(bucket: string, leftAt: number | null): void {
    if (this.held.get(bucket) === leftAt && this.held.has(bucket)) return;
    this.held.set(bucket, leftAt);
    this.dirtyBuckets.add(bucket);
  }

  deleteBucket(bucket: string): void {
    if (this.held.delete(bucket)) this.dirtyBuckets.add(bucket);
  }

  touchBase(table: string, key: string): void {
    this.noteView(table, key);
    this.dirtyRows.add(table + sep + key);
  }

  /** Drop a base row no bucket holds any more. */
  dropIfOrphaned(table: string, key: string): void {
    const rows = this.base.get(table);
    const base = rows?.get(key);
    if (!base || base.buckets.size > 0) return;
    this.touchBase(table, key);
    rows!.delete(key);
  }
}

/** The store holds another user's data. */
export class StoreMismatchError extends Error {
  constructor(
    readonly storedUser: string,
    readonly user: string,
  ) {
    super(`the store holds the data of user \`${storedUser}\`, not of \`${user}\``);
    this.name = "StoreMismatchError";
  }
}
