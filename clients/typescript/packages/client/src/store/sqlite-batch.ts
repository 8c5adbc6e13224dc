/**
 * One batch of `SqlExecutor` in the web SQLite worker (`sqlite-worker.ts`), apart from the worker
 * so that it runs without one: its statements in one transaction, compiled once and kept in
 * `prepared`, and on a failure the transaction rolled back and the failure reported.
 */

import type { SqlStatement, SqlValue } from "./sqlite.js";

/** A compiled statement, as `@sqlite.org/sqlite-wasm`'s oo1 API has it. */
export interface Statement {
  bind(params: SqlValue[]): Statement;
  stepReset(): Statement;
  clearBindings(): Statement;
  finalize(): void;
}

/** A database, as `@sqlite.org/sqlite-wasm`'s oo1 API has it. */
export interface Database {
  exec(options: { sql: string; bind?: SqlValue[]; rowMode: "object"; returnValue: "resultRows" }): Record<string, SqlValue>[];
  exec(sql: string, options: { bind: SqlValue[] }): unknown;
  prepare(sql: string): Statement;
  close(): void;
}

/**
 * Run `statements` in one transaction. When one fails, the error reported is the failure's own:
 * SQLite may have rolled the transaction back already (a full disk does), and the `ROLLBACK`
 * that then finds none must not hide why. A `ROLLBACK` that fails otherwise leaves the
 * transaction open, so it is reported, naming the failure (its `cause`) too.
 */
export function batch(database: Database, prepared: Map<string, Statement>, statements: SqlStatement[]): void {
  database.exec("BEGIN", { bind: [] });
  try {
    for (const [sql, params] of statements) {
      // The layout's `CREATE` and `PRAGMA` run once: only parameterized statements are kept.
      if (params.length === 0) {
        database.exec(sql, { bind: params });
        continue;
      }
      let statement = prepared.get(sql);
      if (!statement) prepared.set(sql, (statement = database.prepare(sql)));
      statement.bind(params).stepReset().clearBindings();
    }
    database.exec("COMMIT", { bind: [] });
  } catch (error) {
    // A statement whose step failed is left unreset, and SQLite refuses to bind it again
    // (`SQLITE_MISUSE`), which would fail every later write: the next batch compiles afresh.
    for (const statement of prepared.values()) statement.finalize();
    prepared.clear();
    try {
      database.exec("ROLLBACK", { bind: [] });
    } catch (rollback) {
      if (!/no transaction is active/.test(message(rollback))) {
        throw new Error(`ROLLBACK failed (${message(rollback)}) after the batch failed: ${message(error)}`, { cause: error });
      }
    }
    throw error;
  }
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
