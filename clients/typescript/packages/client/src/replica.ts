/**
 * The client's replica of its buckets, in memory: the confirmed base (the server's rows, each
 * with the buckets it is in), the buckets held and lost, the outbox, the quarantine and the
 * optimistic view above the base. Every operation is synchronous and records what it changed,
 * both for the store (`flush`) and for the app (the view's row changes); the client writes the
 * one and announces the other.
 *
 * Pull pages are applied as `docs/protocol.md#pull-response` says: a row stays while a bucket
 * still held contains it; tombstones take rows out of the buckets they name; rows of buckets the
 * actor lost go after the bucket TTL, except rows pending mutations wrote; a bucket lost and
 * held again is filled anew, and its rows the fill does not bring again go when the pull ends
 * (the server sends the rows it holds now, not the deletes missed meanwhile); a `reset` starts a
 * mark and sweep that ends with the last page. Only the last page of a pull confirms mutations
 * and rebases the view: earlier pages may report a mutation synced whose rows come later.
 */

import { HlcClock } from "./hlc.js";
import { newUuid } from "./ids.js";
import { keyText, type AnySchema, type TableSchema } from "./schema.js";
import type { OutboxEntry, QuarantinedEntry, StoredRow, StoredState, StoreMeta, StoreWrite } from "./store/types.js";
import { CLIENT_STORE_VERSION } from "./store/types.js";
import { frozen, Layer, LocalTx, isSoftDeleted, sameValue, type Actor, type OptimisticMutator, type RowSource } from "./view.js";
import type { MutationResult, Problem, PullResponse, Row } from "./wire.js";

/** A confirmed row, the buckets holding it, and those of them waiting to deliver it again. */
interface BaseRow {
  row: Row;
  buckets: Set<string>;
  refill: Set<string>;
}

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

/** What applying a pull page did. */
export interface PageApplied {
  /** Outbox entries the page confirmed. */
  confirmed: number;
  /** Acknowledged entries the server no longer has: they go again. */
  requeued: number;
}

/** A mutation queued by `mutate`. */
export interface Queued {
  mutationId: number;
  clientMutationId: string;
  /** What the optimistic mutator returned. */
  result: unknown;
}

const sep = "\u0000";

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

export class Replica implements RowSource {
  meta: StoreMeta;
  private readonly base = new Map<string, Map<string, BaseRow>>();
  private readonly held = new Map<string, number | null>();
  private outbox: OutboxEntry[] = [];
  private quarantine: QuarantinedEntry[] = [];
  private overlay: Layer;
  private optimistic: Record<string, OptimisticMutator<never, never>> = {};
  readonly clock: HlcClock;

