/**
 * The dedicated worker of `webSqlitePersistence`: SQLite in WebAssembly (`@sqlite.org/sqlite-wasm`)
 * on the origin-private file system through the `opfs-sahpool` VFS, which needs no cross-origin
 * isolation headers but only runs in a worker and holds its files exclusively. The page speaks
 * to it by messages (`WorkerRequest`, `WorkerReply` in `web-sqlite.ts`): a `probe` (is there an
 * OPFS with sync access handles?), one `open` when the store is first used, then `execute` and
 * `batch` as `SqlExecutor` has them, each answered by its `id`.
 *
 * A database is held by one worker at a time: the worker takes the Web Lock named after the
 * database before it opens the files, and keeps it until it ends. A page that reloads waits
 * for its previous worker's lock (and retries the VFS while the old handles close); another tab
 * that holds the database is reported as `busy` after `busyTimeoutMs`.
 */

import sqlite3InitModule from "@sqlite.org/sqlite-wasm";

import { batch, type Database, type Statement } from "./sqlite-batch.js";
import type { WorkerReply, WorkerRequest } from "./web-sqlite.js";

const scope = globalThis as unknown as {
  onmessage: ((event: MessageEvent<WorkerRequest>) => void) | null;
  postMessage(message: WorkerReply): void;
};

let db: Database | undefined;
/** The batches' statements, compiled once: a pull page repeats a handful of them per row. */
const prepared = new Map<string, Statement>();

scope.onmessage = (event) => void handle(event.data);

async function handle(request: WorkerRequest): Promise<void> {
  if (request.type === "probe") {
    scope.postMessage(probe());
    return;
  }
  if (request.type === "open") {
    scope.postMessage(await open(request.name, request.busyTimeoutMs));
    return;
  }
  try {
    if (!db) throw new Error("the database is not open");
    if (request.type === "execute") {
      const rows = db.exec({ sql: request.sql, bind: request.params, rowMode: "object", returnValue: "resultRows" });
      scope.postMessage({ type: "done", id: request.id, rows });
    } else if (request.type === "batch") {
      batch(db, prepared, request.statements);
      scope.postMessage({ type: "done", id: request.id, rows: [] });
    } else {
      for (const statement of prepared.values()) statement.finalize();
      prepared.clear();
      db.close();
      db = undefined;
      scope.postMessage({ type: "done", id: request.id, rows: [] });
    }
  } catch (error) {
    scope.postMessage({ type: "error", id: request.id, message: error instanceof Error ? error.message : String(error) });
  }
}

/** Whether this browser has an origin-private file system with sync access handles. */
function probe(): WorkerReply {
  const storage = (navigator as Navigator & { storage?: { getDirectory?: unknown } }).storage;
  const handles = (globalThis as { FileSystemFileHandle?: { prototype: object } }).FileSystemFileHandle;
  if (typeof storage?.getDirectory !== "function" || !handles || !("createSyncAccessHandle" in handles.prototype)) {
    return { type: "unavailable", reason: "this browser has no origin-private file system with sync access handles" };
  }
  return { type: "available" };
}

/** Open the database `name` in a pool of its own (one directory and VFS per database). */
async function open(name: string, busyTimeoutMs: number): Promise<WorkerReply> {
  const probed = probe();
  if (probed.type !== "available") return probed;
  if (!(await holdLock(`engine-sqlite:${name}`, busyTimeoutMs))) return { type: "busy" };
  try {
    const sqlite3 = await sqlite3InitModule();
    const safe = name.replace(/[^A-Za-z0-9_-]/g, "_");
    let lastError: unknown;
    // The handles of a worker that just ended (a reload) close a moment after its lock is free.
    for (let attempt = 0; attempt < 50; attempt++) {
      try {
        const pool = await sqlite3.installOpfsSAHPoolVfs({
          name: `engine-${safe}`,
          directory: `.engine-sqlite/${safe}`,
          forceReinitIfPreviouslyFailed: true,
        } as Parameters<typeof sqlite3.installOpfsSAHPoolVfs>[0]);
        db = new pool.OpfsSAHPoolDb(`/${safe}.sqlite3`) as unknown as Database;
        // 16 MiB of page cache (2 MiB by default): a pull page rewrites rows all over the tables.
        db.exec("PRAGMA cache_size = -16384", { bind: [] });
        return { type: "opened" };
      } catch (error) {
        lastError = error;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    throw lastError;
  } catch (error) {
    return { type: "failed", message: error instanceof Error ? error.message : String(error) };
  }
}

/** Take the Web Lock `name` for the rest of the worker's life; false if it stays held for `timeoutMs`. */
function holdLock(name: string, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    navigator.locks
      .request(name, { signal: AbortSignal.timeout(timeoutMs) }, () => {
        resolve(true);
        return new Promise<never>(() => undefined);
      })
      .catch(() => resolve(false));
  });
}
