/**
 * The web SQLite worker's batch (`src/store/sqlite-batch.ts`) on better-sqlite3 in the oo1 API's
 * shape: a failed batch reports its own error whether or not SQLite rolled back already, and a
 * `ROLLBACK` that fails otherwise is reported with the batch's error as its cause.
 */

import Sqlite from "better-sqlite3";
import { expect, test } from "vitest";

import { batch, type Database, type Statement } from "../src/store/sqlite-batch.js";
import type { SqlValue } from "../src/store/sqlite.js";

/** `sqlite` as the oo1 API's database; `failRollback` makes its `ROLLBACK` throw instead. */
function oo1(sqlite: Sqlite.Database, failRollback?: Error): Database {
  const exec = (sql: string, options: { bind: SqlValue[] }) => {
    if (sql === "ROLLBACK" && failRollback) throw failRollback;
    return sqlite.prepare(sql).run(...options.bind);
  };
  return {
    exec: exec as Database["exec"],
    prepare(sql) {
      const prepared = sqlite.prepare(sql);
      let bound: SqlValue[] = [];
      const statement: Statement = {
        bind: (params) => ((bound = params), statement),
        stepReset: () => (prepared.run(...bound), statement),
        clearBindings: () => ((bound = []), statement),
        finalize: () => undefined,
      };
      return statement;
    },
    close: () => sqlite.close(),
  };
}

function fresh(): Sqlite.Database {
  const sqlite = new Sqlite(":memory:");
  sqlite.exec("CREATE TABLE t (id INTEGER PRIMARY KEY)");
  return sqlite;
}

const count = (sqlite: Sqlite.Database) => (sqlite.prepare("SELECT count(*) AS n FROM t").get() as { n: number }).n;

test("a failed batch is rolled back and reports its own error", () => {
  const sqlite = fresh();
  const run = () => batch(oo1(sqlite), new Map(), [["INSERT INTO t VALUES (?)", [1]], ["INSERT INTO t VALUES (?)", [1]]]);
  expect(run).toThrow(/UNIQUE constraint failed/);
  expect(count(sqlite)).toBe(0);
  expect(sqlite.inTransaction).toBe(false);
});

test("a ROLLBACK that finds no transaction does not hide the batch's error", () => {
  const sqlite = fresh();
  // The transaction ends before the failure, as when SQLite rolls back by itself.
  const statements: [string, SqlValue[]][] = [["ROLLBACK", []], ["INSERT INTO missing VALUES (?)", [1]]];
  expect(() => batch(oo1(sqlite), new Map(), statements)).toThrow(/no such table: missing/);
});

test("a ROLLBACK that fails otherwise is reported, with the batch's error as its cause", () => {
  const sqlite = fresh();
  const prepared = new Map<string, Statement>();
  let thrown: unknown;
  try {
    batch(oo1(sqlite, new Error("disk I/O error")), prepared, [["INSERT INTO missing VALUES (?)", [1]]]);
  } catch (error) {
    thrown = error;
  }
  expect(thrown).toBeInstanceOf(Error);
  expect((thrown as Error).message).toMatch(/^ROLLBACK failed \(disk I\/O error\) after the batch failed: .*no such table: missing/);
  expect(((thrown as Error).cause as Error).message).toMatch(/no such table: missing/);
  expect(prepared.size).toBe(0);
});
