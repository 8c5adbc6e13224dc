/**
 * Once per test run: the `example-notes` binary the tests start servers of, built by cargo from
 * this repository (or the one `ENGINE_NOTES_BIN` names, already built).
 */

import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

import type { TestProject } from "vitest/node";

declare module "vitest" {
  export interface ProvidedContext {
    notesBin: string;
  }
}

/** The repository's root. */
export const repositoryRoot = fileURLToPath(new URL("../../../../../../", import.meta.url));

function build(): string {
  const cargo = spawnSync("cargo", ["build", "-p", "example-notes", "--message-format=json-render-diagnostics"], {
    cwd: repositoryRoot,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
    maxBuffer: 64 * 1024 * 1024,
  });
  if (cargo.status !== 0) throw new Error(`cargo build -p example-notes failed (${cargo.status})`);
  for (const line of cargo.stdout.split("\n")) {
    if (!line.startsWith("{")) continue;
    const message = JSON.parse(line) as { reason?: string; target?: { name?: string }; executable?: string | null };
    if (message.reason === "compiler-artifact" && message.target?.name === "example-notes" && message.executable) {
      return message.executable;
    }
  }
  throw new Error("cargo built no example-notes binary");
}

export default function setup(project: TestProject): void {
  const bin = process.env.ENGINE_NOTES_BIN ?? build();
  if (!existsSync(bin)) throw new Error(`no notes server at ${bin}`);
  project.provide("notesBin", bin);
}
