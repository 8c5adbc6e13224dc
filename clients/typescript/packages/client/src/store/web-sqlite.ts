/**
 * `webSqlitePersistence`: the store on SQLite in WebAssembly, on the origin-private file system
 * (OPFS), in a dedicated worker (`sqlite-worker.ts`). The store's SQL is `sqliteStore`'s, run on
 * the page over a `SqlExecutor` whose calls are messages to the worker. Where the browser has no
 * OPFS with sync access handles, or the worker does not start, the store is the `fallback`
 * (IndexedDB, as the app names it).
 *
 * The worker holds the database exclusively: a second tab of the same database waits
 * `busyTimeoutMs` for it and then fails with `StoreBusyError` (one client across tabs is not
 * built yet; the app decides what such a tab keeps, e.g. `memoryStore()`).
 */

import { sqliteStore, type SqlExecutor, type SqlStatement, type SqlValue } from "./sqlite.js";
import type { ClientStore } from "./types.js";

/** What the page asks the worker. */
export type WorkerRequest =
  | { type: "open"; name: string; busyTimeoutMs: number }
  | { type: "execute"; id: number; sql: string; params: SqlValue[] }
  | { type: "batch"; id: number; statements: SqlStatement[] }
  | { type: "close"; id: number };

/** What the worker answers. */
export type WorkerReply =
  | { type: "opened" }
  | { type: "unavailable"; reason: string }
  | { type: "busy" }
  | { type: "failed"; message: string }
  | { type: "done"; id: number; rows: Record<string, SqlValue>[] }
  | { type: "error"; id: number; message: string };

/** How `webSqlitePersistence` opens its database. */
export interface WebSqliteOptions {
  /** The database's name: one per user and app (the client refuses another user's store). */
  name: string;
  /**
   * The store where the browser has no OPFS with sync access handles, e.g.
   * `() => indexedDbStore(name)`. Without one, such a browser gets an error.
   */
  fallback?: () => ClientStore;
  /** How long to wait for another tab that holds the database (3 s by default). */
  busyTimeoutMs?: number;
  /**
   * Start the worker (by default the package's `sqlite-worker.js` as a module worker). An app
   * whose bundler does not follow `new URL(…, import.meta.url)` into dependencies builds it itself.
   */
  worker?: () => Worker;
}

/** The store `webSqlitePersistence` opened: `opfs` is false when it is the fallback. */
export interface WebSqliteStore extends ClientStore {
  readonly opfs: boolean;
  clear(): Promise<void>;
}

/** Another tab holds the database. */
export class StoreBusyError extends Error {
  constructor(name: string) {
    super(`the database \`${name}\` is open in another tab`);
    this.name = "StoreBusyError";
  }
}

/**
 * The store in the SQLite database `options.name` on OPFS, or `options.fallback()` where the
 * browser has no OPFS (IndexedDB remains the store there). Rejects with `StoreBusyError` when
 * another tab holds the database.
 */
export async function webSqlitePersistence(options: WebSqliteOptions): Promise<WebSqliteStore> {
  const worker = options.worker?.() ?? new Worker(new URL("./sqlite-worker.js", import.meta.url), { type: "module" });
  const pending = new Map<number, { resolve(rows: Record<string, SqlValue>[]): void; reject(error: Error): void }>();
  const opened = new Promise<WorkerReply>((resolve) => {
    worker.onmessage = (event: MessageEvent<WorkerReply>) => {
      const reply = event.data;
      if (reply.type === "done" || reply.type === "error") {
        const call = pending.get(reply.id);
        pending.delete(reply.id);
        if (reply.type === "done") call?.resolve(reply.rows);
        else call?.reject(new Error(`SQLite: ${reply.message}`));
      } else resolve(reply);
    };
    // A worker that does not start (refused, or a browser without module workers) is no OPFS.
    worker.onerror = (event) => resolve({ type: "unavailable", reason: `the SQLite worker did not start: ${event.message || "no reason given"}` });
  });
  worker.postMessage({ type: "open", name: options.name, busyTimeoutMs: options.busyTimeoutMs ?? 3_000 } satisfies WorkerRequest);
  const reply = await opened;
  if (reply.type !== "opened") {
    worker.terminate();
    if (reply.type === "busy") throw new StoreBusyError(options.name);
    if (reply.type === "unavailable" && options.fallback) {
      const fallback = options.fallback();
      return {
        opfs: false,
        load: () => fallback.load(),
        write: (change) => fallback.write(change),
        close: () => fallback.close(),
        clear: async () => fallback.clear?.(),
      };
    }
    throw new Error(reply.type === "unavailable" ? reply.reason : `SQLite did not open: ${reply.type === "failed" ? reply.message : reply.type}`);
  }
  let next = 0;
  const call = (request: WorkerRequest & { id: number }) =>
    new Promise<Record<string, SqlValue>[]>((resolve, reject) => {
      pending.set(request.id, { resolve, reject });
      worker.postMessage(request);
    });
  const executor: SqlExecutor = {
    execute: (sql, params = []) => call({ type: "execute", id: next++, sql, params }),
    batch: async (statements) => void (await call({ type: "batch", id: next++, statements })),
    close: async () => {
      await call({ type: "close", id: next++ });
      worker.terminate();
    },
  };
  return { opfs: true, ...sqliteStore(executor) };
}
