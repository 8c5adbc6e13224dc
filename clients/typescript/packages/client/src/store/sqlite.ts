/**
 * A store in a SQLite database, shared by the web (`webSqlitePersistence`: SQLite in WebAssembly
 * on the origin-private file system, in a worker) and mobile apps (`mobileSqlitePersistence`:
 * the platform's SQLite). The database is reached through `SqlExecutor`, a small asynchronous
 * interface that React Native's SQLite libraries (`op-sqlite`, `expo-sqlite`) and a worker's
 * messages both fit in a few lines.
 *
 * One table per kind of record (`meta`, `rows` with `row_buckets` indexing them by bucket,
 * `buckets`, `outbox`, `quarantine`); a record's fields are JSON text beside the columns that
 * key and order it. Every `write` is one `SqlExecutor.batch`, which the executor runs in one
 * transaction, so it is atomic. The tables' layout is `PRAGMA user_version`
 * (`CLIENT_STORE_VERSION`): a database of a newer layout is refused with
 * `ClientStoreVersionError` rather than misread.
 */

import { ClientStoreVersionError } from "./migrate.js";
import {
  CLIENT_STORE_VERSION,
  type ClientStore,
  type OutboxEntry,
  type QuarantinedEntry,
  type StoredRow,
  type StoredState,
  type StoreMeta,
  type StoreWrite,
} from "./types.js";

/** A value SQLite binds or returns (booleans are bound as 0 and 1 by the store itself). */
export type SqlValue = string | number | null;

/** One statement and its positional (`?`) parameters. */
export type SqlStatement = [sql: string, params: SqlValue[]];

/**
 * A SQLite database as the store uses it. `execute` runs one statement and resolves to its rows
 * as objects keyed by column name (none for a statement that returns none). `batch` runs its
 * statements in order in one transaction: all of them or, when one fails, none.
 *
 * With `op-sqlite`: `{ execute: async (sql, params) => (await db.execute(sql, params)).rows,
 * batch: async (statements) => void (await db.executeBatch(statements)) }`.
 * With `expo-sqlite`: `{ execute: (sql, params) => db.getAllAsync(sql, params), batch:
 * (statements) => db.withExclusiveTransactionAsync(async (tx) => { for (const [sql, params] of
 * statements) await tx.runAsync(sql, params); }) }`.
 */
export interface SqlExecutor {
  execute(sql: string, params?: SqlValue[]): Promise<Record<string, SqlValue>[]>;
  batch(statements: SqlStatement[]): Promise<void>;
  /** Close the database (optional: a database the app shares stays open). */
  close?(): Promise<void>;
}

/** The tables of layout 1; `row_buckets` answers which rows a bucket holds without a scan. */
const SCHEMA: string[] = [
  "CREATE TABLE IF NOT EXISTS meta (id INTEGER PRIMARY KEY CHECK (id = 1), meta TEXT NOT NULL)",
  `CREATE TABLE IF NOT EXISTS rows (
     tbl TEXT NOT NULL, key TEXT NOT NULL, row TEXT NOT NULL, buckets TEXT NOT NULL, refill TEXT,
     PRIMARY KEY (tbl, key)) WITHOUT ROWID`,
  `CREATE TABLE IF NOT EXISTS row_buckets (
     bucket TEXT NOT NULL, tbl TEXT NOT NULL, key TEXT NOT NULL,
     PRIMARY KEY (bucket, tbl, key)) WITHOUT ROWID`,
  "CREATE INDEX IF NOT EXISTS row_buckets_row ON row_buckets (tbl, key)",
  "CREATE TABLE IF NOT EXISTS buckets (bucket TEXT PRIMARY KEY, left_at INTEGER) WITHOUT ROWID",
  `CREATE TABLE IF NOT EXISTS outbox (
     client_mutation_id TEXT PRIMARY KEY, mutation_id INTEGER NOT NULL, entry TEXT NOT NULL) WITHOUT ROWID`,
  "CREATE INDEX IF NOT EXISTS outbox_order ON outbox (mutation_id)",
  `CREATE TABLE IF NOT EXISTS quarantine (
     client_mutation_id TEXT PRIMARY KEY, mutation_id INTEGER NOT NULL, entry TEXT NOT NULL) WITHOUT ROWID`,
];

const TABLES = ["meta", "rows", "row_buckets", "buckets", "outbox", "quarantine"];

/**
 * A store in the SQLite database `db`. Use one database per user and app: the client refuses a
 * store that holds another user's data. The tables are created at the first use.
 */
