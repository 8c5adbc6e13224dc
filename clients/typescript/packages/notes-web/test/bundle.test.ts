/**
 * The web app `cargo run -p example-notes` serves is the committed bundle in
 * `examples/notes/web`: it must equal a fresh build of this package. `UPDATE_SNAPSHOTS=1` writes
 * the fresh build there instead.
 */

import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

import { build } from "vite";
import { expect, test } from "vitest";

const config = fileURLToPath(new URL("../vite.config.ts", import.meta.url));
const committed = fileURLToPath(new URL("../../../../../examples/notes/web", import.meta.url));

test("the committed web bundle equals a fresh build", async () => {
  const update = process.env.UPDATE_SNAPSHOTS === "1";
  const out = update ? committed : mkdtempSync(join(tmpdir(), "notes-web-"));
  try {
    await build({ configFile: config, logLevel: "silent", build: { outDir: out, emptyOutDir: true } });
    const fresh = readdirSync(out).sort();
    expect(readdirSync(committed).sort(), "the same files").toEqual(fresh);
    for (const file of fresh) {
      const same = readFileSync(join(out, file)).equals(readFileSync(join(committed, file)));
      expect(same, `examples/notes/web/${file} is stale: run the test with UPDATE_SNAPSHOTS=1`).toBe(true);
    }
  } finally {
    if (!update) rmSync(out, { recursive: true, force: true });
  }
});
