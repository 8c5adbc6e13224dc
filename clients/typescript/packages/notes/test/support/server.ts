/**
 * A real `example-notes` server process for a test: a fresh database, a port of its own, a
 * signing secret of its own, and development tokens from the binary's `token` command. It can
 * be stopped and started again on the same port and database, as a restart would.
 */

import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";

import { inject } from "vitest";

const POSTGRES = "postgres://postgres@127.0.0.1:5432";
const LISTENING = /notes app on http:\/\/([0-9.]+):(\d+)/;

export interface ServerOptions {
  /** More environment for the server (`ENGINE_RATE_LIMIT`, …). */
  env?: Record<string, string>;
}

export class NotesServer {
  private process: ChildProcess | undefined;
  private output = "";
  port = 0;

  private constructor(
    private readonly bin: string,
    readonly database: string,
    private readonly secret: string,
    private readonly env: Record<string, string>,
  ) {}

  /** A server on a fresh database, listening. */
  static async start(options: ServerOptions = {}): Promise<NotesServer> {
    const database = `engine_ts_${randomBytes(6).toString("hex")}`;
    const server = new NotesServer(inject("notesBin"), database, randomBytes(24).toString("hex"), options.env ?? {});
    await server.launch();
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
        DATABASE_URL: `${POSTGRES}/${this.database}`,
        ENGINE_SECRET: this.secret,
        ENGINE_RATE_LIMIT: "0",
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
        const match = LISTENING.exec(this.output.replace(/\x1b\[[0-9;]*m/g, ""));
        if (match && this.port === 0) this.port = Number(match[2]);
        if (match) resolve();
      };
      child.stdout!.on("data", read);
      child.stderr!.on("data", read);
      child.once("exit", (code) => reject(new Error(`the notes server exited (${code}):\n${this.output}`)));
    });
    this.output = "";
    await listening;
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

  /** Stop, and drop the database. */
  async dispose(): Promise<void> {
    await this.stop();
    spawnSync("psql", ["-h", "127.0.0.1", "-U", "postgres", "-d", "postgres", "-q", "-c", `DROP DATABASE IF EXISTS "${this.database}" WITH (FORCE)`], {
      stdio: "ignore",
    });
  }
}
