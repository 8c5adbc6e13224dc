/**
 * The app as the client needs it: the tables with their columns, keys and merge policies, the
 * sync rules and the mutator names. `engine gen` writes it for an app (`schema` in the generated
 * module), typed by the app's row and argument types.
 */

import type { Row } from "./wire.js";

/** A column as the contract describes it. */
export interface ColumnSchema {
  readonly name: string;
  /** The contract's type name: `text`, `int8`, `bool`, `timestamptz`, `crdt_text`, … */
  readonly type: string;
  readonly nullable: boolean;
  /** Whether it holds blob keys (`createEngineBlobs` asks which rows name a blob); absent when not. */
  readonly blob?: boolean;
}

/** A table as the contract describes it. */
export interface TableSchema {
  readonly columns: readonly ColumnSchema[];
  readonly primaryKey: readonly string[];
  readonly merge: string;
  readonly crdt: readonly string[];
  readonly owner: string | null;
  readonly softDelete: string | null;
  /** Whether some sync rule selects from the table: only synced tables have a local copy. */
  readonly synced: boolean;
}

/** A constant in a sync rule. */
export type ConstValue = string | number | boolean;

/** `column == value`. */
export interface ConstTerm {
  readonly column: string;
  readonly value: ConstValue;
}

/** An equality of a membership query: the column equals an actor claim (`actor.user_id`,
 * `actor.owner_id`, `actor.claims.<name>`) or a constant. */
export type MembershipFilterSchema =
  | { readonly column: string; readonly claim: string }
  | { readonly column: string; readonly value: ConstValue };

/** A rule's membership query: rows of a table matching its filters, or raw SQL. */
export type MembershipSchema =
  | { readonly table: string; readonly filters: readonly MembershipFilterSchema[] }
  | { readonly sql: string; readonly reads?: readonly string[] };

/** One table selection of a rule: rows whose scope columns equal the bucket's parameters and
 * whose filter columns equal constants. */
export interface SelectionSchema {
  readonly table: string;
  readonly scope: readonly { readonly column: string; readonly param: string }[];
  readonly filters: readonly ConstTerm[];
}

/** A comparison of the row written with a constant (`row.role != "owner"`) or with an actor
 * claim (`row.author_id == actor.user_id`). */
export type RowTermSchema =
  | { readonly column: string; readonly op: "==" | "!="; readonly value: ConstValue }
  | { readonly column: string; readonly op: "==" | "!="; readonly claim: string };

/** One alternative of a `write(...)`: equalities on the actor's membership row, and comparisons
 * of the row written with constants and claims. Without either, every holder of the bucket may
 * write. */
export interface WriteAlternative {
  readonly member: readonly ConstTerm[];
  readonly row: readonly RowTermSchema[];
}

/** A sync rule as the contract describes it: what its buckets hold, who holds them, and what
 * they let their holders write (`docs/design.md` §4). */
export interface SyncRuleSchema {
  readonly parameters: readonly { readonly name: string; readonly type: string; readonly source: string }[];
  readonly tables: readonly string[];
  /** `null` for a rule whose parameters are all claims. */
  readonly membership: MembershipSchema | null;
  readonly data: readonly SelectionSchema[];
  /** `write(...)` by table, any alternative of which suffices; a table not named is read-only here. */
  readonly write: { readonly [table: string]: readonly WriteAlternative[] };
  /** `accept(...)`: the rules whose holders may put rows into buckets of this one. */
  readonly accept: readonly { readonly rule: string; readonly open: boolean }[];
  /** Whether a member may delete its own membership row (`leave`). */
  readonly leave: boolean;
  /** `invite(...)`: the boolean column of the membership table a member sets to accept its
   * invitation; a membership row grants nothing before. Absent for other rules. */
  readonly invite?: string;
  /** The rule whose membership holds this rule's buckets (`while`), or `null`. */
  readonly while: string | null;
  /** The row a bucket belongs to (`anchor(...)`), or `null`: the server refuses a membership
   * of a bucket without it, and a row `accept(...)` would let into one, which the client leaves
   * to the server. */
  readonly anchor?: { readonly table: string; readonly scope: readonly { readonly column: string; readonly param: string }[] } | null;
}

/** Row types by table name (an interface such as the generated `Tables`). */
export type TableTypes = object;
/** Argument types by mutator name (an interface such as the generated `Mutators`). */
export type MutatorTypes = object;

/** The app's schema, typed by its row types `T` and argument types `M`. */
export interface EngineSchema<T extends TableTypes = TableTypes, M extends MutatorTypes = MutatorTypes> {
  readonly version: string;
  readonly tables: { readonly [K in keyof T & string]: TableSchema };
  readonly syncRules: { readonly [rule: string]: SyncRuleSchema };
  /** Tables only server code writes (`server_only`). */
  readonly serverOnly: readonly string[];
  readonly mutators: readonly (keyof M & string)[];
  /** Carries the row and argument types; never set at run time. */
  readonly types?: { readonly tables: T; readonly mutators: M };
}

/** A schema whatever its types: what the client's internals read. */
export interface AnySchema {
  readonly version: string;
  readonly tables: { readonly [table: string]: TableSchema };
  readonly syncRules: { readonly [rule: string]: SyncRuleSchema };
  readonly serverOnly: readonly string[];
  readonly mutators: readonly string[];
}

/** The schema `schema`, typed by row types `T` and argument types `M` (what `engine gen` writes). */
export function defineSchema<T extends TableTypes, M extends MutatorTypes>(
  schema: Omit<EngineSchema<T, M>, "types">,
): EngineSchema<T, M> {
  return schema;
}

/** Anything that can run a mutation by name: the client, or a test double of it. */
export interface Mutate<M, R> {
  mutate<K extends keyof M & string>(name: K, args: M[K]): R;
}

/**
 * A row's key: the value of a one-column primary key, or an object holding every primary key
 * column.
 */
export type KeyInput = string | number | boolean | Row;

/** The primary key columns of `row` (or of the key `key`), as an object. */
export function keyRow(table: TableSchema, tableName: string, key: KeyInput): Row {
  if (typeof key === "object" && key !== null) {
    const out: Row = {};
    for (const column of table.primaryKey) {
      if (!(column in key)) {
        throw new TypeError(`a key of table \`${tableName}\` needs its column \`${column}\``);
      }
      out[column] = key[column];
    }
    return out;
  }
  if (table.primaryKey.length !== 1) {
    throw new TypeError(
      `table \`${tableName}\` has a key of ${table.primaryKey.length} columns: give them as an object`,
    );
  }
  return { [table.primaryKey[0]!]: key };
}

/** A key's text, to index rows by: the JSON of its column values in key order. */
export function keyText(table: TableSchema, row: Row): string {
  return JSON.stringify(table.primaryKey.map((column) => row[column] ?? null));
}
