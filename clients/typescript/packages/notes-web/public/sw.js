// The notes web app's service worker: the page, its script and its style from the cache at
// once, revalidated from the network in the background, so that the app opens at once offline
// and with a server that accepts connections but never answers (asking the network first would
// leave the page blank until the browser gave up). With nothing cached yet, the network answers.
// The store's worker and SQLite's WebAssembly are cached too: a reload offline opens the store.
// Rows and queued writes live in the store (SQLite on the origin-private file system, or
// IndexedDB), not here; the sync routes are never cached.
const CACHE = "engine-notes-3";
const ASSETS = ["./", "./app.js", "./app.css", "./app-worker.js", "./sqlite3.wasm"];

self.addEventListener("install", (event) => {
  event.waitUntil(
    caches
      .open(CACHE)
      .then((cache) => cache.addAll(ASSETS))
      .then(() => self.skipWaiting()),
  );
});

self.addEventListener("activate", (event) => {
  event.waitUntil(
    caches
      .keys()
      .then((names) => Promise.all(names.filter((name) => name !== CACHE).map((name) => caches.delete(name))))
      .then(() => self.clients.claim()),
  );
});

self.addEventListener("fetch", (event) => {
  const url = new URL(event.request.url);
  const scope = new URL(self.registration.scope);
  const asset = ASSETS.map((path) => new URL(path, scope).pathname);
  if (event.request.method !== "GET" || url.origin !== scope.origin || !asset.includes(url.pathname)) return;
  const fresh = fetch(event.request).then((response) => {
    if (response.ok) {
      const copy = response.clone();
      void caches.open(CACHE).then((cache) => cache.put(url.pathname, copy));
    }
    return response;
  });
  // The revalidation must not end with the worker: the next load gets what it brought.
  event.waitUntil(fresh.then(() => undefined, () => undefined));
  event.respondWith(
    caches.match(url.pathname).then((cached) => cached ?? fresh.catch(() => Response.error())),
  );
});
