/**
 * A SQLite database file through `better-sqlite3` behind the asynchronous `SqlExecutor` that
 * `mobileSqlitePersistence` takes, as React Native's `op-sqlite` and `expo-sqlite` are adapted:
 * the store's SQL runs on a real SQLite, in a file a later process opens again.
 */

import Database from "better-sqlite3";

import type { SqlExecutor } from "@engine/client";

/** The database in the file `path` (created when missing). */
export function betterSqlite(path: string): SqlExecutor {
  const db = new Database(path);
  return {
    async execute(sql, params = []) {
      const statement = db.prepare(sql);
      if (statement.reader) return statement.all(...params) as Record<string, string | number | null>[];
      statement.run(...params);
      return [];
    },
    async batch(statements) {
      db.transaction(() => {
        for (const [sql, params] of statements) db.prepare(sql).run(...params);
      })();
    },
    async close() {
      db.close();
    },
  };
}