  private dirtyRows = new Set<string>();
  private dirtyBuckets = new Set<string>();
  private dirtyOutbox = new Set<string>();
  private dirtyQuarantine = new Set<string>();
  private dirtyMeta = false;
  /** Rows waiting for a bucket's fill to deliver them again, by `table␀key`. */
  private refilling = new Set<string>();
  /** Live view rows as they were before the current operation, by `table␀key`. */
  private viewBefore = new Map<string, Row | undefined>();

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
    this.quarantine = [...(stored?.quarantine ?? [])].sort((a, b) => a.quarantinedAt - b.quarantinedAt || a.mutationId - b.mutationId);
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
    this.rebuildOverlay();
    this.viewBefore.clear();
  }

  get clientId(): string {
    return this.meta.clientId;
  }

  private isLocal(table: string): boolean {
    return this.schema.tables[table]?.synced === true;
  }

  private tableSchema(table: string): TableSchema {
    return this.schema.tables[table]!;
  }

  private tableRows(table: string): Map<string, BaseRow> {
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

  // --- The view --------------------------------------------------------------------------

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

  /** Note the live view row of `key` before it may change. */
  private noteView(table: string, key: string): void {
    const id = table + sep + key;
    if (!this.viewBefore.has(id)) this.viewBefore.set(id, this.viewRow(table, key));
  }

  /** The changes of the view since the last call. */
  takeViewChanges(): RowChange[] {
    const changes: RowChange[] = [];
    for (const [id, previous] of this.viewBefore) {
      const [table, key] = id.split(sep) as [string, string];
      const row = this.viewRow(table, key);
      if (previous === undefined && row !== undefined) changes.push({ table, key, type: "insert", row });
      else if (previous !== undefined && row === undefined) changes.push({ table, key, type: "delete", previous });
      else if (previous !== undefined && row !== undefined && !sameValue(previous, row)) {
        changes.push({ table, key, type: "update", row, previous });
      }
    }
    this.viewBefore.clear();
    return changes;
  }

  /** The optimistic mutators, by name; the view is rebased with them. */
  setOptimistic(mutators: Record<string, OptimisticMutator<never, never>>): void {
    this.optimistic = { ...this.optimistic, ...mutators };
    this.rebase();
  }

  /** Run the pending mutations again over the base, in order. */
  rebase(): void {
    const before = this.overlay;
    this.rebuildOverlay();
    const after = this.overlay;
    // Compare what either overlay wrote: the old values are read through the old overlay.
    this.overlay = before;
    for (const layer of [before, after]) {
      for (const [table, rows] of layer.writes) for (const key of rows.keys()) this.noteView(table, key);
    }
    this.overlay = after;
  }

  private rebuildOverlay(): void {
    const overlay = new Layer(this);
    for (const entry of this.outbox) {
      if (entry.mutationId <= this.meta.syncedMutationId || entry.superseded) continue;
      const mutator = this.optimistic[entry.name];
      if (!mutator) continue;
      const layer = new Layer(overlay);
      try {
        runOptimistic(mutator, new LocalTx(this.schema, layer, this.actor, entry.hlc, entry.clientMutationId), entry.args);
        overlay.absorb(layer);
      } catch {
        // It fails now: it has no effect, and the server decides.
      }
    }
    this.overlay = overlay;
  }

  // --- Mutations ---------------------------------------------------------------------------

  /** Run mutator `name`'s optimistic function (if any) and queue the mutation. */
  mutate(name: string, input: unknown, now: number): Queued {
    if (!this.schema.mutators.includes(name)) throw new UnknownMutatorError(name);
    // The outbox keeps the arguments as they were when the mutation was made.
    const args = frozen(structuredClone(input));
    const hlc = this.clock.now();
    const clientMutationId = newUuid();
    const mutator = this.optimistic[name];
    const layer = new Layer(this.overlay);
    // A local run that throws refuses the mutation: nothing is queued.
    const result = mutator
      ? runOptimistic(mutator, new LocalTx(this.schema, layer, this.actor, hlc, clientMutationId), args)
      : undefined;
    for (const [table, rows] of layer.writes) for (const key of rows.keys()) this.noteView(table, key);
    this.overlay.absorb(layer);
    const mutationId = this.meta.lastMutationId + 1;
    this.setMeta({ lastMutationId: mutationId, lastHlc: hlc });
    const entry: OutboxEntry = { mutationId, clientMutationId, name, args, hlc, pushed: false, createdAt: now };
    this.outbox.push(entry);
    this.dirtyOutbox.add(clientMutationId);
    return { mutationId, clientMutationId, result };
  }

  /** Up to `limit` entries no push has acknowledged, in order. */
  unpushed(limit: number): OutboxEntry[] {
    return this.outbox.filter((e) => !e.pushed).slice(0, limit);
  }

  /** Mutations a pull has not yet shown. */
  get pendingCount(): number {
    return this.outbox.length;
  }

  get quarantined(): readonly QuarantinedEntry[] {
    return this.quarantine;
  }

  private setMeta(change: Partial<StoreMeta>): void {
    this.meta = { ...this.meta, ...change };
    this.dirtyMeta = true;
  }

  private removeOutbox(predicate: (entry: OutboxEntry) => boolean): number {
    const before = this.outbox.length;
    this.outbox = this.outbox.filter((entry) => {
      if (!predicate(entry)) return true;
      this.dirtyOutbox.add(entry.clientMutationId);
      return false;
    });
    return before - this.outbox.length;
  }

  /** Record a push's results. Returns whether some mutation was applied. */
  recordResults(results: readonly MutationResult[], now: number): boolean {
    let rebase = false;
    let applied = false;
    for (const result of results) {
      const entry = this.outbox.find((e) => e.clientMutationId === result.clientMutationId);
      if (!entry) continue;
      if (result.status === "rejected") {
        this.quarantineEntry(entry, result.error ?? rejectedWithoutReason(), now);
        rebase = true;
        continue;
      }
      applied = true;
      entry.pushed = true;
      if (result.serverId !== undefined) entry.serverId = result.serverId;
      if (result.superseded === true && !entry.superseded) {
        // Every write lost its merge: the view shows the server's values, not this guess.
        entry.superseded = true;
        rebase = true;
      }
      this.dirtyOutbox.add(entry.clientMutationId);
      // Settled before its answer came: a pull has shown it already.
      if (entry.mutationId <= this.meta.syncedMutationId) {
        this.removeOutbox((e) => e === entry);
      }
    }
    if (rebase) this.rebase();
    return applied;
  }

  private quarantineEntry(entry: OutboxEntry, error: Problem, now: number): void {
    const { clientMutationId, mutationId, name, args, hlc } = entry;
    this.quarantine = this.quarantine.filter((q) => q.clientMutationId !== clientMutationId);
    this.quarantine.push({ clientMutationId, mutationId, name, args, hlc, error, quarantinedAt: now });
    this.dirtyQuarantine.add(clientMutationId);
    this.removeOutbox((e) => e === entry);
  }

  /**
   * One mutation the server will never take (its request alone is refused as malformed or too
   * large): quarantined with that problem, unless a pull has shown it settled already.
   */
  refuse(entry: OutboxEntry, problem: Problem, now: number): void {
    if (entry.mutationId <= this.meta.syncedMutationId) {
      this.recordResults([{ clientMutationId: entry.clientMutationId, mutationId: entry.mutationId, status: "duplicate" }], now);
    } else {
      this.quarantineEntry(entry, problem, now);
      this.rebase();
    }
  }

  /**
   * The server's sequence for this client is at `last` while the outbox goes further: entries
   * it acknowledged up to `last` stay; every other is numbered on from `last`, in order.
   */
  renumber(last: number): void {
    let next = last;
    for (const entry of this.outbox) {
      if (entry.pushed && entry.mutationId <= last) continue;
      next += 1;
      entry.mutationId = next;
      entry.pushed = false;
      this.dirtyOutbox.add(entry.clientMutationId);
    }
    this.outbox.sort((a, b) => a.mutationId - b.mutationId);
    this.setMeta({ lastMutationId: next, syncedMutationId: Math.min(last, this.meta.syncedMutationId) });
  }

  /** Take a quarantined mutation out; `undefined` when it is not there. */
  unquarantine(clientMutationId: string): QuarantinedEntry | undefined {
    const entry = this.quarantine.find((q) => q.clientMutationId === clientMutationId);
    if (!entry) return undefined;
    this.quarantine = this.quarantine.filter((q) => q !== entry);
    this.dirtyQuarantine.add(clientMutationId);
    return entry;
  }

  /** Put back an entry `unquarantine` took out. */
  renewQuarantine(entry: QuarantinedEntry): void {
    this.quarantine.push(entry);
    this.quarantine.sort((a, b) => a.quarantinedAt - b.quarantinedAt || a.mutationId - b.mutationId);
    this.dirtyQuarantine.add(entry.clientMutationId);
  }

  // --- Pulls -------------------------------------------------------------------------------

  /** The buckets the replica holds (not those the actor lost), in key order. */
  heldBuckets(): string[] {
    return [...this.held].filter(([, leftAt]) => leftAt === null).map(([bucket]) => bucket).sort();
  }

  private setBucket(bucket: string, leftAt: number | null): void {
    if (this.held.get(bucket) === leftAt && this.held.has(bucket)) return;
    this.held.set(bucket, leftAt);
    this.dirtyBuckets.add(bucket);
  }

  private deleteBucket(bucket: string): void {
    if (this.held.delete(bucket)) this.dirtyBuckets.add(bucket);
  }

  private touchBase(table: string, key: string): void {
    this.noteView(table, key);
    this.dirtyRows.add(table + sep + key);
  }

  /** Drop a base row no bucket holds any more. */
  private dropIfOrphaned(table: string, key: string): void {
    const rows = this.base.get(table);
    const base = rows?.get(key);
    if (!base || base.buckets.size > 0) return;
    this.touchBase(table, key);
    rows!.delete(key);
  }

  /** Apply one pull page. */
  applyPage(page: PullResponse, now: number, bucketTtlMs: number): PageApplied {
    if (page.serverHlc !== undefined) this.clock.observe(page.serverHlc);
    if (page.reset) {
      // Every row must be delivered again to stay.
      for (const [table, rows] of this.base) {
        for (const [key, base] of rows) {
          if (base.buckets.size === 0 && base.refill.size === 0) continue;
          base.buckets.clear();
          base.refill.clear();
          this.dirtyRows.add(table + sep + key);
        }
      }
      this.refilling.clear();
      this.setMeta({ sweeping: true });
    }
    const sweeping = this.meta.sweeping;

    for (const bucket of page.removedBuckets) this.setBucket(bucket, this.held.get(bucket) ?? now);

    for (const tombstone of page.tombstones) {
      if (!this.isLocal(tombstone.table)) continue;
      const key = keyText(this.tableSchema(tombstone.table), tombstone.key);
      const base = this.base.get(tombstone.table)?.get(key);
      if (!base) continue;
      for (const bucket of tombstone.buckets) base.buckets.delete(bucket);
      this.dirtyRows.add(tombstone.table + sep + key);
      this.dropIfOrphaned(tombstone.table, key);
    }

    if (!sweeping) this.beginRefills(page);
    for (const change of page.changes) {
      if (!this.isLocal(change.table)) continue;
      const table = this.tableSchema(change.table);
      const key = keyText(table, change.row);
      this.touchBase(change.table, key);
      const rows = this.tableRows(change.table);
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
      for (const bucket of change.buckets) this.setBucket(bucket, null);
    }

    if (!page.hasMore) this.endRefills();
    if (sweeping && !page.hasMore) {
      for (const [table, rows] of this.base) for (const key of [...rows.keys()]) this.dropIfOrphaned(table, key);
      // Buckets no page brought again are held no more.
      const used = this.usedBuckets();
      for (const bucket of [...this.held.keys()]) if (!used.has(bucket)) this.deleteBucket(bucket);
      this.setMeta({ sweeping: false });
    }
    if (!sweeping) this.evict(now - bucketTtlMs);

    const applied: PageApplied = { confirmed: 0, requeued: 0 };
    if (!page.hasMore) {
      const synced = Math.max(page.syncedMutationId ?? page.lastMutationId, this.meta.syncedMutationId);
      this.setMeta({ syncedMutationId: synced });
      applied.confirmed = this.removeOutbox((e) => e.pushed && e.mutationId <= synced);
      if (this.meta.lastMutationId < page.lastMutationId) this.setMeta({ lastMutationId: page.lastMutationId });
      // Acknowledged beyond the server's sequence: the server lost them, they go again.
      for (const entry of this.outbox) {
        if (entry.pushed && entry.mutationId > page.lastMutationId) {
          entry.pushed = false;
          this.dirtyOutbox.add(entry.clientMutationId);
          applied.requeued += 1;
        }
      }
      this.rebase();
    }
    this.setMeta({ cursor: page.cursor });
    return applied;
  }

  /** Rows of the buckets of `page` the actor had lost wait for the fill to deliver them again. */
  private beginRefills(page: PullResponse): void {
    const lost = new Set<string>();
    for (const change of page.changes) {
      for (const bucket of change.buckets) if (this.held.get(bucket) != null) lost.add(bucket);
    }
    if (lost.size === 0) return;
    for (const [table, rows] of this.base) {
      for (const [key, base] of rows) {
        for (const bucket of base.buckets) {
          if (!lost.has(bucket)) continue;
          base.refill.add(bucket);
          this.refilling.add(table + sep + key);
          this.dirtyRows.add(table + sep + key);
        }
      }
    }
  }

  /** The pull is complete: rows leave the buckets that did not deliver them again. */
  private endRefills(): void {
    for (const id of this.refilling) {
      const [table, key] = id.split(sep) as [string, string];
      const base = this.base.get(table)?.get(key);
      if (!base) continue;
      for (const bucket of base.refill) base.buckets.delete(bucket);
      base.refill.clear();
      this.dirtyRows.add(id);
      this.dropIfOrphaned(table, key);
    }
    this.refilling.clear();
  }

  private usedBuckets(): Set<string> {
    const used = new Set<string>();
    for (const rows of this.base.values()) for (const base of rows.values()) for (const b of base.buckets) used.add(b);
    return used;
  }

  /**
   * Forget buckets the actor left before `leftBefore` (ms): their rows go unless another bucket
   * still holds them or a pending mutation wrote them.
   */
  private evict(leftBefore: number): void {
    const expired = new Set([...this.held].filter(([, leftAt]) => leftAt !== null && leftAt <= leftBefore).map(([b]) => b));
    if (expired.size === 0) return;
    for (const [table, rows] of this.base) {
      for (const [key, base] of [...rows]) {
        if (this.overlay.wrote(table, key)) continue;
        if (![...base.buckets].some((b) => expired.has(b))) continue;
        for (const bucket of expired) base.buckets.delete(bucket);
        this.dirtyRows.add(table + sep + key);
        this.dropIfOrphaned(table, key);
      }
    }
    const used = this.usedBuckets();
    for (const bucket of expired) if (!used.has(bucket)) this.deleteBucket(bucket);
  }

  // --- Persistence -------------------------------------------------------------------------

  /** Everything changed since the last flush, as one store write. */
  flush(): StoreWrite {
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
    if (this.dirtyMeta) change.meta = { ...this.meta };
    for (const id of this.dirtyRows) {
      const [table, key] = id.split(sep) as [string, string];
      const base = this.base.get(table)?.get(key);
      if (base) {
        const stored: StoredRow = { table, key, row: base.row, buckets: [...base.buckets].sort() };
        if (base.refill.size > 0) stored.refill = [...base.refill].sort();
        change.putRows.push(stored);
      }
      else change.deleteRows.push([table, key]);
    }
    for (const bucket of this.dirtyBuckets) {
      const leftAt = this.held.get(bucket);
      if (leftAt === undefined) change.deleteBuckets.push(bucket);
      else change.putBuckets.push({ bucket, leftAt });
    }
    for (const id of this.dirtyOutbox) {
      const entry = this.outbox.find((e) => e.clientMutationId === id);
      if (entry) change.putOutbox.push({ ...entry });
      else change.deleteOutbox.push(id);
    }
    for (const id of this.dirtyQuarantine) {
      const entry = this.quarantine.find((e) => e.clientMutationId === id);
      if (entry) change.putQuarantine.push({ ...entry });
      else change.deleteQuarantine.push(id);
    }
    this.dirtyMeta = false;
    this.dirtyRows.clear();
    this.dirtyBuckets.clear();
    this.dirtyOutbox.clear();
    this.dirtyQuarantine.clear();
    return change;
  }
}

/** Run an optimistic mutator, which must not be asynchronous: replays run inside a rebase. */
function runOptimistic(mutator: OptimisticMutator<never, never>, tx: LocalTx, args: unknown): unknown {
  const result = (mutator as unknown as (tx: LocalTx, args: unknown) => unknown)(tx, args);
  if (typeof (result as { then?: unknown } | undefined)?.then === "function") {
    throw new TypeError("an optimistic mutator runs synchronously: it must not return a promise");
  }
  return result;
}

function rejectedWithoutReason(): Problem {
  return {
    type: "urn:engine:problem:mutator_failed",
    title: "Mutator failed",
    status: 422,
    code: "mutator_failed",
    detail: "rejected without a reason",
  };
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

/** No mutator has this name in the app's schema. */
export class UnknownMutatorError extends Error {
  constructor(readonly mutator: string) {
    super(`the app has no mutator \`${mutator}\``);
    this.name = "UnknownMutatorError";
  }
}
