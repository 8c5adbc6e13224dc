/**
 * The published packages as an app installs them: `npm run build` writes each package's `dist`,
 * `npm pack` packs `@engine/client`, `@engine/db-collection` and `@engine/mobile`, and a fresh
 * Node project outside the workspace installs the tarballs (no workspace links) and runs a plain
 * ESM program against a real notes server (`support/installed.mjs`).
 *
 * The install is offline: `npm ci --offline` with a lockfile that names the tarballs and, for
 * every other package, the version the workspace's lockfile holds, which the workspace's own
 * `npm ci` put in the npm cache. A fresh project's `npm install` would ask the registry for
 * each package's versions, which the cache does not keep.
 */

import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

import { afterAll, beforeAll, expect, test } from "vitest";

import { schema } from "../src/contract.gen.js";
import { useNotesServer } from "./support/lifecycle.js";

const notes = useNotesServer();

const workspace = fileURLToPath(new URL("../../../", import.meta.url));
const published = ["@engine/client", "@engine/db-collection", "@engine/mobile"];

/** An entry of a `package-lock.json`'s `packages`. */
interface Locked {
  version?: string;
  resolved?: string;
  integrity?: string;
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  [field: string]: unknown;
}

/** What `npm pack --json` says of one package. */
interface Packed {
  name: string;
  version: string;
  filename: string;
  files: { path: string }[];
}

const npm = (args: string[], cwd: string) =>
  execFileSync("npm", args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });

/**
 * The lockfile of a project depending on the tarballs `packed` (in its directory): theirs, and
 * the packages they need (dependencies and required peers, to the end) at the versions the
 * workspace's `lock` holds.
 */
function lockfile(project: string, packed: Packed[], lock: { packages: Record<string, Locked> }) {
  const packages: Record<string, Locked> = {};
  const wanted: string[] = [];
  const needs = (entry: Locked) => [
    ...Object.keys(entry.dependencies ?? {}),
    ...Object.keys(entry.peerDependencies ?? {}).filter((name) => !entry.peerDependenciesMeta?.[name]?.optional),
  ];
  const root: Record<string, string> = {};
  for (const pack of packed) {
    const manifest = JSON.parse(readFileSync(join(workspace, "node_modules", pack.name, "package.json"), "utf8")) as Locked;
    const tarball = readFileSync(join(project, pack.filename));
    root[pack.name] = `file:${pack.filename}`;
    packages[`node_modules/${pack.name}`] = {
      version: pack.version,
      resolved: `file:${pack.filename}`,
      integrity: `sha512-${createHash("sha512").update(tarball).digest("base64")}`,
      ...(manifest.dependencies ? { dependencies: manifest.dependencies } : {}),
      ...(manifest.peerDependencies ? { peerDependencies: manifest.peerDependencies } : {}),
    };
    wanted.push(...needs(manifest));
  }
  for (let name = wanted.pop(); name !== undefined; name = wanted.pop()) {
    const path = `node_modules/${name}`;
    if (packages[path]) continue;
    const entry = lock.packages[path];
    if (!entry?.version || entry.link) throw new Error(`the workspace's lockfile holds no ${name} from the registry`);
    if (Object.keys(lock.packages).some((other) => other.endsWith(`/${path}`))) {
      throw new Error(`the workspace's lockfile holds ${name} in several versions: pick the one needed`);
    }
    packages[path] = entry;
    wanted.push(...needs(entry));
  }
  const manifest = { name: "installed", private: true, type: "module", dependencies: root };
  return { manifest, lock: { name: "installed", lockfileVersion: 3, requires: true, packages: { "": manifest, ...packages } } };
}

let project: string;

beforeAll(() => {
  npm(["run", "build"], workspace);
  project = mkdtempSync(join(tmpdir(), "engine-installed-"));
  const packArgs = ["pack", "--json", "--ignore-scripts", "--pack-destination", project];
  const packed = JSON.parse(npm([...packArgs, ...published.flatMap((name) => ["-w", name])], workspace)) as Packed[];
  expect(packed.map((p) => p.name).sort()).toEqual(published);
  for (const pack of packed) {
    const shipped = pack.files.map((f) => f.path);
    expect(shipped.filter((path) => !path.startsWith("dist/")), `${pack.name} ships only dist`).toEqual(["package.json"]);
    expect(shipped.filter((path) => path.endsWith(".map")), `${pack.name} ships no source maps`).toEqual([]);
    expect(shipped, `${pack.name} ships its entry and its types`).toEqual(expect.arrayContaining(["dist/index.js", "dist/index.d.ts"]));
  }
  const { manifest, lock } = lockfile(project, packed, JSON.parse(readFileSync(join(workspace, "package-lock.json"), "utf8")));
  writeFileSync(join(project, "package.json"), JSON.stringify(manifest));
  writeFileSync(join(project, "package-lock.json"), JSON.stringify(lock));
  npm(["ci", "--offline", "--no-audit", "--no-fund", "--ignore-scripts"], project);
  copyFileSync(fileURLToPath(new URL("./support/installed.mjs", import.meta.url)), join(project, "installed.mjs"));
  writeFileSync(join(project, "schema.json"), JSON.stringify(schema));
}, 300_000);

afterAll(() => {
  if (project) rmSync(project, { recursive: true, force: true });
});

test("the packed packages install offline and sync against a real server from plain Node", () => {
  const server = notes();
  const output = execFileSync(process.execPath, ["installed.mjs"], {
    cwd: project,
    encoding: "utf8",
    env: {
      ...process.env,
      ENGINE_URL: server.url,
      ENGINE_SCHEMA: join(project, "schema.json"),
      ALICE_TOKEN: server.token("alice"),
      BOB_TOKEN: server.token("bob"),
    },
  });
  const seen = JSON.parse(output.trim().split("\n").at(-1)!) as {
    refused: string | null;
    pending: number;
    seenByBob: string | null;
    loaded: string[];
  };
  expect(seen.seenByBob).toBe("From the tarballs");
  expect(seen.pending).toBe(0);
  expect(seen.loaded).toEqual(["function", "function", "function"]);
  // Without a WebSocket, a client asked for realtime says what to pass instead of going without.
  expect(seen.refused).toMatch(/no global `WebSocket`.*pass `realtime: createWebSocketSource\(.*`realtime: false`/);
});
