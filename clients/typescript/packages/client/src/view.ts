/**
 * The optimistic view: the confirmed rows with the pending mutations' writes on top, and the
 * transaction an app's optimistic mutator writes through.
 *
 * Rows are read through layers. The bottom one is the confirmed base; the overlay above it
 * holds what the pending mutations wrote; each run of an optimistic mutator writes into a layer
 * of its own, merged into the overlay only when the run succeeds, so a mutator that throws
 * leaves no trace. A rebase builds a fresh overlay by running the pending mutations again, in
 * order, over the base as the last pull left it.
 */

import { derivedId } from "./ids.js";
import { keyRow, keyText, type AnySchema, type KeyInput, type TableSchema, type TableTypes } from "./schema.js";
import type { Row } from "./wire.js";

/** Rows by table and key text; a write layer records deletions as `null`. */
export type RowMap<V> = Map<string, Map<string, V>>;

/** Something rows are read from. */
export interface RowSource {
  /** The row of `table` with key text `key`, soft-deleted or not. */
  get(table: string, key: string): Row | undefined;
  /** Every key of `table` that may hold a row. */
  keys(table: string): Iterable<string>;
}

/** Writes over a row source: what a pending mutation (or all of them) changed. */
export class Layer implements RowSource {
  readonly writes: RowMap<Row | null> = new Map();

  constructor(readonly below: RowSource) {}

  get(table: string, key: string): Row | undefined {
    const written = this.writes.get(table)?.get(key);
    if (written === null) return undefined;
    return written ?? this.below.get(table, key);
  }

  *keys(table: string): Iterable<string> {
    const own = this.writes.get(table);
    yield* own?.keys() ?? [];
    for (const key of this.below.keys(table)) {
      if (!own?.has(key)) yield key;
    }
  }

  set(table: string, key: string, row: Row | null): void {
    if (row !== null) frozen(row);
    let rows = this.writes.get(table);
    if (!rows) this.writes.set(table, (rows = new Map()));
    rows.set(key, row);
  }

  /** Whether this layer wrote the row. */
  wrote(table: string, key: string): boolean {
    return this.writes.get(table)?.has(key) ?? false;
  }

  /** Take `other`'s writes (a layer above this one) as this layer's own. */
  absorb(other: Layer): void {
    for (const [table, rows] of other.writes) {
      for (const [key, row] of rows) this.set(table, key, row);
    }
  }
}

/** Who a mutation acts for: the token's `sub`, its `ownerId`, and its other claims. */
export interface Actor {
  userId: string;
  ownerId: string;
  claims: Record<string, unknown>;
}

/**
 * What an optimistic mutator works with: reads and writes of the view, in the app's row
 * types, and the ids, clock and actor of the mutation. The server runs the app's own mutator
 * with the same arguments; what it decides replaces what this run guessed once a pull brings
 * it.
 */
export interface MutationTx<T extends TableTypes = TableTypes> {
  /** The actor the mutation runs for. */
  readonly actor: Actor;
  /** The mutation's clock reading (`docs/protocol.md#hybrid-logical-clock`). */
  readonly hlc: string;
  /** The physical time of that reading, in milliseconds since the Unix epoch. */
  readonly physicalMs: number;
  /** The mutation's id. */
  readonly clientMutationId: string;
  /** A fresh id, the same the server's run of the mutation takes at this point (`ctx.new_id()`). */
  newId(): string;
  /** The live row of `table` with `key`, if the view has one. */
  get<K extends keyof T & string>(table: K, key: KeyInput): T[K] | undefined;
  /** The live rows of `table` whose columns equal `filter`'s, in key order. */
  select<K extends keyof T & string>(table: K, filter?: Partial<T[K]>): T[K][];
  /** Insert a row; a row with its key must not exist. */
  insert<K extends keyof T & string>(table: K, row: T[K]): void;
  /** Change columns of the row with `key`; returns whether it exists. */
  update<K extends keyof T & string>(table: K, key: KeyInput, changes: Partial<T[K]>): boolean;
  /** Delete the row with `key` (a soft delete on tables with one); returns whether it existed. */
  delete<K extends keyof T & string>(table: K, key: KeyInput): boolean;
  /** Delete the row with `key` for good; returns whether it existed. */
  purge<K extends keyof T & string>(table: K, key: KeyInput): boolean;
}

/** An optimistic mutator: runs synchronously against the view. */
export type OptimisticMutator<T extends TableTypes, A> = (tx: MutationTx<T>, args: A) => unknown;

/** The value of a timestamp column as the server writes it: microseconds, `Z`. */
export function timestampText(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}

/** Whether `row` is soft-deleted in `table`. */
export function isSoftDeleted(table: TableSchema, row: Row): boolean {
  return table.softDelete !== null && row[table.softDelete] != null;
}

/** An empty collaborative document's state (`docs/protocol.md#collaborative-columns`). */
const EMPTY_CRDT_STATE = "AAA=";

/**
 * Called with each write of a local run before it is made: the row before it (`null` for an
 * insert) and after it (`null` for a purge). It throws to refuse the write.
 */
