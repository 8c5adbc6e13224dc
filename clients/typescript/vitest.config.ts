import { defineConfig } from "vitest/config";

export default defineConfig({
  // The packages' sources (the `paths` of tsconfig.json), not their built `dist`.
  resolve: { tsconfigPaths: true },
  test: {
    include: ["packages/*/test/**/*.test.ts"],
    // Builds the notes server once; each test file starts its own processes.
    globalSetup: ["packages/notes/test/support/global-setup.ts"],
    // Node 20 has a WHATWG WebSocket behind this flag (later versions have it by default).
    execArgv: ["--experimental-websocket"],
    testTimeout: 60_000,
    // A poll waits for what another process or the browser does: 1 s (the default), and 5 s too,
    // are timing bounds that a busy machine (two test files, their servers and browsers on two
    // cores) misses. The bound is only reached when the awaited value never comes.
    expect: { poll: { timeout: 10_000 } },
    hookTimeout: 300_000,
    // Two cores: the server processes need one.
    maxWorkers: 2,
  },
});
