/**
 * A real `example-notes` server process for a test: a fresh database, a port of its own, a
 * signing secret of its own, a blob directory of its own, and development tokens from the
 * binary's `token` command. It can be stopped and started again on the same port, database and
 * blobs, as a restart would.
 *
 * `ENGINE_TEST_BACKEND` picks the store of every server of a run (read once, by
 * `global-setup.ts`):
 * - `postgres` (the default): a fresh database on the Postgres server at 127.0.0.1:5432 (user
 *   `postgres`, trust), dropped by `dispose`;
 * - `sqlite`: a fresh file in a temporary directory of its own, removed by `dispose`.
 * A server on SQLite must say at start-up that it opened that file, so that a run meant for
 * SQLite cannot pass on Postgres. A test about a Postgres mechanism skips itself on SQLite with
 * `test.skipIf(backend() === "sqlite")` and says why.
 */

import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { inject } from "vitest";

import type { Backend } from "./global-setup.js";

const POSTGRES = "postgres://postgres@127.0.0.1:5432";
const LISTENING = /notes app on http:\/\/([0-9.]+):(\d+)/;

/** `text` without its terminal colours, which a log line may carry despite `NO_COLOR`. */
const plain = (text: string) => text.replace(/\x1b\[[0-9;]*m/g, "");

/** The store the servers of this run are on. */
export const backend = (): Backend => inject("backend");

/** Where a server keeps its rows: a Postgres database, or a SQLite file in a directory of its own. */
type Store = { backend: "postgres"; url: string } | { backend: "sqlite"; url: string; file: string; directory: string };

/** A fresh store named `name` on `backend`. */
function freshStore(backend: Backend, name: string): Store {
  if (backend === "postgres") return { backend, url: `${POSTGRES}/${name}` };
  const directory = mkdtempSync(join(tmpdir(), "engine-ts-"));
  const file = join(directory, `${name}.db`);
  return { backend, url: `sqlite://${file}`, file, directory };
}

export interface ServerOptions {
  /** More environment for the server (`ENGINE_RATE_LIMIT`, …). */
  env?: Record<string, string>;
}

export class NotesServer {
  private process: ChildProcess | undefined;
  private output = "";
  port = 0;
  /** Where the server keeps blobs (`ENGINE_BLOB_DIR`), removed by `dispose`. */
  readonly blobDir = mkdtempSync(join(tmpdir(), "engine-ts-blobs-"));

  private constructor(
    private readonly bin: string,
    /** A name of this server's own: the Postgres database's, or the SQLite file's. */
    readonly database: string,
    private readonly store: Store,
    private readonly secret: string,
    private readonly env: Record<string, string>,
  ) {}

  /** A server on a fresh database, listening. */
  static async start(options: ServerOptions = {}): Promise<NotesServer> {
    const database = `engine_ts_${randomBytes(6).toString("hex")}`;
    const store = freshStore(backend(), database);
    const server = new NotesServer(inject("notesBin"), database, store, randomBytes(24).toString("hex"), options.env ?? {});
    try {
      await server.launch();
    } catch (error) {
      // A server that started on the wrong store, or did not start: nothing of it stays.
      await server.dispose();
      throw error;
    }
    return server;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  private async launch(): Promise<void> {
    const child = spawn(this.bin, ["serve"], {
      env: {
        ...process.env,
        PORT: String(this.port),
        HOST: "127.0.0.1",
        DATABASE_URL: this.store.url,
        ENGINE_SECRET: this.secret,
        ENGINE_RATE_LIMIT: "0",
        ENGINE_BLOB_DIR: this.blobDir,
        RUST_LOG: "info,sqlx=warn",
        NO_COLOR: "1",
        ...this.env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.process = child;
    const listening = new Promise<void>((resolve, reject) => {
      const read = (chunk: Buffer) => {
        this.output += chunk.toString();
        const match = LISTENING.exec(plain(this.output));
        if (match && this.port === 0) this.port = Number(match[2]);
        if (match) resolve();
      };
      child.stdout!.on("data", read);
      child.stderr!.on("data", read);
      child.once("exit", (code) => reject(new Error(`the notes server exited (${code}):\n${this.output}`)));
    });
    this.output = "";
    await listening;
    const store = this.store;
    if (store.backend === "sqlite" && !plain(this.output).includes(`opened the SQLite store path=${store.file}`)) {
      throw new Error(`the notes server did not say it serves from ${store.file}:\n${this.output}`);
    }
  }

  /** A development token for `user` (owner id `owner`, the user's by default), valid for `ttlSeconds`. */
  token(user: string, owner: string = user, ttlSeconds = 3600): string {
    const run = spawnSync(this.bin, ["token", "--user", user, "--owner", owner, "--ttl", String(ttlSeconds)], {
      env: { ...process.env, ENGINE_SECRET: this.secret },
      encoding: "utf8",
    });
    if (run.status !== 0) throw new Error(`example-notes token failed: ${run.stderr}`);
    return run.stdout.trim();
  }

  /** `/engine/stats` (an admin's token asks): the mutations applied and the sockets open, among others. */
  async stats(): Promise<{ appliedMutations: number; sockets: number }> {
    const run = spawnSync(this.bin, ["token", "--user", "operator", "--admin"], {
      env: { ...process.env, ENGINE_SECRET: this.secret },
      encoding: "utf8",
    });
    if (run.status !== 0) throw new Error(`example-notes token failed: ${run.stderr}`);
    const response = await fetch(`${this.url}/engine/stats`, { headers: { authorization: `Bearer ${run.stdout.trim()}` } });
    if (!response.ok) throw new Error(`/engine/stats: HTTP ${response.status}: ${await response.text()}`);
    return (await response.json()) as { appliedMutations: number; sockets: number };
  }

  /** Freeze the process (`SIGSTOP`): it keeps its connections and accepts new ones, and answers nothing. */
  freeze(): void {
    this.process?.kill("SIGSTOP");
  }

  /** Let a frozen process run again (`SIGCONT`). */
  thaw(): void {
    this.process?.kill("SIGCONT");
  }

  /** Stop the process (the database stays). */
  async stop(): Promise<void> {
    const child = this.process;
    this.process = undefined;
    if (!child || child.exitCode !== null) return;
    const exited = once(child, "exit");
    child.kill("SIGTERM");
    // A frozen process takes the signal once it runs again.
    child.kill("SIGCONT");
    await exited;
  }

  /** Start again on the same port and database. */
  async restart(): Promise<void> {
    await this.stop();
    await this.launch();
  }

  /** Stop, and drop the database or remove the file, and remove the blobs. */
  async dispose(): Promise<void> {
    await this.stop();
    rmSync(this.blobDir, { recursive: true, force: true });
    if (this.store.backend === "sqlite") {
      rmSync(this.store.directory, { recursive: true, force: true });
      return;
    }
    spawnSync("psql", ["-h", "127.0.0.1", "-U", "postgres", "-d", "postgres", "-q", "-c", `DROP DATABASE IF EXISTS "${this.database}" WITH (FORCE)`], {
      stdio: "ignore",
    });
  }
}
