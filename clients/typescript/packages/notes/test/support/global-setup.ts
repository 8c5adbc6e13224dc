/**
 * Once per test run: the binaries the tests start, built by cargo from this repository — the
 * `example-notes` server (or the one `ENGINE_NOTES_BIN` names, already built) and the Rust
 * client that edits note bodies (`engine-body-editor`, or `ENGINE_BODY_EDITOR_BIN`) — and the
 * store the notes servers are on, which `ENGINE_TEST_BACKEND` names (`postgres`, the default,
 * or `sqlite`; see `server.ts`).
 */

import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

import type { TestProject } from "vitest/node";

/** The stores a notes server can be on. */
export type Backend = "postgres" | "sqlite";

declare module "vitest" {
  export interface ProvidedContext {
    notesBin: string;
    bodyEditorBin: string;
    backend: Backend;
  }
}

/** The repository's root. */
export const repositoryRoot = fileURLToPath(new URL("../../../../../../", import.meta.url));

/** Build binary `bin` of package `crate` and return its path. */
function build(crate: string, bin: string): string {
  const cargo = spawnSync("cargo", ["build", "-p", crate, "--bin", bin, "--message-format=json-render-diagnostics"], {
    cwd: repositoryRoot,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
    maxBuffer: 64 * 1024 * 1024,
  });
  if (cargo.status !== 0) throw new Error(`cargo build -p ${crate} --bin ${bin} failed (${cargo.status})`);
  for (const line of cargo.stdout.split("\n")) {
    if (!line.startsWith("{")) continue;
    const message = JSON.parse(line) as { reason?: string; target?: { name?: string }; executable?: string | null };
    if (message.reason === "compiler-artifact" && message.target?.name === bin && message.executable) {
      return message.executable;
    }
  }
  throw new Error(`cargo built no ${bin} binary`);
}

/** The path `variable` names, or the binary built. */
function binary(variable: string, crate: string, bin: string): string {
  const path = process.env[variable] ?? build(crate, bin);
  if (!existsSync(path)) throw new Error(`no ${bin} at ${path}`);
  return path;
}

/** The store `ENGINE_TEST_BACKEND` names; a name it does not know stops the run. */
function backend(): Backend {
  const name = process.env.ENGINE_TEST_BACKEND || "postgres";
  if (name !== "postgres" && name !== "sqlite") {
    throw new Error(`ENGINE_TEST_BACKEND=${name}: use \`postgres\` or \`sqlite\``);
  }
  return name;
}

export default function setup(project: TestProject): void {
  project.provide("backend", backend());
  project.provide("notesBin", binary("ENGINE_NOTES_BIN", "example-notes", "example-notes"));
  project.provide("bodyEditorBin", binary("ENGINE_BODY_EDITOR_BIN", "engine-tests", "engine-body-editor"));
}