export type WriteCheck = (table: string, before: Row | null, after: Row | null) => void;

/** The transaction of one run of an optimistic mutator, writing into `layer` (a `MutationTx`). */
export class LocalTx {
  private ids = 0;
  readonly physicalMs: number;

  constructor(
    private readonly schema: AnySchema,
    private readonly layer: Layer,
    readonly actor: Actor,
    readonly hlc: string,
    readonly clientMutationId: string,
    private readonly check: WriteCheck = () => undefined,
  ) {
    this.physicalMs = Number(hlc.slice(0, 13));
  }

  newId(): string {
    return derivedId(this.clientMutationId, this.physicalMs, this.ids++);
  }

  private table(name: string): TableSchema {
    const table = this.schema.tables[name];
    if (!table) throw new TypeError(`the app has no table \`${name}\``);
    return table;
  }

  /** The live row and its key text. */
  private find(name: string, key: KeyInput): [string, Row | undefined] {
    const table = this.table(name);
    const text = keyText(table, keyRow(table, name, key));
    const row = this.layer.get(name, text);
    return [text, row && !isSoftDeleted(table, row) ? row : undefined];
  }

  get(name: string, key: KeyInput): Row | undefined {
    return this.find(name, key)[1];
  }

  select(name: string, filter: Row = {}): Row[] {
    const table = this.table(name);
    const found: Row[] = [];
    for (const key of new Set(this.layer.keys(name))) {
      const row = this.layer.get(name, key);
      if (!row || isSoftDeleted(table, row)) continue;
      if (Object.entries(filter).every(([column, value]) => sameValue(row[column], value))) found.push(row);
    }
    return sortByKey(table, found);
  }

  insert(name: string, input: object): void {
    const table = this.table(name);
    const given = input as Row;
    const row: Row = {};
    for (const column of table.columns) {
      let value = given[column.name];
      if (value === undefined) {
        if (column.type === "crdt_text" || column.type === "crdt_map") value = EMPTY_CRDT_STATE;
        else if (column.nullable) value = null;
        else throw new TypeError(`an insert into \`${name}\` needs column \`${column.name}\``);
      }
      row[column.name] = value;
    }
    for (const column of Object.keys(given)) {
      if (!table.columns.some((c) => c.name === column)) {
        throw new TypeError(`table \`${name}\` has no column \`${column}\``);
      }
    }
    const text = keyText(table, row);
    if (this.layer.get(name, text)) throw new Error(`conflict: a row with this key already exists in \`${name}\``);
    this.check(name, null, row);
    this.layer.set(name, text, row);
  }

  update(name: string, key: KeyInput, changes: object): boolean {
    const table = this.table(name);
    const [text, row] = this.find(name, key);
    if (!row) return false;
    const next = { ...row };
    for (const [column, value] of Object.entries(changes as Row)) {
      if (value === undefined) continue;
      if (!table.columns.some((c) => c.name === column)) {
        throw new TypeError(`table \`${name}\` has no column \`${column}\``);
      }
      if (table.primaryKey.includes(column) && !sameValue(row[column], value)) {
        throw new TypeError(`a mutation cannot change the primary key column \`${name}.${column}\``);
      }
      next[column] = value;
    }
    this.check(name, row, next);
    this.layer.set(name, text, next);
    return true;
  }

  delete(name: string, key: KeyInput): boolean {
    const table = this.table(name);
    const [text, row] = this.find(name, key);
    if (!row) return false;
    if (table.softDelete === null) {
      this.check(name, row, null);
      this.layer.set(name, text, null);
    } else {
      const deleted = { ...row, [table.softDelete]: timestampText(this.physicalMs) };
      this.check(name, row, deleted);
      this.layer.set(name, text, deleted);
    }
    return true;
  }

  purge(name: string, key: KeyInput): boolean {
    const table = this.table(name);
    const text = keyText(table, keyRow(table, name, key));
    const row = this.layer.get(name, text);
    if (!row) return false;
    this.check(name, row, null);
    this.layer.set(name, text, null);
    return true;
  }
}

/** Rows in primary-key order (strings by code unit, numbers by value). */
export function sortByKey(table: TableSchema, rows: Row[]): Row[] {
  return rows.sort((a, b) => {
    for (const column of table.primaryKey) {
      const order = compareValues(a[column], b[column]);
      if (order !== 0) return order;
    }
    return 0;
  });
}

function compareValues(a: unknown, b: unknown): number {
  if (typeof a === "number" && typeof b === "number") return a - b;
  const [x, y] = [String(a), String(b)];
  return x < y ? -1 : x > y ? 1 : 0;
}

/**
 * `value`, frozen through and through: rows are shared between the view, the base and the app,
 * so an app that changes a row it read fails at once instead of changing them all.
 */
export function frozen<V>(value: V): V {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const inner of Object.values(value)) frozen(inner);
  }
  return value;
}

/** Whether two JSON values are equal. */
export function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const keysA = Object.keys(a);
  const keysB = Object.keys(b);
  if (keysA.length !== keysB.length) return false;
  return keysA.every((key) => sameValue((a as Row)[key], (b as Row)[key]));
}