export function sqliteStore(db: SqlExecutor): ClientStore & { clear(): Promise<void> } {
  let ready: Promise<void> | undefined;
  const open = () => (ready ??= createTables(db));
  return {
    async load(): Promise<StoredState | undefined> {
      await open();
      const [meta] = await db.execute("SELECT meta FROM meta WHERE id = 1");
      if (meta === undefined) return undefined;
      const rows = (await db.execute("SELECT tbl, key, row, buckets, refill FROM rows")).map((r): StoredRow => {
        const row: StoredRow = {
          table: r.tbl as string,
          key: r.key as string,
          row: JSON.parse(r.row as string),
          buckets: JSON.parse(r.buckets as string),
        };
        if (r.refill !== null) row.refill = JSON.parse(r.refill as string);
        return row;
      });
      const buckets = (await db.execute("SELECT bucket, left_at FROM buckets")).map((b) => ({
        bucket: b.bucket as string,
        leftAt: b.left_at as number | null,
      }));
      const entries = async <E>(table: string) =>
        (await db.execute(`SELECT entry FROM ${table} ORDER BY mutation_id`)).map((e) => JSON.parse(e.entry as string) as E);
      return {
        meta: JSON.parse(meta.meta as string) as StoreMeta,
        rows,
        buckets,
        outbox: await entries<OutboxEntry>("outbox"),
        quarantine: await entries<QuarantinedEntry>("quarantine"),
      };
    },
    async write(change: StoreWrite): Promise<void> {
      await open();
      await db.batch(statementsOf(change));
    },
    async clear(): Promise<void> {
      await open();
      await db.batch(TABLES.map((table): SqlStatement => [`DELETE FROM ${table}`, []]));
    },
    async close(): Promise<void> {
      await db.close?.();
    },
  };
}

/** Create the tables of a new database, or check that an existing one's layout is readable. */
async function createTables(db: SqlExecutor): Promise<void> {
  const [pragma] = await db.execute("PRAGMA user_version");
  const version = Number(pragma?.user_version ?? 0);
  if (version > CLIENT_STORE_VERSION) throw new ClientStoreVersionError(version, CLIENT_STORE_VERSION);
  if (version === CLIENT_STORE_VERSION) return;
  // Layout 1 is the first: a database at 0 is new. A later layout adds its step from the one before.
  await db.batch([...SCHEMA.map((sql): SqlStatement => [sql, []]), [`PRAGMA user_version = ${CLIENT_STORE_VERSION}`, []]]);
}

/** The statements of `change`, in the order a memory store applies it (deletions first). */
function statementsOf(change: StoreWrite): SqlStatement[] {
  const statements: SqlStatement[] = [];
  if (change.meta) statements.push(["INSERT OR REPLACE INTO meta (id, meta) VALUES (1, ?)", [JSON.stringify(change.meta)]]);
  for (const [table, key] of change.deleteRows) {
    statements.push(["DELETE FROM rows WHERE tbl = ? AND key = ?", [table, key]]);
    statements.push(["DELETE FROM row_buckets WHERE tbl = ? AND key = ?", [table, key]]);
  }
  for (const row of change.putRows) {
    statements.push([
      "INSERT OR REPLACE INTO rows (tbl, key, row, buckets, refill) VALUES (?, ?, ?, ?, ?)",
      [row.table, row.key, JSON.stringify(row.row), JSON.stringify(row.buckets), row.refill ? JSON.stringify(row.refill) : null],
    ]);
    statements.push(["DELETE FROM row_buckets WHERE tbl = ? AND key = ?", [row.table, row.key]]);
    for (const bucket of row.buckets) {
      statements.push(["INSERT OR IGNORE INTO row_buckets (bucket, tbl, key) VALUES (?, ?, ?)", [bucket, row.table, row.key]]);
    }
  }
  for (const bucket of change.deleteBuckets) statements.push(["DELETE FROM buckets WHERE bucket = ?", [bucket]]);
  for (const bucket of change.putBuckets) {
    statements.push(["INSERT OR REPLACE INTO buckets (bucket, left_at) VALUES (?, ?)", [bucket.bucket, bucket.leftAt]]);
  }
  for (const id of change.deleteOutbox) statements.push(["DELETE FROM outbox WHERE client_mutation_id = ?", [id]]);
  for (const entry of change.putOutbox) {
    statements.push([
      "INSERT OR REPLACE INTO outbox (client_mutation_id, mutation_id, entry) VALUES (?, ?, ?)",
      [entry.clientMutationId, entry.mutationId, JSON.stringify(entry)],
    ]);
  }
  for (const id of change.deleteQuarantine) statements.push(["DELETE FROM quarantine WHERE client_mutation_id = ?", [id]]);
  for (const entry of change.putQuarantine) {
    statements.push([
      "INSERT OR REPLACE INTO quarantine (client_mutation_id, mutation_id, entry) VALUES (?, ?, ?)",
      [entry.clientMutationId, entry.mutationId, JSON.stringify(entry)],
    ]);
  }
  return statements;
}
