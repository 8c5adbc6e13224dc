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
    // A poll waits for what another process or the browser does: 1 s (the default) is a timing
    // bound that a busy machine (two test files, their servers and browsers on two cores) misses.
    expect: { poll: { timeout: 5_000 } },
    hookTimeout: 300_000,
    // Two cores: the server processes need one.
    maxWorkers: 2,
  },
});
