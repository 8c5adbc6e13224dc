import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["packages/*/test/**/*.test.ts"],
    // Builds the notes server once; each test file starts its own processes.
    globalSetup: ["packages/notes/test/support/global-setup.ts"],
    // Node 20 has a WHATWG WebSocket behind this flag (later versions have it by default).
    execArgv: ["--experimental-websocket"],
    testTimeout: 60_000,
    hookTimeout: 300_000,
    // Two cores: the server processes need one.
    maxWorkers: 2,
  },
});
