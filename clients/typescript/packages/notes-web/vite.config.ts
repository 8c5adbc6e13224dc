/**
 * The web UI's bundle: `index.html`, `app.js`, `app.css`, the store's worker `app-worker.js` and
 * SQLite's `sqlite3.wasm` with fixed names (no hashes), so the
 * committed copy in `examples/notes/web` is compared byte for byte with a fresh build. The script
 * and the style also go out gzipped (`app.js.gz`, `app.css.gz`, no timestamp in them), which the
 * server sends to browsers that accept it. The output directory is `ENGINE_WEB_OUT`, or
 * `examples/notes/web`.
 */

import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

import { defineConfig, type Plugin } from "vite";

/** `name.gz` beside each script and style, compressed as well as gzip can. */
const gzipped: Plugin = {
  name: "engine-gzip",
  apply: "build",
  enforce: "post",
  generateBundle(_options, bundle) {
    for (const file of Object.values(bundle)) {
      if (!/\.(js|css|wasm)$/.test(file.fileName)) continue;
      const source = file.type === "chunk" ? file.code : file.source;
      this.emitFile({ type: "asset", fileName: `${file.fileName}.gz`, source: gzipSync(source, { level: 9 }) });
    }
  },
};

/**
 * SQLite's files for what the store does not use: the `opfs` VFS (it needs cross-origin isolation;
 * the store uses `opfs-sahpool`) and the Worker1 message API (the store has its own messages).
 */
const unused: Plugin = {
  name: "engine-sqlite-unused",
  apply: "build",
  generateBundle(_options, bundle) {
    for (const name of Object.keys(bundle)) {
      if (/sqlite3-(opfs-async-proxy|worker1)/.test(name)) delete bundle[name];
    }
  },
};

const out = process.env.ENGINE_WEB_OUT ?? fileURLToPath(new URL("../../../../examples/notes/web", import.meta.url));

export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  base: "./",
  logLevel: "warn",
  plugins: [unused, gzipped],
  // The packages' sources (the `paths` of tsconfig.json), not their built `dist`.
  resolve: { tsconfigPaths: true },
  // The same bundle whoever builds it: under vitest `NODE_ENV` is `test`, which would keep the
  // libraries' development checks in.
  mode: "production",
  define: { "process.env.NODE_ENV": JSON.stringify("production") },
  // SQLite's module finds `sqlite3.wasm` beside itself (`new URL(…, import.meta.url)`), which
  // the dependency optimizer of the development server would break.
  optimizeDeps: { exclude: ["@sqlite.org/sqlite-wasm"] },
  // The store's worker (`webSqlitePersistence`), with the WebAssembly it loads.
  worker: {
    format: "es",
    rollupOptions: {
      output: {
        entryFileNames: (chunk) => (chunk.name === "sqlite-worker" ? "app-worker.js" : "[name].js"),
        assetFileNames: "[name][extname]",
      },
    },
  },
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
