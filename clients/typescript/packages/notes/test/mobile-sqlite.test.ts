/**
 * `mobileSqlitePersistence` on a real SQLite (`better-sqlite3` behind the asynchronous
 * `SqlExecutor`, as React Native's libraries are adapted) and a real notes server: an app killed
 * with SIGKILL while its outbox drains loses no queued write, and the restarted app pushes each
 * of them exactly once; a database of a newer layout is refused. (Writes queued offline surviving
 * a restart: `store.test.ts`, for each store.)
 */

import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

import { ClientStoreVersionError, type MutationResult, type PushRequest } from "@engine/client";
import { createEngineNativeClient, mobileSqlitePersistence } from "@engine/mobile";
import { build } from "vite";
import { afterAll, beforeAll, describe, expect, test } from "vitest";

import { mutators, schema, type Mutators, type Tables } from "../src/contract.gen.js";
import { optimistic } from "../src/optimistic.js";
import { notesClient } from "./support/clients.js";
import { useNotesServer } from "./support/lifecycle.js";
import { Proxy } from "./support/proxy.js";
import { betterSqlite } from "./support/sqlite.js";

const notes = useNotesServer();

const workspace = fileURLToPath(new URL("../../../", import.meta.url));
let directory: string;
let program: string;

beforeAll(async () => {
  directory = mkdtempSync(join(tmpdir(), "engine-mobile-sqlite-"));
  // The child runs plain JavaScript: the app built from `support/killed-app.ts`, next to the
  // workspace's `node_modules` so that `better-sqlite3` resolves from it.
  const out = join(workspace, "node_modules", ".engine-test", `killed-app-${process.pid}`);
  mkdirSync(out, { recursive: true });
  await build({
    configFile: false,
    logLevel: "silent",
    resolve: { tsconfigPaths: true },
    ssr: { noExternal: [/^@engine\//] },
    build: {
      ssr: fileURLToPath(new URL("./support/killed-app.ts", import.meta.url)),
      outDir: out,
      emptyOutDir: true,
      target: "node20",
      rollupOptions: { output: { entryFileNames: "killed-app.mjs" } },
    },
  });
  program = join(out, "killed-app.mjs");
});

afterAll(() => {
  rmSync(directory, { recursive: true, force: true });
  rmSync(join(program, ".."), { recursive: true, force: true });
});

/** A native client of `user` over the database file `file`. */
function phone(url: string, user: string, file: string) {
  return createEngineNativeClient<Tables, Mutators>({
    url,
    schema,
    auth: notes().token(user),
    optimistic,
    realtime: false,
    background: false,
    retry: { backoffBaseMs: 20, backoffMaxMs: 500 },
    database: betterSqlite(file),
  });
}

describe("mobileSqlitePersistence", () => {
  test("an app killed with SIGKILL mid-outbox loses no queued write and pushes each once", { timeout: 120_000 }, async () => {
    const file = join(directory, "killed.db");
    const count = 20;
    const proxy = await Proxy.start(notes().url);
    // The server's answer to each mutation, and the requests whose answer never came back.
    const results: MutationResult[] = [];
    const lost: PushRequest[] = [];
    let pushes = 0;
    let kill: () => void = () => undefined;
    proxy.plan((path, body) => {
      if (!path.startsWith("/sync/push")) return { forward: true };
      pushes += 1;
      if (pushes === 6) {
        // The server applies the sixth; the app dies before it hears so.
        kill();
        lost.push(body as PushRequest);
        return { forward: true, loseResponse: true };
      }
      return {
        forward: true,
        rewrite: (response) => {
          results.push(...(response as { results: MutationResult[] }).results);
          return response;
        },
      };
    });

    const child = spawn(process.execPath, [program], {
      env: { ...process.env, ENGINE_URL: proxy.url, ENGINE_TOKEN: notes().token("oli"), ENGINE_DB: file, ENGINE_NOTES: String(count) },
      stdio: ["ignore", "pipe", "inherit"],
    });
    kill = () => child.kill("SIGKILL");
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const exit = await new Promise<NodeJS.Signals | number | null>((resolve) =>
      child.on("exit", (code, signal) => resolve(signal ?? code)),
    );
    expect(exit).toBe("SIGKILL");
    expect(output).toBe("queued\n");
    expect(results.map((r) => r.status)).toEqual(["applied", "applied", "applied", "applied", "applied"]);

    // Restarted: every write not acknowledged is still queued, and goes out.
    const restarted = await phone(proxy.url, "oli", file);
    expect(restarted.get("lists", "killed")?.title).toBe("Killed mid-outbox");
    expect(restarted.rows("notes").length).toBe(count);
    await restarted.sync();
    expect(restarted.status.pending).toBe(0);
    await restarted.close();
    await proxy.stop();

    // The server: each of the 21 mutations applied exactly once (the one whose answer was lost is
    // a duplicate when it comes again), and the list holds each note once.
    const lostIds = lost.flatMap((request) => request.mutations.map((m) => m.clientMutationId));
    expect(lostIds).toHaveLength(1);
    const applied = [...results.filter((r) => r.status === "applied").map((r) => r.clientMutationId), ...lostIds];
    expect(new Set(applied).size).toBe(applied.length);
    expect(applied).toHaveLength(count + 1);
    expect(results.filter((r) => r.status === "duplicate").map((r) => r.clientMutationId)).toEqual(lostIds);
    const other = await notesClient(notes(), "oli");
    await other.pull();
    const titles = other.rows("notes").filter((n) => n.list_id === "killed").map((n) => n.title);
    expect(titles.sort()).toEqual(Array.from({ length: count }, (_, i) => `Note ${i}`).sort());
    await other.close();
  });

  test("a database written by a newer client is refused, not misread", async () => {
    const file = join(directory, "newer.db");
    const db = betterSqlite(file);
    await db.execute("PRAGMA user_version = 99");
    await expect(mobileSqlitePersistence(db).load()).rejects.toThrow(ClientStoreVersionError);
    await expect(phone(notes().url, "pia", file)).rejects.toThrow("written by a newer client (layout 99");
    await db.close?.();
  });
});
