/**
 * `webSqlitePersistence`: the store on SQLite in WebAssembly, on the origin-private file system
 * (OPFS), in a dedicated worker (`sqlite-worker.ts`). The store's SQL is `sqliteStore`'s, run on
 * the page over a `SqlExecutor` whose calls are messages to the worker. Where the browser has no
 * OPFS with sync access handles, or the worker does not start, the store is the `fallback`
 * (IndexedDB, as the app names it).
 *
 * The worker holds the database exclusively, so the database opens on the store's first use
 * (`load`, `write`, `clear`), not before: the tabs of one user share one client over the store
 * (its `sharedName`), and only the leading tab uses it (`client/tabs.ts`); the others never open
 * it. A tab that uses it while another holds it waits `busyTimeoutMs` and then fails with
 * `StoreBusyError`.
 */

import { sqliteStore, type SqlExecutor, type SqlStatement, type SqlValue } from "./sqlite.js";
import type { ClientStore } from "./types.js";

/** What the page asks the worker. */
export type WorkerRequest =
  | { type: "probe" }
  | { type: "open"; name: string; busyTimeoutMs: number }
  | { type: "execute"; id: number; sql: string; params: SqlValue[] }
  | { type: "batch"; id: number; statements: SqlStatement[] }
  | { type: "close"; id: number };

/** What the worker answers. */
export type WorkerReply =
  | { type: "available" }
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
  /** How long to wait, on opening, for another tab that holds the database (3 s by default). */
  busyTimeoutMs?: number;
  /**
   * Start the worker (by default the package's `sqlite-worker.js` as a module worker). An app
   * whose bundler does not follow `new URL(…, import.meta.url)` into dependencies builds it itself.
   */
  worker?: () => Worker;
  /**
   * Runs once the database is open, before the store's first use is answered: e.g. moving an
   * older store in (`migrateClientStore(old, store)`), done by the one tab that opens it.
   */
  opened?: (store: ClientStore) => Promise<void>;
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
 * The store in the SQLite database `options.name` on OPFS, opened on its first use, or
 * `options.fallback()` where the browser has no OPFS (IndexedDB remains the store there). Its
 * first use rejects with `StoreBusyError` when another tab holds the database.
 */
export async function webSqlitePersistence(options: WebSqliteOptions): Promise<WebSqliteStore> {
  const worker = options.worker?.() ?? new Worker(new URL("./sqlite-worker.js", import.meta.url), { type: "module" });
  const pending = new Map<number, { resolve(rows: Record<string, SqlValue>[]): void; reject(error: Error): void }>();
  let answer: ((reply: WorkerReply) => void) | undefined;
  worker.onmessage = (event: MessageEvent<WorkerReply>) => {
    const reply = event.data;
    if (reply.type === "done" || reply.type === "error") {
      const call = pending.get(reply.id);
      pending.delete(reply.id);
      if (reply.type === "done") call?.resolve(reply.rows);
      else call?.reject(new Error(`SQLite: ${reply.message}`));
    } else answer?.(reply);
  };
  // A worker that does not start (refused, or a browser without module workers) is no OPFS.
  worker.onerror = (event) => answer?.({ type: "unavailable", reason: `the SQLite worker did not start: ${event.message || "no reason given"}` });
  const ask = (request: WorkerRequest) =>
    new Promise<WorkerReply>((resolve) => {
      answer = resolve;
      worker.postMessage(request);
    });
  const probe = await ask({ type: "probe" });
  if (probe.type !== "available") {
    worker.terminate();
    if (probe.type === "unavailable" && options.fallback) {
      const fallback = options.fallback();
      return {
        opfs: false,
        sharedName: fallback.sharedName,
        load: () => fallback.load(),
        write: (change) => fallback.write(change),
        close: () => fallback.close(),
        clear: async () => fallback.clear?.(),
      };
    }
    throw new Error(probe.type === "unavailable" ? probe.reason : `the SQLite worker answered ${probe.type}`);
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
  let opening: Promise<ReturnType<typeof sqliteStore>> | undefined;
  const open = () =>
    (opening ??= (async () => {
      const reply = await ask({ type: "open", name: options.name, busyTimeoutMs: options.busyTimeoutMs ?? 3_000 });
      if (reply.type === "busy") throw new StoreBusyError(options.name);
      if (reply.type !== "opened") throw new Error(`SQLite did not open: ${reply.type === "failed" ? reply.message : reply.type}`);
      const store = sqliteStore(executor);
      await options.opened?.(store);
      return store;
    })().catch((error: unknown) => {
      // A database another tab held may be free by the next use.
      opening = undefined;
      throw error;
    }));
  return {
    opfs: true,
    sharedName: `sqlite ${options.name}`,
    load: async () => (await open()).load(),
    write: async (change) => (await open()).write(change),
    clear: async () => (await open()).clear(),
    close: async () => {
      const store = await opening?.catch(() => undefined);
      if (store) await store.close();
      else worker.terminate();
    },
  };
}
