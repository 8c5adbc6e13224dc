/**
 * The web UI's bundle: `index.html`, `app.js` and `app.css` with fixed names (no hashes), so the
 * committed copy in `examples/notes/web` is compared byte for byte with a fresh build. The output
 * directory is `ENGINE_WEB_OUT`, or `examples/notes/web`.
 */

import { fileURLToPath } from "node:url";

import { defineConfig } from "vite";

const out = process.env.ENGINE_WEB_OUT ?? fileURLToPath(new URL("../../../../examples/notes/web", import.meta.url));

export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  base: "./",
  logLevel: "warn",
  // The same bundle whoever builds it: under vitest `NODE_ENV` is `test`, which would keep the
  // libraries' development checks in.
  mode: "production",
  define: { "process.env.NODE_ENV": JSON.stringify("production") },
  build: {
    outDir: out,
    emptyOutDir: true,
    target: "es2022",
    modulePreload: false,
    reportCompressedSize: false,
    rollupOptions: {
      output: {
        entryFileNames: "app.js",
        chunkFileNames: "app-[name].js",
        assetFileNames: "app[extname]",
      },
    },
  },
});
